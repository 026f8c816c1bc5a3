package rdb

import (
	"encoding/binary"
	"math"
	"strconv"
)

// Listpacks (src/listpack.c), the compact form of Redis 7.0's small
// hashes, sorted sets and list nodes: a 6-byte header (total bytes, element
// count, both little endian; a count of 65535 means "count them"), the
// entries, then 0xFF. An entry is an encoding byte with its integer or
// string, then its own length again ("backlen") for walking backwards.

const (
	lpHeader   = 6
	lpEnd      = 0xFF
	lpNumelMax = math.MaxUint16
)

// listpack builds one listpack; count and size go into the header at the
// end.
type listpack struct {
	b []byte
	n int
}

func newListpack() listpack {
	return listpack{b: make([]byte, lpHeader, 64)}
}

// add appends s as lpAppend does: as an integer when it is the canonical
// form of one (lpStringToInt64), else as a string.
func (l *listpack) add(s []byte) {
	if len(s) > 0 && len(s) < 21 {
		if v, ok := ParseInt(s); ok {
			l.addInt(v)
			return
		}
	}
	start := len(l.b)
	switch n := len(s); {
	case n < 64:
		l.b = append(l.b, byte(n)|0x80)
	case n < 4096:
		l.b = append(l.b, byte(n>>8)|0xE0, byte(n))
	default:
		l.b = binary.LittleEndian.AppendUint32(append(l.b, 0xF0), uint32(n))
	}
	l.b = append(l.b, s...)
	l.backlen(len(l.b) - start)
}

// addInt appends v in the smallest integer encoding (lpEncodeIntegerGetType).
func (l *listpack) addInt(v int64) {
	start := len(l.b)
	switch {
	case v >= 0 && v <= 127:
		l.b = append(l.b, byte(v))
	case v >= -4096 && v <= 4095:
		u := uint64(v) & (1<<13 - 1)
		l.b = append(l.b, byte(u>>8)|0xC0, byte(u))
	case v >= math.MinInt16 && v <= math.MaxInt16:
		l.b = binary.LittleEndian.AppendUint16(append(l.b, 0xF1), uint16(v))
	case v >= -1<<23 && v <= 1<<23-1:
		u := uint32(v)
		l.b = append(l.b, 0xF2, byte(u), byte(u>>8), byte(u>>16))
	case v >= math.MinInt32 && v <= math.MaxInt32:
		l.b = binary.LittleEndian.AppendUint32(append(l.b, 0xF3), uint32(v))
	default:
		l.b = binary.LittleEndian.AppendUint64(append(l.b, 0xF4), uint64(v))
	}
	l.backlen(len(l.b) - start)
}

// backlen appends an entry's length, most significant 7 bits first, each
// byte but the first flagged with 128 (lpEncodeBacklen).
func (l *listpack) backlen(n int) {
	l.n++
	switch {
	case n <= 127:
		l.b = append(l.b, byte(n))
	case n < 16383:
		l.b = append(l.b, byte(n>>7), byte(n&127)|128)
	case n < 2097151:
		l.b = append(l.b, byte(n>>14), byte(n>>7&127)|128, byte(n&127)|128)
	case n < 268435455:
		l.b = append(l.b, byte(n>>21), byte(n>>14&127)|128, byte(n>>7&127)|128, byte(n&127)|128)
	default:
		l.b = append(l.b, byte(n>>28), byte(n>>21&127)|128, byte(n>>14&127)|128, byte(n>>7&127)|128, byte(n&127)|128)
	}
}

// size is the listpack's size once finished.
func (l *listpack) size() int { return len(l.b) + 1 }

// finish ends the listpack and fills in its header.
func (l *listpack) finish() []byte {
	l.b = append(l.b, lpEnd)
	binary.LittleEndian.PutUint32(l.b, uint32(len(l.b)))
	binary.LittleEndian.PutUint16(l.b[4:], uint16(min(l.n, lpNumelMax)))
	return l.b
}

// backlenSize is how many bytes backlen takes for an entry of n bytes.
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

// lpElement is one decoded entry: a string, or an integer (isInt).
type lpElement struct {
	s     []byte
	v     int64
	isInt bool
}

// bytes returns the element as Redis hands it out: an integer as its
// decimal text.
func (e lpElement) bytes() []byte {
	if e.isInt {
		return strconv.AppendInt(nil, e.v, 10)
	}
	return e.s
}

// readListpack checks lp whole (header, every entry's encoding and backlen,
// the end byte, the count) and calls fn for each element. It stops at the
// first fault, or when fn returns false.
func readListpack(lp []byte, fn func(lpElement) bool) bool {
	if len(lp) < lpHeader+1 || int(binary.LittleEndian.Uint32(lp)) != len(lp) || lp[len(lp)-1] != lpEnd {
		return false
	}
	numel := int(binary.LittleEndian.Uint16(lp[4:]))
	p, n := lpHeader, 0
	end := len(lp) - 1
	for p < end {
		b := lp[p]
		var e lpElement
		var hdr, dlen int
		switch {
		case b&0x80 == 0:
			e, hdr = lpElement{v: int64(b), isInt: true}, 1
		case b&0xC0 == 0x80:
			hdr, dlen = 1, int(b&0x3f)
		case b&0xE0 == 0xC0:
			if p+2 > end {
				return false
			}
			u := int64(b&0x1f)<<8 | int64(lp[p+1])
			if u >= 1<<12 {
				u -= 1 << 13
			}
			e, hdr = lpElement{v: u, isInt: true}, 2
		case b&0xF0 == 0xE0:
			if p+2 > end {
				return false
			}
			hdr, dlen = 2, int(b&0x0f)<<8|int(lp[p+1])
		case b == 0xF0:
			if p+5 > end {
				return false
			}
			l := binary.LittleEndian.Uint32(lp[p+1:])
			if uint64(l) > uint64(end-p) {
				return false
			}
			hdr, dlen = 5, int(l)
		case b >= 0xF1 && b <= 0xF4:
			w := [...]int{2, 3, 4, 8}[b-0xF1]
			if p+1+w > end {
				return false
			}
			var u uint64
			for i := w - 1; i >= 0; i-- {
				u = u<<8 | uint64(lp[p+1+i])
			}
			shift := uint(64 - 8*w)
			e, hdr = lpElement{v: int64(u<<shift) >> shift, isInt: true}, 1+w
		default:
			return false
		}
		if !e.isInt {
			if p+hdr+dlen > end {
				return false
			}
			e.s = lp[p+hdr : p+hdr+dlen]
		}
		entry := hdr + dlen
		bl := backlenSize(entry)
		if p+entry+bl > end {
			return false
		}
		// The backlen must say what the entry's size is.
		var got int
		for i := 0; i < bl; i++ {
			got = got<<7 | int(lp[p+entry+i]&127)
		}
		if got != entry {
			return false
		}
		p += entry + bl
		n++
		if !fn(e) {
			return true
		}
	}
	return p == end && (numel == lpNumelMax || numel == n)
}
