package scripting

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/limitkv/limitkv/lua51"
	"github.com/limitkv/limitkv/resp"
)

// Redis 7's functions. A library is Lua code whose first line names it
// ("#!lua name=mylib"); FUNCTION LOAD runs the code once, and what it
// registers with redis.register_function can then be called by name. As
// in Redis, libraries live in a Lua state of their own (a second runner,
// see lua51/functions.go), and FCALL runs through the same combiner,
// sandbox, redis.* API, BUSY and kill handling as EVAL.
//
// Every change to the libraries (LOAD, DELETE, FLUSH, RESTORE) happens
// with every shard locked, as everything that runs Lua code does, and
// with the registry's lock (Change), under which it is also sent to the
// replicas: a full sync reads the libraries under that lock together
// with the offset its copy stands for (DumpHeld). Snapshots keep the
// libraries as FUNCTION DUMP's payload (Snapshot, Replace).

// Library is one loaded library.
type Library struct {
	name string
	code []byte // as loaded, shebang included
	fns  []*Function
}

// Name returns the library's name.
func (lib *Library) Name() string { return lib.name }

// Code returns the library's code as it was loaded, first line included.
func (lib *Library) Code() []byte { return lib.code }

// Functions returns the functions the library registered, by name.
func (lib *Library) Functions() []*Function { return lib.fns }

// Function is one function a library registered.
type Function struct {
	name  string
	key   string // name in lower case, its key in librarySet.funcs
	desc  []byte // nil: none
	flags Flags
	fn    *lua.LFunction // of the functions' runner's state
}

// Name returns the function's name as registered.
func (f *Function) Name() string { return f.name }

// Description returns the function's description (nil: none).
func (f *Function) Description() []byte { return f.desc }

// Flags returns the flags the function registered with.
func (f *Function) Flags() Flags { return f.flags }

// librarySet is a set of libraries (Redis's functionsLibCtx): those in
// use, or those a FUNCTION RESTORE reads before it joins them.
type librarySet struct {
	libs map[string]*Library
	// funcs: every library's functions, by lower-case name: FCALL finds
	// a function in any case, as Redis's dictionary of them does.
	funcs map[string]*Function
}

func newLibrarySet() *librarySet {
	return &librarySet{libs: map[string]*Library{}, funcs: map[string]*Function{}}
}

func (ls *librarySet) link(lib *Library) {
	ls.libs[lib.name] = lib
	for _, f := range lib.fns {
		ls.funcs[f.key] = f
	}
}

func (ls *librarySet) unlink(lib *Library) {
	delete(ls.libs, lib.name)
	for _, f := range lib.fns {
		delete(ls.funcs, f.key)
	}
}

// sorted returns the libraries by name: Redis lists them in the order of
// its hash table, which changes from run to run; limitkv's order is
// stable.
func (ls *librarySet) sorted() []*Library {
	out := make([]*Library, 0, len(ls.libs))
	for _, lib := range ls.libs {
		out = append(out, lib)
	}
	slices.SortFunc(out, func(a, b *Library) int { return strings.Compare(a.name, b.name) })
	return out
}

// Registry is the server's function libraries.
type Registry struct {
	rt *Runtime
	// mu guards cur; changes also hold every shard lock.
	mu  sync.RWMutex
	cur *librarySet
	// gen counts changes, for snapshots.
	gen atomic.Uint64
	// runner runs the libraries' code and functions; it belongs to the
	// holder of every shard lock.
	runner *runner
	// vmBytes is the runner's state's size after its last use
	// (used_memory_vm_functions).
	vmBytes atomic.Int64
	// broken: a library's code left the runner's state unusable (see
	// runner.exec); Change rebuilds it.
	broken bool
}

// Stats returns the number of functions and libraries and the bytes of
// their code and names (INFO's used_memory_functions).
func (reg *Registry) Stats() (funcs, libs int, bytes int64) {
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	if reg.cur == nil {
		return 0, 0, 0
	}
	for _, lib := range reg.cur.libs {
		bytes += int64(len(lib.name) + len(lib.code))
		for _, f := range lib.fns {
			bytes += int64(len(f.name) + len(f.desc))
		}
	}
	return len(reg.cur.funcs), len(reg.cur.libs), bytes
}

// Counts returns the number of libraries and of functions (FUNCTION
// STATS).
func (reg *Registry) Counts() (libs, funcs int) {
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	cur := reg.current()
	return len(cur.libs), len(cur.funcs)
}

// VMBytes returns the size of the functions' Lua state
// (used_memory_vm_functions).
func (reg *Registry) VMBytes() int64 { return reg.vmBytes.Load() }

// State returns the Lua state the libraries run in, which changes when
// they get a fresh one; nil before the first library. Only the holder of
// every shard lock may use it.
func (reg *Registry) State() *lua51.State {
	if reg.runner == nil {
		return nil
	}
	return reg.runner.state
}

// Libraries returns the libraries, by name.
func (reg *Registry) Libraries() []*Library {
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	return reg.current().sorted()
}

// noteMemory records the runner's state's size; the caller holds every
// shard lock.
func (reg *Registry) noteMemory() {
	if reg.runner != nil {
		reg.vmBytes.Store(int64(reg.runner.state.Memory()))
	} else {
		reg.vmBytes.Store(0)
	}
}

func (reg *Registry) current() *librarySet {
	if reg.cur == nil {
		reg.cur = newLibrarySet()
	}
	return reg.cur
}

func (reg *Registry) runnerFor() *runner {
	if reg.runner == nil {
		reg.runner = newRunner(reg.rt, true)
	}
	return reg.runner
}

// Lookup finds a function by name, in any case.
func (reg *Registry) Lookup(name []byte) *Function {
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	if reg.cur == nil {
		return nil
	}
	if f := reg.cur.funcs[string(name)]; f != nil {
		return f // a lower-case name, found without a copy
	}
	return reg.cur.funcs[string(bytes.ToLower(name))]
}

// again returns the function f stands for now (nil: deleted), which
// may be another object with the same name if the libraries were loaded
// again.
func (reg *Registry) again(f *Function) *Function {
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	if reg.cur == nil {
		return nil
	}
	return reg.cur.funcs[f.key]
}

// rebuild replaces the functions' runner, whose state is unusable or
// grew too large, and loads every library into the new one. The caller
// holds every shard lock.
func (reg *Registry) rebuild() {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	reg.rebuildLocked()
}

// rebuildLocked is rebuild for a caller that holds reg.mu too.
func (reg *Registry) rebuildLocked() {
	reg.broken = false
	if old := reg.runner; old != nil {
		reg.runner = reg.rt.freshRunner(old)
	} else {
		reg.runner = newRunner(reg.rt, true)
	}
	fresh := newLibrarySet()
	for _, lib := range reg.current().sorted() {
		if _, msg := reg.create(CompileLibrary(lib.code), false, fresh, 0); msg != "" {
			reg.rt.host.Log(slog.LevelError, "a library could not be loaded again into a new Lua state", "library", lib.name, "err", msg)
		}
	}
	reg.cur = fresh
}

// Change runs change, which alters the libraries through Create,
// Delete, Flush or Restore, with the registry locked; when change
// reports a change, the libraries' generation moves on and changed runs,
// still under the lock (it sends the command to the replicas, whose full
// syncs read the libraries under that lock). A library whose code broke
// the Lua state gets a new one. The caller holds every shard lock.
func (reg *Registry) Change(change func() bool, changed func()) {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if change() {
		reg.gen.Add(1)
		changed()
	}
	if reg.broken {
		reg.rebuildLocked()
	}
	reg.noteMemory()
}

// Create is FUNCTION LOAD, inside Change: it loads a compiled library,
// replacing the library of the same name if replace; its code runs for
// at most timeout (0: no limit). It returns the library's name, or
// Redis's error text.
func (reg *Registry) Create(cl *Compiled, replace bool, timeout time.Duration) (string, string) {
	return reg.create(cl, replace, reg.current(), timeout)
}

// Delete is FUNCTION DELETE, inside Change: it reports whether there was
// such a library.
func (reg *Registry) Delete(name []byte) bool {
	ls := reg.current()
	lib := ls.libs[string(name)]
	if lib == nil {
		return false
	}
	ls.unlink(lib)
	return true
}

// Flush is FUNCTION FLUSH, inside Change: no library is left, and the
// Lua state goes too, with what the libraries' code left in it.
func (reg *Registry) Flush() {
	reg.cur = newLibrarySet()
	if old := reg.runner; old != nil {
		reg.runner = reg.rt.freshRunner(old)
	}
}

// libraryMeta is what a library's first line says
// (functionExtractLibMetaData).
type libraryMeta struct {
	engine, name string
	body         []byte // the code from the line feed that ends the first line
}

func parseLibraryMeta(code []byte) (libraryMeta, string) {
	var md libraryMeta
	if !bytes.HasPrefix(code, []byte("#!")) {
		return md, "Missing library metadata"
	}
	end := bytes.IndexByte(code, '\n')
	if end < 0 {
		return md, "Invalid library metadata"
	}
	parts, ok := resp.SplitArgs(code[:end])
	if !ok || len(parts) == 0 {
		return md, "Invalid library metadata"
	}
	md.engine = string(parts[0][2:])
	named := false
	for _, p := range parts[1:] {
		if len(p) >= 5 && asciiEqualFold(p[:5], "NAME=") {
			if named {
				return md, "Invalid metadata value, name argument was given multiple times"
			}
			md.name, named = string(p[5:]), true
			continue
		}
		return md, "Invalid metadata value given: " + string(p)
	}
	if !named {
		return md, "Library name was not given"
	}
	md.body = code[end:]
	return md, ""
}

// asciiEqualFold reports whether b is s in any case of its ASCII letters
// (and only those, unlike bytes.EqualFold).
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c, d := b[i], s[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		if 'a' <= d && d <= 'z' {
			d -= 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
}

// validFunctionName is Redis's functionsVerifyName: letters, digits and
// underscores, at least one.
func validFunctionName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		ch := name[i]
		if !('a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z' || '0' <= ch && ch <= '9' || ch == '_') {
			return false
		}
	}
	return true
}

const msgBadName = "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"

// Compiled is a library's code, compiled before any lock is taken:
// compiling costs time in proportion to the code's size, which the
// client chooses.
type Compiled struct {
	code  []byte
	proto *lua.FunctionProto
	err   string // the compiler's refusal, which create reports in Redis's order
}

// CompileLibrary compiles a library's code for Create; what is wrong
// with it, Create reports.
func CompileLibrary(code []byte) *Compiled {
	cl := &Compiled{code: code}
	md, msg := parseLibraryMeta(code)
	if msg != "" {
		return cl // create reports it
	}
	proto, err := lua51.CompileFunction(md.body)
	if err != nil {
		cl.err = "Error compiling function: " + err.Error()
	} else {
		cl.proto = proto
	}
	return cl
}

// create loads a compiled library into ls, replacing the library of the
// same name if replace (functionsCreateWithLibraryCtx): its code runs for
// at most timeout (0: no limit). It returns the library's name, or Redis's
// error text. The caller holds every shard lock and reg.mu (when ls is
// the registry's).
func (reg *Registry) create(cl *Compiled, replace bool, ls *librarySet, timeout time.Duration) (string, string) {
	code := cl.code
	md, msg := parseLibraryMeta(code)
	if msg != "" {
		return "", msg
	}
	if !validFunctionName(md.name) {
		return "", msgBadName
	}
	if !strings.EqualFold(md.engine, "LUA") {
		return "", "Engine '" + md.engine + "' not found"
	}
	old := ls.libs[md.name]
	if old != nil && !replace {
		return "", "Library '" + md.name + "' already exists"
	}
	if old != nil {
		ls.unlink(old)
	}
	fail := func(msg string) (string, string) {
		if old != nil {
			ls.link(old)
		}
		return "", msg
	}
	if cl.err != "" {
		return fail(cl.err)
	}
	lib := &Library{name: md.name, code: bytes.Clone(code)}
	msg = reg.load(reg.runnerFor(), lib, cl, timeout)
	if msg != "" {
		return fail("Error registering functions: " + msg)
	}
	if len(lib.fns) == 0 {
		return fail("No functions registered")
	}
	for _, f := range lib.fns {
		f.key = strings.ToLower(f.name)
		if ls.funcs[f.key] != nil {
			return fail("Function " + f.name + " already exists")
		}
	}
	slices.SortFunc(lib.fns, func(a, b *Function) int { return strings.Compare(a.name, b.name) })
	ls.link(lib)
	return lib.name, ""
}

// load runs a library's code. gopher-lua lets an error escape when its
// value stack is full while it handles another (a runaway recursion with
// no time limit: a master's library, or one loaded at start-up): the
// state is then unusable, and marked to be rebuilt, as is one whose value
// stack grew too large.
func (reg *Registry) load(r *runner, lib *Library, cl *Compiled, timeout time.Duration) (msg string) {
	r.loading = lib
	defer func() {
		r.loading = nil
		if p := recover(); p != nil {
			if !lua51.StackOverflow(p) {
				panic(p)
			}
			reg.broken = true
			msg = "ERR " + lua51.FunctionChunkName + ": stack overflow"
		}
	}()
	msg = r.state.LoadLibrary(cl.proto, timeout)
	// A deep recursion grew a value stack gopher-lua never shrinks.
	reg.broken = reg.broken || r.state.Oversized()
	return msg
}

// libraryAPI builds the "redis" table a library's code sees while it is
// loaded.
func (r *runner) libraryAPI(L *lua.LState) *lua.LTable {
	t := L.NewTable()
	t.RawSetString("register_function", L.NewFunction(r.registerFunction))
	t.RawSetString("log", L.NewFunction(r.log))
	for name, v := range map[string]int{"LOG_DEBUG": 0, "LOG_VERBOSE": 1, "LOG_NOTICE": 2, "LOG_WARNING": 3} {
		t.RawSetString(name, lua.LNumber(v))
	}
	r.setVersion(t)
	return t
}

// registerFunction is redis.register_function, in its positional form
// (name, callback) and its table form (function_name, callback, flags,
// description), with Redis's checks in Redis's order.
func (r *runner) registerFunction(L *lua.LState) int {
	lib := r.loading
	if lib == nil || !r.state.Loading() {
		raiseRedisError(L, "redis.register_function can only be called on FUNCTION LOAD command")
	}
	f := &Function{}
	var msg string
	switch L.GetTop() {
	case 1:
		msg = readNamedRegistration(L, f)
	case 2:
		name, ok := luaString(L.Get(1))
		switch {
		case !ok:
			msg = "first argument to redis.register_function must be a string"
		case L.Get(2).Type() != lua.LTFunction:
			msg = "second argument to redis.register_function must be a function"
		default:
			f.name, f.fn = name, L.Get(2).(*lua.LFunction)
		}
	default:
		msg = "wrong number of arguments to redis.register_function"
	}
	if msg != "" {
		raiseRedisError(L, msg)
	}
	if !validFunctionName(f.name) {
		raiseRedisError(L, msgBadName)
	}
	for _, g := range lib.fns {
		if g.name == f.name {
			raiseRedisError(L, "Function already exists in the library")
		}
	}
	lib.fns = append(lib.fns, f)
	return 0
}

// readNamedRegistration reads register_function's table of named
// arguments into f; it returns Redis's error text for a bad one.
func readNamedRegistration(L *lua.LState, f *Function) string {
	t, ok := L.Get(1).(*lua.LTable)
	if !ok {
		return "calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments)."
	}
	named := false
	for k, v := t.Next(lua.LNil); k != lua.LNil; k, v = t.Next(k) {
		key, ok := luaString(k)
		if !ok {
			return "named argument key given to redis.register_function is not a string"
		}
		switch {
		case strings.EqualFold(key, "function_name"):
			if f.name, ok = luaString(v); !ok {
				return "function_name argument given to redis.register_function must be a string"
			}
			named = true
		case strings.EqualFold(key, "description"):
			d, ok := luaString(v)
			if !ok {
				return "description argument given to redis.register_function must be a string"
			}
			f.desc = []byte(d)
		case strings.EqualFold(key, "callback"):
			fn, ok := v.(*lua.LFunction)
			if !ok {
				return "callback argument given to redis.register_function must be a function"
			}
			f.fn = fn
		case strings.EqualFold(key, "flags"):
			list, ok := v.(*lua.LTable)
			if !ok {
				return "flags argument to redis.register_function must be a table representing function flags"
			}
			flags, ok := readFunctionFlags(list)
			if !ok {
				return "unknown flag given"
			}
			f.flags = flags
		default:
			return "unknown argument given to redis.register_function"
		}
	}
	if !named {
		return "redis.register_function must get a function name argument"
	}
	if f.fn == nil {
		return "redis.register_function must get a callback argument"
	}
	return ""
}

// readFunctionFlags reads a flags list, as the shebang's names in any
// case.
func readFunctionFlags(list *lua.LTable) (Flags, bool) {
	var flags Flags
	for i := 1; ; i++ {
		v := list.RawGetInt(i)
		if v == lua.LNil {
			return flags, true
		}
		name, ok := luaString(v)
		if !ok {
			return 0, false
		}
		known := false
		for _, sf := range flagNames {
			if strings.EqualFold(name, sf.name) {
				flags |= sf.flag
				known = true
				break
			}
		}
		if !known {
			return 0, false
		}
	}
}

// luaString is lua_isstring and lua_tostring: strings, and numbers as
// Lua 5.1 writes them.
func luaString(v lua.LValue) (string, bool) {
	switch v := v.(type) {
	case lua.LString:
		return string(v), true
	case lua.LNumber:
		return lua51.ToString(v), true
	}
	return "", false
}
