package ratelimit

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

// The rate-limit algorithms are checked against naive reference models that
// keep a full log of every recorded event and recompute everything from it,
// on a manual clock, over random arrivals, costs, limits and windows.

type event struct{ t, cost int64 }

// slideModel is RL.SLIDE from first principles: every recorded event kept.
type slideModel struct {
	log []event
}

func (m *slideModel) sum(t, w int64) int64 {
	var s int64
	for _, e := range m.log {
		if e.t > t-w {
			s += e.cost
		}
	}
	return s
}

func (m *slideModel) fits(t int64, rules []Rule, cost int64) bool {
	for _, r := range rules {
		if m.sum(t, r.Window)+cost > r.Limit {
			return false
		}
	}
	return true
}

// decide mirrors the contract: allowed iff every rule fits; the reply's rule
// is the one with the least remaining when allowed, the one that makes the
// request wait longest when denied.
func (m *slideModel) decide(now int64, rules []Rule, o SlideOptions) Decision {
	allowed := m.fits(now, rules, o.Cost)
	after := *m
	after.log = append([]event(nil), m.log...)
	if allowed || (o.Penalize && !o.Peek) {
		after.log = append(after.log, event{now, o.Cost})
	}
	var d Decision
	d.Allowed = allowed
	reset := func(w int64) int64 {
		newest := int64(-1 << 62)
		for _, e := range after.log {
			if e.t > now-w && e.t > newest {
				newest = e.t
			}
		}
		if newest == -1<<62 {
			return 0
		}
		return newest + w - now
	}
	if allowed {
		best := -1
		for i, r := range rules {
			left := r.Limit - after.sum(now, r.Window)
			if best < 0 || left < d.Remaining {
				best, d.Remaining = i, left
			}
		}
		d.Limit, d.RetryAfter, d.ResetAfter = rules[best].Limit, -1, reset(rules[best].Window)
		return d
	}
	// When may the same request come back? Sums only fall, at the moments
	// events leave windows: try those moments in order.
	best, bestAt := -1, int64(0)
	for i, r := range rules {
		at := now
		if after.sum(now, r.Window)+o.Cost > r.Limit {
			var cands []int64
			for _, e := range after.log {
				if e.t+r.Window > now {
					cands = append(cands, e.t+r.Window)
				}
			}
			sort.Slice(cands, func(a, b int) bool { return cands[a] < cands[b] })
			for _, c := range cands {
				if after.sum(c, r.Window)+o.Cost <= r.Limit {
					at = c
					break
				}
			}
		}
		if best < 0 || at > bestAt {
			best, bestAt = i, at
		}
	}
	r := rules[best]
	d.Limit = r.Limit
	d.Remaining = max(r.Limit-after.sum(now, r.Window), 0)
	d.RetryAfter = bestAt - now
	d.ResetAfter = reset(r.Window)
	return d
}

func randomRules(rng *rand.Rand) []Rule {
	windows := []int64{1, 7, 50, 100, 250, 1000, 3000}
	n := 1 + rng.IntN(3)
	var rules []Rule
	for i := 0; i < n; i++ {
		rules = append(rules, Rule{Limit: 1 + rng.Int64N(12), Window: windows[rng.IntN(len(windows))]})
	}
	return rules
}

func minLimit(rules []Rule) int64 {
	m := rules[0].Limit
	for _, r := range rules {
		m = min(m, r.Limit)
	}
	return m
}

func TestSlideAgainstModel(t *testing.T) {
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		rules := randomRules(rng)
		penalize := rng.IntN(3) == 0
		var m slideModel
		var st []byte
		now := int64(1_000_000)
		for step := 0; step < 400; step++ {
			switch rng.IntN(4) {
			case 0:
			case 1:
				now += rng.Int64N(5)
			default:
				now += rng.Int64N(400)
			}
			o := SlideOptions{Cost: 1 + rng.Int64N(minLimit(rules)), Peek: rng.IntN(8) == 0, Penalize: penalize}
			want := m.decide(now, rules, o)
			got, next, exp, write := DecideSlide(st, rules, now, o, nil)
			if got != want {
				t.Fatalf("seed %d step %d now %d rules %v opts %+v:\n got %+v\nwant %+v", seed, step, now, rules, o, got, want)
			}
			if !o.Peek && (want.Allowed || penalize) {
				m.log = append(m.log, event{now, o.Cost})
				if !write {
					t.Fatalf("seed %d step %d: recorded request wrote nothing", seed, step)
				}
				st = append([]byte(nil), next...)
				// The key must outlive every entry that still matters.
				entries := slideEntries(st)
				if int64(len(entries)) > maxLimitOf(rules) {
					t.Fatalf("seed %d step %d: %d entries for largest limit %d", seed, step, len(entries), maxLimitOf(rules))
				}
				if exp < now {
					t.Fatalf("key would expire at %d, now %d", exp, now)
				}
			} else if write {
				t.Fatalf("seed %d step %d: a request that records nothing wrote state", seed, step)
			}
			checkRetryExact(t, seed, step, now, want, func(at int64) bool { return m.fits(at, rules, o.Cost) })
		}
	}
}

func maxLimitOf(rules []Rule) int64 {
	var m int64
	for _, r := range rules {
		m = max(m, r.Limit)
	}
	return m
}

// checkRetryExact: a request retried exactly RetryAfter later (no other
// traffic) is allowed, one retried 1 ms earlier is not.
func checkRetryExact(t *testing.T, seed uint64, step int, now int64, d Decision, allowedAt func(int64) bool) {
	t.Helper()
	if d.Allowed {
		return
	}
	if !allowedAt(now + d.RetryAfter) {
		t.Fatalf("seed %d step %d: not allowed at now+retry (%d)", seed, step, d.RetryAfter)
	}
	if d.RetryAfter > 0 && allowedAt(now+d.RetryAfter-1) {
		t.Fatalf("seed %d step %d: already allowed 1 ms before now+retry (%d)", seed, step, d.RetryAfter)
	}
}

// fixedModel is RL.FIXED from first principles: a log of recorded events;
// EPOCH windows are found by alignment, FIRST windows by replaying the log.
type fixedModel struct {
	log []event
}

func (m *fixedModel) window(now int64, r Rule, o FixedOptions) (start, end, count int64) {
	if !o.First {
		start, end = windowBounds(now, r.Window, o.Zone)
		for _, e := range m.log {
			if s, _ := windowBounds(e.t, r.Window, o.Zone); s == start {
				count += e.cost
			}
		}
		return start, end, count
	}
	open := false
	var ws int64
	for _, e := range m.log {
		if !open || e.t >= ws+r.Window {
			ws, open = e.t, true
		}
	}
	if !open || now >= ws+r.Window {
		return now, now + r.Window, 0
	}
	for _, e := range m.log {
		if e.t >= ws {
			count += e.cost
		}
	}
	return ws, ws + r.Window, count
}

func (m *fixedModel) decide(now int64, rules []Rule, o FixedOptions) Decision {
	var d Decision
	d.Allowed = true
	type w struct{ start, end, count int64 }
	ws := make([]w, len(rules))
	for i, r := range rules {
		s, e, c := m.window(now, r, o)
		ws[i] = w{s, e, c}
		if c+o.Cost > r.Limit {
			d.Allowed = false
		}
	}
	best := -1
	if d.Allowed {
		for i, r := range rules {
			left := r.Limit - ws[i].count - o.Cost
			if best < 0 || left < d.Remaining {
				best, d.Remaining = i, left
			}
		}
		d.Limit, d.RetryAfter, d.ResetAfter = rules[best].Limit, -1, ws[best].end-now
		return d
	}
	for i, r := range rules {
		if ws[i].count+o.Cost > r.Limit && (best < 0 || ws[i].end-now > d.RetryAfter) {
			best, d.RetryAfter = i, ws[i].end-now
		}
	}
	d.Limit = rules[best].Limit
	d.Remaining = max(rules[best].Limit-ws[best].count, 0)
	if ws[best].count > 0 {
		d.ResetAfter = ws[best].end - now
	}
	return d
}

func (m *fixedModel) fits(at int64, rules []Rule, o FixedOptions) bool {
	for _, r := range rules {
		if _, _, c := m.window(at, r, o); c+o.Cost > r.Limit {
			return false
		}
	}
	return true
}

func TestFixedAgainstModel(t *testing.T) {
	ny, _ := ParseZone([]byte("America/New_York"))
	plus8, _ := ParseZone([]byte("+08:00"))
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 11))
		rules := randomRules(rng)
		o := FixedOptions{First: rng.IntN(3) == 0}
		now := int64(1_700_000_000_000) + rng.Int64N(1e9)
		if !o.First {
			switch rng.IntN(3) {
			case 1:
				o.Zone = plus8
			case 2:
				// New York windows that divide a day, around a DST change.
				o.Zone = ny
				now = time.Date(2026, 11, 1, 5, 59, 0, 0, time.UTC).UnixMilli()
				for i := range rules {
					rules[i].Window = []int64{1000, 60_000, 3_600_000, dayMs}[rng.IntN(4)]
				}
			}
		}
		var m fixedModel
		var st []byte
		var sc FixedScratch
		for step := 0; step < 300; step++ {
			now += []int64{0, 1, rng.Int64N(300), rng.Int64N(3000), rng.Int64N(600_000)}[rng.IntN(5)]
			o.Cost = 1 + rng.Int64N(minLimit(rules))
			o.Peek = rng.IntN(8) == 0
			want := m.decide(now, rules, o)
			got, next, _, write := DecideFixed(st, rules, now, o, &sc, nil)
			if got != want {
				t.Fatalf("seed %d step %d now %d rules %v opts %+v:\n got %+v\nwant %+v", seed, step, now, rules, o, got, want)
			}
			if want.Allowed && !o.Peek {
				m.log = append(m.log, event{now, o.Cost})
				if !write {
					t.Fatal("allowed request wrote nothing")
				}
				st = append([]byte(nil), next...)
			} else if write {
				t.Fatal("request that records nothing wrote state")
			}
			checkRetryExact(t, seed, step, now, want, func(at int64) bool { return m.fits(at, rules, o) })
		}
	}
}

// TestFixedDayWindowsFollowLocalMidnight: a daily quota in a zone with DST
// resets at local midnight on the days the clocks change.
func TestFixedDayWindowsFollowLocalMidnight(t *testing.T) {
	ny, err := ParseZone([]byte("America/New_York"))
	if err != nil {
		t.Fatal(err)
	}
	loc, _ := time.LoadLocation("America/New_York")
	for _, day := range []time.Time{
		time.Date(2026, 3, 8, 0, 0, 0, 0, loc),  // 23 hours
		time.Date(2026, 11, 1, 0, 0, 0, 0, loc), // 25 hours
		time.Date(2026, 7, 4, 0, 0, 0, 0, loc),
	} {
		next := time.Date(day.Year(), day.Month(), day.Day()+1, 0, 0, 0, 0, loc)
		for _, probe := range []time.Time{day, day.Add(90 * time.Minute), next.Add(-time.Millisecond)} {
			s, e := windowBounds(probe.UnixMilli(), dayMs, ny)
			if s != day.UnixMilli() || e != next.UnixMilli() {
				t.Errorf("%v: window [%v, %v), want [%v, %v)", probe, time.UnixMilli(s).In(loc), time.UnixMilli(e).In(loc), day, next)
			}
		}
	}
	sh, _ := ParseZone([]byte("Asia/Shanghai"))
	now := time.Date(2026, 11, 21, 23, 30, 0, 0, time.FixedZone("CST", 8*3600)).UnixMilli()
	s, e := windowBounds(now, dayMs, sh)
	if time.UnixMilli(s).UTC().Hour() != 16 || e-s != dayMs {
		t.Errorf("Shanghai day window [%v, %v)", time.UnixMilli(s).UTC(), time.UnixMilli(e).UTC())
	}
}

// TestFixedHourWindowsAcrossDST: shorter windows align to the local wall
// clock, never last longer than the window and never start twice.
func TestFixedHourWindowsAcrossDST(t *testing.T) {
	for _, name := range []string{"America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kolkata"} {
		z, err := ParseZone([]byte(name))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range []int64{3_600_000, 1_800_000, 7_200_000} {
			var prevStart, prevEnd int64
			from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
			to := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC).UnixMilli()
			for now := from; now < to; now += 60_000 {
				s, e := windowBounds(now, w, z)
				if !(s <= now && now < e) || e-s > w || e <= s {
					t.Fatalf("%s w=%d now=%d: window [%d, %d)", name, w, now, s, e)
				}
				if s != prevStart {
					if prevEnd != 0 && s != prevEnd {
						t.Fatalf("%s w=%d: window starts at %d, previous ended at %d", name, w, s, prevEnd)
					}
					if s2, _ := windowBounds(s, w, z); s2 != s {
						t.Fatalf("%s: the window starting at %d is not the window at %d", name, s, s)
					}
				}
				prevStart, prevEnd = s, e
			}
		}
	}
}

func TestParseZone(t *testing.T) {
	for _, ok := range []string{"UTC", "Z", "+08:00", "-05:30", "+0800", "+08", "Asia/Shanghai", "America/New_York"} {
		if _, err := ParseZone([]byte(ok)); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Local", "Mars/Base", "+25:00", "+08:60", "8", "+8:00:00"} {
		if _, err := ParseZone([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	z, _ := ParseZone([]byte("Europe/Berlin"))
	if z.CheckWindow(36*3600*1000) == nil || z.CheckWindow(3*dayMs) != nil || z.CheckWindow(15*60*1000) != nil {
		t.Error("CheckWindow")
	}
}

// TestGCRAReferenceVectors replays the documented behaviour of redis-cell:
// max_burst 4, one token per second, at the listed moments.
func TestGCRAReferenceVectors(t *testing.T) {
	start := int64(1_700_000_000_000)
	g := GCRA{MaxBurst: 4, Count: 1, Period: 1}
	cases := []struct {
		at, quantity, remaining, resetMs, retryMs int64
		limited                                   bool
	}{
		{0, 6, 5, 0, -1000, true}, // more than the burst can ever hold
		{0, 1, 4, 1000, -1000, false},
		{0, 1, 3, 2000, -1000, false},
		{0, 1, 2, 3000, -1000, false},
		{0, 1, 1, 4000, -1000, false},
		{0, 1, 0, 5000, -1000, false},
		{0, 1, 0, 5000, 1000, true},
		{3000, 1, 2, 3000, -1000, false},
		{3100, 1, 1, 3900, -1000, false},
		{4000, 1, 1, 4000, -1000, false},
		{8000, 1, 4, 1000, -1000, false},
		{9500, 1, 4, 1000, -1000, false},
		{9500, 0, 4, 1000, -1000, false}, // quantity 0 peeks
		{9500, 2, 2, 3000, -1000, false},
		{9500, 5, 2, 3000, 3000, true},
	}
	var st []byte
	for i, c := range cases {
		g.Quantity = c.quantity
		res, next, _, write, err := DecideGCRA(st, g, start+c.at, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Limited != c.limited || res.Limit != 5 || res.Remaining != c.remaining ||
			res.ResetNs != c.resetMs*1e6 || res.RetryNs != c.retryMs*1e6 {
			t.Fatalf("case %d: got %+v", i, res)
		}
		if write {
			st = append([]byte(nil), next...)
		}
	}
	// The two CL.THROTTLE examples of docs/commands.md, in whole seconds.
	res, _, _, _, _ := DecideGCRA(nil, GCRA{MaxBurst: 15, Count: 30, Period: 60, Quantity: 1}, start, nil)
	if got := fmt.Sprint(b2i(res.Limited), res.Limit, res.Remaining, res.RetryAfter, res.ResetAfter); got != "0 16 15 -1 2" {
		t.Errorf("CL.THROTTLE user123 15 30 60 = %s", got)
	}
	res, _, _, _, _ = DecideGCRA(nil, GCRA{MaxBurst: 4, Count: 1, Period: 1, Quantity: 6}, start, nil)
	if got := fmt.Sprint(b2i(res.Limited), res.Limit, res.Remaining, res.RetryAfter, res.ResetAfter); got != "1 5 5 -1 0" {
		t.Errorf("quantity 6 over burst 4 = %s", got)
	}
	if _, _, _, _, err := DecideGCRA(nil, GCRA{MaxBurst: 1, Count: 0, Period: 1, Quantity: 1}, start, nil); err != ErrZeroRate {
		t.Errorf("zero count: %v", err)
	}
	if _, _, _, _, err := DecideGCRA(nil, GCRA{MaxBurst: 1, Count: 1, Period: 0, Quantity: 1}, start, nil); err != ErrZeroRate {
		t.Errorf("zero period: %v", err)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestGCRAAgainstModel compares CL.THROTTLE with a leaky bucket kept as an
// amount of outstanding work in ns, drained by the clock: a request fits
// when the work left plus its own fits the burst tolerance. It also checks
// the reported wait: redis-cell rounds it up to whole seconds only when it
// has a millisecond part, so a retry after it may be up to 1 ms early; one
// second earlier is always too early.
func TestGCRAAgainstModel(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 9))
		g := GCRA{MaxBurst: rng.Int64N(10), Count: 1 + rng.Int64N(20), Period: 1 + rng.Int64N(60)}
		emission := int64(float64(g.Period*1e9) / float64(g.Count))
		dvt := emission * (g.MaxBurst + 1)
		var level, last int64 // ns of work outstanding at time last (ns)
		var st []byte
		now := int64(1_800_000_000_000)
		for step := 0; step < 300; step++ {
			now += []int64{0, 1, rng.Int64N(500), rng.Int64N(20000)}[rng.IntN(4)]
			g.Quantity = rng.Int64N(g.MaxBurst + 3)
			cur := max(level-(now*1e6-last), 0)
			inc := emission * g.Quantity
			allowed := cur+inc <= dvt
			res, next, _, write, err := DecideGCRA(st, g, now, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Limited == allowed {
				t.Fatalf("seed %d step %d: limited=%v, model allows=%v (level %d inc %d dvt %d)", seed, step, res.Limited, allowed, cur, inc, dvt)
			}
			if allowed && g.Quantity > 0 {
				level, last = cur+inc, now*1e6
			}
			if write {
				st = append([]byte(nil), next...)
			}
			if res.Limited && res.RetryAfter > 0 {
				fits := func(ms int64) bool { return max(level-(ms*1e6-last), 0)+inc <= dvt }
				if !fits(now + res.RetryAfter*1000 + 1) {
					t.Fatalf("seed %d step %d: still limited %d s later (retry %d ns, level %d, inc %d, dvt %d, g %+v)", seed, step, res.RetryAfter, res.RetryNs, cur, inc, dvt, g)
				}
				if res.RetryAfter > 1 && fits(now+(res.RetryAfter-1)*1000) {
					t.Fatalf("seed %d step %d: allowed already %d s later", seed, step, res.RetryAfter-1)
				}
			}
		}
	}
}
