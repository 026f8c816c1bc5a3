package rdb

import (
	"encoding/binary"
	"math"
)

// Intsets (src/intset.c), the form of a small set of integers: the width
// of every element (2, 4 or 8 bytes), the count (32 bits), then the
// elements in ascending order, all little endian.

// appendIntset appends an intset of vs, which must be ascending and
// distinct.
func appendIntset(dst []byte, vs []int64) []byte {
	w := 2
	for _, v := range vs {
		if v < math.MinInt32 || v > math.MaxInt32 {
			w = 8
			break
		}
		if v < math.MinInt16 || v > math.MaxInt16 {
			w = 4
		}
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(w))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(vs)))
	for _, v := range vs {
		switch w {
		case 2:
			dst = binary.LittleEndian.AppendUint16(dst, uint16(v))
		case 4:
			dst = binary.LittleEndian.AppendUint32(dst, uint32(v))
		default:
			dst = binary.LittleEndian.AppendUint64(dst, uint64(v))
		}
	}
	return dst
}

// readIntset checks is (width, count against size, ascending order
// without repeats) and calls fn for each element.
func readIntset(is []byte, fn func(int64)) bool {
	if len(is) < 8 {
		return false
	}
	w := int(binary.LittleEndian.Uint32(is))
	if w != 2 && w != 4 && w != 8 {
		return false
	}
	n := uint64(binary.LittleEndian.Uint32(is[4:]))
	if n*uint64(w)+8 != uint64(len(is)) || n == 0 {
		return false
	}
	var prev int64
	for i := 0; i < int(n); i++ {
		p := is[8+i*w:]
		var v int64
		switch w {
		case 2:
			v = int64(int16(binary.LittleEndian.Uint16(p)))
		case 4:
			v = int64(int32(binary.LittleEndian.Uint32(p)))
		default:
			v = int64(binary.LittleEndian.Uint64(p))
		}
		if i > 0 && v <= prev {
			return false
		}
		prev = v
		fn(v)
	}
	return true
}
