package lua51

import (
	"context"
	"errors"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// Redis 7's functions run in a state of their own (Options.Library), as
// Redis's function engine has its own lua_State. It differs from the
// scripts' state in three ways:
//
//   - a library's code and the functions it registers see one globals
//     table, empty and read-only, whose metatable's __index Redis switches:
//     while FUNCTION LOAD runs the code it is the load-time API (a "redis"
//     table with register_function, log and the version, and nothing else,
//     not even string or math); afterwards it is the scripts' globals;
//   - a function gets its keys and arguments as two table arguments, not
//     as the KEYS and ARGV globals;
//   - its code is named "user_function" in messages.

// FunctionChunkName is the name errors give a library's code.
const FunctionChunkName = "user_function"

// functionEnv is the functions' part of a state.
type functionEnv struct {
	globals *lua.LTable // the globals of every library's code
	meta    *lua.LTable // its metatable, whose __index is switched
	library lua.LValue  // the load-time API
	loading bool
	call    *lua.LFunction // calls a function with errors raised as Run's
}

// functionSandbox builds the functions' globals over the sandbox.
func (s *State) functionSandbox(library func(L *lua.LState) *lua.LTable) {
	L := s.vm
	redis := library(L)
	L.SetMetatable(redis, missingMeta(L))
	api := L.NewTable()
	api.RawSetString("redis", s.readOnlyView(redis))
	L.SetMetatable(api, missingMeta(L))
	f := &functionEnv{library: s.readOnlyView(api)}
	f.meta = L.NewTable()
	f.meta.RawSetString("__index", s.env)
	f.meta.RawSetString("__newindex", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("Attempt to modify a readonly table")
		return 0
	}))
	f.globals = L.NewTable()
	L.SetMetatable(f.globals, f.meta)
	s.views[f.globals] = s.globals
	f.call = L.NewFunction(func(L *lua.LState) int {
		L.Panic = s.panicScript
		L.Call(2, 1)
		return 1
	})
	s.fn = f
}

// CompileFunction compiles a library's code (what follows its shebang
// line, from the line feed that ends it, so that lines keep their
// numbers) as Lua 5.1 does, named "user_function".
func CompileFunction(src []byte) (*lua.FunctionProto, error) {
	proto, msg := compileChunk(src, FunctionChunkName)
	if msg != "" {
		return nil, errors.New(msg)
	}
	return proto, nil
}

// Loading reports whether a library's code is being run by LoadLibrary:
// only then may it register functions.
func (s *State) Loading() bool { return s.fn != nil && s.fn.loading }

// LoadLibrary runs a library's code, compiled by CompileFunction, with
// the load-time globals, for at most timeout (0: no limit). The code
// registers its functions through the "redis" table of
// Options.Library. On failure it returns Redis's message: the error's
// text with its code ("ERR user_function:2: Attempt to modify a readonly
// table", "ERR FUNCTION LOAD timeout").
func (s *State) LoadLibrary(proto *lua.FunctionProto, timeout time.Duration) string {
	L := s.vm
	f := s.fn
	fn := L.NewFunctionFromProto(proto)
	fn.Env = f.globals
	clear(s.chunkNames)
	f.meta.RawSetString("__index", f.library)
	f.loading = true
	var ctx context.Context
	if timeout > 0 {
		parent := s.ctx
		if parent == nil {
			parent = context.Background()
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(parent, timeout)
		defer cancel()
		L.SetContext(ctx)
	}
	defer func() {
		f.meta.RawSetString("__index", s.env)
		f.loading = false
		if ctx != nil {
			if s.ctx != nil {
				L.SetContext(s.ctx)
			} else {
				L.RemoveContext()
			}
		}
	}()
	L.Push(s.runScript)
	L.Push(fn)
	err := L.PCall(1, 1, nil)
	if err == nil {
		L.Pop(1)
		return ""
	}
	if ctx != nil && ctx.Err() != nil && (s.ctx == nil || s.ctx.Err() == nil) {
		return "ERR FUNCTION LOAD timeout"
	}
	v := errorValue(err)
	if t, ok := v.(*lua.LTable); ok {
		v = t.RawGetString("err")
	}
	if !lua.LVCanConvToString(v) {
		return "ERR execution failure"
	}
	return ToString(v)
}

// CallFunction calls a function a library registered with its keys and
// arguments as two tables, and returns its result, or its error as Run
// does (see WriteError).
func (s *State) CallFunction(fn *lua.LFunction, keys, argv [][]byte) (lua.LValue, error) {
	L := s.vm
	clear(s.chunkNames)
	L.Push(s.fn.call)
	L.Push(fn)
	L.Push(arrayTable(L, keys))
	L.Push(arrayTable(L, argv))
	if err := L.PCall(3, 1, nil); err != nil {
		return lua.LNil, err
	}
	v := L.Get(-1)
	L.Pop(1)
	return v, nil
}

// arrayTable is a new table of strings. A function may keep its keys or
// arguments (in an upvalue), so they are never reused.
func arrayTable(L *lua.LState, args [][]byte) *lua.LTable {
	t := L.CreateTable(len(args), 0)
	for i, a := range args {
		t.RawSetInt(i+1, lua.LString(a))
	}
	return t
}

// LoadTimeout is how long FUNCTION LOAD lets a library's code run, as
// Redis's LOAD_TIMEOUT_MS.
const LoadTimeout = 500 * time.Millisecond
