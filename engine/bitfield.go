package engine

import "math"

// BITFIELD's integers: a field of 1 to 64 bits (signed) or 1 to 63 bits
// (unsigned) at any bit offset of a string, most significant bit first,
// as SETBIT numbers bits. Overflow of SET and INCRBY wraps, saturates or
// fails, with Redis's arithmetic (bitops.c), which this follows to the
// bit: what a wrapped or saturated field holds is part of the reply.

// BitfieldOp is one GET, SET or INCRBY of a BITFIELD command.
type BitfieldOp struct {
	Op       BitfieldOpKind
	Signed   bool
	Bits     uint8
	Overflow BitfieldOverflow
	Offset   uint64 // in bits
	Value    int64  // SET's value, INCRBY's increment
}

// BitfieldOpKind says what a BitfieldOp does.
type BitfieldOpKind uint8

const (
	BitfieldGet BitfieldOpKind = iota
	BitfieldSet
	BitfieldIncrBy
)

// BitfieldOverflow is an OVERFLOW mode.
type BitfieldOverflow uint8

const (
	OverflowWrap BitfieldOverflow = iota
	OverflowSat
	OverflowFail
)

// BitfieldResult is one operation's reply: a value, or Null for an
// operation that failed on overflow (OVERFLOW FAIL) and wrote nothing.
type BitfieldResult struct {
	Value int64
	Null  bool
}

func getUnsignedBitfield(p []byte, offset uint64, bits uint8) uint64 {
	var v uint64
	for j := uint8(0); j < bits; j++ {
		bit := 7 - offset&7
		v = v<<1 | uint64(p[offset>>3]>>bit&1)
		offset++
	}
	return v
}

func getSignedBitfield(p []byte, offset uint64, bits uint8) int64 {
	v := int64(getUnsignedBitfield(p, offset, bits))
	if bits < 64 && v&(1<<(bits-1)) != 0 {
		v |= -1 << bits
	}
	return v
}

func setUnsignedBitfield(p []byte, offset uint64, bits uint8, value uint64) {
	for j := uint8(0); j < bits; j++ {
		bitval := byte(value>>(bits-1-j)) & 1
		bit := 7 - offset&7
		p[offset>>3] = p[offset>>3]&^(1<<bit) | bitval<<bit
		offset++
	}
}

// checkUnsignedOverflow is Redis's checkUnsignedBitfieldOverflow: it
// reports overflow (1 up, -1 down, 0 none) of value+incr in bits, and the
// value to store instead under WRAP and SAT.
func checkUnsignedOverflow(value uint64, incr int64, bits uint8, ow BitfieldOverflow) (int, uint64) {
	maxv := uint64(1)<<bits - 1
	maxIncr := int64(maxv - value)
	minIncr := -int64(value)
	wrap := func() uint64 { return (value + uint64(incr)) &^ (math.MaxUint64 << bits) }
	if value > maxv || (incr > 0 && incr > maxIncr) {
		switch ow {
		case OverflowWrap:
			return 1, wrap()
		case OverflowSat:
			return 1, maxv
		}
		return 1, 0
	}
	if incr < 0 && incr < minIncr {
		switch ow {
		case OverflowWrap:
			return 1, wrap()
		case OverflowSat:
			return -1, 0
		}
		return -1, 0
	}
	return 0, 0
}

// checkSignedOverflow is Redis's checkSignedBitfieldOverflow.
func checkSignedOverflow(value, incr int64, bits uint8, ow BitfieldOverflow) (int, int64) {
	maxv := int64(math.MaxInt64)
	if bits < 64 {
		maxv = 1<<(bits-1) - 1
	}
	minv := -maxv - 1
	maxIncr := int64(uint64(maxv) - uint64(value))
	minIncr := minv - value
	wrap := func() int64 {
		c := uint64(value) + uint64(incr)
		if bits < 64 {
			mask := uint64(math.MaxUint64) << bits
			if c&(1<<(bits-1)) != 0 {
				c |= mask
			} else {
				c &^= mask
			}
		}
		return int64(c)
	}
	if value > maxv || (bits != 64 && incr > maxIncr) || (value >= 0 && incr > 0 && incr > maxIncr) {
		switch ow {
		case OverflowWrap:
			return 1, wrap()
		case OverflowSat:
			return 1, maxv
		}
		return 1, 0
	}
	if value < minv || (bits != 64 && incr < minIncr) || (value < 0 && incr < 0 && incr < minIncr) {
		switch ow {
		case OverflowWrap:
			return 1, wrap()
		case OverflowSat:
			return -1, minv
		}
		return -1, 0
	}
	return 0, 0
}

// bitfieldGet reads a field of v, which counts as padded with zeros.
func bitfieldGet(v []byte, op *BitfieldOp) int64 {
	// Copy the (up to) 9 bytes the field spans, zero padded.
	var buf [9]byte
	byteOff := op.Offset >> 3
	if byteOff < uint64(len(v)) {
		copy(buf[:], v[byteOff:])
	}
	off := op.Offset - byteOff*8
	if op.Signed {
		return getSignedBitfield(buf[:], off, op.Bits)
	}
	return int64(getUnsignedBitfield(buf[:], off, op.Bits))
}

// bitfieldWrite runs a SET or INCRBY on v (long enough); it reports
// whether the field changed.
func bitfieldWrite(v []byte, op *BitfieldOp) (BitfieldResult, bool) {
	if op.Signed {
		old := getSignedBitfield(v, op.Offset, op.Bits)
		var nv, ret int64
		var over int
		var wrapped int64
		if op.Op == BitfieldIncrBy {
			over, wrapped = checkSignedOverflow(old, op.Value, op.Bits, op.Overflow)
			nv = old + op.Value
			if over != 0 {
				nv = wrapped
			}
			ret = nv
		} else {
			nv = op.Value
			over, wrapped = checkSignedOverflow(nv, 0, op.Bits, op.Overflow)
			if over != 0 {
				nv = wrapped
			}
			ret = old
		}
		if over != 0 && op.Overflow == OverflowFail {
			return BitfieldResult{Null: true}, false
		}
		setUnsignedBitfield(v, op.Offset, op.Bits, uint64(nv))
		return BitfieldResult{Value: ret}, old != nv
	}
	old := getUnsignedBitfield(v, op.Offset, op.Bits)
	var nv, ret uint64
	var over int
	var wrapped uint64
	if op.Op == BitfieldIncrBy {
		nv = old + uint64(op.Value)
		over, wrapped = checkUnsignedOverflow(old, op.Value, op.Bits, op.Overflow)
		if over != 0 {
			nv = wrapped
		}
		ret = nv
	} else {
		nv = uint64(op.Value)
		over, wrapped = checkUnsignedOverflow(nv, 0, op.Bits, op.Overflow)
		if over != 0 {
			nv = wrapped
		}
		ret = old
	}
	if over != 0 && op.Overflow == OverflowFail {
		return BitfieldResult{Null: true}, false
	}
	setUnsignedBitfield(v, op.Offset, op.Bits, nv)
	return BitfieldResult{Value: int64(ret)}, old != nv
}

// Bitfield runs BITFIELD's operations on the string at key and appends
// their results to res. With no SET or INCRBY (maxBit < 0) it only reads;
// otherwise it creates the key or grows the string with zeros up to bit
// maxBit first, as Redis does even when every write then fails on
// overflow.
func (s *Shard) Bitfield(db int, key []byte, now int64, ops []BitfieldOp, maxBit int64, res []BitfieldResult) ([]BitfieldResult, error) {
	if maxBit < 0 {
		var v []byte
		if e, ok := s.Lookup(db, key, now); ok {
			var buf [24]byte
			var err error
			if v, err = e.StringOf(buf[:]); err != nil {
				return res, err
			}
		}
		for i := range ops {
			res = append(res, BitfieldResult{Value: bitfieldGet(v, &ops[i])})
		}
		return res, nil
	}
	if e, ok := s.Find(db, key, now); ok && e.Kind() != KindString { // a write's lookup
		return res, ErrWrongType
	}
	e, v, err := s.MutableString(db, key, now, int(maxBit>>3)+1)
	if err != nil {
		return res, err
	}
	changed := false
	for i := range ops {
		op := &ops[i]
		if op.Op == BitfieldGet {
			res = append(res, BitfieldResult{Value: bitfieldGet(v, op)})
			continue
		}
		r, ch := bitfieldWrite(v, op)
		changed = changed || ch
		res = append(res, r)
	}
	if changed {
		s.Touch(e)
	}
	return res, nil
}
