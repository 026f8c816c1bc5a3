package lua51

import (
	"bytes"
	"math"
	"strconv"

	lua "github.com/yuin/gopher-lua"

	"github.com/limitkv/limitkv/resp"
)

// Conversions between Lua values and Redis replies, as Redis 7.0 makes
// them, and the number formatting Lua 5.1 does with C's printf.

// ReplyToLua converts the reply a command wrote (one RESP value at the
// start of b) into the value redis.call returns: integers become numbers,
// bulk strings strings, nulls false (RESP2) or nil (RESP3), arrays tables,
// status replies {ok=...}, errors {err=...}; under RESP3 maps, sets,
// doubles, big numbers and verbatim strings become {map=...}, {set=...},
// {double=...}, {big_number=...} and {verbatim_string=...}. It reads the
// bytes directly, allocating only the Lua values.
func ReplyToLua(L *lua.LState, b []byte) (v lua.LValue, isErr, ok bool) {
	p := replyParser{L: L, b: b}
	v = p.value()
	if p.bad {
		return lua.LNil, false, false
	}
	return v, b[0] == '-', true
}

type replyParser struct {
	L   *lua.LState
	b   []byte
	bad bool
}

// line returns the rest of the current line, without CRLF.
func (p *replyParser) line() []byte {
	i := bytes.Index(p.b, []byte("\r\n"))
	if i < 0 {
		p.bad = true
		return nil
	}
	l := p.b[:i]
	p.b = p.b[i+2:]
	return l
}

func (p *replyParser) count(l []byte) int {
	n, err := strconv.Atoi(string(l))
	if err != nil || n < -1 {
		p.bad = true
		return 0
	}
	return n
}

func (p *replyParser) value() lua.LValue {
	if p.bad || len(p.b) == 0 {
		p.bad = true
		return lua.LNil
	}
	L := p.L
	kind := p.b[0]
	p.b = p.b[1:]
	l := p.line()
	if p.bad {
		return lua.LNil
	}
	switch kind {
	case '+':
		t := L.CreateTable(0, 1)
		t.RawSetString("ok", lua.LString(l))
		return t
	case '-':
		t := ErrorTable(L, "-"+string(l))
		t.RawSetString("ignore_error_stats_update", lua.LTrue)
		return t
	case ':':
		n, err := strconv.ParseInt(string(l), 10, 64)
		if err != nil {
			p.bad = true
		}
		return lua.LNumber(n)
	case '$', '=':
		n := p.count(l)
		if n < 0 {
			return lua.LFalse
		}
		if len(p.b) < n+2 {
			p.bad = true
			return lua.LNil
		}
		s := p.b[:n]
		p.b = p.b[n+2:]
		if kind == '$' {
			return lua.LString(s)
		}
		if len(s) < 4 {
			p.bad = true
			return lua.LNil
		}
		verbatim := L.CreateTable(0, 2)
		verbatim.RawSetString("format", lua.LString(s[:3]))
		verbatim.RawSetString("string", lua.LString(s[4:]))
		t := L.CreateTable(0, 1)
		t.RawSetString("verbatim_string", verbatim)
		return t
	case '*':
		n := p.count(l)
		if n < 0 {
			return lua.LFalse
		}
		t := L.CreateTable(min(n, 1024), 0)
		for i := 1; i <= n && !p.bad; i++ {
			t.RawSetInt(i, p.value())
		}
		return t
	case '%', '~':
		n := p.count(l)
		inner := L.NewTable()
		for i := 0; i < n && !p.bad; i++ {
			k := p.value()
			if kind == '%' {
				inner.RawSet(k, p.value())
			} else {
				inner.RawSet(k, lua.LTrue)
			}
		}
		field := "map"
		if kind == '~' {
			field = "set"
		}
		t := L.CreateTable(0, 1)
		t.RawSetString(field, inner)
		return t
	case '_':
		return lua.LNil
	case '#':
		return lua.LBool(len(l) == 1 && l[0] == 't')
	case ',':
		f, ok := parseRESPDouble(l)
		if !ok {
			p.bad = true
		}
		t := L.CreateTable(0, 1)
		t.RawSetString("double", lua.LNumber(f))
		return t
	case '(':
		t := L.CreateTable(0, 1)
		t.RawSetString("big_number", lua.LString(l))
		return t
	case '|':
		// Attributes carry no value of their own: skip them.
		n := p.count(l)
		for i := 0; i < 2*n && !p.bad; i++ {
			p.value()
		}
		return p.value()
	}
	p.bad = true
	return lua.LNil
}

func parseRESPDouble(l []byte) (float64, bool) {
	switch string(l) {
	case "inf":
		return math.Inf(1), true
	case "-inf":
		return math.Inf(-1), true
	case "nan", "-nan":
		return math.NaN(), true
	}
	f, err := strconv.ParseFloat(string(l), 64)
	return f, err == nil
}

// luaStackLimit is Lua 5.1's LUAI_MAXCSTACK, the stack depth Redis's
// reply conversion checks before each value; with the slots each level
// takes it bounds how deeply nested a script's reply may be, and the
// recursion here.
const luaStackLimit = 8000

// WriteReply replies with a script's return value as Redis does;
// scriptProto is the RESP version the script chose (redis.setresp). It
// calls onError, if not nil, with each error reply it writes, at any
// depth, and whether that error is marked as counted already (see
// ErrorCounted): Redis counts the errors of a script's reply in its error
// statistics as it writes them.
func WriteReply(w *resp.Writer, v lua.LValue, scriptProto int, onError func(reply []byte, counted bool)) {
	writeLuaReply(w, v, scriptProto, 2, onError)
}

// writeError writes an error reply and tells onError about it.
func writeError(w *resp.Writer, msg string, verbatim, counted bool, onError func([]byte, bool)) {
	n := w.Len()
	if verbatim {
		w.ErrorVerbatim(msg)
	} else {
		w.Error(msg)
	}
	if onError != nil {
		onError(w.Bytes()[n:], counted)
	}
}

// writeLuaReply writes a script's return value as Redis replies with it.
// scriptProto is the RESP version the script chose (it decides how
// booleans are sent); top is the Lua stack depth Redis's converter would
// be at, to fail where Redis fails ("reached lua stack limit").
func writeLuaReply(w *resp.Writer, v lua.LValue, scriptProto, top int, onError func([]byte, bool)) {
	if top+4 > luaStackLimit {
		writeError(w, "reached lua stack limit", false, false, onError)
		return
	}
	switch v := v.(type) {
	case lua.LString:
		w.BulkString(string(v))
	case lua.LBool:
		switch {
		case scriptProto == 3:
			w.Bool(bool(v))
		case bool(v):
			w.Int(1)
		default:
			w.Null()
		}
	case lua.LNumber:
		w.Int(luaToInt64(float64(v)))
	case *lua.LTable:
		writeLuaTable(w, v, scriptProto, top, onError)
	default:
		w.Null()
	}
}

func writeLuaTable(w *resp.Writer, t *lua.LTable, scriptProto, top int, onError func([]byte, bool)) {
	if msg, ok := t.RawGetString("err").(lua.LString); ok {
		writeError(w, string(msg), true, ErrorCounted(nil, t), onError)
		return
	}
	if status, ok := t.RawGetString("ok").(lua.LString); ok {
		w.Simple(string(status))
		return
	}
	if d, ok := t.RawGetString("double").(lua.LNumber); ok {
		writeDouble(w, float64(d))
		return
	}
	if big, ok := t.RawGetString("big_number").(lua.LString); ok {
		w.BigNumber(string(bytes.Map(crlfToSpace, []byte(big))))
		return
	}
	if vt, ok := t.RawGetString("verbatim_string").(*lua.LTable); ok {
		format, fok := vt.RawGetString("format").(lua.LString)
		str, sok := vt.RawGetString("string").(lua.LString)
		if fok && sok {
			f := string(format)
			if len(f) > 3 {
				f = f[:3]
			}
			w.Verbatim(f, string(str))
			return
		}
	}
	if m, ok := t.RawGetString("map").(*lua.LTable); ok {
		n := 0
		for k, _ := m.Next(lua.LNil); k != lua.LNil; k, _ = m.Next(k) {
			n++
		}
		w.Map(n)
		for k, v := m.Next(lua.LNil); k != lua.LNil; k, v = m.Next(k) {
			writeLuaReply(w, k, scriptProto, top+3, onError)
			writeLuaReply(w, v, scriptProto, top+2, onError)
		}
		return
	}
	if s, ok := t.RawGetString("set").(*lua.LTable); ok {
		n := 0
		for k, _ := s.Next(lua.LNil); k != lua.LNil; k, _ = s.Next(k) {
			n++
		}
		w.Set(n)
		for k, _ := s.Next(lua.LNil); k != lua.LNil; k, _ = s.Next(k) {
			writeLuaReply(w, k, scriptProto, top+2, onError)
		}
		return
	}
	n := 0
	for t.RawGetInt(n+1) != lua.LNil {
		n++
	}
	w.Array(n)
	for i := 1; i <= n; i++ {
		writeLuaReply(w, t.RawGetInt(i), scriptProto, top+1, onError)
	}
}

// writeDouble writes a double as Redis 7.0 does ("%.17g"): glibc writes a
// NaN with its sign bit set as "-nan", which Writer.Double does not.
func writeDouble(w *resp.Writer, f float64) {
	if f == f || !math.Signbit(f) {
		w.Double(f)
		return
	}
	if w.Proto() == 3 {
		w.Raw([]byte(",-nan\r\n"))
	} else {
		w.BulkString("-nan")
	}
}

func crlfToSpace(r rune) rune {
	if r == '\r' || r == '\n' {
		return ' '
	}
	return r
}

// luaToInt64 converts a Lua number to an integer reply as C's (long long)
// cast does on x86-64: truncation, and the "integer indefinite" value for
// NaN and out-of-range numbers.
func luaToInt64(f float64) int64 {
	if f != f || f >= 1<<63 || f < -(1<<63) {
		return math.MinInt64
	}
	return int64(f)
}

// AppendFloat appends f as glibc's printf("%.<prec>g") writes it.
func AppendFloat(dst []byte, f float64, prec int) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(dst, "inf"...)
	case math.IsInf(f, -1):
		return append(dst, "-inf"...)
	case f != f:
		if math.Signbit(f) {
			return append(dst, "-nan"...)
		}
		return append(dst, "nan"...)
	}
	return strconv.AppendFloat(dst, f, 'g', prec, 64)
}

// ToString converts a value to a string as Lua 5.1's tostring does:
// numbers with "%.14g".
func ToString(v lua.LValue) string {
	switch v := v.(type) {
	case lua.LString:
		return string(v)
	case lua.LNumber:
		var buf [32]byte
		return string(AppendFloat(buf[:0], float64(v), 14))
	}
	return v.String()
}

// ToNumber converts a value as lua_tonumber does: numbers and strings
// that read as numbers.
func ToNumber(v lua.LValue) (float64, bool) {
	switch v := v.(type) {
	case lua.LNumber:
		return float64(v), true
	case lua.LString:
		return luaStr2Number(string(v))
	}
	return 0, false
}

// luaStr2Number reads a whole string as a number as Lua 5.1 does: C's
// strtod (decimal, hexadecimal, inf, nan), with spaces around it.
func luaStr2Number(s string) (float64, bool) {
	if i := bytes.IndexByte([]byte(s), 0); i >= 0 {
		s = s[:i] // Lua reads the string as a C string
	}
	f, n := strtod(s)
	if n == 0 {
		return 0, false
	}
	if n < len(s) && (s[n] == 'x' || s[n] == 'X') {
		u, m := strtoul(s, 16)
		f, n = float64(u), m
	}
	for n < len(s) && isCSpace(s[n]) {
		n++
	}
	return f, n == len(s)
}

func isCSpace(ch byte) bool {
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\v' || ch == '\f' || ch == '\r'
}

func hexDigit(ch byte) int {
	switch {
	case '0' <= ch && ch <= '9':
		return int(ch - '0')
	case 'a' <= ch && ch <= 'z':
		return int(ch-'a') + 10
	case 'A' <= ch && ch <= 'Z':
		return int(ch-'A') + 10
	}
	return 99
}

// strtod reads the longest prefix of s that glibc's strtod reads and
// returns its value and length (0: no number).
func strtod(s string) (float64, int) {
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	start := i
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	sign := 1.0
	if neg {
		sign = -1
	}
	lower := func(j, n int) string {
		if j+n > len(s) {
			return ""
		}
		b := []byte(s[j : j+n])
		for k := range b {
			b[k] |= 0x20
		}
		return string(b)
	}
	switch {
	case lower(i, 8) == "infinity":
		return sign * math.Inf(1), i + 8
	case lower(i, 3) == "inf":
		return sign * math.Inf(1), i + 3
	case lower(i, 3) == "nan":
		j := i + 3
		if j < len(s) && s[j] == '(' {
			k := j + 1
			for k < len(s) && (hexDigit(s[k]) < 36 || s[k] == '_') {
				k++
			}
			if k < len(s) && s[k] == ')' {
				j = k + 1
			}
		}
		return math.Copysign(math.NaN(), sign), j
	case i+1 < len(s) && s[i] == '0' && (s[i+1]|0x20) == 'x':
		if f, n := hexFloat(s[i+2:]); n > 0 {
			return sign * f, i + 2 + n
		}
		return sign * 0, i + 1 // just the "0"
	}
	j := i
	digits := 0
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
		digits++
	}
	if j < len(s) && s[j] == '.' {
		j++
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
			digits++
		}
	}
	if digits == 0 {
		return 0, 0
	}
	if j < len(s) && (s[j]|0x20) == 'e' {
		k := j + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		if k < len(s) && s[k] >= '0' && s[k] <= '9' {
			for k < len(s) && s[k] >= '0' && s[k] <= '9' {
				k++
			}
			j = k
		}
	}
	f, err := strconv.ParseFloat(s[start:j], 64)
	if err != nil && !math.IsInf(f, 0) && f != 0 {
		return 0, 0
	}
	return f, j
}

// hexFloat reads hexadecimal digits, an optional fraction and a binary
// exponent ("1.8p3") after "0x".
func hexFloat(s string) (float64, int) {
	var mant uint64
	exp, digits, i := 0, 0, 0
	add := func(d int) {
		if mant>>60 == 0 {
			mant = mant<<4 | uint64(d)
		} else {
			exp += 4 // beyond 64 bits only the magnitude counts
		}
	}
	for i < len(s) && hexDigit(s[i]) < 16 {
		add(hexDigit(s[i]))
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && hexDigit(s[i]) < 16 {
			if mant>>60 == 0 {
				add(hexDigit(s[i]))
				exp -= 4
			}
			i++
			digits++
		}
	}
	if digits == 0 {
		return 0, 0
	}
	if i < len(s) && (s[i]|0x20) == 'p' {
		k := i + 1
		neg := false
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			neg = s[k] == '-'
			k++
		}
		if k < len(s) && s[k] >= '0' && s[k] <= '9' {
			e := 0
			for k < len(s) && s[k] >= '0' && s[k] <= '9' {
				if e < 100000 {
					e = e*10 + int(s[k]-'0')
				}
				k++
			}
			if neg {
				e = -e
			}
			exp += e
			i = k
		}
	}
	return math.Ldexp(float64(mant), exp), i
}

// strtoul reads an unsigned integer in base as C's strtoul: spaces, a
// sign (a minus wraps around), "0x" for base 16, and saturation.
func strtoul(s string, base int) (uint64, int) {
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	if base == 16 && i+2 < len(s) && s[i] == '0' && (s[i+1]|0x20) == 'x' && hexDigit(s[i+2]) < 16 {
		i += 2
	}
	start := i
	var v uint64
	overflow := false
	for i < len(s) && hexDigit(s[i]) < base {
		d := uint64(hexDigit(s[i]))
		if v > (math.MaxUint64-d)/uint64(base) {
			overflow = true
		}
		v = v*uint64(base) + d
		i++
	}
	if i == start {
		return 0, 0
	}
	if overflow {
		return math.MaxUint64, i
	}
	if neg {
		v = -v
	}
	return v, i
}

// luaToNumber is Lua 5.1's tonumber.
func luaToNumber(L *lua.LState) int {
	base := 10
	if L.GetTop() >= 2 && L.Get(2) != lua.LNil {
		b, ok := ToNumber(L.Get(2))
		if !ok {
			luaArgTypeError(L, 2, "tonumber", "number")
		}
		base = int(int32(luaToInt64(b)))
	}
	if base == 10 {
		if L.GetTop() < 1 {
			luaArgError(L, 1, "tonumber", "value expected")
		}
		if f, ok := ToNumber(L.Get(1)); ok {
			L.Push(lua.LNumber(f))
			return 1
		}
		L.Push(lua.LNil)
		return 1
	}
	v := L.Get(1)
	if !lua.LVCanConvToString(v) {
		luaArgTypeError(L, 1, "tonumber", "string")
	}
	if base < 2 || base > 36 {
		luaArgError(L, 2, "tonumber", "base out of range")
	}
	s := ToString(v)
	n, end := strtoul(s, base)
	if end > 0 {
		for end < len(s) && isCSpace(s[end]) {
			end++
		}
		if end == len(s) {
			L.Push(lua.LNumber(float64(n)))
			return 1
		}
	}
	L.Push(lua.LNil)
	return 1
}

// luaArgError raises Lua 5.1's "bad argument" error for a library function.
func luaArgError(L *lua.LState, n int, fn, msg string) {
	L.RaiseError("bad argument #%d to '%s' (%s)", n, fn, msg)
}

// luaArgTypeError raises Lua 5.1's error for an argument of the wrong type.
func luaArgTypeError(L *lua.LState, n int, fn, want string) {
	got := "no value"
	if n <= L.GetTop() {
		got = L.Get(n).Type().String()
	}
	luaArgError(L, n, fn, want+" expected, got "+got)
}

// luaCheckNumber is luaL_checknumber: a number or a string that reads as one.
func luaCheckNumber(L *lua.LState, n int, fn string) float64 {
	f, ok := ToNumber(L.Get(n))
	if !ok || n > L.GetTop() {
		luaArgTypeError(L, n, fn, "number")
	}
	return f
}

// luaCheckInt is luaL_checkint: a number cast to a C long, then to an int.
func luaCheckInt(L *lua.LState, n int, fn string) int32 {
	return int32(luaToInt64(luaCheckNumber(L, n, fn)))
}
