package main

import (
	"context"
	"errors"
	"fmt"
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
	phaseStop
)

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
	var phase atomic.Int32
	start := make(chan struct{})
	states := make([]*connState, spec.conns)
	conns := make([]net.Conn, spec.conns)
	for i := range conns {
		c, err := net.DialTimeout("tcp", spec.addr, 5*time.Second)
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
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := spec.plans[i%len(spec.plans)]
			e := newEncoder(i, spec.conns, spec.seed)
			states[i].err = drive(conns[i], e, p, spec.depth, &phase, start, states[i])
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
	phase.Store(phaseMeasure)
	if ctx.Err() == nil {
		measureErr = spec.measure(ctx)
	}
	phase.Store(phaseStop)
	after := markCPU(spec.pid)
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
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return res, measureErr
}

// drive is one connection's loop.
func drive(conn net.Conn, e *encoder, p plan, depth int, phase *atomic.Int32, start <-chan struct{}, st *connState) error {
	replies := depth * len(p.op)
	out := make([]byte, 0, 4096)
	in := make([]byte, 64<<10)
	<-start
	for {
		out = out[:0]
		for range depth {
			out = e.appendOp(out, p.op, e.rng.IntN(p.users))
		}
		t0 := time.Now()
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
		lat := time.Since(t0)
		st.errors += errs
		if firstErr != "" {
			st.firstErr = firstErr
		}
		switch phase.Load() {
		case phaseMeasure:
			st.ops += int64(depth)
			st.allowed += allowed
			st.denied += denied
			st.hist.record(lat)
		case phaseStop:
			return nil
		}
	}
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
