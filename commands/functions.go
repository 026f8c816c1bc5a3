package commands

import (
	"time"

	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/lua51"
	"github.com/limitkv/limitkv/scripting"
)

// functionCommands: FCALL, FCALL_RO and FUNCTION.
func functionCommands() []*command {
	return []*command{
		cmd("fcall", -3, "noscript stale skip_monitor no_mandatory_keys may_replicate selflock runs_script", cmdFCall),
		cmd("fcall_ro", -3, "readonly noscript stale skip_monitor no_mandatory_keys selflock runs_script", cmdFCallRO),
		cmd("function", -2, "", nil).withSub(
			cmd("delete", 3, "write noscript selflock", cmdFunctionDelete),
			cmd("dump", 2, "noscript", cmdFunctionDump),
			cmd("flush", -2, "write noscript selflock", cmdFunctionFlush),
			cmd("help", 2, "loading stale", cmdHelp),
			cmd("kill", 2, "noscript allow_busy", cmdFunctionKill),
			cmd("list", -2, "noscript", cmdFunctionList),
			cmd("load", -3, "write denyoom noscript selflock may_wait", cmdFunctionLoad),
			cmd("restore", -3, "write denyoom noscript selflock may_wait", cmdFunctionRestore),
			cmd("stats", 2, "noscript allow_busy", cmdFunctionStats),
		),
	}
}

// Redis 7's functions: FUNCTION LOAD, DELETE, LIST, STATS, FLUSH, KILL,
// DUMP, RESTORE, and FCALL, FCALL_RO. The libraries, their Lua state and
// FUNCTION DUMP's payload are package scripting's (its Registry); FCALL
// runs through the same combiner, sandbox, redis.* API, BUSY and kill
// handling as EVAL (scripting.go).
//
// Every change to the libraries (LOAD, DELETE, FLUSH, RESTORE) happens
// with every shard locked, as everything that runs Lua code does, and
// with the registry's lock, under which it is also sent to the replicas:
// a full sync reads the libraries under that lock together with the
// offset its copy stands for (Server.functionsForSync). Snapshots keep the
// libraries as FUNCTION DUMP's payload (FunctionsPayload,
// RestoreFunctions).

// changeFunctions runs change, a change to the libraries, with every
// shard and the registry locked, and sends the command to the replicas
// if change reports a change.
func (c *Ctx) changeFunctions(change func(reg *scripting.Registry) bool) {
	srv := c.Srv
	if !c.held {
		srv.Eng.Lock(engine.AllShards)
		defer srv.Eng.Unlock(engine.AllShards)
	}
	reg := &srv.scripts.Functions
	reg.Change(func() bool { return change(reg) }, func() { c.replicate(-1, c.Args...) })
}

func cmdFunctionLoad(c *Ctx) {
	replace := false
	i := 2
	for ; i < len(c.Args)-1; i++ {
		if !is(c.Args[i], "REPLACE") {
			c.W.ErrorVerbatim("ERR Unknown option given: " + string(c.Args[i]))
			return
		}
		replace = true
	}
	if i >= len(c.Args) {
		c.W.Error("Function code is missing")
		return
	}
	// A master's libraries load whatever time they take, as Redis's do.
	timeout := loadTimeout(c)
	cl := scripting.CompileLibrary(c.Args[i])
	c.changeFunctions(func(reg *scripting.Registry) bool {
		name, msg := reg.Create(cl, replace, timeout)
		if msg != "" {
			c.W.ErrorVerbatim("ERR " + msg)
			return false
		}
		c.W.BulkString(name)
		return true
	})
}

// loadTimeout is how long a library's code may run when c loads it:
// FUNCTION LOAD's 500 ms, or no limit for a master's (as in Redis). Redis
// lets FUNCTION RESTORE run code without limit, so that a restored
// "while true do end" stops the server for good; here it has the same
// limit as FUNCTION LOAD.
func loadTimeout(c *Ctx) time.Duration {
	if c.Client.master {
		return 0
	}
	return lua51.LoadTimeout
}

func cmdFunctionDelete(c *Ctx) {
	c.changeFunctions(func(reg *scripting.Registry) bool {
		if !reg.Delete(c.Args[2]) {
			c.W.Error("Library not found")
			return false
		}
		c.W.OK()
		return true
	})
}

func cmdFunctionFlush(c *Ctx) {
	if len(c.Args) > 3 {
		subcommandSyntaxError(c)
		return
	}
	if len(c.Args) == 3 && !is(c.Args[2], "ASYNC") && !is(c.Args[2], "SYNC") {
		c.W.Error("ERR FUNCTION FLUSH only supports SYNC|ASYNC option")
		return
	}
	c.changeFunctions(func(reg *scripting.Registry) bool {
		reg.Flush()
		c.W.OK()
		return true
	})
}

func cmdFunctionList(c *Ctx) {
	withCode := false
	var pattern []byte
	named := false
	for j := 2; j < len(c.Args); j++ {
		switch a := c.Args[j]; {
		case !withCode && is(a, "WITHCODE"):
			withCode = true
		case !named && is(a, "LIBRARYNAME"):
			if j >= len(c.Args)-1 {
				c.W.Error("library name argument was not given")
				return
			}
			j++
			pattern, named = c.Args[j], true
		default:
			c.W.ErrorVerbatim("ERR Unknown argument " + string(a))
			return
		}
	}
	libs := c.Srv.scripts.Functions.Libraries()
	if named {
		kept := libs[:0]
		for _, lib := range libs {
			if engine.Match(pattern, []byte(lib.Name()), true) {
				kept = append(kept, lib)
			}
		}
		libs = kept
	}
	c.W.Array(len(libs))
	for _, lib := range libs {
		if withCode {
			c.W.Map(4)
		} else {
			c.W.Map(3)
		}
		c.W.BulkString("library_name")
		c.W.BulkString(lib.Name())
		c.W.BulkString("engine")
		c.W.BulkString("LUA")
		c.W.BulkString("functions")
		fns := lib.Functions()
		c.W.Array(len(fns))
		for _, f := range fns {
			c.W.Map(3)
			c.W.BulkString("name")
			c.W.BulkString(f.Name())
			c.W.BulkString("description")
			if desc := f.Description(); desc != nil {
				c.W.Bulk(desc)
			} else {
				c.W.Null()
			}
			c.W.BulkString("flags")
			names := f.Flags().Names()
			c.W.Set(len(names))
			for _, name := range names {
				c.W.Simple(name)
			}
		}
		if withCode {
			c.W.BulkString("library_code")
			c.W.Bulk(lib.Code())
		}
	}
}

func cmdFunctionStats(c *Ctx) {
	rt := &c.Srv.scripts
	busy := false
	rt.ReadRunning(func(run *scripting.RunningScript) {
		if run != nil && !run.Function {
			// An EVAL's script: the BUSY that names SCRIPT KILL.
			c.W.Error(rt.BusyMsg())
			busy = true
			return
		}
		c.W.Map(2)
		c.W.BulkString("running_script")
		if run == nil {
			c.W.Null()
			return
		}
		c.W.Map(3)
		c.W.BulkString("name")
		c.W.BulkString(run.Name)
		c.W.BulkString("command")
		c.W.Array(len(run.Command))
		for _, a := range run.Command {
			c.W.Bulk(a)
		}
		c.W.BulkString("duration_ms")
		c.W.Int(int64(run.Duration / time.Millisecond))
	})
	if busy {
		return
	}
	libs, fns := rt.Functions.Counts()
	c.W.BulkString("engines")
	c.W.Map(1)
	c.W.BulkString("LUA")
	c.W.Map(2)
	c.W.BulkString("libraries_count")
	c.W.Int(int64(libs))
	c.W.BulkString("functions_count")
	c.W.Int(int64(fns))
}

func cmdFunctionKill(c *Ctx) { killScript(c, true) }

func cmdFunctionDump(c *Ctx) {
	c.W.Bulk(c.Srv.scripts.Functions.Dump())
}

func cmdFunctionRestore(c *Ctx) {
	if len(c.Args) > 4 {
		subcommandSyntaxError(c)
		return
	}
	policy := scripting.RestoreAppend
	if len(c.Args) == 4 {
		switch p := c.Args[3]; {
		case is(p, "APPEND"):
		case is(p, "REPLACE"):
			policy = scripting.RestoreReplace
		case is(p, "FLUSH"):
			policy = scripting.RestoreFlush
		default:
			c.W.Error("Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.")
			return
		}
	}
	payload, err := scripting.OpenPayload(c.Args[2])
	if err != nil {
		c.W.ErrorVerbatim("ERR " + err.Error())
		return
	}
	timeout := loadTimeout(c)
	c.changeFunctions(func(reg *scripting.Registry) bool {
		if msg := reg.Restore(payload, policy, timeout); msg != "" {
			c.W.ErrorVerbatim("ERR " + msg)
			return false
		}
		c.W.OK()
		return true
	})
}

// FunctionsPayload returns the libraries as FUNCTION DUMP's payload, and
// a number that changes whenever they do: what snapshots keep.
func (s *Server) FunctionsPayload() ([]byte, uint64) {
	return s.scripts.Functions.Snapshot()
}

// RestoreFunctions replaces the libraries with those of a payload made by
// FunctionsPayload (a snapshot's), before the server serves.
func (s *Server) RestoreFunctions(payload []byte) error {
	p, err := scripting.OpenPayload(payload)
	if err != nil {
		return err
	}
	s.Eng.Lock(engine.AllShards)
	defer s.Eng.Unlock(engine.AllShards)
	if msg := s.scripts.Functions.Replace(p); msg != "" {
		return errReply(msg)
	}
	return nil
}

// functionsForSync is the replication's hook for a full sync: the
// command that gives a replica the libraries, read under the registry's lock,
// which release lets go once the sync has read its offset, so that a
// change is either in the payload or in the stream after that offset.
func (s *Server) functionsForSync() ([][]byte, func()) {
	payload, release := s.scripts.Functions.DumpHeld()
	entry := [][]byte{[]byte("FUNCTION"), []byte("RESTORE"), payload, []byte("FLUSH")}
	return entry, release
}

func cmdFCall(c *Ctx)   { fcallGeneric(c, false) }
func cmdFCallRO(c *Ctx) { fcallGeneric(c, true) }

// fcallGeneric is FCALL and FCALL_RO, with the checks of Redis's
// fcallCommandGeneric and scriptPrepareForRun (those processCommand makes
// of the flags the function declared are dispatch's: commandFlags).
func fcallGeneric(c *Ctx, readOnly bool) {
	srv := c.Srv
	f := srv.scripts.Functions.Lookup(c.Args[1])
	if f == nil {
		c.W.Error("Function not found")
		return
	}
	numKeys, ok := engine.ParseInt(c.Args[2])
	if !ok {
		c.W.Error("Bad number of keys provided")
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
	flags := f.Flags()
	if msg := scriptRefusal(c, flags, readOnly); msg != "" {
		c.W.Error(msg)
		return
	}
	submit(c, nil, f, c.Args[3:3+numKeys], c.Args[3+numKeys:], readOnly || flags&scripting.NoWrites != 0)
}
