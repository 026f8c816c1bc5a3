package commands

import (
	"github.com/limitkv/limitkv/engine"
)

// hllCommands: HyperLogLog, in Redis's own encoding.
func hllCommands() []*command {
	return []*command{
		cmd("pfadd", -2, "write denyoom fast as_is", cmdPFAdd),
		cmd("pfcount", -2, "readonly may_replicate as_is", cmdPFCount),
		cmd("pfmerge", -2, "write denyoom as_is", cmdPFMerge),
	}
}

// HyperLogLogs are strings in
// Redis's own layout (engine/hll.go), so GET, SET, DUMP and RESTORE carry
// them between limitkv and Redis.

const (
	msgNotHLL     = "WRONGTYPE Key is not a valid HyperLogLog string value."
	msgHLLCorrupt = "INVALIDOBJ Corrupted HLL object detected"
)

// hllErr replies for an error of the HyperLogLog operations.
func (c *Ctx) hllErr(err error) {
	switch err {
	case engine.ErrNotHLL:
		c.W.Error(msgNotHLL)
	case engine.ErrHLLCorrupt:
		c.W.Error(msgHLLCorrupt)
	default:
		c.Err(err)
	}
}

// hllSparseMax is hll-sparse-max-bytes as configured now.
func (c *Ctx) hllSparseMax() int {
	return int(min(c.Srv.Cfg.hllSparseMax.Load(), 1<<31))
}

func cmdPFAdd(c *Ctx) {
	key := c.Args[1]
	s := c.Shard(key)
	updated, err := s.PFAdd(c.DB, key, c.Now, c.Args[2:], c.hllSparseMax())
	c.flushNotes(s)
	if err != nil {
		c.hllErr(err)
		return
	}
	if updated {
		c.notify(notifyString, "pfadd", key)
		c.W.Int(1)
	} else {
		c.W.Int(0)
	}
}

func cmdPFCount(c *Ctx) {
	if len(c.Args) == 2 {
		n, err := c.Shard(c.Args[1]).PFCount(c.DB, c.Args[1], c.Now)
		if err != nil {
			c.hllErr(err)
			return
		}
		c.W.Int(n)
		return
	}
	// Several keys: the count of their union, leaving every key as it is.
	var regs [engine.HLLRegisters]uint8
	if _, ok := c.mergeHLLs(c.Args[1:], regs[:]); !ok {
		return
	}
	c.W.Int(engine.HLLCountRegisters(regs[:]))
}

// mergeHLLs raises regs to the registers of the HyperLogLogs at keys
// (missing ones count as empty) and reports whether one of them was dense.
// ok is false when it replied with an error.
func (c *Ctx) mergeHLLs(keys [][]byte, regs []uint8) (dense, ok bool) {
	for _, k := range keys {
		s := c.Shard(k)
		v, err := s.HLLSource(c.DB, k, c.Now)
		c.flushNotes(s)
		if err == nil && v != nil {
			dense = dense || v[4] == 0
			err = engine.HLLMerge(regs, v)
		}
		if err != nil {
			c.hllErr(err)
			return false, false
		}
	}
	return dense, true
}

func cmdPFMerge(c *Ctx) {
	// The destination is a source too.
	var regs [engine.HLLRegisters]uint8
	dense, ok := c.mergeHLLs(c.Args[1:], regs[:])
	if !ok {
		return
	}
	dest := c.Args[1]
	s := c.Shard(dest)
	err := s.PFMergeStore(c.DB, dest, c.Now, regs[:], dense, c.hllSparseMax())
	// The destination's miss, if any, was reported as a source's.
	c.flushNotes(s)
	if err != nil {
		c.hllErr(err)
		return
	}
	// "pfadd", as Redis names a merge: a mass-add of elements.
	c.notify(notifyString, "pfadd", dest)
	c.W.OK()
}
