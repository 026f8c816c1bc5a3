package engine

import "encoding/binary"

// Change tracking for incremental snapshots. While tracking is on, every
// key written, deleted or expired is logged once per snapshot interval: the
// record's dirty bit says it is already in the log. A snapshot takes each
// shard's log, captures the current value of every key in it (or its
// absence), and clears the dirty bits. FLUSHDB and SWAPDB mark whole
// databases instead, which the snapshot rewrites from scratch.

// TrackChanges turns change tracking on or off for every shard.
func (e *Engine) TrackChanges(on bool) {
	for i := range e.shards {
		s := &e.shards[i]
		s.mu.Lock()
		s.track = on
		if !on {
			s.acct(-int64(cap(s.dirtyLog)))
			s.dirtyLog = nil
			s.flushed = nil
		}
		s.mu.Unlock()
	}
}

func (s *Shard) markFlushed(db int) {
	if !s.track {
		return
	}
	if s.flushed == nil {
		s.flushed = make([]bool, len(s.dbs))
	}
	s.flushed[db] = true
}

// TakeFlushed returns the databases emptied or swapped since the last call
// and clears the marks. It locks every shard, so that it sees a FLUSHDB
// (which locks them all too) either on every shard or on none.
func (e *Engine) TakeFlushed() []int {
	e.Lock(AllShards)
	defer e.Unlock(AllShards)
	var out []int
	seen := make([]bool, e.numDB)
	for i := range e.shards {
		s := &e.shards[i]
		for db, f := range s.flushed {
			if f && !seen[db] {
				seen[db] = true
				out = append(out, db)
			}
			s.flushed[db] = false
		}
	}
	return out
}

// TakeChanges hands over the shard's change log, replacing it with spare
// (emptied), which lets the caller recycle buffers. The caller holds the
// shard's lock. The log is a sequence of [db uvarint][key length uvarint]
// [key]; ReadChange decodes it.
func (s *Shard) TakeChanges(spare []byte) []byte {
	log := s.dirtyLog
	s.dirtyLog = spare[:0]
	s.acct(int64(cap(spare) - cap(log)))
	s.pending = 0
	return log
}

// appendChange appends one entry to a change log.
func appendChange(log []byte, db int, key []byte) []byte {
	log = binary.AppendUvarint(log, uint64(db))
	log = binary.AppendUvarint(log, uint64(len(key)))
	return append(log, key...)
}

// PendingChanges counts the keys changed since the last snapshot took
// them. held: the caller holds every shard lock (inside EXEC or a script).
func (e *Engine) PendingChanges(held bool) int {
	n := 0
	e.eachShard(held, func(s *Shard) { n += s.pending })
	return n
}

// Changes counts the changes made to the keyspace since the engine
// started: keys written or deleted (expiries aside), keys of the
// databases flushed, SWAPDBs. It only grows; the difference between two
// readings is what Redis's server.dirty counts between them. held: the
// caller holds every shard lock.
func (e *Engine) Changes(held bool) int64 {
	var n int64
	e.eachShard(held, func(s *Shard) { n += s.changes })
	return n
}

// eachShard calls fn with each shard locked, one at a time, or with none
// taken when the caller holds them all (held): a reader of counters that
// may run inside EXEC or a script, which hold every lock already, must not
// take one again.
func (e *Engine) eachShard(held bool, fn func(s *Shard)) {
	for i := range e.shards {
		s := &e.shards[i]
		if !held {
			s.mu.Lock()
		}
		fn(s)
		if !held {
			s.mu.Unlock()
		}
	}
}

// Counters sums the shards' keyspace hits, misses and expired keys (INFO
// stats). held as for Changes.
func (e *Engine) Counters(held bool) (hits, misses, expired int64) {
	e.eachShard(held, func(s *Shard) {
		hits += s.Hits
		misses += s.Misses
		expired += s.Expired
	})
	return hits, misses, expired
}

// ResetCounters zeroes what Counters sums (CONFIG RESETSTAT).
func (e *Engine) ResetCounters(held bool) {
	e.eachShard(held, func(s *Shard) { s.Hits, s.Misses, s.Expired = 0, 0, 0 })
}

// ReadChange decodes the first entry of a change log and returns the rest.
func ReadChange(log []byte) (db int, key, rest []byte, ok bool) {
	d, n := binary.Uvarint(log)
	if n <= 0 {
		return 0, nil, nil, false
	}
	log = log[n:]
	l, n := binary.Uvarint(log)
	if n <= 0 || uint64(len(log)-n) < l {
		return 0, nil, nil, false
	}
	log = log[n:]
	return int(d), log[:l], log[l:], true
}

// Capture reads a changed key for a snapshot. It returns the live entry and
// true, clearing its dirty bit, or false when the key is gone (deleted,
// expired, or expired but not yet removed: then it is removed now). A key
// found clean was captured earlier in the same snapshot: skip says so.
func (s *Shard) Capture(db int, key []byte, now int64) (e Entry, live, skip bool) {
	e, live = s.Peek(db, key, now)
	if !live {
		return e, false, false
	}
	if e.rec[1]&flagDirty == 0 {
		return e, true, true
	}
	e.rec[1] &^= flagDirty
	return e, true, false
}

// Unchanged reports whether e, which Capture returned for key, is still
// key's live entry, unchanged since: a write, an expiry change or a
// deletion either replaces the record or marks it dirty again. A snapshot
// that copies a big value a part at a time, releasing the lock between
// parts, checks it before each part. now is the capture's.
func (s *Shard) Unchanged(db int, key []byte, e Entry, now int64) bool {
	cur, ok := s.Peek(db, key, now)
	return ok && len(e.rec) > 0 && cur.rec[1]&flagDirty == 0 &&
		len(cur.rec) == len(e.rec) && &cur.rec[0] == &e.rec[0]
}

// MarkChanged logs key as changed again, for a snapshot that failed to
// reach the disk and must be retried.
func (s *Shard) MarkChanged(db int, key []byte) {
	if !s.track {
		return
	}
	if e, ok := s.Peek(db, key, 0); ok {
		e.rec[1] &^= flagDirty
		s.changed(db, e.rec)
		return
	}
	s.appendLog(db, key)
	s.pending++
}

// Keys calls fn for up to max live keys of db from slot position from, and
// returns where to continue (-1 when done). Snapshots use it to rewrite a
// flushed database a chunk at a time, with the shard locked per chunk.
func (s *Shard) Keys(db, from, max int, now int64, fn func(e Entry)) int {
	t := &s.dbs[db]
	n := 0
	for i := from; i < len(t.slots); i++ {
		if n == max {
			return i
		}
		ref := slotRef(t.slots[i])
		if ref == 0 {
			continue
		}
		r := s.record(ref)
		if expired(r, now) {
			continue
		}
		n++
		fn(Entry{rec: r, db: db, slot: uint32(i)})
	}
	return -1
}

// Value export for snapshots.

// LimitBytes returns a rate-limit entry's state bytes.
func (s *Shard) LimitBytes(e Entry) []byte { return limitBytes(s, e) }

// MarkFlushed marks database db for a whole rewrite by the next snapshot,
// for a snapshot that failed after taking the marks.
func (s *Shard) MarkFlushed(db int) { s.markFlushed(db) }
