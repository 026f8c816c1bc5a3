package engine

import (
	"math/rand/v2"
	"sync"
	"time"
)

// Eviction, as Redis 7.0's performEvictions does it: while memory is over
// the limit, pick a victim by the policy and delete it. The LRU, LFU and
// TTL policies sample maxmemory-samples keys at a time into a pool of the
// 16 best candidates seen so far, which carries over from one eviction to
// the next so that a few samples at a time approximate a true LRU; the
// random policies take any key. Samples come from one shard at a time, in
// turn, each under its own lock: eviction never holds more than one shard.
// An evicted key is deleted as any other (the change log and WATCH see
// it), and counted in EvictedKeys.

// Policy is a maxmemory-policy.
type Policy uint8

const (
	NoEviction Policy = iota
	AllKeysLRU
	VolatileLRU
	AllKeysLFU
	VolatileLFU
	AllKeysRandom
	VolatileRandom
	VolatileTTL
)

var policyNames = [...]string{"noeviction", "allkeys-lru", "volatile-lru", "allkeys-lfu", "volatile-lfu", "allkeys-random", "volatile-random", "volatile-ttl"}

func (p Policy) String() string { return policyNames[p] }

// ParsePolicy reads a policy's name.
func ParsePolicy(name string) (Policy, bool) {
	for i, n := range policyNames {
		if n == name {
			return Policy(i), true
		}
	}
	return 0, false
}

// LFU reports whether access stamps are LFU counters under p.
func (p Policy) LFU() bool { return p == AllKeysLFU || p == VolatileLFU }

// Volatile reports whether p evicts only keys with a TTL.
func (p Policy) Volatile() bool {
	return p == VolatileLRU || p == VolatileLFU || p == VolatileRandom || p == VolatileTTL
}

// Eviction is what the eviction settings say.
type Eviction struct {
	Policy       Policy
	Samples      int // maxmemory-samples
	LFULogFactor int // lfu-log-factor
	LFUDecayTime int // lfu-decay-time, minutes
}

// DefaultEviction is Redis's defaults.
var DefaultEviction = Eviction{Policy: NoEviction, Samples: 5, LFULogFactor: 10, LFUDecayTime: 1}

// SetEviction changes the eviction settings.
func (e *Engine) SetEviction(ev Eviction) {
	e.samples.Store(int32(max(ev.Samples, 1)))
	e.lfuLog.Store(int32(ev.LFULogFactor))
	e.lfuDecay.Store(int32(ev.LFUDecayTime))
	if Policy(e.policy.Swap(uint32(ev.Policy))) != ev.Policy {
		e.evictor.mu.Lock()
		e.evictor.pool.clear() // its scores meant something else
		e.evictor.mu.Unlock()
	}
}

// Policy returns the maxmemory-policy in force.
func (e *Engine) Policy() Policy { return Policy(e.policy.Load()) }

// EvictedKeys counts the keys evicted since the start (or ResetEvicted).
func (e *Engine) EvictedKeys() int64 { return e.evicted.Load() }

// ResetEvicted sets EvictedKeys back to 0, for CONFIG RESETSTAT.
func (e *Engine) ResetEvicted() { e.evicted.Store(0) }

const poolSize = 16 // Redis's EVPOOL_SIZE

// poolEntry is a candidate: a key of a shard and database, with its score
// (higher is evicted first: idle ms, 255 less the LFU counter, or the
// inverse of the expiry time).
type poolEntry struct {
	score uint64
	shard int
	db    int
	key   []byte // owned by the entry, reused
	used  bool
}

// evictionPool holds the best candidates, ascending by score.
type evictionPool [poolSize]poolEntry

func (p *evictionPool) clear() {
	for i := range p {
		p[i].used = false
	}
}

// insert adds a candidate if it beats one of the pool's, as Redis's
// evictionPoolPopulate does.
func (p *evictionPool) insert(score uint64, shard, db int, key []byte) {
	k := 0
	for k < poolSize && p[k].used && p[k].score < score {
		k++
	}
	switch {
	case k == 0 && p[poolSize-1].used:
		return // worse than every candidate of a full pool
	case k < poolSize && !p[k].used:
	case !p[poolSize-1].used:
		// Room on the right: shift k.. right, reusing the last key buffer.
		spare := p[poolSize-1].key
		copy(p[k+1:], p[k:poolSize-1])
		p[k].key = spare
	default:
		// Full: drop the worst (leftmost) and insert at k-1.
		k--
		spare := p[0].key
		copy(p[:k], p[1:k+1])
		p[k].key = spare
	}
	p[k] = poolEntry{score: score, shard: shard, db: db, key: append(p[k].key[:0], key...), used: true}
}

// evictor is the eviction state: one eviction runs at a time.
type evictor struct {
	mu     sync.Mutex
	pool   evictionPool
	next   int // shard to sample next
	nextDB int
	keys   []uint32 // sampled refs, reused
}

// EvictResult says how an eviction round ended.
type EvictResult uint8

const (
	EvictDone    EvictResult = iota // freed what was asked
	EvictRunning                    // ran out of time: more to do
	EvictFailed                     // nothing left to evict
)

// Evict deletes keys by the policy while excess() (the bytes memory is
// over its limit) is positive, until nothing is left to evict or budget
// has passed (checked every 16 keys, as Redis does). It returns the bytes
// freed and how it ended. Under noeviction it frees nothing and fails.
// One eviction runs at a time, taking one shard lock at a time. A caller
// that finds one running does not wait for it: it gets EvictRunning at
// once, as Redis lets a command run while its eviction continues in the
// background. (Waiting made every writer of a full server queue on one
// mutex, and under a flood on a busy machine the queue's hand-offs, each
// to a goroutine that must first get a core, stretched into seconds.) The
// eviction running asks excess again as it goes, so it frees what the
// others added meanwhile.
func (e *Engine) Evict(excess func() int64, now int64, budget time.Duration) (int64, EvictResult) {
	pol := e.Policy()
	if pol == NoEviction {
		return 0, EvictFailed
	}
	ev := &e.evictor
	if !ev.mu.TryLock() {
		return 0, EvictRunning
	}
	defer ev.mu.Unlock()
	// The clock is read only once a second key is needed: most calls, one
	// per write of a full server, evict one key and read no clock.
	var start time.Time
	var freed int64
	for n := 1; excess() > 0; n++ {
		if n == 2 {
			start = time.Now()
		}
		f, ok := e.evictOne(pol, now)
		if !ok {
			return freed, EvictFailed
		}
		freed += f
		e.evicted.Add(1)
		if n%16 == 0 && time.Since(start) > budget && excess() > 0 {
			return freed, EvictRunning
		}
	}
	return freed, EvictDone
}

// evictOne evicts one key and returns the bytes it freed, or false when
// no key can be evicted.
func (e *Engine) evictOne(pol Policy, now int64) (int64, bool) {
	if pol == AllKeysRandom || pol == VolatileRandom {
		return e.evictRandom(pol, now)
	}
	ev := &e.evictor
	for {
		// Sample shards in turn until one had keys to offer, then take
		// the best candidate of the pool that still exists.
		found := false
		for tries := 0; tries < Shards && !found; tries++ {
			i := ev.next
			ev.next = (ev.next + 1) % Shards
			found = e.shards[i].sample(i, pol, now, &ev.pool, ev)
		}
		if !found {
			return 0, false
		}
		for k := poolSize - 1; k >= 0; k-- {
			c := &ev.pool[k]
			if !c.used {
				continue
			}
			c.used = false
			if f, ok := e.shards[c.shard].evictKey(c.db, c.key, pol); ok {
				return f, true
			}
		}
	}
}

// sample adds up to maxmemory-samples keys of each database of the shard
// to the pool, as candidates for pol. It reports whether the shard had any
// key the policy may evict.
func (s *Shard) sample(idx int, pol Policy, now int64, pool *evictionPool, ev *evictor) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := int(s.eng.samples.Load())
	any := false
	for db := range s.dbs {
		t := &s.dbs[db]
		if t.count == 0 || (pol.Volatile() && t.expires == 0) {
			continue
		}
		any = true
		ev.keys = s.someKeys(t, pol.Volatile(), n, ev.keys[:0])
		for _, ref := range ev.keys {
			r := s.record(ref)
			var score uint64
			switch {
			case pol.LFU():
				score = 255 - uint64(s.eng.lfuDecr(recStamp(r), now))
			case pol == VolatileTTL:
				score = ^uint64(0) - uint64(recExpire(r))
			default:
				score = uint64(lruIdle(recStamp(r), now))
			}
			pool.insert(score, idx, db, recKey(r))
		}
	}
	return any
}

// someKeys appends the refs of up to n keys of t (with a TTL, if volatile)
// found from a random slot on, as Redis's dictGetSomeKeys does: a bounded
// walk, so a table with few matching keys costs no more than 10 slots per
// key wanted.
func (s *Shard) someKeys(t *table, volatile bool, n int, out []uint32) []uint32 {
	size := uint32(len(t.slots))
	i := rand.Uint32() & t.mask
	for steps := 0; steps < 10*n && steps < int(size) && len(out) < n; steps++ {
		if ref := slotRef(t.slots[i]); ref != 0 && (!volatile || s.record(ref)[1]&flagExpire != 0) {
			out = append(out, ref)
		}
		i = t.next(i)
	}
	if len(out) == 0 && volatile {
		// Few keys with a TTL in a big table: look until one is found.
		for steps := uint32(0); steps < size; steps++ {
			if ref := slotRef(t.slots[i]); ref != 0 && s.record(ref)[1]&flagExpire != 0 {
				return append(out, ref)
			}
			i = t.next(i)
		}
	}
	return out
}

// evictKey deletes key from database db if it is still there (with a TTL,
// under a volatile policy), and returns the bytes that freed.
func (s *Shard) evictKey(db int, key []byte, pol Policy) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &s.dbs[db]
	i, r, ok := s.find(t, key, uint32(s.eng.hash(key)))
	if !ok || (pol.Volatile() && r[1]&flagExpire == 0) {
		return 0, false
	}
	before := s.mem
	s.note(NoteEvicted, db, key)
	s.deleteAt(db, t, i)
	s.sinkEffects() // replicas delete it too
	s.sinkNotes()
	return before - s.mem, true
}

// evictRandom evicts a random key (with a TTL, if volatile) of the next
// shard and database that has one.
func (e *Engine) evictRandom(pol Policy, now int64) (int64, bool) {
	ev := &e.evictor
	for tries := 0; tries < Shards*e.numDB; tries++ {
		si, db := ev.next, ev.nextDB
		if ev.nextDB++; ev.nextDB == e.numDB {
			ev.nextDB = 0
			ev.next = (ev.next + 1) % Shards
		}
		s := &e.shards[si]
		s.mu.Lock()
		t := &s.dbs[db]
		if t.count == 0 || (pol.Volatile() && t.expires == 0) {
			s.mu.Unlock()
			continue
		}
		ev.keys = s.someKeys(t, pol.Volatile(), 1, ev.keys[:0])
		if len(ev.keys) == 0 {
			s.mu.Unlock()
			continue
		}
		key := recKey(s.record(ev.keys[0]))
		i, _, _ := s.find(t, key, uint32(e.hash(key)))
		before := s.mem
		s.note(NoteEvicted, db, key)
		s.deleteAt(db, t, i)
		f := before - s.mem
		s.sinkEffects()
		s.sinkNotes()
		s.mu.Unlock()
		return f, true
	}
	return 0, false
}
