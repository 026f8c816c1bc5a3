package ratelimit

import (
	"math/rand/v2"
	"sort"
	"testing"
)

// BAN against naive models on a manual clock: the models of
// ratelimit_test.go (every recorded event kept) plus the ban's end. The
// contract they restate: a rule's denial while no ban is in force (and not
// a PEEK) starts a ban of o.Ban ms; while banned every request is denied,
// nothing is counted (PENALIZE still records on RL.SLIDE), the fields are
// the rules' state as it is, and retry_after is the ban's end or later if a
// rule needs longer. Each reply's retry time is also checked exactly: the
// same request is allowed at now+retry and not 1 ms before.

// earliestFit is the first time >= now at which cost fits rule r over log,
// with no other traffic.
func earliestFit(log []event, now int64, r Rule, cost int64) int64 {
	m := slideModel{log: log}
	if m.sum(now, r.Window)+cost <= r.Limit {
		return now
	}
	var cands []int64
	for _, e := range log {
		if e.t+r.Window > now {
			cands = append(cands, e.t+r.Window)
		}
	}
	sort.Slice(cands, func(a, b int) bool { return cands[a] < cands[b] })
	for _, c := range cands {
		if m.sum(c, r.Window)+cost <= r.Limit {
			return c
		}
	}
	panic("never fits")
}

func TestFixedBanAgainstModel(t *testing.T) {
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 17))
		rules := randomRules(rng)
		o := FixedOptions{First: rng.IntN(3) == 0, Ban: []int64{1, 40, 500, 2000, 7000}[rng.IntN(5)]}
		now := int64(1_700_000_000_000) + rng.Int64N(1e9)
		var m fixedModel
		var banEnd int64
		var st []byte
		var sc FixedScratch
		for step := 0; step < 300; step++ {
			now += []int64{0, 1, rng.Int64N(300), rng.Int64N(3000)}[rng.IntN(4)]
			o.Cost = 1 + rng.Int64N(minLimit(rules))
			o.Peek = rng.IntN(8) == 0
			// The ban option may change or go between calls: a recorded
			// ban holds all the same.
			ban := o.Ban
			if rng.IntN(10) == 0 {
				o.Ban = 0
			}

			var want Decision
			banned := now < banEnd
			if !banned {
				want = m.decide(now, rules, o)
				if !want.Allowed && o.Ban > 0 && !o.Peek {
					banEnd = now + o.Ban
					want.RetryAfter = max(want.RetryAfter, o.Ban)
					want.BanStarted = true
				}
			} else if m.fits(now, rules, o) {
				// The rules' state as it is: the least remaining rule.
				best := -1
				for i, r := range rules {
					_, end, c := m.window(now, r, o)
					if left := r.Limit - c; best < 0 || left < want.Remaining {
						best, want.Remaining, want.ResetAfter = i, left, 0
						if c > 0 {
							want.ResetAfter = end - now
						}
					}
				}
				want.Limit = rules[best].Limit
				want.RetryAfter = banEnd - now
			} else {
				want = m.decide(now, rules, o)
				want.RetryAfter = max(want.RetryAfter, banEnd-now)
			}

			got, next, exp, write := DecideFixed(st, rules, now, o, &sc, nil)
			if got != want {
				t.Fatalf("seed %d step %d now %d ban end %d rules %v opts %+v:\n got %+v\nwant %+v", seed, step, now, banEnd, rules, o, got, want)
			}
			if want.Allowed && !o.Peek {
				m.log = append(m.log, event{now, o.Cost})
			}
			if write {
				st = append([]byte(nil), next...)
				if e := BanEnd(st); e > now && e != banEnd || e <= now && banEnd > now {
					t.Fatalf("seed %d step %d: state holds ban end %d, model %d", seed, step, e, banEnd)
				}
				if banEnd > now && exp < banEnd-1 {
					t.Fatalf("seed %d step %d: key expires at %d before the ban's end %d", seed, step, exp, banEnd)
				}
			} else if want.Allowed && !o.Peek || now == banEnd-o.Ban && !banned && o.Ban > 0 && !o.Peek {
				t.Fatalf("seed %d step %d: an allowed request or a new ban wrote nothing", seed, step)
			}
			checkRetryExact(t, seed, step, now, want, func(at int64) bool { return at >= banEnd && m.fits(at, rules, o) })
			o.Ban = ban
		}
	}
}

func TestSlideBanAgainstModel(t *testing.T) {
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 19))
		rules := randomRules(rng)
		o := SlideOptions{Penalize: rng.IntN(3) == 0, Ban: []int64{1, 40, 500, 2000, 7000}[rng.IntN(5)]}
		var m slideModel
		var banEnd int64
		var st []byte
		now := int64(1_000_000)
		for step := 0; step < 400; step++ {
			now += []int64{0, 1, rng.Int64N(5), rng.Int64N(400), rng.Int64N(3000)}[rng.IntN(5)]
			o.Cost = 1 + rng.Int64N(minLimit(rules))
			o.Peek = rng.IntN(8) == 0
			ban := o.Ban
			if rng.IntN(10) == 0 {
				o.Ban = 0
			}

			var want Decision
			banned := now < banEnd
			record := o.Penalize && !o.Peek
			switch {
			case !banned:
				want = m.decide(now, rules, o)
				record = want.Allowed && !o.Peek || record
				if !want.Allowed && o.Ban > 0 && !o.Peek {
					banEnd = now + o.Ban
					want.RetryAfter = max(want.RetryAfter, o.Ban)
					want.BanStarted = true
				}
			case !m.fits(now, rules, o.Cost):
				want = m.decide(now, rules, o)
				want.RetryAfter = max(want.RetryAfter, banEnd-now)
			default:
				// The rules would allow it; the ban denies it, and it is
				// recorded only with PENALIZE.
				after := slideModel{log: append([]event(nil), m.log...)}
				if record {
					after.log = append(after.log, event{now, o.Cost})
				}
				best, at := -1, banEnd
				for i, r := range rules {
					if left := r.Limit - after.sum(now, r.Window); best < 0 || left < want.Remaining {
						best, want.Remaining = i, left
					}
					at = max(at, earliestFit(after.log, now, r, o.Cost))
				}
				want.Limit = rules[best].Limit
				want.RetryAfter = at - now
				for _, e := range after.log {
					if e.t > now-rules[best].Window {
						want.ResetAfter = max(want.ResetAfter, e.t+rules[best].Window-now)
					}
				}
			}

			got, next, exp, write := DecideSlide(st, rules, now, o, nil)
			if got != want {
				t.Fatalf("seed %d step %d now %d ban end %d rules %v opts %+v:\n got %+v\nwant %+v", seed, step, now, banEnd, rules, o, got, want)
			}
			if record {
				m.log = append(m.log, event{now, o.Cost})
			}
			newBan := !banned && banEnd > now
			if record || newBan {
				if !write {
					t.Fatalf("seed %d step %d: a recorded request or a new ban wrote nothing", seed, step)
				}
				st = append([]byte(nil), next...)
				if e := BanEnd(st); e > now && e != banEnd || e <= now && banEnd > now {
					t.Fatalf("seed %d step %d: state holds ban end %d, model %d", seed, step, e, banEnd)
				}
				if int64(len(slideEntries(st))) > maxLimitOf(rules) {
					t.Fatalf("seed %d step %d: %d entries for largest limit %d", seed, step, len(slideEntries(st)), maxLimitOf(rules))
				}
				if banEnd > now && exp < banEnd-1 || exp < now {
					t.Fatalf("seed %d step %d: key expires at %d, ban end %d, now %d", seed, step, exp, banEnd, now)
				}
			} else if write {
				t.Fatalf("seed %d step %d: a request that records nothing wrote state", seed, step)
			}
			checkRetryExact(t, seed, step, now, want, func(at int64) bool { return at >= banEnd && m.fits(at, rules, o.Cost) })
			o.Ban = ban
		}
	}
}

// TestLimitStatesWithoutBanStillLoad: a state written before BAN existed
// (no flag) reads as it did, and a ban that is over is written away.
func TestLimitStatesWithoutBanStillLoad(t *testing.T) {
	rules := []Rule{{Limit: 2, Window: 1000}}
	var fsc FixedScratch
	_, old, _, _ := DecideFixed(nil, rules, 10_000, FixedOptions{Cost: 1}, &fsc, nil)
	if old[0] != KindFixed {
		t.Fatalf("unbanned state kind byte %x", old[0])
	}
	old = append([]byte(nil), old...)
	d, st, exp, _ := DecideFixed(old, rules, 10_001, FixedOptions{Cost: 2, Ban: 5000}, &fsc, nil)
	if d.Allowed || d.RetryAfter != 5000 || st[0] != KindFixed|banned || BanEnd(st) != 15_001 || exp != 15_000 {
		t.Fatalf("ban start: %+v state %x exp %d", d, st, exp)
	}
	st = append([]byte(nil), st...)
	if e := parseFixed(st, nil); len(e) != 1 || e[0].count != 1 {
		t.Fatalf("banned state's counts: %+v", e)
	}
	_, st2, _, _ := DecideFixed(st, rules, 15_001, FixedOptions{Cost: 1}, &fsc, nil)
	if st2[0] != KindFixed {
		t.Fatalf("after the ban the state keeps its flag: %x", st2)
	}
}
