package lua51

import (
	"strconv"
	"strings"
	"testing"
)

// TestLuaSyntaxCheck: Lua 5.1's verdicts and messages on a few tricky
// chunks, and valid chunks accepted with their numerals made readable to
// gopher-lua.
func TestLuaSyntaxCheck(t *testing.T) {
	// 61 locals for a function to use as upvalues, one too many.
	var upvalues []string
	for i := range 61 {
		upvalues = append(upvalues, "a"+strconv.Itoa(i))
	}
	names := strings.Join(upvalues, ", ")
	for _, tc := range []struct{ src, msg, gopher string }{
		{src: "return 1", gopher: "return 1"},
		{src: "return 0x10 + 0x1p4 + 1e999", gopher: "return 16 + 16 + (1/0)"},
		{src: "local t = {a=1; 2, [3]=4,} return t", gopher: "local t = {a=1; 2, [3]=4,} return t"},
		{src: "x = [==[\n]]\n]==] return x", gopher: "x = [==[\n]]\n]==] return x"},
		{src: "return 1 --[[ comment\n]] + 2", gopher: "return 1 --[[ comment\n]] + 2"},
		{src: "local function f(...) local a, b = ... return arg end", gopher: "local function f(...) local a, b = ... return arg end"},
		{src: "goto done", msg: "user_script:1: '=' expected near 'done'"},
		{src: "x = y\n\n(f)()", msg: "user_script:3: ambiguous syntax (function call x new statement) near '('"},
		{src: "x = 1\n(f)()", gopher: "x = 1\n(f)()"},
		{src: "while true do end break", msg: "user_script:1: no loop to break near '<eof>'"},
		{src: "return 'a\\300'", msg: "user_script:1: escape sequence too large near ''a'"},
		{src: "for i = 1, 2 do\n  local x = 1\n", msg: "user_script:3: 'end' expected (to close 'for' at line 1) near '<eof>'"},
		{src: "local " + strings.Repeat("a,", 200) + "b = 1", msg: "user_script:1: main function has more than 200 local variables"},
		{src: "local " + names + "\nlocal function f()\n return " + names + " end", msg: "user_script:3: function at line 2 has more than 60 upvalues"},
		{src: "return " + strings.Repeat("(", 199) + "1" + strings.Repeat(")", 199), msg: "user_script:1: chunk has too many syntax levels"},
	} {
		gopher, msg := luaSyntaxCheck([]byte(tc.src), ChunkName)
		if msg != tc.msg || tc.msg == "" && string(gopher) != tc.gopher {
			t.Errorf("%q: got (%q, %q), want (%q, %q)", tc.src, gopher, msg, tc.gopher, tc.msg)
		}
	}
}

func TestLuaChunkID(t *testing.T) {
	for name, want := range map[string]string{
		"x = 1":                 `[string "x = 1"]`,
		"a\nb":                  `[string "a..."]`,
		strings.Repeat("y", 50): `[string "` + strings.Repeat("y", 43) + `..."]`,
		"=(load)":               "(load)",
		"@user_script":          "user_script",
	} {
		if got := luaChunkID(name); got != want {
			t.Errorf("luaChunkID(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestCompile: Compile gives Lua 5.1's verdicts (the message follows
// Redis's "Error compiling script (new function): "), and the chunk it
// makes runs as Redis's does: numerals read as Lua 5.1 reads them, no
// "arg" table in the main chunk.
func TestCompile(t *testing.T) {
	for src, want := range map[string]string{
		"return 1 +": "user_script:1: unexpected symbol near '<eof>'",
		"goto x":     "user_script:1: '=' expected near 'x'",
	} {
		if _, err := Compile([]byte(src)); err == nil || err.Error() != want {
			t.Errorf("Compile(%q): %v, want %s", src, err, want)
		}
	}
	if got := eval(t, "return 0x10 + 0x1p4"); got != ":32" {
		t.Errorf("0x10 + 0x1p4 = %s", got)
	}
	const noArg = "return arg"
	want := "-ERR user_script:1: Script attempted to access nonexistent global variable 'arg' script: 0b8e5b4bc814c3a46de16e9eb2d7c40ba532a9f9, on @user_script:1."
	if got := eval(t, noArg); got != want {
		t.Errorf("%s: got %s, want %s", noArg, got, want)
	}
}
