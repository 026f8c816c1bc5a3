package commands

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"log/slog"
	"math"
	"reflect"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"limitkv/resp"
)

// The Lua side of scripting: the sandbox scripts run in, Redis's "redis"
// library, and how errors become Redis's replies.

const (
	// luaChunkName is the name errors give scripts: "user_script:1: ...".
	luaChunkName = "user_script"
	// luaMaxCalls is Lua 5.1's LUAI_MAXCALLS. Redis's Lua reports a stack
	// overflow somewhere between 16383 calls deep (the first time its call
	// array must grow past 16384) and this.
	luaMaxCalls = 20000
	// luaCoroutineCalls is the call depth of a coroutine.
	luaCoroutineCalls = 4096
	// luaMaxRegistry bounds the Lua value stack (16 bytes a slot).
	luaMaxRegistry = 1 << 22
	// luaKeptStack is the value stack a state may keep after a script;
	// gopher-lua never shrinks it, so a state whose stack grew beyond
	// this is replaced.
	luaKeptStack = 4 << 20
)

// luaRunner is the Lua state scripts run in, set up once. Only the holder
// of every shard lock uses it.
type luaRunner struct {
	srv *Server
	L   *lua.LState
	// env is the read-only view scripts get as their globals (and _G);
	// globals is the table behind it.
	env, globals *lua.LTable
	// views maps every read-only view to the table it shows; viewOfMeta
	// maps the metatables scripts may read (the strings', _G's) to their
	// read-only views.
	views      map[*lua.LTable]*lua.LTable
	viewOfMeta map[*lua.LTable]*lua.LTable
	// runScript and runProtected call a function with the state's Panic
	// set to raiseInScript or raiseInPcall, which see an error while the
	// frames that raised it are still there.
	runScript    *lua.LFunction
	runProtected *lua.LFunction
	panicScript  func(*lua.LState) // raiseInScript and raiseInPcall, bound
	panicPcall   func(*lua.LState) // once rather than at every call
	// replies captures the replies of the commands a script calls; sub is
	// the context they run with, client the script's own client (its own
	// SELECTed database, as Redis's Lua client has).
	replies  *resp.Writer
	keys     *lua.LTable // KEYS and ARGV of the last run, reused (argTable)
	argv     *lua.LTable
	sub      Ctx
	client   *Client
	progress scriptRun
	stack    reflect.Value // the value stack, to see how much it grew
	stackOK  bool
	callLen  int // bytes of the call stack, fixed when the state is made
	rand     lrand48
	cjson    *cjsonConfig
	// chunkNames maps the names chunks loaded during the run show in
	// messages to the names they were loaded with, which errors report.
	chunkNames map[string]string

	// The run in progress.
	caller   *Ctx
	script   *luaScript
	readOnly bool
	proto    int // RESP version of the replies scripts get (redis.setresp)
	db       int
}

func newLuaRunner(srv *Server) *luaRunner {
	r := &luaRunner{
		srv:        srv,
		views:      make(map[*lua.LTable]*lua.LTable),
		viewOfMeta: make(map[*lua.LTable]*lua.LTable),
		chunkNames: make(map[string]string),
		replies:    resp.NewWriter(2),
		client:     &Client{srv: srv},
	}
	r.client.authed = true
	r.client.multiLen.Store(-1)
	r.progress.stop.done = make(chan struct{})
	r.rand.x = lrand48Start
	r.L = lua.NewState(lua.Options{
		SkipOpenLibs: true,
		// A call stack of fixed size: overflowing it raises a Lua error
		// ("stack overflow", with its line) where the growing kind panics.
		// Coroutines get smaller, growing ones (see patchLibraries).
		CallStackSize:   luaMaxCalls,
		RegistrySize:    1024,
		RegistryMaxSize: luaMaxRegistry,
		// gopher-lua grows the value stack linearly, copying it each time:
		// large steps keep deep recursion from costing quadratic time.
		RegistryGrowStep: 1 << 16,
	})
	r.L.SetContext(&r.progress.stop)
	r.stack, r.stackOK = valueStack(r.L)
	r.callLen = callStackBytes(r.L) // by reflection: too slow for every run
	r.sandbox()
	return r
}

// sandbox builds the globals scripts see: the libraries Redis 7.0 exposes,
// all read-only, and a _G that refuses new globals and reading undefined
// ones.
func (r *luaRunner) sandbox() {
	L := r.L
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString},
		{lua.MathLibName, lua.OpenMath}, {lua.CoroutineLibName, lua.OpenCoroutine},
	} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	g := L.G.Global
	r.globals = g
	for _, name := range []string{"dofile", "loadfile", "print", "getfenv", "setfenv", "module", "require",
		"newproxy", "_printregs", "_GOPHER_LUA_VERSION", "package", "channel"} {
		g.RawSetString(name, lua.LNil)
	}
	r.patchLibraries(g)

	g.RawSetString("redis", r.redisLibrary())
	g.RawSetString("cjson", r.cjsonLibrary())
	g.RawSetString("bit", bitLibrary(L))
	g.RawSetString("struct", structLibrary(L))
	g.RawSetString("cmsgpack", cmsgpackLibrary(L))
	r.runScript = L.NewFunction(r.callScript)
	r.runProtected = L.NewFunction(r.callProtected)
	r.panicScript, r.panicPcall = r.raiseInScript, r.raiseInPcall
	// Redis's error handler is a global scripts can see (and call).
	g.RawSetString("__redis__err__handler", L.NewFunction(func(L *lua.LState) int {
		L.Push(r.errorTable(L, L.Get(1), 1))
		return 1
	}))

	for _, name := range []string{"string", "table", "math", "coroutine", "redis", "cjson", "bit", "struct", "cmsgpack"} {
		g.RawSetString(name, r.readOnlyView(g.RawGetString(name).(*lua.LTable)))
	}
	r.strLib().RawSetString("__index", lua.LNil)
	// gopher-lua uses the string library itself as the strings' metatable;
	// Lua's is a table of its own whose __index is the library.
	strMeta := L.NewTable()
	strMeta.RawSetString("__index", g.RawGetString("string"))
	L.SetMetatable(lua.LString(""), strMeta)
	r.viewOfMeta[strMeta] = r.readOnlyView(strMeta)

	// Reading an undefined global is an error, as in Redis.
	missing := L.NewTable()
	missing.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
		name := L.Get(2)
		if !lua.LVCanConvToString(name) {
			L.RaiseError("Second argument to luaProtectedTableError must be a string or number")
		}
		L.RaiseError("Script attempted to access nonexistent global variable '%s'", luaString(name))
		return 0
	}))
	L.SetMetatable(g, missing)
	r.env = r.readOnlyView(g)
	r.viewOfMeta[L.GetMetatable(r.env).(*lua.LTable)] = r.readOnlyView(L.GetMetatable(r.env).(*lua.LTable))
	g.RawSetString("_G", r.env)
}

// readOnlyView returns a table that reads as t but refuses every write.
// Scripts see only views of the libraries and of the globals.
func (r *luaRunner) readOnlyView(t *lua.LTable) *lua.LTable {
	L := r.L
	view := L.NewTable()
	mt := L.NewTable()
	mt.RawSetString("__index", t)
	mt.RawSetString("__newindex", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("Attempt to modify a readonly table")
		return 0
	}))
	L.SetMetatable(view, mt)
	r.views[view] = t
	return view
}

// backing returns the table behind a read-only view, or t itself.
func (r *luaRunner) backing(t *lua.LTable) *lua.LTable {
	if b, ok := r.views[t]; ok {
		return b
	}
	return t
}

// refuseReadOnly raises Redis's error for writing a protected table from C
// code (rawset, setmetatable, table.insert...): it carries no position.
func refuseReadOnly(L *lua.LState) {
	L.Error(lua.LString("Attempt to modify a readonly table"), 0)
}

// patchLibraries replaces the gopher-lua functions whose behaviour differs
// from Lua 5.1's (as Redis has it) in ways scripts notice, and those that
// would see through the read-only views or escape the sandbox.
func (r *luaRunner) patchLibraries(g *lua.LTable) {
	L := r.L
	orig := func(name string) *lua.LFunction { return g.RawGetString(name).(*lua.LFunction) }
	origSetMetatable := orig("setmetatable")
	callOrig := func(L *lua.LState, fn *lua.LFunction) int {
		top := L.GetTop()
		L.Insert(fn, 1)
		L.Call(top, lua.MultRet)
		return L.GetTop()
	}

	g.RawSetString("tostring", L.NewFunction(func(L *lua.LState) int {
		v := L.CheckAny(1)
		if fn, ok := L.GetMetaField(v, "__tostring").(*lua.LFunction); ok {
			L.Push(fn)
			L.Push(v)
			L.Call(1, 1)
			return 1
		}
		L.Push(lua.LString(luaString(v)))
		return 1
	}))
	g.RawSetString("tonumber", L.NewFunction(luaToNumber))
	g.RawSetString("gcinfo", L.NewFunction(func(L *lua.LState) int {
		L.Push(lua.LNumber(luaHeapKB()))
		return 1
	}))
	g.RawSetString("collectgarbage", L.NewFunction(luaCollectGarbage))
	g.RawSetString("setmetatable", L.NewFunction(func(L *lua.LState) int {
		if t, ok := L.Get(1).(*lua.LTable); ok && r.views[t] != nil {
			refuseReadOnly(L)
		}
		return callOrig(L, origSetMetatable)
	}))
	g.RawSetString("getmetatable", L.NewFunction(func(L *lua.LState) int {
		v := L.CheckAny(1)
		if t, ok := v.(*lua.LTable); ok && r.views[t] != nil && t != r.env {
			L.Push(lua.LNil) // the libraries have no metatable in Redis
			return 1
		}
		mt, ok := L.GetMetatable(v).(*lua.LTable)
		if !ok {
			L.Push(lua.LNil)
			return 1
		}
		if protected := mt.RawGetString("__metatable"); protected != lua.LNil {
			L.Push(protected)
			return 1
		}
		if view := r.viewOfMeta[mt]; view != nil {
			L.Push(view)
			return 1
		}
		L.Push(mt)
		return 1
	}))
	g.RawSetString("rawset", L.NewFunction(func(L *lua.LState) int {
		t := L.CheckTable(1)
		if r.views[t] != nil {
			refuseReadOnly(L)
		}
		t.RawSet(L.CheckAny(2), L.CheckAny(3))
		L.Push(t)
		return 1
	}))
	g.RawSetString("rawget", L.NewFunction(func(L *lua.LState) int {
		t := r.backing(L.CheckTable(1))
		L.Push(t.RawGet(L.CheckAny(2)))
		return 1
	}))
	next := L.NewFunction(func(L *lua.LState) int {
		t := r.backing(L.CheckTable(1))
		k, v := t.Next(L.Get(2))
		if k == lua.LNil {
			L.Push(lua.LNil)
			return 1
		}
		L.Push(k)
		L.Push(v)
		return 2
	})
	g.RawSetString("next", next)
	g.RawSetString("pairs", L.NewFunction(func(L *lua.LState) int {
		t := L.CheckTable(1)
		L.Push(next)
		L.Push(t)
		L.Push(lua.LNil)
		return 3
	}))
	ipairsStep := L.NewFunction(func(L *lua.LState) int {
		t := r.backing(L.CheckTable(1))
		i := L.CheckInt(2) + 1
		v := t.RawGetInt(i)
		if v == lua.LNil {
			return 0
		}
		L.Push(lua.LNumber(i))
		L.Push(v)
		return 2
	})
	g.RawSetString("ipairs", L.NewFunction(func(L *lua.LState) int {
		t := L.CheckTable(1)
		L.Push(ipairsStep)
		L.Push(t)
		L.Push(lua.LNumber(0))
		return 3
	}))
	g.RawSetString("loadstring", L.NewFunction(r.loadString))
	g.RawSetString("load", L.NewFunction(r.load))
	g.RawSetString("error", L.NewFunction(luaErrorFunction))
	g.RawSetString("pcall", L.NewFunction(r.pcall))
	g.RawSetString("xpcall", L.NewFunction(r.xpcall))

	str := g.RawGetString("string").(*lua.LTable)
	str.RawSetString("gfind", str.RawGetString("gmatch"))
	str.RawSetString("format", L.NewFunction(luaStringFormat))
	str.RawSetString("byte", L.NewFunction(luaStringByte))
	str.RawSetString("rep", L.NewFunction(luaStringRep))
	g.RawSetString("unpack", L.NewFunction(luaUnpack))

	// Coroutines get their own call stacks: growing ones, smaller than the
	// script's, rather than a fixed luaMaxCalls frames each.
	co := g.RawGetString("coroutine").(*lua.LTable)
	for _, name := range []string{"create", "wrap"} {
		fn := co.RawGetString(name).(*lua.LFunction)
		co.RawSetString(name, L.NewFunction(func(L *lua.LState) int {
			saved := L.Options
			defer func() { L.Options = saved }()
			L.Options.MinimizeStackMemory = true
			L.Options.CallStackSize = luaCoroutineCalls
			return callOrig(L, fn)
		}))
	}

	tbl := g.RawGetString("table").(*lua.LTable)
	for _, name := range []string{"insert", "remove", "sort"} {
		fn := tbl.RawGetString(name).(*lua.LFunction)
		tbl.RawSetString(name, L.NewFunction(func(L *lua.LState) int {
			if t, ok := L.Get(1).(*lua.LTable); ok && r.views[t] != nil {
				refuseReadOnly(L)
			}
			return callOrig(L, fn)
		}))
	}
	tbl.RawSetString("concat", L.NewFunction(luaTableConcat))
	tbl.RawSetString("foreach", L.NewFunction(luaTableForeach))
	tbl.RawSetString("foreachi", L.NewFunction(luaTableForeachi))
	tbl.RawSetString("setn", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("'setn' is obsolete")
		return 0
	}))

	mathLib := g.RawGetString("math").(*lua.LTable)
	mathLib.RawSetString("random", L.NewFunction(r.mathRandom))
	mathLib.RawSetString("randomseed", L.NewFunction(r.mathRandomSeed))
	mathLib.RawSetString("huge", lua.LNumber(math.Inf(1)))
}

// strLib returns the string library behind its read-only view.
func (r *luaRunner) strLib() *lua.LTable {
	return r.backing(r.globals.RawGetString("string").(*lua.LTable))
}

// loadString is loadstring: a chunk compiled as Lua 5.1 compiles it, with
// the script's read-only globals; its default name is the code itself.
func (r *luaRunner) loadString(L *lua.LState) int {
	src := luaCheckString(L, 1, "loadstring")
	name := src
	if L.GetTop() >= 2 && L.Get(2) != lua.LNil {
		name = luaCheckString(L, 2, "loadstring")
	}
	return r.pushChunk(L, []byte(src), name)
}

// load is load: the chunk's pieces come from a function.
func (r *luaRunner) load(L *lua.LState) int {
	reader := L.CheckFunction(1)
	name := "=(load)"
	if L.GetTop() >= 2 && L.Get(2) != lua.LNil {
		name = luaCheckString(L, 2, "load")
	}
	var src []byte
	for {
		L.Push(reader)
		L.Call(0, 1)
		piece := L.Get(-1)
		L.Pop(1)
		if piece == lua.LNil {
			break
		}
		if !lua.LVCanConvToString(piece) {
			L.Push(lua.LNil)
			L.Push(lua.LString("reader function must return a string"))
			return 2
		}
		s := luaString(piece)
		if s == "" {
			break
		}
		src = append(src, s...)
	}
	return r.pushChunk(L, src, name)
}

func (r *luaRunner) pushChunk(L *lua.LState, src []byte, name string) int {
	display := luaChunkID(name)
	proto, msg := compileChunk(src, display)
	if msg != "" {
		L.Push(lua.LNil)
		L.Push(lua.LString(msg))
		return 2
	}
	r.chunkNames[display] = name
	fn := L.NewFunctionFromProto(proto)
	fn.Env = r.env
	L.Push(fn)
	return 1
}

// luaErrorFunction is Lua 5.1's error: the position is added to string and
// number messages, and only when the level names a Lua function.
func luaErrorFunction(L *lua.LState) int {
	v := L.Get(1)
	level := luaOptInt(L, 2, "error", 1)
	if lua.LVCanConvToString(v) && level > 0 {
		v = lua.LString(luaWhere(L, int(level)) + luaString(v))
	}
	L.Error(v, 0)
	return 0
}

// luaWhere is luaL_where: "chunk:line: " for a Lua function at level, ""
// for a library function or no function at all.
func luaWhere(L *lua.LState, level int) string {
	dbg, ok := L.GetStack(level)
	if !ok {
		return ""
	}
	if _, err := L.GetInfo("Sl", dbg, lua.LNil); err != nil || dbg.CurrentLine <= 0 {
		return ""
	}
	return dbg.Source + ":" + strconv.Itoa(dbg.CurrentLine) + ": "
}

// pcall is Redis 7.0's pcall: an error raised as a table with an err field
// (redis.call's) is caught as that message. Errors of the virtual machine
// are worded as Lua 5.1 words them.
func (r *luaRunner) pcall(L *lua.LState) int {
	if L.GetTop() < 1 {
		luaArgError(L, 1, "pcall", "value expected")
	}
	if f := L.Get(1); f.Type() != lua.LTFunction && L.GetMetaField(f, "__call").Type() != lua.LTFunction {
		L.SetTop(0)
		L.Push(lua.LFalse)
		L.Push(lua.LString("attempt to call a " + f.Type().String() + " value"))
		return 2
	}
	L.Insert(r.runProtected, 1)
	if err := L.PCall(L.GetTop()-1, lua.MultRet, nil); err != nil {
		v := errorValue(err)
		if t, ok := v.(*lua.LTable); ok {
			if msg := t.RawGetString("err"); lua.LVCanConvToString(msg) {
				v = msg
			}
		}
		L.Push(lua.LFalse)
		L.Push(v)
		return 2
	}
	L.Insert(lua.LTrue, 1)
	return L.GetTop()
}

// xpcall is Lua 5.1's xpcall; the handler gets Lua 5.1's wording.
func (r *luaRunner) xpcall(L *lua.LState) int {
	fn := L.CheckAny(1)
	handler := L.CheckAny(2)
	L.SetTop(0)
	onError := L.NewFunction(func(L *lua.LState) int {
		msg := L.Get(1)
		if s, ok := msg.(lua.LString); ok {
			msg = lua.LString(r.lua51Message(L, string(s), 1))
		}
		L.SetTop(0)
		L.Push(handler)
		L.Push(msg)
		L.Call(1, 1)
		return 1
	})
	L.Push(fn)
	if err := L.PCall(0, lua.MultRet, onError); err != nil {
		L.Push(lua.LFalse)
		L.Push(errorValue(err))
		return 2
	}
	L.Insert(lua.LTrue, 1)
	return L.GetTop()
}

func errorValue(err error) lua.LValue {
	if ae, ok := err.(*lua.ApiError); ok {
		return ae.Object
	}
	return lua.LString(err.Error())
}

// callProtected calls its first argument with the rest, for pcall.
func (r *luaRunner) callProtected(L *lua.LState) int {
	L.Panic = r.panicPcall
	L.Call(L.GetTop()-1, lua.MultRet)
	return L.GetTop()
}

// raiseInPcall words the errors of the virtual machine as Lua 5.1 does,
// while the frame that raised them is still there.
func (r *luaRunner) raiseInPcall(L *lua.LState) {
	v := L.Get(-1)
	if s, ok := v.(lua.LString); ok {
		v = lua.LString(r.lua51Message(L, string(s), 0))
	}
	panic(&lua.ApiError{Type: lua.ApiErrorRun, Object: v, StackTrace: noTrace})
}

// noTrace fills ApiError.StackTrace so that gopher-lua does not collect a
// trace, walking the whole stack once per frame, for an error nobody reads
// one of.
const noTrace = "(not collected)"

// redisLibrary builds the "redis" table.
func (r *luaRunner) redisLibrary() *lua.LTable {
	L := r.L
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

// exec runs one script for c and writes its reply to c.W. It reports
// whether the Lua state is broken: gopher-lua lets an error escape PCall
// when its value stack is full while it handles another error, leaving
// the state unusable.
func (r *luaRunner) exec(c *Ctx, sc *luaScript, keys, argv [][]byte, readOnly bool) (broken bool) {
	L := r.L
	r.caller, r.script, r.readOnly, r.proto, r.db = c, sc, readOnly, 2, c.DB
	r.replies.SetProto(2)
	r.client.db.Store(int32(c.DB))
	clear(r.chunkNames)
	defer func() {
		r.caller, r.script = nil, nil
		c.Srv.stats.Commands.Add(r.client.commands.Swap(0))
		if p := recover(); p != nil {
			broken = true
			msg := "stack overflow"
			if ae, ok := p.(*lua.ApiError); !ok || !strings.Contains(ae.Error(), "registry overflow") {
				c.Srv.Log.Error("script panicked", "panic", p, "sha", sc.sha)
				msg = "internal error"
			}
			c.W.ErrorVerbatim("ERR " + luaChunkName + ":1: " + msg + " script: " + sc.sha + ", on @" + luaChunkName + ":1.")
		}
	}()
	if sc.fnOf != r {
		sc.fn = L.NewFunctionFromProto(sc.proto)
		sc.fn.Env = r.env
		sc.fnOf = r
	}
	r.keys = r.argTable(r.keys, keys)
	r.argv = r.argTable(r.argv, argv)
	r.globals.RawSetString("KEYS", r.keys)
	r.globals.RawSetString("ARGV", r.argv)
	L.Push(r.runScript)
	L.Push(sc.fn)
	if err := L.PCall(1, 1, nil); err != nil {
		r.writeScriptError(c.W, err)
	} else {
		writeLuaReply(c.W, L.Get(-1), r.proto, 2)
		L.Pop(1)
	}
	return false
}

// argTable returns the KEYS or ARGV table for a run. The previous run's
// table is reused when the script left it a plain array (it may have
// changed its values, which are all rewritten), and so are its strings
// that equal the new arguments; otherwise a new table is made. Nothing
// else can hold the table after a run: globals are read-only.
func (r *luaRunner) argTable(t *lua.LTable, args [][]byte) *lua.LTable {
	if t != nil {
		var after lua.LValue = lua.LNil
		if n := t.Len(); n > 0 {
			after = lua.LNumber(n)
		}
		if k, _ := t.Next(after); k != lua.LNil {
			t = nil // the script added other keys: start afresh
		}
	}
	if t == nil {
		t = r.L.CreateTable(len(args), 0)
	}
	for i, a := range args {
		if old, ok := t.RawGetInt(i + 1).(lua.LString); !ok || string(old) != string(a) {
			t.RawSetInt(i+1, lua.LString(a))
		}
	}
	for i := len(args) + 1; i <= t.Len(); i++ {
		t.RawSetInt(i, lua.LNil)
	}
	return t
}

// call is redis.call (raise) and redis.pcall: run a command from the
// script, as Redis's scriptCall checks and runs it, and return its reply as
// a Lua value.
func (r *luaRunner) call(L *lua.LState, raise bool) int {
	argv, msg := commandArgs(L)
	if msg != "" {
		return callFailed(L, raise, errorTable(L, msg))
	}
	spec, msg := r.resolveCall(argv)
	if msg != "" {
		t := errorTable(L, msg)
		// Redis marks the errors of calls it refused as already counted.
		t.RawSetString("ignore_error_stats_update", lua.LTrue)
		return callFailed(L, raise, t)
	}
	if spec.Flags&Write != 0 && !r.progress.state.CompareAndSwap(runClean, runWrote) && r.progress.state.Load() == runKilled {
		L.Error(errorTable(L, errScriptKilled.Error()), 0)
	}
	r.replies.Reset()
	r.sub = Ctx{Srv: r.srv, Client: r.client, W: r.replies, Args: argv, Now: r.caller.Now, DB: r.db, Spec: spec, held: true}
	r.srv.runGuarded(&r.sub)
	r.db = r.sub.DB
	r.sub = Ctx{}
	v, isErr, ok := replyToLua(L, r.replies.Bytes())
	if !ok {
		v, isErr = errorTable(L, "ERR internal error: malformed reply"), true
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
func (r *luaRunner) resolveCall(argv [][]byte) (*Spec, string) {
	spec := r.srv.Table.Lookup(argv[0])
	if spec != nil && len(spec.Sub) > 0 && len(argv) >= 2 {
		spec = spec.lookupSub(argv[1])
	}
	if spec == nil {
		return nil, "Unknown Redis command called from script"
	}
	if !spec.arityOK(len(argv)) {
		return nil, "Wrong number of args calling Redis command from script"
	}
	if spec.Flags&NoScript != 0 {
		spec.reject.Add(1)
		return nil, "This Redis command is not allowed from script"
	}
	if r.readOnly && spec.Flags&Write != 0 {
		spec.reject.Add(1)
		return nil, "Write commands are not allowed from read-only scripts."
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
			buf = appendCFloat(buf, float64(v), 17)
		}
		argv[i-1] = buf[start:len(buf):len(buf)]
	}
	return argv, ""
}

// errorTable makes the Lua error value Redis makes (luaPushErrorBuff): a
// table whose err field is the message with its error code, "ERR" when the
// message has none. msg is either "-CODE text" or plain text.
func errorTable(L *lua.LState, msg string) *lua.LTable {
	var code, text string
	if rest, ok := strings.CutPrefix(msg, "-"); ok {
		if i := strings.IndexByte(rest, ' '); i >= 0 {
			code, text = rest[:i], rest[i+1:]
		} else {
			code, text = "ERR", rest
		}
	} else {
		code, text = "ERR", msg
	}
	t := L.CreateTable(0, 2)
	t.RawSetString("err", lua.LString(code+" "+strings.Trim(text, "\r\n")))
	return t
}

// singleFieldTable is redis.error_reply and redis.status_reply.
func singleFieldTable(L *lua.LState, field string) int {
	s, ok := L.Get(1).(lua.LString)
	if L.GetTop() != 1 || !ok {
		L.Push(errorTable(L, "wrong number or type of arguments"))
		return 1
	}
	if field == "err" {
		msg := string(s)
		if !strings.HasPrefix(msg, "-") {
			msg = "-" + msg
		}
		L.Push(errorTable(L, msg))
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
	L.Error(errorTable(L, msg), 0)
}

func luaSHA1Hex(L *lua.LState) int {
	if L.GetTop() != 1 {
		raiseRedisError(L, "wrong number of arguments")
	}
	sum := sha1.Sum([]byte(luaString(L.Get(1))))
	L.Push(lua.LString(hex.EncodeToString(sum[:])))
	return 1
}

func (r *luaRunner) log(L *lua.LState) int {
	argc := L.GetTop()
	if argc < 2 {
		raiseRedisError(L, "redis.log() requires two arguments or more.")
	}
	level, ok := luaToFloat(L.Get(1))
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
		msg.WriteString(luaString(v))
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
	v, _ := luaToFloat(L.Get(1))
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
	v, _ := luaToFloat(L.Get(1))
	if int32(v)&^3 != 0 {
		raiseRedisError(L, "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.")
	}
	return 0
}

// aclCheckCmd is redis.acl_check_cmd. limitkv has only the default user,
// who may run every command.
func (r *luaRunner) aclCheckCmd(L *lua.LState) int {
	argv, msg := commandArgs(L)
	if msg != "" {
		raiseRedisError(L, msg)
	}
	spec := r.srv.Table.Lookup(argv[0])
	if spec != nil && len(spec.Sub) > 0 && len(argv) >= 2 {
		spec = spec.lookupSub(argv[1])
	}
	if spec == nil {
		raiseRedisError(L, "Invalid command passed to redis.acl_check_cmd()")
	}
	L.Push(lua.LTrue)
	return 1
}

// callScript runs the script's function with errors raised through
// raiseInScript.
func (r *luaRunner) callScript(L *lua.LState) int {
	L.Panic = r.panicScript
	L.Call(0, 1)
	return 1
}

// raiseInScript turns an error escaping the script into the table Redis's
// error handler makes, while the frames are still there to say where it
// happened.
func (r *luaRunner) raiseInScript(L *lua.LState) {
	panic(&lua.ApiError{Type: lua.ApiErrorRun, Object: r.errorTable(L, L.Get(-1), 0), StackTrace: noTrace})
}

// errorTable is what Redis's __redis__err__handler makes of an error: a
// table with the message (with its error code) and where it happened (the
// innermost Lua function, not a library function it called), looking at
// the frames from level on.
func (r *luaRunner) errorTable(L *lua.LState, e lua.LValue, level int) *lua.LTable {
	t, ok := e.(*lua.LTable)
	if !ok {
		msg := luaString(e)
		if r.progress.state.Load() == runKilled && strings.HasSuffix(msg, errScriptKilled.Error()) {
			msg = errScriptKilled.Error()
		} else {
			msg = "ERR " + r.lua51Message(L, msg, level)
		}
		t = L.CreateTable(0, 3)
		t.RawSetString("err", lua.LString(msg))
	}
	if dbg, ok := errorFrame(L, level); ok {
		source := dbg.Source
		if source == luaChunkName {
			source = "@" + source
		} else if name, ok := r.chunkNames[source]; ok {
			source = name
		}
		t.RawSetString("source", lua.LString(source))
		t.RawSetString("line", lua.LNumber(dbg.CurrentLine))
	}
	return t
}

// errorFrame finds the function an error comes from: the one at level, or
// its caller when that is a library (Go) function.
func errorFrame(L *lua.LState, level int) (*lua.Debug, bool) {
	for l := level; l <= level+1; l++ {
		dbg, ok := L.GetStack(l)
		if !ok {
			return nil, false
		}
		if _, err := L.GetInfo("Sl", dbg, lua.LNil); err != nil {
			return nil, false
		}
		if dbg.What != "G" {
			return dbg, true
		}
	}
	return nil, false
}

// writeScriptError replies with a script's error as Redis does:
// "<message> script: <sha>, on @user_script:<line>."
func (r *luaRunner) writeScriptError(w *resp.Writer, err error) {
	t, ok := errorValue(err).(*lua.LTable)
	if !ok {
		// Not raised through raiseInScript: a Go panic gopher-lua caught.
		w.ErrorVerbatim("ERR " + luaString(errorValue(err)) + " script: " + r.script.sha)
		return
	}
	msgv := t.RawGetString("err")
	if !lua.LVCanConvToString(msgv) {
		// Redis 7.0.15 crashes on an error table without a message; say
		// what happened instead.
		msgv = lua.LString("ERR script raised an error value that is not a string or an {err=...} table")
	}
	var b strings.Builder
	b.WriteString(luaString(msgv))
	source, line := t.RawGetString("source"), t.RawGetString("line")
	if lua.LVCanConvToString(source) && lua.LVCanConvToString(line) {
		b.WriteString(" script: ")
		b.WriteString(r.script.sha)
		b.WriteString(", on ")
		b.WriteString(luaString(source))
		b.WriteByte(':')
		b.WriteString(luaString(line))
		b.WriteByte('.')
	}
	w.ErrorVerbatim(b.String())
}
