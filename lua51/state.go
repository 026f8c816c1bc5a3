package lua51

import (
	"context"
	"math"
	"reflect"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/limitkv/limitkv/resp"
)

// The Lua state scripts run in: the sandbox Redis 7.0 gives them, with Lua
// 5.1's libraries as Redis has them, and how a script's errors become
// Redis's replies. The "redis" library is the embedder's (Options.Redis):
// it runs commands, which this package knows nothing of.

const (
	// ChunkName is the name errors give scripts: "user_script:1: ...".
	ChunkName = "user_script"
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
	// this is to be replaced (Oversized).
	luaKeptStack = 4 << 20
)

// Options configures a state.
type Options struct {
	// Context stops a running script when it is done (SCRIPT KILL). The
	// error of a script stopped so is the context's error, as it is,
	// without a position.
	Context context.Context
	// Redis builds the "redis" library, before the libraries are made
	// read-only; nil gives an empty one.
	Redis func(L *lua.LState) *lua.LTable
	// Library, if set, makes a state for Redis 7's functions (see
	// functions.go): it builds the "redis" table that a library's code
	// sees while FUNCTION LOAD runs it (redis.register_function).
	Library func(L *lua.LState) *lua.LTable
}

// State is a Lua state set up to run scripts, one at a time and from one
// goroutine at a time: its globals, libraries and stacks are reused from
// one script to the next.
type State struct {
	vm  *lua.LState
	ctx context.Context // Options.Context
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
	keys         *lua.LTable       // KEYS and ARGV of the last run, reused (argTable)
	argv         *lua.LTable
	stack        reflect.Value // the value stack, to see how much it grew
	stackOK      bool
	callLen      int // bytes of the call stack, fixed when the state is made
	rand         lrand48
	cjson        *cjsonConfig
	// chunkNames maps the names chunks loaded during the run show in
	// messages to the names they were loaded with, which errors report.
	chunkNames map[string]string
	// base is the sandbox's objects, bound the functions made by Bind
	// (see memory.go).
	base, bound int64
	// keysMem and argvMem follow what the KEYS and ARGV tables hold.
	keysMem, argvMem argMemory
	// chunk is the name the code run in this state has in messages:
	// ChunkName, or FunctionChunkName in a functions' state.
	chunk string
	// fn is the functions' part of a state made with Options.Library.
	fn *functionEnv
}

// NewState makes a state with the sandbox and libraries of Redis 7.0.
func NewState(opts Options) *State {
	s := &State{
		ctx:        opts.Context,
		views:      make(map[*lua.LTable]*lua.LTable),
		viewOfMeta: make(map[*lua.LTable]*lua.LTable),
		chunkNames: make(map[string]string),
		chunk:      ChunkName,
	}
	if opts.Library != nil {
		s.chunk = FunctionChunkName
	}
	s.rand.x = lrand48Start
	s.vm = lua.NewState(lua.Options{
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
	if opts.Context != nil {
		s.vm.SetContext(opts.Context)
	}
	s.stack, s.stackOK = valueStack(s.vm)
	s.callLen = callStackBytes(s.vm) // by reflection: too slow for every run
	s.sandbox(opts.Redis)
	if opts.Library != nil {
		s.functionSandbox(opts.Library)
	}
	seen := map[any]bool{}
	s.base = objectBytes(s.vm.G.Registry, seen) + objectBytes(s.vm.G.Global, seen) + objectBytes(s.env, seen)
	for range s.views {
		s.base += 2 * 8 // the views' map entries
	}
	return s
}

// Bind makes a compiled script a function of this state, with the
// sandbox as its globals.
func (s *State) Bind(proto *lua.FunctionProto) *lua.LFunction {
	fn := s.vm.NewFunctionFromProto(proto)
	fn.Env = s.env
	s.bound++
	return fn
}

// Run calls fn, made by Bind, with KEYS and ARGV set to keys and argv,
// and returns its result, or its error with Redis's message and where it
// happened (see WriteError).
func (s *State) Run(fn *lua.LFunction, keys, argv [][]byte) (lua.LValue, error) {
	L := s.vm
	clear(s.chunkNames)
	s.keys = s.argTable(s.keys, keys, &s.keysMem)
	s.argv = s.argTable(s.argv, argv, &s.argvMem)
	s.globals.RawSetString("KEYS", s.keys)
	s.globals.RawSetString("ARGV", s.argv)
	L.Push(s.runScript)
	L.Push(fn)
	if err := L.PCall(1, 1, nil); err != nil {
		return lua.LNil, err
	}
	v := L.Get(-1)
	L.Pop(1)
	return v, nil
}

// StackOverflow reports whether p, a panic that escaped Run, is
// gopher-lua's value stack overflowing while it handled another error,
// which leaves the state unusable.
func StackOverflow(p any) bool {
	ae, ok := p.(*lua.ApiError)
	return ok && strings.Contains(ae.Error(), "registry overflow")
}

// Oversized reports that a deep recursion grew the value stack beyond
// what a state may keep: gopher-lua never shrinks it, so the state should
// be replaced.
func (s *State) Oversized() bool { return s.stackBytes() > luaKeptStack }

// ContinueRandom makes math.random go on from where old's left off, as
// Redis never reseeds it.
func (s *State) ContinueRandom(old *State) { s.rand = old.rand }

// sandbox builds the globals scripts see: the libraries Redis 7.0 exposes,
// all read-only, and a _G that refuses new globals and reading undefined
// ones.
func (s *State) sandbox(redis func(L *lua.LState) *lua.LTable) {
	L := s.vm
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
	s.globals = g
	for _, name := range []string{"dofile", "loadfile", "print", "getfenv", "setfenv", "module", "require",
		"newproxy", "_printregs", "_GOPHER_LUA_VERSION", "package", "channel"} {
		g.RawSetString(name, lua.LNil)
	}
	s.patchLibraries(g)

	if redis != nil {
		g.RawSetString("redis", redis(L))
	} else {
		g.RawSetString("redis", L.NewTable())
	}
	g.RawSetString("cjson", s.cjsonLibrary())
	g.RawSetString("bit", bitLibrary(L))
	g.RawSetString("struct", structLibrary(L))
	g.RawSetString("cmsgpack", cmsgpackLibrary(L))
	s.runScript = L.NewFunction(s.callScript)
	s.runProtected = L.NewFunction(s.callProtected)
	s.panicScript, s.panicPcall = s.raiseInScript, s.raiseInPcall
	// Redis's error handler is a global scripts can see (and call).
	g.RawSetString("__redis__err__handler", L.NewFunction(func(L *lua.LState) int {
		L.Push(s.handleError(L, L.Get(1), 1))
		return 1
	}))

	for _, name := range []string{"string", "table", "math", "coroutine", "redis", "cjson", "bit", "struct", "cmsgpack"} {
		g.RawSetString(name, s.readOnlyView(g.RawGetString(name).(*lua.LTable)))
	}
	s.strLib().RawSetString("__index", lua.LNil)
	// gopher-lua uses the string library itself as the strings' metatable;
	// Lua's is a table of its own whose __index is the library.
	strMeta := L.NewTable()
	strMeta.RawSetString("__index", g.RawGetString("string"))
	L.SetMetatable(lua.LString(""), strMeta)
	s.viewOfMeta[strMeta] = s.readOnlyView(strMeta)

	// Reading an undefined global is an error, as in Redis.
	L.SetMetatable(g, missingMeta(L))
	s.env = s.readOnlyView(g)
	s.viewOfMeta[L.GetMetatable(s.env).(*lua.LTable)] = s.readOnlyView(L.GetMetatable(s.env).(*lua.LTable))
	g.RawSetString("_G", s.env)
}

// missingMeta is Redis's error metatable (luaSetErrorMetatable): reading
// a field its table lacks is an error.
func missingMeta(L *lua.LState) *lua.LTable {
	missing := L.NewTable()
	missing.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
		name := L.Get(2)
		if !lua.LVCanConvToString(name) {
			L.RaiseError("Second argument to luaProtectedTableError must be a string or number")
		}
		L.RaiseError("Script attempted to access nonexistent global variable '%s'", ToString(name))
		return 0
	}))
	return missing
}

// readOnlyView returns a table that reads as t but refuses every write.
// Scripts see only views of the libraries and of the globals.
func (s *State) readOnlyView(t *lua.LTable) *lua.LTable {
	L := s.vm
	view := L.NewTable()
	mt := L.NewTable()
	mt.RawSetString("__index", t)
	mt.RawSetString("__newindex", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("Attempt to modify a readonly table")
		return 0
	}))
	L.SetMetatable(view, mt)
	s.views[view] = t
	return view
}

// backing returns the table behind a read-only view, or t itself.
func (s *State) backing(t *lua.LTable) *lua.LTable {
	if b, ok := s.views[t]; ok {
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
func (s *State) patchLibraries(g *lua.LTable) {
	L := s.vm
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
		L.Push(lua.LString(ToString(v)))
		return 1
	}))
	g.RawSetString("tonumber", L.NewFunction(luaToNumber))
	g.RawSetString("gcinfo", L.NewFunction(func(L *lua.LState) int {
		L.Push(lua.LNumber(luaHeapKB()))
		return 1
	}))
	g.RawSetString("collectgarbage", L.NewFunction(luaCollectGarbage))
	g.RawSetString("setmetatable", L.NewFunction(func(L *lua.LState) int {
		if t, ok := L.Get(1).(*lua.LTable); ok && s.views[t] != nil {
			refuseReadOnly(L)
		}
		return callOrig(L, origSetMetatable)
	}))
	g.RawSetString("getmetatable", L.NewFunction(func(L *lua.LState) int {
		v := L.CheckAny(1)
		if t, ok := v.(*lua.LTable); ok && s.views[t] != nil && t != s.env {
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
		if view := s.viewOfMeta[mt]; view != nil {
			L.Push(view)
			return 1
		}
		L.Push(mt)
		return 1
	}))
	g.RawSetString("rawset", L.NewFunction(func(L *lua.LState) int {
		t := L.CheckTable(1)
		if s.views[t] != nil {
			refuseReadOnly(L)
		}
		t.RawSet(L.CheckAny(2), L.CheckAny(3))
		L.Push(t)
		return 1
	}))
	g.RawSetString("rawget", L.NewFunction(func(L *lua.LState) int {
		t := s.backing(L.CheckTable(1))
		L.Push(t.RawGet(L.CheckAny(2)))
		return 1
	}))
	next := L.NewFunction(func(L *lua.LState) int {
		t := s.backing(L.CheckTable(1))
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
		t := s.backing(L.CheckTable(1))
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
	g.RawSetString("loadstring", L.NewFunction(s.loadString))
	g.RawSetString("load", L.NewFunction(s.load))
	g.RawSetString("error", L.NewFunction(luaErrorFunction))
	g.RawSetString("pcall", L.NewFunction(s.pcall))
	g.RawSetString("xpcall", L.NewFunction(s.xpcall))

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
			if t, ok := L.Get(1).(*lua.LTable); ok && s.views[t] != nil {
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
	mathLib.RawSetString("random", L.NewFunction(s.mathRandom))
	mathLib.RawSetString("randomseed", L.NewFunction(s.mathRandomSeed))
	mathLib.RawSetString("huge", lua.LNumber(math.Inf(1)))
}

// strLib returns the string library behind its read-only view.
func (s *State) strLib() *lua.LTable {
	return s.backing(s.globals.RawGetString("string").(*lua.LTable))
}

// loadString is loadstring: a chunk compiled as Lua 5.1 compiles it, with
// the script's read-only globals; its default name is the code itself.
func (s *State) loadString(L *lua.LState) int {
	src := luaCheckString(L, 1, "loadstring")
	name := src
	if L.GetTop() >= 2 && L.Get(2) != lua.LNil {
		name = luaCheckString(L, 2, "loadstring")
	}
	return s.pushChunk(L, []byte(src), name)
}

// load is load: the chunk's pieces come from a function.
func (s *State) load(L *lua.LState) int {
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
		text := ToString(piece)
		if text == "" {
			break
		}
		src = append(src, text...)
	}
	return s.pushChunk(L, src, name)
}

func (s *State) pushChunk(L *lua.LState, src []byte, name string) int {
	display := luaChunkID(name)
	proto, msg := compileChunk(src, display)
	if msg != "" {
		L.Push(lua.LNil)
		L.Push(lua.LString(msg))
		return 2
	}
	s.chunkNames[display] = name
	fn := L.NewFunctionFromProto(proto)
	fn.Env = s.env
	L.Push(fn)
	return 1
}

// luaErrorFunction is Lua 5.1's error: the position is added to string and
// number messages, and only when the level names a Lua function.
func luaErrorFunction(L *lua.LState) int {
	v := L.Get(1)
	level := luaOptInt(L, 2, "error", 1)
	if lua.LVCanConvToString(v) && level > 0 {
		v = lua.LString(luaWhere(L, int(level)) + ToString(v))
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
func (s *State) pcall(L *lua.LState) int {
	if L.GetTop() < 1 {
		luaArgError(L, 1, "pcall", "value expected")
	}
	if f := L.Get(1); f.Type() != lua.LTFunction && L.GetMetaField(f, "__call").Type() != lua.LTFunction {
		L.SetTop(0)
		L.Push(lua.LFalse)
		L.Push(lua.LString("attempt to call a " + f.Type().String() + " value"))
		return 2
	}
	L.Insert(s.runProtected, 1)
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
func (s *State) xpcall(L *lua.LState) int {
	fn := L.CheckAny(1)
	handler := L.CheckAny(2)
	L.SetTop(0)
	onError := L.NewFunction(func(L *lua.LState) int {
		msg := L.Get(1)
		if text, ok := msg.(lua.LString); ok {
			msg = lua.LString(s.lua51Message(L, string(text), 1))
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
func (s *State) callProtected(L *lua.LState) int {
	L.Panic = s.panicPcall
	L.Call(L.GetTop()-1, lua.MultRet)
	return L.GetTop()
}

// raiseInPcall words the errors of the virtual machine as Lua 5.1 does,
// while the frame that raised them is still there.
func (s *State) raiseInPcall(L *lua.LState) {
	v := L.Get(-1)
	if text, ok := v.(lua.LString); ok {
		v = lua.LString(s.lua51Message(L, string(text), 0))
	}
	panic(&lua.ApiError{Type: lua.ApiErrorRun, Object: v, StackTrace: noTrace})
}

// noTrace fills ApiError.StackTrace so that gopher-lua does not collect a
// trace, walking the whole stack once per frame, for an error nobody reads
// one of.
const noTrace = "(not collected)"

// argTable returns the KEYS or ARGV table for a run. The previous run's
// table is reused when the script left it a plain array (it may have
// changed its values, which are all rewritten), and so are its strings
// that equal the new arguments; otherwise a new table is made. Nothing
// else can hold the table after a run: globals are read-only.
func (s *State) argTable(t *lua.LTable, args [][]byte, mem *argMemory) *lua.LTable {
	t0 := t
	defer func() { mem.note(t != t0, args) }()
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
		t = s.vm.CreateTable(len(args), 0)
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

// ErrorTable makes the Lua error value Redis makes (luaPushErrorBuff): a
// table whose err field is the message with its error code, "ERR" when the
// message has none. msg is either "-CODE text" or plain text.
func ErrorTable(L *lua.LState, msg string) *lua.LTable {
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

// callScript runs the script's function with errors raised through
// raiseInScript.
func (s *State) callScript(L *lua.LState) int {
	L.Panic = s.panicScript
	L.Call(0, 1)
	return 1
}

// raiseInScript turns an error escaping the script into the table Redis's
// error handler makes, while the frames are still there to say where it
// happened.
func (s *State) raiseInScript(L *lua.LState) {
	panic(&lua.ApiError{Type: lua.ApiErrorRun, Object: s.handleError(L, L.Get(-1), 0), StackTrace: noTrace})
}

// handleError is what Redis's __redis__err__handler makes of an error: a
// table with the message (with its error code) and where it happened (the
// innermost Lua function, not a library function it called), looking at
// the frames from level on.
func (s *State) handleError(L *lua.LState, e lua.LValue, level int) *lua.LTable {
	t, ok := e.(*lua.LTable)
	if !ok {
		msg := ToString(e)
		if stop := s.stopped(); stop != nil && strings.HasSuffix(msg, stop.Error()) {
			msg = stop.Error()
		} else {
			msg = "ERR " + s.lua51Message(L, msg, level)
		}
		t = L.CreateTable(0, 3)
		t.RawSetString("err", lua.LString(msg))
	}
	if dbg, ok := errorFrame(L, level); ok {
		source := dbg.Source
		if source == s.chunk {
			source = "@" + source
		} else if name, ok := s.chunkNames[source]; ok {
			source = name
		}
		t.RawSetString("source", lua.LString(source))
		t.RawSetString("line", lua.LNumber(dbg.CurrentLine))
	}
	return t
}

// stopped is the error of the options' context once it is done: the
// script was stopped from outside.
func (s *State) stopped() error {
	if s.ctx == nil {
		return nil
	}
	return s.ctx.Err()
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

// ErrorCounted reports whether a script's error, raised (err) or returned
// (v, when err is nil), is marked as counted already: the error reply of
// a command the script called, which Redis counts in its error statistics
// when that command fails and not again when the script passes it on
// (the table's ignore_error_stats_update).
func ErrorCounted(err error, v lua.LValue) bool {
	if err != nil {
		v = errorValue(err)
	}
	t, ok := v.(*lua.LTable)
	return ok && lua.LVAsBool(t.RawGetString("ignore_error_stats_update"))
}

// WriteError replies with the error Run returned for the script whose
// SHA1 is sha, as Redis does: "<message> script: <sha>, on
// @user_script:<line>."
func WriteError(w *resp.Writer, err error, sha string) {
	t, ok := errorValue(err).(*lua.LTable)
	if !ok {
		// Not raised through raiseInScript: a Go panic gopher-lua caught.
		w.ErrorVerbatim("ERR " + ToString(errorValue(err)) + " script: " + sha)
		return
	}
	msgv := t.RawGetString("err")
	if !lua.LVCanConvToString(msgv) {
		// Redis 7.0.15 crashes on an error table without a message; say
		// what happened instead.
		msgv = lua.LString("ERR script raised an error value that is not a string or an {err=...} table")
	}
	var b strings.Builder
	b.WriteString(ToString(msgv))
	source, line := t.RawGetString("source"), t.RawGetString("line")
	if lua.LVCanConvToString(source) && lua.LVCanConvToString(line) {
		b.WriteString(" script: ")
		b.WriteString(sha)
		b.WriteString(", on ")
		b.WriteString(ToString(source))
		b.WriteByte(':')
		b.WriteString(ToString(line))
		b.WriteByte('.')
	}
	w.ErrorVerbatim(b.String())
}
