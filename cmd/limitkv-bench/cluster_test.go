package main

import (
	"strings"
	"testing"
	"time"
)

// TestCheckAllowed: a key's window with more allowed decisions than the
// limit is found, whichever key and window it is, and windows of one key
// are counted apart.
func TestCheckAllowed(t *testing.T) {
	counts := map[windowKey]int64{
		{rank: 0, window: 7}: 100,
		{rank: 0, window: 8}: 100, // the same key, the next window: its own limit
		{rank: 1, window: 7}: 3,
		{rank: 2, window: 0}: 99,
	}
	a := checkAllowed(counts, 100)
	if !a.ok() || a.Windows != 4 || a.AtLimit != 2 || a.Over != 0 || a.MaxAllowed != 100 || a.Allowed != 302 {
		t.Fatalf("within the limit: %+v", a)
	}
	counts[windowKey{rank: 2, window: 0}] = 101
	a = checkAllowed(counts, 100)
	if a.ok() || a.Over != 1 || a.MaxAllowed != 101 || a.AtLimit != 2 {
		t.Fatalf("one window over the limit: %+v", a)
	}
	var sum allowedCheck
	sum.add(checkAllowed(map[windowKey]int64{{1, 1}: 5}, 100))
	sum.add(a)
	if sum.ok() || sum.Windows != 5 || sum.Over != 1 || sum.Allowed != 309 {
		t.Fatalf("rounds added: %+v", sum)
	}
}

// TestWindowOf: decisions in one minute-aligned window get its index
// whatever their delay, and the next window another one.
func TestWindowOf(t *testing.T) {
	const end = 1_700_000_040_000 // a whole minute since the epoch
	w := int64(end / 60_000)
	for _, c := range []struct {
		now, reset int64
		want       int64
	}{
		{end - 59_999, 59_999, w},       // the window's first millisecond
		{end - 1, 1, w},                 // its last
		{end - 30_000 + 250, 30_000, w}, // a reply read 250 ms after the decision
		{end - 30_000 - 250, 30_000, w}, // a clock 250 ms behind the server's
		{end, 60_000, w + 1},            // the next window's first millisecond
		{end + 29_000, 31_000, w + 1},
	} {
		if got := windowOf(c.now, c.reset, time.Minute); got != c.want {
			t.Errorf("windowOf(%d, %d) = %d, want %d", c.now, c.reset, got, c.want)
		}
	}
}

// TestClusterMarkdown: the page carries the medians, the ratios and the
// check's verdict of each side as they are.
func TestClusterMarkdown(t *testing.T) {
	side := func(rps, cpu float64, rounds ...float64) clusterSide {
		s := clusterSide{}
		for i, r := range rounds {
			s.Rounds = append(s.Rounds, clusterRound{Round: i + 1, RPS: r, CPUPerReqUs: cpu * r / rps, P50: 500, P99: 2000, Max: 9000})
		}
		s.summarize()
		return s
	}
	r := &clusterResult{Conns: 50, Keys: 100_000, Zipf: 1.1, Limit: 100, Duration: "15s", Warmup: "2s", NodeTimeout: "5000",
		Limitkv: side(60_000, 12, 50_000, 60_000, 70_000), Redis: side(40_000, 15, 40_000, 30_000, 45_000)}
	if r.Limitkv.RPS != 60_000 || r.Redis.RPS != 40_000 {
		t.Fatalf("medians %v %v", r.Limitkv.RPS, r.Redis.RPS)
	}
	r.Ratios.RPS = ratio(r.Limitkv.RPS, r.Redis.RPS)
	r.Ratios.CPUPerReqUs = ratio(r.Limitkv.CPUPerReqUs, r.Redis.CPUPerReqUs)
	r.Limitkv.Check = allowedCheck{Windows: 10, AtLimit: 2, MaxAllowed: 100}
	r.Redis.Check = allowedCheck{Windows: 10, AtLimit: 1, Over: 1, MaxAllowed: 101}
	md := clusterMarkdown(r)
	for _, want := range []string{
		"| requests/s | 60,000 | 40,000 | 1.50 |",
		"| server CPU per request (3 nodes) | 12.0 µs | 15.0 µs | 0.80 |",
		"| windows over the limit | 0 (ok) | 1 (VIOLATED) |",
		"| most allowed in one window | 100 | 101 |",
		"Windows over the limit: limitkv 0, redis-server 1.",
		"| 2 | redis | 30,000 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the page lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "Neither allowed more") {
		t.Errorf("the page says no window went over the limit:\n%s", md)
	}
}
