package ratelimit

import (
	"bytes"
	"math"
	"slices"
)

// RL.TOP's memory of denials: which keys were denied most often recently.
// The engine keeps one Denials per shard and counts the denials of its own
// keys, under the shard lock the deciding command already holds, so a
// denial takes no other lock and an allowed request costs nothing.
// "Recently" is the current period of TopPeriod ms (aligned on the
// server's clock) and the whole period before it: 1 to 2 minutes. Each
// period has its own Space-Saving summary of TopSlots counters (topk.go);
// at a period's end the older summary is cleared and becomes the current
// one. Memory is at most 2*TopSlots counters and key copies per shard,
// allocated at a shard's first denial, whatever the number of keys;
// nothing of it is saved or replicated.

const (
	// TopPeriod is the length of one counting period, in ms.
	TopPeriod = 60 * 1000
	// TopSlots is the number of counters per shard and period, so a
	// summary of Shards*TopSlots counters per period.
	TopSlots = 128
)

// Denials counts the denials of one shard's keys over two periods. It is
// not safe for concurrent use.
type Denials struct {
	start     int64 // the current period's start, a multiple of TopPeriod
	cur, prev *topK
}

// NewDenials returns an empty count.
func NewDenials() *Denials {
	// The first rotate clears both (empty) summaries and sets start.
	return &Denials{start: math.MinInt64, cur: newTopK(TopSlots), prev: newTopK(TopSlots)}
}

// rotate moves to the period holding now. A clock that went back leaves
// the periods as they are.
func (d *Denials) rotate(now int64) {
	p := now - now%TopPeriod
	if now < 0 && now%TopPeriod != 0 {
		p -= TopPeriod
	}
	switch {
	case p <= d.start:
	case p == d.start+TopPeriod:
		d.prev.reset()
		d.cur, d.prev = d.prev, d.cur
		d.start = p
	default:
		d.cur.reset()
		d.prev.reset()
		d.start = p
	}
}

// Note counts a denied request on key in db at time now; hash is the
// key's hash, the same for the same key every time.
func (d *Denials) Note(db int, key []byte, hash uint64, now int64) {
	d.rotate(now)
	d.cur.add(db, key, hash)
}

// Denial is a key in RL.TOP's reply: it was denied at least Count-Err and
// at most Count times in the last one to two periods.
type Denial struct {
	DB     int
	Key    []byte // the key's first TopKeyBytes bytes
	KeyLen int    // the key's full length
	Count  int64
	Err    int64
}

// Append appends the keys counted as of now with their counts over both
// periods, their bytes copied into one new buffer. A key missing from one
// period's summary may have been denied up to that summary's floor there,
// which its Count and Err include.
func (d *Denials) Append(out []Denial, now int64) []Denial {
	d.rotate(now)
	buf := make([]byte, 0, d.keyBytes())
	curFloor, prevFloor := d.cur.floor(), d.prev.floor()
	add := func(it *topItem, count, err int64) {
		start := len(buf)
		buf = append(buf, it.key...)
		out = append(out, Denial{DB: int(it.db), KeyLen: it.keyLen, Count: count, Err: err,
			Key: buf[start:len(buf):len(buf)]})
	}
	for i := range d.cur.items {
		it := &d.cur.items[i]
		count, err := it.count+prevFloor, it.err+prevFloor
		if p, ok := d.prev.lookupItem(it); ok {
			count, err = it.count+p.count, it.err+p.err
		}
		add(it, count, err)
	}
	for i := range d.prev.items {
		it := &d.prev.items[i]
		if _, ok := d.cur.lookupItem(it); !ok {
			add(it, it.count+curFloor, it.err+curFloor)
		}
	}
	return out
}

// lookupItem finds the counter of another summary's item.
func (t *topK) lookupItem(it *topItem) (*topItem, bool) {
	mask := len(t.table) - 1
	for i := int(it.hash) & mask; t.table[i] != 0; i = (i + 1) & mask {
		o := &t.items[t.table[i]-1]
		if o.hash == it.hash && o.db == it.db && o.keyLen == it.keyLen && bytes.Equal(o.key, it.key) {
			return o, true
		}
	}
	return nil, false
}

// SortDenials orders denials as RL.TOP lists them: by Count, then by
// Count-Err, then by db and key.
func SortDenials(all []Denial) {
	slices.SortFunc(all, func(a, b Denial) int {
		switch {
		case a.Count != b.Count:
			return cmpInt64(b.Count, a.Count)
		case a.Count-a.Err != b.Count-b.Err:
			return cmpInt64(b.Count-b.Err, a.Count-a.Err)
		case a.DB != b.DB:
			return a.DB - b.DB
		}
		if c := bytes.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return a.KeyLen - b.KeyLen
	})
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// keyBytes is the bytes of the keys both summaries hold.
func (d *Denials) keyBytes() int {
	n := 0
	for _, t := range [2]*topK{d.cur, d.prev} {
		for i := range t.items {
			n += len(t.items[i].key)
		}
	}
	return n
}

// MemBytes is the memory the two summaries hold.
func (d *Denials) MemBytes() int { return d.cur.memBytes() + d.prev.memBytes() }

// Floor bounds the denials over both periods of a key that Append does not
// list: what each period's summary may have let slip.
func (d *Denials) Floor() int64 { return d.cur.floor() + d.prev.floor() }
