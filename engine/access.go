package engine

import "math/rand/v2"

// Access tracking, as Redis keeps it in each object's 24-bit lru field: a
// record's access stamp holds either the LRU clock of its last access
// (seconds, 24 bits, wrapping every 194 days) or, under an LFU policy, the
// minute of its last decrement (16 bits) and a logarithmic access counter
// (8 bits). Switching between the two reinterprets the stamps, as in Redis,
// so the figures take some time to adjust.

const (
	lruClockMax = 1<<24 - 1
	lfuInitVal  = 5 // a new key's counter, so it gets some accesses before it is a victim
)

func lruClock(now int64) uint32   { return uint32(now/1000) & lruClockMax }
func lfuMinutes(now int64) uint32 { return uint32(now/60000) & 0xffff }

// freshStamp is the stamp of a key created at now.
func (e *Engine) freshStamp(now int64) uint32 {
	if e.Policy().LFU() {
		return lfuMinutes(now)<<8 | lfuInitVal
	}
	return lruClock(now)
}

// touch records an access to r at now.
func (s *Shard) touch(r []byte, now int64) {
	if now <= 0 {
		// No clock: a replica applying its master's commands, which it
		// runs at time 0 so that nothing counts as expired. Such a
		// command is not a client's access.
		return
	}
	e := s.eng
	if !e.Policy().LFU() {
		setStamp(r, lruClock(now))
		return
	}
	c := e.lfuLogIncr(e.lfuDecr(recStamp(r), now))
	setStamp(r, lfuMinutes(now)<<8|c)
}

// lfuDecr is Redis's LFUDecrAndReturn: the counter less one for every
// lfu-decay-time minutes since its last decrement.
func (e *Engine) lfuDecr(stamp uint32, now int64) uint32 {
	ldt, counter := stamp>>8, stamp&0xff
	decay := uint32(e.lfuDecay.Load())
	if decay == 0 {
		return counter
	}
	m := lfuMinutes(now)
	elapsed := m - ldt
	if m < ldt {
		elapsed = 0xffff - ldt + m
	}
	if p := elapsed / decay; p < counter {
		return counter - p
	}
	return 0
}

// lfuLogIncr is Redis's LFULogIncr: the counter grows with probability
// 1/((counter-5)*lfu-log-factor+1), so it reaches 255 after about a million
// accesses with the default factor of 10.
func (e *Engine) lfuLogIncr(c uint32) uint32 {
	if c == 255 {
		return 255
	}
	base := float64(c) - lfuInitVal
	if base < 0 {
		base = 0
	}
	if rand.Float64() < 1/(base*float64(e.lfuLog.Load())+1) {
		c++
	}
	return c
}

// IdleTime returns how long ago e was last accessed, in ms (with the
// LRU clock's 1 s resolution), as OBJECT IDLETIME and the LRU policies see
// it. Meaningless under an LFU policy.
func (s *Shard) IdleTime(e Entry, now int64) int64 {
	return lruIdle(recStamp(e.rec), now)
}

func lruIdle(stamp uint32, now int64) int64 {
	c := lruClock(now)
	if c >= stamp {
		return int64(c-stamp) * 1000
	}
	return int64(c+(lruClockMax-stamp)) * 1000
}

// Frequency returns e's LFU counter, decayed to now, as OBJECT FREQ does.
// Meaningful under an LFU policy only.
func (s *Shard) Frequency(e Entry, now int64) int {
	return int(s.eng.lfuDecr(recStamp(e.rec), now))
}

// Peek is Find without counting as an access (Redis's LOOKUP_NOTOUCH), for
// the snapshots and commands that only look at a key's metadata.
func (s *Shard) Peek(db int, key []byte, now int64) (Entry, bool) {
	return s.findLive(db, key, now, false)
}

// Inspect is Lookup without counting as an access: a keyspace hit or
// miss, but the key's idle time and LFU counter stay as they were, as
// Redis's LOOKUP_NOTOUCH reads for EXISTS, TYPE, TTL and its kin, and
// OBJECT.
func (s *Shard) Inspect(db int, key []byte, now int64) (Entry, bool) {
	e, ok := s.findLive(db, key, now, false)
	if ok {
		s.Hits++
	} else {
		s.Misses++
		s.note(NoteMiss, db, key)
	}
	return e, ok
}

// SetAccess sets e's access stamp as RESTORE's IDLETIME and FREQ do
// (Redis's objectSetLRUOrLFU): under an LFU policy the counter becomes
// freq, if freq >= 0; under any other, the last access becomes idle
// seconds before now, if idle >= 0. The option that does not fit the
// policy is ignored, as in Redis.
func (s *Shard) SetAccess(e Entry, idle int64, freq int, now int64) {
	if s.eng.Policy().LFU() {
		if freq >= 0 {
			setStamp(e.rec, lfuMinutes(now)<<8|uint32(min(freq, 255)))
		}
		return
	}
	if idle < 0 {
		return
	}
	clock := int64(lruClock(now))
	abs := clock - idle
	if idle > clock { // wrapped: as Redis, half a clock's turn from now
		abs = (clock + lruClockMax/2) % lruClockMax
	}
	setStamp(e.rec, uint32(abs))
}
