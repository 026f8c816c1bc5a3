package observe

import "sync/atomic"

// callStripes spreads a command's hot counters over cache lines: every
// request bumps its command's call count and time, and with one shared
// word the cores serving different connections would pass that line back
// and forth on each one.
const callStripes = 8

// CallCounter counts a command's calls and the nanoseconds they took
// (INFO commandstats). The zero value is ready.
type CallCounter struct {
	stripe [callStripes]struct {
		calls, nanos atomic.Int64
		_            [48]byte // the rest of the cache line
	}
}

// Add counts one call of d nanoseconds on the stripe picked by who (a
// client ID: a connection keeps to one stripe).
func (c *CallCounter) Add(who int64, d int64) {
	s := &c.stripe[who&(callStripes-1)]
	s.calls.Add(1)
	s.nanos.Add(d)
}

// Load sums the stripes; concurrent adds may or may not be seen.
func (c *CallCounter) Load() (calls, nanos int64) {
	for i := range c.stripe {
		calls += c.stripe[i].calls.Load()
		nanos += c.stripe[i].nanos.Load()
	}
	return calls, nanos
}

// Reset zeroes the counts (CONFIG RESETSTAT).
func (c *CallCounter) Reset() {
	for i := range c.stripe {
		c.stripe[i].calls.Store(0)
		c.stripe[i].nanos.Store(0)
	}
}
