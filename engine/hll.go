package engine

import (
	"encoding/binary"
	"errors"
	"math"
	"sync"
)

// HyperLogLogs are strings laid out byte for byte as Redis 7.0 lays them
// out (hyperloglog.c), so that one copied with GET and SET, or DUMP and
// RESTORE, between the two servers keeps working and counts the same:
//
//	"HYLL" | encoding (0 dense, 1 sparse) | 3 unused bytes | cardinality
//
// then the registers. The cardinality is a cache, little endian; its top
// bit set means stale. 16384 registers of 6 bits: dense, 12288 bytes of
// packed registers; sparse, run-length opcodes (ZERO 00xxxxxx: 1..64 zero
// registers; XZERO 01xxxxxx yyyyyyyy: 1..16384 zero registers; VAL
// 1vvvvvxx: 1..4 registers of value 1..32). A sparse HLL turns dense when a
// register needs a value over 32 or when it would grow past
// hll-sparse-max-bytes. The element hash is MurmurHash64A with Redis's
// seed, and the estimate Otmar Ertl's, which Redis 7.0 uses.

const (
	hllP           = 14
	hllQ           = 64 - hllP
	hllRegisters   = 1 << hllP
	hllPMask       = hllRegisters - 1
	hllBits        = 6
	hllRegisterMax = 1<<hllBits - 1
	hllHdrSize     = 16
	// HLLDenseSize is the length of a dense HyperLogLog string.
	HLLDenseSize = hllHdrSize + (hllRegisters*hllBits+7)/8
	// HLLRegisters is the number of registers of a HyperLogLog.
	HLLRegisters = hllRegisters

	hllDense  = 0
	hllSparse = 1

	hllSparseXZeroBit   = 0x40
	hllSparseValBit     = 0x80
	hllSparseValMaxVal  = 32
	hllSparseValMaxLen  = 4
	hllSparseZeroMaxLen = 64
	hllSparseXZeroMax   = 16384

	hllAlphaInf = 0.721347520444481703680 // 0.5/ln(2)
	hllSeed     = 0xadc83b19
)

// Errors of the HyperLogLog operations: a string that is no HyperLogLog,
// and one whose sparse registers do not add up.
var (
	ErrNotHLL     = errors.New("not a valid HyperLogLog string value")
	ErrHLLCorrupt = errors.New("corrupted HLL object")
)

// murmurHash64A is MurmurHash2's 64-bit version as Redis has it: the
// 8-byte blocks read little endian whatever the machine.
func murmurHash64A(key []byte, seed uint32) uint64 {
	const m = 0xc6a4a7935bd1e995
	const r = 47
	h := uint64(seed) ^ (uint64(len(key)) * m)
	n := len(key) &^ 7
	for i := 0; i < n; i += 8 {
		k := binary.LittleEndian.Uint64(key[i:])
		k *= m
		k ^= k >> r
		k *= m
		h ^= k
		h *= m
	}
	tail := key[n:]
	switch len(tail) {
	case 7:
		h ^= uint64(tail[6]) << 48
		fallthrough
	case 6:
		h ^= uint64(tail[5]) << 40
		fallthrough
	case 5:
		h ^= uint64(tail[4]) << 32
		fallthrough
	case 4:
		h ^= uint64(tail[3]) << 24
		fallthrough
	case 3:
		h ^= uint64(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint64(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint64(tail[0])
		h *= m
	}
	h ^= h >> r
	h *= m
	h ^= h >> r
	return h
}

// hllPatLen returns the register an element falls in and the length of
// the 000..1 run of its hash after the register bits, the 1 included.
func hllPatLen(ele []byte) (index int, count uint8) {
	hash := murmurHash64A(ele, hllSeed)
	index = int(hash & hllPMask)
	hash >>= hllP
	hash |= 1 << hllQ // the run ends by bit Q at the latest
	count = 1
	for bit := uint64(1); hash&bit == 0; bit <<= 1 {
		count++
	}
	return index, count
}

// Dense registers: register i is 6 bits starting at bit 6*i, little end
// first. The last register's second byte would be the one past the end
// (Redis reads the string's terminating NUL there); it holds no bits.

func hllDenseGet(r []byte, i int) uint8 {
	b, fb := i*hllBits/8, uint(i*hllBits&7)
	v := uint(r[b]) >> fb
	if b+1 < len(r) {
		v |= uint(r[b+1]) << (8 - fb)
	}
	return uint8(v & hllRegisterMax)
}

func hllDenseSetReg(r []byte, i int, val uint8) {
	b, fb := i*hllBits/8, uint(i*hllBits&7)
	v := uint(val)
	r[b] &^= byte(hllRegisterMax << fb)
	r[b] |= byte(v << fb)
	if b+1 < len(r) {
		r[b+1] &^= byte(hllRegisterMax >> (8 - fb))
		r[b+1] |= byte(v >> (8 - fb))
	}
}

// hllDenseSet raises register i to count; it reports whether it changed.
func hllDenseSet(r []byte, i int, count uint8) bool {
	if count > hllDenseGet(r, i) {
		hllDenseSetReg(r, i, count)
		return true
	}
	return false
}

// Sparse opcodes. An XZERO's second byte may lie past the end of a
// corrupted string: Redis reads the string's NUL terminator there, so it
// counts as 0.

func sparseIsZero(b byte) bool  { return b&0xc0 == 0 }
func sparseIsXZero(b byte) bool { return b&0xc0 == hllSparseXZeroBit }
func sparseIsVal(b byte) bool   { return b&hllSparseValBit != 0 }
func sparseZeroLen(b byte) int  { return int(b&0x3f) + 1 }
func sparseValValue(b byte) int { return int(b>>2&0x1f) + 1 }
func sparseValLen(b byte) int   { return int(b&0x3) + 1 }

func sparseXZeroLen(s []byte, p int) int {
	var lo byte
	if p+1 < len(s) {
		lo = s[p+1]
	}
	return (int(s[p]&0x3f)<<8 | int(lo)) + 1
}

func sparseValByte(val, n int) byte { return byte((val-1)<<2|(n-1)) | hllSparseValBit }

func putSparseZero(dst []byte, n int) []byte {
	if n > hllSparseZeroMaxLen {
		l := n - 1
		return append(dst, byte(l>>8)|hllSparseXZeroBit, byte(l))
	}
	return append(dst, byte(n-1))
}

// NewHLL returns an empty HyperLogLog, sparse, as PFADD creates it.
func NewHLL() []byte {
	h := make([]byte, hllHdrSize, hllHdrSize+64)
	copy(h, "HYLL")
	h[4] = hllSparse
	for n := hllRegisters; n > 0; n -= hllSparseXZeroMax {
		l := min(n, hllSparseXZeroMax) - 1
		h = append(h, byte(l>>8)|hllSparseXZeroBit, byte(l))
	}
	return h
}

// IsHLL reports whether v is a HyperLogLog as Redis checks it: the magic,
// a known encoding, and a dense one's exact length.
func IsHLL(v []byte) bool {
	if len(v) < hllHdrSize || string(v[:4]) != "HYLL" || v[4] > hllSparse {
		return false
	}
	return v[4] != hllDense || len(v) == HLLDenseSize
}

func hllInvalidate(h []byte) { h[15] |= 0x80 }

// hllSparseToDense returns the dense form of a sparse HyperLogLog: the
// header (cached cardinality included) kept, the encoding changed. ok is
// false when the registers do not add up to 16384.
func hllSparseToDense(h []byte) (dense []byte, ok bool) {
	dense = make([]byte, HLLDenseSize)
	copy(dense, h[:hllHdrSize])
	dense[4] = hllDense
	regs := dense[hllHdrSize:]
	idx := 0
	for p := hllHdrSize; p < len(h); {
		switch b := h[p]; {
		case sparseIsZero(b):
			idx += sparseZeroLen(b)
			p++
		case sparseIsXZero(b):
			idx += sparseXZeroLen(h, p)
			p += 2
		default:
			n, v := sparseValLen(b), sparseValValue(b)
			if n+idx > hllRegisters {
				return nil, false
			}
			for ; n > 0; n-- {
				hllDenseSetReg(regs, idx, uint8(v))
				idx++
			}
			p++
		}
	}
	return dense, idx == hllRegisters
}

// hllSparseSet raises register index of the sparse HyperLogLog *o to
// count, as Redis's hllSparseSet does opcode for opcode (the bytes must
// come out the same). It returns 1 if the register changed, 0 if not, -1
// if the representation is corrupt. *o may turn dense.
func hllSparseSet(o *[]byte, index int, count uint8, sparseMax int) int {
	if count > hllSparseValMaxVal {
		return hllPromote(o, index, count)
	}
	s := *o
	if cap(s)-len(s) < 3 {
		ns := make([]byte, len(s), len(s)+len(s)/2+8)
		copy(ns, s)
		s = ns
		*o = s
	}
	end := len(s)
	p, first, prev, span := hllHdrSize, 0, -1, 0
	for p < end {
		oplen := 1
		switch b := s[p]; {
		case sparseIsZero(b):
			span = sparseZeroLen(b)
		case sparseIsVal(b):
			span = sparseValLen(b)
		default:
			span = sparseXZeroLen(s, p)
			oplen = 2
		}
		if index <= first+span-1 {
			break
		}
		prev = p
		p += oplen
		first += span
	}
	if span == 0 || p >= end {
		return -1
	}
	next := p + 1
	if sparseIsXZero(s[p]) {
		next = p + 2
	}
	if next >= end {
		next = -1
	}
	b := s[p]
	isZero, isXZero := sparseIsZero(b), sparseIsXZero(b)
	var runlen int
	switch {
	case isZero:
		runlen = sparseZeroLen(b)
	case isXZero:
		runlen = sparseXZeroLen(s, p)
	default:
		runlen = sparseValLen(b)
	}

	updated := false
	if !isZero && !isXZero {
		if sparseValValue(b) >= int(count) {
			return 0
		}
		if runlen == 1 {
			s[p] = sparseValByte(int(count), 1)
			updated = true
		}
	}
	if !updated && isZero && runlen == 1 {
		s[p] = sparseValByte(int(count), 1)
		updated = true
	}
	if !updated {
		// Split the opcode: at worst XZERO-VAL-XZERO, 5 bytes.
		var seqBuf [5]byte
		seq := seqBuf[:0]
		last := first + span - 1
		if isZero || isXZero {
			if index != first {
				seq = putSparseZero(seq, index-first)
			}
			seq = append(seq, sparseValByte(int(count), 1))
			if index != last {
				seq = putSparseZero(seq, last-index)
			}
		} else {
			cur := sparseValValue(b)
			if index != first {
				seq = append(seq, sparseValByte(cur, index-first))
			}
			seq = append(seq, sparseValByte(int(count), 1))
			if index != last {
				seq = append(seq, sparseValByte(cur, last-index))
			}
		}
		oldlen := 1
		if isXZero {
			oldlen = 2
		}
		delta := len(seq) - oldlen
		if delta > 0 && len(s)+delta > sparseMax {
			return hllPromote(o, index, count)
		}
		if delta > 0 {
			s = s[:end+delta]
		}
		if delta != 0 && next >= 0 {
			copy(s[next+delta:], s[next:end])
		}
		s = s[:end+delta]
		copy(s[p:], seq)
		end += delta
	}

	// Merge adjacent VAL opcodes of the same value, up to 5 opcodes from
	// the one before the change.
	p = hllHdrSize
	if prev >= 0 {
		p = prev
	}
	for scan := 5; p < end && scan > 0; scan-- {
		b := s[p]
		if sparseIsXZero(b) {
			p += 2
			continue
		}
		if sparseIsZero(b) {
			p++
			continue
		}
		if p+1 < end && sparseIsVal(s[p+1]) {
			v1, v2 := sparseValValue(b), sparseValValue(s[p+1])
			if v1 == v2 {
				if n := sparseValLen(b) + sparseValLen(s[p+1]); n <= hllSparseValMaxLen {
					s[p+1] = sparseValByte(v1, n)
					copy(s[p:], s[p+1:end])
					end--
					s = s[:end]
					continue
				}
			}
		}
		p++
	}
	hllInvalidate(s)
	*o = s
	return 1
}

func hllPromote(o *[]byte, index int, count uint8) int {
	dense, ok := hllSparseToDense(*o)
	if !ok {
		return -1
	}
	hllDenseSet(dense[hllHdrSize:], index, count)
	*o = dense
	return 1
}

// hllAdd adds an element to the HyperLogLog *o (valid header); it returns
// 1 if a register changed, 0 if not, -1 if *o is corrupt.
func hllAdd(o *[]byte, ele []byte, sparseMax int) int {
	index, count := hllPatLen(ele)
	if (*o)[4] == hllDense {
		if hllDenseSet((*o)[hllHdrSize:], index, count) {
			return 1
		}
		return 0
	}
	return hllSparseSet(o, index, count, sparseMax)
}

// hllHisto counts the registers of each value of a HyperLogLog; ok is
// false for sparse registers that do not add up.
func hllHisto(h []byte, histo *[64]int) bool {
	if h[4] == hllDense {
		r := h[hllHdrSize:]
		for j := 0; j+12 <= len(r); j += 12 {
			w := r[j : j+12 : j+12]
			histo[w[0]&63]++
			histo[(w[0]>>6|w[1]<<2)&63]++
			histo[(w[1]>>4|w[2]<<4)&63]++
			histo[(w[2]>>2)&63]++
			histo[w[3]&63]++
			histo[(w[3]>>6|w[4]<<2)&63]++
			histo[(w[4]>>4|w[5]<<4)&63]++
			histo[(w[5]>>2)&63]++
			histo[w[6]&63]++
			histo[(w[6]>>6|w[7]<<2)&63]++
			histo[(w[7]>>4|w[8]<<4)&63]++
			histo[(w[8]>>2)&63]++
			histo[w[9]&63]++
			histo[(w[9]>>6|w[10]<<2)&63]++
			histo[(w[10]>>4|w[11]<<4)&63]++
			histo[(w[11]>>2)&63]++
		}
		return true
	}
	idx := 0
	for p := hllHdrSize; p < len(h); {
		switch b := h[p]; {
		case sparseIsZero(b):
			n := sparseZeroLen(b)
			idx += n
			histo[0] += n
			p++
		case sparseIsXZero(b):
			n := sparseXZeroLen(h, p)
			idx += n
			histo[0] += n
			p += 2
		default:
			n := sparseValLen(b)
			idx += n
			histo[sparseValValue(b)] += n
			p++
		}
	}
	return idx == hllRegisters
}

func hllSigma(x float64) float64 {
	if x == 1 {
		return math.Inf(1)
	}
	y, z := 1.0, x
	for {
		x *= x
		zPrime := z
		z += float64(x * y)
		y += y
		if zPrime == z {
			return z
		}
	}
}

func hllTau(x float64) float64 {
	if x == 0 || x == 1 {
		return 0
	}
	y, z := 1.0, 1-x
	for {
		x = math.Sqrt(x)
		zPrime := z
		y *= 0.5
		d := 1 - x
		z -= float64(float64(d*d) * y)
		if zPrime == z {
			return z / 3
		}
	}
}

// hllEstimate is Redis 7.0's estimate from the registers' histogram.
func hllEstimate(histo *[64]int) int64 {
	const m = float64(hllRegisters)
	z := m * hllTau((m-float64(histo[hllQ+1]))/m)
	for j := hllQ; j >= 1; j-- {
		z += float64(histo[j])
		z *= 0.5
	}
	z += m * hllSigma(float64(histo[0])/m)
	return int64(math.Round(hllAlphaInf * m * m / z))
}

// HLLMerge raises each of regs (16384 registers, a byte each) to the
// HyperLogLog h's register, which must be a valid HyperLogLog (IsHLL).
func HLLMerge(regs []uint8, h []byte) error {
	if h[4] == hllDense {
		r := h[hllHdrSize:]
		for i := range regs[:hllRegisters] {
			if v := hllDenseGet(r, i); v > regs[i] {
				regs[i] = v
			}
		}
		return nil
	}
	i := 0
	for p := hllHdrSize; p < len(h); {
		switch b := h[p]; {
		case sparseIsZero(b):
			i += sparseZeroLen(b)
			p++
		case sparseIsXZero(b):
			i += sparseXZeroLen(h, p)
			p += 2
		default:
			n, v := sparseValLen(b), uint8(sparseValValue(b))
			if n+i > hllRegisters {
				return ErrHLLCorrupt
			}
			for ; n > 0; n-- {
				regs[i] = max(regs[i], v)
				i++
			}
			p++
		}
	}
	if i != hllRegisters {
		return ErrHLLCorrupt
	}
	return nil
}

// HLLCountRegisters estimates the cardinality of 16384 registers of a
// byte each (PFCOUNT of several keys).
func HLLCountRegisters(regs []uint8) int64 {
	var histo [64]int
	for _, v := range regs[:hllRegisters] {
		histo[v&63]++
	}
	return hllEstimate(&histo)
}

// hllBufs recycles the working copies of sparse HyperLogLogs.
var hllBufs = sync.Pool{New: func() any { b := make([]byte, 0, 3100); return &b }}

// PFAdd adds elements to the HyperLogLog at key, creating it (sparse) if
// missing, and reports whether it changed: a register rose, or the key was
// created. The key keeps its TTL. sparseMax is hll-sparse-max-bytes.
func (s *Shard) PFAdd(db int, key []byte, now int64, elems [][]byte, sparseMax int) (bool, error) {
	e, found := s.Find(db, key, now) // a write's lookup: no hit or miss, as Redis's
	if !found {
		h := NewHLL()
		for _, el := range elems {
			hllAdd(&h, el, sparseMax)
		}
		hllInvalidate(h)
		s.SetString(db, key, h, 0)
		return true, nil
	}
	v, err := e.StringOf(nil)
	if err != nil {
		return false, err
	}
	if !IsHLL(v) {
		return false, ErrNotHLL
	}
	if v[4] == hllDense {
		// Nothing moves: change the registers in place.
		e, r, _ := s.MutableString(db, key, now, len(v))
		updated := false
		for _, el := range elems {
			index, count := hllPatLen(el)
			if hllDenseSet(r[hllHdrSize:], index, count) {
				updated = true
			}
		}
		if updated {
			hllInvalidate(r)
			s.Touch(e)
		}
		return updated, nil
	}
	bp := hllBufs.Get().(*[]byte)
	defer hllBufs.Put(bp)
	h := append((*bp)[:0], v...)
	updated := false
	for _, el := range elems {
		switch hllAdd(&h, el, sparseMax) {
		case 1:
			updated = true
		case -1:
			return false, ErrHLLCorrupt
		}
	}
	if cap(h) <= 4*cap(*bp) {
		*bp = h[:0] // keep a grown buffer, not a dense one made aside
	}
	if !updated {
		return false, nil
	}
	hllInvalidate(h)
	s.storeHLL(db, key, now, e, len(v), h)
	return true, nil
}

// storeHLL writes h over the HyperLogLog at key (found as e, oldLen bytes
// long): in place when the length is the same, else as a new string with
// the key's TTL.
func (s *Shard) storeHLL(db int, key []byte, now int64, e Entry, oldLen int, h []byte) {
	if len(h) == oldLen {
		e, r, _ := s.MutableString(db, key, now, oldLen)
		copy(r, h)
		s.Touch(e)
		return
	}
	s.SetString(db, key, h, e.ExpireAt())
}

// PFCount returns the cardinality of the HyperLogLog at key (0 if
// missing): the cached one if valid, else it computes it and caches it in
// the string, a change like any other (WATCH sees it, replicas get it).
func (s *Shard) PFCount(db int, key []byte, now int64) (int64, error) {
	e, found := s.Lookup(db, key, now)
	if !found {
		return 0, nil
	}
	v, err := e.StringOf(nil)
	if err != nil {
		return 0, err
	}
	if !IsHLL(v) {
		return 0, ErrNotHLL
	}
	if v[15]&0x80 == 0 {
		return int64(binary.LittleEndian.Uint64(v[8:16])), nil
	}
	var histo [64]int
	if !hllHisto(v, &histo) {
		return 0, ErrHLLCorrupt
	}
	card := hllEstimate(&histo)
	e, r, _ := s.MutableString(db, key, now, len(v))
	binary.LittleEndian.PutUint64(r[8:16], uint64(card))
	s.Touch(e)
	return card, nil
}

// HLLSource returns the HyperLogLog at key for PFCOUNT of several keys and
// PFMERGE: nil if missing, ErrWrongType or ErrNotHLL if it is none. The
// bytes are the stored ones: read them under the shard's lock.
func (s *Shard) HLLSource(db int, key []byte, now int64) ([]byte, error) {
	e, found := s.Lookup(db, key, now)
	if !found {
		return nil, nil
	}
	v, err := e.StringOf(nil)
	if err != nil {
		return nil, err
	}
	if !IsHLL(v) {
		return nil, ErrNotHLL
	}
	return v, nil
}

// PFMergeStore raises the registers of the HyperLogLog at key (created
// sparse if missing; already checked to be one if present) to regs,
// turning it dense first if dense is set (one of PFMERGE's sources was),
// as Redis's PFMERGE does.
func (s *Shard) PFMergeStore(db int, key []byte, now int64, regs []uint8, dense bool, sparseMax int) error {
	e, found := s.Find(db, key, now) // a write's lookup
	var h []byte
	oldLen := -1
	if found {
		v, err := e.StringOf(nil)
		if err != nil {
			return err
		}
		if !IsHLL(v) {
			return ErrNotHLL
		}
		oldLen = len(v)
		h = append(make([]byte, 0, len(v)+8), v...)
	} else {
		h = NewHLL()
	}
	if dense && h[4] == hllSparse {
		d, ok := hllSparseToDense(h)
		if !ok {
			return ErrHLLCorrupt
		}
		h = d
	}
	for j, v := range regs[:hllRegisters] {
		if v == 0 {
			continue
		}
		if h[4] == hllDense {
			hllDenseSet(h[hllHdrSize:], j, v)
		} else {
			hllSparseSet(&h, j, v, sparseMax)
		}
	}
	hllInvalidate(h)
	if oldLen < 0 {
		s.SetString(db, key, h, 0)
		return nil
	}
	s.storeHLL(db, key, now, e, oldLen, h)
	return nil
}
