package lua51

import (
	"math"
	"runtime/metrics"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// Lua 5.1 standard library functions that gopher-lua lacks or implements
// with Go's formatting rather than C's, as Redis's scripts see them.

// luaStringFormat is Lua 5.1's string.format: C's printf conversions, with
// widths and precisions of two digits at most.
func luaStringFormat(L *lua.LState) int {
	top := L.GetTop()
	fv := L.Get(1)
	if !lua.LVCanConvToString(fv) {
		luaArgTypeError(L, 1, "format", "string")
	}
	format := ToString(fv)
	arg := 1
	out := make([]byte, 0, len(format)+16)
	for i := 0; i < len(format); {
		ch := format[i]
		if ch != '%' {
			out = append(out, ch)
			i++
			continue
		}
		i++
		if i < len(format) && format[i] == '%' {
			out = append(out, '%')
			i++
			continue
		}
		arg++
		if arg > top {
			luaArgError(L, arg, "format", "no value")
		}
		spec, next := scanFormat(L, format, i)
		i = next
		verb := byte(0)
		if i < len(format) {
			verb = format[i]
			i++
		}
		switch verb {
		case 'c':
			out = spec.pad(out, []byte{byte(luaCheckInt(L, arg, "format"))}, false)
		case 'd', 'i':
			out = spec.integer(out, luaToInt64(luaCheckNumber(L, arg, "format")))
		case 'o', 'u', 'x', 'X':
			out = spec.unsigned(out, verb, cUnsigned(luaCheckNumber(L, arg, "format")))
		case 'e', 'E', 'f', 'g', 'G':
			out = spec.float(out, verb, luaCheckNumber(L, arg, "format"))
		case 'q':
			out = appendQuoted(out, luaCheckString(L, arg, "format"))
		case 's':
			s := luaCheckString(L, arg, "format")
			if !spec.hasPrec && len(s) >= 100 {
				out = append(out, s...) // Lua copies long strings as they are
				continue
			}
			if i := strings.IndexByte(s, 0); i >= 0 {
				s = s[:i] // sprintf stops at a NUL
			}
			if spec.hasPrec && spec.prec < len(s) {
				s = s[:spec.prec]
			}
			out = spec.pad(out, []byte(s), false)
		default:
			L.RaiseError("invalid option '%%%c' to 'format'", verb)
		}
	}
	L.Push(lua.LString(out))
	return 1
}

// cUnsigned converts a number as C's (unsigned long) cast does on x86-64.
func cUnsigned(f float64) uint64 {
	if f >= 1<<63 && f < 1<<64 {
		return uint64(f)
	}
	return uint64(luaToInt64(f))
}

func luaCheckString(L *lua.LState, n int, fn string) string {
	v := L.Get(n)
	if n > L.GetTop() || !lua.LVCanConvToString(v) {
		luaArgTypeError(L, n, fn, "string")
	}
	return ToString(v)
}

// appendQuoted is %q: the string in double quotes, readable back by Lua.
func appendQuoted(out []byte, s string) []byte {
	out = append(out, '"')
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; ch {
		case '"', '\\', '\n':
			out = append(out, '\\', ch)
		case '\r':
			out = append(out, `\r`...)
		case 0:
			out = append(out, `\000`...)
		default:
			out = append(out, ch)
		}
	}
	return append(out, '"')
}

// cFormatSpec is one printf conversion's flags, width and precision.
type cFormatSpec struct {
	minus, plus, space, hash, zero bool
	width, prec                    int
	hasPrec                        bool
}

// scanFormat reads flags, width and precision from format[i:], with Lua
// 5.1's limits and errors.
func scanFormat(L *lua.LState, format string, i int) (cFormatSpec, int) {
	var s cFormatSpec
	start := i
	for i < len(format) && strings.IndexByte("-+ #0", format[i]) >= 0 {
		switch format[i] {
		case '-':
			s.minus = true
		case '+':
			s.plus = true
		case ' ':
			s.space = true
		case '#':
			s.hash = true
		case '0':
			s.zero = true
		}
		i++
	}
	if i-start >= len("-+ #0")+1 {
		L.RaiseError("invalid format (repeated flags)")
	}
	digits := func() int {
		n := 0
		for k := 0; k < 2 && i < len(format) && format[i] >= '0' && format[i] <= '9'; k++ {
			n = n*10 + int(format[i]-'0')
			i++
		}
		return n
	}
	s.width = digits()
	if i < len(format) && format[i] == '.' {
		i++
		s.hasPrec = true
		s.prec = digits()
	}
	if i < len(format) && format[i] >= '0' && format[i] <= '9' {
		L.RaiseError("invalid format (width or precision too long)")
	}
	return s, i
}

// pad appends body padded to the width; numeric bodies may be padded with
// zeros after their sign or prefix.
func (s cFormatSpec) pad(out, body []byte, numeric bool) []byte {
	n := s.width - len(body)
	if n <= 0 {
		return append(out, body...)
	}
	switch {
	case s.minus:
		out = append(out, body...)
		return append(out, strings.Repeat(" ", n)...)
	case s.zero && numeric:
		prefix := 0
		if len(body) > 0 && (body[0] == '-' || body[0] == '+' || body[0] == ' ') {
			prefix = 1
		}
		if len(body) > prefix+1 && body[prefix] == '0' && (body[prefix+1]|0x20) == 'x' {
			prefix += 2
		}
		out = append(out, body[:prefix]...)
		out = append(out, strings.Repeat("0", n)...)
		return append(out, body[prefix:]...)
	}
	out = append(out, strings.Repeat(" ", n)...)
	return append(out, body...)
}

func (s cFormatSpec) sign(neg bool) string {
	switch {
	case neg:
		return "-"
	case s.plus:
		return "+"
	case s.space:
		return " "
	}
	return ""
}

func (s cFormatSpec) integer(out []byte, v int64) []byte {
	mag := uint64(v)
	if v < 0 {
		mag = -mag
	}
	digits := s.digits(strconv.FormatUint(mag, 10))
	body := []byte(s.sign(v < 0) + digits)
	return s.pad(out, body, !s.hasPrec)
}

// digits applies the precision of an integer conversion: at least that
// many digits, and none for a zero with precision 0.
func (s cFormatSpec) digits(d string) string {
	if s.hasPrec {
		if s.prec == 0 && d == "0" {
			return ""
		}
		if len(d) < s.prec {
			d = strings.Repeat("0", s.prec-len(d)) + d
		}
	}
	return d
}

func (s cFormatSpec) unsigned(out []byte, verb byte, v uint64) []byte {
	var d, prefix string
	switch verb {
	case 'o':
		d = s.digits(strconv.FormatUint(v, 8))
		if s.hash && !strings.HasPrefix(d, "0") {
			d = "0" + d
		}
	case 'u':
		d = s.digits(strconv.FormatUint(v, 10))
	case 'x', 'X':
		d = s.digits(strconv.FormatUint(v, 16))
		if s.hash && v != 0 {
			prefix = "0x"
		}
		if verb == 'X' {
			d, prefix = strings.ToUpper(d), strings.ToUpper(prefix)
		}
	}
	return s.pad(out, []byte(prefix+d), !s.hasPrec)
}

func (s cFormatSpec) float(out []byte, verb byte, f float64) []byte {
	neg := math.Signbit(f) && f == f || f != f && math.Signbit(f)
	var body string
	switch {
	case math.IsInf(f, 0):
		body = "inf"
	case f != f:
		body = "nan"
	default:
		prec := 6
		if s.hasPrec {
			prec = s.prec
		}
		lv := verb | 0x20
		if lv == 'g' && prec == 0 {
			prec = 1
		}
		body = strconv.FormatFloat(math.Abs(f), lv, prec, 64)
		if s.hash && lv == 'g' {
			body = keepTrailingZeros(math.Abs(f), prec)
		}
		if s.hash && prec == 0 && lv != 'g' && !strings.Contains(body, ".") {
			if i := strings.IndexByte(body, 'e'); i >= 0 {
				body = body[:i] + "." + body[i:]
			} else {
				body += "."
			}
		}
	}
	if verb == 'E' || verb == 'G' {
		body = strings.ToUpper(body)
	}
	finite := !math.IsInf(f, 0) && f == f
	return s.pad(out, []byte(s.sign(neg)+body), finite)
}

// keepTrailingZeros formats as %#g: %g without dropping trailing zeros.
func keepTrailingZeros(f float64, prec int) string {
	if f == 0 {
		return "0." + strings.Repeat("0", prec-1)
	}
	exp := int(math.Floor(math.Log10(f)))
	e := strconv.FormatFloat(f, 'e', prec-1, 64)
	if x, err := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:]); err == nil {
		exp = x
	}
	if exp < -4 || exp >= prec {
		if !strings.Contains(e, ".") {
			e = strings.Replace(e, "e", ".e", 1)
		}
		return e
	}
	body := strconv.FormatFloat(f, 'f', prec-1-exp, 64)
	if !strings.Contains(body, ".") {
		body += "."
	}
	return body
}

// luaStackRoom is how many values a library function may still push:
// Lua 5.1's lua_checkstack refuses to grow a C function's stack beyond
// LUAI_MAXCSTACK slots.
func luaStackRoom(L *lua.LState) int { return luaStackLimit - L.GetTop() }

// luaOptInt is luaL_optinteger: a number or numeric string cast to a C
// long, or def when the argument is absent or nil.
func luaOptInt(L *lua.LState, n int, fn string, def int64) int64 {
	if n > L.GetTop() || L.Get(n) == lua.LNil {
		return def
	}
	return luaToInt64(luaCheckNumber(L, n, fn))
}

// luaStringByte is Lua 5.1's string.byte (gopher-lua's returns every byte
// from i on when j is absent, where Lua returns one).
func luaStringByte(L *lua.LState) int {
	s := luaCheckString(L, 1, "byte")
	l := int64(len(s))
	relative := func(pos int64) int64 {
		if pos < 0 {
			pos += l + 1
		}
		return max(pos, 0)
	}
	first := relative(luaOptInt(L, 2, "byte", 1))
	last := relative(luaOptInt(L, 3, "byte", first))
	first = max(first, 1)
	last = min(last, l)
	if first > last {
		return 0
	}
	n := last - first + 1
	if n > int64(luaStackRoom(L)) {
		L.RaiseError("stack overflow (string slice too long)")
	}
	for i := first; i <= last; i++ {
		L.Push(lua.LNumber(s[i-1]))
	}
	return int(n)
}

// luaMaxString bounds the strings string.rep makes: Redis's largest bulk
// string (proto-max-bulk-len's default).
const luaMaxString = 512 << 20

// luaStringRep is Lua 5.1's string.rep (the count is a C int), refusing
// to build a string larger than any reply could carry.
func luaStringRep(L *lua.LState) int {
	s := luaCheckString(L, 1, "rep")
	n := int64(luaCheckInt(L, 2, "rep"))
	if n <= 0 || s == "" {
		L.Push(lua.LString(""))
		return 1
	}
	if int64(len(s))*n > luaMaxString {
		L.RaiseError("not enough memory")
	}
	L.Push(lua.LString(strings.Repeat(s, int(n))))
	return 1
}

// luaUnpack is Lua 5.1's unpack, which refuses more results than the
// stack may hold rather than trying to push them.
func luaUnpack(L *lua.LState) int {
	t := L.CheckTable(1)
	first := luaOptInt(L, 2, "unpack", 1)
	last := int64(t.Len())
	if L.GetTop() >= 3 && L.Get(3) != lua.LNil {
		last = luaToInt64(luaCheckNumber(L, 3, "unpack"))
	}
	if first > last {
		return 0
	}
	n := last - first + 1
	if n <= 0 || n > int64(luaStackRoom(L)) {
		L.RaiseError("too many results to unpack")
	}
	for i := first; i <= last; i++ {
		L.Push(t.RawGetInt(int(i)))
	}
	return int(n)
}

// luaTableConcat is Lua 5.1's table.concat, numbers written with "%.14g".
func luaTableConcat(L *lua.LState) int {
	sep := ""
	if L.GetTop() >= 2 && L.Get(2) != lua.LNil {
		sep = luaCheckString(L, 2, "concat")
	}
	t := L.CheckTable(1)
	first := luaOptInt(L, 3, "concat", 1)
	last := int64(t.Len())
	if L.GetTop() >= 4 && L.Get(4) != lua.LNil {
		last = int64(luaCheckInt(L, 4, "concat"))
	}
	var out []byte
	for i := first; i <= last; i++ {
		v := t.RawGetInt(int(i))
		if !lua.LVCanConvToString(v) {
			L.RaiseError("invalid value (%s) at index %d in table for 'concat'", v.Type().String(), i)
		}
		out = append(out, ToString(v)...)
		if i < last {
			out = append(out, sep...)
		}
		if len(out) > luaMaxString {
			L.RaiseError("not enough memory")
		}
	}
	L.Push(lua.LString(out))
	return 1
}

// luaTableForeach is Lua 5.1's table.foreach (deprecated, still in Redis).
func luaTableForeach(L *lua.LState) int {
	t := L.CheckTable(1)
	fn := L.CheckFunction(2)
	for k, v := t.Next(lua.LNil); k != lua.LNil; k, v = t.Next(k) {
		L.Push(fn)
		L.Push(k)
		L.Push(v)
		L.Call(2, 1)
		if r := L.Get(-1); r != lua.LNil {
			return 1
		}
		L.Pop(1)
	}
	return 0
}

// luaTableForeachi is Lua 5.1's table.foreachi.
func luaTableForeachi(L *lua.LState) int {
	t := L.CheckTable(1)
	fn := L.CheckFunction(2)
	for i, n := 1, t.Len(); i <= n; i++ {
		L.Push(fn)
		L.Push(lua.LNumber(i))
		L.Push(t.RawGetInt(i))
		L.Call(2, 1)
		if r := L.Get(-1); r != lua.LNil {
			return 1
		}
		L.Pop(1)
	}
	return 0
}

// luaHeapKB is what gcinfo and collectgarbage("count") report: the Go
// heap's live objects, in KB (the Lua heap lives in it).
func luaHeapKB() float64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return float64(sample[0].Value.Uint64()) / 1024
}

// luaCollectGarbage is collectgarbage. Go's collector runs by itself; a
// script cannot make the server collect or stop collecting.
func luaCollectGarbage(L *lua.LState) int {
	opt := "collect"
	if L.GetTop() >= 1 && L.Get(1) != lua.LNil {
		opt = luaCheckString(L, 1, "collectgarbage")
	}
	switch opt {
	case "count":
		L.Push(lua.LNumber(luaHeapKB()))
	case "step":
		L.Push(lua.LFalse)
	case "setpause", "setstepmul":
		L.Push(lua.LNumber(200))
	case "stop", "restart", "collect":
		L.Push(lua.LNumber(0))
	default:
		luaArgError(L, 1, "collectgarbage", "invalid option '"+opt+"'")
	}
	return 1
}

// lrand48 is the generator Redis gives math.random (its rand.c): the 48-bit
// linear congruential generator of POSIX's lrand48, never reseeded between
// scripts.
type lrand48 struct{ x uint64 }

const (
	lrand48Max = math.MaxInt32
	// lrand48Start is the generator's state before any seeding.
	lrand48Start = 0x1234ABCD330E
)

func (g *lrand48) seed(seed int32) { g.x = uint64(uint32(seed))<<16 | 0x330E }

func (g *lrand48) next() int32 {
	g.x = (0x5DEECE66D*g.x + 0xB) & (1<<48 - 1)
	return int32(g.x >> 17)
}

func (s *State) mathRandom(L *lua.LState) int {
	f := float64(s.rand.next()%lrand48Max) / lrand48Max
	switch L.GetTop() {
	case 0:
		L.Push(lua.LNumber(f))
	case 1:
		u := luaCheckInt(L, 1, "random")
		if u < 1 {
			luaArgError(L, 1, "random", "interval is empty")
		}
		L.Push(lua.LNumber(math.Floor(f*float64(u)) + 1))
	case 2:
		l := luaCheckInt(L, 1, "random")
		u := luaCheckInt(L, 2, "random")
		if l > u {
			luaArgError(L, 2, "random", "interval is empty")
		}
		L.Push(lua.LNumber(math.Floor(f*float64(u-l+1)) + float64(l))) // int arithmetic, as in C
	default:
		L.RaiseError("wrong number of arguments")
	}
	return 1
}

func (s *State) mathRandomSeed(L *lua.LState) int {
	s.rand.seed(luaCheckInt(L, 1, "randomseed"))
	return 0
}
