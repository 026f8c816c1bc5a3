package engine

import (
	"encoding/binary"
	"math/bits"
)

// Bitmaps are strings read as bit arrays: bit 0 is the most significant bit
// of the first byte, as in Redis. The counting and searching functions work
// a 64-bit word at a time, so a ten-year daily bitmap (457 bytes) takes a few
// dozen instructions rather than one loop turn per byte.

// GetBit returns bit offset of the string at key: 0 past its end or when
// the key does not exist.
func (s *Shard) GetBit(db int, key []byte, now int64, offset uint64) (int, error) {
	e, ok := s.Lookup(db, key, now)
	if !ok {
		return 0, nil
	}
	var buf [24]byte
	v, err := e.StringOf(buf[:])
	if err != nil {
		return 0, err
	}
	return bitAt(v, offset), nil
}

func bitAt(v []byte, offset uint64) int {
	i := offset >> 3
	if i >= uint64(len(v)) {
		return 0
	}
	return int(v[i]>>(7-offset&7)) & 1
}

// SetBit sets bit offset of the string at key to bit (0 or 1), creating the
// key or growing the string with zero bytes as needed, and returns the bit's
// old value. When nothing changes (the string is long enough and the bit
// already has that value) the key is left untouched, so WATCH does not see a
// change, as in Redis. The caller bounds offset.
func (s *Shard) SetBit(db int, key []byte, now int64, offset uint64, bit int) (int, error) {
	e, found := s.Find(db, key, now)
	if found {
		var buf [24]byte
		v, err := e.StringOf(buf[:])
		if err != nil {
			return 0, err
		}
		if offset>>3 < uint64(len(v)) && bitAt(v, offset) == bit {
			return bit, nil
		}
	}
	e, v, err := s.MutableString(db, key, now, int(offset>>3)+1)
	if err != nil {
		return 0, err
	}
	old := bitAt(v, offset)
	mask := byte(0x80) >> (offset & 7)
	if bit == 1 {
		v[offset>>3] |= mask
	} else {
		v[offset>>3] &^= mask
	}
	s.Touch(e)
	return old, nil
}

// popCount counts the set bits of b. Four independent sums let the
// POPCNTs of a 32-byte block run in parallel, and the fixed-size subslice
// lets the compiler drop the bounds checks of its four loads.
func popCount(b []byte) int64 {
	var n0, n1, n2, n3 int
	i := 0
	for ; i+32 <= len(b); i += 32 {
		w := b[i : i+32 : i+32]
		n0 += bits.OnesCount64(binary.LittleEndian.Uint64(w[0:8]))
		n1 += bits.OnesCount64(binary.LittleEndian.Uint64(w[8:16]))
		n2 += bits.OnesCount64(binary.LittleEndian.Uint64(w[16:24]))
		n3 += bits.OnesCount64(binary.LittleEndian.Uint64(w[24:32]))
	}
	for ; i+8 <= len(b); i += 8 {
		n0 += bits.OnesCount64(binary.LittleEndian.Uint64(b[i : i+8]))
	}
	for ; i < len(b); i++ {
		n1 += bits.OnesCount8(b[i])
	}
	return int64(n0 + n1 + n2 + n3)
}

// CountBits returns the number of set bits at positions first..last
// (inclusive, 0 <= first <= last < 8*len(b)).
func CountBits(b []byte, first, last int64) int64 {
	lo, hi := int(first>>3), int(last>>3)
	n := popCount(b[lo : hi+1])
	// Take off the bits of the edge bytes that lie outside the range: the
	// first&7 high bits of the first byte, the 7-last&7 low bits of the last.
	n -= int64(bits.OnesCount8(b[lo] >> (8 - first&7)))
	n -= int64(bits.OnesCount8(b[hi] & (0xff >> (last&7 + 1))))
	return n
}

// FindBit returns the position of the first bit equal to bit (0 or 1) at
// positions first..last (inclusive, 0 <= first <= last < 8*len(b)), or -1.
func FindBit(b []byte, bit int, first, last int64) int64 {
	// XOR with flip turns the wanted bits into ones, so both searches look
	// for the first one bit.
	var flip byte
	var flip64 uint64
	if bit == 0 {
		flip, flip64 = 0xff, ^uint64(0)
	}
	lo, hi := int(first>>3), int(last>>3)
	head := byte(0xff) >> (first & 7)
	tail := byte(0xff) << (7 - last&7)
	if lo == hi {
		if m := (b[lo] ^ flip) & head & tail; m != 0 {
			return int64(lo)*8 + int64(bits.LeadingZeros8(m))
		}
		return -1
	}
	if m := (b[lo] ^ flip) & head; m != 0 {
		return int64(lo)*8 + int64(bits.LeadingZeros8(m))
	}
	i := lo + 1
	for ; i+8 <= hi; i += 8 {
		// Big endian puts byte i in the top bits, so leading zeros count
		// bit positions in Redis's order.
		if w := binary.BigEndian.Uint64(b[i:]) ^ flip64; w != 0 {
			return int64(i)*8 + int64(bits.LeadingZeros64(w))
		}
	}
	for ; i < hi; i++ {
		if m := b[i] ^ flip; m != 0 {
			return int64(i)*8 + int64(bits.LeadingZeros8(m))
		}
	}
	if m := (b[hi] ^ flip) & tail; m != 0 {
		return int64(hi)*8 + int64(bits.LeadingZeros8(m))
	}
	return -1
}

// BitOp is a BITOP operation.
type BitOp uint8

const (
	BitAnd BitOp = iota
	BitOr
	BitXor
	BitNot
)

// FoldBits combines one source string into dst, BITOP's result, which is as
// long as the longest source and starts zeroed; a source shorter than dst
// (or missing: empty) counts as padded with zero bytes. first says src is
// the first source. BitNot takes a single source of dst's length.
func FoldBits(op BitOp, dst, src []byte, first bool) {
	if first && op != BitNot {
		copy(dst, src)
		return
	}
	i := 0
	switch op {
	case BitAnd:
		clear(dst[len(src):])
		for ; i+8 <= len(src); i += 8 {
			binary.LittleEndian.PutUint64(dst[i:], binary.LittleEndian.Uint64(dst[i:])&binary.LittleEndian.Uint64(src[i:]))
		}
		for ; i < len(src); i++ {
			dst[i] &= src[i]
		}
	case BitOr:
		for ; i+8 <= len(src); i += 8 {
			binary.LittleEndian.PutUint64(dst[i:], binary.LittleEndian.Uint64(dst[i:])|binary.LittleEndian.Uint64(src[i:]))
		}
		for ; i < len(src); i++ {
			dst[i] |= src[i]
		}
	case BitXor:
		for ; i+8 <= len(src); i += 8 {
			binary.LittleEndian.PutUint64(dst[i:], binary.LittleEndian.Uint64(dst[i:])^binary.LittleEndian.Uint64(src[i:]))
		}
		for ; i < len(src); i++ {
			dst[i] ^= src[i]
		}
	case BitNot:
		for ; i+8 <= len(src); i += 8 {
			binary.LittleEndian.PutUint64(dst[i:], ^binary.LittleEndian.Uint64(src[i:]))
		}
		for ; i < len(src); i++ {
			dst[i] = ^src[i]
		}
	}
}
