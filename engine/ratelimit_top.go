package engine

import (
	"bytes"
	"math"
	"slices"
)

// RL.TOP's memory of denials: which keys were denied most often recently.
// Each shard counts the denials of its own keys, under the shard lock the
// deciding command already holds, so a denial takes no other lock and an
// allowed request costs nothing. "Recently" is the current period of
// TopPeriod ms (aligned on the server's clock) and the whole period before
// it: 1 to 2 minutes. Each period has its own Space-Saving summary of
// TopSlots counters (topk.go); at a period's end the older summary is
// cleared and becomes the current one. Memory is at most 2*TopSlots
// counters and key copies per shard, allocated at a shard's first denial,
// whatever the number of keys; nothing of it is saved or replicated.

const (
	// TopPeriod is the length of one counting period, in ms.
	TopPeriod = 60 * 1000
	// TopSlots is the number of counters per shard and period, so a
	// summary of Shards*TopSlots counters per period.
	TopSlots = 128
)

type denials struct {
	start     int64 // the current period's start, a multiple of TopPeriod
	cur, prev *topK
}

func newDenials() *denials {
	// The first rotate clears both (empty) summaries and sets start.
	return &denials{start: math.MinInt64, cur: newTopK(TopSlots), prev: newTopK(TopSlots)}
}

// rotate moves to the period holding now. A clock that went back leaves
// the periods as they are.
func (d *denials) rotate(now int64) {
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

// NoteDenial counts a denied request on key in db at time now.
func (s *Shard) NoteDenial(db int, key []byte, now int64) {
	if s.denials == nil {
		s.denials = newDenials()
	}
	s.denials.rotate(now)
	s.denials.cur.add(db, key, s.eng.hash(key))
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

// appendDenials appends the shard's keys with their counts over both
// periods, keys copied into *buf. A key missing from one period's summary
// may have been denied up to that summary's floor there, which its Count
// and Err include.
func (d *denials) appendDenials(out []Denial, buf *[]byte) []Denial {
	curFloor, prevFloor := d.cur.floor(), d.prev.floor()
	add := func(it *topItem, count, err int64) {
		start := len(*buf)
		*buf = append(*buf, it.key...)
		out = append(out, Denial{DB: int(it.db), KeyLen: it.keyLen, Count: count, Err: err,
			Key: (*buf)[start:len(*buf):len(*buf)]})
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

// TopDenials returns the n keys denied most often recently, by Count
// (then by Count-Err, then by db and key), in every database. held says
// the caller holds every shard's lock (EXEC, scripts); otherwise each
// shard is locked in turn.
func (e *Engine) TopDenials(n int, now int64, held bool) []Denial {
	var all []Denial
	for i := range e.shards {
		s := &e.shards[i]
		if !held {
			s.mu.Lock()
		}
		if d := s.denials; d != nil {
			d.rotate(now)
			buf := make([]byte, 0, d.keyBytes())
			all = d.appendDenials(all, &buf)
		}
		if !held {
			s.mu.Unlock()
		}
	}
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
	return all[:min(n, len(all))]
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
func (d *denials) keyBytes() int {
	n := 0
	for _, t := range [2]*topK{d.cur, d.prev} {
		for i := range t.items {
			n += len(t.items[i].key)
		}
	}
	return n
}

// ResetDenials forgets every shard's denials (RL.TOP RESET) and frees
// their memory.
func (e *Engine) ResetDenials(held bool) {
	for i := range e.shards {
		s := &e.shards[i]
		if !held {
			s.mu.Lock()
		}
		s.denials = nil
		if !held {
			s.mu.Unlock()
		}
	}
}

// denialBytes is the memory RL.TOP's summaries hold, in every shard.
func (e *Engine) denialBytes(held bool) int {
	n := 0
	for i := range e.shards {
		s := &e.shards[i]
		if !held {
			s.mu.Lock()
		}
		if d := s.denials; d != nil {
			n += d.cur.memBytes() + d.prev.memBytes()
		}
		if !held {
			s.mu.Unlock()
		}
	}
	return n
}
