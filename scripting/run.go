package scripting

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// The run in progress, as other connections see it. A command that
// arrives while a script runs waits for its end, as on Redis's single
// thread, and gets BUSY once the script has run longer than
// busy-reply-threshold (Await), unless it is one of those allowed while
// a script is busy, such as SCRIPT KILL. A command that was already past
// that check when the script started runs first: commands count
// themselves in flight (Runtime.InFlight) before looking for a script,
// and a script that has taken every shard lock while one is in flight
// lets go and tries again (runBatch), so that no command ends up waiting
// on a lock behind a script it could have been told BUSY about.

const (
	msgBusy       = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
	msgBusyFCall  = "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
	msgNotBusy    = "NOTBUSY No scripts in execution right now."
	msgUnkillable = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command."
)

// errKilled is what a script stopped by SCRIPT KILL or FUNCTION KILL
// gets: its stop signal's error, and a redis.call to write after the
// kill.
var errKilled = errors.New("ERR Script killed by user with SCRIPT KILL...")

// runState is the state of one script execution that other connections
// read: its start (for BUSY) and whether it wrote or was killed. Each
// runner keeps one, reused from run to run.
type runState struct {
	startNs atomic.Int64 // since monoBase
	// state moves from runClean to runWrote (a write command was called) or
	// to runKilled (SCRIPT KILL), never both: SCRIPT KILL must not stop a
	// script that has written, and a killed script must not start writing.
	state atomic.Int32
	stop  stopSignal
	// ended is closed when the run ends; made by the first command that
	// waits for it (Await), under killMu.
	ended chan struct{}
	// function: the run is FCALL's (BUSY and the KILL commands say which
	// KILL stops it); fname and command are the function and the
	// caller's arguments, for FUNCTION STATS. Set under killMu.
	function atomic.Bool
	fname    string
	command  [][]byte
}

const (
	runClean int32 = iota
	runWrote
	runKilled
)

// monoBase anchors monoNow: time.Since on a time with a monotonic reading
// reads only the monotonic clock, the cheapest clock read Go offers.
var monoBase = time.Now()

// monoNow returns monotonic nanoseconds.
func monoNow() int64 { return int64(time.Since(monoBase)) }

// Running reports whether a script or function runs.
func (rt *Runtime) Running() bool { return rt.running.Load() != nil }

// busy reports whether a script has run for longer than the
// busy-reply-threshold, so that other commands must be refused with BUSY.
func (rt *Runtime) busy() bool {
	run := rt.running.Load()
	if run == nil {
		return false
	}
	return time.Duration(monoNow()-run.startNs.Load()) > rt.host.BusyThreshold()
}

// Await makes a command that arrives while a script runs wait, as it
// would on Redis's single thread, until the script ends (ok) or has run
// past the busy-reply-threshold (not ok: the command gets BUSY); waited
// says whether it had to wait. A command that gets past this check just
// as a script starts waits on its shard locks for the whole script.
func (rt *Runtime) Await() (waited, ok bool) {
	run := rt.running.Load()
	if run == nil {
		return false, true
	}
	left := rt.host.BusyThreshold() - time.Duration(monoNow()-run.startNs.Load())
	if left < 0 {
		return false, false
	}
	rt.killMu.Lock()
	if rt.running.Load() != run {
		rt.killMu.Unlock()
		return false, true
	}
	if run.ended == nil {
		run.ended = make(chan struct{})
	}
	ended := run.ended
	rt.killMu.Unlock()
	timer := time.NewTimer(left + time.Millisecond)
	defer timer.Stop()
	select {
	case <-ended:
		return true, true
	case <-timer.C:
		return true, !rt.busy()
	}
}

// BusyMsg is the BUSY refusal for the script running: EVAL's names
// SCRIPT KILL, FCALL's FUNCTION KILL.
func (rt *Runtime) BusyMsg() string {
	if run := rt.running.Load(); run != nil && run.function.Load() {
		return msgBusyFCall
	}
	return msgBusy
}

// Kill is SCRIPT KILL (function false) and FUNCTION KILL, which stop
// only a script of their kind. It returns Redis's refusal, in Redis's
// order, or "" once the script is told to stop.
func (rt *Runtime) Kill(function bool) string {
	rt.killMu.Lock()
	defer rt.killMu.Unlock()
	run := rt.running.Load()
	if run == nil {
		return msgNotBusy
	}
	if run.state.Load() == runWrote {
		return msgUnkillable
	}
	if run.function.Load() != function {
		if function {
			return msgBusy
		}
		return msgBusyFCall
	}
	switch {
	case run.state.CompareAndSwap(runClean, runKilled):
		run.stop.fire()
	case run.state.Load() == runWrote:
		return msgUnkillable
	}
	return ""
}

// KillForShutdown stops the script running, if any, even if it has
// written: SHUTDOWN NOSAVE, after which nothing is saved.
func (rt *Runtime) KillForShutdown() {
	rt.killMu.Lock()
	defer rt.killMu.Unlock()
	if run := rt.running.Load(); run != nil && run.state.Swap(runKilled) != runKilled {
		run.stop.fire()
	}
}

// RunningScript is the run in progress as FUNCTION STATS shows it.
type RunningScript struct {
	// Function: the run is FCALL's; Name and Command are then the
	// function's name and the caller's arguments.
	Function bool
	Name     string
	Command  [][]byte
	Duration time.Duration
}

// ReadRunning calls read with the run in progress (nil: none), under the
// lock that keeps it from ending meanwhile: its Command is the caller's
// arguments, good only until the run ends.
func (rt *Runtime) ReadRunning(read func(*RunningScript)) {
	rt.killMu.Lock()
	defer rt.killMu.Unlock()
	run := rt.running.Load()
	if run == nil {
		read(nil)
		return
	}
	read(&RunningScript{
		Function: run.function.Load(),
		Name:     run.fname,
		Command:  run.command,
		Duration: time.Duration(monoNow() - run.startNs.Load()),
	})
}

// begin announces a run of call to other connections.
func (rt *Runtime) begin(call *Call) *runState {
	r := rt.runnerFor(call.Function != nil)
	run := &r.progress
	rt.killMu.Lock()
	run.state.Store(runClean)
	run.startNs.Store(monoNow())
	run.function.Store(call.Function != nil)
	if call.Function != nil {
		run.fname, run.command = call.Function.name, call.Args
	}
	rt.running.Store(run)
	rt.killMu.Unlock()
	return run
}

// end announces the end of a run begun by begin.
func (rt *Runtime) end(run *runState) {
	rt.killMu.Lock()
	rt.running.Store(nil)
	run.fname, run.command = "", nil
	run.stop.endRun(run.state.Load() == runKilled)
	if run.ended != nil {
		close(run.ended)
		run.ended = nil
	}
	rt.killMu.Unlock()
}

// stopSignal is the context gopher-lua watches while a script runs (its
// coroutines get contexts derived from it): SCRIPT KILL closes done. The
// channel is replaced only after it was closed, so that a script costs no
// allocation for it; fire and endRun run under killMu, and the running
// script only reads done.
type stopSignal struct {
	done chan struct{}
	// Contexts derived from this one (coroutines') register here rather
	// than have the context package start a goroutine for each; the
	// registrations are dropped when the run ends.
	mu    sync.Mutex
	hooks []*stopHook
}

type stopHook struct{ f func() }

func (s *stopSignal) Deadline() (time.Time, bool) { return time.Time{}, false }
func (s *stopSignal) Value(any) any               { return nil }
func (s *stopSignal) Done() <-chan struct{}       { return s.done }

func (s *stopSignal) Err() error {
	select {
	case <-s.done:
		return errKilled
	default:
		return nil
	}
}

// AfterFunc is what context.WithCancel uses, when the parent has it, to
// learn of the parent's end without a goroutine.
func (s *stopSignal) AfterFunc(f func()) func() bool {
	h := &stopHook{f: f}
	s.mu.Lock()
	s.hooks = append(s.hooks, h)
	s.mu.Unlock()
	return func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		registered := h.f != nil
		h.f = nil
		return registered
	}
}

// fire stops the running script.
func (s *stopSignal) fire() {
	close(s.done)
	s.mu.Lock()
	hooks := s.hooks
	s.hooks = nil
	s.mu.Unlock()
	for _, h := range hooks {
		s.mu.Lock()
		f := h.f
		h.f = nil
		s.mu.Unlock()
		if f != nil {
			go f()
		}
	}
}

// endRun forgets the run's registrations and, if it was stopped, makes a
// new channel for the next one.
func (s *stopSignal) endRun(fired bool) {
	if fired {
		s.done = make(chan struct{})
	}
	s.mu.Lock()
	clear(s.hooks)
	s.hooks = s.hooks[:0]
	s.mu.Unlock()
}

// FlightCounter counts commands in flight on stripes of their own cache
// line, so that counting costs a command no line shared with other cores.
// Commands count themselves between their look for a running script and
// their end; a script that has announced itself runs once no command
// counted before the announcement is left.
type FlightCounter struct {
	stripe [64]struct {
		n atomic.Int64
		_ [56]byte
	}
}

// Enter counts a command of client who in flight; Exit counts it out.
func (f *FlightCounter) Enter(who int64) { f.stripe[who&63].n.Add(1) }
func (f *FlightCounter) Exit(who int64)  { f.stripe[who&63].n.Add(-1) }

// Idle reports that no command counted before the caller's announcement
// is still in flight. Each stripe is read once; a command entering a
// stripe after it was read sees the announcement, as the counts and the
// announcement are sequentially consistent atomics.
func (f *FlightCounter) Idle() bool {
	for i := range f.stripe {
		if f.stripe[i].n.Load() != 0 {
			return false
		}
	}
	return true
}

// Drain waits until every stripe has been seen empty once since the
// call: then no command counted before the caller's announcement is in
// flight, even while commands the announcement does not hold back keep
// coming, which Idle, asking for every stripe empty at once, might wait
// for forever. It gives up, reporting false, once stop says so.
func (f *FlightCounter) Drain(stop func() bool) bool {
	var seen [len(f.stripe)]bool
	left := len(seen)
	for {
		for i := range f.stripe {
			if !seen[i] && f.stripe[i].n.Load() == 0 {
				seen[i] = true
				left--
			}
		}
		if left == 0 {
			return true
		}
		if stop() {
			return false
		}
		time.Sleep(100 * time.Microsecond)
	}
}
