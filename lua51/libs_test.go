package lua51

import "testing"

// The libraries as scripts use them. Every expected reply is redis-server
// 7.0.15's to EVAL of the same script; errors carry the script's SHA1 as
// EVAL's do.

type scriptCase struct{ src, want string }

// checkScripts runs each script in a state of its own.
func checkScripts(t *testing.T, cases []scriptCase) {
	t.Helper()
	for _, tc := range cases {
		if got := eval(t, tc.src); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.src, got, tc.want)
		}
	}
}

// TestCJSON: lua-cjson 2.1.0's encoding, decoding and errors.
func TestCJSON(t *testing.T) {
	checkScripts(t, []scriptCase{
		{`return cjson.encode({1, 2, 3, {a = 1}})`, `"[1,2,3,{\"a\":1}]"`},
		{`return cjson.encode(1/3)`, `"0.33333333333333"`},
		{`return cjson.encode('a"b\\c/\n\1')`, `"\"a\\\"b\\\\c\\/\\n\\u0001\""`},
		{`return cjson.encode({})`, `"{}"`},
		{`local t = cjson.decode('{"a":[1,2,{"b":null}],"c":"\\u00e9"}') return {t.a[2], tostring(t.a[3].b == cjson.null), t.c}`, `[:2, "true", "é"]`},
		{`return cjson.decode('[1,2')`, `-ERR user_script:1: Expected comma or array end but found T_END at character 5 script: c107001b5ba2ff860ee2557f64da37c4767ef4bd, on @user_script:1.`},
		{`return cjson.encode(cjson.decode('[1e2, -0.5, true, false]'))`, `"[100,-0.5,true,false]"`},
	})
}

// TestCMsgpack: lua-cmsgpack 0.4.0's encoding, and decoding back.
func TestCMsgpack(t *testing.T) {
	checkScripts(t, []scriptCase{
		{`return cmsgpack.pack({1, 2, 'a'})`, `"\x93\x01\x02\xa1a"`},
		{`return cmsgpack.pack(-1, 300, 1.5, 'x', true)`, `"\xff\xcd\x01,\xca?\xc0\x00\x00\xa1x\xc3"`},
		{`local a, b, c = cmsgpack.unpack(cmsgpack.pack(1, -1, 'x')) return {a, b, c}`, `[:1, :-1, "x"]`},
		{`return cmsgpack.unpack(cmsgpack.pack({a = 1})).a`, `:1`},
		{`local t = cmsgpack.unpack(cmsgpack.pack({1.5, 2^40})) return {tostring(t[1]), tostring(t[2])}`, `["1.5", "1099511627776"]`},
		{`return cmsgpack.unpack('\146\001')`, `-ERR user_script:1: Missing bytes in input. script: 83a5335cffefcf19481a1d178078012b6a6d5b9b, on @user_script:1.`},
		{`return {cmsgpack.unpack_one(cmsgpack.pack(1, 2), 0)}`, `[:1, :1]`},
	})
}

// TestStruct: struct 0.2's layouts and limits.
func TestStruct(t *testing.T) {
	checkScripts(t, []scriptCase{
		{`return struct.pack('>I2', 258)`, `"\x01\x02"`},
		{`return {struct.unpack('<i4', struct.pack('<i4', -2))}`, `[:-2, :5]`},
		{`return struct.size('!4 b i4')`, `:8`},
		{`return {struct.unpack('s', 'ab\0cd')}`, `["ab", :4]`},
		{`return struct.pack('i33', 1)`, `-ERR user_script:1: integral size 33 is larger than limit of 32 script: 0a76c071d82805e752befa6958961c98c39f358f, on @user_script:1.`},
		{`return {struct.unpack('>d', struct.pack('>d', 0.25))}`, `[:0, :9]`},
	})
}

// TestBit: LuaBitOp's 32-bit results.
func TestBit(t *testing.T) {
	checkScripts(t, []scriptCase{
		{`return {bit.band(0xff, 0x0f), bit.bor(1, 2, 4), bit.bxor(5, 3), bit.bnot(0)}`, `[:15, :7, :6, :-1]`},
		{`return {bit.lshift(1, 31), bit.rshift(-1, 28), bit.arshift(-16, 2), bit.rol(1, 33), bit.ror(1, 1)}`, `[:-2147483648, :15, :-4, :2, :-2147483648]`},
		{`return {bit.tohex(255), bit.tohex(-1, -4), bit.bswap(0x01020304)}`, `["000000ff", "FFFF", :67305985]`},
		{`return bit.tobit(2^32 + 5)`, `:5`},
	})
}

// TestStdlib: the standard library as Lua 5.1 has it (C's formatting,
// strtod, lrand48) and as Redis's sandbox leaves it.
func TestStdlib(t *testing.T) {
	checkScripts(t, []scriptCase{
		{`return string.format('%5.2f|%-5d|%x|%q|%5s|%.3s', 3.14159, 42, 255, 'a\n"', 'ab', 'abcdef')`, `" 3.14|42   |ff|\"a\\\n\\\"\"|   ab|abc"`},
		{`return string.format('%g %g %e %#x %+d %c', 1e20, 0.1, 12345.678, 255, 3, 65)`, `"1e+20 0.1 1.234568e+04 0xff +3 A"`},
		{`return {tostring(1e15), tostring(0.1), tostring(1/0), tostring(2^53)}`, `["1e+15", "0.1", "inf", "9.007199254741e+15"]`},
		{`return {tonumber('0x10'), tonumber(' 12 '), tonumber('z', 36), tostring(tonumber('1e')), tonumber('10', 2)}`, `[:16, :12, :35, "nil", :2]`},
		{`return {string.byte('abc'), string.byte('abc', 2, 3)}`, `[:97, :98, :99]`},
		{`return table.concat({1, 2.5, 'x'}, '-')`, `"1-2.5-x"`},
		{`return {unpack({1, 2, 3}, 2)}`, `[:2, :3]`},
		{`math.randomseed(1) return {math.random(100), math.random(5, 10)}`, `[:5, :7]`},
		{`return select(2, loadstring('return 1 +'))`, `"[string \"return 1 +\"]:1: unexpected symbol near '<eof>'"`},
		{`return {pcall(error, {err = 'X y'})}`, `[nil, "X y"]`},
		{`return getmetatable('').__index == string`, `:1`},
		{`return select(2, pcall(setmetatable, _G, {}))`, `"Attempt to modify a readonly table"`},
		{`return select(2, pcall(rawset, string, 'x', 1))`, `"Attempt to modify a readonly table"`},
		{`return string.rep('ab', 3)`, `"ababab"`},
		{`return type(string.gfind)`, `"function"`},
		{`return {string.find('a.b', '.', 1, true), string.match('key:42', '(%a+):(%d+)')}`, `[:2, "key", "42"]`},
		{`return math.huge`, `:-9223372036854775808`},
		{`return {collectgarbage('step'), collectgarbage('setpause')}`, `[nil, :200]`},
	})
}
