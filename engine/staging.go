package engine

// A second dataset beside the live one. A replica that loads its master's
// copy with repl-diskless-load swapdb builds it in a staging engine while
// it goes on serving its own, and swaps the two once the copy is whole; if
// the copy fails, the staging engine is dropped and the live dataset was
// never touched. A staging engine hashes keys as the live one does, so the
// swap moves each shard's tables, arena and objects as they are: a few
// field moves per shard, whatever the datasets hold.

// NewStaging returns an empty engine with e's hashing and slots, databases, clock and
// eviction settings, for Adopt.
func (e *Engine) NewStaging() *Engine {
	s := &Engine{seed: e.seed, numDB: e.numDB, slots: e.slots}
	s.policy.Store(e.policy.Load())
	s.samples.Store(e.samples.Load())
	s.lfuLog.Store(e.lfuLog.Load())
	s.lfuDecay.Store(e.lfuDecay.Load())
	s.clock.Store(e.clock.Load())
	s.replica.Store(e.replica.Load())
	for i := range s.shards {
		s.shards[i].init(s)
	}
	return s
}

// Adopt makes the dataset of src, which came from e.NewStaging and that
// nothing else uses, e's own, and leaves e's former dataset in src, to be
// dropped. It takes every shard lock unless the caller holds them (held).
// Watched keys of either dataset are touched, as a flush touches them, and
// the next snapshot rewrites every database. The bytes of the dataset let
// go count as freed (FreedBytes): it is garbage once src is dropped.
func (e *Engine) Adopt(src *Engine, held bool) {
	if !held {
		e.Lock(AllShards)
		defer e.Unlock(AllShards)
	}
	var freed int64
	for i := range e.shards {
		d, s := &e.shards[i], &src.shards[i]
		for db := range d.dbs {
			if len(d.watched) > 0 {
				d.touchAllWatched(db, -1)
			}
			d.markFlushed(db)
		}
		// The change log names keys of the dataset that goes; every
		// database is rewritten whole instead.
		d.acct(-int64(cap(d.dirtyLog)))
		d.dirtyLog, d.pending = nil, 0
		dm, sm := d.mem, s.mem
		d.dbs, s.dbs = s.dbs, d.dbs
		d.arena, s.arena = s.arena, d.arena
		d.objs, s.objs = s.objs, d.objs
		d.objSize, s.objSize = s.objSize, d.objSize
		d.freeObjs, s.freeObjs = s.freeObjs, d.freeObjs
		d.mem, s.mem = sm, dm
		d.arena.shardMem, d.arena.engineMem = &d.mem, &e.mem
		s.arena.shardMem, s.arena.engineMem = &s.mem, &src.mem
		e.mem.Add(sm - dm)
		src.mem.Add(dm - sm)
		freed += dm
		if len(d.watched) > 0 {
			for db := range d.dbs {
				d.touchAllWatched(db, -1)
			}
		}
	}
	e.freed.Add(freed)
	e.evictor.mu.Lock()
	e.evictor.pool.clear() // its candidates were keys of the old dataset
	e.evictor.mu.Unlock()
}

// TotalKeys counts the keys of every database, expired ones included
// until they are swept: Redis's dbTotalServerKeyCount. held: the caller
// holds every shard lock.
func (e *Engine) TotalKeys(held bool) int {
	n := 0
	e.eachShard(held, func(s *Shard) {
		for db := range s.dbs {
			n += s.dbs[db].count
		}
	})
	return n
}

// ValueChecker decodes values of the value codec (AppendValue's) without
// keeping them. A replica checks every value of its master's copy as it
// arrives, with the decoder that will load it, before it lets its own
// dataset go: a value it could not load is found while the old dataset is
// still whole.
type ValueChecker struct{ e *Engine }

// NewValueChecker returns a checker. It is not safe for concurrent use.
func NewValueChecker() *ValueChecker { return &ValueChecker{e: New(Config{Databases: 1})} }

var checkKey = []byte("k")

// Check decodes v as StoreValue would and reports why it cannot.
func (c *ValueChecker) Check(v []byte, lim Limits) error {
	s := &c.e.shards[0]
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.StoreValue(0, checkKey, v, lim)
	s.Remove(0, checkKey)
	return err
}
