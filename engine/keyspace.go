package engine

import (
	"math/rand/v2"
)

// Operations over a whole database. Those that must be atomic across shards
// (FLUSHDB, SWAPDB, KEYS) take every shard's lock unless the caller already
// holds them all (held set, inside EXEC or a script).

// DBSize returns the number of keys in db.
func (e *Engine) DBSize(db int, held bool) int {
	n := 0
	for i := range e.shards {
		s := &e.shards[i]
		if !held {
			s.mu.Lock()
		}
		n += s.dbs[db].count
		if !held {
			s.mu.Unlock()
		}
	}
	return n
}

// DBStats returns the keys and the keys with a TTL in db, and their average
// TTL in ms at time now. held: the caller holds every shard lock.
func (e *Engine) DBStats(db int, now int64, held bool) (keys, expires int, avgTTL int64) {
	var sum int64
	e.eachShard(held, func(s *Shard) {
		keys += s.dbs[db].count
		expires += s.dbs[db].expires
		sum += s.dbs[db].expSum
	})
	if expires > 0 {
		avgTTL = max(sum/int64(expires)*1000-now, 0)
	}
	return keys, expires, avgTTL
}

// FlushDB empties db; db < 0 empties every database.
func (e *Engine) FlushDB(db int, held bool) {
	if !held {
		e.Lock(AllShards)
		defer e.Unlock(AllShards)
	}
	for i := range e.shards {
		s := &e.shards[i]
		for d := range s.dbs {
			if db < 0 || d == db {
				s.Flush(d)
			}
		}
	}
}

// SwapDB exchanges two databases.
func (e *Engine) SwapDB(a, b int, held bool) {
	if !held {
		e.Lock(AllShards)
		defer e.Unlock(AllShards)
	}
	for i := range e.shards {
		e.shards[i].Swap(a, b)
	}
	e.shards[0].changes++ // one change, as Redis counts a SWAPDB
}

// ForEachKey calls fn for every live key of db, with every shard locked so
// the result is a consistent picture (KEYS).
func (e *Engine) ForEachKey(db int, now int64, held bool, fn func(key []byte, kind Kind)) {
	if !held {
		e.Lock(AllShards)
		defer e.Unlock(AllShards)
	}
	for i := range e.shards {
		s := &e.shards[i]
		t := &s.dbs[db]
		for _, sl := range t.slots {
			if ref := slotRef(sl); ref != 0 {
				r := s.record(ref)
				if !expired(r, now) {
					fn(recKey(r), encKind[r[0]])
				}
			}
		}
	}
}

// Scan continues a SCAN over db from cursor, offering live keys to fn until
// about count were offered, and returns the next cursor (0 when done). The
// cursor holds the shard in its low bits and the table's reverse-binary
// bucket cursor above them, so a key present for the whole scan is returned
// at least once even if tables grow or shrink in between.
func (e *Engine) Scan(db int, cursor uint64, count int, now int64, held bool, fn func(key []byte, kind Kind)) uint64 {
	if count < 1 {
		count = 1
	}
	si := int(cursor & (Shards - 1))
	v := uint32(cursor >> shardBits)
	if cursor>>shardBits > 0xffffffff {
		return 0
	}
	offered, buckets := 0, 0
	var refs []uint32
	for si < Shards {
		s := &e.shards[si]
		if !held {
			s.mu.Lock()
		}
		t := &s.dbs[db]
		for t.count > 0 {
			refs = t.scanBucket(v, refs[:0])
			for _, ref := range refs {
				r := s.record(ref)
				if !expired(r, now) {
					fn(recKey(r), encKind[r[0]])
					offered++
				}
			}
			buckets++
			v = t.nextCursor(v)
			if v == 0 || offered >= count || buckets >= count*10 {
				break
			}
		}
		if !held {
			s.mu.Unlock()
		}
		if t.count == 0 {
			v = 0
		}
		if v == 0 {
			si++
		}
		if offered >= count || buckets >= count*10 {
			break
		}
	}
	if si >= Shards {
		return 0
	}
	return uint64(v)<<shardBits | uint64(si)
}

// RandomKey returns a random live key of db, or nil when db is empty. It
// picks a shard with probability proportional to its size, then a random
// slot, as Redis's dictGetFairRandomKey approximates.
func (e *Engine) RandomKey(db int, now int64, held bool) []byte {
	for tries := 0; tries < 100; tries++ {
		var counts [Shards]int
		total := 0
		for i := range e.shards {
			s := &e.shards[i]
			if !held {
				s.mu.Lock()
			}
			counts[i] = s.dbs[db].count
			if !held {
				s.mu.Unlock()
			}
			total += counts[i]
		}
		if total == 0 {
			return nil
		}
		n := rand.IntN(total)
		si := 0
		for n >= counts[si] {
			n -= counts[si]
			si++
		}
		s := &e.shards[si]
		if !held {
			s.mu.Lock()
		}
		key, ok := s.randomKey(db, now)
		if !held {
			s.sinkEffects()
			s.mu.Unlock()
		}
		if ok {
			return key
		}
	}
	return nil
}

func (s *Shard) randomKey(db int, now int64) ([]byte, bool) {
	t := &s.dbs[db]
	if t.count == 0 {
		return nil, false
	}
	i := uint32(rand.IntN(len(t.slots)))
	for slotRef(t.slots[i]) == 0 {
		i = t.next(i)
	}
	r := s.record(slotRef(t.slots[i]))
	if expired(r, now) {
		if !s.eng.replica.Load() {
			s.expire(db, t, i)
		}
		return nil, false
	}
	return append([]byte(nil), recKey(r)...), true
}

// Move gives the value of entry src (in shard from) to key dst in database
// db of shard to, keeping its TTL, and deletes src. Both shards must be
// locked. Objects change hands without being copied.
func Move(from *Shard, src Entry, to *Shard, db int, dst []byte) {
	enc := src.rec[0]
	exp := src.ExpireAt()
	payload := recPayload(src.rec)
	var hb [12]byte
	if encHasHandle(enc) {
		// The handle is replaced; what follows it (a ban's end) is kept.
		put32(hb[:], to.newObj(from.objs[recHandle(src.rec)]))
		payload = hb[:copy(hb[4:], payload[4:])+4]
	}
	srcKey := recKey(src.rec)
	to.put(db, dst, enc, exp, payload, nil, false, false)
	// The source record is untouched by put (a different key), but its slot
	// may have moved if the table grew.
	t := &from.dbs[src.db]
	i, _, _ := from.find(t, srcKey, uint32(from.eng.hash(srcKey)))
	// The object now has a handle in to; its handle in from is let go.
	from.deleteAt(src.db, t, i)
}
