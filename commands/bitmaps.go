package commands

import (
	"github.com/limitkv/limitkv/engine"
)

// bitmapCommands: the bitmap commands, exact to Redis's bit order.
func bitmapCommands() []*command {
	return []*command{
		cmd("setbit", 4, "write denyoom as_is", cmdSetBit),
		cmd("getbit", 3, "readonly fast", cmdGetBit),
		cmd("bitcount", -2, "readonly", cmdBitCount),
		cmd("bitpos", -3, "readonly", cmdBitPos),
		cmd("bitop", -4, "write denyoom as_is", cmdBitOp),
	}
}

// Bitmaps are strings; the engine reads and grows them through its string
// API.

const (
	msgBitOffset = "bit offset is not an integer or out of range"
	msgBitValue  = "bit is not an integer or out of range"
	msgBitArg    = "The bit argument must be 1 or 0."
	msgBitOpNot  = "ERR BITOP NOT must be called with a single source key."
)

// bitOffset parses argument i as a bit offset: a non-negative integer whose
// byte lies within proto-max-bulk-len, the longest string Redis will build.
func (c *Ctx) bitOffset(i int) (uint64, bool) {
	n, ok := engine.ParseInt(c.Args[i])
	if !ok || n < 0 || n>>3 >= c.maxStringLen() {
		c.W.Error(msgBitOffset)
		return 0, false
	}
	return uint64(n), true
}

func cmdSetBit(c *Ctx) {
	offset, ok := c.bitOffset(2)
	if !ok {
		return
	}
	bit, ok := engine.ParseInt(c.Args[3])
	if !ok || bit&^1 != 0 {
		c.W.Error(msgBitValue)
		return
	}
	grow, ok := c.reserveGrowth(c.Args[1], int64(offset>>3)+1)
	if !ok {
		return
	}
	defer c.Srv.releaseGrowth(grow)
	s := c.Shard(c.Args[1])
	// Redis reports a SETBIT that created or lengthened the string even
	// when the bit kept its value; only the length before tells.
	grows := false
	if stringEventsOn(c) {
		grows = bitmapGrows(c, s, c.Args[1], int64(offset>>3)+1)
	}
	old, err := s.SetBit(c.DB, c.Args[1], c.Now, offset, int(bit))
	if err != nil {
		c.Err(err)
		return
	}
	if grows || int64(old) != bit {
		c.notify(notifyString, "setbit", c.Args[1])
	}
	c.W.Int(int64(old))
}

// stringEventsOn reports whether string-class events are published: what
// bit writes check before any work done only to decide on theirs.
func stringEventsOn(c *Ctx) bool {
	return notifyClass(c.Srv.notifyOn.Load())&notifyString != 0
}

// bitmapGrows reports whether a write reaching byte n-1 of the string at
// key will create it or lengthen it. A peek: no hit or miss is counted.
func bitmapGrows(c *Ctx, s *engine.Shard, key []byte, n int64) bool {
	e, found := s.Peek(c.DB, key, c.Now)
	if !found {
		return true
	}
	l, err := e.StrLen()
	return err == nil && int64(l) < n
}

func cmdGetBit(c *Ctx) {
	offset, ok := c.bitOffset(2)
	if !ok {
		return
	}
	bit, err := c.Shard(c.Args[1]).GetBit(c.DB, c.Args[1], c.Now, offset)
	if err != nil {
		c.Err(err)
		return
	}
	c.W.Int(int64(bit))
}

// readBitmap looks up the string at key for BITCOUNT and BITPOS. found is
// false for a missing key; ok is false when a reply (WRONGTYPE) was sent.
func (c *Ctx) readBitmap(key []byte) (v []byte, found, ok bool) {
	e, found := c.Shard(key).Lookup(c.DB, key, c.Now)
	if !found {
		return nil, false, true
	}
	v, err := e.StringOf(c.buf[:0])
	if err != nil {
		c.Err(err)
		return nil, true, false
	}
	return v, true, true
}

// bitUnit parses an optional BYTE|BIT argument; it reports whether ranges
// count bits.
func (c *Ctx) bitUnit(i int) (isBit, ok bool) {
	switch {
	case i >= len(c.Args) || is(c.Args[i], "BYTE"):
		return false, true
	case is(c.Args[i], "BIT"):
		return true, true
	}
	c.W.Error(msgSyntax)
	return false, false
}

// bitRange applies Redis's index rules to start and end, counted in bits or
// bytes of a string of strLen bytes: negative indexes count from the end,
// both are clamped to the string. It returns the inclusive range of bit
// positions, or ok=false when it is empty.
func bitRange(start, end int64, strLen int, isBit bool) (first, last int64, ok bool) {
	n := int64(strLen)
	if isBit {
		n *= 8
	}
	if start < 0 {
		start += n
	}
	if end < 0 {
		end += n
	}
	start = max(start, 0)
	end = min(max(end, 0), n-1)
	if start > end {
		return 0, 0, false
	}
	if isBit {
		return start, end, true
	}
	return start * 8, end*8 + 7, true
}

func cmdBitCount(c *Ctx) {
	// Redis looks the key up before reading the range, so a missing key
	// counts 0 even with malformed arguments.
	v, found, ok := c.readBitmap(c.Args[1])
	if !ok {
		return
	}
	if !found {
		c.W.Int(0)
		return
	}
	first, last := int64(0), int64(len(v))*8-1
	switch len(c.Args) {
	case 2:
	case 4, 5:
		start, ok := c.Int(2)
		if !ok {
			return
		}
		end, ok := c.Int(3)
		if !ok {
			return
		}
		isBit, ok := c.bitUnit(4)
		if !ok {
			return
		}
		if start < 0 && end < 0 && start > end {
			// Checked before clamping, which could otherwise turn a reversed
			// range into the first byte or bit.
			c.W.Int(0)
			return
		}
		if first, last, ok = bitRange(start, end, len(v), isBit); !ok {
			c.W.Int(0)
			return
		}
	default:
		c.W.Error(msgSyntax)
		return
	}
	if last < first {
		c.W.Int(0) // an empty string
		return
	}
	c.W.Int(engine.CountBits(v, first, last))
}

func cmdBitPos(c *Ctx) {
	bit, ok := c.Int(2)
	if !ok {
		return
	}
	if bit != 0 && bit != 1 {
		c.W.Error(msgBitArg)
		return
	}
	v, found, ok := c.readBitmap(c.Args[1])
	if !ok {
		return
	}
	if !found {
		// A missing key is an endless run of zero bits.
		c.W.Int(-bit)
		return
	}
	var start, end int64
	isBit, endGiven := false, false
	switch len(c.Args) {
	case 3:
		end = int64(len(v)) - 1
	case 4, 5, 6:
		if start, ok = c.Int(3); !ok {
			return
		}
		if isBit, ok = c.bitUnit(5); !ok {
			return
		}
		if len(c.Args) >= 5 {
			if end, ok = c.Int(4); !ok {
				return
			}
			endGiven = true
		} else {
			end = int64(len(v)) - 1
		}
	default:
		c.W.Error(msgSyntax)
		return
	}
	first, last, ok := bitRange(start, end, len(v), isBit)
	if !ok {
		c.W.Int(-1)
		return
	}
	pos := engine.FindBit(v, int(bit), first, last)
	if pos < 0 && bit == 0 && !endGiven {
		// Without an end the string counts as padded with zeros on the
		// right: the first clear bit is the one just past it.
		pos = last + 1
	}
	c.W.Int(pos)
}

func cmdBitOp(c *Ctx) {
	var op engine.BitOp
	switch a := c.Args[1]; {
	case is(a, "AND"):
		op = engine.BitAnd
	case is(a, "OR"):
		op = engine.BitOr
	case is(a, "XOR"):
		op = engine.BitXor
	case is(a, "NOT"):
		op = engine.BitNot
	default:
		c.W.Error(msgSyntax)
		return
	}
	dest, srcs := c.Args[2], c.Args[3:]
	if op == engine.BitNot && len(srcs) != 1 {
		c.W.Error(msgBitOpNot)
		return
	}
	// First pass: type checks and the result's length. Lookups may expire
	// keys, so no string is held across them.
	maxLen := 0
	for _, k := range srcs {
		sk := c.Shard(k)
		e, ok := sk.Lookup(c.DB, k, c.Now)
		c.flushNotes(sk)
		if !ok {
			continue
		}
		n, err := e.StrLen()
		if err != nil {
			c.Err(err)
			return
		}
		maxLen = max(maxLen, n)
	}
	// Second pass: fold each source in as soon as it is read.
	res := make([]byte, maxLen)
	for i, k := range srcs {
		var v []byte
		if e, ok := c.Shard(k).Find(c.DB, k, c.Now); ok {
			v, _ = e.StringOf(c.buf[:0])
		}
		engine.FoldBits(op, res, v, i == 0)
	}
	s := c.Shard(dest)
	if maxLen == 0 {
		c.deleteDest(s, dest)
	} else {
		s.Find(c.DB, dest, c.Now) // Redis's setKey: a key past its TTL expires first
		s.SetString(c.DB, dest, res, 0)
		c.notify(notifyString, "set", dest)
	}
	c.W.Int(int64(maxLen))
}
