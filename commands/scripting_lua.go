package commands

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"log/slog"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/limitkv/limitkv/acl"
	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/lua51"
	"github.com/limitkv/limitkv/resp"
)

// The script runner: a Lua state (package lua51) with Redis's "redis"
// library, whose calls run commands through the server's table.

// luaRunner runs scripts for the server, set up once. Only the holder of
// every shard lock uses it.
type luaRunner struct {
	srv   *Server
	state *lua51.State
	// replies captures the replies of the commands a script calls; sub is
	// the context they run with, client the script's own client (its own
	// SELECTed database, as Redis's Lua client has).
	replies  *resp.Writer
	sub      Ctx
	client   *Client
	progress scriptRun

	// The run in progress.
	caller   *Ctx
	readOnly bool
	allowOOM bool // the script declared allow-oom
	proto    int  // RESP version of the replies scripts get (redis.setresp)
	db       int
}

func newLuaRunner(srv *Server) *luaRunner { return newRunner(srv, false) }

// newRunner makes the runner of scripts, or of functions, whose state
// also has the API a library's code sees while it is loaded.
func newRunner(srv *Server, functions bool) *luaRunner {
	r := &luaRunner{
		srv:     srv,
		replies: resp.NewWriter(2),
		client:  &Client{srv: srv},
	}
	r.client.authed = true
	r.client.multiLen.Store(-1)
	r.progress.stop.done = make(chan struct{})
	opts := lua51.Options{Context: &r.progress.stop, Redis: r.redisLibrary}
	if functions {
		opts.Library = r.libraryAPI
	}
	r.state = lua51.NewState(opts)
	return r
}

// redisLibrary builds the "redis" table.
func (r *luaRunner) redisLibrary(L *lua.LState) *lua.LTable {
	t := L.NewTable()
	fns := map[string]lua.LGFunction{
		"call":               func(L *lua.LState) int { return r.call(L, true) },
		"pcall":              func(L *lua.LState) int { return r.call(L, false) },
		"error_reply":        func(L *lua.LState) int { return singleFieldTable(L, "err") },
		"status_reply":       func(L *lua.LState) int { return singleFieldTable(L, "ok") },
		"sha1hex":            luaSHA1Hex,
		"log":                r.log,
		"setresp":            r.setResp,
		"set_repl":           luaSetRepl,
		"replicate_commands": func(L *lua.LState) int { L.Push(lua.LTrue); return 1 },
		// Outside the debugger, which limitkv has not, Redis's breakpoint
		// returns false and debug does nothing.
		"breakpoint":    func(L *lua.LState) int { L.Push(lua.LFalse); return 1 },
		"debug":         func(L *lua.LState) int { return 0 },
		"acl_check_cmd": r.aclCheckCmd,
	}
	for name, fn := range fns {
		t.RawSetString(name, L.NewFunction(fn))
	}
	for name, v := range map[string]int{
		"LOG_DEBUG": 0, "LOG_VERBOSE": 1, "LOG_NOTICE": 2, "LOG_WARNING": 3,
		"REPL_NONE": 0, "REPL_AOF": 1, "REPL_SLAVE": 2, "REPL_REPLICA": 2, "REPL_ALL": 3,
	} {
		t.RawSetString(name, lua.LNumber(v))
	}
	t.RawSetString("REDIS_VERSION", lua.LString(RedisVersion))
	t.RawSetString("REDIS_VERSION_NUM", lua.LNumber(redisVersionNum()))
	return t
}

// redisVersionNum is the version as Redis's REDIS_VERSION_NUM: 0x00MMmmpp.
func redisVersionNum() int {
	n := 0
	for _, part := range strings.SplitN(RedisVersion, ".", 3) {
		v, _ := strconv.Atoi(part)
		n = n<<8 | v
	}
	return n
}

// exec runs one script (sc), or one function (f) of a functions'
// runner, for c and writes its reply to c.W. It reports whether the Lua
// state is broken: gopher-lua lets an error escape PCall when its value
// stack is full while it handles another error, leaving the state
// unusable.
func (r *luaRunner) exec(c *Ctx, sc *luaScript, f *libFunction, keys, argv [][]byte, readOnly bool) (broken bool) {
	name, flags, chunk := "", scriptFlags(0), lua51.ChunkName
	if f != nil {
		name, flags, chunk = f.name, f.flags, lua51.FunctionChunkName
	} else {
		name, flags = sc.sha, sc.flags
	}
	r.caller, r.readOnly, r.proto, r.db = c, readOnly, 2, c.DB
	r.allowOOM = flags&(scriptCompat|scriptAllowOOM) == scriptAllowOOM
	r.replies.SetProto(2)
	r.client.db.Store(int32(c.DB))
	r.client.user.Store(c.Client.user.Load()) // the script runs as its caller's user
	defer func() {
		r.caller = nil
		c.Srv.stats.Commands.Add(r.client.commands.Swap(0))
		if p := recover(); p != nil {
			broken = true
			msg := "stack overflow"
			if !lua51.StackOverflow(p) {
				c.Srv.Log.Error("script panicked", "panic", p, "script", name)
				msg = "internal error"
			}
			c.W.ErrorVerbatim("ERR " + chunk + ":1: " + msg + " script: " + name + ", on @" + chunk + ":1.")
		}
	}()
	if f == nil && sc.fnOf != r.state {
		sc.fn = r.state.Bind(sc.proto)
		sc.fnOf = r.state
	}
	// The errors of the reply, which may be anywhere in it, are counted
	// here, except those counted already when a command the script called
	// failed; any of them makes the script's command a failed call.
	failed := false
	onError := func(reply []byte, counted bool) {
		failed = true
		if !counted {
			c.Srv.countError(reply)
		}
	}
	n := c.W.Len()
	var v lua.LValue
	var err error
	if f != nil {
		v, err = r.state.CallFunction(f.fn, keys, argv)
	} else {
		v, err = r.state.Run(sc.fn, keys, argv)
	}
	if err != nil {
		lua51.WriteError(c.W, err, name)
		onError(c.W.Bytes()[n:], lua51.ErrorCounted(err, nil))
	} else {
		lua51.WriteReply(c.W, v, r.proto, onError)
	}
	c.errorsCounted, c.failedReply = true, failed
	return false
}

// call is redis.call (raise) and redis.pcall: run a command from the
// script, as Redis's scriptCall checks and runs it, and return its reply as
// a Lua value.
func (r *luaRunner) call(L *lua.LState, raise bool) int {
	argv, msg := commandArgs(L)
	if msg != "" {
		return callFailed(L, raise, lua51.ErrorTable(L, msg))
	}
	spec, msg := r.resolveCall(argv)
	if msg != "" {
		// As Redis's scriptCall counts a refusal: by its code.
		if msg[0] == '-' {
			r.srv.countError([]byte(msg))
		} else {
			r.srv.countError(codeERR)
		}
		t := lua51.ErrorTable(L, msg)
		// Redis marks the errors of calls it refused as already counted.
		t.RawSetString("ignore_error_stats_update", lua.LTrue)
		return callFailed(L, raise, t)
	}
	if spec.Flags&cmdspec.Write != 0 && !r.progress.state.CompareAndSwap(runClean, runWrote) && r.progress.state.Load() == runKilled {
		L.Error(lua51.ErrorTable(L, "-"+errScriptKilled.Error()), 0)
	}
	r.replies.Reset()
	r.sub = Ctx{Srv: r.srv, Client: r.client, W: r.replies, Args: argv, Now: r.caller.Now, DB: r.db, Spec: spec, held: true, script: true}
	r.srv.runGuarded(&r.sub)
	r.db = r.sub.DB
	r.sub = Ctx{}
	v, isErr, ok := lua51.ReplyToLua(L, r.replies.Bytes())
	if !ok {
		v, isErr = lua51.ErrorTable(L, "internal error: malformed reply"), true
	}
	if isErr && raise {
		L.Error(v, 0)
	}
	L.Push(v)
	return 1
}

func callFailed(L *lua.LState, raise bool, t *lua.LTable) int {
	if raise {
		L.Error(t, 0)
	}
	L.Push(t)
	return 1
}

// resolveCall finds the command a script calls and checks that the script
// may run it, with Redis's texts and in Redis's order.
func (r *luaRunner) resolveCall(argv [][]byte) (*cmdspec.Spec, string) {
	spec := r.srv.Table.Lookup(argv[0])
	if spec != nil && len(spec.Sub) > 0 && len(argv) >= 2 {
		spec = spec.LookupSub(argv[1])
	}
	if spec == nil {
		return nil, "Unknown Redis command called from script"
	}
	if !spec.ArityOK(len(argv)) {
		r.srv.cmd(spec).reject.Add(1)
		return nil, "Wrong number of args calling Redis command from script"
	}
	if spec.Flags&cmdspec.NoScript != 0 {
		r.srv.cmd(spec).reject.Add(1)
		return nil, "This Redis command is not allowed from script"
	}
	// Redis's scriptVerifyAllowStale: a script runs on a stale replica
	// only if it declared allow-stale, and may call only stale commands.
	if n := r.srv.Repl; spec.Flags&cmdspec.Stale == 0 && n.Replica() && !n.Set.ServeStale.Load() && !n.LinkUp() {
		r.srv.cmd(spec).reject.Add(1)
		return nil, "Can not execute the command on a stale replica"
	}
	if msg := r.srv.checkScriptCall(r.caller.Client, spec, argv); msg != "" {
		r.srv.cmd(spec).reject.Add(1)
		return nil, msg
	}
	if r.readOnly && spec.Flags&(cmdspec.Write|cmdspec.MayReplicate) != 0 {
		r.srv.cmd(spec).reject.Add(1)
		return nil, "Write commands are not allowed from read-only scripts."
	}
	// Redis's scriptVerifyWriteCommandAllow: a script that has not written
	// yet may not start writing on a read-only replica or without enough
	// good replicas (a script without a shebang, admitted as a read); once
	// it has written, it must be let finish.
	if spec.Flags&cmdspec.Write != 0 && r.progress.state.Load() == runClean {
		n := r.srv.Repl
		if n.Replica() && n.Set.ReadOnly.Load() && !r.caller.Client.master {
			r.srv.cmd(spec).reject.Add(1)
			return nil, "-" + msgReadOnlyReplica
		}
		if n.Set.MinReplicas.Load() > 0 && !n.WriteAllowed() {
			r.srv.cmd(spec).reject.Add(1)
			return nil, "-" + msgNoReplicas
		}
	}
	// Redis's scriptVerifyOOM: memory was over maxmemory when the script
	// began, and this would be its first write: refuse it. After a write
	// the script must be let finish.
	if spec.Flags&cmdspec.DenyOOM != 0 && !r.allowOOM && r.caller.Client.oomAtStart &&
		r.srv.Cfg.maxMemory.Load() != 0 && r.progress.state.Load() == runClean {
		r.srv.cmd(spec).reject.Add(1)
		return nil, "-" + msgOOM
	}
	return spec, ""
}

// commandArgs turns redis.call's arguments into a command: strings as they
// are, numbers as Redis formats them ("%.17g"). The bytes are copied into
// one new buffer, since a command may keep its arguments.
func commandArgs(L *lua.LState) ([][]byte, string) {
	n := L.GetTop()
	if n == 0 {
		return nil, "Please specify at least one argument for this redis lib call"
	}
	size := 0
	for i := 1; i <= n; i++ {
		switch v := L.Get(i).(type) {
		case lua.LString:
			size += len(v)
		case lua.LNumber:
			size += 32
		default:
			return nil, "Lua redis lib command arguments must be strings or integers"
		}
	}
	buf := make([]byte, 0, size)
	argv := make([][]byte, n)
	for i := 1; i <= n; i++ {
		start := len(buf)
		switch v := L.Get(i).(type) {
		case lua.LString:
			buf = append(buf, v...)
		case lua.LNumber:
			buf = lua51.AppendFloat(buf, float64(v), 17)
		}
		argv[i-1] = buf[start:len(buf):len(buf)]
	}
	return argv, ""
}

// singleFieldTable is redis.error_reply and redis.status_reply.
func singleFieldTable(L *lua.LState, field string) int {
	s, ok := L.Get(1).(lua.LString)
	if L.GetTop() != 1 || !ok {
		L.Push(lua51.ErrorTable(L, "wrong number or type of arguments"))
		return 1
	}
	if field == "err" {
		msg := string(s)
		if !strings.HasPrefix(msg, "-") {
			msg = "-" + msg
		}
		L.Push(lua51.ErrorTable(L, msg))
		return 1
	}
	t := L.CreateTable(0, 1)
	t.RawSetString(field, s)
	L.Push(t)
	return 1
}

// raiseRedisError raises msg as Redis's library functions do: as an error
// table, without a position.
func raiseRedisError(L *lua.LState, msg string) {
	L.Error(lua51.ErrorTable(L, msg), 0)
}

func luaSHA1Hex(L *lua.LState) int {
	if L.GetTop() != 1 {
		raiseRedisError(L, "wrong number of arguments")
	}
	sum := sha1.Sum([]byte(lua51.ToString(L.Get(1))))
	L.Push(lua.LString(hex.EncodeToString(sum[:])))
	return 1
}

func (r *luaRunner) log(L *lua.LState) int {
	argc := L.GetTop()
	if argc < 2 {
		raiseRedisError(L, "redis.log() requires two arguments or more.")
	}
	level, ok := lua51.ToNumber(L.Get(1))
	if !ok {
		raiseRedisError(L, "First argument must be a number (log level).")
	}
	if level < 0 || level > 3 || level != level {
		raiseRedisError(L, "Invalid debug level.")
	}
	var msg strings.Builder
	for i := 2; i <= argc; i++ {
		v := L.Get(i)
		if !lua.LVCanConvToString(v) {
			continue
		}
		if i != 2 {
			msg.WriteByte(' ')
		}
		msg.WriteString(lua51.ToString(v))
	}
	// Redis's levels as the loglevel setting maps them onto slog's.
	slogLevel := [...]slog.Level{slog.LevelDebug, slog.LevelDebug + 2, slog.LevelInfo, slog.LevelWarn}[int(level)]
	r.srv.Log.Log(context.Background(), slogLevel, msg.String(), "source", "script")
	return 0
}

func (r *luaRunner) setResp(L *lua.LState) int {
	if L.GetTop() != 1 {
		raiseRedisError(L, "redis.setresp() requires one argument.")
	}
	v, _ := lua51.ToNumber(L.Get(1))
	if v != 2 && v != 3 {
		raiseRedisError(L, "RESP version must be 2 or 3.")
	}
	r.proto = int(v)
	r.replies.SetProto(r.proto)
	return 0
}

// luaSetRepl validates redis.set_repl's flags. limitkv has no replication
// or AOF, so what the flags select does not matter.
func luaSetRepl(L *lua.LState) int {
	if L.GetTop() != 1 {
		raiseRedisError(L, "redis.set_repl() requires two arguments.")
	}
	v, _ := lua51.ToNumber(L.Get(1))
	if int32(v)&^3 != 0 {
		raiseRedisError(L, "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.")
	}
	return 0
}

// aclCheckCmd is redis.acl_check_cmd: whether the script's user may run
// the command with these arguments (its keys and channels included).
func (r *luaRunner) aclCheckCmd(L *lua.LState) int {
	argv, msg := commandArgs(L)
	if msg != "" {
		raiseRedisError(L, msg)
	}
	spec := r.srv.Table.Lookup(argv[0])
	if spec != nil && len(spec.Sub) > 0 && len(argv) >= 2 {
		spec = spec.LookupSub(argv[1])
	}
	if spec == nil {
		raiseRedisError(L, "Invalid command passed to redis.acl_check_cmd()")
	}
	ok := true
	if rules := r.caller.Client.aclRules(); rules != nil {
		res, _ := rules.Check(spec, argv)
		ok = res == acl.OK
	}
	L.Push(lua.LBool(ok))
	return 1
}
