package commands

import (
	"bytes"

	"github.com/limitkv/limitkv/engine"
)

// lcsCommands: LCS, computed with no lock held.
func lcsCommands() []*command {
	return []*command{
		cmd("lcs", -3, "readonly selflock may_wait", cmdLCS),
	}
}

// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN], as Redis
// 7.0's lcsCommand: the same dynamic-programming table, walked back the
// same way, so that IDX gives Redis's ranges (its quirks included: a match
// that starts a new range right after another is not counted in the next
// range).
//
// The table is (len1+1)*(len2+1) 32-bit cells, refused as Redis refuses
// it when that is more than proto-max-bulk-len bytes. Its work and memory
// grow with the product of the lengths, so limitkv copies the two strings
// under their shards' locks and computes with no lock held, one big table
// at a time (Redis, single-threaded, never has two either); LEN alone
// needs two rows of it, not the whole.

const (
	msgLCSType    = "The specified keys must contain string values"
	msgLCSLenIdx  = "If you want both the length and indexes, please just use IDX."
	msgLCSTooLong = "String too long for LCS"
	msgLCSMemory  = "Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len"
	// lcsSmall is the table size under which LCS does not wait its turn.
	lcsSmall = 1 << 20
)

// lcsBig lets one big table be built at a time.
var lcsBig = make(chan struct{}, 1)

func cmdLCS(c *Ctx) {
	var a, b []byte
	wrongType := false
	eng := c.Srv.Eng
	here := true
	c.withShards(eng.MaskOf(c.Args[1], c.Args[2]), func() {
		if here = c.stillHere(); !here {
			return
		}
		for i, dst := range []*[]byte{&a, &b} {
			key := c.Args[1+i]
			sh := eng.ShardFor(key)
			e, ok := sh.Lookup(c.DB, key, c.Now)
			if !ok {
				continue
			}
			if e.Kind() != engine.KindString {
				wrongType = true
				continue
			}
			v, err := e.StringOf(nil)
			if err != nil {
				wrongType = true
				continue
			}
			*dst = bytes.Clone(v)
		}
	})
	if !here {
		return
	}
	if wrongType {
		c.W.Error(msgLCSType)
		return
	}
	var getLen, getIdx, withLen bool
	var minLen int64
	for j := 3; j < len(c.Args); j++ {
		switch {
		case is(c.Args[j], "IDX"):
			getIdx = true
		case is(c.Args[j], "LEN"):
			getLen = true
		case is(c.Args[j], "WITHMATCHLEN"):
			withLen = true
		case is(c.Args[j], "MINMATCHLEN") && j+1 < len(c.Args):
			n, ok := c.Int(j + 1)
			if !ok {
				return
			}
			minLen = max(n, 0)
			j++
		default:
			c.W.Error(msgSyntax)
			return
		}
	}
	if getLen && getIdx {
		c.W.Error(msgLCSLenIdx)
		return
	}
	if uint64(len(a)) >= 1<<32-2 || uint64(len(b)) >= 1<<32-2 {
		c.W.Error(msgLCSTooLong)
		return
	}
	cells := uint64(len(a)+1) * uint64(len(b)+1)
	if cells*4 > uint64(c.maxStringLen()) {
		c.W.Error(msgLCSMemory)
		return
	}
	if cells*4 > lcsSmall {
		lcsBig <- struct{}{}
		defer func() { <-lcsBig }()
	}
	if getLen {
		c.W.Int(int64(lcsLength(a, b)))
		return
	}
	lcsReply(c, a, b, getIdx, withLen, minLen)
}

// lcsLength is the table's last cell, computed a row at a time.
func lcsLength(a, b []byte) uint32 {
	prev, cur := make([]uint32, len(b)+1), make([]uint32, len(b)+1)
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			switch {
			case a[i-1] == b[j-1]:
				cur[j] = prev[j-1] + 1
			case prev[j] > cur[j-1]:
				cur[j] = prev[j]
			default:
				cur[j] = cur[j-1]
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

type lcsMatch struct{ aStart, aEnd, bStart, bEnd, n uint32 }

func lcsReply(c *Ctx, a, b []byte, getIdx, withLen bool, minLen int64) {
	alen, blen := uint32(len(a)), uint32(len(b))
	w := blen + 1
	lcs := make([]uint32, uint64(alen+1)*uint64(w))
	at := func(i, j uint32) uint32 { return lcs[uint64(i)*uint64(w)+uint64(j)] }
	for i := uint32(1); i <= alen; i++ {
		row, up := lcs[uint64(i)*uint64(w):], lcs[uint64(i-1)*uint64(w):]
		for j := uint32(1); j <= blen; j++ {
			switch {
			case a[i-1] == b[j-1]:
				row[j] = up[j-1] + 1
			case up[j] > row[j-1]:
				row[j] = up[j]
			default:
				row[j] = row[j-1]
			}
		}
	}
	idx := at(alen, blen)
	result := make([]byte, idx)
	var matches []lcsMatch
	aStart, aEnd, bStart, bEnd := alen, uint32(0), uint32(0), uint32(0)
	i, j := alen, blen
	for i > 0 && j > 0 {
		emit := false
		if a[i-1] == b[j-1] {
			result[idx-1] = a[i-1]
			if aStart == alen {
				aStart, aEnd, bStart, bEnd = i-1, i-1, j-1, j-1
			} else if aStart == i && bStart == j {
				aStart--
				bStart--
			} else {
				emit = true
			}
			if aStart == 0 || bStart == 0 {
				emit = true
			}
			idx--
			i--
			j--
		} else {
			if at(i-1, j) > at(i, j-1) {
				i--
			} else {
				j--
			}
			if aStart != alen {
				emit = true
			}
		}
		n := aEnd - aStart + 1
		if emit {
			if minLen == 0 || int64(n) >= minLen {
				matches = append(matches, lcsMatch{aStart, aEnd, bStart, bEnd, n})
			}
			aStart = alen
		}
	}
	if !getIdx {
		c.W.Bulk(result)
		return
	}
	c.W.Map(2)
	c.W.BulkString("matches")
	c.W.Array(len(matches))
	for _, m := range matches {
		if withLen {
			c.W.Array(3)
		} else {
			c.W.Array(2)
		}
		c.W.Array(2)
		c.W.Int(int64(m.aStart))
		c.W.Int(int64(m.aEnd))
		c.W.Array(2)
		c.W.Int(int64(m.bStart))
		c.W.Int(int64(m.bEnd))
		if withLen {
			c.W.Int(int64(m.n))
		}
	}
	c.W.BulkString("len")
	c.W.Int(int64(at(alen, blen)))
}
