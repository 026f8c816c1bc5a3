package engine

import "slices"

// ztree orders the members of a large sorted set: an order-statistic B+tree
// whose leaves hold (score, id) entries sorted by score then member, and
// whose inner nodes keep, per child, the number of entries below it, so that
// finding a rank, the rank of a key or the first key past a bound costs
// O(log n), and walking k entries from there O(k) along the leaf chain.
//
// Against Redis's skiplist (one node of about 48 bytes allocated per
// member) a leaf stores 64 entries in three allocations at 12 bytes per
// entry, which is both smaller and kinder to caches.
//
// Separators live in inner nodes by value (score and member string), not
// as ids, so an id freed and reused for another member cannot corrupt the
// routing. Separator j of a node is a key that is above every key of child
// j-1 and at or below every key of child j; separator 0 is unused.
//
// The fan-outs are variables only so that tests can shrink them to build
// deep trees from few entries.
var (
	zLeafMax  = 64
	zLeafMin  = zLeafMax / 2
	zInnerMax = 64
	zInnerMin = zInnerMax / 2
)

// Bytes of a node and its arrays as allocated with the fan-outs above, for
// MemoryUsage.
const (
	zNodeBytes  = 144
	zLeafBytes  = zNodeBytes + 64*8 + 64*4
	zInnerBytes = zNodeBytes + 576 + 1152 + 576 + 576 // four arrays of 65
)

type znode struct {
	scores     []float64 // leaf: entry scores; inner: separator scores
	ids        []uint32  // leaf: entry ids, indexes into the set's items
	seps       []string  // inner: separator members
	kids       []*znode  // inner
	sizes      []int     // inner: entries under each child
	prev, next *znode    // leaves, in key order
}

type ztree struct {
	root   *znode
	height int // levels of inner nodes above the leaves
	n      int // entries
	leaves int
	inners int
	items  *[]zitem // the set's members by id
}

func (t *ztree) member(id uint32) string { return (*t.items)[id].member }

func (t *ztree) newLeaf() *znode {
	t.leaves++
	return &znode{scores: make([]float64, 0, zLeafMax), ids: make([]uint32, 0, zLeafMax)}
}

// newInner allows one child over the maximum: a node splits just after it
// overflows.
func (t *ztree) newInner() *znode {
	t.inners++
	return &znode{
		scores: make([]float64, 0, zInnerMax+1),
		seps:   make([]string, 0, zInnerMax+1),
		kids:   make([]*znode, 0, zInnerMax+1),
		sizes:  make([]int, 0, zInnerMax+1),
	}
}

// cmpKey orders (s1, m1) against (s2, m2).
func cmpKey(s1 float64, m1 string, s2 float64, m2 string) int {
	switch {
	case s1 < s2:
		return -1
	case s1 > s2:
		return 1
	case m1 < m2:
		return -1
	case m1 > m2:
		return 1
	}
	return 0
}

// route returns the child of inner node n whose keys may include (s, m):
// the last one whose separator is at or below it.
func (n *znode) route(s float64, m string) int {
	lo, hi := 1, len(n.kids)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if cmpKey(s, m, n.scores[mid], n.seps[mid]) < 0 {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo - 1
}

// leafSearch returns the index of the first entry of leaf n at or above
// (s, m).
func (t *ztree) leafSearch(n *znode, s float64, m string) int {
	lo, hi := 0, len(n.scores)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		es := n.scores[mid]
		if es < s || (es == s && t.member(n.ids[mid]) < m) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// insert adds the entry (s, id), whose key must not be in the tree.
func (t *ztree) insert(s float64, id uint32) {
	if t.root == nil {
		t.root = t.newLeaf()
	}
	m := t.member(id)
	r, rsize, rs, rm := t.insertAt(t.root, t.height, s, m, id, true, true)
	t.n++
	if r == nil {
		return
	}
	root := t.newInner()
	root.kids = append(root.kids, t.root, r)
	root.sizes = append(root.sizes, t.n-rsize, rsize)
	root.scores = append(root.scores, 0, rs)
	root.seps = append(root.seps, "", rm)
	t.root = root
	t.height++
}

// insertAt inserts into the subtree n of height h. When n splits it returns
// the new right sibling, the entries under it and its separator. edgeL and
// edgeR say n is the leftmost or rightmost node of its level: a node that
// overflows at the outer edge of the tree splits unevenly, leaving the full
// part full, so that keys arriving in order (timestamps) fill nodes
// completely instead of leaving each half empty.
func (t *ztree) insertAt(n *znode, h int, s float64, m string, id uint32, edgeL, edgeR bool) (*znode, int, float64, string) {
	if h == 0 {
		i := t.leafSearch(n, s, m)
		if len(n.scores) < zLeafMax {
			n.scores = slices.Insert(n.scores, i, s)
			n.ids = slices.Insert(n.ids, i, id)
			return nil, 0, 0, ""
		}
		mid := len(n.scores) / 2
		switch {
		case i == len(n.scores) && edgeR:
			mid = len(n.scores)
		case i == 0 && edgeL:
			mid = 0
		}
		r := t.newLeaf()
		r.scores = append(r.scores, n.scores[mid:]...)
		r.ids = append(r.ids, n.ids[mid:]...)
		n.scores, n.ids = n.scores[:mid], n.ids[:mid]
		if i < mid || (i == mid && len(n.scores) < len(r.scores)) {
			n.scores = slices.Insert(n.scores, i, s)
			n.ids = slices.Insert(n.ids, i, id)
		} else {
			r.scores = slices.Insert(r.scores, i-mid, s)
			r.ids = slices.Insert(r.ids, i-mid, id)
		}
		r.prev, r.next = n, n.next
		if n.next != nil {
			n.next.prev = r
		}
		n.next = r
		return r, len(r.scores), r.scores[0], t.member(r.ids[0])
	}
	j := n.route(s, m)
	last := len(n.kids) - 1
	r, rsize, rs, rm := t.insertAt(n.kids[j], h-1, s, m, id, edgeL && j == 0, edgeR && j == last)
	n.sizes[j]++
	if r == nil {
		return nil, 0, 0, ""
	}
	n.sizes[j] -= rsize
	n.kids = slices.Insert(n.kids, j+1, r)
	n.sizes = slices.Insert(n.sizes, j+1, rsize)
	n.scores = slices.Insert(n.scores, j+1, rs)
	n.seps = slices.Insert(n.seps, j+1, rm)
	if len(n.kids) <= zInnerMax {
		return nil, 0, 0, ""
	}
	mid := len(n.kids) / 2
	switch {
	case j == last && edgeR:
		mid = len(n.kids) - 1
	case j == 0 && edgeL:
		mid = 1
	}
	nr := t.newInner()
	nr.kids = append(nr.kids, n.kids[mid:]...)
	nr.sizes = append(nr.sizes, n.sizes[mid:]...)
	nr.scores = append(nr.scores, n.scores[mid:]...)
	nr.seps = append(nr.seps, n.seps[mid:]...)
	size := 0
	for _, k := range nr.sizes {
		size += k
	}
	n.truncate(mid)
	return nr, size, nr.scores[0], nr.seps[0]
}

// truncate drops an inner node's children from i on, clearing the
// pointers so that the collector does not keep them alive.
func (n *znode) truncate(i int) {
	clear(n.kids[i:])
	clear(n.seps[i:])
	n.kids, n.seps = n.kids[:i], n.seps[:i]
	n.sizes, n.scores = n.sizes[:i], n.scores[:i]
}

// delete removes the entry (s, id), which must be in the tree.
func (t *ztree) delete(s float64, id uint32) {
	t.deleteAt(t.root, t.height, s, t.member(id))
	t.n--
	t.shrinkRoot()
}

func (t *ztree) deleteAt(n *znode, h int, s float64, m string) {
	if h == 0 {
		i := t.leafSearch(n, s, m)
		n.scores = slices.Delete(n.scores, i, i+1)
		n.ids = slices.Delete(n.ids, i, i+1)
		return
	}
	j := n.route(s, m)
	t.deleteAt(n.kids[j], h-1, s, m)
	n.sizes[j]--
	t.rebalance(n, j, h-1)
}

// removeRange deletes the entries of ranks [lo, hi), calling gone for each
// id before its entry goes. It works one leaf at a time, so removing k
// entries costs O(k + (k/zLeafMax + 1) log n).
func (t *ztree) removeRange(lo, hi int, gone func(id uint32)) {
	for lo < hi {
		k := t.deleteRun(t.root, t.height, lo, hi-lo, gone)
		t.n -= k
		hi -= k
		t.shrinkRoot()
	}
}

// deleteRun removes up to count entries from rank on, all from the leaf
// holding that rank, and returns how many it removed.
func (t *ztree) deleteRun(n *znode, h int, rank, count int, gone func(id uint32)) int {
	if h == 0 {
		end := min(len(n.scores), rank+count)
		for _, id := range n.ids[rank:end] {
			gone(id)
		}
		n.scores = slices.Delete(n.scores, rank, end)
		n.ids = slices.Delete(n.ids, rank, end)
		return end - rank
	}
	j := 0
	for rank >= n.sizes[j] {
		rank -= n.sizes[j]
		j++
	}
	k := t.deleteRun(n.kids[j], h-1, rank, count, gone)
	n.sizes[j] -= k
	t.rebalance(n, j, h-1)
	return k
}

// shrinkRoot removes root levels left with a single child, and the root
// once the tree is empty.
func (t *ztree) shrinkRoot() {
	for t.height > 0 && len(t.root.kids) <= 1 {
		t.inners--
		if len(t.root.kids) == 0 {
			t.root, t.height = nil, 0
			return
		}
		t.root = t.root.kids[0]
		t.height--
	}
	if t.height == 0 && t.root != nil && len(t.root.scores) == 0 {
		t.root = nil
		t.leaves--
	}
}

// rebalance restores the fill of child j of n (of height kh) after
// deletions: an empty child is dropped; one under the minimum is merged
// with a sibling or, when both together would overflow, shares their
// entries evenly with it, which leaves both at or above the minimum.
// Nodes at the ends of a level may stay under it (see insertAt), so a
// merge with one of them can end under it too; that costs a little fill,
// never correctness.
func (t *ztree) rebalance(n *znode, j, kh int) {
	minFill, maxFill := zLeafMin, zLeafMax
	if kh > 0 {
		minFill, maxFill = zInnerMin, zInnerMax
	}
	k := len(n.kids[j].scores)
	switch {
	case k == 0:
		t.drop(n, j, kh)
	case k >= minFill || len(n.kids) < 2:
	default:
		l := max(j-1, 0)
		if len(n.kids[l].scores)+len(n.kids[l+1].scores) <= maxFill {
			t.merge(n, l, kh)
		} else {
			t.share(n, l, kh)
		}
	}
}

// drop removes the empty child j of n.
func (t *ztree) drop(n *znode, j, kh int) {
	k := n.kids[j]
	if kh == 0 {
		if k.prev != nil {
			k.prev.next = k.next
		}
		if k.next != nil {
			k.next.prev = k.prev
		}
		t.leaves--
	} else {
		t.inners--
	}
	n.kids = slices.Delete(n.kids, j, j+1)
	n.sizes = slices.Delete(n.sizes, j, j+1)
	n.scores = slices.Delete(n.scores, j, j+1)
	n.seps = slices.Delete(n.seps, j, j+1)
}

// merge moves child l+1 of n into child l.
func (t *ztree) merge(n *znode, l, kh int) {
	L, R := n.kids[l], n.kids[l+1]
	if kh == 0 {
		L.scores = append(L.scores, R.scores...)
		L.ids = append(L.ids, R.ids...)
		L.next = R.next
		if R.next != nil {
			R.next.prev = L
		}
		t.leaves--
	} else {
		L.kids = append(L.kids, R.kids...)
		L.sizes = append(L.sizes, R.sizes...)
		L.scores = append(append(L.scores, n.scores[l+1]), R.scores[1:]...)
		L.seps = append(append(L.seps, n.seps[l+1]), R.seps[1:]...)
		t.inners--
	}
	n.sizes[l] += n.sizes[l+1]
	n.kids = slices.Delete(n.kids, l+1, l+2)
	n.sizes = slices.Delete(n.sizes, l+1, l+2)
	n.scores = slices.Delete(n.scores, l+1, l+2)
	n.seps = slices.Delete(n.seps, l+1, l+2)
}

// share evens out the entries (or children) of children l and l+1 of n.
func (t *ztree) share(n *znode, l, kh int) {
	L, R := n.kids[l], n.kids[l+1]
	want := (len(L.scores) + len(R.scores)) / 2
	if kh == 0 {
		if len(L.scores) > want {
			R.scores = slices.Insert(R.scores, 0, L.scores[want:]...)
			R.ids = slices.Insert(R.ids, 0, L.ids[want:]...)
			L.scores, L.ids = L.scores[:want], L.ids[:want]
		} else {
			k := want - len(L.scores)
			L.scores = append(L.scores, R.scores[:k]...)
			L.ids = append(L.ids, R.ids[:k]...)
			R.scores = slices.Delete(R.scores, 0, k)
			R.ids = slices.Delete(R.ids, 0, k)
		}
		n.sizes[l], n.sizes[l+1] = len(L.scores), len(R.scores)
		n.scores[l+1], n.seps[l+1] = R.scores[0], t.member(R.ids[0])
		return
	}
	moved := 0
	if len(L.kids) > want {
		for _, k := range L.sizes[want:] {
			moved += k
		}
		// R's first child gets the separator that stood between L and R;
		// the first child moved over brings its own, which now stands
		// between them.
		R.scores[0], R.seps[0] = n.scores[l+1], n.seps[l+1]
		R.kids = slices.Insert(R.kids, 0, L.kids[want:]...)
		R.sizes = slices.Insert(R.sizes, 0, L.sizes[want:]...)
		R.scores = slices.Insert(R.scores, 0, L.scores[want:]...)
		R.seps = slices.Insert(R.seps, 0, L.seps[want:]...)
		L.truncate(want)
		n.scores[l+1], n.seps[l+1] = R.scores[0], R.seps[0]
		n.sizes[l] -= moved
		n.sizes[l+1] += moved
		return
	}
	k := want - len(L.kids)
	for _, c := range R.sizes[:k] {
		moved += c
	}
	L.kids = append(L.kids, R.kids[:k]...)
	L.sizes = append(L.sizes, R.sizes[:k]...)
	L.scores = append(append(L.scores, n.scores[l+1]), R.scores[1:k]...)
	L.seps = append(append(L.seps, n.seps[l+1]), R.seps[1:k]...)
	n.scores[l+1], n.seps[l+1] = R.scores[k], R.seps[k]
	R.kids = slices.Delete(R.kids, 0, k)
	R.sizes = slices.Delete(R.sizes, 0, k)
	R.scores = slices.Delete(R.scores, 0, k)
	R.seps = slices.Delete(R.seps, 0, k)
	n.sizes[l] += moved
	n.sizes[l+1] -= moved
}

// seek returns the leaf holding rank r (< n) and the index in it.
func (t *ztree) seek(r int) (*znode, int) {
	n := t.root
	for h := t.height; h > 0; h-- {
		j := 0
		for r >= n.sizes[j] {
			r -= n.sizes[j]
			j++
		}
		n = n.kids[j]
	}
	return n, r
}

// search returns the rank of the first entry at or above (s, m) or, with
// past set, of the first entry whose score is above s. Members are only
// looked at among equal scores.
func (t *ztree) search(s float64, m string, past bool) int {
	if t.root == nil {
		return 0
	}
	n, rank := t.root, 0
	for h := t.height; h > 0; h-- {
		lo, hi := 1, len(n.kids)
		for lo < hi {
			mid := int(uint(lo+hi) >> 1)
			es := n.scores[mid]
			if (es > s) || (es == s && !past && n.seps[mid] >= m) {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		for _, k := range n.sizes[:lo-1] {
			rank += k
		}
		n = n.kids[lo-1]
	}
	lo, hi := 0, len(n.scores)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		es := n.scores[mid]
		if (es > s) || (es == s && !past && t.member(n.ids[mid]) >= m) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return rank + lo
}

// searchMember returns the rank of the first entry whose member is above v
// (strict) or at or above it, assuming members ascend with rank, as lex
// ranges do.
func (t *ztree) searchMember(v []byte, strict bool) int {
	if t.root == nil {
		return 0
	}
	n, rank := t.root, 0
	for h := t.height; h > 0; h-- {
		lo, hi := 1, len(n.kids)
		for lo < hi {
			mid := int(uint(lo+hi) >> 1)
			if memberReached(n.seps[mid], v, strict) {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		for _, k := range n.sizes[:lo-1] {
			rank += k
		}
		n = n.kids[lo-1]
	}
	lo, hi := 0, len(n.scores)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if memberReached(t.member(n.ids[mid]), v, strict) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return rank + lo
}

func memberReached(m string, v []byte, strict bool) bool {
	if strict {
		return m > string(v)
	}
	return m >= string(v)
}
