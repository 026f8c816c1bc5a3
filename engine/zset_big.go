package engine

import "hash/maphash"

// zbig is the large encoding ("skiplist" in OBJECT ENCODING): members live
// in a slab of items addressed by id; an open-addressing index (the same
// table the keyspace uses) maps a member's hash to its id for O(1) ZSCORE,
// and lets ZSCAN use SCAN's reverse-binary cursor; the B+tree in
// zset_tree.go orders (score, id) entries for ranks and ranges.
type zbig struct {
	items       []zitem  // by id; freed ids have an empty item
	free        []uint32 // freed ids, reused first
	index       table    // member hash → id+1
	tree        ztree
	memberBytes int
}

// zbigBytes is a zbig's allocation class, for MemoryUsage.
const zbigBytes = 176

type zitem struct {
	member string // shared with the tree's separators, never copied
	score  float64
}

var zsetSeed = maphash.MakeSeed()

func zhash(m []byte) uint32    { return uint32(maphash.Bytes(zsetSeed, m) >> 32) }
func zhashStr(m string) uint32 { return uint32(maphash.String(zsetSeed, m) >> 32) }

// live returns the number of members.
func (b *zbig) live() int { return len(b.items) - len(b.free) }

func newZBig(hint int) *zbig {
	b := &zbig{items: make([]zitem, 0, hint)}
	b.tree.items = &b.items
	return b
}

// lookup returns member's id and its slot in the index.
func (b *zbig) lookup(member []byte) (id, slot uint32, ok bool) {
	t := &b.index
	if t.count == 0 {
		return 0, 0, false
	}
	h := zhash(member)
	for i := h & t.mask; ; i = t.next(i) {
		sl := t.slots[i]
		ref := slotRef(sl)
		if ref == 0 {
			return 0, 0, false
		}
		if slotHash(sl) == h && b.items[ref-1].member == string(member) {
			return ref - 1, i, true
		}
	}
}

// slotOf returns the index slot of a member known to be present.
func (b *zbig) slotOf(id uint32) uint32 {
	t := &b.index
	h := zhashStr(b.items[id].member)
	i := h & t.mask
	for slotRef(t.slots[i]) != id+1 {
		i = t.next(i)
	}
	return i
}

// add inserts a member known to be absent.
func (b *zbig) add(member []byte, score float64) {
	var id uint32
	if n := len(b.free); n > 0 {
		id = b.free[n-1]
		b.free = b.free[:n-1]
	} else {
		id = uint32(len(b.items))
		b.items = append(b.items, zitem{})
	}
	b.items[id] = zitem{member: string(member), score: score}
	b.memberBytes += len(member)
	t := &b.index
	if t.needGrow() {
		t.grow()
	}
	h := zhash(member)
	i := h & t.mask
	for slotRef(t.slots[i]) != 0 {
		i = t.next(i)
	}
	t.slots[i] = mkSlot(h, id+1)
	t.count++
	b.tree.insert(score, id)
}

func (b *zbig) setScore(member []byte, score float64) {
	id, _, _ := b.lookup(member)
	b.tree.delete(b.items[id].score, id)
	b.items[id].score = score
	b.tree.insert(score, id)
}

func (b *zbig) rank(member []byte) (int, bool) {
	id, _, ok := b.lookup(member)
	if !ok {
		return 0, false
	}
	return b.tree.search(b.items[id].score, b.items[id].member, false), true
}

func (b *zbig) remove(member []byte) bool {
	id, slot, ok := b.lookup(member)
	if !ok {
		return false
	}
	b.tree.delete(b.items[id].score, id)
	b.unindex(slot)
	b.release(id)
	b.compactIfSparse()
	return true
}

func (b *zbig) removeRange(lo, hi int) {
	b.tree.removeRange(lo, hi, func(id uint32) {
		b.unindex(b.slotOf(id))
		b.release(id)
	})
	b.compactIfSparse()
}

func (b *zbig) unindex(slot uint32) {
	t := &b.index
	t.removeAt(slot)
	t.count--
	if t.count*8 < len(t.slots) {
		t.shrinkIfSparse()
	}
}

func (b *zbig) release(id uint32) {
	b.memberBytes -= len(b.items[id].member)
	b.items[id] = zitem{}
	b.free = append(b.free, id)
}

// compactIfSparse rebuilds the set once three quarters of its ids are
// free, so that a set that shrank gives its slab back. Each rebuild costs
// O(n) and follows at least 3n deletions.
func (b *zbig) compactIfSparse() {
	if len(b.items) < 1024 || b.live()*4 > len(b.items) {
		return
	}
	nb := newZBig(b.live())
	b.walk(0, b.tree.n, false, nil, func(m []byte, s float64) bool {
		nb.add(m, s)
		return true
	})
	*b = *nb
	b.tree.items = &b.items
}

// walk is Range for the large encoding; members are copied into buf.
func (b *zbig) walk(lo, hi int, rev bool, buf []byte, fn func([]byte, float64) bool) {
	start := lo
	if rev {
		start = hi - 1
	}
	n, i := b.tree.seek(start)
	for k := hi - lo; ; {
		buf = append(buf[:0], b.items[n.ids[i]].member...)
		if !fn(buf, n.scores[i]) {
			return
		}
		if k--; k == 0 {
			return
		}
		if rev {
			if i--; i < 0 {
				n = n.prev
				i = len(n.scores) - 1
			}
		} else if i++; i == len(n.scores) {
			n, i = n.next, 0
		}
	}
}

// lexSpan returns the ranks [lo, hi) of the members in r, found by binary
// search: it assumes members ascend with rank, which holds when all scores
// are equal, the case lex ranges are meant for.
func (b *zbig) lexSpan(r *LexRange) (lo, hi int) {
	switch r.Min.Inf {
	case -1:
		lo = 0
	case 1:
		lo = b.tree.n
	default:
		lo = b.tree.searchMember(r.Min.Value, r.Min.Excl)
	}
	switch r.Max.Inf {
	case -1:
		hi = 0
	case 1:
		hi = b.tree.n
	default:
		hi = b.tree.searchMember(r.Max.Value, !r.Max.Excl)
	}
	return lo, hi
}

// scan visits index buckets from cursor as Redis's dictScan does, until
// it has visited count*10 buckets or emitted members and scores filling
// count reply slots, and returns the next cursor.
func (b *zbig) scan(cursor uint64, count int, buf []byte, fn func([]byte, float64)) uint64 {
	t := &b.index
	if t.count == 0 {
		return 0
	}
	v := uint32(cursor)
	var refBuf [16]uint32
	slots, buckets := 0, 0
	for {
		for _, ref := range t.scanBucket(v, refBuf[:0]) {
			it := &b.items[ref-1]
			buf = append(buf[:0], it.member...)
			fn(buf, it.score)
			slots += 2
		}
		buckets++
		v = t.nextCursor(v)
		if v == 0 || buckets >= count*10 || slots >= count {
			return uint64(v)
		}
	}
}

func (b *zbig) memoryUsage() int64 {
	n := int64(zbigBytes)
	n += int64(cap(b.items))*24 + int64(cap(b.free))*4 + int64(len(b.index.slots))*8
	// Member strings: their bytes, rounded up by the allocator.
	n += int64(b.memberBytes) + int64(b.live())*4
	n += int64(b.tree.leaves)*zLeafBytes + int64(b.tree.inners)*zInnerBytes
	return n
}
