package main

import (
	"bytes"
	"context"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// respEcho is a server speaking just enough RESP, over memory (pipeNet):
// it answers every command (an array of bulk strings) with ":1", in
// order. Before answering the command number n (from 1) of a connection,
// it sleeps stall(n) when stall is set. It counts the commands it
// answered. Started inside a synctest bubble, its stalls and the
// generator's schedule share the bubble's fake clock.
type respEcho struct {
	pipeNet
	stall    func(n int) time.Duration
	commands atomic.Int64
}

func startEcho(t *testing.T, stall func(n int) time.Duration) *respEcho {
	t.Helper()
	s := &respEcho{stall: stall}
	s.pipeNet.serve = s.serve
	t.Cleanup(s.wg.Wait)
	return s
}

func (s *respEcho) serve(c net.Conn) {
	defer c.Close()
	in := make([]byte, 64<<10)
	out := make([]byte, 0, 4096)
	r, w, n := 0, 0, 0
	for {
		m, err := c.Read(in[w:])
		if err != nil {
			return
		}
		w += m
		out = out[:0]
		for {
			size, ok := commandSize(in[r:w])
			if !ok {
				break
			}
			r += size
			n++
			if s.stall != nil {
				if d := s.stall(n); d > 0 {
					if len(out) > 0 { // what was answered before goes first
						if _, err := c.Write(out); err != nil {
							return
						}
						out = out[:0]
					}
					time.Sleep(d)
				}
			}
			out = append(out, ":1\r\n"...)
			s.commands.Add(1)
		}
		if len(out) > 0 {
			if _, err := c.Write(out); err != nil {
				return
			}
		}
		w = copy(in, in[r:w])
		r = 0
	}
}

// commandSize returns the length of the complete command at the start of
// b, or false when b does not hold a whole one yet.
func commandSize(b []byte) (int, bool) {
	// line reads the number after the type byte at pos, up to CRLF.
	line := func(pos int) (int, int, bool) {
		i := bytes.Index(b[pos:], []byte("\r\n"))
		if i < 2 {
			return 0, 0, false
		}
		v := 0
		for _, c := range b[pos+1 : pos+i] {
			if c < '0' || c > '9' {
				return 0, 0, false
			}
			v = v*10 + int(c-'0')
		}
		return v, pos + i + 2, true
	}
	if len(b) == 0 || b[0] != '*' {
		return 0, false
	}
	args, pos, ok := line(0)
	if !ok {
		return 0, false
	}
	for range args {
		if pos >= len(b) || b[pos] != '$' {
			return 0, false
		}
		var size int
		if size, pos, ok = line(pos); !ok {
			return 0, false
		}
		pos += size + 2
		if pos > len(b) {
			return 0, false
		}
	}
	return pos, true
}

// The schedule: a batch every conns*depth/rate per connection, the
// connections evenly staggered over the interval.
func TestPacingSchedule(t *testing.T) {
	origin := time.Now()
	if p := newPacing(0, 4, 1, 2, origin); p.interval != 0 {
		t.Fatalf("rate 0 gives interval %v, want the closed loop", p.interval)
	}
	var firsts []time.Duration
	for i := range 4 {
		p := newPacing(4000, 4, 1, i, origin) // 1000/s per connection
		if p.interval != float64(time.Millisecond) {
			t.Fatalf("interval %v ns, want 1 ms", p.interval)
		}
		firsts = append(firsts, p.intended(0).Sub(origin))
		if got := p.intended(10).Sub(p.intended(0)); got != 10*time.Millisecond {
			t.Fatalf("10 batches span %v, want 10ms", got)
		}
	}
	for i, f := range firsts {
		if want := time.Duration(i) * 250 * time.Microsecond; f != want {
			t.Fatalf("connection %d starts at +%v, want +%v (offsets %v)", i, f, want, firsts)
		}
	}
	// Depth 8: 1000 req/s over 2 connections is 62.5 batches/s each.
	if p := newPacing(1000, 2, 8, 0, origin); p.interval != 16*float64(time.Millisecond) {
		t.Fatalf("depth 8: interval %v ns, want 16 ms", p.interval)
	}
}

// Paced, the generator sends the rate asked for (not what the server
// could take), one latency per request.
func TestPacedRunHitsTheRate(t *testing.T) {
	synctest.Test(t, testPacedRunHitsTheRate)
}

func testPacedRunHitsTheRate(t *testing.T) {
	s := startEcho(t, nil)
	const rate = 4000.0
	spec := loadSpec{
		dial: s.dial, conns: 8, depth: 1, rate: rate,
		plans:   []plan{{name: "x", op: op{cmd("GET", keyArg("k:"))}, users: 100}},
		warmup:  100 * time.Millisecond,
		measure: sleepFor(500 * time.Millisecond),
		seed:    1,
	}
	started := time.Now()
	res, err := runLoad(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	p := res.plans[0]
	achieved := float64(p.ops) / res.window.Seconds()
	t.Logf("asked %.0f/s, achieved %.0f/s over %v; p50 %v p99 %v; send lag p50 %v p99 %v",
		rate, achieved, res.window, p.hist.quantile(0.5), p.hist.quantile(0.99), p.lag.quantile(0.5), p.lag.quantile(0.99))
	if achieved < 0.9*rate || achieved > 1.1*rate {
		t.Errorf("achieved %.0f requests/s, want %.0f ± 10%%", achieved, rate)
	}
	// The latencies are those of the requests due in the window, the ops
	// those answered in it: they differ by the requests in flight at its
	// edges, one per connection at each when the client keeps to its
	// schedule, plus those due while it ran late (on a busy machine a
	// connection's goroutine may wait milliseconds for a core).
	late := int64(rate * p.lag.quantile(1).Seconds())
	slack := int64(spec.conns) + late
	if diff := int64(p.hist.n) - p.ops; diff < -slack || diff > slack || p.lag.n != p.hist.n || p.sent.n != p.hist.n {
		t.Errorf("%d latencies, %d send lags, %d latencies from the send for %d requests", p.hist.n, p.lag.n, p.sent.n, p.ops)
	}
	// The whole run, warmup included, sent about the rate too: not more.
	if all := float64(s.commands.Load()) / time.Since(started).Seconds(); all > 1.1*rate {
		t.Errorf("the server answered %.0f requests/s over the whole run, want at most %.0f", all, 1.1*rate)
	}
	if took := time.Since(started); took > 2*time.Second {
		t.Errorf("the run took %v", took)
	}
}

// Latency runs from the intended send time: a server that stalls 200 ms
// delays every request due during the stall, and each of them must count
// with its wait, not just the one request that was in flight.
func TestPacedLatencyFromIntendedTime(t *testing.T) {
	synctest.Test(t, testPacedLatencyFromIntendedTime)
}

func testPacedLatencyFromIntendedTime(t *testing.T) {
	const stall = 200 * time.Millisecond
	// Every connection stalls once, on its 30th command: after the
	// 100 ms warmup (10 ms between a connection's requests), inside the
	// 600 ms window.
	s := startEcho(t, func(n int) time.Duration {
		if n == 30 {
			return stall
		}
		return 0
	})
	const conns = 2
	spec := loadSpec{
		dial: s.dial, conns: conns, depth: 1, rate: 200, // 100/s each: every 10 ms
		plans:   []plan{{name: "x", op: op{cmd("GET", keyArg("k:"))}, users: 100}},
		warmup:  100 * time.Millisecond,
		measure: sleepFor(600 * time.Millisecond),
		seed:    1,
	}
	res, err := runLoad(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	p := res.plans[0]
	slow := countAbove(&p.hist, 50*time.Millisecond)
	t.Logf("%d requests, %d slower than 50 ms, max %v, p99 %v", p.ops, slow, time.Duration(p.hist.max), p.hist.quantile(0.99))
	// Each stall delays the stalled request (~200 ms) and those due in
	// the next 200 ms (190, 180, ... ms): about 15 per connection above
	// 50 ms. Timed from the actual send, there would be 1 per connection.
	if slow < 10*conns {
		t.Errorf("%d requests slower than 50 ms, want at least %d: latency is not taken from the intended send time", slow, 10*conns)
	}
	if max := time.Duration(p.hist.max); max < stall || max > stall+100*time.Millisecond {
		t.Errorf("max latency %v, want about %v", max, stall)
	}
	// The backlog is sent at once after the stall, so the rate holds.
	if achieved := float64(p.ops) / res.window.Seconds(); achieved < 0.85*200 {
		t.Errorf("achieved %.0f requests/s, want about 200: the late requests were not sent", achieved)
	}
	// Requests sent late are recorded as such.
	if lagged := countAbove(&p.lag, 50*time.Millisecond); lagged < 10*conns {
		t.Errorf("%d requests sent over 50 ms late, want at least %d", lagged, 10*conns)
	}
	// Timed from the actual send, the stall would show as one slow
	// request per connection: what the diagnostic column says.
	if fromSend := countAbove(&p.sent, 50*time.Millisecond); fromSend < conns || fromSend > 2*conns {
		t.Errorf("%d requests slower than 50 ms from their actual send, want %d (the stalled ones)", fromSend, conns)
	}
}

// The requests due in the window are measured even when a stall at its
// end holds their replies until after it.
func TestPacedWindowWaitsForItsRequests(t *testing.T) {
	synctest.Test(t, testPacedWindowWaitsForItsRequests)
}

func testPacedWindowWaitsForItsRequests(t *testing.T) {
	const stall = 200 * time.Millisecond
	// A connection's 36th command is due 350 ms after the start: 250 ms
	// into the 300 ms window that follows the 100 ms warmup. Its reply,
	// and those of the requests due after it in the window, come after
	// the window.
	s := startEcho(t, func(n int) time.Duration {
		if n == 36 {
			return stall
		}
		return 0
	})
	const conns = 2
	spec := loadSpec{
		dial: s.dial, conns: conns, depth: 1, rate: 200, // every 10 ms per connection
		plans:   []plan{{name: "x", op: op{cmd("GET", keyArg("k:"))}, users: 100}},
		warmup:  100 * time.Millisecond,
		measure: sleepFor(300 * time.Millisecond),
		seed:    1,
	}
	started := time.Now()
	res, err := runLoad(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(started)
	p := res.plans[0]
	slow := countAbove(&p.hist, 100*time.Millisecond)
	t.Logf("%d latencies, %d answered in the window, %d slower than 100 ms, max %v; the run took %v", p.hist.n, p.ops, slow, time.Duration(p.hist.max), took)
	if max := time.Duration(p.hist.max); max < stall-10*time.Millisecond {
		t.Errorf("max latency %v: the stalled requests, answered after the window, were left out", max)
	}
	// Due at 350, 360, 370, 380, 390 ms: 190 to 150 ms late, each.
	if slow < 4*conns {
		t.Errorf("%d requests slower than 100 ms, want at least %d", slow, 4*conns)
	}
	if took > 2*time.Second {
		t.Errorf("the run took %v: it should end once the window's requests are answered", took)
	}
}

// countAbove counts the recordings in buckets entirely above d.
func countAbove(h *histogram, d time.Duration) uint64 {
	var n uint64
	for i, c := range h.counts {
		if lo, _ := bucketRange(i); lo > int64(d) {
			n += c
		}
	}
	return n
}

// Pacing adds no allocation per request: the generator's loop stays
// allocation-free (the server here does not allocate either).
func TestPacedRunDoesNotAllocate(t *testing.T) {
	synctest.Test(t, testPacedRunDoesNotAllocate)
}

func testPacedRunDoesNotAllocate(t *testing.T) {
	s := startEcho(t, nil)
	var before, after uint64
	spec := loadSpec{
		dial: s.dial, conns: 4, depth: 1, rate: 4000,
		plans:  []plan{{name: "x", op: op{cmd("RL.SLIDE", keyArg("k:"), lit("100"), lit("60s"))}, users: 100}},
		warmup: 100 * time.Millisecond,
		measure: func(ctx context.Context) error {
			before = mallocs()
			time.Sleep(400 * time.Millisecond)
			after = mallocs()
			return nil
		},
	}
	res, err := runLoad(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	ops := res.plans[0].ops
	perOp := float64(after-before) / float64(ops)
	t.Logf("%d allocations over %d requests", after-before, ops)
	if ops < 1000 || perOp > 0.05 {
		t.Errorf("%.3f allocations per request over %d requests, want none", perOp, ops)
	}
}

func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

// A paced request's latency counts the wait for a late previous reply
// (the server's backlog), not the client's own late wake-up.
func TestPacedLatencyLeavesOutClientLateness(t *testing.T) {
	base := time.Unix(1_800_000_000, 0)
	at := func(us int) time.Time { return base.Add(time.Duration(us) * time.Microsecond) }
	for _, tc := range []struct {
		name                     string
		due, prev, sent, replied int
		want                     time.Duration
	}{
		{"on time", 1000, 500, 1000, 1100, 100 * time.Microsecond},
		{"client overslept by 900 µs", 1000, 500, 1900, 2000, 100 * time.Microsecond},
		{"previous reply 2 ms late, sent at once", 1000, 3000, 3000, 3100, 2100 * time.Microsecond},
		{"previous reply late, then the client overslept", 1000, 3000, 3500, 3600, 2100 * time.Microsecond},
	} {
		if got := pacedLatency(at(tc.due), at(tc.prev), at(tc.sent), at(tc.replied)); got != tc.want {
			t.Errorf("%s: latency %v, want %v", tc.name, got, tc.want)
		}
	}
}
