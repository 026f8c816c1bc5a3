package lua51

import (
	"encoding/binary"
	"math"

	lua "github.com/yuin/gopher-lua"
)

// The struct and cmsgpack libraries of Redis's Lua: binary packing with C
// layouts (struct 0.2) and MessagePack (lua-cmsgpack 0.4.0), with their
// rules and error texts.

const (
	structMaxIntSize = 32
	structMaxAlign   = 8 // offsetof(struct {char c; double d;}, d)
)

// structHeader is the state a struct format carries: byte order and the
// largest alignment.
type structHeader struct {
	little bool
	align  int
}

type structFormat struct {
	L   *lua.LState
	fn  string
	fmt string
	pos int
	h   structHeader
}

func newStructFormat(L *lua.LState, fn string) *structFormat {
	return &structFormat{L: L, fn: fn, fmt: luaCheckString(L, 1, fn), h: structHeader{little: true, align: 1}}
}

func isDigit(ch byte) bool { return '0' <= ch && ch <= '9' }

// number reads an optional decimal count after an option.
func (f *structFormat) number(def int) int {
	if f.pos >= len(f.fmt) || !isDigit(f.fmt[f.pos]) {
		return def
	}
	a := 0
	for f.pos < len(f.fmt) && isDigit(f.fmt[f.pos]) {
		d := int(f.fmt[f.pos] - '0')
		if a > math.MaxInt32/10 || a*10 > math.MaxInt32-d {
			f.L.RaiseError("integral size overflow")
		}
		a = a*10 + d
		f.pos++
	}
	return a
}

// size is the size of option opt, reading its count when it has one.
func (f *structFormat) size(opt byte) int {
	switch opt {
	case 'B', 'b', 'x':
		return 1
	case 'H', 'h':
		return 2
	case 'L', 'l', 'T', 'd':
		return 8
	case 'f':
		return 4
	case 'c':
		return f.number(1)
	case 'i', 'I':
		n := f.number(4)
		if n > structMaxIntSize {
			f.L.RaiseError("integral size %d is larger than limit of %d", n, structMaxIntSize)
		}
		return n
	}
	return 0
}

// toAlign is the padding an item of size takes at offset n.
func (f *structFormat) toAlign(n, opt, size int) int {
	if size == 0 || opt == 'c' {
		return 0
	}
	size = min(size, f.h.align)
	return (size - (n & (size - 1))) & (size - 1)
}

// control applies the byte-order and alignment options.
func (f *structFormat) control(opt byte) {
	switch opt {
	case ' ':
	case '>':
		f.h.little = false
	case '<', '=':
		f.h.little = true
	case '!':
		a := f.number(structMaxAlign)
		if a&(a-1) != 0 || a == 0 {
			f.L.RaiseError("alignment %d is not a power of 2", a)
		}
		f.h.align = a
	default:
		luaArgError(f.L, 1, f.fn, "invalid format option '"+string(rune(opt))+"'")
	}
}

func (f *structFormat) putInt(out []byte, v float64, size int) []byte {
	var u uint64
	if v < 0 {
		u = uint64(luaToInt64(v))
	} else {
		u = cUnsigned(v)
	}
	var buf [structMaxIntSize]byte
	for i := 0; i < size; i++ {
		b := byte(0)
		if i < 8 {
			b = byte(u >> (8 * i))
		}
		if f.h.little {
			buf[i] = b
		} else {
			buf[size-1-i] = b
		}
	}
	return append(out, buf[:size]...)
}

func (f *structFormat) order() interface {
	binary.ByteOrder
	binary.AppendByteOrder
} {
	if f.h.little {
		return binary.LittleEndian
	}
	return binary.BigEndian
}

// structArg is an argument to struct.pack: a missing one reads as the nil
// Lua's version leaves on its stack.
func structNumber(L *lua.LState, n int) float64 {
	if n > L.GetTop() {
		luaArgError(L, n, "pack", "number expected, got nil")
	}
	return luaCheckNumber(L, n, "pack")
}

func structPack(L *lua.LState) int {
	f := newStructFormat(L, "pack")
	arg := 2
	var out []byte
	for f.pos < len(f.fmt) {
		opt := f.fmt[f.pos]
		f.pos++
		size := f.size(opt)
		pad := f.toAlign(len(out), int(opt), size)
		out = append(out, make([]byte, pad)...)
		switch opt {
		case 'b', 'B', 'h', 'H', 'l', 'L', 'T', 'i', 'I':
			out = f.putInt(out, structNumber(L, arg), size)
			arg++
		case 'x':
			out = append(out, 0)
		case 'f':
			out = f.order().AppendUint32(out, math.Float32bits(float32(structNumber(L, arg))))
			arg++
		case 'd':
			out = f.order().AppendUint64(out, math.Float64bits(structNumber(L, arg)))
			arg++
		case 'c', 's':
			if arg > L.GetTop() {
				luaArgError(L, arg, "pack", "string expected, got nil")
			}
			s := luaCheckString(L, arg, "pack")
			arg++
			if size == 0 {
				size = len(s)
			}
			if len(s) < size {
				luaArgError(L, arg, "pack", "string too short")
			}
			out = append(out, s[:size]...)
			if opt == 's' {
				out = append(out, 0)
			}
		default:
			f.control(opt)
		}
	}
	L.Push(lua.LString(out))
	return 1
}

func structUnpack(L *lua.LState) int {
	f := newStructFormat(L, "unpack")
	data := luaCheckString(L, 2, "unpack")
	pos := 1
	if L.GetTop() >= 3 && L.Get(3) != lua.LNil {
		pos = int(luaToInt64(luaCheckNumber(L, 3, "unpack")))
	}
	if pos <= 0 {
		luaArgError(L, 3, "unpack", "offset must be 1 or greater")
	}
	pos--
	results := 0
	tooShort := func(size int) {
		if size < 0 || size > len(data) || pos > len(data)-size {
			luaArgError(L, 2, "unpack", "data string too short")
		}
	}
	for f.pos < len(f.fmt) {
		opt := f.fmt[f.pos]
		f.pos++
		size := f.size(opt)
		pos += f.toAlign(pos, int(opt), size)
		tooShort(size)
		if luaStackRoom(L) < 2 {
			L.RaiseError("stack overflow (too many results)")
		}
		switch opt {
		case 'b', 'B', 'h', 'H', 'l', 'L', 'T', 'i', 'I':
			var u uint64
			for i := 0; i < size; i++ {
				b := data[pos+size-1-i]
				if !f.h.little {
					b = data[pos+i]
				}
				u = u<<8 | uint64(b)
			}
			v := float64(u)
			if 'a' <= opt && opt <= 'z' && size < 8 && u&(1<<(8*size-1)) != 0 {
				v = float64(int64(u | ^uint64(0)<<(8*size-1)))
			} else if 'a' <= opt && opt <= 'z' {
				v = float64(int64(u))
			}
			L.Push(lua.LNumber(v))
			results++
		case 'x':
		case 'f':
			L.Push(lua.LNumber(math.Float32frombits(f.order().Uint32([]byte(data[pos : pos+4])))))
			results++
		case 'd':
			L.Push(lua.LNumber(math.Float64frombits(f.order().Uint64([]byte(data[pos : pos+8])))))
			results++
		case 'c':
			if size == 0 {
				prev, ok := L.Get(-1).(lua.LNumber)
				if results == 0 || !ok {
					L.RaiseError("format 'c0' needs a previous size")
				}
				size = int(prev)
				L.Pop(1)
				results--
				tooShort(size)
			}
			L.Push(lua.LString(data[pos : pos+size]))
			results++
		case 's':
			end := -1
			for i := pos; i < len(data); i++ {
				if data[i] == 0 {
					end = i
					break
				}
			}
			if end < 0 {
				L.RaiseError("unfinished string in data")
			}
			size = end - pos + 1
			L.Push(lua.LString(data[pos:end]))
			results++
		default:
			f.control(opt)
		}
		pos += size
	}
	L.Push(lua.LNumber(pos + 1))
	return results + 1
}

func structSize(L *lua.LState) int {
	f := newStructFormat(L, "size")
	pos := 0
	for f.pos < len(f.fmt) {
		opt := f.fmt[f.pos]
		f.pos++
		size := f.size(opt)
		pos += f.toAlign(pos, int(opt), size)
		switch {
		case opt == 's':
			luaArgError(L, 1, "size", "option 's' has no fixed size")
		case opt == 'c' && size == 0:
			luaArgError(L, 1, "size", "option 'c0' has no fixed size")
		}
		if !isAlnum(opt) {
			f.control(opt)
		}
		pos += size
	}
	L.Push(lua.LNumber(pos))
	return 1
}

func isAlnum(ch byte) bool {
	return isDigit(ch) || 'a' <= ch|0x20 && ch|0x20 <= 'z'
}

func structLibrary(L *lua.LState) *lua.LTable {
	t := L.NewTable()
	t.RawSetString("pack", L.NewFunction(structPack))
	t.RawSetString("unpack", L.NewFunction(structUnpack))
	t.RawSetString("size", L.NewFunction(structSize))
	return t
}

// cmsgpackMaxNesting is how deep cmsgpack.pack follows tables; deeper ones
// are packed as nil.
const cmsgpackMaxNesting = 16

func cmsgpackLibrary(L *lua.LState) *lua.LTable {
	t := L.NewTable()
	t.RawSetString("pack", L.NewFunction(cmsgpackPack))
	t.RawSetString("unpack", L.NewFunction(func(L *lua.LState) int { return cmsgpackUnpack(L, 0, 0, true) }))
	t.RawSetString("unpack_one", L.NewFunction(func(L *lua.LState) int {
		offset := 0
		if L.GetTop() >= 2 && L.Get(2) != lua.LNil {
			offset = int(luaCheckInt(L, 2, "unpack_one"))
		}
		return cmsgpackUnpack(L, 1, offset, false)
	}))
	t.RawSetString("unpack_limit", L.NewFunction(func(L *lua.LState) int {
		limit := int(luaCheckInt(L, 2, "unpack_limit"))
		offset := 0
		if L.GetTop() >= 3 && L.Get(3) != lua.LNil {
			offset = int(luaCheckInt(L, 3, "unpack_limit"))
		}
		return cmsgpackUnpack(L, limit, offset, limit == 0 && offset == 0)
	}))
	t.RawSetString("_NAME", lua.LString("cmsgpack"))
	t.RawSetString("_VERSION", lua.LString("lua-cmsgpack 0.4.0"))
	t.RawSetString("_COPYRIGHT", lua.LString("Copyright (C) 2012, Salvatore Sanfilippo"))
	t.RawSetString("_DESCRIPTION", lua.LString("MessagePack C implementation for Lua"))
	return t
}

func cmsgpackPack(L *lua.LState) int {
	n := L.GetTop()
	if n == 0 {
		luaArgError(L, 0, "pack", "MessagePack pack needs input.")
	}
	var out []byte
	for i := 1; i <= n; i++ {
		out = msgpackAppend(out, L.Get(i), 0)
	}
	L.Push(lua.LString(out))
	return 1
}

func msgpackAppend(out []byte, v lua.LValue, level int) []byte {
	switch v := v.(type) {
	case lua.LBool:
		if v {
			return append(out, 0xc3)
		}
		return append(out, 0xc2)
	case lua.LNumber:
		f := float64(v)
		if !math.IsInf(f, 0) && f == f && f >= -(1<<63) && f < 1<<63 && float64(int64(f)) == f {
			return msgpackInt(out, int64(f))
		}
		if f32 := float32(f); float64(f32) == f {
			return binary.BigEndian.AppendUint32(append(out, 0xca), math.Float32bits(f32))
		}
		return binary.BigEndian.AppendUint64(append(out, 0xcb), math.Float64bits(f))
	case lua.LString:
		n := len(v)
		switch {
		case n < 32:
			out = append(out, 0xa0|byte(n))
		case n <= 0xff:
			out = append(out, 0xd9, byte(n))
		case n <= 0xffff:
			out = binary.BigEndian.AppendUint16(append(out, 0xda), uint16(n))
		default:
			out = binary.BigEndian.AppendUint32(append(out, 0xdb), uint32(n))
		}
		return append(out, v...)
	case *lua.LTable:
		if level == cmsgpackMaxNesting {
			return append(out, 0xc0)
		}
		return msgpackTable(out, v, level)
	}
	return append(out, 0xc0)
}

func msgpackInt(out []byte, n int64) []byte {
	switch {
	case n >= 0 && n <= 127:
		return append(out, byte(n))
	case n >= 0 && n <= 0xff:
		return append(out, 0xcc, byte(n))
	case n >= 0 && n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(out, 0xcd), uint16(n))
	case n >= 0 && n <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(out, 0xce), uint32(n))
	case n >= 0:
		return binary.BigEndian.AppendUint64(append(out, 0xcf), uint64(n))
	case n >= -32:
		return append(out, byte(int8(n)))
	case n >= -128:
		return append(out, 0xd0, byte(int8(n)))
	case n >= -32768:
		return binary.BigEndian.AppendUint16(append(out, 0xd1), uint16(int16(n)))
	case n >= -(1 << 31):
		return binary.BigEndian.AppendUint32(append(out, 0xd2), uint32(int32(n)))
	}
	return binary.BigEndian.AppendUint64(append(out, 0xd3), uint64(n))
}

// msgpackTable packs a table as an array when its keys are exactly 1..n,
// as a map otherwise.
func msgpackTable(out []byte, t *lua.LTable, level int) []byte {
	count, maxKey, isArray := 0, 0.0, true
	for k, _ := t.Next(lua.LNil); k != lua.LNil; k, _ = t.Next(k) {
		count++
		n, ok := k.(lua.LNumber)
		if !ok || n <= 0 || float64(int32(n)) != float64(n) {
			isArray = false
			continue
		}
		maxKey = max(maxKey, float64(n))
	}
	if isArray && maxKey == float64(count) {
		out = msgpackHeader(out, count, 0x90, 0xdc, 0xdd)
		for i := 1; i <= count; i++ {
			out = msgpackAppend(out, t.RawGetInt(i), level+1)
		}
		return out
	}
	out = msgpackHeader(out, count, 0x80, 0xde, 0xdf)
	for k, v := t.Next(lua.LNil); k != lua.LNil; k, v = t.Next(k) {
		out = msgpackAppend(out, k, level+1)
		out = msgpackAppend(out, v, level+1)
	}
	return out
}

func msgpackHeader(out []byte, n int, fix, b16, b32 byte) []byte {
	switch {
	case n <= 15:
		return append(out, fix|byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(out, b16), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(out, b32), uint32(n))
}

func cmsgpackUnpack(L *lua.LState, limit, offset int, all bool) int {
	fn := "unpack"
	s := luaCheckString(L, 1, fn)
	L.SetTop(1)
	if offset < 0 || limit < 0 {
		L.RaiseError("Invalid request to unpack with offset of %d and limit of %d.", offset, len(s))
	}
	if offset > len(s) {
		L.RaiseError("Start offset %d greater than input length %d.", offset, len(s))
	}
	if all {
		limit = math.MaxInt32
	}
	d := msgpackDecoder{L: L, b: s[offset:]}
	count := 0
	for ; len(d.b) > 0 && count < limit; count++ {
		if L.GetTop() >= luaStackLimit {
			L.RaiseError("stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)")
		}
		v := d.value()
		switch d.err {
		case msgpackEOF:
			L.RaiseError("Missing bytes in input.")
		case msgpackBadFormat:
			L.RaiseError("Bad data format in input.")
		}
		L.Push(v)
	}
	if all {
		return count
	}
	next := len(s) - len(d.b)
	if len(d.b) == 0 {
		next = -1
	}
	L.Insert(lua.LNumber(next), 2)
	return count + 1
}

const (
	msgpackOK = iota
	msgpackEOF
	msgpackBadFormat
)

type msgpackDecoder struct {
	L     *lua.LState
	b     string
	err   int
	depth int
}

func (d *msgpackDecoder) take(n int) string {
	if d.err != msgpackOK || len(d.b) < n {
		if d.err == msgpackOK {
			d.err = msgpackEOF
		}
		return ""
	}
	s := d.b[:n]
	d.b = d.b[n:]
	return s
}

func (d *msgpackDecoder) uint(n int) uint64 {
	s := d.take(n)
	if len(s) < n {
		return 0
	}
	var u uint64
	for i := 0; i < n; i++ {
		u = u<<8 | uint64(s[i])
	}
	return u
}

func (d *msgpackDecoder) value() lua.LValue {
	if d.err != msgpackOK {
		return lua.LNil
	}
	tag := d.take(1)
	if tag == "" {
		return lua.LNil
	}
	c := tag[0]
	switch {
	case c <= 0x7f:
		return lua.LNumber(c)
	case c >= 0xe0:
		return lua.LNumber(int8(c))
	case c&0xe0 == 0xa0:
		return lua.LString(d.take(int(c & 0x1f)))
	case c&0xf0 == 0x90:
		return d.array(int(c & 0x0f))
	case c&0xf0 == 0x80:
		return d.table(int(c & 0x0f))
	}
	switch c {
	case 0xcc, 0xcd, 0xce, 0xcf:
		// Unsigned values go through a signed integer, as lua_pushinteger
		// takes them.
		return lua.LNumber(int64(d.uint(1 << (c - 0xcc))))
	case 0xd0:
		return lua.LNumber(int8(d.uint(1)))
	case 0xd1:
		return lua.LNumber(int16(d.uint(2)))
	case 0xd2:
		return lua.LNumber(int32(d.uint(4)))
	case 0xd3:
		return lua.LNumber(int64(d.uint(8)))
	case 0xc0:
		return lua.LNil
	case 0xc2:
		return lua.LFalse
	case 0xc3:
		return lua.LTrue
	case 0xca:
		return lua.LNumber(math.Float32frombits(uint32(d.uint(4))))
	case 0xcb:
		return lua.LNumber(math.Float64frombits(d.uint(8)))
	case 0xd9, 0xda, 0xdb:
		n := d.uint(1 << (c - 0xd9))
		if n > uint64(len(d.b)) {
			d.err = msgpackEOF
			return lua.LNil
		}
		return lua.LString(d.take(int(n)))
	case 0xdc, 0xdd:
		return d.array(int(d.uint(2 << (c - 0xdc))))
	case 0xde, 0xdf:
		return d.table(int(d.uint(2 << (c - 0xde))))
	}
	d.err = msgpackBadFormat
	return lua.LNil
}

// nest fails as Lua's stack check does on input nested beyond its stack.
func (d *msgpackDecoder) nest() {
	d.depth++
	if d.depth > luaStackLimit {
		d.L.RaiseError("stack overflow (in function mp_decode_to_lua_type)")
	}
}

// array and table read n elements; n comes from the input, so nothing is
// allocated for it before the elements are really there.
func (d *msgpackDecoder) array(n int) lua.LValue {
	d.nest()
	defer func() { d.depth-- }()
	t := d.L.NewTable()
	for i := 1; i <= n && d.err == msgpackOK; i++ {
		t.RawSetInt(i, d.value())
	}
	return t
}

func (d *msgpackDecoder) table(n int) lua.LValue {
	d.nest()
	defer func() { d.depth-- }()
	t := d.L.NewTable()
	for i := 0; i < n && d.err == msgpackOK; i++ {
		k := d.value()
		v := d.value()
		if k != lua.LNil && d.err == msgpackOK {
			t.RawSet(k, v)
		}
	}
	return t
}
