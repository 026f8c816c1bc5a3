package commands

import "sync/atomic"

// callStripes spreads a hot counter over cache lines: every request bumps
// its command's call count, and with one shared word the cores serving
// different connections would pass that line back and forth on each one.
const callStripes = 8

type stripedCounter struct {
	stripe [callStripes]struct {
		n atomic.Int64
		_ [56]byte // the rest of the cache line
	}
}

// Add counts n on the stripe picked by who (a client ID: a connection keeps
// to one stripe).
func (c *stripedCounter) Add(who int64, n int64) {
	c.stripe[who&(callStripes-1)].n.Add(n)
}

// Load sums the stripes; concurrent adds may or may not be seen.
func (c *stripedCounter) Load() int64 {
	var n int64
	for i := range c.stripe {
		n += c.stripe[i].n.Load()
	}
	return n
}

// Reset zeroes the count (CONFIG RESETSTAT).
func (c *stripedCounter) Reset() {
	for i := range c.stripe {
		c.stripe[i].n.Store(0)
	}
}
