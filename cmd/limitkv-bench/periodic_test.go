package main

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestParsePause(t *testing.T) {
	exposition := `# HELP limitkv_snapshot_last_duration_seconds How long the last snapshot took.
# TYPE limitkv_snapshot_last_duration_seconds gauge
limitkv_snapshot_last_duration_seconds 0.25
# HELP limitkv_snapshot_last_pause_seconds The longest time the last snapshot held one shard.
# TYPE limitkv_snapshot_last_pause_seconds gauge
limitkv_snapshot_last_pause_seconds 0.000734
limitkv_snapshot_last_pause_seconds_other 9
`
	d, err := parsePause(strings.NewReader(exposition))
	if err != nil || d != 734*time.Microsecond {
		t.Fatalf("got %v, %v; want 734µs", d, err)
	}
	if d, err := parsePause(strings.NewReader("limitkv_snapshot_last_pause_seconds 1.5e-05\n")); err != nil || d != 15*time.Microsecond {
		t.Errorf("exponent: got %v, %v; want 15µs", d, err)
	}
	for _, bad := range []string{
		"limitkv_snapshots_total 3\n",
		"limitkv_snapshot_last_pause_seconds soon\n",
		"",
	} {
		if d, err := parsePause(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: got %v, want an error", bad, d)
		}
	}
}

func TestStatPPID(t *testing.T) {
	for _, tc := range []struct {
		line string
		ppid int
		ok   bool
	}{
		{"4242 (limitkv) S 4200 4242 4242 0 -1 4194560 1 0 0 0 3 1 0 0 20 0", 4200, true},
		// The command name may hold spaces and parentheses.
		{"4243 (a) b (c) R 17 4243 4243 0 -1 4194560 1 0 0 0 3 1 0 0 20 0", 17, true},
		{"4244 (truncated", 0, false},
		{"4245 (x) S", 0, false},
		{"4246 (x) S nope", 0, false},
	} {
		ppid, ok := statPPID([]byte(tc.line))
		if ppid != tc.ppid || ok != tc.ok {
			t.Errorf("%q: got %d, %v; want %d, %v", tc.line, ppid, ok, tc.ppid, tc.ok)
		}
	}
}

// This test process is its own parent's child: childPids finds it.
func TestChildPids(t *testing.T) {
	found := false
	for _, pid := range childPids(os.Getppid()) {
		found = found || pid == os.Getpid()
	}
	if !found {
		t.Errorf("childPids(%d) = %v, without this process (%d)", os.Getppid(), childPids(os.Getppid()), os.Getpid())
	}
}

// The fill connection sends new keys in batches at its rate, counts the
// error replies, and says where the next fill starts. On the fake clock
// of a synctest bubble, the server answering each batch in fakeService,
// the rate is exact.
func TestFill(t *testing.T) {
	synctest.Test(t, testFill)
}

func testFill(t *testing.T) {
	f := startFake(t) // answers an error to users ending in 7
	conn, err := f.dial("")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const rate = 20_000
	const d = 150 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	res := fill(ctx, conn, rate, 1000, 1)
	if res.err != nil && !errors.Is(res.err, net.ErrClosed) && !errors.Is(res.err, io.ErrClosedPipe) {
		t.Fatalf("fill: %v", res.err)
	}
	if res.sent == 0 || res.sent%fillBatch != 0 {
		t.Fatalf("sent %d requests, want a positive multiple of %d", res.sent, fillBatch)
	}
	// The first batch goes at once, then one per fillBatch/rate: at 0, 5,
	// ..., 145 ms; the one due at 150 ms finds the context ended.
	if want := int64(rate*d.Seconds()) / fillBatch * fillBatch; res.sent != want {
		t.Errorf("sent %d requests in %v at %d/s, want %d", res.sent, d, rate, want)
	}
	if res.errors != res.sent/10 || res.firstErr != "-ERR seven" {
		t.Errorf("%d error replies (first %q) for %d requests, want %d (-ERR seven)", res.errors, res.firstErr, res.sent, res.sent/10)
	}
	// A batch cut short by the end is not counted as sent, but its keys
	// are not used again.
	if n := int64(res.next - 1000); n != res.sent && n != res.sent+fillBatch {
		t.Errorf("next user %d after %d requests from 1000", res.next, res.sent)
	}
	if got := f.commands.Load(); got < res.sent {
		t.Errorf("the server saw %d commands, fewer than the %d answered", got, res.sent)
	}
}

func periodicHist(base time.Duration, n int, tail time.Duration) histogram {
	var h histogram
	for i := range n {
		d := base
		if i >= n-n/50 { // the slowest 2%
			d = tail
		}
		h.record(d)
	}
	return h
}

func TestSummarizePeriodic(t *testing.T) {
	r := &periodicResult{Rate: 40_000, KeysPerSec: 50_000, Rounds: 2, QuietCores: 0.3}
	on1 := periodicRun{Round: 1, Server: sideOn, WindowSec: 10, Ops: 400_000, OpsPerSec: 40_000, Snapshots: 8, SnapKeys: 400_000,
		CPU: cpuUse{Server: 1.1, Other: 0.1}, WorkerCores: 0.2, hist: periodicHist(100*time.Microsecond, 1000, 900*time.Microsecond)}
	on2 := on1
	on2.Round, on2.Snapshots, on2.SnapKeys = 2, 9, 500_000 // one unread (Missed) among its 9
	on2.CPU.Other = 0.5                                    // busy
	off1 := periodicRun{Round: 1, Server: sideOff, WindowSec: 10, Ops: 400_000, OpsPerSec: 40_000,
		CPU: cpuUse{Server: 0.9, Other: 0.1}, hist: periodicHist(100*time.Microsecond, 1000, 600*time.Microsecond)}
	off2 := off1
	off2.Round = 2
	r.Runs = []periodicRun{on1, off1, off2, on2}
	r.Snapshots = []periodicSnapshot{
		{Round: 1, Keys: 40_000, Ms: 200, PauseUs: 300},
		{Round: 1, Keys: 60_000, Ms: 300, PauseUs: 900},
		{Round: 2, Keys: 50_000, Ms: 250, PauseUs: 500, Missed: 1},
		{Round: 2, Keys: 0, Ms: 5000, PauseUs: 99_000, Failed: true},
	}
	summarizePeriodic(r)
	if r.On.P99us < 890 || r.On.P99us > 910 || r.Off.P99us < 590 || r.Off.P99us > 610 {
		t.Fatalf("p99 on %.0f µs, off %.0f µs; want about 900 and 600", r.On.P99us, r.Off.P99us)
	}
	if want := r.On.P99us / r.Off.P99us; r.RatioP99 != want || r.RatioP99 < 1.45 || r.RatioP99 > 1.55 {
		t.Errorf("ratio %.3f, want %.3f (about 1.5)", r.RatioP99, want)
	}
	if r.On.BusyRuns != 1 || r.Off.BusyRuns != 0 {
		t.Errorf("busy runs on %d, off %d; want 1 and 0", r.On.BusyRuns, r.Off.BusyRuns)
	}
	if r.SnapshotCount != 17 || r.KeysWrittenPerS != 45_000 {
		t.Errorf("%d snapshots writing %.0f keys/s; want 17 and 45,000", r.SnapshotCount, r.KeysWrittenPerS)
	}
	// The failed snapshot counts in none of the medians.
	if r.MedianKeys != 50_000 || r.MedianMs != 250 || r.MedianPauseUs != 500 || r.MaxPauseUs != 900 {
		t.Errorf("medians %.0f keys, %.0f ms, %.0f µs hold, longest %.0f µs; want 50,000, 250, 500, 900", r.MedianKeys, r.MedianMs, r.MedianPauseUs, r.MaxPauseUs)
	}
	// The server: 0.2 cores more over 20 s, 4 s of CPU, over 900k keys;
	// the worker: 0.2 cores over 20 s.
	if d := r.ServerUsPerKey - 4e6/900_000; d < -1e-9 || d > 1e-9 {
		t.Errorf("server %.4f µs per key, want %.4f", r.ServerUsPerKey, 4e6/900_000)
	}
	if d := r.WorkerUsPerKey - 4e6/900_000; d < -1e-9 || d > 1e-9 {
		t.Errorf("worker %.4f µs per key, want %.4f", r.WorkerUsPerKey, 4e6/900_000)
	}

	if tg := periodicTarget(r, 50, 40_000); tg.Status != status(r.RatioP99 <= periodicRatio) || !strings.Contains(tg.Got, "17 snapshots") {
		t.Errorf("target %+v", tg)
	}
	r.Runs[1].Errors = 3
	summarizePeriodic(r)
	if tg := periodicTarget(r, 50, 40_000); tg.Status != "INVALID" {
		t.Errorf("with error replies the target is %s, want INVALID", tg.Status)
	}
	if tg := periodicTarget(nil, 50, 40_000); tg.Status != "NOT MEASURED" || tg.Got != "" {
		t.Errorf("not measured: %+v", tg)
	}

	var b strings.Builder
	periodicMarkdown(&b, r)
	md := b.String()
	for _, want := range []string{"## Latency with periodic snapshots", "| persistence on |", "| persistence off |",
		"40,000, 60,000", "50,000 (+1 unread), 0 (failed)", "INVALID: 3 error replies"} {
		if !strings.Contains(md, want) {
			t.Errorf("the section lacks %q:\n%s", want, md)
		}
	}
}

func TestPeriodicFailsAboveTheRatio(t *testing.T) {
	r := &periodicResult{Rate: 40_000, KeysPerSec: 50_000}
	r.Runs = []periodicRun{
		{Server: sideOn, WindowSec: 1, Ops: 1000, hist: periodicHist(100*time.Microsecond, 1000, 5*time.Millisecond)},
		{Server: sideOff, WindowSec: 1, Ops: 1000, hist: periodicHist(100*time.Microsecond, 1000, 500*time.Microsecond)},
	}
	summarizePeriodic(r)
	if tg := periodicTarget(r, 50, 40_000); tg.Status != "FAIL" {
		t.Errorf("p99 %.0f µs on, %.0f µs off: %s, want FAIL", r.On.P99us, r.Off.P99us, tg.Status)
	}
	r.Runs[0].hist = periodicHist(100*time.Microsecond, 1000, 600*time.Microsecond)
	summarizePeriodic(r)
	if tg := periodicTarget(r, 50, 40_000); tg.Status != "PASS" {
		t.Errorf("p99 %.0f µs on, %.0f µs off: %s, want PASS", r.On.P99us, r.Off.P99us, tg.Status)
	}
}
