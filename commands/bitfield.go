package commands

import (
	"github.com/limitkv/limitkv/engine"
)

// bitfieldCommands: BITFIELD and BITFIELD_RO, whose key flags depend on
// the subcommands a request uses.
func bitfieldCommands() []*command {
	return []*command{
		cmd("bitfield", -2, "write denyoom as_is", cmdBitfield).withKeyFlags(bitfieldKeyFlags),
		cmd("bitfield_ro", -2, "readonly fast", cmdBitfieldRO),
	}
}

// BITFIELD and BITFIELD_RO: integers of any width at any bit offset of a
// string (engine/bitfield.go). Every operation is parsed before any runs,
// so a bad one changes nothing.

const (
	msgBitfieldType     = "Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is."
	msgBitfieldOverflow = "Invalid OVERFLOW type specified"
	msgBitfieldRO       = "BITFIELD_RO only supports the GET subcommand"
)

// bitfieldType parses i1..i64 or u1..u63.
func bitfieldType(a []byte) (signed bool, bits uint8, ok bool) {
	if len(a) == 0 || (a[0] != 'i' && a[0] != 'u') {
		return false, 0, false
	}
	signed = a[0] == 'i'
	n, ok := engine.ParseInt(a[1:])
	if !ok || n < 1 || (signed && n > 64) || (!signed && n > 63) {
		return false, 0, false
	}
	return signed, uint8(n), true
}

// bitfieldOffset parses a bit offset, "#n" meaning n fields of bits
// bits, within the longest string Redis builds.
func (c *Ctx) bitfieldOffset(a []byte, bits uint8) (uint64, bool) {
	hash := len(a) > 0 && a[0] == '#'
	if hash {
		a = a[1:]
	}
	n, ok := engine.ParseInt(a)
	if hash {
		n *= int64(bits) // wraps as Redis's long long does; caught below
	}
	if !ok || n < 0 || n>>3 >= c.maxStringLen() {
		c.W.Error(msgBitOffset)
		return 0, false
	}
	return uint64(n), true
}

// parseBitfield parses the operations of BITFIELD key ...; maxBit is the
// last bit a SET or INCRBY writes, -1 if none does. ok is false when it
// replied with an error.
func (c *Ctx) parseBitfield() (ops []engine.BitfieldOp, maxBit int64, ok bool) {
	maxBit = -1
	ow := engine.OverflowWrap
	for j := 2; j < len(c.Args); j++ {
		rem := len(c.Args) - j - 1
		var kind engine.BitfieldOpKind
		switch a := c.Args[j]; {
		case is(a, "GET") && rem >= 2:
			kind = engine.BitfieldGet
		case is(a, "SET") && rem >= 3:
			kind = engine.BitfieldSet
		case is(a, "INCRBY") && rem >= 3:
			kind = engine.BitfieldIncrBy
		case is(a, "OVERFLOW") && rem >= 1:
			j++
			switch t := c.Args[j]; {
			case is(t, "WRAP"):
				ow = engine.OverflowWrap
			case is(t, "SAT"):
				ow = engine.OverflowSat
			case is(t, "FAIL"):
				ow = engine.OverflowFail
			default:
				c.W.Error(msgBitfieldOverflow)
				return nil, 0, false
			}
			continue
		default:
			c.W.Error(msgSyntax)
			return nil, 0, false
		}
		signed, bits, ok := bitfieldType(c.Args[j+1])
		if !ok {
			c.W.Error(msgBitfieldType)
			return nil, 0, false
		}
		offset, ok := c.bitfieldOffset(c.Args[j+2], bits)
		if !ok {
			return nil, 0, false
		}
		op := engine.BitfieldOp{Op: kind, Signed: signed, Bits: bits, Overflow: ow, Offset: offset}
		if kind != engine.BitfieldGet {
			maxBit = max(maxBit, int64(offset)+int64(bits)-1)
			if op.Value, ok = c.Int(j + 3); !ok {
				return nil, 0, false
			}
			j++
		}
		ops = append(ops, op)
		j += 2
	}
	return ops, maxBit, true
}

// bitfieldKeyFlags narrows the variable flags of BITFIELD's key (its
// Spec.KeyFlags): a request that only reads it only reads it.
func bitfieldKeyFlags(args [][]byte) string {
	if bitfieldOnlyReads(args) {
		return "RO access"
	}
	return "RW access update"
}

// bitfieldOnlyReads reports whether a BITFIELD request only reads its
// key, as Redis's bitfieldGetKeys decides it for ACL checks and COMMAND
// GETKEYSANDFLAGS: its subcommands up to the first SET or INCRBY are GETs
// and OVERFLOWs, each with its arguments (a syntax error counts as a
// write).
func bitfieldOnlyReads(args [][]byte) bool {
	for i := 2; i < len(args); i++ {
		left := len(args) - i - 1
		switch a := args[i]; {
		case is(a, "GET") && left >= 2:
			i += 2
		case is(a, "OVERFLOW") && left >= 1:
			i++
		default:
			return false
		}
	}
	return true
}

func cmdBitfield(c *Ctx)   { bitfield(c, false) }
func cmdBitfieldRO(c *Ctx) { bitfield(c, true) }

func bitfield(c *Ctx, readOnly bool) {
	ops, maxBit, ok := c.parseBitfield()
	if !ok {
		return
	}
	if maxBit >= 0 && readOnly {
		c.W.Error(msgBitfieldRO)
		return
	}
	key := c.Args[1]
	if maxBit >= 0 {
		grow, ok := c.reserveGrowth(key, maxBit>>3+1)
		if !ok {
			return
		}
		defer c.Srv.releaseGrowth(grow)
	}
	s := c.Shard(key)
	if maxBit >= 0 && stringEventsOn(c) {
		bitfieldNotified(c, s, key, ops, maxBit)
		return
	}
	var buf [8]engine.BitfieldResult
	res, err := s.Bitfield(c.DB, key, c.Now, ops, maxBit, buf[:0])
	if maxBit >= 0 {
		c.flushNotes(s)
	}
	if err != nil {
		c.Err(err)
		return
	}
	bitfieldReply(c, res)
}

func bitfieldReply(c *Ctx, res []engine.BitfieldResult) {
	c.W.Array(len(res))
	for _, r := range res {
		if r.Null {
			c.W.Null()
		} else {
			c.W.Int(r.Value)
		}
	}
}

// bitfieldNotified runs a BITFIELD that writes while string events are
// published. Redis reports "setbit" when a write that did not fail on
// overflow either changed its field or met a string it created or
// lengthened; the engine does not say which fields changed, so each write
// runs between two GETs of its field, whose results are left out of the
// reply.
func bitfieldNotified(c *Ctx, s *engine.Shard, key []byte, ops []engine.BitfieldOp, maxBit int64) {
	grows := bitmapGrows(c, s, key, maxBit>>3+1)
	run := make([]engine.BitfieldOp, 0, 3*len(ops))
	for _, op := range ops {
		if op.Op == engine.BitfieldGet {
			run = append(run, op)
			continue
		}
		get := engine.BitfieldOp{Op: engine.BitfieldGet, Signed: op.Signed, Bits: op.Bits, Offset: op.Offset}
		run = append(run, get, op, get)
	}
	res, err := s.Bitfield(c.DB, key, c.Now, run, maxBit, make([]engine.BitfieldResult, 0, len(run)))
	c.flushNotes(s)
	if err != nil {
		c.Err(err)
		return
	}
	changed := false
	out := res[:0]
	for i, j := 0, 0; i < len(ops); i++ {
		if ops[i].Op == engine.BitfieldGet {
			out = append(out, res[j])
			j++
			continue
		}
		before, w, after := res[j], res[j+1], res[j+2]
		changed = changed || !w.Null && (grows || before.Value != after.Value)
		out = append(out, w)
		j += 3
	}
	bitfieldReply(c, out)
	if changed { // after the reply, as in Redis
		c.notify(notifyString, "setbit", key)
	}
}
