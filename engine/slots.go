package engine

import "unsafe"

// The per-slot key index of cluster mode: for each of Redis Cluster's 16384
// hash slots, the keys it holds, so that CLUSTER COUNTKEYSINSLOT is a read
// of a count, GETKEYSINSLOT costs what it returns and a node that loses a
// slot deletes its keys without a scan of the keyspace.
//
// With Config.Slots set, a key's shard is chosen by its slot rather than by
// its hash, so every key of a slot lives under one lock and a slot's index
// is one structure, kept in the table of its database: it follows the table
// through SWAPDB and a full sync's Adopt without being rebuilt, which is why
// every database is indexed, not only database 0, which cluster mode uses.
// Per (shard, slot) pair, there would be 64 times as many structures, each
// holding a key or two.
//
// Each slot's keys are an open-addressing set of the records' arena refs:
// the map's own key bytes stay in the record, and a ref is 4 bytes, so an
// indexed key costs 5 to 10 bytes by the set's load. A list threaded
// through the records would cost every record its links, cluster or not.
// The set changes only where a key enters or leaves a table or its record
// moves (put, putHeap, deleteAt, Flush), whatever command got there.

// ClusterSlots is the number of hash slots of Redis Cluster.
const ClusterSlots = 16384

const slotsPerShard = ClusterSlots / Shards

// slotIndex holds, for the slots whose keys a shard owns (slot % Shards ==
// the shard's index), the refs of their keys in one database.
type slotIndex struct {
	sets [slotsPerShard]refSet
}

const slotIndexBytes = int64(unsafe.Sizeof(slotIndex{}))

// refSet is a set of arena refs by open addressing (0 is empty: no record
// has ref 0) with linear probing and backward-shift deletion.
type refSet struct {
	refs  []uint32
	n     int
	shift uint8 // 32 - log2(len(refs))
}

func (r *refSet) home(ref uint32) uint32 { return (ref * 0x9e3779b1) >> r.shift }

func (r *refSet) next(i uint32) uint32 { return (i + 1) & uint32(len(r.refs)-1) }

// add inserts ref and returns the bytes the set grew by.
func (r *refSet) add(ref uint32) int64 {
	var d int64
	if (r.n+1)*maxLoadDen > len(r.refs)*maxLoadNum {
		d = r.resize(max(len(r.refs)*2, 4))
	}
	i := r.home(ref)
	for r.refs[i] != 0 {
		i = r.next(i)
	}
	r.refs[i] = ref
	r.n++
	return d
}

// remove deletes ref, which must be present, and returns the bytes the set
// grew by (negative when it shrank).
func (r *refSet) remove(ref uint32) int64 {
	i := r.home(ref)
	for r.refs[i] != ref {
		i = r.next(i)
	}
	j := i
	for {
		j = r.next(j)
		x := r.refs[j]
		if x == 0 {
			break
		}
		h := r.home(x)
		// Move x into the hole at i unless its home lies cyclically in (i, j].
		if (j > i && (h <= i || h > j)) || (j < i && h <= i && h > j) {
			r.refs[i] = x
			i = j
		}
	}
	r.refs[i] = 0
	r.n--
	switch {
	case r.n == 0:
		return r.resize(0)
	case len(r.refs) > 8 && r.n*8 < len(r.refs):
		return r.resize(len(r.refs) / 4)
	}
	return 0
}

// resize rehashes into n buckets (a power of two, or 0 to let the memory
// go) and returns the change in bytes.
func (r *refSet) resize(n int) int64 {
	old := r.refs
	d := int64(n-len(old)) * 4
	if n == 0 {
		*r = refSet{}
		return d
	}
	r.refs = make([]uint32, n)
	r.shift = uint8(32 - log2(n))
	for _, x := range old {
		if x == 0 {
			continue
		}
		i := r.home(x)
		for r.refs[i] != 0 {
			i = r.next(i)
		}
		r.refs[i] = x
	}
	return d
}

func log2(n int) int {
	k := 0
	for 1<<k < n {
		k++
	}
	return k
}

// bytes is what the index holds.
func (x *slotIndex) bytes() int64 {
	n := slotIndexBytes
	for i := range x.sets {
		n += int64(len(x.sets[i].refs)) * 4
	}
	return n
}

// slotSet returns the set of the slot key belongs to in t, creating the
// table's index if need be; nil when the engine has no slots.
func (s *Shard) slotSet(t *table, key []byte) *refSet {
	if !s.eng.slots {
		return nil
	}
	if t.bySlot == nil {
		t.bySlot = new(slotIndex)
		s.acct(slotIndexBytes)
	}
	return &t.bySlot.sets[KeySlot(key)/Shards]
}

// indexAdd records that key, at ref, entered t.
func (s *Shard) indexAdd(t *table, key []byte, ref uint32) {
	if set := s.slotSet(t, key); set != nil {
		s.acct(set.add(ref))
	}
}

// indexDel records that key, at ref, left t.
func (s *Shard) indexDel(t *table, key []byte, ref uint32) {
	if set := s.slotSet(t, key); set != nil {
		s.acct(set.remove(ref))
	}
}

// indexMove records that key's record moved from ref old to ref new.
func (s *Shard) indexMove(t *table, key []byte, old, new uint32) {
	if set := s.slotSet(t, key); set != nil {
		s.acct(set.remove(old))
		s.acct(set.add(new))
	}
}

// dropIndex lets t's index go, with the table's keys.
func (s *Shard) dropIndex(t *table) {
	if t.bySlot != nil {
		s.acct(-t.bySlot.bytes())
		t.bySlot = nil
	}
}

// slotSetIn returns slot's set in database 0 of its shard s, which is
// cluster mode's only database, or nil when it has none. The caller holds
// s's lock.
func (e *Engine) slotSetIn(s *Shard, slot uint16) *refSet {
	t := &s.dbs[0]
	if !e.slots || t.bySlot == nil {
		return nil
	}
	return &t.bySlot.sets[(slot%ClusterSlots)/Shards]
}

// CountKeysInSlot returns the number of keys of database 0 in slot, expired
// ones included until they are deleted, as Redis's countKeysInSlot counts
// them; 0 when the engine has no slots. It takes the slot's shard lock
// unless the caller holds it (held: every shard, in EXEC or a script).
func (e *Engine) CountKeysInSlot(slot uint16, held bool) int {
	s := &e.shards[slot%Shards]
	if !held {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	if set := e.slotSetIn(s, slot); set != nil {
		return set.n
	}
	return 0
}

// KeysInSlot returns copies of up to max keys of database 0 in slot, in no
// particular order, expired ones included until they are deleted, as
// CLUSTER GETKEYSINSLOT returns them. It takes the slot's shard lock
// unless the caller holds it (held).
func (e *Engine) KeysInSlot(slot uint16, max int, held bool) [][]byte {
	s := &e.shards[slot%Shards]
	if !held {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	set := e.slotSetIn(s, slot)
	if set == nil || max <= 0 {
		return nil
	}
	keys := make([][]byte, 0, min(max, set.n))
	for _, ref := range set.refs {
		if len(keys) == max {
			break
		}
		if ref != 0 {
			keys = append(keys, append([]byte(nil), recKey(s.record(ref))...))
		}
	}
	return keys
}

// DeleteKeysInSlot deletes every key of database 0 in slot, expired or
// not, and returns how many it deleted: what a node that lost the slot
// does (Redis's delKeysInSlot). Each deletion is a change like DEL's: it
// counts in Changes, touches WATCH, marks the key for the next snapshot and
// joins the effect log, which is handed to the effect sink before the lock
// is released. It takes the slot's shard lock: the caller must not hold it.
func (e *Engine) DeleteKeysInSlot(slot uint16) int {
	s := &e.shards[slot%Shards]
	s.mu.Lock()
	defer s.mu.Unlock()
	set := e.slotSetIn(s, slot)
	if set == nil || set.n == 0 {
		return 0
	}
	// Deleting a key moves refs within the set but no other record, so the
	// refs taken first stay valid.
	refs := make([]uint32, 0, set.n)
	for _, ref := range set.refs {
		if ref != 0 {
			refs = append(refs, ref)
		}
	}
	t := &s.dbs[0]
	for _, ref := range refs {
		key := recKey(s.record(ref))
		i, _, _ := s.find(t, key, uint32(e.hash(key)))
		s.deleteAt(0, t, i)
	}
	s.sinkEffects()
	return len(refs)
}
