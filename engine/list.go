package engine

import (
	"encoding/binary"
	"iter"
	"math"
	"math/bits"
	"strconv"
)

// A List is a Redis list: byte strings in order, cheap to reach at both
// ends.
//
// Elements are packed into byte chunks as entries:
//
//	header   uvarint; odd: an integer, zigzag(v)<<1 | 1, and no payload;
//	         even: a string of header>>1 - 1 bytes, the payload
//	payload
//	backlen  the length of header and payload, laid out to be read from its
//	         last byte backwards, so that a chunk can be walked from its end
//
// Elements that are the canonical decimal form of an int64 (as ParseInt
// reads them) are stored as integers, so a 13-digit millisecond timestamp
// takes 7 bytes instead of 14 and formats back to the very same bytes;
// beyond ±2^62 the tag bit does not fit and they stay strings. No header is
// zero, so a zero byte where an entry would start ends a list.
//
// A list whose entries fit in inlineCap bytes keeps them inside the List
// itself, zero padded: the List is then one 48-byte allocation in all,
// which is what millions of short lists (five login times per user) cost.
// A longer list keeps a deque of chunks, each holding at most
// chunkMaxEntries entries and chunkMaxBytes bytes (a single larger element
// gets a chunk of its own), so pushes and pops at either end are O(1)
// amortised and an insert in the middle moves at most one chunk.
//
// For snapshots, All yields the elements in order; NewList and PushTail
// rebuild a list from them.
type List struct {
	big    *listChunks // nil while the entries fit in inline
	inline [inlineCap]byte
}

const (
	inlineCap       = 40
	chunkMaxBytes   = 4096
	chunkMaxEntries = 128

	// Sizes of the structs below, for MemoryUsage (list_test.go checks them).
	listStructSize   = 48
	chunksStructSize = 48
	chunkStructSize  = 32
)

// listChunks is the deque of a long list. slots is a gap buffer: the chunks
// are slots[lo:hi], with room on both sides so that chunks are added at
// either end without moving the others.
type listChunks struct {
	slots  []listChunk
	lo, hi int
	count  int // entries in all chunks
}

type listChunk struct {
	b []byte // entries
	n int    // number of entries in b
}

// NewList returns an empty list.
func NewList() *List { return &List{} }

// Encoding names the representation as OBJECT ENCODING reports it: Redis
// 7.0 reports every list as a quicklist, which this is.
func (l *List) Encoding() string { return "quicklist" }

// MemoryUsage estimates the bytes the list holds, counting each allocation
// at the size the Go allocator rounds it to.
func (l *List) MemoryUsage() int64 {
	n := int64(listStructSize)
	if q := l.big; q != nil {
		n += allocSize(chunksStructSize) + allocSize(cap(q.slots)*chunkStructSize)
		for _, ch := range q.live() {
			n += allocSize(cap(ch.b))
		}
	}
	return n
}

// Len returns the number of elements.
func (l *List) Len() int {
	if l.big != nil {
		return l.big.count
	}
	return countEntries(l.inline[:])
}

// Index returns element i (0 <= i < Len(), counted from the head). An
// integer element is formatted into scratch; the result is valid until the
// list changes.
func (l *List) Index(i int, scratch []byte) ([]byte, bool) {
	if i < 0 {
		return nil, false
	}
	var b []byte
	off := 0
	if l.big == nil {
		// One walk both finds the entry and checks the bound.
		b = l.inline[:]
		for ; i > 0 && off < inlineCap && b[off] != 0; i-- {
			off = entryEnd(b, off)
		}
		if off == inlineCap || b[off] == 0 {
			return nil, false
		}
	} else {
		if i >= l.big.count {
			return nil, false
		}
		var ci int
		ci, _, off = l.locate(i)
		b = l.chunkBytes(ci)
	}
	h, p, _ := entryAt(b, off)
	return entryValue(h, p, scratch), true
}

// Ascend yields the elements from index from to the tail, with their
// indexes. Integer elements are formatted into scratch (or a buffer of the
// iterator's own when scratch is too small); each slice is valid until the
// next step, and the list must not change during the iteration.
func (l *List) Ascend(from int, scratch []byte) iter.Seq2[int, []byte] {
	return func(yield func(int, []byte) bool) {
		n := l.Len()
		if from < 0 {
			from = 0
		}
		if from >= n {
			return
		}
		scratch = intScratch(scratch)
		ci, _, off := l.locate(from)
		b := l.chunkBytes(ci)
		for i := from; i < n; i++ {
			if off == len(b) {
				ci++
				b, off = l.chunkBytes(ci), 0
			}
			h, p, next := entryAt(b, off)
			if !yield(i, entryValue(h, p, scratch)) {
				return
			}
			off = next
		}
	}
}

// Descend yields the elements from index from down to the head, with their
// indexes, under the same rules as Ascend.
func (l *List) Descend(from int, scratch []byte) iter.Seq2[int, []byte] {
	return func(yield func(int, []byte) bool) {
		if n := l.Len(); from >= n {
			from = n - 1
		}
		if from < 0 {
			return
		}
		scratch = intScratch(scratch)
		ci, _, off := l.locate(from)
		b := l.chunkBytes(ci)
		for i := from; ; i-- {
			h, p, _ := entryAt(b, off)
			if !yield(i, entryValue(h, p, scratch)) || i == 0 {
				return
			}
			if off == 0 {
				ci--
				b = l.chunkBytes(ci)
				off = len(b)
			}
			off = entryStart(b, off)
		}
	}
}

// All yields every element from head to tail, for snapshots, under the
// rules of Ascend.
func (l *List) All() iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		for _, v := range l.Ascend(0, nil) {
			if !yield(v) {
				return
			}
		}
	}
}

// Positions yields the indexes of the elements equal to v, scanning from
// the head (or from the tail) and looking at no more than maxlen elements
// (0: all of them). It is LPOS's search.
func (l *List) Positions(v []byte, fromTail bool, maxlen int) iter.Seq[int] {
	return func(yield func(int) bool) {
		nd := needleOf(v)
		scanned := 0
		l.walk(fromTail, func(_ int, b []byte, off, i int) bool {
			if maxlen > 0 && scanned == maxlen {
				return false
			}
			scanned++
			return !nd.matches(b, off) || yield(i)
		})
	}
}

// PushHead adds v before the first element.
func (l *List) PushHead(v []byte) {
	h, p := encodeElement(v)
	l.insertAt(0, 0, h, p)
}

// PushTail adds v after the last element.
func (l *List) PushTail(v []byte) {
	h, p := encodeElement(v)
	ci, off := l.endPos()
	l.insertAt(ci, off, h, p)
}

// PopHead removes the first element and returns it, copied into scratch.
func (l *List) PopHead(scratch []byte) ([]byte, bool) {
	if l.big == nil {
		if l.inline[0] == 0 {
			return nil, false
		}
		h, p, next := entryAt(l.inline[:], 0)
		v := append(scratch[:0], entryValue(h, p, scratch)...)
		used := countBytes(l.inline[:])
		copy(l.inline[:], l.inline[next:used])
		clear(l.inline[used-next : used])
		return v, true
	}
	q := l.big
	ch := &q.slots[q.lo]
	h, p, next := entryAt(ch.b, 0)
	v := append(scratch[:0], entryValue(h, p, scratch)...)
	// Reslicing instead of moving the rest keeps the pop O(1); the bytes
	// cut off are freed with the chunk.
	ch.b = ch.b[next:]
	l.popped(0)
	return v, true
}

// PopTail removes the last element and returns it, copied into scratch.
func (l *List) PopTail(scratch []byte) ([]byte, bool) {
	if l.big == nil {
		used := countBytes(l.inline[:])
		if used == 0 {
			return nil, false
		}
		off := entryStart(l.inline[:], used)
		h, p, _ := entryAt(l.inline[:], off)
		v := append(scratch[:0], entryValue(h, p, scratch)...)
		clear(l.inline[off:used])
		return v, true
	}
	q := l.big
	ci := q.hi - q.lo - 1
	ch := &q.slots[q.lo+ci]
	off := entryStart(ch.b, len(ch.b))
	h, p, _ := entryAt(ch.b, off)
	v := append(scratch[:0], entryValue(h, p, scratch)...)
	ch.b = ch.b[:off]
	l.popped(ci)
	return v, true
}

// popped accounts for an entry taken from chunk ci at an end of the list.
func (l *List) popped(ci int) {
	q := l.big
	q.slots[q.lo+ci].n--
	q.count--
	if q.slots[q.lo+ci].n == 0 {
		q.removeChunks(ci, ci+1)
	} else {
		l.mergeFrom(max(ci-1, 0), 1)
	}
	l.shrinkToInline()
}

// Set replaces element i (0 <= i < Len()) with v and reports whether i was
// in range.
func (l *List) Set(i int, v []byte) bool {
	if i < 0 || i >= l.Len() {
		return false
	}
	h, p := encodeElement(v)
	size := entrySize(h, len(p))
	ci, _, off := l.locate(i)
	b := l.chunkBytes(ci)
	next := entryEnd(b, off)
	old := next - off
	switch {
	case l.big == nil:
		used := countBytes(l.inline[:])
		if used-old+size <= inlineCap {
			copy(l.inline[off+size:], l.inline[next:used])
			if size < old {
				clear(l.inline[used-old+size : used])
			}
			putEntry(l.inline[off:off+size], h, p)
			return true
		}
	default:
		ch := &l.big.slots[l.big.lo+ci]
		if ch.n == 1 || len(ch.b)-old+size <= chunkMaxBytes {
			ch.resize(off, old, size)
			putEntry(ch.b[off:off+size], h, p)
			if size < old {
				l.shrinkToInline()
			}
			return true
		}
	}
	// The chunk would overflow: take the old entry out and insert the new
	// one as any insert, which splits the chunk or starts a new one.
	l.RemoveRange(i, 1)
	if i == l.Len() {
		ci, off = l.endPos()
	} else {
		ci, _, off = l.locate(i)
	}
	l.insertAt(ci, off, h, p)
	return true
}

// Insert puts v before (or after) the first element equal to pivot and
// reports whether pivot was found.
func (l *List) Insert(pivot, v []byte, after bool) bool {
	nd := needleOf(pivot)
	at, atChunk, found := 0, 0, false
	l.walk(false, func(ci int, b []byte, off, _ int) bool {
		if !nd.matches(b, off) {
			return true
		}
		at, atChunk, found = off, ci, true
		if after {
			at = entryEnd(b, off)
		}
		return false
	})
	if found {
		h, p := encodeElement(v)
		l.insertAt(atChunk, at, h, p)
	}
	return found
}

// RemoveRange deletes n elements from index start on; the range is clipped
// to the list.
func (l *List) RemoveRange(start, n int) {
	if start < 0 {
		n += start
		start = 0
	}
	if total := l.Len(); n > total-start {
		n = total - start
	}
	if n <= 0 {
		return
	}
	ci, j, off := l.locate(start)
	if l.big == nil {
		used := countBytes(l.inline[:])
		end := skipEntries(l.inline[:], off, n)
		copy(l.inline[off:], l.inline[end:used])
		clear(l.inline[used-(end-off) : used])
		return
	}
	q := l.big
	q.count -= n
	live := q.live()
	first := ci
	if j > 0 {
		// The range starts inside chunk ci: cut its part there.
		ch := &live[ci]
		k := min(n, ch.n-j)
		end := len(ch.b)
		if k < ch.n-j {
			end = skipEntries(ch.b, off, k)
		}
		ch.resize(off, end-off, 0)
		ch.n -= k
		n -= k
		ci++
	}
	whole := ci
	for n > 0 && n >= live[ci].n {
		n -= live[ci].n
		ci++
	}
	if n > 0 {
		// The range ends inside chunk ci: drop its head. Reslicing makes
		// popping the head of a long list O(1); the bytes cut off are freed
		// with the chunk.
		ch := &live[ci]
		ch.b = ch.b[skipEntries(ch.b, 0, n):]
		ch.n -= n
	}
	q.removeChunks(whole, ci)
	if first > 0 {
		first--
	}
	l.mergeFrom(first, 2)
	l.shrinkToInline()
}

// Remove deletes elements equal to v, as LREM: count > 0 removes the first
// count of them from the head, count < 0 the first -count from the tail,
// 0 all. It returns how many it removed.
func (l *List) Remove(v []byte, count int) int {
	nd := needleOf(v)
	limit := count
	switch {
	case count == 0 || count == math.MinInt:
		limit = math.MaxInt
	case count < 0:
		limit = -count
	}
	if l.big == nil {
		used := countBytes(l.inline[:])
		b := l.inline[:used]
		skip := 0
		if count < 0 {
			skip = max(0, nd.count(b)-limit)
		}
		kept, removed := nd.drop(b, skip, limit)
		clear(l.inline[len(kept):used])
		return removed
	}
	q := l.big
	live := q.live()
	removed := 0
	for k := range live {
		ci := k
		skip := 0
		if count < 0 {
			ci = len(live) - 1 - k
			skip = max(0, nd.count(live[ci].b)-(limit-removed))
		}
		ch := &live[ci]
		var d int
		ch.b, d = nd.drop(ch.b, skip, limit-removed)
		ch.n -= d
		removed += d
		if removed == limit {
			break
		}
	}
	if removed > 0 {
		q.count -= removed
		q.dropEmpty()
		l.mergeFrom(0, len(q.live()))
		l.shrinkToInline()
	}
	return removed
}

// locate finds element i (0 <= i < Len()): its chunk, its position in the
// chunk and its offset. It walks from the nearer end of the list and then
// from the nearer end of the chunk.
func (l *List) locate(i int) (ci, j, off int) {
	if l.big == nil {
		return 0, i, skipEntries(l.inline[:], 0, i)
	}
	q := l.big
	live := q.live()
	if i < q.count/2 {
		for i >= live[ci].n {
			i -= live[ci].n
			ci++
		}
	} else {
		rest := q.count - i // elements from i to the tail, at least 1
		ci = len(live) - 1
		for rest > live[ci].n {
			rest -= live[ci].n
			ci--
		}
		i = live[ci].n - rest
	}
	ch := live[ci]
	if i <= ch.n/2 {
		return ci, i, skipEntries(ch.b, 0, i)
	}
	off = len(ch.b)
	for k := ch.n - i; k > 0; k-- {
		off = entryStart(ch.b, off)
	}
	return ci, i, off
}

// chunkBytes returns chunk ci's entries. For an inline list that is the
// whole zero-padded array, which entryAt reads as well.
func (l *List) chunkBytes(ci int) []byte {
	if l.big == nil {
		return l.inline[:]
	}
	return l.big.slots[l.big.lo+ci].b
}

// endPos returns the position just past the last element.
func (l *List) endPos() (ci, off int) {
	if l.big == nil {
		return 0, countBytes(l.inline[:])
	}
	ci = l.big.hi - l.big.lo - 1
	return ci, len(l.big.slots[l.big.lo+ci].b)
}

// walk calls fn with each entry (its chunk, the chunk's bytes, its offset
// and its index) from the head or from the tail, until fn returns false.
func (l *List) walk(fromTail bool, fn func(ci int, b []byte, off, i int) bool) {
	nchunks := 1
	if l.big != nil {
		nchunks = len(l.big.live())
	}
	if !fromTail {
		i := 0
		for ci := 0; ci < nchunks; ci++ {
			b := l.chunkBytes(ci)
			for off := 0; off < len(b) && b[off] != 0; i++ {
				if !fn(ci, b, off, i) {
					return
				}
				off = entryEnd(b, off)
			}
		}
		return
	}
	i := l.Len() - 1
	for ci := nchunks - 1; ci >= 0; ci-- {
		b := l.chunkBytes(ci)
		if l.big == nil {
			b = b[:countBytes(b)]
		}
		for off := len(b); off > 0; i-- {
			off = entryStart(b, off)
			if !fn(ci, b, off, i) {
				return
			}
		}
	}
}

// insertAt writes the entry (h, p) at offset off of chunk ci. An inline
// list that outgrows its array moves to chunks; a full chunk hands the
// entry to a neighbour with room, or gets a new chunk beside it, or is
// split.
func (l *List) insertAt(ci, off int, h uint64, p []byte) {
	size := entrySize(h, len(p))
	if l.big == nil {
		used := countBytes(l.inline[:])
		if used+size <= inlineCap {
			copy(l.inline[off+size:], l.inline[off:used])
			putEntry(l.inline[off:off+size], h, p)
			return
		}
		l.toChunks(used, off, h, p, size)
		return
	}
	q := l.big
	for {
		live := q.live()
		ch := &live[ci]
		end := len(ch.b)
		switch {
		case ch.fits(size):
			ch.resize(off, 0, size)
			putEntry(ch.b[off:off+size], h, p)
			ch.n++
			q.count++
			return
		case off == 0 && ci > 0 && live[ci-1].fits(size):
			ci, off = ci-1, len(live[ci-1].b)
		case off == end && ci+1 < len(live) && live[ci+1].fits(size):
			ci, off = ci+1, 0
		case off == 0 || off == end:
			b := make([]byte, size)
			putEntry(b, h, p)
			if off == end {
				ci++
			}
			q.insertChunk(ci, listChunk{b: b, n: 1})
			q.count++
			return
		default:
			// Split in the middle; a big entry is given a chunk of its own
			// at once instead of halving its way down to one.
			cut := off
			if size <= chunkMaxBytes/4 {
				cut = middleEntry(ch.b)
			}
			q.split(ci, cut)
			if off > cut || (off == cut && size > chunkMaxBytes/4) {
				ci, off = ci+1, off-cut
			}
		}
	}
}

// toChunks moves an inline list of used bytes to chunks while inserting the
// entry (h, p) of size bytes at offset off.
func (l *List) toChunks(used, off int, h uint64, p []byte, size int) {
	before, after := l.inline[:off], l.inline[off:used]
	nb, na := countEntries(before), countEntries(after)
	q := &listChunks{count: nb + na + 1}
	if used+size <= chunkMaxBytes {
		b := make([]byte, used+size)
		copy(b, before)
		putEntry(b[off:off+size], h, p)
		copy(b[off+size:], after)
		q.slots = []listChunk{{b: b, n: nb + na + 1}}
	} else {
		// An element too big to share a chunk.
		b := make([]byte, size)
		putEntry(b, h, p)
		if nb > 0 {
			q.slots = append(q.slots, listChunk{b: append([]byte(nil), before...), n: nb})
		}
		q.slots = append(q.slots, listChunk{b: b, n: 1})
		if na > 0 {
			q.slots = append(q.slots, listChunk{b: append([]byte(nil), after...), n: na})
		}
	}
	q.hi = len(q.slots)
	l.big = q
	clear(l.inline[:])
}

// shrinkToInline moves a list that fits in the inline array back into it,
// so that a list trimmed back to a few elements costs what a short list
// costs (a login check pushes a sixth login and trims back to five every
// time).
func (l *List) shrinkToInline() {
	q := l.big
	switch live := q.live(); {
	case len(live) == 0:
		l.big = nil
	case len(live) == 1 && len(live[0].b) <= inlineCap:
		copy(l.inline[:], live[0].b)
		l.big = nil
	}
}

// mergeFrom joins neighbours among the n chunks from ci on (and the one
// after them) when together they fill at most half a chunk, so that deletes
// do not leave a trail of small chunks; the half keeps a merge from being
// undone by the next insert.
func (l *List) mergeFrom(ci, n int) {
	q := l.big
	for end := ci + n; ci < end && ci+1 < q.hi-q.lo; {
		live := q.live()
		a, b := &live[ci], &live[ci+1]
		if a.n+b.n > chunkMaxEntries/2 || len(a.b)+len(b.b) > chunkMaxBytes/2 {
			ci++
			continue
		}
		a.b = append(a.b, b.b...)
		a.n += b.n
		q.removeChunks(ci+1, ci+2)
		end--
	}
}

func (q *listChunks) live() []listChunk { return q.slots[q.lo:q.hi] }

func (c *listChunk) fits(size int) bool {
	return c.n < chunkMaxEntries && len(c.b)+size <= chunkMaxBytes
}

// split cuts chunk ci at offset cut (an entry boundary inside it) into two.
func (q *listChunks) split(ci, cut int) {
	ch := &q.slots[q.lo+ci]
	right := append([]byte(nil), ch.b[cut:]...)
	rn := countEntries(right)
	ch.b = ch.b[:cut]
	ch.n -= rn
	q.insertChunk(ci+1, listChunk{b: right, n: rn})
}

// insertChunk puts ch at position at among the chunks.
func (q *listChunks) insertChunk(at int, ch listChunk) {
	n := q.hi - q.lo
	switch {
	case at == 0 && q.lo > 0:
		q.lo--
		q.slots[q.lo] = ch
		return
	case at == n && q.hi < len(q.slots):
		q.slots[q.hi] = ch
		q.hi++
		return
	}
	free := len(q.slots) - n
	switch {
	case free < 2 || free < n/4:
		q.regrow(n+1, at, ch)
	case at > 0 && at < n && q.hi < len(q.slots):
		copy(q.slots[q.lo+at+1:q.hi+1], q.slots[q.lo+at:q.hi])
		q.hi++
		q.slots[q.lo+at] = ch
	case at > 0 && at < n:
		copy(q.slots[q.lo-1:], q.slots[q.lo:q.lo+at])
		q.lo--
		q.slots[q.lo+at] = ch
	default:
		// A push at an end whose room is all at the other end (a queue):
		// centre the chunks in place, which pays for itself over the free
		// slots it makes.
		lo := free / 2
		copy(q.slots[lo:], q.slots[q.lo:q.hi])
		if lo > q.lo {
			clear(q.slots[q.lo:min(lo, q.hi)])
		} else {
			clear(q.slots[max(q.lo, lo+n):q.hi])
		}
		q.lo, q.hi = lo, lo+n
		q.insertChunk(at, ch)
	}
}

// regrow moves the chunks to a new array with room for half as many again,
// inserting ch at position at, with the free room on the side the list
// grows at.
func (q *listChunks) regrow(size, at int, ch listChunk) {
	slots := make([]listChunk, size+size/2+2)
	lo := (len(slots) - size) / 2
	switch n := q.hi - q.lo; at {
	case 0:
		lo = len(slots) - size
	case n:
		lo = 0
	}
	live := q.live()
	copy(slots[lo:], live[:at])
	slots[lo+at] = ch
	copy(slots[lo+at+1:], live[at:])
	q.slots, q.lo, q.hi = slots, lo, lo+size
}

// removeChunks deletes chunks i to j-1, moving the shorter side.
func (q *listChunks) removeChunks(i, j int) {
	d := j - i
	if d <= 0 {
		return
	}
	n := q.hi - q.lo
	if i < n-j {
		copy(q.slots[q.lo+d:], q.slots[q.lo:q.lo+i])
		clear(q.slots[q.lo : q.lo+d])
		q.lo += d
	} else {
		copy(q.slots[q.lo+i:], q.slots[q.lo+j:q.hi])
		clear(q.slots[q.hi-d : q.hi])
		q.hi -= d
	}
	if n -= d; len(q.slots) > 16 && n*4 < len(q.slots) {
		// Give back the array of a list that shrank a lot.
		slots := make([]listChunk, 2*n)
		lo := n / 2
		copy(slots[lo:], q.live())
		q.slots, q.lo, q.hi = slots, lo, lo+n
	}
}

// dropEmpty removes the chunks left without entries.
func (q *listChunks) dropEmpty() {
	live := q.live()
	w := 0
	for _, ch := range live {
		if ch.n > 0 {
			live[w] = ch
			w++
		}
	}
	clear(live[w:])
	q.hi = q.lo + w
}

// Entries.

// encodeElement returns the header of element v and its payload.
func encodeElement(v []byte) (uint64, []byte) {
	if n, ok := ParseInt(v); ok {
		// Integers too large for the zigzag form to leave room for the tag
		// bit are kept as strings.
		if z := uint64(n<<1) ^ uint64(n>>63); z < 1<<63 {
			return z<<1 | 1, nil
		}
	}
	return uint64(len(v)+1) << 1, v
}

// entrySize is the length of an entry with header h and a payload of n
// bytes.
func entrySize(h uint64, n int) int {
	l := uvarintLen(h) + n
	return l + uvarintLen(uint64(l))
}

// putEntry writes an entry into dst, which is exactly entrySize long.
func putEntry(dst []byte, h uint64, p []byte) {
	w := binary.PutUvarint(dst, h)
	w += copy(dst[w:], p)
	back := dst[w:]
	for i := len(back) - 1; i >= 0; i-- {
		c := byte(w & 0x7f)
		w >>= 7
		if i > 0 {
			c |= 0x80
		}
		back[i] = c
	}
}

// entryAt decodes the entry at off: its header, its payload (nil for an
// integer) and the offset of the entry after it.
func entryAt(b []byte, off int) (h uint64, p []byte, next int) {
	w := 1
	if h = uint64(b[off]); h >= 0x80 {
		h, w = binary.Uvarint(b[off:])
	}
	end := off + w
	if h&1 == 0 {
		n := int(h>>1) - 1
		p = b[end : end+n]
		end += n
	}
	return h, p, end + uvarintLen(uint64(end-off))
}

// entryEnd returns the offset just past the entry at off, decoding no more
// of it than its length needs: walking a chunk is most of the work of
// reaching an element.
func entryEnd(b []byte, off int) int {
	c := b[off]
	if c < 0x80 {
		// One-byte header: a small integer, or a string whose header and
		// payload (c>>1 bytes) are short enough for a one-byte backlen.
		if c&1 == 1 {
			return off + 2
		}
		return off + int(c>>1) + 1
	}
	if c&1 == 1 && off+8 <= len(b) {
		// An integer: the header ends at the first byte without the
		// continuation bit, and a header that short has a one-byte backlen.
		if stop := ^binary.LittleEndian.Uint64(b[off:]) & 0x8080808080808080; stop != 0 {
			return off + bits.TrailingZeros64(stop)/8 + 2
		}
	}
	_, _, next := entryAt(b, off)
	return next
}

// entryStart returns the offset of the entry that ends at end.
func entryStart(b []byte, end int) int {
	l, w := 0, 0
	for shift := 0; ; shift += 7 {
		c := b[end-1-w]
		l |= int(c&0x7f) << shift
		w++
		if c&0x80 == 0 {
			return end - w - l
		}
	}
}

// entryValue returns an entry's element, formatting an integer into
// scratch.
func entryValue(h uint64, p, scratch []byte) []byte {
	if h&1 == 0 {
		return p
	}
	z := h >> 1
	return strconv.AppendInt(scratch[:0], int64(z>>1)^-int64(z&1), 10)
}

// intScratch makes sure there is room to format any int64 without
// allocating per element.
func intScratch(b []byte) []byte {
	if cap(b) < 20 {
		return make([]byte, 0, 20)
	}
	return b
}

// skipEntries returns the offset n entries after off.
func skipEntries(b []byte, off, n int) int {
	for ; n > 0; n-- {
		off = entryEnd(b, off)
	}
	return off
}

// countEntries counts the entries of b, which ends at its length or at a
// zero byte.
func countEntries(b []byte) int {
	n := 0
	for off := 0; off < len(b) && b[off] != 0; n++ {
		off = entryEnd(b, off)
	}
	return n
}

// countBytes returns the length of the entries of b, which end at its
// length or at a zero byte.
func countBytes(b []byte) int {
	off := 0
	for off < len(b) && b[off] != 0 {
		off = entryEnd(b, off)
	}
	return off
}

// middleEntry returns the entry boundary nearest past the middle of a chunk
// of at least two entries, never its start or its end.
func middleEntry(b []byte) int {
	off := entryEnd(b, 0)
	for off < len(b)/2 {
		off = entryEnd(b, off)
	}
	if off == len(b) {
		off = entryStart(b, off)
	}
	return off
}

// resize turns the old bytes at off into size bytes, moving the entries
// after them.
func (c *listChunk) resize(off, old, size int) {
	n := len(c.b)
	grown := n - old + size
	if grown <= cap(c.b) {
		b := c.b[:max(n, grown)]
		copy(b[off+size:], b[off+old:n])
		c.b = b[:grown]
		return
	}
	// Grow by doubling, but no further than the chunk will hold when full
	// as judged from its average entry: a chunk filled by pushes then ends
	// with no slack, where plain append growth would leave up to a third.
	want := min(2*cap(c.b), grown*chunkMaxEntries/(c.n+1), chunkMaxBytes)
	b := make([]byte, grown, max(allocSize(want), int64(grown)))
	copy(b, c.b[:off])
	copy(b[off+size:], c.b[off+old:])
	c.b = b
}

// listNeedle is an element to search for, encoded as entries are, so that
// a comparison needs no formatting: equal headers mean equal integers or
// equally long strings.
type listNeedle struct {
	h uint64
	p []byte
}

func needleOf(v []byte) listNeedle {
	h, p := encodeElement(v)
	return listNeedle{h, p}
}

func (nd *listNeedle) matches(b []byte, off int) bool {
	h, p, _ := entryAt(b, off)
	return h == nd.h && string(p) == string(nd.p)
}

// count returns how many entries of b match.
func (nd *listNeedle) count(b []byte) int {
	n := 0
	for off := 0; off < len(b); {
		if nd.matches(b, off) {
			n++
		}
		off = entryEnd(b, off)
	}
	return n
}

// drop deletes from b up to limit matching entries, after leaving the first
// skip matches in place, and returns the shortened b and how many it
// deleted.
func (nd *listNeedle) drop(b []byte, skip, limit int) ([]byte, int) {
	w, dropped := 0, 0
	for off := 0; off < len(b); {
		next := entryEnd(b, off)
		del := false
		if dropped < limit && nd.matches(b, off) {
			if skip > 0 {
				skip--
			} else {
				del = true
			}
		}
		if del {
			dropped++
		} else {
			w += copy(b[w:], b[off:next])
		}
		off = next
	}
	return b[:w], dropped
}

// allocSize rounds an allocation of n bytes up to what the Go allocator
// hands out: its size classes up to 32 KiB, whole pages above.
func allocSize(n int) int64 {
	if n == 0 {
		return 0
	}
	if n > 32768 {
		return int64((n + 8191) &^ 8191)
	}
	for _, c := range goSizeClasses {
		if c >= n {
			return int64(c)
		}
	}
	return 32768
}

var goSizeClasses = [...]int{
	8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224,
	240, 256, 288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768,
	896, 1024, 1152, 1280, 1408, 1536, 1792, 2048, 2304, 2688, 3072, 3200,
	3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912, 8192, 9472, 9728,
	10240, 10880, 12288, 13568, 14336, 16384, 18432, 19072, 20480, 21760,
	24576, 27264, 28672, 32768,
}
