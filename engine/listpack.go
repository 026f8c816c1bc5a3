package engine

import (
	"encoding/binary"
	"math"
	"strconv"
)

// listpack is a Redis listpack (src/listpack.c) held as it is in Redis's
// memory: a 6-byte header (total bytes and element count, little endian; a
// count of 65535 means "unknown, count them"), the elements, then 0xFF.
// Each element is an encoding byte with its integer or string, followed by
// its own size again ("backlen") so that it can be walked backwards.
//
// Streams keep their nodes in this form, byte for byte as Redis does, so
// that DUMP and RDB can carry the nodes verbatim and approximate trimming
// sees the same node boundaries Redis would. Only what streams need is
// here: appending, reading, walking forward and replacing an integer.
//
// Positions are byte offsets of an element's encoding byte; the end of the
// elements is len(lp)-1, where the 0xFF byte is.
type listpack []byte

const (
	listpackHeaderSize   = 6
	listpackEnd          = 0xFF
	listpackCountUnknown = math.MaxUint16
)

// newListpack returns an empty listpack with room for capacity bytes.
func newListpack(capacity int) listpack {
	lp := make(listpack, listpackHeaderSize+1, max(capacity, listpackHeaderSize+1))
	binary.LittleEndian.PutUint32(lp, listpackHeaderSize+1)
	lp[listpackHeaderSize] = listpackEnd
	return lp
}

// first returns the position of the first element; it equals end() when
// the listpack is empty.
func (lp listpack) first() int { return listpackHeaderSize }

// end returns the position of the terminator byte.
func (lp listpack) end() int { return len(lp) - 1 }

// encodedSize returns the size of the element at p without its backlen.
func (lp listpack) encodedSize(p int) int {
	b := lp[p]
	switch {
	case b&0x80 == 0:
		return 1
	case b&0xC0 == 0x80:
		return 1 + int(b&0x3F)
	case b&0xE0 == 0xC0:
		return 2
	case b&0xF0 == 0xE0:
		return 2 + (int(b&0x0F)<<8 | int(lp[p+1]))
	case b == 0xF0:
		return 5 + int(binary.LittleEndian.Uint32(lp[p+1:]))
	case b == 0xF1:
		return 3
	case b == 0xF2:
		return 4
	case b == 0xF3:
		return 5
	case b == 0xF4:
		return 9
	}
	panic("listpack: bad encoding byte")
}

// next returns the position of the element after the one at p.
func (lp listpack) next(p int) int {
	n := lp.encodedSize(p)
	return p + n + backlenSize(n)
}

// get returns the element at p: a string (pointing into lp), or an integer
// when isInt.
func (lp listpack) get(p int) (s []byte, v int64, isInt bool) {
	b := lp[p]
	switch {
	case b&0x80 == 0:
		return nil, int64(b), true
	case b&0xC0 == 0x80:
		n := int(b & 0x3F)
		return lp[p+1 : p+1+n], 0, false
	case b&0xE0 == 0xC0:
		u := int64(b&0x1F)<<8 | int64(lp[p+1])
		if u >= 1<<12 {
			u -= 1 << 13
		}
		return nil, u, true
	case b&0xF0 == 0xE0:
		n := int(b&0x0F)<<8 | int(lp[p+1])
		return lp[p+2 : p+2+n], 0, false
	case b == 0xF0:
		n := int(binary.LittleEndian.Uint32(lp[p+1:]))
		return lp[p+5 : p+5+n], 0, false
	case b >= 0xF1 && b <= 0xF4:
		w := [...]int{2, 3, 4, 8}[b-0xF1]
		var u uint64
		for i := w - 1; i >= 0; i-- {
			u = u<<8 | uint64(lp[p+1+i])
		}
		shift := uint(64 - 8*w)
		return nil, int64(u<<shift) >> shift, true
	}
	panic("listpack: bad encoding byte")
}

// getInt returns the integer at p. Streams store their counters and deltas
// with lpAppendInteger, so they are always integer-encoded.
func (lp listpack) getInt(p int) int64 {
	s, v, isInt := lp.get(p)
	if !isInt {
		v, _ = ParseInt(s)
	}
	return v
}

// appendTo appends the element at p to dst as Redis hands it out: an
// integer as its decimal text.
func (lp listpack) appendTo(dst []byte, p int) []byte {
	s, v, isInt := lp.get(p)
	if isInt {
		return strconv.AppendInt(dst, v, 10)
	}
	return append(dst, s...)
}

// appendInt appends v as lpAppendInteger does.
func (lp listpack) appendInt(v int64) listpack {
	var enc [9]byte
	return lp.appendEncoded(enc[:encodeListpackInt(enc[:], v)], nil)
}

// appendString appends s as lpAppend does: as an integer when s is the
// canonical decimal form of one (lpStringToInt64, the same rules as
// string2ll), so that a node's bytes are the ones Redis would hold.
func (lp listpack) appendString(s []byte) listpack {
	if v, ok := ParseInt(s); ok {
		return lp.appendInt(v)
	}
	var hdr [5]byte
	return lp.appendEncoded(hdr[:encodeListpackStringHeader(hdr[:], len(s))], s)
}

// appendEncoded appends an element made of an encoding head and a body.
func (lp listpack) appendEncoded(head, body []byte) listpack {
	n := len(head) + len(body)
	lp = lp[:len(lp)-1]
	lp = append(lp, head...)
	lp = append(lp, body...)
	lp = appendBacklen(lp, n)
	lp = append(lp, listpackEnd)
	binary.LittleEndian.PutUint32(lp, uint32(len(lp)))
	// Once the count reaches 65535 it stays "unknown", as lpInsert leaves it.
	if c := binary.LittleEndian.Uint16(lp[4:]); c != listpackCountUnknown {
		binary.LittleEndian.PutUint16(lp[4:], c+1)
	}
	return lp
}

// replaceInt replaces the element at p by the integer v, as
// lpReplaceInteger does, moving the following bytes if the size changes.
// The result may be a new slice if lp had no room to grow.
func (lp listpack) replaceInt(p int, v int64) listpack {
	var enc [9 + 5]byte
	n := encodeListpackInt(enc[:], v)
	repl := appendBacklen(enc[:n], n)
	old := lp.next(p) - p
	if len(repl) == old {
		copy(lp[p:], repl)
		return lp
	}
	size := len(lp) - old + len(repl)
	if size > cap(lp) {
		grown := make(listpack, size, size+size/4)
		copy(grown, lp[:p])
		copy(grown[p+len(repl):], lp[p+old:])
		lp = grown
	} else {
		tail := len(lp) - (p + old)
		lp = lp[:max(len(lp), size)]
		copy(lp[p+len(repl):], lp[p+old:p+old+tail])
		lp = lp[:size]
	}
	copy(lp[p:], repl)
	binary.LittleEndian.PutUint32(lp, uint32(len(lp)))
	return lp
}

// encodeListpackInt writes v in the smallest integer encoding
// (lpEncodeIntegerGetType) and returns its size.
func encodeListpackInt(dst []byte, v int64) int {
	switch {
	case v >= 0 && v <= 127:
		dst[0] = byte(v)
		return 1
	case v >= -4096 && v <= 4095:
		u := uint64(v) & (1<<13 - 1)
		dst[0], dst[1] = byte(u>>8)|0xC0, byte(u)
		return 2
	case v >= math.MinInt16 && v <= math.MaxInt16:
		dst[0] = 0xF1
		binary.LittleEndian.PutUint16(dst[1:], uint16(v))
		return 3
	case v >= -1<<23 && v <= 1<<23-1:
		u := uint32(v)
		dst[0], dst[1], dst[2], dst[3] = 0xF2, byte(u), byte(u>>8), byte(u>>16)
		return 4
	case v >= math.MinInt32 && v <= math.MaxInt32:
		dst[0] = 0xF3
		binary.LittleEndian.PutUint32(dst[1:], uint32(v))
		return 5
	}
	dst[0] = 0xF4
	binary.LittleEndian.PutUint64(dst[1:], uint64(v))
	return 9
}

// encodeListpackStringHeader writes the encoding head of a string of n
// bytes (lpEncodeString) and returns its size.
func encodeListpackStringHeader(dst []byte, n int) int {
	switch {
	case n < 64:
		dst[0] = byte(n) | 0x80
		return 1
	case n < 4096:
		dst[0], dst[1] = byte(n>>8)|0xE0, byte(n)
		return 2
	}
	dst[0] = 0xF0
	binary.LittleEndian.PutUint32(dst[1:], uint32(n))
	return 5
}

// listpackStringSize is how many bytes s takes as an element, backlen
// included, as lpAppend would store it.
func listpackStringSize(s []byte) int {
	var n int
	if v, ok := ParseInt(s); ok {
		var enc [9]byte
		n = encodeListpackInt(enc[:], v)
	} else {
		var hdr [5]byte
		n = encodeListpackStringHeader(hdr[:], len(s)) + len(s)
	}
	return n + backlenSize(n)
}

// appendBacklen appends an element's size n, most significant 7 bits
// first, every byte but the first flagged with 128 (lpEncodeBacklen), so
// that it reads backwards from its last byte.
func appendBacklen(dst []byte, n int) []byte {
	switch {
	case n <= 127:
		return append(dst, byte(n))
	case n < 16383:
		return append(dst, byte(n>>7), byte(n&127)|128)
	case n < 2097151:
		return append(dst, byte(n>>14), byte(n>>7&127)|128, byte(n&127)|128)
	case n < 268435455:
		return append(dst, byte(n>>21), byte(n>>14&127)|128, byte(n>>7&127)|128, byte(n&127)|128)
	}
	return append(dst, byte(n>>28), byte(n>>21&127)|128, byte(n>>14&127)|128, byte(n>>7&127)|128, byte(n&127)|128)
}

// backlenSize is how many bytes appendBacklen takes for n.
func backlenSize(n int) int {
	switch {
	case n <= 127:
		return 1
	case n < 16383:
		return 2
	case n < 2097151:
		return 3
	case n < 268435455:
		return 4
	}
	return 5
}

// validate checks the listpack's framing whole: header, every element's
// encoding and backlen, the terminator and the count. Nodes that come from
// outside (RESTORE, RDB) must pass it before any other method touches them.
func (lp listpack) validate() bool {
	if len(lp) < listpackHeaderSize+1 || int(binary.LittleEndian.Uint32(lp)) != len(lp) || lp[len(lp)-1] != listpackEnd {
		return false
	}
	end := len(lp) - 1
	n := 0
	for p := listpackHeaderSize; p < end; n++ {
		size, ok := lp.checkedEncodedSize(p, end)
		if !ok {
			return false
		}
		bl := backlenSize(size)
		if p+size+bl > end {
			return false
		}
		got := 0
		for i := 0; i < bl; i++ {
			b := lp[p+size+i]
			if (b&128 != 0) != (i > 0) {
				return false
			}
			got = got<<7 | int(b&127)
		}
		if got != size {
			return false
		}
		p += size + bl
	}
	c := int(binary.LittleEndian.Uint16(lp[4:]))
	return c == listpackCountUnknown || c == n
}

// checkedEncodedSize is encodedSize for untrusted bytes: it reports false
// instead of reading past end.
func (lp listpack) checkedEncodedSize(p, end int) (int, bool) {
	b := lp[p]
	need := 1
	switch {
	case b&0xE0 == 0xC0, b&0xF0 == 0xE0:
		need = 2
	case b == 0xF0:
		need = 5
	case b == listpackEnd || b > 0xF4:
		return 0, false
	}
	if p+need > end {
		return 0, false
	}
	n := lp.encodedSize(p)
	return n, p+n <= end
}

// prev returns the position of the element before the one at p (p may be
// end()), reading that element's backlen backwards; it returns -1 before
// the first element.
func (lp listpack) prev(p int) int {
	if p <= listpackHeaderSize {
		return -1
	}
	q := p - 1
	size, shift := 0, 0
	for {
		b := lp[q]
		size |= int(b&127) << shift
		if b&128 == 0 {
			break
		}
		shift += 7
		q--
	}
	return p - size - backlenSize(size)
}
