package engine

import (
	"sync"

	"github.com/limitkv/limitkv/ratelimit"
)

// Shard owns the keys whose hash falls in it, in every database, behind one
// mutex. All methods on a Shard require the caller to hold its lock (Lock,
// or the engine's LockAll for transactions and scripts). Slices the methods
// return point into shard memory and are valid only until the next change to
// the shard.
type Shard struct {
	mu    sync.Mutex
	eng   *Engine
	dbs   []table
	arena arena

	objs     []any    // object table; index 0 is never used
	objSize  []uint32 // bytes counted for each object, see memory.go
	freeObjs []uint32

	mem int64 // bytes held, see memory.go

	scratch []byte // reused to build payloads without allocating

	watched map[string][]*Watch
	wkey    []byte

	track    bool   // record changed keys for incremental snapshots
	dirtyLog []byte // [db uvarint][key length uvarint][key] per changed key
	flushed  []bool // databases emptied or swapped since the last snapshot
	pending  int    // entries in dirtyLog

	// Effects for replication (effects.go): the changed keys not yet
	// sent, in dirtyLog's format, and where the last entry starts (-1:
	// none).
	fxLog  []byte
	fxLast int
	fxExp  []byte // keys deleted because they expired, in the same format
	// expiring: the change under way is an expiry (changed logs it in
	// fxExp).
	expiring bool
	// notes: events for keyspace notifications, see notes.go.
	notes []byte
	// quiet: the change under way is one TouchQuiet makes.
	quiet bool

	// Counters, guarded by mu.
	Hits, Misses, Expired int64
	// changes counts the changes commands made to this shard's keys, as
	// Redis's server.dirty does: one per key written or deleted, each key
	// of a flushed database; not expiries. Snapshots read it to tell what
	// they saved (rdb_changes_since_last_save).
	changes int64

	// denials counts the denials of this shard's keys for RL.TOP
	// (ratelimit_top.go); nil until the first one.
	denials *ratelimit.Denials
}

func (s *Shard) init(e *Engine) {
	s.eng = e
	s.dbs = make([]table, e.numDB)
	s.arena.init(&s.mem, &e.mem)
	s.objs = []any{nil}
	s.fxLast = -1
	s.objSize = []uint32{0}
}

// Lock and Unlock guard every other method.
func (s *Shard) Lock()   { s.mu.Lock() }
func (s *Shard) Unlock() { s.mu.Unlock() }

// record returns the record that ref points at, following stubs.
func (s *Shard) record(ref uint32) []byte {
	c := s.arena.chunks[ref>>chunkShift]
	off := int(ref&(chunkUnits-1)) << unitShift
	b := c[off:]
	if b[0] == encStub {
		return s.objs[le32(b[2:])].([]byte)
	}
	return b[:classSizes[b[1]&classMask]]
}

// find returns the slot holding key, if any, without looking at expiry.
func (s *Shard) find(t *table, key []byte, h uint32) (uint32, []byte, bool) {
	if t.count == 0 {
		return 0, nil, false
	}
	for i := h & t.mask; ; i = t.next(i) {
		sl := t.slots[i]
		ref := slotRef(sl)
		if ref == 0 {
			return 0, nil, false
		}
		if slotHash(sl) != h {
			continue
		}
		r := s.record(ref)
		if string(recKey(r)) == string(key) {
			return i, r, true
		}
	}
}

// Entry is a key found in a shard.
type Entry struct {
	rec  []byte
	db   int
	slot uint32
}

// Kind returns the value's type.
func (e Entry) Kind() Kind { return encKind[e.rec[0]] }

// ExpireAt returns the key's expiry in Unix ms, or 0 if it has none.
func (e Entry) ExpireAt() int64 { return recExpire(e.rec) }

// Key returns the key's name.
func (e Entry) Key() []byte { return recKey(e.rec) }

func expired(r []byte, now int64) bool {
	if r[1]&flagExpire == 0 {
		return false
	}
	return now > recExpire(r)
}

// Lookup finds a live key, deleting it first if it has expired. It counts
// keyspace hits and misses, as Redis does for reads.
func (s *Shard) Lookup(db int, key []byte, now int64) (Entry, bool) {
	e, ok := s.Find(db, key, now)
	if ok {
		s.Hits++
	} else {
		s.Misses++
		s.note(NoteMiss, db, key)
	}
	return e, ok
}

// Find is Lookup without the hit and miss counters, for writes. Both
// count as an access to the key (its LRU clock or LFU counter).
func (s *Shard) Find(db int, key []byte, now int64) (Entry, bool) {
	return s.findLive(db, key, now, true)
}

func (s *Shard) findLive(db int, key []byte, now int64, touch bool) (Entry, bool) {
	t := &s.dbs[db]
	h := uint32(s.eng.hash(key))
	i, r, ok := s.find(t, key, h)
	if !ok {
		return Entry{}, false
	}
	if expired(r, now) {
		if !s.eng.replica.Load() {
			s.expire(db, t, i)
		}
		return Entry{}, false
	}
	if touch {
		s.touch(r, now)
	}
	return Entry{rec: r, db: db, slot: i}, true
}

// Exists reports whether key is live, without side effects on counters or
// its access stamp.
func (s *Shard) Exists(db int, key []byte, now int64) bool {
	_, ok := s.Peek(db, key, now)
	return ok
}

// expire deletes an expired key found at slot i.
func (s *Shard) expire(db int, t *table, i uint32) {
	s.Expired++
	s.expiring = true
	if s.eng.notes.Load() != 0 {
		s.note(NoteExpired, db, recKey(s.record(slotRef(t.slots[i]))))
	}
	s.deleteAt(db, t, i)
	s.expiring = false
}

// deleteAt removes the key at slot i and frees its record.
func (s *Shard) deleteAt(db int, t *table, i uint32) {
	ref := slotRef(t.slots[i])
	r := s.record(ref)
	t.delExp(recExpire(r))
	s.changed(db, r)
	s.indexDel(t, recKey(r), ref)
	s.freeRecord(ref, r, false)
	t.removeAt(i)
	t.count--
	if t.count == 0 || t.count*8 < len(t.slots) {
		s.shrinkTable(t)
	}
}

// Delete removes key if it exists and reports whether it did.
func (s *Shard) Delete(db int, key []byte, now int64) bool {
	e, ok := s.Find(db, key, now)
	if !ok {
		return false
	}
	s.deleteAt(db, &s.dbs[db], e.slot)
	return true
}

// DeleteEntry removes a key found by Lookup or Find.
func (s *Shard) DeleteEntry(e Entry) {
	s.deleteAt(e.db, &s.dbs[e.db], e.slot)
}

// freeRecord releases a record's block, heap copy and objects.
func (s *Shard) freeRecord(ref uint32, r []byte, keepObj bool) {
	blk := s.arena.bytes(ref, 6)
	if blk[0] == encStub {
		s.freeObj(le32(blk[2:]))
	}
	if !keepObj && encHasHandle(r[0]) {
		s.freeObj(recHandle(r))
	}
	s.arena.release(ref, blk[1]&classMask)
}

func (s *Shard) newObj(o any) uint32 {
	var h uint32
	if n := len(s.freeObjs); n > 0 {
		h = s.freeObjs[n-1]
		s.freeObjs = s.freeObjs[:n-1]
		s.objs[h] = o
	} else {
		c := cap(s.objs)
		s.objs = append(s.objs, o)
		s.objSize = append(s.objSize, 0)
		s.acct(int64(cap(s.objs)-c) * objEntryBytes)
		h = uint32(len(s.objs) - 1)
	}
	s.setObjSize(h, objMemory(o))
	return h
}

func (s *Shard) freeObj(h uint32) {
	if r, ok := s.objs[h].([]byte); ok {
		s.eng.freed.Add(int64(cap(r)))
	}
	s.objs[h] = nil
	s.setObjSize(h, 0)
	s.freeObjs = append(s.freeObjs, h)
}

// replaceHeap puts r, a new heap copy of the record behind handle h, in
// place of the old one.
func (s *Shard) replaceHeap(h uint32, r []byte) {
	if old, ok := s.objs[h].([]byte); ok && cap(old) != cap(r) {
		s.eng.freed.Add(int64(cap(old)))
	}
	s.objs[h] = r
	s.setObjSize(h, int64(cap(r)))
}

// Object returns the object behind a list, hash, set or zset entry.
func (s *Shard) Object(e Entry) any {
	return s.objs[recHandle(e.rec)]
}

// put stores a record for key in database db, replacing any value it had
// (freeing the old value's objects unless keepObj is set, for rewrites that
// carry the same object handle). With fresh set it never writes over the old
// record, so head and body may point into it. It returns the new entry.
func (s *Shard) put(db int, key []byte, enc byte, expireAt int64, head, body []byte, keepObj, fresh bool) Entry {
	t := &s.dbs[db]
	h := uint32(s.eng.hash(key))
	i, old, found := s.find(t, key, h)
	if !found {
		if t.needGrow() {
			s.growTable(t)
		}
		i = h & t.mask
		for slotRef(t.slots[i]) != 0 {
			i = t.next(i)
		}
		t.count++
		ref, r := s.newRecord(key, enc, s.eng.freshStamp(s.eng.Now()), expireAt, head, body)
		t.slots[i] = mkSlot(h, ref)
		t.addExp(expireAt)
		s.indexAdd(t, key, ref)
		s.changed(db, r)
		s.note(NoteNew, db, key)
		return Entry{rec: r, db: db, slot: i}
	}
	return s.replaceAt(db, t, i, old, key, enc, expireAt, head, body, keepObj, fresh)
}

// replaceAt is put's rewrite of the key found at slot i of t, whose record
// is old: a caller that has just found the key skips put's lookup.
func (s *Shard) replaceAt(db int, t *table, i uint32, old, key []byte, enc byte, expireAt int64, head, body []byte, keepObj, fresh bool) Entry {
	h := slotHash(t.slots[i])
	ref := slotRef(t.slots[i])
	t.delExp(recExpire(old))
	t.addExp(expireAt)
	if !keepObj && old[0] != encStub && encHasHandle(old[0]) {
		s.freeObj(recHandle(old))
	}
	dirty := old[1] & flagDirty
	stamp := recStamp(old)
	size := recSize(len(key), expireAt != 0, len(head)+len(body))
	blk := s.arena.bytes(ref, 6)
	var r []byte
	switch {
	case !fresh && blk[0] != encStub && size <= maxBlock && classFor(size) == blk[1]&classMask:
		// Same block size: rewrite in place.
		r = old
		writeRecord(r, enc, blk[1]&classMask, stamp, key, expireAt, head, body)
	case !fresh && blk[0] == encStub && size > maxBlock && size <= cap(old) && size > cap(old)/2:
		// Still too big for the arena and the heap copy still fits.
		r = old[:size]
		writeRecord(r, enc, 0, stamp, key, expireAt, head, body)
		if len(old) != size {
			// Same capacity: nothing to count. (Storing a slice in
			// objs allocates its header: skipped when the length is
			// the same, as when a rate-limit state is rewritten.)
			s.objs[le32(blk[2:])] = r
		}
	default:
		var nref uint32
		nref, r = s.newRecord(key, enc, stamp, expireAt, head, body)
		t.slots[i] = mkSlot(h, nref)
		s.indexMove(t, key, ref, nref)
		// The old record's objects were either freed above or moved into r.
		if blk[0] == encStub {
			s.freeObj(le32(blk[2:]))
		}
		s.arena.release(ref, blk[1]&classMask)
	}
	r[1] |= dirty
	s.changed(db, r)
	return Entry{rec: r, db: db, slot: i}
}

// newRecord allocates and fills a record, on the heap behind a stub when
// it is too big for the arena.
func (s *Shard) newRecord(key []byte, enc byte, stamp uint32, expireAt int64, head, body []byte) (uint32, []byte) {
	size := recSize(len(key), expireAt != 0, len(head)+len(body))
	if size <= maxBlock {
		c := classFor(size)
		ref := s.arena.alloc(c)
		r := s.arena.bytes(ref, classSizes[c])
		writeRecord(r, enc, c, stamp, key, expireAt, head, body)
		return ref, r
	}
	r := make([]byte, size)
	writeRecord(r, enc, 0, stamp, key, expireAt, head, body)
	ref := s.arena.alloc(0)
	stub := s.arena.bytes(ref, 6)
	stub[0], stub[1] = encStub, 0
	put32(stub[2:], s.newObj(r))
	return ref, r
}

// putHeap stores r, a complete record too big for the arena, for key in
// database db, replacing any value the key had (and taking its access
// stamp).
func (s *Shard) putHeap(db int, key, r []byte, expireAt int64) Entry {
	t := &s.dbs[db]
	h := uint32(s.eng.hash(key))
	i, old, found := s.find(t, key, h)
	if found {
		setStamp(r, recStamp(old))
	} else {
		setStamp(r, s.eng.freshStamp(s.eng.Now()))
	}
	ref := s.arena.alloc(0)
	stub := s.arena.bytes(ref, 6)
	stub[0], stub[1] = encStub, 0
	put32(stub[2:], s.newObj(r))
	if !found {
		if t.needGrow() {
			s.growTable(t)
		}
		i = h & t.mask
		for slotRef(t.slots[i]) != 0 {
			i = t.next(i)
		}
		t.count++
		s.indexAdd(t, key, ref)
		s.note(NoteNew, db, key)
	} else {
		t.delExp(recExpire(old))
		r[1] |= old[1] & flagDirty
		s.indexMove(t, key, slotRef(t.slots[i]), ref)
		s.freeRecord(slotRef(t.slots[i]), old, false)
	}
	t.slots[i] = mkSlot(h, ref)
	t.addExp(expireAt)
	s.changed(db, r)
	return Entry{rec: r, db: db, slot: i}
}

// SetExpire changes the expiry of an existing entry (0 removes it) and
// returns the updated entry.
func (s *Shard) SetExpire(e Entry, expireAt int64) Entry {
	if e.ExpireAt() == expireAt {
		return e
	}
	// The key keeps its place in the record, so it may alias the old one; the
	// payload moves, so an inline one is copied out first and a heap one is
	// rewritten into a fresh buffer.
	payload := recPayload(e.rec)
	inline := s.arena.bytes(slotRef(s.dbs[e.db].slots[e.slot]), 1)[0] != encStub
	if inline {
		s.scratch = append(s.scratch[:0], payload...)
		payload = s.scratch
	}
	return s.put(e.db, recKey(e.rec), e.rec[0], expireAt, payload, nil, true, !inline)
}

// Touch records that an object stored under e (a list, hash, set or zset
// changed in place) was modified: snapshots pick it up and WATCH sees it.
func (s *Shard) Touch(e Entry) {
	if encHasHandle(e.rec[0]) {
		h := recHandle(e.rec)
		s.setObjSize(h, objMemory(s.objs[h]))
	}
	s.changed(e.db, e.rec)
}

// TouchQuiet is Touch for a change Redis does not signal as a change to
// the key (a consumer group's bookkeeping: XACK, XCLAIM, XGROUP): it is
// sized, saved and replicated, but a WATCH of the key holds and cached
// copies of it stay valid, as in Redis.
func (s *Shard) TouchQuiet(e Entry) {
	s.quiet = true
	s.Touch(e)
	s.quiet = false
}

// changed is called for every key that was written, deleted or expired.
func (s *Shard) changed(db int, r []byte) {
	if !s.expiring {
		s.changes++
	}
	if !s.quiet {
		if len(s.watched) > 0 {
			s.touchWatched(db, recKey(r))
		}
		s.note(NoteChanged, db, recKey(r))
	}
	if s.eng.fxSink.Load() != nil {
		s.logEffect(db, recKey(r), s.expiring)
	}
	if s.track && r[1]&flagDirty == 0 {
		r[1] |= flagDirty
		s.pending++
		s.appendLog(db, recKey(r))
	}
}

// Len returns the number of keys in database db, expired ones included
// until they are swept.
func (s *Shard) Len(db int) int { return s.dbs[db].count }

// Expires returns the number of keys with a TTL in database db and the sum
// of their expiry times in seconds.
func (s *Shard) Expires(db int) (int, int64) { return s.dbs[db].expires, s.dbs[db].expSum }

// Flush deletes every key in database db. Snapshots learn of it through a
// per-database mark rather than a log entry per key.
func (s *Shard) Flush(db int) {
	t := &s.dbs[db]
	if t.count == 0 {
		return
	}
	s.markFlushed(db)
	s.changes += int64(t.count)
	for i, sl := range t.slots {
		if ref := slotRef(sl); ref != 0 {
			r := s.record(ref)
			if len(s.watched) > 0 {
				s.touchWatched(db, recKey(r))
			}
			s.freeRecord(ref, r, false)
			t.slots[i] = 0
		}
	}
	s.acct(-int64(len(t.slots)) * 8)
	s.dropIndex(t)
	*t = table{}
	s.compactIfEmpty()
}

// compactIfEmpty drops the arena and object table when no database holds a
// key, so that FLUSHALL gives memory back.
func (s *Shard) compactIfEmpty() {
	for i := range s.dbs {
		if s.dbs[i].count != 0 {
			return
		}
	}
	s.arena.reset()
	s.acct(-int64(cap(s.objs)-1) * objEntryBytes)
	s.objs = []any{nil}
	s.objSize = []uint32{0}
	s.freeObjs = nil
}

// Swap exchanges databases a and b.
func (s *Shard) Swap(a, b int) {
	if len(s.watched) > 0 {
		s.touchAllWatched(a, b)
		s.touchAllWatched(b, a)
	}
	s.markFlushed(a)
	s.markFlushed(b)
	s.dbs[a], s.dbs[b] = s.dbs[b], s.dbs[a]
}

// MemoryUsage estimates the bytes a key costs: its slot, its record and the
// objects it owns.
func (s *Shard) MemoryUsage(e Entry) int64 {
	n := int64(12) // a slot, at the table's typical load
	blk := s.arena.bytes(slotRef(s.dbs[e.db].slots[e.slot]), 2)
	if blk[0] == encStub {
		n += 16 + int64(cap(e.rec)) + 24
	} else {
		n += int64(classSizes[blk[1]&classMask])
	}
	if e.rec[0] != encStub && encHasHandle(e.rec[0]) {
		if m, ok := s.Object(e).(interface{ MemoryUsage() int64 }); ok {
			n += m.MemoryUsage()
		}
	}
	return n
}

// Encoding names a value's representation in Redis's terms, for OBJECT
// ENCODING.
func (s *Shard) Encoding(e Entry) string {
	switch e.rec[0] {
	case encInt:
		return "int"
	case encRaw:
		if n, _ := e.StrLen(); n <= 44 {
			return "embstr"
		}
		return "raw"
	case encLimit:
		if st := limitBytes(s, e); len(st) > 0 {
			return ratelimit.KindName(st[0])
		}
		return "ratelimit"
	}
	if en, ok := s.Object(e).(interface{ Encoding() string }); ok {
		return en.Encoding()
	}
	return "unknown"
}

// kindEnc maps the kinds stored as objects to their record encodings.
var kindEnc = map[Kind]byte{KindList: encList, KindHash: encHash, KindZSet: encZSet, KindSet: encSet, KindStream: encStream}

// SetObject stores obj (a list, hash, set or zset) under key with the
// encoding for kind, replacing any value the key had, and returns the new
// entry. Objects should implement MemoryUsage() int64 and Encoding() string
// so that MEMORY USAGE and OBJECT ENCODING can describe them.
func (s *Shard) SetObject(db int, key []byte, kind Kind, obj any, expireAt int64) Entry {
	enc, ok := kindEnc[kind]
	if !ok {
		panic("engine: SetObject of kind " + kind.String())
	}
	var hb [4]byte
	put32(hb[:], s.newObj(obj))
	return s.put(db, key, enc, expireAt, hb[:], nil, false, false)
}
