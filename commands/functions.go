package commands

import (
	"bytes"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/lua51"
	"github.com/limitkv/limitkv/rdb"
	"github.com/limitkv/limitkv/resp"
)

// Redis 7's functions: FUNCTION LOAD, DELETE, LIST, STATS, FLUSH, KILL,
// DUMP, RESTORE, and FCALL, FCALL_RO. A library is Lua code whose first
// line names it ("#!lua name=mylib"); FUNCTION LOAD runs the code once,
// and what it registers with redis.register_function can then be called
// by name. As in Redis, libraries live in a Lua state of their own (a
// second runner, see scripting_lua.go and lua51/functions.go), and FCALL
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

// library is one loaded library.
type library struct {
	name string
	code []byte // as loaded, shebang included
	fns  []*libFunction
}

// libFunction is one function a library registered.
type libFunction struct {
	name  string
	key   string // name in lower case, its key in functionLibs.funcs
	desc  []byte // nil: none
	flags scriptFlags
	fn    *lua.LFunction // of the functions' runner's state
}

// functionLibs is a set of libraries (Redis's functionsLibCtx): those in
// use, or those a FUNCTION RESTORE reads before it joins them.
type functionLibs struct {
	libs map[string]*library
	// funcs: every library's functions, by lower-case name: FCALL finds
	// a function in any case, as Redis's dictionary of them does.
	funcs map[string]*libFunction
}

func newFunctionLibs() *functionLibs {
	return &functionLibs{libs: map[string]*library{}, funcs: map[string]*libFunction{}}
}

func (fl *functionLibs) link(lib *library) {
	fl.libs[lib.name] = lib
	for _, f := range lib.fns {
		f.key = strings.ToLower(f.name)
		fl.funcs[f.key] = f
	}
}

func (fl *functionLibs) unlink(lib *library) {
	delete(fl.libs, lib.name)
	for _, f := range lib.fns {
		delete(fl.funcs, f.key)
	}
}

func (fl *functionLibs) functions() int { return len(fl.funcs) }

// sorted returns the libraries by name: Redis lists them in the order of
// its hash table, which changes from run to run; limitkv's order is
// stable.
func (fl *functionLibs) sorted() []*library {
	out := make([]*library, 0, len(fl.libs))
	for _, lib := range fl.libs {
		out = append(out, lib)
	}
	slices.SortFunc(out, func(a, b *library) int { return strings.Compare(a.name, b.name) })
	return out
}

// functionRegistry is the server's libraries.
type functionRegistry struct {
	// mu guards cur; changes also hold every shard lock.
	mu  sync.RWMutex
	cur *functionLibs
	// gen counts changes, for snapshots.
	gen atomic.Uint64
	// runner runs the libraries' code and functions; it belongs to the
	// holder of every shard lock, and loading is the library whose code
	// it runs (redis.register_function adds to it).
	runner  *luaRunner
	loading *library
	// vmBytes is the runner's state's size after its last use
	// (used_memory_vm_functions).
	vmBytes atomic.Int64
	// broken: a library's code left the runner's state unusable (see
	// luaRunner.exec); changeFunctions rebuilds it.
	broken bool
}

// stats returns the number of functions and libraries and the bytes of
// their code and names (INFO's used_memory_functions).
func (reg *functionRegistry) stats() (funcs, libs int, bytes int64) {
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

// noteMemory records the runner's state's size; the caller holds every
// shard lock.
func (reg *functionRegistry) noteMemory() {
	if reg.runner != nil {
		reg.vmBytes.Store(int64(reg.runner.state.Memory()))
	} else {
		reg.vmBytes.Store(0)
	}
}

func (reg *functionRegistry) current() *functionLibs {
	if reg.cur == nil {
		reg.cur = newFunctionLibs()
	}
	return reg.cur
}

func (reg *functionRegistry) runnerFor(srv *Server) *luaRunner {
	if reg.runner == nil {
		reg.runner = newRunner(srv, true)
	}
	return reg.runner
}

// lookup finds a function by name, in any case.
func (reg *functionRegistry) lookup(name []byte) *libFunction {
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
func (reg *functionRegistry) again(f *libFunction) *libFunction {
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
func (reg *functionRegistry) rebuild(srv *Server) {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	reg.rebuildLocked(srv)
}

// rebuildLocked is rebuild for a caller that holds reg.mu too.
func (reg *functionRegistry) rebuildLocked(srv *Server) {
	reg.broken = false
	old := reg.runner
	reg.runner = newRunner(srv, true)
	if old != nil {
		reg.runner.state.ContinueRandom(old.state)
	}
	fresh := newFunctionLibs()
	for _, lib := range reg.current().sorted() {
		if _, msg := reg.create(srv, compileLibrary(lib.code), false, fresh, 0); msg != "" {
			srv.Log.Error("a library could not be loaded again into a new Lua state", "library", lib.name, "err", msg)
		}
	}
	reg.cur = fresh
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
		if len(p) >= 5 && is(p[:5], "NAME=") {
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

// compiledLibrary is a library's code, compiled before any lock is
// taken: compiling costs time in proportion to the code's size, which the
// client chooses.
type compiledLibrary struct {
	code  []byte
	proto *lua.FunctionProto
	err   string // the compiler's refusal, which create reports in Redis's order
}

func compileLibrary(code []byte) *compiledLibrary {
	cl := &compiledLibrary{code: code}
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

// create loads a compiled library into fl, replacing the library of the
// same name if replace (functionsCreateWithLibraryCtx): its code runs for
// at most timeout (0: no limit). It returns the library's name, or Redis's
// error text. The caller holds every shard lock and reg.mu (when fl is
// the registry's).
func (reg *functionRegistry) create(srv *Server, cl *compiledLibrary, replace bool, fl *functionLibs, timeout time.Duration) (string, string) {
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
	old := fl.libs[md.name]
	if old != nil && !replace {
		return "", "Library '" + md.name + "' already exists"
	}
	if old != nil {
		fl.unlink(old)
	}
	fail := func(msg string) (string, string) {
		if old != nil {
			fl.link(old)
		}
		return "", msg
	}
	if cl.err != "" {
		return fail(cl.err)
	}
	lib := &library{name: md.name, code: bytes.Clone(code)}
	r := reg.runnerFor(srv)
	msg = reg.load(r, lib, cl, timeout)
	if msg != "" {
		return fail("Error registering functions: " + msg)
	}
	if len(lib.fns) == 0 {
		return fail("No functions registered")
	}
	for _, f := range lib.fns {
		if fl.funcs[strings.ToLower(f.name)] != nil {
			return fail("Function " + f.name + " already exists")
		}
	}
	slices.SortFunc(lib.fns, func(a, b *libFunction) int { return strings.Compare(a.name, b.name) })
	fl.link(lib)
	return lib.name, ""
}

// load runs a library's code. gopher-lua lets an error escape when its
// value stack is full while it handles another (a runaway recursion with
// no time limit: a master's library, or one loaded at start-up): the
// state is then unusable, and marked to be rebuilt, as is one whose value
// stack grew too large.
func (reg *functionRegistry) load(r *luaRunner, lib *library, cl *compiledLibrary, timeout time.Duration) (msg string) {
	reg.loading = lib
	defer func() {
		reg.loading = nil
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
func (r *luaRunner) libraryAPI(L *lua.LState) *lua.LTable {
	t := L.NewTable()
	t.RawSetString("register_function", L.NewFunction(r.registerFunction))
	t.RawSetString("log", L.NewFunction(r.log))
	for name, v := range map[string]int{"LOG_DEBUG": 0, "LOG_VERBOSE": 1, "LOG_NOTICE": 2, "LOG_WARNING": 3} {
		t.RawSetString(name, lua.LNumber(v))
	}
	t.RawSetString("REDIS_VERSION", lua.LString(RedisVersion))
	t.RawSetString("REDIS_VERSION_NUM", lua.LNumber(redisVersionNum()))
	return t
}

// registerFunction is redis.register_function, in its positional form
// (name, callback) and its table form (function_name, callback, flags,
// description), with Redis's checks in Redis's order.
func (r *luaRunner) registerFunction(L *lua.LState) int {
	lib := r.srv.scripts.funcs.loading
	if lib == nil || !r.state.Loading() {
		raiseRedisError(L, "redis.register_function can only be called on FUNCTION LOAD command")
	}
	f := &libFunction{}
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
func readNamedRegistration(L *lua.LState, f *libFunction) string {
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
func readFunctionFlags(list *lua.LTable) (scriptFlags, bool) {
	var flags scriptFlags
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
		for _, sf := range shebangFlags {
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

// changeFunctions runs fn, a change to the libraries, with every shard
// and the registry locked, and sends the command to the replicas if fn
// reports a change.
func (c *Ctx) changeFunctions(fn func(reg *functionRegistry) bool) {
	srv := c.Srv
	if !c.held {
		srv.Eng.Lock(engine.AllShards)
		defer srv.Eng.Unlock(engine.AllShards)
	}
	reg := &srv.scripts.funcs
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if fn(reg) {
		reg.gen.Add(1)
		c.replicate(-1, c.Args...)
	}
	if reg.broken {
		reg.rebuildLocked(srv)
	}
	reg.noteMemory()
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
	cl := compileLibrary(c.Args[i])
	c.changeFunctions(func(reg *functionRegistry) bool {
		name, msg := reg.create(c.Srv, cl, replace, reg.current(), timeout)
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
	c.changeFunctions(func(reg *functionRegistry) bool {
		fl := reg.current()
		lib := fl.libs[string(c.Args[2])]
		if lib == nil {
			c.W.Error("Library not found")
			return false
		}
		fl.unlink(lib)
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
	c.changeFunctions(func(reg *functionRegistry) bool {
		reg.cur = newFunctionLibs()
		// The state goes too, with what the libraries' code left in it.
		if old := reg.runner; old != nil {
			reg.runner = newRunner(c.Srv, true)
			reg.runner.state.ContinueRandom(old.state)
		}
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
	reg := &c.Srv.scripts.funcs
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	libs := reg.current().sorted()
	if named {
		kept := libs[:0]
		for _, lib := range libs {
			if engine.Match(pattern, []byte(lib.name), true) {
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
		c.W.BulkString(lib.name)
		c.W.BulkString("engine")
		c.W.BulkString("LUA")
		c.W.BulkString("functions")
		c.W.Array(len(lib.fns))
		for _, f := range lib.fns {
			c.W.Map(3)
			c.W.BulkString("name")
			c.W.BulkString(f.name)
			c.W.BulkString("description")
			if f.desc != nil {
				c.W.Bulk(f.desc)
			} else {
				c.W.Null()
			}
			c.W.BulkString("flags")
			n := 0
			for _, sf := range shebangFlags {
				if f.flags&sf.flag != 0 {
					n++
				}
			}
			c.W.Set(n)
			for _, sf := range shebangFlags {
				if f.flags&sf.flag != 0 {
					c.W.Simple(sf.name)
				}
			}
		}
		if withCode {
			c.W.BulkString("library_code")
			c.W.Bulk(lib.code)
		}
	}
}

func cmdFunctionStats(c *Ctx) {
	se := &c.Srv.scripts
	se.killMu.Lock()
	run := se.running.Load()
	if run != nil && !run.function.Load() {
		se.killMu.Unlock()
		c.W.Error(msgBusy)
		return
	}
	c.W.Map(2)
	c.W.BulkString("running_script")
	if run == nil {
		c.W.Null()
	} else {
		c.W.Map(3)
		c.W.BulkString("name")
		c.W.BulkString(run.fname)
		c.W.BulkString("command")
		c.W.Array(len(run.command))
		for _, a := range run.command {
			c.W.Bulk(a)
		}
		c.W.BulkString("duration_ms")
		c.W.Int(int64(time.Duration(monoNow()-run.startNs.Load()) / time.Millisecond))
	}
	se.killMu.Unlock()
	reg := &se.funcs
	reg.mu.RLock()
	fl := reg.current()
	libs, fns := len(fl.libs), fl.functions()
	reg.mu.RUnlock()
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

func cmdFunctionHelp(c *Ctx) {
	help(c, "FUNCTION", []string{
		"LOAD [REPLACE] <FUNCTION CODE>",
		"    Create a new library with the given library name and code.",
		"DELETE <LIBRARY NAME>",
		"    Delete the given library.",
		"LIST [LIBRARYNAME PATTERN] [WITHCODE]",
		"    Return general information on all the libraries:",
		"    * Library name",
		"    * The engine used to run the Library",
		"    * Library description",
		"    * Functions list",
		"    * Library code (if WITHCODE is given)",
		"    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
		"STATS",
		"    Return information about the current function running:",
		"    * Function name",
		"    * Command used to run the function",
		"    * Duration in MS that the function is running",
		"    If no function is running, return nil",
		"    In addition, returns a list of available engines.",
		"KILL",
		"    Kill the current running function.",
		"FLUSH [ASYNC|SYNC]",
		"    Delete all the libraries.",
		"    When called without the optional mode argument, the behavior is determined by the",
		"    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
		"    * ASYNC: Asynchronously flush the libraries.",
		"    * SYNC: Synchronously flush the libraries.",
		"DUMP",
		"    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
		"RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
		"    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
		"    control how to handle existing libraries (default APPEND):",
		"    * FLUSH: delete all existing libraries.",
		"    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
		"    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
		"      libraries with the new libraries (notice that even on this option there is a chance of failure",
		"      in case of functions name collision with another library).",
	})
}

// RDB's opcodes for a library: RDB_OPCODE_FUNCTION2 (the code), and the
// layout of Redis 7.0's release candidates, which Redis still reads.
const (
	rdbOpFunction2 = 245
	rdbOpFunction  = 246
)

// dumpFunctions is FUNCTION DUMP's payload: each library as
// RDB_OPCODE_FUNCTION2 and its code, in RDB's envelope. The caller holds
// reg.mu.
func (reg *functionRegistry) dumpFunctions() []byte {
	var b []byte
	for _, lib := range reg.current().sorted() {
		b = append(b, rdbOpFunction2)
		b = rdb.AppendString(b, lib.code)
	}
	return rdb.Seal(b)
}

func cmdFunctionDump(c *Ctx) {
	reg := &c.Srv.scripts.funcs
	reg.mu.RLock()
	payload := reg.dumpFunctions()
	reg.mu.RUnlock()
	c.W.Bulk(payload)
}

type restorePolicy int

const (
	restoreAppend restorePolicy = iota
	restoreReplace
	restoreFlush
)

func cmdFunctionRestore(c *Ctx) {
	if len(c.Args) > 4 {
		subcommandSyntaxError(c)
		return
	}
	policy := restoreAppend
	if len(c.Args) == 4 {
		switch p := c.Args[3]; {
		case is(p, "APPEND"):
		case is(p, "REPLACE"):
			policy = restoreReplace
		case is(p, "FLUSH"):
			policy = restoreFlush
		default:
			c.W.Error("Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.")
			return
		}
	}
	payload, err := rdb.Open(c.Args[2])
	if err != nil {
		c.W.ErrorVerbatim("ERR " + err.Error())
		return
	}
	libs, readErr := readFunctionPayload(payload)
	timeout := loadTimeout(c)
	c.changeFunctions(func(reg *functionRegistry) bool {
		if msg := reg.restore(c.Srv, libs, readErr, policy, timeout); msg != "" {
			c.W.ErrorVerbatim("ERR " + msg)
			return false
		}
		c.W.OK()
		return true
	})
}

// readFunctionPayload reads and compiles the libraries of a payload
// (without its envelope). A payload it cannot read to the end gives the
// libraries before the fault and Redis's error text for it.
func readFunctionPayload(payload []byte) ([]*compiledLibrary, string) {
	var libs []*compiledLibrary
	r := rdb.NewReader(payload)
	for r.Remaining() > 0 {
		code, msg := readFunctionRecord(r)
		if msg != "" {
			return libs, msg
		}
		libs = append(libs, compileLibrary(code))
	}
	return libs, ""
}

// readFunctionRecord reads one library's record (rdbFunctionLoad).
func readFunctionRecord(r *rdb.Reader) ([]byte, string) {
	op := r.Byte()
	if r.Err() != nil {
		return nil, "can not read data type"
	}
	var code []byte
	switch op {
	case rdbOpFunction2:
		code = r.String()
		if r.Err() != nil {
			return nil, "Failed loading library payload"
		}
	case rdbOpFunction:
		name := r.String()
		if r.Err() != nil {
			return nil, "Failed loading library name"
		}
		eng := r.String()
		if r.Err() != nil {
			return nil, "Failed loading engine name"
		}
		hasDesc := r.Len()
		if r.Err() != nil {
			return nil, "Failed loading library description indicator"
		}
		if hasDesc != 0 {
			if r.String(); r.Err() != nil {
				return nil, "Failed loading library description"
			}
		}
		blob := r.String()
		if r.Err() != nil {
			return nil, "Failed loading library blob"
		}
		code = append(append(append(append([]byte("#!"), eng...), " name="...), name...), '\n')
		code = append(code, blob...)
	default:
		return nil, "given type is not a function"
	}
	return code, ""
}

// restore loads the libraries of a payload (readFunctionPayload's, and
// its error) and joins them to the registry's under policy, or changes
// nothing and returns Redis's error text. The caller holds every shard
// lock and reg.mu.
func (reg *functionRegistry) restore(srv *Server, libs []*compiledLibrary, readErr string, policy restorePolicy, timeout time.Duration) string {
	fresh := newFunctionLibs()
	for _, cl := range libs {
		if _, msg := reg.create(srv, cl, false, fresh, timeout); msg != "" {
			return msg
		}
	}
	if readErr != "" {
		return readErr
	}
	cur := reg.current()
	if policy == restoreFlush {
		reg.cur = fresh
		return ""
	}
	// libraryJoin: the libraries replaced are put back if a function
	// collides.
	var replaced []*library
	undo := func() {
		for _, lib := range replaced {
			cur.link(lib)
		}
	}
	for _, lib := range fresh.sorted() {
		old := cur.libs[lib.name]
		if old == nil {
			continue
		}
		if policy != restoreReplace {
			undo()
			return "Library " + lib.name + " already exists"
		}
		cur.unlink(old)
		replaced = append(replaced, old)
	}
	for _, lib := range fresh.sorted() {
		for _, f := range lib.fns {
			if cur.funcs[strings.ToLower(f.name)] != nil {
				undo()
				return "Function " + f.name + " already exists"
			}
		}
	}
	for _, lib := range fresh.sorted() {
		cur.link(lib)
	}
	return ""
}

// FunctionsPayload returns the libraries as FUNCTION DUMP's payload, and
// a number that changes whenever they do: what snapshots keep.
func (s *Server) FunctionsPayload() ([]byte, uint64) {
	reg := &s.scripts.funcs
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	gen := reg.gen.Load()
	if len(reg.current().libs) == 0 {
		return nil, gen
	}
	return reg.dumpFunctions(), gen
}

// RestoreFunctions replaces the libraries with those of a payload made by
// FunctionsPayload (a snapshot's), before the server serves.
func (s *Server) RestoreFunctions(payload []byte) error {
	body, err := rdb.Open(payload)
	if err != nil {
		return err
	}
	libs, readErr := readFunctionPayload(body)
	s.Eng.Lock(engine.AllShards)
	defer s.Eng.Unlock(engine.AllShards)
	reg := &s.scripts.funcs
	reg.mu.Lock()
	defer reg.mu.Unlock()
	defer reg.noteMemory()
	defer func() {
		if reg.broken {
			reg.rebuildLocked(s)
		}
	}()
	if msg := reg.restore(s, libs, readErr, restoreFlush, 0); msg != "" {
		return errReply(msg)
	}
	return nil
}

// functionsForSync is the replication's hook for a full sync: the
// command that gives a replica the libraries, read under the registry's lock,
// which release lets go once the sync has read its offset, so that a
// change is either in the payload or in the stream after that offset.
func (s *Server) functionsForSync() ([][]byte, func()) {
	reg := &s.scripts.funcs
	reg.mu.RLock()
	entry := [][]byte{[]byte("FUNCTION"), []byte("RESTORE"), reg.dumpFunctions(), []byte("FLUSH")}
	return entry, reg.mu.RUnlock
}

func cmdFCall(c *Ctx)   { fcallGeneric(c, false) }
func cmdFCallRO(c *Ctx) { fcallGeneric(c, true) }

// fcallGeneric is FCALL and FCALL_RO, with the checks of Redis's
// fcallCommandGeneric and scriptPrepareForRun (those processCommand makes
// of the flags the function declared are dispatch's: commandFlags).
func fcallGeneric(c *Ctx, readOnly bool) {
	srv := c.Srv
	f := srv.scripts.funcs.lookup(c.Args[1])
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
	if msg := scriptRefusal(c, f.flags, readOnly); msg != "" {
		c.W.Error(msg)
		return
	}
	srv.scripts.submit(c, nil, f, c.Args[3:3+numKeys], c.Args[3+numKeys:], readOnly || f.flags&scriptNoWrites != 0)
}
