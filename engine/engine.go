// Package engine is limitkv's keyspace: shards each behind their own lock,
// values with absolute expiry times, lazy and active expiry, and the data
// types' operations. It takes the time as an argument and returns values or
// sentinel errors; it knows nothing of the wire protocol.
package engine

import (
	"hash/maphash"
	"math/bits"
	"sync/atomic"
	"time"
)

// Shards is the number of lock domains. A power of two no larger than 64, so
// that a set of shards fits in a uint64 mask and locks can be taken in
// bit order without deadlock.
const (
	shardBits = 6
	Shards    = 1 << shardBits
)

// Clock gives the time in milliseconds since the Unix epoch. Commands read
// it once and pass the value down.
type Clock interface {
	Now() int64
}

// SystemClock reads the wall clock.
type SystemClock struct{}

func (SystemClock) Now() int64 { return time.Now().UnixMilli() }

// ManualClock is a clock that moves only when told to, for tests.
type ManualClock struct{ ms atomic.Int64 }

func NewManualClock(ms int64) *ManualClock {
	c := &ManualClock{}
	c.ms.Store(ms)
	return c
}

func (c *ManualClock) Now() int64         { return c.ms.Load() }
func (c *ManualClock) Set(ms int64)       { c.ms.Store(ms) }
func (c *ManualClock) Advance(ms int64)   { c.ms.Add(ms) }
func (c *ManualClock) AdvanceTo(ms int64) { c.ms.Store(ms) }

// Config sets up an Engine.
type Config struct {
	Databases int   // number of databases, as SELECT sees them
	Clock     Clock // defaults to SystemClock
	// Slots, for cluster mode: keys are sharded by their hash slot
	// (KeySlot) and indexed per slot (slots.go). Off, the engine keeps no
	// index and costs nothing for it.
	Slots bool
}

// Engine is the whole keyspace.
type Engine struct {
	shards [Shards]Shard
	seed   maphash.Seed
	numDB  int
	slots  bool // Config.Slots
	clock  atomic.Pointer[clockBox]
	// sweepClock times the sweeper's work and budget: the machine's
	// monotonic clock, which a test may replace before sweeping.
	sweepClock func() time.Time
	freed      atomic.Int64 // bytes of big records dropped, see FreedBytes
	mem        atomic.Int64 // bytes the shards hold, see memory.go

	// Eviction settings (see evict.go) and its state.
	policy   atomic.Uint32 // a Policy
	samples  atomic.Int32
	lfuLog   atomic.Int32
	lfuDecay atomic.Int32
	evicted  atomic.Int64
	evictor  evictor

	// replica: hold keys as a replica does (SetReplica).
	replica atomic.Bool
	// fxSink: log effects for replication, and where the engine's own
	// changes go (effects.go).
	fxSink atomic.Pointer[func(*Shard)]
	// notes: the NoteKinds logged for keyspace notifications, and where
	// the engine's own go (notes.go).
	notes    atomic.Uint32
	noteSeq  atomic.Uint64
	noteSink atomic.Pointer[func(*Shard)]
}

type clockBox struct{ Clock }

// New returns an empty engine.
func New(cfg Config) *Engine {
	if cfg.Databases <= 0 {
		cfg.Databases = 16
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	e := &Engine{seed: maphash.MakeSeed(), numDB: cfg.Databases, slots: cfg.Slots, sweepClock: time.Now}
	e.SetEviction(DefaultEviction)
	e.clock.Store(&clockBox{cfg.Clock})
	for i := range e.shards {
		e.shards[i].init(e)
	}
	return e
}

// FreedBytes counts the bytes of big string records (those stored on the
// Go heap) that were deleted or replaced since the start: garbage the
// process may collect and hand back to the system.
func (e *Engine) FreedBytes() int64 { return e.freed.Load() }

// Now reads the engine's clock.
func (e *Engine) Now() int64 { return e.clock.Load().Now() }

// SetClock replaces the clock (the debug clock commands use it).
func (e *Engine) SetClock(c Clock) { e.clock.Store(&clockBox{c}) }

// Clock returns the current clock.
func (e *Engine) Clock() Clock { return e.clock.Load().Clock }

// Databases returns the number of databases.
func (e *Engine) Databases() int { return e.numDB }

func (e *Engine) hash(key []byte) uint64 { return maphash.Bytes(e.seed, key) }

// ShardIndex returns the index of the shard that owns key: by its hash, or
// by its slot when the engine has slots, so that a slot's keys share a lock.
func (e *Engine) ShardIndex(key []byte) int {
	if e.slots {
		return int(KeySlot(key) % Shards)
	}
	return int(e.hash(key) >> (64 - shardBits))
}

// ShardFor returns the shard that owns key.
func (e *Engine) ShardFor(key []byte) *Shard {
	return &e.shards[e.ShardIndex(key)]
}

// Shard returns shard i.
func (e *Engine) Shard(i int) *Shard { return &e.shards[i] }

// Mask is a set of shards, one bit each.
type Mask uint64

// AllShards is the mask of every shard.
const AllShards = Mask(1<<Shards - 1)

// MaskOf returns the set of shards owning keys.
func (e *Engine) MaskOf(keys ...[]byte) Mask {
	var m Mask
	for _, k := range keys {
		m |= 1 << e.ShardIndex(k)
	}
	return m
}

// Add returns m with the shard of key added.
func (e *Engine) Add(m Mask, key []byte) Mask { return m | 1<<e.ShardIndex(key) }

// Lock takes the locks of every shard in m, lowest first, so that any two
// callers agree on the order and cannot deadlock.
func (e *Engine) Lock(m Mask) {
	for m != 0 {
		i := bits.TrailingZeros64(uint64(m))
		e.shards[i].mu.Lock()
		m &= m - 1
	}
}

// Unlock releases the locks of every shard in m.
func (e *Engine) Unlock(m Mask) {
	for m != 0 {
		i := bits.TrailingZeros64(uint64(m))
		e.shards[i].mu.Unlock()
		m &= m - 1
	}
}
