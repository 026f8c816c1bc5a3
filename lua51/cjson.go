package lua51

import (
	"math"
	"strconv"
	"unicode/utf8"

	lua "github.com/yuin/gopher-lua"
)

// The cjson library of Redis's Lua (lua-cjson 2.1.0): encode and decode
// with its rules, settings and error texts.

// cjsonConfig is one cjson module's settings; cjson.new makes another.
type cjsonConfig struct {
	sparseConvert     bool
	sparseRatio       int64
	sparseSafe        int64
	encodeMaxDepth    int64
	decodeMaxDepth    int64
	numberPrecision   int64
	keepBuffer        bool
	encodeInvalid     int // 0 off, 1 on, 2 "null"
	decodeInvalidNums bool
}

func defaultCJSONConfig() *cjsonConfig {
	return &cjsonConfig{sparseRatio: 2, sparseSafe: 10, encodeMaxDepth: 1000, decodeMaxDepth: 1000,
		numberPrecision: 14, keepBuffer: true, decodeInvalidNums: true}
}

// cjsonNull is cjson.null, the value JSON's null decodes to: Lua's nil
// cannot be stored in a table. Redis's is a NULL light userdata.
var cjsonNull = &lua.LUserData{Metatable: lua.LNil}

func (s *State) cjsonLibrary() *lua.LTable {
	s.cjson = defaultCJSONConfig()
	return cjsonModule(s.vm, s.cjson)
}

func cjsonModule(L *lua.LState, cfg *cjsonConfig) *lua.LTable {
	t := L.NewTable()
	fns := map[string]lua.LGFunction{
		"encode": func(L *lua.LState) int {
			if L.GetTop() != 1 {
				luaArgError(L, 1, "encode", "expected 1 argument")
			}
			e := cjsonEncoder{L: L, cfg: cfg}
			e.value(L.Get(1), 0)
			L.Push(lua.LString(e.out))
			return 1
		},
		"decode": func(L *lua.LState) int {
			if L.GetTop() != 1 {
				luaArgError(L, 1, "decode", "expected 1 argument")
			}
			L.Push(cjsonDecode(L, cfg, luaCheckString(L, 1, "decode")))
			return 1
		},
		"new": func(L *lua.LState) int {
			L.Push(cjsonModule(L, defaultCJSONConfig()))
			return 1
		},
		"encode_sparse_array": func(L *lua.LState) int {
			cjsonBoolOption(L, 1, "encode_sparse_array", &cfg.sparseConvert)
			cjsonIntOption(L, 2, "encode_sparse_array", &cfg.sparseRatio, 0, math.MaxInt32)
			cjsonIntOption(L, 3, "encode_sparse_array", &cfg.sparseSafe, 0, math.MaxInt32)
			L.Push(lua.LBool(cfg.sparseConvert))
			L.Push(lua.LNumber(cfg.sparseRatio))
			L.Push(lua.LNumber(cfg.sparseSafe))
			return 3
		},
		"encode_max_depth": func(L *lua.LState) int {
			cjsonIntOption(L, 1, "encode_max_depth", &cfg.encodeMaxDepth, 1, math.MaxInt32)
			L.Push(lua.LNumber(cfg.encodeMaxDepth))
			return 1
		},
		"decode_max_depth": func(L *lua.LState) int {
			cjsonIntOption(L, 1, "decode_max_depth", &cfg.decodeMaxDepth, 1, math.MaxInt32)
			L.Push(lua.LNumber(cfg.decodeMaxDepth))
			return 1
		},
		"encode_number_precision": func(L *lua.LState) int {
			cjsonIntOption(L, 1, "encode_number_precision", &cfg.numberPrecision, 1, 14)
			L.Push(lua.LNumber(cfg.numberPrecision))
			return 1
		},
		"encode_keep_buffer": func(L *lua.LState) int {
			cjsonBoolOption(L, 1, "encode_keep_buffer", &cfg.keepBuffer)
			L.Push(lua.LBool(cfg.keepBuffer))
			return 1
		},
		"encode_invalid_numbers": func(L *lua.LState) int {
			switch v := L.Get(1); {
			case v == lua.LNil:
			case v == lua.LString("null"):
				cfg.encodeInvalid = 2
			default:
				var on bool
				cjsonBoolOption(L, 1, "encode_invalid_numbers", &on)
				cfg.encodeInvalid = 0
				if on {
					cfg.encodeInvalid = 1
				}
			}
			if cfg.encodeInvalid == 2 {
				L.Push(lua.LString("null"))
			} else {
				L.Push(lua.LBool(cfg.encodeInvalid == 1))
			}
			return 1
		},
		"decode_invalid_numbers": func(L *lua.LState) int {
			cjsonBoolOption(L, 1, "decode_invalid_numbers", &cfg.decodeInvalidNums)
			L.Push(lua.LBool(cfg.decodeInvalidNums))
			return 1
		},
	}
	for name, fn := range fns {
		t.RawSetString(name, L.NewFunction(fn))
	}
	t.RawSetString("null", cjsonNull)
	t.RawSetString("_NAME", lua.LString("cjson"))
	t.RawSetString("_VERSION", lua.LString("2.1.0"))
	return t
}

// cjsonIntOption reads an optional integer setting, as lua-cjson does.
func cjsonIntOption(L *lua.LState, n int, fn string, setting *int64, lo, hi int64) {
	if L.Get(n) == lua.LNil {
		return
	}
	v := luaToInt64(luaCheckNumber(L, n, fn))
	if v < lo || v > hi {
		luaArgError(L, 1, fn, "expected integer between "+strconv.FormatInt(lo, 10)+" and "+strconv.FormatInt(hi, 10))
	}
	*setting = v
}

// cjsonBoolOption reads an optional boolean setting ("on"/"off" also work).
func cjsonBoolOption(L *lua.LState, n int, fn string, setting *bool) {
	switch v := L.Get(n); v {
	case lua.LNil:
	case lua.LTrue, lua.LString("on"):
		*setting = true
	case lua.LFalse, lua.LString("off"):
		*setting = false
	default:
		luaArgError(L, n, fn, "invalid option '"+ToString(v)+"'")
	}
}

type cjsonEncoder struct {
	L   *lua.LState
	cfg *cjsonConfig
	out []byte
}

func (e *cjsonEncoder) fail(v lua.LValue, reason string) {
	e.L.RaiseError("Cannot serialise %s: %s", v.Type().String(), reason)
}

func (e *cjsonEncoder) value(v lua.LValue, depth int64) {
	switch v := v.(type) {
	case lua.LString:
		e.str(string(v))
	case lua.LNumber:
		e.number(v)
	case lua.LBool:
		if v {
			e.out = append(e.out, "true"...)
		} else {
			e.out = append(e.out, "false"...)
		}
	case *lua.LNilType:
		e.out = append(e.out, "null"...)
	case *lua.LTable:
		depth++
		// Lua's C stack check (3 slots a level) stops runaway nesting
		// before the configured depth when that is set very high.
		if depth > e.cfg.encodeMaxDepth || 2*depth+3 > luaStackLimit {
			e.L.RaiseError("Cannot serialise, excessive nesting (%d)", depth)
		}
		if n := e.arrayLength(v); n > 0 {
			e.out = append(e.out, '[')
			for i := int64(1); i <= n; i++ {
				if i > 1 {
					e.out = append(e.out, ',')
				}
				e.value(v.RawGetInt(int(i)), depth)
			}
			e.out = append(e.out, ']')
			return
		}
		e.out = append(e.out, '{')
		first := true
		for k, val := v.Next(lua.LNil); k != lua.LNil; k, val = v.Next(k) {
			if !first {
				e.out = append(e.out, ',')
			}
			first = false
			switch k := k.(type) {
			case lua.LNumber:
				e.out = append(e.out, '"')
				e.number(k)
				e.out = append(e.out, '"', ':')
			case lua.LString:
				e.str(string(k))
				e.out = append(e.out, ':')
			default:
				e.fail(k, "table key must be a number or string")
			}
			e.value(val, depth)
		}
		e.out = append(e.out, '}')
	default:
		if v == cjsonNull {
			e.out = append(e.out, "null"...)
			return
		}
		e.fail(v, "type not supported")
	}
}

// arrayLength is lua-cjson's array detection: every key a positive
// integer, and not too sparse; -1 for an object.
func (e *cjsonEncoder) arrayLength(t *lua.LTable) int64 {
	var maxKey, items int64
	for k, _ := t.Next(lua.LNil); k != lua.LNil; k, _ = t.Next(k) {
		n, ok := k.(lua.LNumber)
		if !ok || n < 1 || math.Floor(float64(n)) != float64(n) {
			return -1
		}
		if int64(n) > maxKey {
			maxKey = int64(n)
		}
		items++
	}
	if e.cfg.sparseRatio > 0 && maxKey > items*e.cfg.sparseRatio && maxKey > e.cfg.sparseSafe {
		if !e.cfg.sparseConvert {
			e.fail(t, "excessively sparse array")
		}
		return -1
	}
	return maxKey
}

func (e *cjsonEncoder) number(n lua.LNumber) {
	f := float64(n)
	invalid := math.IsInf(f, 0) || f != f
	switch {
	case e.cfg.encodeInvalid == 0 && invalid:
		e.fail(n, "must not be NaN or Inf")
	case e.cfg.encodeInvalid == 1 && f != f:
		e.out = append(e.out, "nan"...)
		return
	case e.cfg.encodeInvalid == 2 && invalid:
		e.out = append(e.out, "null"...)
		return
	}
	e.out = AppendFloat(e.out, f, int(e.cfg.numberPrecision))
}

func (e *cjsonEncoder) str(s string) {
	const hexDigits = "0123456789abcdef"
	e.out = append(e.out, '"')
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case ch == '"' || ch == '\\' || ch == '/':
			e.out = append(e.out, '\\', ch)
		case ch == '\b':
			e.out = append(e.out, `\b`...)
		case ch == '\f':
			e.out = append(e.out, `\f`...)
		case ch == '\n':
			e.out = append(e.out, `\n`...)
		case ch == '\r':
			e.out = append(e.out, `\r`...)
		case ch == '\t':
			e.out = append(e.out, `\t`...)
		case ch < 0x20 || ch == 0x7f:
			e.out = append(e.out, '\\', 'u', '0', '0', hexDigits[ch>>4], hexDigits[ch&15])
		default:
			e.out = append(e.out, ch)
		}
	}
	e.out = append(e.out, '"')
}

// JSON tokens, named as lua-cjson names them in its errors.
type cjsonToken int

const (
	tObjBegin cjsonToken = iota
	tObjEnd
	tArrBegin
	tArrEnd
	tString
	tNumber
	tBoolean
	tNull
	tColon
	tComma
	tEnd
	tWhitespace
	tError
	tUnknown
)

var cjsonTokenNames = [...]string{"T_OBJ_BEGIN", "T_OBJ_END", "T_ARR_BEGIN", "T_ARR_END", "T_STRING",
	"T_NUMBER", "T_BOOLEAN", "T_NULL", "T_COLON", "T_COMMA", "T_END", "T_WHITESPACE", "T_ERROR", "T_UNKNOWN"}

var cjsonPunctuation = [256]cjsonToken{'{': tObjBegin, '}': tObjEnd, '[': tArrBegin, ']': tArrEnd, ',': tComma, ':': tColon}

type cjsonLexeme struct {
	kind  cjsonToken
	index int // where the token (or the error) starts
	str   string
	num   float64
	bool  bool
	err   string
}

type cjsonDecoder struct {
	L     *lua.LState
	cfg   *cjsonConfig
	data  string
	pos   int
	depth int64
}

func cjsonDecode(L *lua.LState, cfg *cjsonConfig, s string) lua.LValue {
	if len(s) >= 2 && (s[0] == 0 || s[1] == 0) {
		L.RaiseError("JSON parser does not support UTF-16 or UTF-32")
	}
	d := cjsonDecoder{L: L, cfg: cfg, data: s}
	tok := d.next()
	v := d.value(tok)
	if tok = d.next(); tok.kind != tEnd {
		d.fail("the end", tok)
	}
	return v
}

// at returns the byte at i, NUL past the end, as the C string would.
func (d *cjsonDecoder) at(i int) byte {
	if i < len(d.data) {
		return d.data[i]
	}
	return 0
}

func (d *cjsonDecoder) fail(expected string, tok cjsonLexeme) {
	found := cjsonTokenNames[tok.kind]
	if tok.kind == tError {
		found = tok.err
	}
	d.L.RaiseError("Expected %s but found %s at character %d", expected, found, tok.index+1)
}

func (d *cjsonDecoder) next() cjsonLexeme {
	for {
		switch d.at(d.pos) {
		case ' ', '\t', '\n', '\r':
			d.pos++
			continue
		}
		break
	}
	tok := cjsonLexeme{index: d.pos}
	ch := d.at(d.pos)
	switch ch {
	case '{', '}', '[', ']', ',', ':':
		tok.kind = cjsonPunctuation[ch]
		d.pos++
		return tok
	}
	switch {
	case ch == 0:
		tok.kind = tEnd
		return tok
	case ch == '"':
		return d.string(tok)
	case ch == '-' || '0' <= ch && ch <= '9':
		if !d.cfg.decodeInvalidNums && d.invalidNumber() {
			return d.errorAt(tok, "invalid number")
		}
		return d.number(tok)
	case d.hasPrefix("true"):
		tok.kind, tok.bool = tBoolean, true
		d.pos += 4
		return tok
	case d.hasPrefix("false"):
		tok.kind = tBoolean
		d.pos += 5
		return tok
	case d.hasPrefix("null"):
		tok.kind = tNull
		d.pos += 4
		return tok
	case (ch == '+' || ch == 'i' || ch == 'I' || ch == 'n' || ch == 'N') && d.cfg.decodeInvalidNums && d.invalidNumber():
		return d.number(tok)
	}
	return d.errorAt(tok, "invalid token")
}

func (d *cjsonDecoder) errorAt(tok cjsonLexeme, msg string) cjsonLexeme {
	tok.kind, tok.index, tok.err = tError, d.pos, msg
	return tok
}

func (d *cjsonDecoder) hasPrefix(s string) bool {
	return len(d.data)-d.pos >= len(s) && d.data[d.pos:d.pos+len(s)] == s
}

// invalidNumber spots what JSON forbids but strtod reads: a leading +,
// hexadecimal, leading zeros, inf and nan.
func (d *cjsonDecoder) invalidNumber() bool {
	p := d.pos
	if d.at(p) == '+' {
		return true
	}
	if d.at(p) == '-' {
		p++
	}
	if d.at(p) == '0' {
		ch2 := d.at(p + 1)
		return ch2|0x20 == 'x' || '0' <= ch2 && ch2 <= '9'
	}
	if d.at(p) <= '9' {
		return false
	}
	word := func(w string) bool {
		for i := 0; i < len(w); i++ {
			if d.at(p+i)|0x20 != w[i] {
				return false
			}
		}
		return true
	}
	return word("inf") || word("nan")
}

func (d *cjsonDecoder) number(tok cjsonLexeme) cjsonLexeme {
	end := len(d.data)
	if i := indexNUL(d.data[d.pos:]); i >= 0 {
		end = d.pos + i
	}
	f, n := strtod(d.data[d.pos:end])
	if n == 0 {
		return d.errorAt(tok, "invalid number")
	}
	tok.kind, tok.num = tNumber, f
	d.pos += n
	return tok
}

func indexNUL(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return i
		}
	}
	return -1
}

func (d *cjsonDecoder) string(tok cjsonLexeme) cjsonLexeme {
	d.pos++ // the opening quote
	var buf []byte
	for {
		ch := d.at(d.pos)
		if ch == '"' {
			break
		}
		if ch == 0 {
			return d.errorAt(tok, "unexpected end of string")
		}
		if ch == '\\' {
			var esc byte
			switch d.at(d.pos + 1) {
			case '"':
				esc = '"'
			case '\\':
				esc = '\\'
			case '/':
				esc = '/'
			case 'b':
				esc = '\b'
			case 'f':
				esc = '\f'
			case 'n':
				esc = '\n'
			case 'r':
				esc = '\r'
			case 't':
				esc = '\t'
			case 'u':
				var ok bool
				if buf, ok = d.unicodeEscape(buf); !ok {
					return d.errorAt(tok, "invalid unicode escape code")
				}
				continue
			default:
				return d.errorAt(tok, "invalid escape code")
			}
			buf = append(buf, esc)
			d.pos += 2
			continue
		}
		buf = append(buf, ch)
		d.pos++
	}
	d.pos++ // the closing quote
	tok.kind, tok.str = tString, string(buf)
	return tok
}

func (d *cjsonDecoder) hex4(at int) int {
	v := 0
	for i := 0; i < 4; i++ {
		h := hexDigit(d.at(at + i))
		if h >= 16 {
			return -1
		}
		v = v<<4 | h
	}
	return v
}

// unicodeEscape decodes \uXXXX (and a surrogate pair) at d.pos into UTF-8.
func (d *cjsonDecoder) unicodeEscape(buf []byte) ([]byte, bool) {
	cp := d.hex4(d.pos + 2)
	if cp < 0 {
		return buf, false
	}
	escLen := 6
	if cp&0xF800 == 0xD800 {
		if cp&0x400 != 0 || d.at(d.pos+6) != '\\' || d.at(d.pos+7) != 'u' {
			return buf, false
		}
		low := d.hex4(d.pos + 8)
		if low < 0 || low&0xFC00 != 0xDC00 {
			return buf, false
		}
		cp = (cp&0x3FF)<<10 | low&0x3FF + 0x10000
		escLen = 12
	}
	buf = utf8.AppendRune(buf, rune(cp))
	d.pos += escLen
	return buf, true
}

func (d *cjsonDecoder) value(tok cjsonLexeme) lua.LValue {
	switch tok.kind {
	case tString:
		return lua.LString(tok.str)
	case tNumber:
		return lua.LNumber(tok.num)
	case tBoolean:
		return lua.LBool(tok.bool)
	case tNull:
		return cjsonNull
	case tObjBegin, tArrBegin:
		d.depth++
		if d.depth > d.cfg.decodeMaxDepth || 2*d.depth+3 > luaStackLimit {
			d.L.RaiseError("Found too many nested data structures (%d) at character %d", d.depth, d.pos)
		}
		t := d.L.NewTable()
		if tok.kind == tObjBegin {
			d.object(t)
		} else {
			d.array(t)
		}
		d.depth--
		return t
	}
	d.fail("value", tok)
	return lua.LNil
}

func (d *cjsonDecoder) object(t *lua.LTable) {
	tok := d.next()
	if tok.kind == tObjEnd {
		return
	}
	for {
		if tok.kind != tString {
			d.fail("object key string", tok)
		}
		key := tok.str
		if tok = d.next(); tok.kind != tColon {
			d.fail("colon", tok)
		}
		t.RawSetString(key, d.value(d.next()))
		tok = d.next()
		if tok.kind == tObjEnd {
			return
		}
		if tok.kind != tComma {
			d.fail("comma or object end", tok)
		}
		tok = d.next()
	}
}

func (d *cjsonDecoder) array(t *lua.LTable) {
	tok := d.next()
	if tok.kind == tArrEnd {
		return
	}
	for i := 1; ; i++ {
		t.RawSetInt(i, d.value(tok))
		tok = d.next()
		if tok.kind == tArrEnd {
			return
		}
		if tok.kind != tComma {
			d.fail("comma or array end", tok)
		}
		tok = d.next()
	}
}
