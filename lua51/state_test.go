package lua51

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"

	"github.com/limitkv/limitkv/resp"
)

// runScript compiles src and runs it in s, as EVAL with those keys and
// arguments would, and returns the reply EVAL gives in RESP2, as
// resp.Value.String shows it.
func runScript(t testing.TB, s *State, src string, keys, argv []string) string {
	t.Helper()
	proto, err := Compile([]byte(src))
	if err != nil {
		t.Fatalf("%q does not compile: %v", src, err)
	}
	w := resp.NewWriter(2)
	if v, err := s.Run(s.Bind(proto), byteArgs(keys), byteArgs(argv)); err != nil {
		sum := sha1.Sum([]byte(src))
		WriteError(w, err, hex.EncodeToString(sum[:]))
	} else {
		WriteReply(w, v, 2, nil)
	}
	return readReply(t, w.Bytes())
}

// eval runs src without keys or arguments in a state of its own.
func eval(t testing.TB, src string) string {
	t.Helper()
	return runScript(t, NewState(Options{}), src, nil, nil)
}

func byteArgs(args []string) [][]byte {
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	return bs
}

func readReply(t testing.TB, b []byte) string {
	t.Helper()
	v, err := resp.ReadValue(bufio.NewReader(bytes.NewReader(b)))
	if err != nil {
		t.Fatalf("unreadable reply %q: %v", b, err)
	}
	return v.String()
}

// TestRuntimeErrorTexts checks the rewording of gopher-lua's runtime
// errors into Lua 5.1's, which reads gopher-lua's frames by reflection:
// should a gopher-lua upgrade rename what is read, these texts fall back
// to gopher-lua's and this test says so. The expected texts are Redis
// 7.0.15's.
func TestRuntimeErrorTexts(t *testing.T) {
	s := NewState(Options{})
	for _, tc := range []struct{ script, want string }{
		{"local a = nil; a()", "attempt to call local 'a' (a nil value)"},
		{"local t = {}; t.f()", "attempt to call field 'f' (a nil value)"},
		{"local t = {}; t:foo()", "attempt to call method 'foo' (a nil value)"},
		{"KEYS()", "attempt to call global 'KEYS' (a table value)"},
		{"local u; local function f() return u() end return f()", "attempt to call upvalue 'u' (a nil value)"},
		{"local t = {} t.x.y = 1", "attempt to index field 'x' (a nil value)"},
		{"local a; return a + 1", "attempt to perform arithmetic on local 'a' (a nil value)"},
		{"local a = '10'; local b; return a + b", "attempt to perform arithmetic on local 'b' (a nil value)"},
		{"local n; return 'a' .. n .. 'b'", "attempt to concatenate local 'n' (a nil value)"},
		{"local n; return #n", "attempt to get length of local 'n' (a nil value)"},
		{"return {} < {}", "attempt to compare two table values"},
		{"return string.rep()", "bad argument #1 to 'rep' (string expected, got no value)"},
		{"return string.rep('x', nil)", "bad argument #2 to 'rep' (number expected, got nil)"},
	} {
		got := runScript(t, s, tc.script, nil, nil)
		want := "-ERR user_script:1: " + tc.want
		if !strings.HasPrefix(got, want) {
			t.Errorf("%s:\n got %s\nwant %s...", tc.script, got, want)
		}
	}
}

// TestGopherLuaInternals checks that what the package reads of gopher-lua
// by reflection is still there: the value stack, the call stack, and a
// frame's program counter, register base and argument count.
func TestGopherLuaInternals(t *testing.T) {
	s := NewState(Options{})
	if !s.stackOK || s.stackBytes() == 0 {
		t.Error("the value stack (LState.reg.array) cannot be read")
	}
	if s.callLen == 0 {
		t.Error("the call stack (LState.stack's array) cannot be read")
	}
	var frame luaFrame
	var third, fourth string
	L := s.vm
	L.SetGlobal("probe", L.NewFunction(func(L *lua.LState) int {
		dbg, ok := L.GetStack(1)
		if !ok {
			t.Fatal("no caller")
		}
		frame, _ = inspectFrame(L, dbg)
		third = missingArgument(L, "bad argument #3 to 'probe' (number expected, got nil)", 0)
		fourth = missingArgument(L, "bad argument #4 to 'probe' (number expected, got nil)", 0)
		return 0
	}))
	if err := L.DoString("local a, b = 1, 2; probe(a, b, 3)"); err != nil {
		t.Fatal(err)
	}
	if frame.proto == nil || frame.pc < 0 || frame.base < 0 {
		t.Errorf("the calling frame cannot be read: %+v", frame)
	} else if in := frame.proto.Code[frame.pc]; luaOp(in) != opCall {
		t.Errorf("the frame's pc points at opcode %d, not the call", luaOp(in))
	}
	// probe got three arguments: a fourth was not passed at all.
	if !strings.HasSuffix(third, "got nil)") || !strings.HasSuffix(fourth, "got no value)") {
		t.Errorf("a Go function's argument count cannot be read: %q, %q", third, fourth)
	}
}

// TestRunResetsArguments: a script sees KEYS and ARGV as given, whatever
// the previous script did to its own.
func TestRunResetsArguments(t *testing.T) {
	s := NewState(Options{})
	runScript(t, s, "KEYS[1] = 'changed'; KEYS.extra = 1; table.insert(ARGV, 'more')", []string{"k"}, []string{"a"})
	if got := runScript(t, s, "return {KEYS[1], tostring(KEYS.extra), #ARGV, ARGV[1]}", []string{"k2"}, []string{"b"}); got != `["k2", "nil", :1, "b"]` {
		t.Fatalf("second script saw %s", got)
	}
	if got := runScript(t, s, "return {#KEYS, #ARGV}", nil, nil); got != "[:0, :0]" {
		t.Fatalf("a script without arguments saw %s", got)
	}
	if got := runScript(t, s, "x = 1", nil, nil); !strings.Contains(got, "Attempt to modify a readonly table") {
		t.Fatalf("global assignment: %s", got)
	}
}

// TestStoppedScript: a script stopped through its context fails with the
// context's error alone, however deep in it was.
func TestStoppedScript(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := NewState(Options{Context: ctx})
	const src = "local function f() while true do end end\nf()"
	sum := sha1.Sum([]byte(src))
	want := "-context canceled script: " + hex.EncodeToString(sum[:]) + ", on @user_script:1."
	if got := runScript(t, s, src, nil, nil); got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	// A script whose own error merely ends like the context's keeps its
	// position when the context is not done.
	s = NewState(Options{Context: context.Background()})
	if got := runScript(t, s, "error('context canceled')", nil, nil); !strings.HasPrefix(got, "-ERR user_script:1: context canceled script: ") {
		t.Fatalf("got %s", got)
	}
}

// TestRedisLibraryOption: the embedder's "redis" library is read-only to
// scripts like the others.
func TestRedisLibraryOption(t *testing.T) {
	s := NewState(Options{Redis: func(L *lua.LState) *lua.LTable {
		t := L.NewTable()
		t.RawSetString("answer", lua.LNumber(42))
		return t
	}})
	if got := runScript(t, s, "return redis.answer", nil, nil); got != ":42" {
		t.Errorf("redis.answer = %s", got)
	}
	if got := runScript(t, s, "redis.answer = 1", nil, nil); !strings.Contains(got, "Attempt to modify a readonly table") {
		t.Errorf("writing the redis library: %s", got)
	}
	if got := eval(t, "return type(redis)"); got != `"table"` {
		t.Errorf("without the option, type(redis) = %s", got)
	}
}
