package ratelimit

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// The rate-limit decisions as datadriven files (testdata/decide_fixed,
// decide_slide, decide_gcra, login), in Pebble's style: each case names an
// input state, a request and a time, and shows the reply, the state left
// behind in a readable form and the key's TTL. A file is read top to
// bottom; the state each case leaves is the next one's input unless a
// "state" directive sets it. Run with -rewrite to regenerate the expected
// output after a deliberate change, and read the diff.
//
// Directives:
//
//	state [now=T]            set the input state from the lines below it,
//	                         or "none"; prints it back as read
//	fixed now=T rules=(L/W, ...) [cost=N] [peek] [align=first] [tz=Z]
//	slide now=T rules=(L/W, ...) [cost=N] [peek] [penalize]
//	throttle now=T burst=B count=C period=P [quantity=Q]
//	login now=T limit=L window=W [keep=K]
//
// T is a UTC time (2026-01-01T00:00:00Z, milliseconds allowed) or +D / -D
// from the previous case's time; W and D are durations with a unit (ms, s,
// m, h, d). Each case runs the pure function: fixed DecideFixed, slide
// DecideSlide, throttle DecideGCRA, login LoginHistory over a list of
// entries kept here as the engine keeps the key's list (newest first,
// trimmed and expiring as the decision says). The engine's tests check that
// its Shard operations store what these functions return.

func TestDecideFixedData(t *testing.T) { runLimitData(t, "testdata/decide_fixed", KindFixed) }
func TestDecideSlideData(t *testing.T) { runLimitData(t, "testdata/decide_slide", KindSlide) }
func TestDecideGCRAData(t *testing.T)  { runLimitData(t, "testdata/decide_gcra", KindGCRA) }
func TestLoginData(t *testing.T)       { runLoginData(t, "testdata/login") }

// limitData is the state a file carries from case to case.
type limitData struct {
	kind  byte
	now   int64
	state []byte // the pure functions' current state; nil for none
	fixed FixedScratch
}

func runLimitData(t *testing.T, path string, kind byte) {
	d := &limitData{kind: kind}
	datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
		if td.HasArg("now") || td.Cmd != "state" {
			d.now = ddTime(t, td, d.now)
		}
		switch td.Cmd {
		case "state":
			d.state = d.parseState(t, td.Input)
			return d.formatState(d.state)
		case "fixed", "slide", "throttle":
			if want := map[string]byte{"fixed": KindFixed, "slide": KindSlide, "throttle": KindGCRA}[td.Cmd]; want != kind {
				t.Fatalf("%s in a file of kind %d", td.Cmd, kind)
			}
			return d.decide(t, td)
		}
		t.Fatalf("unknown directive %q", td.Cmd)
		return ""
	})
}

// decide runs one case through the pure function.
func (d *limitData) decide(t *testing.T, td *datadriven.TestData) string {
	var (
		reply       [5]int64
		state       []byte
		exp         int64
		write       bool
		extra       string
		pureE       error
		decisionRow = func(x Decision) [5]int64 {
			return [5]int64{int64(b2i(x.Allowed)), x.Limit, x.Remaining, x.RetryAfter, x.ResetAfter}
		}
	)
	switch td.Cmd {
	case "fixed":
		rules := ddRules(t, td)
		o := FixedOptions{Cost: 1, Peek: td.HasArg("peek")}
		td.MaybeScanArgs(t, "cost", &o.Cost)
		if td.HasArg("align") {
			switch v := argVal(t, td, "align"); v {
			case "first":
				o.First = true
			case "epoch":
			default:
				t.Fatalf("align=%s", v)
			}
		}
		if td.HasArg("tz") {
			z, err := ParseZone([]byte(argVal(t, td, "tz")))
			if err != nil {
				t.Fatal(err)
			}
			o.Zone = z
		}
		var x Decision
		x, state, exp, write = DecideFixed(d.state, rules, d.now, o, &d.fixed, nil)
		reply = decisionRow(x)
	case "slide":
		rules := ddRules(t, td)
		o := SlideOptions{Cost: 1, Peek: td.HasArg("peek"), Penalize: td.HasArg("penalize")}
		td.MaybeScanArgs(t, "cost", &o.Cost)
		var x Decision
		x, state, exp, write = DecideSlide(d.state, rules, d.now, o, nil)
		reply = decisionRow(x)
	case "throttle":
		g := GCRA{Quantity: 1}
		td.ScanArgs(t, "burst", &g.MaxBurst)
		td.ScanArgs(t, "count", &g.Count)
		td.ScanArgs(t, "period", &g.Period)
		td.MaybeScanArgs(t, "quantity", &g.Quantity)
		var x ThrottleResult
		x, state, exp, write, pureE = DecideGCRA(d.state, g, d.now, nil)
		row := func(x ThrottleResult) [5]int64 {
			return [5]int64{int64(b2i(x.Limited)), x.Limit, x.Remaining, x.RetryAfter, x.ResetAfter}
		}
		reply = row(x)
		extra = fmt.Sprintf("exact: retry_ns=%d reset_ns=%d\n", x.RetryNs, x.ResetNs)
	}

	if pureE != nil {
		return "error: " + pureE.Error() + "\n"
	}

	var b strings.Builder
	fmt.Fprintf(&b, "reply: %d %d %d %d %d\n", reply[0], reply[1], reply[2], reply[3], reply[4])
	b.WriteString(extra)
	if !write {
		b.WriteString("state: unchanged\n")
		return b.String()
	}
	d.state = append([]byte(nil), state...)
	b.WriteString("state:\n")
	for _, line := range strings.Split(strings.TrimSuffix(d.formatState(d.state), "\n"), "\n") {
		b.WriteString("  " + line + "\n")
	}
	fmt.Fprintf(&b, "pttl: %d\n", exp-d.now)
	return b.String()
}

// parseState reads a state written as formatState writes it.
func (d *limitData) parseState(t *testing.T, in string) []byte {
	in = strings.TrimSpace(in)
	if in == "none" {
		return nil
	}
	lines := strings.Split(in, "\n")
	switch d.kind {
	case KindFixed:
		st := binary.AppendUvarint([]byte{KindFixed}, uint64(len(lines)))
		for _, line := range lines {
			// 1m epoch start=2026-01-01T00:00:00Z count=2
			f := strings.Fields(line)
			if len(f) != 4 {
				t.Fatalf("fixed entry %q: want <window> epoch|first start=T count=N", line)
			}
			align := map[string]byte{"epoch": alignEpoch, "first": alignFirst}
			a, ok := align[f[1]]
			if !ok {
				t.Fatalf("fixed entry %q: alignment %q", line, f[1])
			}
			st = binary.AppendUvarint(st, uint64(parseDur(t, f[0])))
			st = append(st, a)
			st = binary.AppendVarint(st, parseTime(t, field(t, f[2], "start")))
			st = binary.AppendUvarint(st, uint64(mustInt(t, field(t, f[3], "count"))))
		}
		return st
	case KindSlide:
		var es []slideEntry
		for _, line := range lines {
			// 2026-01-01T00:00:00Z cost=1
			f := strings.Fields(line)
			if len(f) != 2 {
				t.Fatalf("slide entry %q: want T cost=N", line)
			}
			es = append(es, slideEntry{T: parseTime(t, f[0]), Cost: mustInt(t, field(t, f[1], "cost"))})
		}
		return encodeSlideEntries(es)
	case KindGCRA:
		// tat=2026-01-01T00:00:01.5Z
		ts, err := time.Parse(time.RFC3339Nano, field(t, in, "tat"))
		if err != nil {
			t.Fatal(err)
		}
		return binary.AppendVarint([]byte{KindGCRA}, ts.UnixNano())
	}
	t.Fatalf("kind %d", d.kind)
	return nil
}

// formatState writes a state one entry a line, times in UTC.
func (d *limitData) formatState(st []byte) string {
	if st == nil {
		return "none\n"
	}
	var b strings.Builder
	switch d.kind {
	case KindFixed:
		for _, e := range parseFixed(st, nil) {
			align := map[byte]string{alignEpoch: "epoch", alignFirst: "first"}[e.align]
			fmt.Fprintf(&b, "%s %s start=%s count=%d\n", formatDur(e.window), align, formatTime(e.start), e.count)
		}
	case KindSlide:
		for _, e := range slideEntries(st) {
			fmt.Fprintf(&b, "%s cost=%d\n", formatTime(e.T), e.Cost)
		}
	case KindGCRA:
		r := varintReader{b: st[1:]}
		fmt.Fprintf(&b, "tat=%s\n", time.Unix(0, r.varint()).UTC().Format(time.RFC3339Nano))
	}
	if b.Len() == 0 {
		return "empty\n"
	}
	return b.String()
}

// slideEntry is one millisecond of a sliding-window log.
type slideEntry struct {
	T    int64 // ms
	Cost int64
}

// slideEntries decodes a whole state, oldest entry first.
func slideEntries(st []byte) []slideEntry {
	l := parseSlideLog(st)
	var out []slideEntry
	it := l.iter()
	for {
		t, c, ok := it.next()
		if !ok {
			return out
		}
		out = append(out, slideEntry{t, c})
	}
}

// encodeSlideEntries encodes a log, oldest entry first, in the compact
// layout that earlier versions wrote: the data files' logs start in it,
// so that reading it stays tested.
func encodeSlideEntries(es []slideEntry) []byte {
	if len(es) == 0 {
		return nil
	}
	var total int64
	for _, e := range es {
		total += e.Cost
	}
	last := es[len(es)-1]
	var lastDelta int64
	if len(es) > 1 {
		lastDelta = last.T - es[len(es)-2].T
	}
	st := binary.AppendUvarint([]byte{KindSlide}, uint64(len(es)))
	st = binary.AppendUvarint(st, uint64(total))
	st = binary.AppendVarint(st, es[0].T)
	st = binary.AppendVarint(st, last.T)
	st = binary.AppendUvarint(st, uint64(last.Cost))
	st = binary.AppendUvarint(st, uint64(lastDelta))
	for i, e := range es[:len(es)-1] {
		if i > 0 {
			st = binary.AppendUvarint(st, uint64(e.T-es[i-1].T))
		}
		st = binary.AppendUvarint(st, uint64(e.Cost))
	}
	return st
}

func runLoginData(t *testing.T, path string) {
	// The key's list, newest first, and its expiry (0: none), kept as the
	// engine keeps them.
	var list [][]byte
	var expireAt, now int64
	datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
		if td.HasArg("now") || td.Cmd != "state" {
			now = ddTime(t, td, now)
		}
		if expireAt != 0 && now > expireAt {
			list, expireAt = nil, 0
		}
		switch td.Cmd {
		case "state":
			// The list, newest first: times, or any text as it is.
			list, expireAt = nil, 0
			if in := strings.TrimSpace(td.Input); in != "none" {
				for _, line := range strings.Split(in, "\n") {
					if ts, err := time.Parse(time.RFC3339Nano, line); err == nil {
						line = strconv.FormatInt(ts.UnixMilli(), 10)
					}
					list = append(list, []byte(line))
				}
			}
			return formatLogins(list)
		case "login":
			l := Login{Keep: 32}
			td.ScanArgs(t, "limit", &l.Limit)
			td.MaybeScanArgs(t, "keep", &l.Keep)
			l.Window = parseDur(t, argVal(t, td, "window"))
			h := l.History(now)
			for _, v := range list {
				if !h.Add(v) {
					break
				}
			}
			x, record, _, err := h.Decide(0)
			if err != nil {
				return "error: " + err.Error() + "\n"
			}
			var b strings.Builder
			fmt.Fprintf(&b, "reply: %d %d %d %d %d\n", b2i(x.Allowed), x.Limit, x.Remaining, x.RetryAfter, x.ResetAfter)
			if x.Allowed != record {
				t.Fatalf("allowed %v, record %v", x.Allowed, record)
			}
			if !record {
				b.WriteString("list: unchanged\n")
				return b.String()
			}
			list = append([][]byte{strconv.AppendInt(nil, now, 10)}, list...)
			list = list[:min(int64(len(list)), l.Kept())]
			expireAt = now + l.Window - 1
			b.WriteString("list:\n")
			for _, line := range strings.Split(strings.TrimSuffix(formatLogins(list), "\n"), "\n") {
				b.WriteString("  " + line + "\n")
			}
			fmt.Fprintf(&b, "pttl: %d\n", expireAt-now)
			return b.String()
		}
		t.Fatalf("unknown directive %q", td.Cmd)
		return ""
	})
}

// formatLogins lists the login list newest first, each entry with its
// time when it is one.
func formatLogins(list [][]byte) string {
	if list == nil {
		return "none\n"
	}
	var b strings.Builder
	for _, v := range list {
		if ms, ok := ParseInt(v); ok {
			fmt.Fprintf(&b, "%s %s\n", v, formatTime(ms))
		} else {
			fmt.Fprintf(&b, "%s\n", v)
		}
	}
	return b.String()
}

// ddTime reads now=: a UTC time, or +D / -D from prev.
func ddTime(t *testing.T, td *datadriven.TestData, prev int64) int64 {
	v := argVal(t, td, "now")
	switch v[0] {
	case '+':
		return prev + parseDur(t, v[1:])
	case '-':
		return prev - parseDur(t, v[1:])
	}
	return parseTime(t, v)
}

func parseTime(t *testing.T, s string) int64 {
	ts, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return ts.UnixMilli()
}

func formatTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

var durUnits = []struct {
	name string
	ms   int64
}{{"d", dayMs}, {"h", 3_600_000}, {"m", 60_000}, {"s", 1000}, {"ms", 1}}

// parseDur reads a duration with a unit, as the commands take it.
func parseDur(t *testing.T, s string) int64 {
	for _, u := range []string{"ms", "s", "m", "h", "d"} {
		if n, ok := strings.CutSuffix(s, u); ok {
			if v, err := strconv.ParseInt(n, 10, 64); err == nil {
				for _, du := range durUnits {
					if du.name == u {
						return v * du.ms
					}
				}
			}
		}
	}
	t.Fatalf("duration %q: want a whole number with unit ms, s, m, h or d", s)
	return 0
}

// formatDur writes ms in the largest unit that divides it.
func formatDur(ms int64) string {
	for _, u := range durUnits {
		if ms%u.ms == 0 {
			return strconv.FormatInt(ms/u.ms, 10) + u.name
		}
	}
	return strconv.FormatInt(ms, 10) + "ms"
}

// ddRules reads rules=(L/W, ...).
func ddRules(t *testing.T, td *datadriven.TestData) []Rule {
	arg, ok := td.Arg("rules")
	if !ok {
		t.Fatal("missing rules=(limit/window, ...)")
	}
	var rules []Rule
	for _, v := range arg.Vals {
		l, w, ok := strings.Cut(strings.TrimSpace(v), "/")
		if !ok {
			t.Fatalf("rule %q: want limit/window", v)
		}
		rules = append(rules, Rule{Limit: mustInt(t, l), Window: parseDur(t, w)})
	}
	return rules
}

func argVal(t *testing.T, td *datadriven.TestData, key string) string {
	arg, ok := td.Arg(key)
	if !ok || len(arg.Vals) != 1 {
		t.Fatalf("%s: want %s=<value>", td.Pos, key)
	}
	return arg.Vals[0]
}

func field(t *testing.T, s, name string) string {
	v, ok := strings.CutPrefix(s, name+"=")
	if !ok {
		t.Fatalf("%q: want %s=...", s, name)
	}
	return v
}

func mustInt(t *testing.T, s string) int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
