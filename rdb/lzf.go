package rdb

import (
	"errors"
	"sync"
)

// LZF as Redis ships it (src/lzf_c.c, lzf_d.c, lzfP.h with Redis's
// settings: HLOG 16, VERY_FAST, the table of offsets). Compress follows the
// C code step for step, so that DUMP's bytes are Redis's: the output of LZF
// depends on its hash table, and a compressor that found other matches
// would give other, equally valid, payloads.
//
// One difference cannot be copied: Redis does not clear its hash table
// between calls (INIT_HTAB 0), so a slot may still hold an offset from an
// earlier string, and if that offset happens to land, in the current
// string, on three bytes equal to the current ones, C takes a match that a
// cleared table would not offer. Compress starts from a cleared table; its
// output is always valid LZF, and equal to Redis's except in that case.

const (
	lzfHLog   = 16
	lzfHSize  = 1 << lzfHLog
	lzfMaxLit = 1 << 5
	lzfMaxOff = 1 << 13
	lzfMaxRef = 1<<8 + 1<<3
)

var errLZF = errors.New("invalid LZF data")

// lzfTable is LZF's hash table of offsets, as if cleared for every call:
// an entry written in another call (another generation) reads as empty.
// Clearing 64 k entries for each string would cost more than compressing
// a short one; a generation number costs nothing.
type lzfTable struct {
	gen  uint32
	slot [lzfHSize]uint64 // generation << 32 | offset
}

var lzfTables = sync.Pool{New: func() any { return new(lzfTable) }}

func (t *lzfTable) next() {
	t.gen++
	if t.gen == 0 { // wrapped: old entries could pass for new ones
		clear(t.slot[:])
		t.gen = 1
	}
}

func (t *lzfTable) get(i uint32) int {
	if e := t.slot[i]; uint32(e>>32) == t.gen {
		return int(uint32(e))
	}
	return 0
}

func (t *lzfTable) set(i uint32, off int) { t.slot[i] = uint64(t.gen)<<32 | uint64(uint32(off)) }

// lzfIdx is IDX(h) for VERY_FAST, in C's unsigned int arithmetic.
func lzfIdx(h uint32) uint32 { return (h>>(3*8-lzfHLog) - h*5) & (lzfHSize - 1) }

// LZFCompress compresses in into at most outLen bytes and returns them, or
// nil when they do not fit (lzf_compress returning 0).
func LZFCompress(in []byte, outLen int) []byte {
	inLen := len(in)
	if inLen == 0 || outLen <= 0 {
		return nil
	}
	// The C code checks its room before each step; the final literal run
	// may write up to 3 bytes past a check, so the buffer has that slack
	// and the checks below are the C ones, made on indices.
	out := make([]byte, outLen+4)
	h := lzfTables.Get().(*lzfTable)
	defer lzfTables.Put(h)
	h.next()
	ip, op, lit := 0, 0, 0
	op++ // start run
	hval := uint32(in[0])<<8 | uint32(in[1%inLen])
	if inLen < 2 {
		hval = 0
	}
	for ip < inLen-2 {
		hval = hval<<8 | uint32(in[ip+2])
		slot := lzfIdx(hval)
		ref := h.get(slot) // 0 means none: ref > 0 below fails too
		h.set(slot, ip)
		off := ip - ref - 1
		if ref > 0 && ref < ip && off < lzfMaxOff &&
			in[ref+2] == in[ip+2] && in[ref] == in[ip] && in[ref+1] == in[ip+1] {
			length := 2
			maxlen := inLen - ip - length
			if maxlen > lzfMaxRef {
				maxlen = lzfMaxRef
			}
			noLit := 0
			if lit == 0 {
				noLit = 1
			}
			if op+3+1 >= outLen && op-noLit+3+1 >= outLen {
				return nil
			}
			out[op-lit-1] = byte(lit - 1) // stop run
			op -= noLit                   // undo run if length is zero
			// C unrolls sixteen steps without the bound when maxlen > 16,
			// which near the end of the input can run one or two bytes
			// past maxlen: the same steps give the same matches.
			mismatch := false
			if maxlen > 16 {
				for i := 0; i < 16; i++ {
					length++
					if in[ref+length] != in[ip+length] {
						mismatch = true
						break
					}
				}
			}
			if !mismatch {
				for {
					length++
					if length >= maxlen || in[ref+length] != in[ip+length] {
						break
					}
				}
			}
			length -= 2 // octets - 1
			ip++
			if length < 7 {
				out[op] = byte(off>>8 + length<<5)
				op++
			} else {
				out[op] = byte(off>>8 + 7<<5)
				out[op+1] = byte(length - 7)
				op += 2
			}
			out[op] = byte(off)
			op++
			lit = 0
			op++ // start run
			ip += length + 1
			if ip >= inLen-2 {
				break
			}
			ip -= 2
			hval = uint32(in[ip])<<8 | uint32(in[ip+1])
			hval = hval<<8 | uint32(in[ip+2])
			h.set(lzfIdx(hval), ip)
			ip++
			hval = hval<<8 | uint32(in[ip+2])
			h.set(lzfIdx(hval), ip)
			ip++
		} else {
			if op >= outLen {
				return nil
			}
			lit++
			out[op] = in[ip]
			op++
			ip++
			if lit == lzfMaxLit {
				out[op-lit-1] = byte(lit - 1)
				lit = 0
				op++
			}
		}
	}
	if op+3 > outLen {
		return nil
	}
	for ip < inLen {
		lit++
		out[op] = in[ip]
		op++
		ip++
		if lit == lzfMaxLit {
			out[op-lit-1] = byte(lit - 1)
			lit = 0
			op++
		}
	}
	out[op-lit-1] = byte(lit - 1) // end run
	if lit == 0 {
		op--
	}
	return out[:op]
}

// LZFDecompress expands in, which must give exactly outLen bytes.
func LZFDecompress(in []byte, outLen int) ([]byte, error) {
	out := make([]byte, 0, outLen)
	ip := 0
	for ip < len(in) {
		ctrl := int(in[ip])
		ip++
		if ctrl < 1<<5 {
			ctrl++
			if len(out)+ctrl > outLen || ip+ctrl > len(in) {
				return nil, errLZF
			}
			out = append(out, in[ip:ip+ctrl]...)
			ip += ctrl
			continue
		}
		length := ctrl >> 5
		ref := len(out) - (ctrl&0x1f)<<8 - 1
		if ip >= len(in) {
			return nil, errLZF
		}
		if length == 7 {
			length += int(in[ip])
			ip++
			if ip >= len(in) {
				return nil, errLZF
			}
		}
		ref -= int(in[ip])
		ip++
		if len(out)+length+2 > outLen || ref < 0 {
			return nil, errLZF
		}
		for i := 0; i < length+2; i++ { // byte by byte: the copy may overlap itself
			out = append(out, out[ref+i])
		}
	}
	if len(out) != outLen {
		return nil, errLZF
	}
	return out, nil
}
