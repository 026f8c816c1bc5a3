package scripting

import (
	"crypto/sha1"
	"encoding/hex"
	"log/slog"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/lua51"
	"github.com/limitkv/limitkv/resp"
)

// The runner: a Lua state (package lua51) with Redis's "redis" library,
// whose calls run commands through the server's Session.

// runner runs scripts, or functions, in one Lua state. Only the holder
// of every shard lock uses it.
type runner struct {
	rt        *Runtime
	functions bool
	state     *lua51.State
	sess      Session
	// replies captures the replies of the commands a script calls.
	replies  *resp.Writer
	progress runState

	// The run in progress.
	readOnly bool
	allowOOM bool // the script declared allow-oom
	proto    int  // RESP version of the replies scripts get (redis.setresp)
	// loading is the library whose code a functions' runner runs
	// (redis.register_function adds to it).
	loading *Library
}

// newRunner makes the runner of scripts, or of functions, whose state
// also has the API a library's code sees while it is loaded.
func newRunner(rt *Runtime, functions bool) *runner {
	r := &runner{
		rt:        rt,
		functions: functions,
		sess:      rt.host.NewSession(),
		replies:   resp.NewWriter(2),
	}
	r.progress.stop.done = make(chan struct{})
	opts := lua51.Options{Context: &r.progress.stop, Redis: r.redisLibrary}
	if functions {
		opts.Library = r.libraryAPI
	}
	r.state = lua51.NewState(opts)
	return r
}

// redisLibrary builds the "redis" table.
func (r *runner) redisLibrary(L *lua.LState) *lua.LTable {
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
	r.setVersion(t)
	return t
}

// setVersion sets REDIS_VERSION and REDIS_VERSION_NUM (0x00MMmmpp) in t.
func (r *runner) setVersion(t *lua.LTable) {
	n := 0
	for _, part := range strings.SplitN(r.rt.version, ".", 3) {
		v, _ := strconv.Atoi(part)
		n = n<<8 | v
	}
	t.RawSetString("REDIS_VERSION", lua.LString(r.rt.version))
	t.RawSetString("REDIS_VERSION_NUM", lua.LNumber(n))
}

// exec runs call's script, or f, a function of a functions' runner, and
// writes its reply to call.W. It reports whether the Lua state is
// broken: gopher-lua lets an error escape PCall when its value stack is
// full while it handles another error, leaving the state unusable.
func (r *runner) exec(call *Call, f *Function) (out Outcome, broken bool) {
	sc := call.Script
	name, flags, chunk := "", Flags(0), lua51.ChunkName
	if f != nil {
		name, flags, chunk = f.name, f.flags, lua51.FunctionChunkName
	} else {
		name, flags = sc.sha, sc.flags
	}
	r.readOnly, r.proto = call.ReadOnly, 2
	r.allowOOM = flags&(Compat|AllowOOM) == AllowOOM
	r.replies.SetProto(2)
	r.sess.Begin(call.Caller)
	defer func() {
		if p := recover(); p != nil {
			broken = true
			msg := "stack overflow"
			if !lua51.StackOverflow(p) {
				r.rt.host.Log(slog.LevelError, "script panicked", "panic", p, "script", name)
				msg = "internal error"
			}
			call.W.ErrorVerbatim("ERR " + chunk + ":1: " + msg + " script: " + name + ", on @" + chunk + ":1.")
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
			r.sess.CountError(reply)
		}
	}
	w := call.W
	n := w.Len()
	var v lua.LValue
	var err error
	if f != nil {
		v, err = r.state.CallFunction(f.fn, call.Keys, call.Argv)
	} else {
		v, err = r.state.Run(sc.fn, call.Keys, call.Argv)
	}
	if err != nil {
		lua51.WriteError(w, err, name)
		onError(w.Bytes()[n:], lua51.ErrorCounted(err, nil))
	} else {
		lua51.WriteReply(w, v, r.proto, onError)
	}
	return Outcome{Counted: true, Failed: failed}, false
}

// codeERR is the code of the refusals that have none of their own.
var codeERR = []byte("ERR")

// call is redis.call (raise) and redis.pcall: run a command from the
// script, as Redis's scriptCall checks and runs it, and return its reply as
// a Lua value.
func (r *runner) call(L *lua.LState, raise bool) int {
	argv, msg := commandArgs(L)
	if msg != "" {
		return callFailed(L, raise, lua51.ErrorTable(L, msg))
	}
	state := &r.progress.state
	spec, msg := r.sess.Command(argv, CallRules{ReadOnly: r.readOnly, AllowOOM: r.allowOOM, state: state})
	if msg != "" {
		// As Redis's scriptCall counts a refusal: by its code.
		if msg[0] == '-' {
			r.sess.CountError([]byte(msg))
		} else {
			r.sess.CountError(codeERR)
		}
		t := lua51.ErrorTable(L, msg)
		// Redis marks the errors of calls it refused as already counted.
		t.RawSetString("ignore_error_stats_update", lua.LTrue)
		return callFailed(L, raise, t)
	}
	if spec.Flags&cmdspec.Write != 0 && !state.CompareAndSwap(runClean, runWrote) && state.Load() == runKilled {
		L.Error(lua51.ErrorTable(L, "-"+errKilled.Error()), 0)
	}
	r.replies.Reset()
	r.sess.Call(spec, argv, r.replies)
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

func (r *runner) log(L *lua.LState) int {
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
	r.rt.host.Log(slogLevel, msg.String(), "source", "script")
	return 0
}

func (r *runner) setResp(L *lua.LState) int {
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

// luaSetRepl validates redis.set_repl's flags. A script's effects always
// reach the replicas as one, so what the flags select does not matter.
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
func (r *runner) aclCheckCmd(L *lua.LState) int {
	argv, msg := commandArgs(L)
	if msg != "" {
		raiseRedisError(L, msg)
	}
	ok, known := r.sess.ACLAllows(argv)
	if !known {
		raiseRedisError(L, "Invalid command passed to redis.acl_check_cmd()")
	}
	L.Push(lua.LBool(ok))
	return 1
}
