package scripting

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/lua51"
	"github.com/limitkv/limitkv/resp"
)

// Host is the server a Runtime runs scripts for.
type Host interface {
	// LockAll takes every shard lock, UnlockAll lets them go: only their
	// holder runs Lua code.
	LockAll()
	UnlockAll()
	// NewSession makes the server's side of a new Lua state: the client
	// its scripts' commands run as.
	NewSession() Session
	// BusyThreshold is busy-reply-threshold: how long a script runs
	// before other commands are refused with BUSY. It is read only while
	// a script runs, so that it costs the commands nothing otherwise.
	BusyThreshold() time.Duration
	// Log writes a line of the server's log (redis.log, a script that
	// panicked).
	Log(level slog.Level, msg string, args ...any)
	// Panicked reports a panic the combiner recovered from, whose
	// caller was answered "internal error".
	Panicked(v any)
}

// Session is the server's side of one Lua state: the client the
// commands a script calls run as, on behalf of the request that runs
// the script (Call.Caller, handed to it untouched). Its methods are
// called by the holder of every shard lock.
type Session interface {
	// Refusal returns the server's refusal of a run for caller, found
	// under the shard locks just before it would start (a full sync
	// began to replace the keyspace since the request was admitted), or
	// "" to run it.
	Refusal(caller any) string
	// Begin starts a run for caller: the script runs as its user, in
	// its database. End follows.
	Begin(caller any)
	// Command finds the command argv names and checks, with Redis's
	// texts and in Redis's order, that the running script may call it,
	// by what it declared and did (rules). A refusal starting with "-"
	// has a code of its own; other texts get ERR.
	Command(argv [][]byte, rules CallRules) (*cmdspec.Spec, string)
	// Call runs a command Command found, its reply into w.
	Call(spec *cmdspec.Spec, argv [][]byte, w *resp.Writer)
	// ACLAllows is redis.acl_check_cmd: whether the caller's user may
	// run argv, its keys and channels included; known is false for a
	// command the server lacks.
	ACLAllows(argv [][]byte) (allowed, known bool)
	// CountError counts an error reply in the server's error stats.
	CountError(reply []byte)
	// End ends the run Begin started.
	End(out Outcome)
}

// CallRules are what the running script declared and did, by which a
// Session decides whether it may call a command.
type CallRules struct {
	// ReadOnly: EVAL_RO or FCALL_RO, or a script that declared
	// no-writes: no write command may be called.
	ReadOnly bool
	// AllowOOM: the script declared allow-oom.
	AllowOOM bool
	// state is the run's, which Clean reads.
	state *atomic.Int32
}

// Clean reports that the script has not written yet (nor been killed):
// until it does, it may be refused its first write (a read-only replica,
// too few replicas, memory over maxmemory when it began). It is read
// when asked, as SCRIPT KILL may change it meanwhile.
func (r CallRules) Clean() bool { return r.state.Load() == runClean }

// Outcome is how a run ended.
type Outcome struct {
	// Killed: the run was stopped halfway (SCRIPT KILL, SHUTDOWN
	// NOSAVE), so none of its effects may reach the replicas.
	Killed bool
	// Counted: the runtime counted the error replies in the reply it
	// wrote (with CountError), wherever they were in it, and Failed
	// says whether there were any: the request is then a failed call.
	// Not counted when the Lua state broke: the reply is one error, the
	// server's to count.
	Counted, Failed bool
}

// Runtime is a server's scripting: the script cache, the function
// libraries, the Lua states that run both, the run in progress and the
// combiner.
type Runtime struct {
	host    Host
	version string

	// Scripts are EVAL's, Functions FCALL's.
	Scripts   Cache
	Functions Registry

	// runner runs the scripts; it belongs to whoever holds every shard
	// lock.
	runner *runner
	// vmBytes is the runner's state's size after its last run (INFO's
	// used_memory_lua, see lua51/memory.go), kept here because the runner
	// itself is read only by the holder of every lock.
	vmBytes atomic.Int64

	// running is the script in progress, for BUSY and SCRIPT KILL. It is
	// set and cleared under killMu, so that SCRIPT KILL cannot close the
	// stop channel of a run that has ended.
	running atomic.Pointer[runState]
	killMu  sync.Mutex

	// InFlight counts the commands between their look for a running
	// script and their end, per stripe of client IDs.
	InFlight FlightCounter

	combiner
}

// Init readies a zero Runtime for host; redisVersion is the Redis
// release scripts see (redis.REDIS_VERSION). A server keeps its Runtime
// by value, as every command reads whether a script runs: no pointer to
// follow first.
func (rt *Runtime) Init(host Host, redisVersion string) {
	rt.host, rt.version = host, redisVersion
	rt.Functions.rt = rt
}

// VMBytes returns the size of the scripts' Lua state (used_memory_lua).
func (rt *Runtime) VMBytes() int64 { return rt.vmBytes.Load() }

// ScriptState returns the Lua state scripts run in, which changes when
// they get a fresh one; nil before the first script. Only the holder of
// every shard lock may use it.
func (rt *Runtime) ScriptState() *lua51.State {
	if rt.runner == nil {
		return nil
	}
	return rt.runner.state
}

// FlushScripts is SCRIPT FLUSH: the cache is emptied and, as Redis does,
// scripts start over with a fresh Lua state: the old one's functions for
// the flushed scripts, and the stacks and KEYS/ARGV tables big runs grew,
// go with it. held says the caller holds every shard lock already.
func (rt *Runtime) FlushScripts(held bool) {
	rt.Scripts.flush()
	if !held {
		rt.host.LockAll()
		defer rt.host.UnlockAll()
	}
	if old := rt.runner; old != nil {
		rt.runner = rt.freshRunner(old)
		rt.vmBytes.Store(int64(rt.runner.state.Memory()))
	}
}

// runnerFor returns the runner of scripts, or of functions.
func (rt *Runtime) runnerFor(functions bool) *runner {
	if functions {
		return rt.Functions.runnerFor()
	}
	if rt.runner == nil {
		rt.runner = newRunner(rt, false)
	}
	return rt.runner
}

// freshRunner replaces old with a runner of a new state, whose
// math.random goes on from where old's left off, as Redis never reseeds
// it.
func (rt *Runtime) freshRunner(old *runner) *runner {
	fresh := newRunner(rt, old.functions)
	fresh.state.ContinueRandom(old.state)
	return fresh
}

// run executes call, announced by begin; the caller holds every shard
// lock.
func (rt *Runtime) run(call *Call, run *runState) {
	f := call.Function
	r := rt.runnerFor(f != nil)
	defer rt.end(run)

	// Scripts do not count themselves in flight: a full sync that began
	// to replace the keyspace since the call was let through is seen here,
	// under every shard lock, which the replacement needs too.
	if msg := r.sess.Refusal(call.Caller); msg != "" {
		call.W.Error(msg)
		return
	}
	if f != nil {
		// Found before the locks were taken: the libraries may have
		// changed since (or been loaded again into a new state).
		if f = rt.Functions.again(f); f == nil {
			call.W.Error("Function not found")
			return
		}
	}
	out, broken := r.exec(call, f)
	// The script's effects reach the replicas as one, unless it was
	// stopped halfway (SHUTDOWN NOSAVE): then none of it may.
	out.Killed = run.state.Load() == runKilled
	r.sess.End(out)
	if f != nil {
		if broken || r.state.Oversized() {
			rt.Functions.rebuild()
		}
		rt.Functions.noteMemory()
		return
	}
	if broken || r.state.Oversized() {
		// The next script gets a fresh state: this one is unusable, or
		// holds on to a value stack a deep recursion grew.
		rt.runner = rt.freshRunner(r)
	}
	rt.vmBytes.Store(int64(rt.runner.state.Memory()))
}
