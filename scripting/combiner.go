package scripting

import (
	"sync"
	"time"

	"github.com/limitkv/limitkv/resp"
)

// Call is one EVAL or FCALL to run: what Submit runs, and what the
// combiner queues. A connection keeps one and reuses it.
type Call struct {
	// Script is EVAL's script, Function FCALL's function instead.
	Script   *Script
	Function *Function
	// Keys and Argv are the script's KEYS and ARGV.
	Keys, Argv [][]byte
	// ReadOnly: EVAL_RO, FCALL_RO, or a no-writes script.
	ReadOnly bool
	// Args is the caller's command, which FUNCTION STATS shows.
	Args [][]byte
	// W gets the reply.
	W *resp.Writer
	// Caller is the server's request that runs the call, handed to the
	// Session untouched.
	Caller any

	done chan struct{} // buffered: the combiner never waits on it
}

// combiner runs EVALs: the connection that finds the queue free runs
// every call pending, its own and others', under one acquisition of the
// shard locks, while the others wait for their reply to be written.
// Handing a mutex from one EVAL to the next cost a goroutine wake-up
// inside the serial section: 50 connections ran 64k EVALSHA/s with the
// server's CPU two-thirds idle. queue is held by the combiner only; a
// script run inside EXEC, which holds the shard locks already, never
// takes it (that could deadlock with a combiner waiting for the shards).
type combiner struct {
	queue     sync.Mutex
	pendingMu sync.Mutex
	pending   []*Call
	batch     []*Call // the combiner's, swapped with pending
}

// Submit runs call and returns once its reply is written: at once if
// held (inside EXEC, whose caller holds every shard lock), otherwise
// through the combiner.
func (rt *Runtime) Submit(call *Call, held bool) {
	if held {
		rt.run(call, rt.begin(call))
	} else {
		if call.done == nil {
			call.done = make(chan struct{}, 1)
		}
		rt.pendingMu.Lock()
		rt.pending = append(rt.pending, call)
		rt.pendingMu.Unlock()
		if rt.queue.TryLock() {
			rt.combine()
		}
		// Whoever holds the queue looks at the pending calls after
		// letting it go, so this one is run by this connection or by
		// another.
		<-call.done
	}
	*call = Call{done: call.done}
}

// combine runs pending calls until none is left; the caller holds queue,
// which combine releases.
func (rt *Runtime) combine() {
	for {
		rt.pendingMu.Lock()
		rt.batch, rt.pending = rt.pending, rt.batch[:0]
		rt.pendingMu.Unlock()
		if len(rt.batch) > 0 {
			rt.runBatch(rt.batch)
			clear(rt.batch)
			continue
		}
		rt.queue.Unlock()
		// A call pending since the swap above found the queue taken and
		// waits: run it unless another connection has taken the queue.
		rt.pendingMu.Lock()
		more := len(rt.pending) > 0
		rt.pendingMu.Unlock()
		if !more || !rt.queue.TryLock() {
			return
		}
	}
}

// runBatch runs calls one after the other, keeping the shard locks from
// one to the next unless a command is waiting for them. Only the calls
// taken in one swap run before the locks are let go, so other commands
// get their turn between batches however many EVALs keep coming.
func (rt *Runtime) runBatch(calls []*Call) {
	locked := false
	for _, call := range calls {
		// Announced before locking: from here on commands wait in
		// Await rather than on a shard lock.
		run := rt.begin(call)
		if locked && !rt.InFlight.Idle() {
			// A command got in between two scripts and may be blocked on
			// one of these locks: it goes first.
			rt.host.UnlockAll()
			locked = false
			time.Sleep(20 * time.Microsecond)
		}
		for !locked {
			rt.host.LockAll()
			if rt.InFlight.Idle() {
				locked = true
				break
			}
			rt.host.UnlockAll()
			time.Sleep(20 * time.Microsecond)
		}
		rt.runCall(call, run)
		call.done <- struct{}{}
	}
	if locked {
		rt.host.UnlockAll()
	}
}

// runCall runs one call; a panic answers that call's client with an
// error and leaves the others to run.
func (rt *Runtime) runCall(call *Call, run *runState) {
	defer func() {
		if r := recover(); r != nil {
			rt.host.Panicked(r)
			call.W.Error("internal error")
		}
	}()
	rt.run(call, run)
}
