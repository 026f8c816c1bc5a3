package commands

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/lua51"
	"github.com/limitkv/limitkv/resp"
)

// Scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT, as Redis 7.0
// has them. A script runs with every shard locked, so that no other command
// of any connection sees the keyspace between two of its calls, which is
// what Redis's single thread gives scripts. The commands a script calls go
// through the same table, checks and handlers as a client's, with their
// replies captured and turned into Lua values.
//
// Scripts are compiled once per SHA1 and run in one Lua state per server:
// only the holder of every shard lock can run a script, so a second state
// would never run in parallel with the first.
//
// Other connections: a command that arrives while a script runs waits for
// its end, as on Redis's single thread, and gets BUSY once the script has
// run longer than busy-reply-threshold (except those flagged allow_busy,
// such as SCRIPT KILL); see awaitScript. A command that was already past
// that check when the script started runs first: commands count themselves
// in flight (inFlight) before looking for a script, and a script that has
// taken every shard lock while one is in flight lets go and tries again, so
// that no command ends up waiting on a lock behind a script it could have
// been told BUSY about.

// scriptFlags are the flags a script declares in its shebang line.
type scriptFlags uint8

const (
	// scriptCompat: no shebang; Redis's backward-compatible mode, in which
	// a script may write unless it is run with EVAL_RO.
	scriptCompat scriptFlags = 1 << iota
	scriptNoWrites
	scriptAllowOOM
	scriptAllowStale
	scriptNoCluster
	scriptAllowCrossSlot
)

var shebangFlags = []struct {
	name string
	flag scriptFlags
}{
	{"no-writes", scriptNoWrites}, {"allow-oom", scriptAllowOOM}, {"allow-stale", scriptAllowStale},
	{"no-cluster", scriptNoCluster}, {"allow-cross-slot-keys", scriptAllowCrossSlot},
}

// luaScript is a compiled script of the cache.
type luaScript struct {
	sha   string // 40 lower-case hex digits
	proto *lua.FunctionProto
	flags scriptFlags
	size  int64 // source and compiled code, for INFO's used_memory_scripts
	// fn is the compiled chunk bound to the sandbox of state fnOf; made
	// on first use, by the holder of the shard locks.
	fn   *lua.LFunction
	fnOf *lua51.State
}

// scriptEngine is the server's scripting state.
type scriptEngine struct {
	mu    sync.RWMutex
	bySHA map[string]*luaScript

	// EVALs are run by a combiner: the connection that finds the queue
	// free runs every call pending, its own and others', under one
	// acquisition of the shard locks, while the others wait for their
	// reply to be written. Handing a mutex from one EVAL to the next cost
	// a goroutine wake-up inside the serial section: 50 connections ran
	// 64k EVALSHA/s with the server's CPU two-thirds idle. queue is held
	// by the combiner only; a script run inside EXEC, which holds the
	// shard locks already, never takes it (that could deadlock with a
	// combiner waiting for the shards).
	queue     sync.Mutex
	pendingMu sync.Mutex
	pending   []*scriptCall
	batch     []*scriptCall // the combiner's, swapped with pending

	// runner belongs to whoever holds every shard lock.
	runner *luaRunner

	// running is the script in progress, for BUSY and SCRIPT KILL. It is
	// set and cleared under killMu, so that SCRIPT KILL cannot close the
	// stop channel of a run that has ended.
	running atomic.Pointer[scriptRun]
	killMu  sync.Mutex

	// inFlight counts the commands between their look for a running
	// script and their end, per stripe of client IDs.
	inFlight flightCounter

	// vmBytes is the runner's state's size after its last run (INFO's
	// used_memory_lua, see lua51/memory.go), kept here because the runner
	// itself is read only by the holder of every lock.
	vmBytes atomic.Int64
	// cacheBytes is the cached scripts' size (used_memory_scripts).
	cacheBytes atomic.Int64

	// funcs are the function libraries (functions.go), run by a runner
	// of their own.
	funcs functionRegistry
}

// cacheStats returns the number of cached scripts and their bytes.
func (se *scriptEngine) cacheStats() (n int, bytes int64) {
	se.mu.RLock()
	defer se.mu.RUnlock()
	for _, sc := range se.bySHA {
		bytes += sc.size
	}
	return len(se.bySHA), bytes
}

// scriptRun is the state of one script execution that other connections
// read: its start (for BUSY) and whether it wrote or was killed.
type scriptRun struct {
	startNs atomic.Int64 // since monoBase
	// state moves from runClean to runWrote (a write command was called) or
	// to runKilled (SCRIPT KILL), never both: SCRIPT KILL must not stop a
	// script that has written, and a killed script must not start writing.
	state atomic.Int32
	stop  stopSignal
	// ended is closed when the run ends; made by the first command that
	// waits for it (awaitScript), under killMu.
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

// monoNow returns monotonic nanoseconds (command and script timing).
func monoNow() int64 { return int64(time.Since(monoBase)) }

// scriptBusy reports whether a script has run for longer than the
// busy-reply-threshold, so that other commands must be refused with BUSY.
func (s *Server) scriptBusy() bool {
	run := s.scripts.running.Load()
	if run == nil {
		return false
	}
	return time.Duration(monoNow()-run.startNs.Load()) > s.Cfg.BusyThreshold()
}

// awaitScript makes a command that arrives while a script runs wait, as
// it would on Redis's single thread, until the script ends (ok) or has run
// past the busy-reply-threshold (not ok: the command gets BUSY); waited
// says whether it had to wait. A command that gets past this check just as
// a script starts waits on its shard locks for the whole script.
func (s *Server) awaitScript() (waited, ok bool) {
	se := &s.scripts
	run := se.running.Load()
	if run == nil {
		return false, true
	}
	left := s.Cfg.BusyThreshold() - time.Duration(monoNow()-run.startNs.Load())
	if left < 0 {
		return false, false
	}
	se.killMu.Lock()
	if se.running.Load() != run {
		se.killMu.Unlock()
		return false, true
	}
	if run.ended == nil {
		run.ended = make(chan struct{})
	}
	ended := run.ended
	se.killMu.Unlock()
	timer := time.NewTimer(left + time.Millisecond)
	defer timer.Stop()
	select {
	case <-ended:
		return true, true
	case <-timer.C:
		return true, !s.scriptBusy()
	}
}

func cmdEval(c *Ctx)      { evalGeneric(c, false, false) }
func cmdEvalSha(c *Ctx)   { evalGeneric(c, true, false) }
func cmdEvalRO(c *Ctx)    { evalGeneric(c, false, true) }
func cmdEvalShaRO(c *Ctx) { evalGeneric(c, true, true) }

// cmdScriptHelp writes Redis's text.
func cmdScriptHelp(c *Ctx) {
	c.W.Array(len(scriptHelp))
	for _, l := range scriptHelp {
		c.W.Simple(l)
	}
}

const (
	msgNoScript   = "NOSCRIPT No matching script. Please use EVAL."
	msgBusy       = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
	msgBusyFCall  = "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
	msgNotBusy    = "NOTBUSY No scripts in execution right now."
	msgUnkillable = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command."
)

// busyMsg is the BUSY refusal for the script running: EVAL's names
// SCRIPT KILL, FCALL's FUNCTION KILL.
func (se *scriptEngine) busyMsg() string {
	if run := se.running.Load(); run != nil && run.function.Load() {
		return msgBusyFCall
	}
	return msgBusy
}

var scriptHelp = []string{
	"SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"DEBUG (YES|SYNC|NO)",
	"    Set the debug mode for subsequent scripts executed.",
	"EXISTS <sha1> [<sha1> ...]",
	"    Return information about the existence of the scripts in the script cache.",
	"FLUSH [ASYNC|SYNC]",
	"    Flush the Lua scripts cache. Very dangerous on replicas.",
	"    When called without the optional mode argument, the behavior is determined by the",
	"    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
	"    * ASYNC: Asynchronously flush the scripts cache.",
	"    * SYNC: Synchronously flush the scripts cache.",
	"KILL",
	"    Kill the currently executing Lua script.",
	"LOAD <script>",
	"    Load a script into the scripts cache without executing it.",
	"HELP",
	"    Prints this help.",
}

func evalGeneric(c *Ctx, bySHA, readOnly bool) {
	if bySHA && len(c.Args[1]) != 40 {
		// Redis answers before looking at numkeys: no script has such a SHA.
		c.W.Error(msgNoScript)
		return
	}
	numKeys, ok := c.Int(2)
	if !ok {
		return
	}
	if numKeys > int64(len(c.Args)-3) {
		c.W.Error("Number of keys can't be greater than number of args")
		return
	}
	if numKeys < 0 {
		c.W.Error("Number of keys can't be negative")
		return
	}
	se := &c.Srv.scripts
	var sc *luaScript
	if bySHA {
		if sc = se.lookup(c.Args[1]); sc == nil {
			c.W.Error(msgNoScript)
			return
		}
	} else {
		var msg string
		if sc, msg = se.load(c.Args[1]); sc == nil {
			c.W.Error(msg)
			return
		}
	}
	if msg := scriptRefusal(c, sc.flags, readOnly); msg != "" {
		c.W.Error(msg)
		return
	}
	readOnly = readOnly || sc.flags&(scriptCompat|scriptNoWrites) == scriptNoWrites
	se.submit(c, sc, nil, c.Args[3:3+numKeys], c.Args[3+numKeys:], readOnly)
}

// scriptRefusal returns the error of Redis's scriptPrepareForRun for a
// script or function about to run with the flags it declared, or "".
// Dispatch has refused most of these already, by the flags the request
// was admitted with (commandFlags); they are checked again here for a
// script that was not known then (EVALSHA queued in MULTI before SCRIPT
// LOAD) and for scripts without a shebang, which run as EVAL's flags say
// but not on a stale replica.
func scriptRefusal(c *Ctx, flags scriptFlags, readOnly bool) string {
	n := c.Srv.Repl
	stale := n.Replica() && !n.Set.ServeStale.Load() && !n.LinkUp()
	if flags&scriptCompat != 0 {
		if stale {
			return msgMasterDown
		}
		return ""
	}
	if stale && flags&scriptAllowStale == 0 {
		return "MASTERDOWN Link with MASTER is down, replica-serve-stale-data is set to 'no' and 'allow-stale' flag is not set on the script."
	}
	if flags&scriptNoWrites == 0 {
		if n.Replica() && n.Set.ReadOnly.Load() && !c.Client.master {
			return "READONLY Can not run script with write flag on readonly replica"
		}
		if readOnly {
			return "Can not execute a script with write flag using *_ro command."
		}
		if n.Set.MinReplicas.Load() > 0 && !n.WriteAllowed() {
			return msgNoReplicas
		}
	}
	// No-writes implies allow-oom.
	if flags&(scriptNoWrites|scriptAllowOOM) == 0 && c.Client.oomAtStart && c.Srv.Cfg.maxMemory.Load() != 0 {
		return "OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'"
	}
	return ""
}

// submit runs a script (sc) or a function (f) for c: at once inside EXEC,
// which holds every shard, otherwise through the combiner.
func (se *scriptEngine) submit(c *Ctx, sc *luaScript, f *libFunction, keys, argv [][]byte, readOnly bool) {
	if c.held {
		se.run(c, sc, f, keys, argv, readOnly, se.begin(c.Srv, f, c.Args))
		return
	}
	call := &c.Client.eval
	if call.done == nil {
		call.done = make(chan struct{}, 1)
	}
	call.c, call.sc, call.f, call.keys, call.argv, call.readOnly = c, sc, f, keys, argv, readOnly
	se.pendingMu.Lock()
	se.pending = append(se.pending, call)
	se.pendingMu.Unlock()
	if se.queue.TryLock() {
		se.combine(c.Srv)
	}
	// Whoever holds the queue looks at the pending calls after letting it
	// go, so this one is run by this connection or by another.
	<-call.done
	*call = scriptCall{done: call.done}
}

// scriptCall is an EVAL waiting for the combiner.
type scriptCall struct {
	c          *Ctx
	sc         *luaScript
	f          *libFunction // FCALL's, instead of sc
	keys, argv [][]byte
	readOnly   bool
	done       chan struct{} // buffered: the combiner never waits on it
}

// combine runs pending calls until none is left; the caller holds queue,
// which combine releases.
func (se *scriptEngine) combine(srv *Server) {
	for {
		se.pendingMu.Lock()
		se.batch, se.pending = se.pending, se.batch[:0]
		se.pendingMu.Unlock()
		if len(se.batch) > 0 {
			se.runBatch(srv, se.batch)
			clear(se.batch)
			continue
		}
		se.queue.Unlock()
		// A call pending since the swap above found the queue taken and
		// waits: run it unless another connection has taken the queue.
		se.pendingMu.Lock()
		more := len(se.pending) > 0
		se.pendingMu.Unlock()
		if !more || !se.queue.TryLock() {
			return
		}
	}
}

// runBatch runs calls one after the other, keeping the shard locks from
// one to the next unless a command is waiting for them. Only the calls
// taken in one swap run before the locks are let go, so other commands
// get their turn between batches however many EVALs keep coming.
func (se *scriptEngine) runBatch(srv *Server, calls []*scriptCall) {
	eng := srv.Eng
	locked := false
	for _, call := range calls {
		// Announced before locking: from here on commands wait in
		// awaitScript rather than on a shard lock.
		run := se.begin(srv, call.f, call.c.Args)
		if locked && !se.inFlight.idle() {
			// A command got in between two scripts and may be blocked on
			// one of these locks: it goes first.
			eng.Unlock(engine.AllShards)
			locked = false
			time.Sleep(20 * time.Microsecond)
		}
		for !locked {
			eng.Lock(engine.AllShards)
			if se.inFlight.idle() {
				locked = true
				break
			}
			eng.Unlock(engine.AllShards)
			time.Sleep(20 * time.Microsecond)
		}
		se.runCall(call, run)
		call.done <- struct{}{}
	}
	if locked {
		eng.Unlock(engine.AllShards)
	}
}

// runCall runs one call; a panic answers that call's client with an
// error and leaves the others to run.
func (se *scriptEngine) runCall(call *scriptCall, run *scriptRun) {
	defer func() {
		if r := recover(); r != nil {
			if srv := call.c.Srv; srv.Net.OnPanic != nil {
				srv.Net.OnPanic(r)
			}
			call.c.W.Error("internal error")
		}
	}()
	se.run(call.c, call.sc, call.f, call.keys, call.argv, call.readOnly, run)
}

// begin announces a script run to other connections: an EVAL's, or
// FCALL's of function f, whose caller's arguments are args.
func (se *scriptEngine) begin(srv *Server, f *libFunction, args [][]byte) *scriptRun {
	r := se.runnerFor(srv, f != nil)
	run := &r.progress
	se.killMu.Lock()
	run.state.Store(runClean)
	run.startNs.Store(monoNow())
	run.function.Store(f != nil)
	if f != nil {
		run.fname, run.command = f.name, args
	}
	se.running.Store(run)
	se.killMu.Unlock()
	return run
}

// runnerFor returns the runner of scripts, or of functions.
func (se *scriptEngine) runnerFor(srv *Server, functions bool) *luaRunner {
	if functions {
		return se.funcs.runnerFor(srv)
	}
	if se.runner == nil {
		se.runner = newLuaRunner(srv)
	}
	return se.runner
}

// run executes a script (sc) or a function (f) announced by begin; the
// caller holds every shard lock.
func (se *scriptEngine) run(c *Ctx, sc *luaScript, f *libFunction, keys, argv [][]byte, readOnly bool, run *scriptRun) {
	r := se.runnerFor(c.Srv, f != nil)
	defer func() {
		se.killMu.Lock()
		se.running.Store(nil)
		run.fname, run.command = "", nil
		run.stop.endRun(run.state.Load() == runKilled)
		if run.ended != nil {
			close(run.ended)
			run.ended = nil
		}
		se.killMu.Unlock()
	}()

	// Scripts do not count themselves in flight: a full sync that began
	// to replace the keyspace since the call was let through is seen here,
	// under every shard lock, which the replacement needs too.
	if c.Srv.loadState.Load() != 0 {
		if msg := c.Srv.loadingRefusal(c.Client, c.Spec); msg != "" {
			c.W.Error(msg)
			return
		}
	}
	if f != nil {
		// Found before the locks were taken: the libraries may have
		// changed since (or been loaded again into a new state).
		if f = se.funcs.again(f); f == nil {
			c.W.Error("Function not found")
			return
		}
	}
	broken := r.exec(c, sc, f, keys, argv, readOnly)
	// The script's effects reach the replicas as one, unless it was
	// stopped halfway (SHUTDOWN NOSAVE): then none of it may. Inside a
	// transaction they join the transaction's.
	switch {
	case run.state.Load() == runKilled:
		c.Srv.dropEffects(r.client)
	case c.held:
		// Inside EXEC: the clients blocked on keys the script pushed to
		// are served at the transaction's end.
		c.Client.ready = append(c.Client.ready, r.client.ready...)
		clear(r.client.ready)
		r.client.ready = r.client.ready[:0]
		c.Srv.joinEffects(c.Client, r.client)
	default:
		if len(r.client.ready) > 0 {
			// Served at the script's end, every shard still held.
			sc := Ctx{Srv: c.Srv, Client: r.client, W: c.W, Now: c.Now, DB: c.DB, Spec: c.Spec, held: true}
			c.Srv.serveReady(&sc, engine.AllShards)
		}
		if off := c.Srv.propagateHeld(r.client); off != 0 {
			c.Client.woff = off
		}
	}
	if f != nil {
		if broken || r.state.Oversized() {
			se.funcs.rebuild(c.Srv)
		}
		se.funcs.noteMemory()
		return
	}
	if broken || r.state.Oversized() {
		// The next script gets a fresh state: this one is unusable, or
		// holds on to a value stack a deep recursion grew.
		fresh := newLuaRunner(c.Srv)
		fresh.state.ContinueRandom(r.state)
		se.runner = fresh
	}
	se.vmBytes.Store(int64(se.runner.state.Memory()))
}

// lookup finds a cached script by SHA1, in any case.
func (se *scriptEngine) lookup(sha []byte) *luaScript {
	if len(sha) != 40 {
		return nil
	}
	var lower [40]byte
	for i, ch := range sha {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		lower[i] = ch
	}
	se.mu.RLock()
	sc := se.bySHA[string(lower[:])]
	se.mu.RUnlock()
	return sc
}

// load returns the cached script for body, compiling and caching it first
// if needed; on failure it returns Redis's error text.
func (se *scriptEngine) load(body []byte) (*luaScript, string) {
	sum := sha1.Sum(body)
	var sha [40]byte
	hex.Encode(sha[:], sum[:])
	se.mu.RLock()
	sc := se.bySHA[string(sha[:])]
	se.mu.RUnlock()
	if sc != nil {
		return sc, ""
	}
	flags, skip, msg := parseShebang(body)
	if msg != "" {
		return nil, msg
	}
	proto, msg := compileScript(body[skip:])
	if msg != "" {
		return nil, msg
	}
	sc = &luaScript{sha: string(sha[:]), proto: proto, flags: flags,
		size: int64(len(body)+len(sha)) + lua51.ProtoBytes(proto)}
	se.mu.Lock()
	if old := se.bySHA[sc.sha]; old != nil {
		sc = old // compiled meanwhile by another connection
	} else {
		if se.bySHA == nil {
			se.bySHA = make(map[string]*luaScript)
		}
		se.bySHA[sc.sha] = sc
		se.cacheBytes.Add(sc.size)
	}
	se.mu.Unlock()
	return sc, ""
}

// parseShebang reads the "#!lua flags=..." line a script may start with. It
// returns the flags and how many bytes to skip before compiling: the line
// without its line feed, so that line numbers stay those of the body.
func parseShebang(body []byte) (scriptFlags, int, string) {
	if !bytes.HasPrefix(body, []byte("#!")) {
		return scriptCompat, 0, ""
	}
	end := bytes.IndexByte(body, '\n')
	if end < 0 {
		return 0, 0, "Invalid script shebang"
	}
	parts, ok := resp.SplitArgs(body[:end])
	if !ok || len(parts) == 0 {
		return 0, 0, "Invalid engine in script shebang"
	}
	if string(parts[0]) != "#!lua" {
		return 0, 0, "Unexpected engine in script shebang: " + string(parts[0])
	}
	var flags scriptFlags
	for _, p := range parts[1:] {
		list, ok := bytes.CutPrefix(p, []byte("flags="))
		if !ok {
			return 0, 0, "Unknown lua shebang option: " + string(p)
		}
		if len(list) == 0 {
			continue
		}
		for _, name := range bytes.Split(list, []byte(",")) {
			known := false
			for _, f := range shebangFlags {
				if string(name) == f.name {
					flags |= f.flag
					known = true
					break
				}
			}
			if !known {
				return 0, 0, "Unexpected flag in script shebang: " + string(name)
			}
		}
	}
	return flags, end, ""
}

// commandFlags returns the flags a request is admitted by, as Redis's
// getCommandFlags: a command's own, except that a script or function
// that declared flags (a shebang, or a library's function) writes, may
// run over maxmemory or on a stale replica by what it declared, not by
// EVAL's or FCALL's flags. So a no-writes script runs during CLIENT
// PAUSE WRITE and without enough replicas, and one that may write is
// refused as a write before it starts. A script not known yet (EVALSHA
// of an unloaded SHA, a shebang that does not parse) keeps the command's.
func (s *Server) commandFlags(spec *cmdspec.Spec, args [][]byte) cmdspec.Flag {
	if spec.Flags&cmdspec.RunsScript == 0 || len(args) < 2 {
		return spec.Flags
	}
	var declared scriptFlags
	switch spec.Name {
	case "eval", "eval_ro":
		f, _, msg := parseShebang(args[1])
		if msg != "" {
			return spec.Flags
		}
		declared = f
	case "evalsha", "evalsha_ro":
		sc := s.scripts.lookup(args[1])
		if sc == nil {
			return spec.Flags
		}
		declared = sc.flags
	case "fcall", "fcall_ro":
		f := s.scripts.funcs.lookup(args[1])
		if f == nil {
			return spec.Flags
		}
		declared = f.flags
	default:
		return spec.Flags
	}
	if declared&scriptCompat != 0 {
		return spec.Flags
	}
	flags := spec.Flags &^ (cmdspec.Write | cmdspec.DenyOOM | cmdspec.Stale | cmdspec.MayReplicate)
	if declared&scriptNoWrites == 0 {
		flags |= cmdspec.Write
		if declared&scriptAllowOOM == 0 {
			flags |= cmdspec.DenyOOM
		}
	}
	if declared&scriptAllowStale != 0 {
		flags |= cmdspec.Stale
	}
	return flags
}

// compileScript compiles a script body into a function prototype, or
// returns Redis's error text for a script that does not compile.
func compileScript(body []byte) (*lua.FunctionProto, string) {
	proto, err := lua51.Compile(body)
	if err != nil {
		return nil, "Error compiling script (new function): " + err.Error()
	}
	return proto, ""
}

func cmdScriptLoad(c *Ctx) {
	sc, msg := c.Srv.scripts.load(c.Args[2])
	if sc == nil {
		c.W.Error(msg)
		return
	}
	c.W.BulkString(sc.sha)
}

func cmdScriptExists(c *Ctx) {
	shas := c.Args[2:]
	c.W.Array(len(shas))
	for _, sha := range shas {
		if c.Srv.scripts.lookup(sha) != nil {
			c.W.Int(1)
		} else {
			c.W.Int(0)
		}
	}
}

func cmdScriptFlush(c *Ctx) {
	if len(c.Args) > 3 || len(c.Args) == 3 && !is(c.Args[2], "SYNC") && !is(c.Args[2], "ASYNC") {
		c.W.Error("ERR SCRIPT FLUSH only support SYNC|ASYNC option")
		return
	}
	se := &c.Srv.scripts
	se.mu.Lock()
	se.bySHA = nil
	se.cacheBytes.Store(0)
	se.mu.Unlock()
	// As Redis does, start over with a fresh Lua state: the old one's
	// functions for the flushed scripts, and the stacks and KEYS/ARGV
	// tables big runs grew, go with it. The runner belongs to whoever
	// holds every shard.
	if !c.held {
		c.Srv.Eng.Lock(engine.AllShards)
		defer c.Srv.Eng.Unlock(engine.AllShards)
	}
	if old := se.runner; old != nil {
		fresh := newLuaRunner(c.Srv)
		fresh.state.ContinueRandom(old.state)
		se.runner = fresh
		se.vmBytes.Store(int64(fresh.state.Memory()))
	}
	c.W.OK()
}

func cmdScriptKill(c *Ctx) { killScript(c, false) }

// killScript is SCRIPT KILL (function false) and FUNCTION KILL, which
// stop only a script of their kind, in Redis's order of refusals.
func killScript(c *Ctx, function bool) {
	se := &c.Srv.scripts
	se.killMu.Lock()
	defer se.killMu.Unlock()
	run := se.running.Load()
	if run == nil {
		c.W.Error(msgNotBusy)
		return
	}
	if run.state.Load() == runWrote {
		c.W.Error(msgUnkillable)
		return
	}
	if run.function.Load() != function {
		if function {
			c.W.Error(msgBusy)
		} else {
			c.W.Error(msgBusyFCall)
		}
		return
	}
	switch {
	case run.state.CompareAndSwap(runClean, runKilled):
		run.stop.fire()
	case run.state.Load() == runWrote:
		c.W.Error(msgUnkillable)
		return
	}
	c.W.OK()
}

// stopForShutdown lets SHUTDOWN NOSAVE through while a script is busy, as
// Redis does, stopping the script even if it has written (nothing will be
// saved); any other SHUTDOWN is refused with BUSY.
func (se *scriptEngine) stopForShutdown(srv *Server, args [][]byte) bool {
	nosave := false
	for _, a := range args[1:] {
		nosave = nosave || is(a, "NOSAVE")
	}
	if !nosave {
		return false
	}
	// Sealed before the kill: the script's half must never be saved.
	if seal := srv.Hooks.Seal; seal != nil {
		seal()
	}
	se.killMu.Lock()
	defer se.killMu.Unlock()
	if run := se.running.Load(); run != nil && run.state.Swap(runKilled) != runKilled {
		run.stop.fire()
	}
	return true
}

// cmdScriptDebug accepts NO, the debugger being off; limitkv has no Lua
// debugger to turn on.
func cmdScriptDebug(c *Ctx) {
	switch mode := c.Args[2]; {
	case is(mode, "NO"):
		c.W.OK()
	case is(mode, "YES"), is(mode, "SYNC"):
		c.W.Error("limitkv has no Lua debugger: SCRIPT DEBUG " + strings.ToUpper(string(mode)) + " is not supported")
	default:
		c.W.Error("Use SCRIPT DEBUG YES/SYNC/NO")
	}
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
		return errScriptKilled
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

var errScriptKilled = errReply("ERR Script killed by user with SCRIPT KILL...")

// flightCounter counts commands in flight on stripes of their own cache
// line, so that counting costs a command no line shared with other cores.
type flightCounter struct {
	stripe [64]struct {
		n atomic.Int64
		_ [56]byte
	}
}

func (f *flightCounter) enter(who int64) { f.stripe[who&63].n.Add(1) }
func (f *flightCounter) exit(who int64)  { f.stripe[who&63].n.Add(-1) }

// idle reports that no command counted before the caller's announcement is
// still in flight. Each stripe is read once; a command entering a stripe
// after it was read sees the announcement, as the counts and the
// announcement are sequentially consistent atomics.
func (f *flightCounter) idle() bool {
	for i := range f.stripe {
		if f.stripe[i].n.Load() != 0 {
			return false
		}
	}
	return true
}
