package lua51

import (
	"math"
	"testing"

	lua "github.com/yuin/gopher-lua"

	"github.com/limitkv/limitkv/resp"
)

// TestStrToNumber: Lua 5.1 reads numbers with C's strtod.
func TestStrToNumber(t *testing.T) {
	for s, want := range map[string]float64{
		"10": 10, " 12 ": 12, "0x10": 16, "0X1p4": 16, "1e2": 100, ".5": 0.5, "5.": 5, "-0x10": -16,
		"inf": math.Inf(1), "-Infinity": math.Inf(-1), "1e400": math.Inf(1), "010": 10,
	} {
		got, ok := luaStr2Number(s)
		if !ok || got != want {
			t.Errorf("luaStr2Number(%q) = %v, %v; want %v", s, got, ok, want)
		}
	}
	for _, s := range []string{"", " ", "0x", "1e", "1_000", "0b1", "1 2", "abc", "--1"} {
		if got, ok := luaStr2Number(s); ok {
			t.Errorf("luaStr2Number(%q) = %v, want no number", s, got)
		}
	}
	if got, ok := luaStr2Number("nan"); !ok || got == got {
		t.Errorf("luaStr2Number(nan) = %v, %v", got, ok)
	}
}

// TestReplyRoundTrip: a command's reply turned into the Lua value
// redis.call returns, and that value returned by the script, gives the
// client the reply the command gave, but for the nulls RESP2 scripts see
// as false. proto is the RESP version the script chose (redis.setresp).
func TestReplyRoundTrip(t *testing.T) {
	L := NewState(Options{}).vm
	for _, tc := range []struct {
		proto     int
		reply     string
		want      string // "" for the reply itself
		wantIsErr bool
	}{
		{proto: 2, reply: ":5\r\n"},
		{proto: 2, reply: ":-9223372036854775808\r\n"},
		{proto: 2, reply: "$3\r\nabc\r\n"},
		{proto: 2, reply: "$0\r\n\r\n"},
		{proto: 2, reply: "+OK\r\n"},
		{proto: 2, reply: "-WRONGTYPE Operation against a key\r\n", wantIsErr: true},
		{proto: 2, reply: "-failure\r\n", want: "-ERR failure", wantIsErr: true},
		{proto: 2, reply: "*2\r\n:1\r\n$1\r\na\r\n"},
		{proto: 2, reply: "*0\r\n"},
		{proto: 2, reply: "*2\r\n*1\r\n+x\r\n*0\r\n"},
		{proto: 2, reply: "$-1\r\n"},
		{proto: 2, reply: "*-1\r\n", want: "nil"},
		// A false element ends nothing: the array keeps its length.
		{proto: 2, reply: "*3\r\n:1\r\n$-1\r\n:3\r\n"},
		{proto: 3, reply: "%1\r\n$1\r\nk\r\n:1\r\n"},
		{proto: 3, reply: "~1\r\n$1\r\nm\r\n"},
		{proto: 3, reply: ",1.5\r\n"},
		{proto: 3, reply: ",inf\r\n"},
		{proto: 3, reply: "#t\r\n"},
		{proto: 3, reply: "#f\r\n"},
		{proto: 3, reply: "_\r\n"},
		{proto: 3, reply: "(12345678901234567890\r\n"},
		{proto: 3, reply: "=7\r\ntxt:abc\r\n"},
		{proto: 3, reply: "|1\r\n+key\r\n+val\r\n:7\r\n", want: ":7"},
		{proto: 2, reply: "#t\r\n", want: ":1"},
		{proto: 2, reply: "#f\r\n", want: "nil"},
	} {
		v, isErr, ok := ReplyToLua(L, []byte(tc.reply))
		if !ok || isErr != tc.wantIsErr {
			t.Errorf("%q: ok %v, isErr %v", tc.reply, ok, isErr)
			continue
		}
		w := resp.NewWriter(tc.proto)
		WriteReply(w, v, tc.proto, nil)
		want := tc.want
		if want == "" {
			want = readReply(t, []byte(tc.reply))
		}
		if got := readReply(t, w.Bytes()); got != want {
			t.Errorf("%q (RESP%d): got %s, want %s", tc.reply, tc.proto, got, want)
		}
	}
	for _, bad := range []string{"", "?x\r\n", ":12", ":x\r\n", "$5\r\nab\r\n", "*2\r\n:1\r\n", "=2\r\nab\r\n", ",x\r\n"} {
		if _, _, ok := ReplyToLua(L, []byte(bad)); ok {
			t.Errorf("malformed reply %q converted", bad)
		}
	}
}

// TestErrorTable: the error values redis.call raises carry an error code,
// ERR when the message has none.
func TestErrorTable(t *testing.T) {
	L := NewState(Options{}).vm
	for msg, want := range map[string]string{
		"-WRONGTYPE bad\r\n": "WRONGTYPE bad",
		"-nospace":           "ERR nospace",
		"plain text":         "ERR plain text",
		"with a newline\r\n": "ERR with a newline",
	} {
		if got := ErrorTable(L, msg).RawGetString("err"); got != lua.LString(want) {
			t.Errorf("ErrorTable(%q).err = %q, want %q", msg, got, want)
		}
	}
}

// TestAppendFloat: numbers as C's printf writes them with %.17g (redis.call's
// arguments) and %.14g (tostring).
func TestAppendFloat(t *testing.T) {
	for _, tc := range []struct {
		f    float64
		prec int
		want string
	}{
		{3, 17, "3"}, {0.1, 17, "0.10000000000000001"}, {1e20, 17, "1e+20"}, {math.Copysign(0, -1), 17, "-0"},
		{1 << 53, 17, "9007199254740992"}, {math.Inf(1), 17, "inf"}, {math.Inf(-1), 17, "-inf"},
		{math.NaN(), 17, "nan"}, {math.Copysign(math.NaN(), -1), 17, "-nan"},
		{0.1, 14, "0.1"}, {1e15, 14, "1e+15"}, {1 << 53, 14, "9.007199254741e+15"}, {100, 14, "100"},
	} {
		if got := string(AppendFloat(nil, tc.f, tc.prec)); got != tc.want {
			t.Errorf("AppendFloat(%v, %d) = %s, want %s", tc.f, tc.prec, got, tc.want)
		}
	}
}
