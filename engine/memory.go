package engine

import (
	"math"
	"unsafe"
)

// Memory accounting. INFO's used_memory and the maxmemory check need a
// figure that is exact about what the keyspace holds, follows every write at
// once and costs one atomic load to read. The Go heap's own figures fail on
// two counts: they include garbage until the collector runs (so a burst of
// writes looks far bigger than it is, and deleting keys frees nothing until
// the next cycle, which makes eviction overshoot), and reading them takes a
// stop of the world's worth of bookkeeping (runtime/metrics walks every P).
//
// So each shard counts what it holds as it changes: live arena blocks (not
// whole chunks: a freed block is reused, and counting chunks would make
// eviction never see memory come back, as counting pages would for
// jemalloc), the hash tables' slots, heap records at their capacity,
// objects at their MemoryUsage as of their last change, the object table
// and the change log. Each change is added to the shard's count and to the
// engine's total (one atomic add, only when memory changes hands: an
// in-place rewrite, the common rate-limit case, costs nothing). Arena chunk
// slack and the collector's garbage are the process's fragmentation, seen in
// RSS, as jemalloc's is for Redis.

// MemoryUsed returns the bytes the keyspace holds, by the engine's count.
func (e *Engine) MemoryUsed() int64 { return e.mem.Load() }

// acct adds d bytes to the shard's count and the engine's.
func (s *Shard) acct(d int64) {
	if d != 0 {
		s.mem += d
		s.eng.mem.Add(d)
	}
}

// MemoryHeld returns the bytes this shard holds, by the engine's count.
func (s *Shard) MemoryHeld() int64 { return s.mem }

const objEntryBytes = int64(unsafe.Sizeof(any(nil))) + 4 // an objs entry and its objSize

// objMemory is what an object table entry holds: a heap record's capacity,
// or an object's own estimate.
func objMemory(o any) int64 {
	switch v := o.(type) {
	case []byte:
		return int64(cap(v))
	case interface{ MemoryUsage() int64 }:
		return v.MemoryUsage()
	}
	return 0
}

// setObjSize records that object h now holds n bytes. The count is kept in
// 32 bits (4 B per object, where 8 would cost a list of five timestamps 7%
// of its size), so an object of 4 GiB or more is counted as 4 GiB.
func (s *Shard) setObjSize(h uint32, n int64) {
	n = min(n, math.MaxUint32)
	s.acct(n - int64(s.objSize[h]))
	s.objSize[h] = uint32(n)
}

// growTable grows t, counting its new slots.
func (s *Shard) growTable(t *table) {
	n := len(t.slots)
	t.grow()
	s.acct(int64(len(t.slots)-n) * 8)
}

// shrinkTable shrinks t if it is sparse, counting the slots let go, and
// lets an emptied table's slot index go.
func (s *Shard) shrinkTable(t *table) {
	n := len(t.slots)
	t.shrinkIfSparse()
	s.acct(int64(len(t.slots)-n) * 8)
	if t.count == 0 {
		s.dropIndex(t)
	}
}

// appendLog appends to the change log, counting its growth.
func (s *Shard) appendLog(db int, key []byte) {
	c := cap(s.dirtyLog)
	s.dirtyLog = appendChange(s.dirtyLog, db, key)
	s.acct(int64(cap(s.dirtyLog) - c))
}
