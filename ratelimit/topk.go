package ratelimit

import "bytes"

// topK is a Space-Saving summary (Metwally, Agrawal and El Abbadi, 2005):
// it counts a stream of (db, key) items in at most size counters, whatever
// the number of distinct keys. A tracked key's count never undercounts and
// overcounts by at most its err; a key not tracked occurred at most min()
// times; and every key that occurred more than total/size times is
// tracked. RL.TOP keeps one per shard and period (top.go).
//
// A new key takes a free counter, or the smallest one (a min-heap finds
// it), inheriting that count as its error. Keys are found through an
// open-addressing table of item indexes keyed by the key's hash. Items keep
// a copy of at most TopKeyBytes bytes of their key, in buffers reused when
// an item is replaced, so that counting allocates nothing once the buffers
// are grown. It is not safe for concurrent use.
type topK struct {
	items  []topItem // at most size; slots are stable, heap moves indexes
	heap   []int32   // indexes into items, a min-heap by count
	table  []int32   // item index + 1, 0 for an empty slot; power-of-two length >= 2*size
	size   int
	total  int64 // items counted since the last reset
	evicts int64 // counters taken over from another key
}

// TopKeyBytes bounds the bytes of a key that RL.TOP keeps. A longer key
// is told apart from others by its full length and hash too, and shown
// truncated.
const TopKeyBytes = 128

type topItem struct {
	hash   uint64
	db     int32
	pos    int32  // its index in heap
	keyLen int    // the full key's length
	key    []byte // its first TopKeyBytes bytes, owned by the item
	count  int64
	err    int64
}

func newTopK(size int) *topK {
	n := 1
	for n < 2*size {
		n <<= 1
	}
	return &topK{
		items: make([]topItem, 0, size),
		heap:  make([]int32, 0, size),
		table: make([]int32, n),
		size:  size,
	}
}

func (it *topItem) is(db int, key []byte, h uint64) bool {
	return it.hash == h && int(it.db) == db && it.keyLen == len(key) &&
		bytes.Equal(it.key, key[:min(len(key), TopKeyBytes)])
}

// find returns the table slot of (db, key), or of the empty slot where it
// would go.
func (t *topK) find(db int, key []byte, h uint64) (slot int, found bool) {
	mask := len(t.table) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		v := t.table[i]
		if v == 0 {
			return i, false
		}
		if t.items[v-1].is(db, key, h) {
			return i, true
		}
	}
}

// add counts one occurrence of (db, key), whose hash is h.
func (t *topK) add(db int, key []byte, h uint64) {
	t.total++
	slot, found := t.find(db, key, h)
	if found {
		idx := t.table[slot] - 1
		t.items[idx].count++
		t.down(int(t.items[idx].pos))
		return
	}
	var idx int32
	var base int64
	if len(t.items) < t.size {
		// Within capacity: the slot keeps the key buffer of its last use.
		idx = int32(len(t.items))
		t.items = t.items[:idx+1]
		t.items[idx].pos = int32(len(t.heap))
		t.heap = append(t.heap, idx)
	} else {
		idx = t.heap[0]
		base = t.items[idx].count
		t.evicts++
		t.unlink(idx)
		// The freed table slot may have moved the one found above.
		slot, _ = t.find(db, key, h)
	}
	it := &t.items[idx]
	it.hash, it.db, it.keyLen = h, int32(db), len(key)
	it.key = keepKey(it.key, key)
	it.count, it.err = base+1, base
	t.table[slot] = idx + 1
	if base == 0 {
		t.up(int(it.pos))
	} else {
		t.down(int(it.pos))
	}
}

// keepKey copies key's first TopKeyBytes bytes into buf, growing it only
// when it is too small, in steps of 32 bytes.
func keepKey(buf, key []byte) []byte {
	n := min(len(key), TopKeyBytes)
	if cap(buf) < n {
		buf = make([]byte, 0, min((n+31)&^31, TopKeyBytes))
	}
	return append(buf[:0], key[:n]...)
}

// unlink removes an item from the table (backward-shift deletion, so that
// probes need no tombstones).
func (t *topK) unlink(idx int32) {
	mask := len(t.table) - 1
	i := int(t.items[idx].hash) & mask
	for t.table[i] != idx+1 {
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; t.table[j] != 0; j = (j + 1) & mask {
		home := int(t.items[t.table[j]-1].hash) & mask
		// Move j into the hole at i unless its home lies in (i, j].
		if (j-home)&mask >= (j-i)&mask {
			t.table[i] = t.table[j]
			i = j
		}
	}
	t.table[i] = 0
}

func (t *topK) less(a, b int) bool {
	return t.items[t.heap[a]].count < t.items[t.heap[b]].count
}

func (t *topK) swap(a, b int) {
	t.heap[a], t.heap[b] = t.heap[b], t.heap[a]
	t.items[t.heap[a]].pos = int32(a)
	t.items[t.heap[b]].pos = int32(b)
}

func (t *topK) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !t.less(i, p) {
			return
		}
		t.swap(i, p)
		i = p
	}
}

func (t *topK) down(i int) {
	n := len(t.heap)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if c+1 < n && t.less(c+1, c) {
			c++
		}
		if !t.less(c, i) {
			return
		}
		t.swap(i, c)
		i = c
	}
}

// lookup returns the counter of (db, key), if tracked.
func (t *topK) lookup(db int, key []byte, h uint64) (*topItem, bool) {
	slot, found := t.find(db, key, h)
	if !found {
		return nil, false
	}
	return &t.items[t.table[slot]-1], true
}

// floor bounds the count of a key that is not tracked: 0 until a counter
// has been taken over, the smallest count after.
func (t *topK) floor() int64 {
	if t.evicts == 0 || len(t.heap) == 0 {
		return 0
	}
	return t.items[t.heap[0]].count
}

// reset forgets every key, keeping the memory for the next period.
func (t *topK) reset() {
	for i := range t.items {
		t.items[i].count = 0
	}
	clear(t.table)
	t.items = t.items[:0]
	t.heap = t.heap[:0]
	t.total, t.evicts = 0, 0
}

// memBytes is the memory the summary holds: its arrays and key buffers.
func (t *topK) memBytes() int {
	const itemBytes = 64 // unsafe.Sizeof(topItem{})
	n := cap(t.items)*itemBytes + 4*cap(t.heap) + 4*len(t.table)
	for _, it := range t.items[:cap(t.items)] {
		n += cap(it.key)
	}
	return n
}
