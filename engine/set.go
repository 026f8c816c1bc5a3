package engine

import (
	"encoding/binary"
	"iter"
	"math"
	"math/rand/v2"
	"strconv"
	"unsafe"
)

// A Set holds the members of a Redis set in one of three forms. Redis 7.0
// has two encodings, and OBJECT ENCODING names them: "intset" is the
// first form, "hashtable" either of the others.
//
//   - intset: every member an integer in string2ll's canonical form, kept
//     sorted in data as little-endian words of width bytes (2, 4 or 8),
//     the narrowest that holds them all, as Redis's intset is. A set stays
//     one while it holds only integers and at most set-max-intset-entries
//     of them, as in Redis.
//   - compact: the members in data as [uvarint length][bytes], in the
//     order they were added, found by a scan: for up to setCompactEntries
//     members of up to setCompactValue bytes that costs no more than a
//     hash, and the form holds nothing but the bytes (a 100-member set of
//     "member:123" strings takes 1.1 KB, where Redis's dict takes about
//     5 KB).
//   - indexed: the same entries plus a hash index (the Hash's: entry
//     numbers in offs, a table from member hash to entry), so every
//     operation is O(1).
//
// A set moves from intset to one of the other two, and from compact to
// indexed, never back, as Redis never turns a hashtable back into an
// intset. Members handed to callbacks are valid only during the call.
type Set struct {
	data  []byte
	n     uint32     // members: the index numbers entries in 32 bits
	width uint8      // 2, 4 or 8 in the intset form; 0 otherwise
	idx   *hashIndex // the indexed form's index; nil otherwise
}

// SetLimits bound the intset form (set-max-intset-entries).
type SetLimits struct {
	IntsetEntries int
}

const (
	// setCompactEntries and setCompactValue bound the compact form:
	// Redis 7.2's set-max-listpack-entries and -value defaults.
	setCompactEntries = 128
	setCompactValue   = 64
	// maxIntsetEntries caps the intset form whatever the limit says, as
	// Redis caps it at 1G entries.
	maxIntsetEntries = 1 << 30
)

func (l SetLimits) maxInts() int { return min(l.IntsetEntries, maxIntsetEntries) }

// NewSet returns an empty set in the intset form: the first member that is
// not an integer moves it to another, as Redis's SADD, SMOVE and the
// STORE commands build sets.
func NewSet() *Set { return &Set{width: 2} }

// NewStringSet returns an empty set in the hashtable encoding whatever its
// members, for restoring one that was saved in it.
func NewStringSet() *Set { return &Set{} }

// Len returns the number of members.
func (s *Set) Len() int { return int(s.n) }

// IsIntset reports whether the set is in the intset form.
func (s *Set) IsIntset() bool { return s.width != 0 }

// Encoding names the form as Redis's OBJECT ENCODING does.
func (s *Set) Encoding() string {
	if s.width != 0 {
		return "intset"
	}
	return "hashtable"
}

// MemoryUsage estimates the bytes the set holds.
func (s *Set) MemoryUsage() int64 {
	n := int64(unsafe.Sizeof(*s)) + int64(cap(s.data))
	if x := s.idx; x != nil {
		n += int64(unsafe.Sizeof(*x)) + int64(cap(x.offs))*8 + int64(len(x.tab.slots))*8
	}
	return n
}

// ---- the intset form ----

func intWidth(v int64) uint8 {
	switch {
	case v >= math.MinInt16 && v <= math.MaxInt16:
		return 2
	case v >= math.MinInt32 && v <= math.MaxInt32:
		return 4
	}
	return 8
}

func (s *Set) intAt(i int) int64 { return intAtWidth(s.data, s.width, i) }

func intAtWidth(data []byte, w uint8, i int) int64 {
	switch w {
	case 2:
		return int64(int16(binary.LittleEndian.Uint16(data[2*i:])))
	case 4:
		return int64(int32(binary.LittleEndian.Uint32(data[4*i:])))
	}
	return int64(binary.LittleEndian.Uint64(data[8*i:]))
}

func putInt(b []byte, w uint8, v int64) {
	switch w {
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(v))
	default:
		binary.LittleEndian.PutUint64(b, uint64(v))
	}
}

// intSearch returns where v is, or where it would go.
func (s *Set) intSearch(v int64) (int, bool) {
	lo, hi := 0, s.Len()
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.intAt(m) < v {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < s.Len() && s.intAt(lo) == v
}

func (s *Set) intAdd(v int64) bool {
	if w := intWidth(v); w > s.width {
		// Widen every word first, as Redis upgrades an intset.
		data := make([]byte, s.Len()*int(w), (s.Len()+1)*int(w))
		for i := 0; i < s.Len(); i++ {
			putInt(data[i*int(w):], w, s.intAt(i))
		}
		s.data, s.width = data, w
	}
	i, found := s.intSearch(v)
	if found {
		return false
	}
	w := int(s.width)
	s.grow(w)
	s.data = s.data[:len(s.data)+w]
	copy(s.data[(i+1)*w:], s.data[i*w:s.Len()*w])
	putInt(s.data[i*w:], s.width, v)
	s.n++
	return true
}

func (s *Set) intRemoveAt(i int) {
	w := int(s.width)
	s.data = append(s.data[:i*w], s.data[(i+1)*w:]...)
	s.n--
	s.shrinkData()
}

// grow makes room for n more bytes in data. The intset and compact forms
// grow by a sixteenth at a time rather than double, as an allocator's
// size classes would: their inserts cost O(Len) anyway, and their slack
// is what a small set costs beyond its bytes.
func (s *Set) grow(n int) {
	if cap(s.data)-len(s.data) >= n {
		return
	}
	data := make([]byte, len(s.data), len(s.data)+n+len(s.data)/16)
	copy(data, s.data)
	s.data = data
}

// Fit gives back the spare capacity of an intset or compact set, whose
// every change costs O(Len) anyway: commands call it once they are done,
// so that a small set at rest holds its bytes and no more, as an intset
// does in Redis.
func (s *Set) Fit() {
	if s.idx == nil && cap(s.data) > len(s.data) {
		s.data = append(make([]byte, 0, len(s.data)), s.data...)
	}
}

// shrinkData gives back most of data's spare capacity once it is mostly
// empty.
func (s *Set) shrinkData() {
	if cap(s.data) > 256 && len(s.data) < cap(s.data)/4 {
		s.data = append([]byte(nil), s.data...)
	}
}

// toStrings moves an intset to the compact form, or to the indexed one
// when it holds too many members for the compact one.
func (s *Set) toStrings() {
	old, n, w := s.data, s.Len(), s.width
	s.data = make([]byte, 0, n*4)
	s.width = 0
	var buf [20]byte
	for i := 0; i < n; i++ {
		s.data = appendLenBytes(s.data, strconv.AppendInt(buf[:0], intAtWidth(old, w, i), 10))
	}
	if n > setCompactEntries {
		s.index()
	}
}

// ---- the compact and indexed forms ----

func setEntryAt(data []byte, off int) (member []byte, end int) {
	l, w := binary.Uvarint(data[off:])
	s := off + w
	return data[s : s+int(l)], s + int(l)
}

func (s *Set) findCompact(m []byte) (int, bool) {
	for off := 0; off < len(s.data); {
		e, end := setEntryAt(s.data, off)
		if string(e) == string(m) {
			return off, true
		}
		off = end
	}
	return 0, false
}

func (s *Set) findIndexed(m []byte, h uint32) (slot uint32, entry int, ok bool) {
	t := &s.idx.tab
	if t.count == 0 {
		return 0, 0, false
	}
	for i := h & t.mask; ; i = t.next(i) {
		sl := t.slots[i]
		ref := slotRef(sl)
		if ref == 0 {
			return 0, 0, false
		}
		if slotHash(sl) != h {
			continue
		}
		n := int(ref - 1)
		if e, _ := setEntryAt(s.data, int(s.idx.offs[n])); string(e) == string(m) {
			return i, n, true
		}
	}
}

// index builds the index over the compact entries, which stay in place.
func (s *Set) index() {
	x := &hashIndex{offs: make([]uint64, 0, s.Len())}
	t := &x.tab
	for off := 0; off < len(s.data); {
		e, end := setEntryAt(s.data, off)
		x.offs = append(x.offs, uint64(off))
		if t.needGrow() {
			t.grow()
		}
		h := fieldHash(e)
		i := h & t.mask
		for slotRef(t.slots[i]) != 0 {
			i = t.next(i)
		}
		t.slots[i] = mkSlot(h, uint32(len(x.offs)))
		t.count++
		off = end
	}
	s.idx = x
}

func (s *Set) addIndexed(m []byte) bool {
	x := s.idx
	h := fieldHash(m)
	if _, _, ok := s.findIndexed(m, h); ok {
		return false
	}
	t := &x.tab
	if t.needGrow() {
		t.grow()
	}
	i := h & t.mask
	for slotRef(t.slots[i]) != 0 {
		i = t.next(i)
	}
	x.offs = append(x.offs, uint64(len(s.data)))
	t.slots[i] = mkSlot(h, uint32(len(x.offs)))
	t.count++
	s.data = appendLenBytes(s.data, m)
	s.n++
	return true
}

// removeEntry deletes entry n, found at table slot slot, of an indexed set.
func (s *Set) removeEntry(slot uint32, n int) {
	x := s.idx
	off := int(x.offs[n])
	_, end := setEntryAt(s.data, off)
	x.deadBytes += end - off
	x.deadEntries++
	x.offs[n] = deadEntry
	t := &x.tab
	t.removeAt(slot)
	t.count--
	s.n--
	if t.count*8 < len(t.slots) {
		t.shrinkIfSparse()
	}
	s.maybeCompact()
}

// maybeCompact drops the dead entries of an indexed set once they make up
// half of its bytes or entries (as Hash.maybeCompact does).
func (s *Set) maybeCompact() {
	x := s.idx
	if x.deadBytes <= len(s.data)/2 && x.deadEntries <= len(x.offs)/2 {
		return
	}
	if len(s.data) < 256 && len(x.offs) < 32 {
		return
	}
	renum := make([]uint32, len(x.offs))
	data := make([]byte, 0, len(s.data)-x.deadBytes)
	offs := make([]uint64, 0, s.Len())
	for n, off := range x.offs {
		if off == deadEntry {
			continue
		}
		_, end := setEntryAt(s.data, int(off))
		offs = append(offs, uint64(len(data)))
		data = append(data, s.data[off:end]...)
		renum[n] = uint32(len(offs))
	}
	t := &x.tab
	for i, sl := range t.slots {
		if ref := slotRef(sl); ref != 0 {
			t.slots[i] = mkSlot(slotHash(sl), renum[ref-1])
		}
	}
	s.data, x.offs = data, offs
	x.deadBytes, x.deadEntries = 0, 0
}

// ---- operations ----

// Add adds m and reports whether it was new. The set changes form as
// Redis's would: an intset takes a member that is not an integer, or one
// integer more than lim allows, by becoming a hashtable first (so it does
// even when the member was there already, as in Redis).
func (s *Set) Add(m []byte, lim SetLimits) bool {
	if s.width != 0 {
		if v, ok := ParseInt(m); ok {
			if !s.intAdd(v) {
				return false
			}
			if s.Len() > lim.maxInts() {
				s.toStrings()
			}
			return true
		}
		s.toStrings()
	}
	if s.idx == nil && (len(m) > setCompactValue || len(s.data)+len(m)+binary.MaxVarintLen64 > maxCompactBytes) {
		s.index()
	}
	if s.idx != nil {
		return s.addIndexed(m)
	}
	if _, found := s.findCompact(m); found {
		return false
	}
	s.grow(uvarintLen(uint64(len(m))) + len(m))
	s.data = appendLenBytes(s.data, m)
	s.n++
	if s.Len() > setCompactEntries {
		s.index()
	}
	return true
}

// Has reports whether m is a member.
func (s *Set) Has(m []byte) bool {
	switch {
	case s.width != 0:
		v, ok := ParseInt(m)
		if !ok {
			return false
		}
		_, found := s.intSearch(v)
		return found
	case s.idx == nil:
		_, found := s.findCompact(m)
		return found
	}
	_, _, found := s.findIndexed(m, fieldHash(m))
	return found
}

// Remove deletes m and reports whether it was a member.
func (s *Set) Remove(m []byte) bool {
	switch {
	case s.width != 0:
		v, ok := ParseInt(m)
		if !ok {
			return false
		}
		i, found := s.intSearch(v)
		if found {
			s.intRemoveAt(i)
		}
		return found
	case s.idx == nil:
		off, found := s.findCompact(m)
		if !found {
			return false
		}
		_, end := setEntryAt(s.data, off)
		s.data = append(s.data[:off], s.data[end:]...)
		s.n--
		s.shrinkData()
		return true
	}
	slot, n, found := s.findIndexed(m, fieldHash(m))
	if found {
		s.removeEntry(slot, n)
	}
	return found
}

// All yields every member: an intset's in ascending order, the others' in
// the order they were added. The set must not change during the loop.
func (s *Set) All() iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		switch {
		case s.width != 0:
			var buf [20]byte
			for i := 0; i < s.Len(); i++ {
				if !yield(strconv.AppendInt(buf[:0], s.intAt(i), 10)) {
					return
				}
			}
		case s.idx == nil:
			for off := 0; off < len(s.data); {
				m, end := setEntryAt(s.data, off)
				if !yield(m) {
					return
				}
				off = end
			}
		default:
			for _, off := range s.idx.offs {
				if off == deadEntry {
					continue
				}
				m, _ := setEntryAt(s.data, int(off))
				if !yield(m) {
					return
				}
			}
		}
	}
}

// Scan continues an SSCAN from cursor. An intset or a compact set offers
// every member and returns 0, as Redis does for an intset. An indexed one
// offers the members of table buckets in reverse-binary cursor order until
// about count were offered (or 10*count buckets visited), and returns the
// next cursor, 0 when done.
func (s *Set) Scan(cursor uint64, count int, fn func(m []byte)) uint64 {
	if s.idx == nil {
		for m := range s.All() {
			fn(m)
		}
		return 0
	}
	x := s.idx
	t := &x.tab
	v := uint32(cursor)
	var buf [16]uint32
	offered := 0
	for buckets := 0; t.count > 0; {
		for _, ref := range t.scanBucket(v, buf[:0]) {
			m, _ := setEntryAt(s.data, int(x.offs[ref-1]))
			fn(m)
			offered++
		}
		buckets++
		v = t.nextCursor(v)
		if v == 0 || offered >= count || buckets >= count*10 {
			return uint64(v)
		}
	}
	return 0
}

// position is a member's place in the set: an index in an intset, an
// offset in data otherwise.
type position int

// randomPos picks a member uniformly at random; the set is not empty.
func (s *Set) randomPos() position {
	switch {
	case s.width != 0:
		return position(rand.IntN(s.Len()))
	case s.idx == nil:
		k := rand.IntN(s.Len())
		off := 0
		for ; k > 0; k-- {
			_, off = setEntryAt(s.data, off)
		}
		return position(off)
	}
	// At most half the entries are dead (maybeCompact), a few more in a
	// small set: a handful of draws on average.
	offs := s.idx.offs
	for {
		if off := offs[rand.IntN(len(offs))]; off != deadEntry {
			return position(off)
		}
	}
}

// memberAt returns the member at p, formatting an intset's into buf.
func (s *Set) memberAt(p position, buf []byte) []byte {
	if s.width != 0 {
		return strconv.AppendInt(buf[:0], s.intAt(int(p)), 10)
	}
	m, _ := setEntryAt(s.data, int(p))
	return m
}

// Random returns a member chosen uniformly at random, formatted into buf
// for an intset; the set is not empty. The slice is valid until the set
// changes.
func (s *Set) Random(buf []byte) []byte { return s.memberAt(s.randomPos(), buf) }

// Pop removes a member chosen at random and appends it to dst; the set is
// not empty.
func (s *Set) Pop(dst []byte) []byte {
	p := s.randomPos()
	if s.width != 0 {
		dst = strconv.AppendInt(dst, s.intAt(int(p)), 10)
		s.intRemoveAt(int(p))
		return dst
	}
	m, _ := setEntryAt(s.data, int(p))
	n := len(dst)
	dst = append(dst, m...)
	s.Remove(dst[n:])
	return dst
}

// PopN removes count members chosen at random (count < Len) and gives
// each to fn, which may keep it (it is a copy). An indexed set pops one
// at a time, each O(1); the others, whose removals move the members after
// them, choose the positions first and rebuild once: O(Len) in all.
func (s *Set) PopN(count int, fn func(m []byte)) {
	if s.idx != nil {
		var buf []byte
		for ; count > 0; count-- {
			buf = s.Pop(buf[:0])
			fn(append([]byte(nil), buf...))
		}
		return
	}
	chosen := choosePositions(s.Len(), count)
	if s.width != 0 {
		w := int(s.width)
		keep := s.data[:0]
		for i := 0; i < s.Len(); i++ {
			if chosen.has(i) {
				fn(strconv.AppendInt(nil, s.intAt(i), 10))
				continue
			}
			keep = append(keep, s.data[i*w:(i+1)*w]...)
		}
		s.data = keep
	} else {
		keep := s.data[:0]
		for i, off := 0, 0; off < len(s.data); i++ {
			m, end := setEntryAt(s.data, off)
			if chosen.has(i) {
				fn(append([]byte(nil), m...))
			} else {
				keep = append(keep, s.data[off:end]...)
			}
			off = end
		}
		s.data = keep
	}
	s.n -= uint32(count)
	s.shrinkData()
}

// Sample gives fn count distinct members chosen at random (count < Len),
// allocating nothing beyond the set's size: when count is a good part of
// the set it walks the set once choosing each member with the right
// probability (selection sampling), else it draws positions and keeps the
// first draw of each.
func (s *Set) Sample(count int, fn func(m []byte)) {
	var buf [20]byte
	if count*3 > s.Len() || s.idx == nil {
		need, left := count, s.Len()
		for m := range s.All() {
			if rand.IntN(left) < need {
				fn(m)
				need--
				if need == 0 {
					return
				}
			}
			left--
		}
		return
	}
	seen := make(map[position]struct{}, count)
	for len(seen) < count {
		p := s.randomPos()
		if _, dup := seen[p]; dup {
			continue
		}
		seen[p] = struct{}{}
		fn(s.memberAt(p, buf[:0]))
	}
}

// positions is a set of positions in [0, n), as a bitmap.
type positions []uint64

func (p positions) has(i int) bool { return p[i/64]&(1<<(i%64)) != 0 }

// choosePositions picks k distinct positions of [0, n) at random: drawing
// the ones to take when they are at most half, else the ones to leave.
func choosePositions(n, k int) positions {
	p := make(positions, (n+63)/64)
	draw, invert := k, false
	if k > n/2 {
		draw, invert = n-k, true
	}
	for got := 0; got < draw; {
		i := rand.IntN(n)
		if p[i/64]&(1<<(i%64)) == 0 {
			p[i/64] |= 1 << (i % 64)
			got++
		}
	}
	if invert {
		for i := range p {
			p[i] = ^p[i]
		}
		if r := n % 64; r != 0 {
			p[len(p)-1] &= 1<<r - 1
		}
	}
	return p
}
