package commands

import (
	"strings"
	"time"

	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/scripting"
)

// scriptingCommands: EVAL and its kin, and SCRIPT.
func scriptingCommands() []*command {
	return []*command{
		cmd("eval", -3, "noscript stale skip_monitor no_mandatory_keys may_replicate selflock runs_script", cmdEval),
		cmd("evalsha", -3, "noscript stale skip_monitor no_mandatory_keys may_replicate selflock runs_script", cmdEvalSha),
		cmd("eval_ro", -3, "readonly noscript stale skip_monitor no_mandatory_keys selflock runs_script", cmdEvalRO),
		cmd("evalsha_ro", -3, "readonly noscript stale skip_monitor no_mandatory_keys selflock runs_script", cmdEvalShaRO),
		cmd("script", -2, "", nil).withSub(
			cmd("debug", 3, "noscript", cmdScriptDebug),
			cmd("exists", -3, "noscript", cmdScriptExists),
			cmd("flush", -2, "noscript", cmdScriptFlush),
			cmd("help", 2, "loading stale", cmdHelp),
			cmd("kill", 2, "noscript allow_busy", cmdScriptKill),
			cmd("load", 3, "noscript stale", cmdScriptLoad),
		),
	}
}

// Scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT, as Redis 7.0
// has them. The script cache, the Lua states, the run in progress and the
// combiner are package scripting's; here are the commands, the checks
// Redis makes before a script runs, and SHUTDOWN NOSAVE's way past a busy
// one (stopForShutdown). The commands a script calls go through the same table,
// checks and handlers as a client's (scripting_lua.go).

// monoBase anchors monoNow: time.Since on a time with a monotonic reading
// reads only the monotonic clock, the cheapest clock read Go offers.
var monoBase = time.Now()

// monoNow returns monotonic nanoseconds (command timing).
func monoNow() int64 { return int64(time.Since(monoBase)) }

func cmdEval(c *Ctx)      { evalGeneric(c, false, false) }
func cmdEvalSha(c *Ctx)   { evalGeneric(c, true, false) }
func cmdEvalRO(c *Ctx)    { evalGeneric(c, false, true) }
func cmdEvalShaRO(c *Ctx) { evalGeneric(c, true, true) }

const msgNoScript = "NOSCRIPT No matching script. Please use EVAL."

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
	cache := &c.Srv.scripts.Scripts
	var sc *scripting.Script
	if bySHA {
		if sc = cache.Lookup(c.Args[1]); sc == nil {
			c.W.Error(msgNoScript)
			return
		}
	} else {
		var msg string
		if sc, msg = cache.Load(c.Args[1]); sc == nil {
			c.W.Error(msg)
			return
		}
	}
	flags := sc.Flags()
	if msg := scriptRefusal(c, flags, readOnly); msg != "" {
		c.W.Error(msg)
		return
	}
	readOnly = readOnly || flags&(scripting.Compat|scripting.NoWrites) == scripting.NoWrites
	submit(c, sc, nil, c.Args[3:3+numKeys], c.Args[3+numKeys:], readOnly)
}

// scriptRefusal returns the error of Redis's scriptPrepareForRun for a
// script or function about to run with the flags it declared, or "".
// Dispatch has refused most of these already, by the flags the request
// was admitted with (commandFlags); they are checked again here for a
// script that was not known then (EVALSHA queued in MULTI before SCRIPT
// LOAD) and for scripts without a shebang, which run as EVAL's flags say
// but not on a stale replica.
func scriptRefusal(c *Ctx, flags scripting.Flags, readOnly bool) string {
	n := c.Srv.Repl
	stale := n.Replica() && !n.Set.ServeStale.Load() && !n.LinkUp()
	if flags&scripting.Compat != 0 {
		if stale {
			return msgMasterDown
		}
		return ""
	}
	if stale && flags&scripting.AllowStale == 0 {
		return "MASTERDOWN Link with MASTER is down, replica-serve-stale-data is set to 'no' and 'allow-stale' flag is not set on the script."
	}
	if flags&scripting.NoWrites == 0 {
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
	if flags&(scripting.NoWrites|scripting.AllowOOM) == 0 && c.Client.oomAtStart && c.Srv.Cfg.maxMemory.Load() != 0 {
		return "OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'"
	}
	return ""
}

// submit runs a script (sc) or a function (f) for c and returns once its
// reply is in c.W: at once inside EXEC, which holds every shard,
// otherwise through the combiner. The call is the client's own, reused
// from one EVAL to the next.
func submit(c *Ctx, sc *scripting.Script, f *scripting.Function, keys, argv [][]byte, readOnly bool) {
	call := &c.Client.eval
	call.Script, call.Function, call.Keys, call.Argv, call.ReadOnly = sc, f, keys, argv, readOnly
	call.Args, call.W, call.Caller = c.Args, c.W, c
	if c.Srv.beforeLock != nil && !c.held {
		c.Srv.beforeLock(c)
	}
	c.Srv.scripts.Submit(call, c.held)
}

// commandFlags returns the flags a request is admitted by, as Redis's
// getCommandFlags: a command's own, except that a script or function
// that declared flags (a shebang, or a library's function) writes, may
// run over maxmemory or on a stale replica by what it declared, not by
// EVAL's or FCALL's flags (scripting.Flags.CommandFlags). A script not
// known yet (EVALSHA of an unloaded SHA, a shebang that does not parse)
// keeps the command's.
func (s *Server) commandFlags(spec *cmdspec.Spec, args [][]byte) cmdspec.Flag {
	if spec.Flags&cmdspec.RunsScript == 0 || len(args) < 2 {
		return spec.Flags
	}
	var declared scripting.Flags
	switch spec.Name {
	case "eval", "eval_ro":
		f, _, msg := scripting.ParseShebang(args[1])
		if msg != "" {
			return spec.Flags
		}
		declared = f
	case "evalsha", "evalsha_ro":
		sc := s.scripts.Scripts.Lookup(args[1])
		if sc == nil {
			return spec.Flags
		}
		declared = sc.Flags()
	case "fcall", "fcall_ro":
		f := s.scripts.Functions.Lookup(args[1])
		if f == nil {
			return spec.Flags
		}
		declared = f.Flags()
	default:
		return spec.Flags
	}
	return declared.CommandFlags(spec.Flags)
}

func cmdScriptLoad(c *Ctx) {
	sc, msg := c.Srv.scripts.Scripts.Load(c.Args[2])
	if sc == nil {
		c.W.Error(msg)
		return
	}
	c.W.BulkString(sc.SHA1())
}

func cmdScriptExists(c *Ctx) {
	shas := c.Args[2:]
	c.W.Array(len(shas))
	for _, sha := range shas {
		if c.Srv.scripts.Scripts.Lookup(sha) != nil {
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
	c.Srv.scripts.FlushScripts(c.held)
	c.W.OK()
}

func cmdScriptKill(c *Ctx) { killScript(c, false) }

// killScript is SCRIPT KILL (function false) and FUNCTION KILL, which
// stop only a script of their kind.
func killScript(c *Ctx, function bool) {
	if msg := c.Srv.scripts.Kill(function); msg != "" {
		c.W.Error(msg)
		return
	}
	c.W.OK()
}

// stopForShutdown lets SHUTDOWN NOSAVE through while a script is busy, as
// Redis does, stopping the script even if it has written (nothing will be
// saved); any other SHUTDOWN is refused with BUSY.
func (s *Server) stopForShutdown(args [][]byte) bool {
	nosave := false
	for _, a := range args[1:] {
		nosave = nosave || is(a, "NOSAVE")
	}
	if !nosave {
		return false
	}
	// Sealed before the kill: the script's half must never be saved.
	if seal := s.Hooks.Seal; seal != nil {
		seal()
	}
	s.scripts.KillForShutdown()
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
