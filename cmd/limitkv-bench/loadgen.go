package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// The load generator: conns connections, each on its own goroutine,
// sending depth operations at once and reading all their replies before
// the next batch. A request's users are drawn uniformly by a per-goroutine
// PRNG. Nothing is allocated per request: requests are encoded into a
// reused buffer, replies are skipped in place, latencies go to a
// per-connection histogram.
//
// Two ways to load: closed loop (rate 0), where each connection sends its
// next batch as soon as the previous one is answered, which finds the
// server's capacity and measures latency at saturation (mostly queueing);
// and open loop (rate > 0), where the connections together send rate
// requests per second on a fixed schedule whatever the server does, which
// measures latency at that load. See drive for the schedule.

// plan is what a group of connections sends.
type plan struct {
	name     string
	op       op
	users    int
	decision bool
}

type loadSpec struct {
	addr   string
	pid    int // the server's, for its CPU time
	conns  int
	depth  int
	plans  []plan // connection i sends plans[i%len(plans)]
	warmup time.Duration
	// measure runs the measured window; it returns when the window ends.
	measure func(ctx context.Context) error
	seed    uint64
	// rate paces the load: requests per second over all connections (each
	// connection sends rate/conns). 0 is the closed loop.
	rate float64
	// dial connects to addr; nil dials TCP. Tests hand in connections
	// over memory, so that the whole run keeps a test's fake clock.
	dial func(addr string) (net.Conn, error)
}

// planResult is what the connections of one plan did in the window.
type planResult struct {
	name     string
	ops      int64 // operations completed in the window
	errors   int64 // error replies, over the whole run including warmup
	firstErr string
	allowed  int64
	denied   int64
	hist     histogram // per operation at depth 1, per batch above
	// Paced only, for diagnosis: lag is how late each batch was sent after
	// its intended time, the client's own delay (a sleep overshooting, a
	// goroutine waiting for a core) or the backlog of a late reply; it is
	// part of hist. sent is the latency from the actual send instead, as
	// if there were no lag.
	lag, sent histogram
}

type loadResult struct {
	plans  []*planResult
	window time.Duration
	cpu    cpuUse
}

// cpuUse is the CPU time spent during the window, in cores (1 = one core
// busy the whole window).
type cpuUse struct {
	Server float64 `json:"server_cores"`
	Client float64 `json:"client_cores"`
	Other  float64 `json:"other_cores"` // everything else on the machine
	Steal  float64 `json:"steal_cores"` // taken by the hypervisor
}

type cpuMark struct {
	at                          time.Time
	server, client, busy, steal int64
}

func markCPU(pid int) cpuMark {
	busy, steal := machineTicks()
	return cpuMark{at: time.Now(), server: cpuTicks(pid), client: cpuTicks(os.Getpid()), busy: busy, steal: steal}
}

func cpuBetween(a, b cpuMark) cpuUse {
	secs := b.at.Sub(a.at).Seconds() * clockTick
	if secs <= 0 {
		return cpuUse{}
	}
	server, client := float64(b.server-a.server), float64(b.client-a.client)
	return cpuUse{
		Server: server / secs,
		Client: client / secs,
		Other:  max(0, float64(b.busy-a.busy)-server-client) / secs,
		Steal:  float64(b.steal-a.steal) / secs,
	}
}

// Phases of a run, read by every connection after each batch.
const (
	phaseWarmup = iota
	phaseMeasure
	phaseDrain // paced: the window is over, requests due in it finish
	phaseStop
)

// drainLimit bounds how long a paced run waits, after its window, for the
// replies to requests that were due in it.
const drainLimit = 10 * time.Second

// window is a paced run's measured window, in ns after the schedule's
// origin: requests whose intended send time falls in [from, until) are
// the ones measured, whenever their replies come.
type window struct {
	from, until atomic.Int64
}

func (w *window) holds(due time.Duration) bool {
	return int64(due) >= w.from.Load() && int64(due) < w.until.Load()
}

// connState is one connection's counters; each is allocated on its own,
// so connections do not share cache lines.
type connState struct {
	planResult
	err error
}

func runLoad(ctx context.Context, spec loadSpec) (*loadResult, error) {
	if spec.depth < 1 || spec.conns < 1 || len(spec.plans) == 0 {
		return nil, errors.New("load needs conns, depth and a plan")
	}
	if spec.rate < 0 {
		return nil, errors.New("negative rate")
	}
	var phase atomic.Int32
	start := make(chan struct{})
	states := make([]*connState, spec.conns)
	conns := make([]net.Conn, spec.conns)
	dial := spec.dial
	if dial == nil {
		dial = func(addr string) (net.Conn, error) { return net.DialTimeout("tcp", addr, 5*time.Second) }
	}
	for i := range conns {
		c, err := dial(spec.addr)
		if err != nil {
			for _, c := range conns[:i] {
				c.Close()
			}
			return nil, fmt.Errorf("connection %d: %v", i, err)
		}
		conns[i] = c
		states[i] = &connState{}
	}
	var wg sync.WaitGroup
	// The schedule's origin: a little ahead, so that the connections'
	// first intended times are not already past when they start.
	origin := time.Now().Add(time.Millisecond)
	win := &window{}
	win.from.Store(math.MaxInt64)
	win.until.Store(math.MaxInt64)
	for i := range conns {
		sched := newPacing(spec.rate, spec.conns, spec.depth, i, origin)
		sched.win = win
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := spec.plans[i%len(spec.plans)]
			e := newEncoder(i, spec.conns, spec.seed)
			states[i].err = drive(conns[i], e, p, spec.depth, sched, &phase, start, states[i])
		}()
	}
	// A server that stops answering must not hang the benchmark: closing
	// the connections ends their reads.
	stopped := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-stopped:
		}
		for _, c := range conns {
			c.Close()
		}
	}()

	close(start)
	var measureErr error
	select {
	case <-time.After(spec.warmup):
	case <-ctx.Done():
	}
	before := markCPU(spec.pid)
	win.from.Store(int64(before.at.Sub(origin)))
	phase.Store(phaseMeasure)
	if ctx.Err() == nil {
		measureErr = spec.measure(ctx)
	}
	after := markCPU(spec.pid)
	if spec.rate > 0 {
		// Paced, the requests due in the window are measured even when
		// their replies come after it: those are the ones a stall at the
		// end of the window delays. The connections stop sending at the
		// first request due after the window and return.
		win.until.Store(int64(after.at.Sub(origin)))
		phase.Store(phaseDrain)
		drained := make(chan struct{})
		go func() {
			wg.Wait()
			close(drained)
		}()
		select {
		case <-drained:
		case <-time.After(drainLimit):
		case <-ctx.Done():
		}
	}
	phase.Store(phaseStop)
	close(stopped) // unblocks connections waiting on a dead server
	wg.Wait()

	res := &loadResult{window: after.at.Sub(before.at), cpu: cpuBetween(before, after)}
	byPlan := map[string]*planResult{}
	for i, st := range states {
		if st.err != nil && !errors.Is(st.err, net.ErrClosed) {
			return nil, fmt.Errorf("connection %d: %v", i, st.err)
		}
		p := spec.plans[i%len(spec.plans)]
		r := byPlan[p.name]
		if r == nil {
			r = &planResult{name: p.name}
			byPlan[p.name] = r
			res.plans = append(res.plans, r)
		}
		r.ops += st.ops
		r.errors += st.errors
		if r.firstErr == "" {
			r.firstErr = st.firstErr
		}
		r.allowed += st.allowed
		r.denied += st.denied
		r.hist.merge(&st.hist)
		r.lag.merge(&st.lag)
		r.sent.merge(&st.sent)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return res, measureErr
}

// pacing is one connection's schedule in the open loop: its k-th batch
// (from 0) is meant to be sent at origin + offset + k*interval. A zero
// interval is the closed loop.
type pacing struct {
	origin   time.Time
	offset   float64 // ns
	interval float64 // ns between this connection's batches
	win      *window
}

// newPacing returns connection i's schedule when conns connections send
// rate requests/s together in batches of depth: a batch every
// conns*depth/rate seconds, connection i shifted by i/conns of that
// interval so that the connections' sends are spread evenly instead of
// all falling on the same instants. Rate 0 is the closed loop.
func newPacing(rate float64, conns, depth, i int, origin time.Time) pacing {
	if rate <= 0 {
		return pacing{}
	}
	interval := float64(time.Second) * float64(conns) * float64(depth) / rate
	return pacing{origin: origin, offset: interval * float64(i) / float64(conns), interval: interval}
}

// intended returns the intended send time of batch k.
func (s *pacing) intended(k int64) time.Time {
	return s.origin.Add(time.Duration(s.offset + float64(k)*s.interval))
}

// drive is one connection's loop.
//
// In the closed loop it sends a batch as soon as the previous one is
// answered, and a batch's latency runs from its send to its last reply.
//
// Paced, batch k is due at sched.intended(k). drive sleeps until then when
// it is early, and sends at once when it is late (the previous reply came
// after the due time): it never sends two batches to catch up, there is
// never more than one batch in flight, and the due times keep advancing
// whatever happens. The latency of a batch runs from its intended send
// time, not from the moment it was actually sent. That is the point of
// the open loop: when the server stalls for 50 ms, a closed-loop client
// (or one timing from the actual send) waits with it and records one slow
// request, then carries on as if nothing happened, although the requests
// a real client would have sent during the stall all waited too. This is
// coordinated omission: the client, by slowing down with the server,
// leaves out exactly the samples that show the stall. Timing from the
// intended time counts every request that should have been sent, each
// with the wait it would have seen; a backlog shows as latency, and the
// achieved rate falls short of the requested one. For the same reason a
// paced run measures the requests due in its window (and waits for their
// replies after it), not those whose replies happen to come in it. The
// achieved rate still counts the replies that came in the window.
//
// A batch can also leave late through the client's own fault: time.Sleep
// can wake up to a millisecond late when the Go runtime is idle (its
// network poller waits in whole milliseconds), and a goroutine may wait
// for a core. That lateness is not the server's, so it is left out: the
// latency is the time from the send to the last reply plus the backlog,
// the part of the lateness spent waiting for the previous reply (from the
// intended time to that reply, if it came after it). A stall still counts
// in full for every request that should have gone during it; an
// oversleeping timer does not. drive also records how late each batch
// was sent (st.lag) and its latency from the actual send without the
// backlog (st.sent), for the report to show the client's part.
func drive(conn net.Conn, e *encoder, p plan, depth int, sched pacing, phase *atomic.Int32, start <-chan struct{}, st *connState) error {
	replies := depth * len(p.op)
	out := make([]byte, 0, 4096)
	in := make([]byte, 64<<10)
	paced := sched.interval > 0
	var batch int64         // the next batch's number, for the schedule
	var lastReply time.Time // when the previous batch's last reply came
	<-start
	for {
		out = out[:0]
		for range depth {
			out = e.appendOp(out, p.op, e.rng.IntN(p.users))
		}
		t0 := time.Now()
		var due time.Time
		if paced {
			due = sched.intended(batch)
			batch++
			if int64(due.Sub(sched.origin)) >= sched.win.until.Load() {
				return nil // the window is over, and all its requests answered
			}
			if wait := due.Sub(t0); wait > 0 {
				time.Sleep(wait)
				t0 = time.Now()
			}
		}
		if _, err := conn.Write(out); err != nil {
			if phase.Load() == phaseStop {
				return nil
			}
			return err
		}
		var errs, allowed, denied int64
		var firstErr string
		r, w := 0, 0
		for got := 0; got < replies; {
			n, info, err := skipReply(in[r:w])
			if errors.Is(err, errShort) {
				if r > 0 { // keep the partial reply, make room behind it
					w = copy(in, in[r:w])
					r = 0
				}
				if w == len(in) {
					in = append(in, make([]byte, len(in))...)
				}
				m, err := conn.Read(in[w:])
				if err != nil {
					if phase.Load() == phaseStop {
						return nil
					}
					return err
				}
				w += m
				continue
			}
			if err != nil {
				return err
			}
			if info.errors > 0 {
				errs += int64(info.errors)
				if firstErr == "" && st.firstErr == "" {
					line := in[r+info.firstErr:]
					if i := indexCRLF(line); i >= 0 {
						line = line[:i]
					}
					firstErr = string(line)
				}
			}
			if p.decision && info.hasFlag {
				if info.flag == 1 {
					allowed++
				} else {
					denied++
				}
			}
			r += n
			got++
		}
		if r != w {
			return fmt.Errorf("%d bytes after the last expected reply", w-r)
		}
		now := time.Now()
		st.errors += errs
		if firstErr != "" {
			st.firstErr = firstErr
		}
		ph := phase.Load()
		if ph == phaseMeasure {
			st.ops += int64(depth) // answered in the window: the throughput
		}
		// Measured: closed loop, the batches answered in the window;
		// paced, those due in it.
		if paced && sched.win.holds(due.Sub(sched.origin)) || !paced && ph == phaseMeasure {
			st.allowed += allowed
			st.denied += denied
			if paced {
				// The backlog: from the due time until the previous reply
				// (or the send, if that came first), when positive.
				st.hist.record(pacedLatency(due, lastReply, t0, now))
				st.lag.record(t0.Sub(due))
				st.sent.record(now.Sub(t0))
			} else {
				st.hist.record(now.Sub(t0))
			}
		}
		lastReply = now
		if ph == phaseStop {
			return nil
		}
	}
}

// pacedLatency is a paced batch's latency: from its send at sent to its
// last reply at replied, plus the backlog, the time from its due time
// until the previous batch's last reply (at prev) or the send, whichever
// came first. Lateness after prev is the client's own and is left out.
func pacedLatency(due, prev, sent, replied time.Time) time.Duration {
	waited := prev
	if sent.Before(waited) {
		waited = sent
	}
	return replied.Sub(sent) + max(waited.Sub(due), 0)
}

func indexCRLF(b []byte) int {
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '\r' && b[i+1] == '\n' {
			return i
		}
	}
	return -1
}

// loader sends operations as fast as a few deep pipelines allow, to fill
// a server with keys. Its connections and encoders live across passes so
// that request ids stay unique.
type loader struct {
	addr     string
	conns    []net.Conn
	encoders []*encoder
	depth    int
}

func newLoader(addr string, conns, depth int) (*loader, error) {
	l := &loader{depth: depth, addr: addr}
	for i := range conns {
		l.encoders = append(l.encoders, newEncoder(i, conns, 99))
	}
	return l, l.reconnect()
}

// reconnect replaces the connections (the encoders stay, and with them
// the request ids).
func (l *loader) reconnect() error {
	l.close()
	for range l.encoders {
		c, err := net.DialTimeout("tcp", l.addr, 5*time.Second)
		if err != nil {
			l.close()
			return err
		}
		c.SetDeadline(time.Now().Add(30 * time.Minute))
		l.conns = append(l.conns, c)
	}
	return nil
}

func (l *loader) close() {
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

// passResult counts what the replies of a pass said.
type passResult struct {
	ops, errors, allowed, denied int64
	firstErr                     string
}

// pass sends o for every user in [first, first+count), spread over the
// connections, and waits for all replies.
func (l *loader) pass(ctx context.Context, o op, first, count int) (passResult, error) {
	var wg sync.WaitGroup
	results := make([]passResult, len(l.conns))
	errs := make([]error, len(l.conns))
	for ci := range l.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[ci], errs[ci] = l.send(ctx, ci, o, first, count)
		}()
	}
	wg.Wait()
	var total passResult
	for i, r := range results {
		if errs[i] != nil {
			return total, errs[i]
		}
		total.ops += r.ops
		total.errors += r.errors
		total.allowed += r.allowed
		total.denied += r.denied
		if total.firstErr == "" {
			total.firstErr = r.firstErr
		}
	}
	if total.errors > 0 {
		return total, fmt.Errorf("%d error replies while loading (first: %s)", total.errors, total.firstErr)
	}
	return total, ctx.Err()
}

func (l *loader) send(ctx context.Context, ci int, o op, first, count int) (passResult, error) {
	var res passResult
	conn, e := l.conns[ci], l.encoders[ci]
	stride := len(l.conns)
	out := make([]byte, 0, 64<<10)
	in := make([]byte, 256<<10)
	next := first + ci
	end := first + count
	for next < end {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		out = out[:0]
		sent := 0
		for ; next < end && sent < l.depth; next += stride {
			out = e.appendOp(out, o, next)
			sent++
		}
		if _, err := conn.Write(out); err != nil {
			return res, err
		}
		replies := sent * len(o)
		r, w := 0, 0
		for got := 0; got < replies; {
			n, info, err := skipReply(in[r:w])
			if errors.Is(err, errShort) {
				if r > 0 {
					w = copy(in, in[r:w])
					r = 0
				}
				if w == len(in) {
					in = append(in, make([]byte, len(in))...)
				}
				m, err := conn.Read(in[w:])
				if err != nil {
					return res, err
				}
				w += m
				continue
			}
			if err != nil {
				return res, err
			}
			if info.errors > 0 {
				res.errors += int64(info.errors)
				if res.firstErr == "" {
					line := in[r+info.firstErr:]
					if i := indexCRLF(line); i >= 0 {
						line = line[:i]
					}
					res.firstErr = string(line)
				}
			}
			if info.hasFlag {
				if info.flag == 1 {
					res.allowed++
				} else {
					res.denied++
				}
			}
			r += n
			got++
		}
		res.ops += int64(sent)
	}
	return res, nil
}
