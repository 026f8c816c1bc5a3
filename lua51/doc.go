// Package lua51 is Lua 5.1 as Redis 7.0 embeds it, on gopher-lua: the
// sandbox scripts run in, the standard library with Lua 5.1's behaviour
// where gopher-lua's differs, Redis's cjson, cmsgpack, struct and bit
// libraries, the conversions between Lua values and RESP replies, and Lua
// 5.1's wording of compile and runtime errors. Redis keeps this layer
// apart from its commands (deps/lua), as Dragonfly does
// (src/core/interpreter.cc, src/redis/lua); so does limitkv. The package
// knows nothing of commands: the embedder supplies the "redis" library
// (Options.Redis), whose functions call its command table, and stops a
// running script through Options.Context (SCRIPT KILL). A state made with
// Options.Library runs Redis 7's function libraries instead (see
// functions.go): their code sees a load-time API while FUNCTION LOAD runs
// it, and their functions get their keys and arguments as tables.
//
// # Why scripts are parsed here
//
// gopher-lua's parser does not parse Lua 5.1: it also accepts goto and
// labels, words its syntax errors its own way, and reads some numerals
// differently (hexadecimal floats, hexadecimal beyond 64 bits, decimals
// that overflow to infinity). Redis refuses a script that does not compile
// with Lua 5.1's message inside its own ("ERR Error compiling script (new
// function): user_script:3: 'end' expected (to close 'if' at line 1) near
// '<eof>'"); limitkv must refuse the same scripts with the same reply, and
// run the others as they are. So
// every new script, and every chunk loadstring or load compiles, first
// goes through a Lua 5.1 syntax checker (syntax.go): it accepts what Lua
// 5.1 accepts, with Lua 5.1's limits (200 syntax levels, 200 locals, 60
// upvalues), rejects the rest with Lua 5.1's exact message, and rewrites
// the numerals gopher-lua would misread into a form it reads the same way.
// Only then do gopher-lua's parser and compiler build the code; the
// checker builds none. This costs one extra parse per new script, not per
// run: compiled scripts are cached by the caller.
//
// # gopher-lua internals, and the pinned version
//
// Lua 5.1 names the value at fault in a runtime error ("attempt to call
// local 'f' (a nil value)", "bad argument #1 to 'rep' (string expected,
// got no value)") by looking at the failing instruction and at what last
// wrote its register; gopher-lua says "attempt to call a non-function
// object". errors.go does what Lua 5.1 does, from the frame that raised
// the error, and gopher-lua exports neither a frame's program counter and
// register base, nor a Go function's argument count, nor the value stack.
// They are read by reflection from unexported fields (LState.reg.array,
// LState.stack's array, Debug.frame's Pc, LocalBase and NArgs), and the
// instructions are decoded with gopher-lua's opcode numbering and layout.
// Its message for a value stack overflow ("registry overflow") is matched
// as text. All of this is gopher-lua v1.1.2's, so go.mod pins that
// version. Should an upgrade rename or reshape any of it, nothing crashes:
// the messages fall back to gopher-lua's own wording, and the stacks read
// as empty (Memory is 0, Oversized never true). But TestRuntimeErrorTexts
// and TestGopherLuaInternals fail, and
// the differential suite (tests/testdata/diff/scripting.txt) finds the
// changed texts.
package lua51
