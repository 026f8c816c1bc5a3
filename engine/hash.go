package engine

import (
	"encoding/binary"
	"hash/maphash"
	"iter"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"unsafe"
)

// A Hash holds the fields of a Redis hash in one of two forms, matching the
// two encodings Redis 7.0 reports:
//
//   - compact ("listpack"): every pair in data, in insertion order, each as
//     [uvarint field length][field][uvarint value length][value]. Lookups scan
//     it: for at most hash-max-listpack-entries short pairs that is cheap,
//     and the form costs no memory beyond the bytes themselves.
//   - indexed ("hashtable"): the same entries in data, plus an open-addressing
//     index from field hash to entry, so every operation is O(1).
//
// A compact hash becomes indexed once a field or value is longer than the
// value limit or it holds more fields than the entry limit, and never goes
// back, as in Redis. Converting only builds the index: the bytes stay put.
//
// Both forms keep every field in one pointer-free []byte, so the garbage
// collector sees at most four pointers per hash however many fields it
// holds.
type Hash struct {
	data  []byte
	count int
	idx   *hashIndex // nil while compact
}

// hashIndex is the indexed form's lookup structure. Entries are numbered in
// the order their fields were added; offs[n] is where entry n starts in
// data. An update that changes a value's size appends a new copy and moves
// offs[n], keeping the number; a delete sets offs[n] to deadEntry. Either
// way the old bytes stay in data until compaction reclaims them. The table
// maps the low 32 bits of a field's hash to its entry number plus one.
type hashIndex struct {
	tab         table
	offs        []uint64
	deadBytes   int // bytes of data no entry uses
	deadEntries int // entries of offs set to deadEntry
}

const deadEntry = math.MaxUint64

// HashLimits are the compact form's bounds (hash-max-listpack-entries and
// hash-max-listpack-value).
type HashLimits struct {
	Entries int // most fields a compact hash holds
	Value   int // longest field or value a compact hash holds
}

// maxCompactBytes caps a compact hash's data whatever the limits say, as
// Redis caps a listpack at 1 GiB: past it every scan would be a huge copy.
const maxCompactBytes = 1 << 30

var fieldSeed = maphash.MakeSeed()

func fieldHash(f []byte) uint32 { return uint32(maphash.Bytes(fieldSeed, f)) }

// NewHash returns an empty compact hash.
func NewHash() *Hash { return &Hash{} }

// NewHashFrom builds a hash from field/value pairs, as a snapshot loader
// needs: a repeated field keeps its last value, and the form follows from
// lim as if the pairs had been set one by one.
func NewHashFrom(pairs iter.Seq2[[]byte, []byte], lim HashLimits) *Hash {
	h := NewHash()
	for f, v := range pairs {
		h.Set(f, v, lim)
	}
	return h
}

// Len returns the number of fields.
func (h *Hash) Len() int { return h.count }

// Encoding names the form as Redis's OBJECT ENCODING does.
func (h *Hash) Encoding() string {
	if h.idx == nil {
		return "listpack"
	}
	return "hashtable"
}

// MemoryUsage estimates the bytes the hash holds: the struct, its entries
// and, for the indexed form, the offsets and the table.
func (h *Hash) MemoryUsage() int64 {
	n := int64(unsafe.Sizeof(*h)) + int64(cap(h.data))
	if x := h.idx; x != nil {
		n += int64(unsafe.Sizeof(*x)) + int64(cap(x.offs))*8 + int64(len(x.tab.slots))*8
	}
	return n
}

// entryAt decodes the entry starting at off: its field, where its value
// starts and where the entry ends.
func hashEntryAt(data []byte, off int) (field []byte, valStart, end int) {
	fl, w := binary.Uvarint(data[off:])
	fs := off + w
	fe := fs + int(fl)
	vl, w := binary.Uvarint(data[fe:])
	return data[fs:fe], fe + w, fe + w + int(vl)
}

func appendHashEntry(data, field, value []byte) []byte {
	data = binary.AppendUvarint(data, uint64(len(field)))
	data = append(data, field...)
	data = binary.AppendUvarint(data, uint64(len(value)))
	return append(data, value...)
}

func hashEntrySize(field, value []byte) int {
	return uvarintLen(uint64(len(field))) + len(field) + uvarintLen(uint64(len(value))) + len(value)
}

// findCompact returns the offset of field's entry in a compact hash.
func (h *Hash) findCompact(field []byte) (int, bool) {
	for off := 0; off < len(h.data); {
		f, _, end := hashEntryAt(h.data, off)
		if string(f) == string(field) {
			return off, true
		}
		off = end
	}
	return 0, false
}

// findIndexed returns the table slot and entry number of field.
func (h *Hash) findIndexed(field []byte, fh uint32) (slot uint32, entry int, ok bool) {
	t := &h.idx.tab
	if t.count == 0 {
		return 0, 0, false
	}
	for i := fh & t.mask; ; i = t.next(i) {
		sl := t.slots[i]
		ref := slotRef(sl)
		if ref == 0 {
			return 0, 0, false
		}
		if slotHash(sl) != fh {
			continue
		}
		n := int(ref - 1)
		if f, _, _ := hashEntryAt(h.data, int(h.idx.offs[n])); string(f) == string(field) {
			return i, n, true
		}
	}
}

// locate returns the offset of field's entry in data.
func (h *Hash) locate(field []byte) (int, bool) {
	if h.idx == nil {
		return h.findCompact(field)
	}
	_, n, ok := h.findIndexed(field, fieldHash(field))
	if !ok {
		return 0, false
	}
	return int(h.idx.offs[n]), true
}

// Get returns field's value. The slice is valid until the hash changes.
func (h *Hash) Get(field []byte) ([]byte, bool) {
	off, ok := h.locate(field)
	if !ok {
		return nil, false
	}
	_, vs, end := hashEntryAt(h.data, off)
	return h.data[vs:end], true
}

// Has reports whether field exists.
func (h *Hash) Has(field []byte) bool {
	_, ok := h.locate(field)
	return ok
}

// Set stores value under field and reports whether the field is new. A
// compact hash that would pass lim is converted first (a long field or
// value) or right after (one field too many), as Redis converts: so a
// conversion happens even when the field already existed.
func (h *Hash) Set(field, value []byte, lim HashLimits) bool {
	if h.idx == nil && (len(field) > lim.Value || len(value) > lim.Value ||
		len(h.data)+hashEntrySize(field, value) > maxCompactBytes) {
		h.convert()
	}
	if h.idx != nil {
		return h.setIndexed(field, value)
	}
	added := h.setCompact(field, value)
	if h.count > lim.Entries {
		h.convert()
	}
	return added
}

func (h *Hash) setCompact(field, value []byte) bool {
	off, ok := h.findCompact(field)
	if !ok {
		h.data = appendHashEntry(h.data, field, value)
		h.count++
		return true
	}
	_, vs, end := hashEntryAt(h.data, off)
	if end-vs == len(value) {
		copy(h.data[vs:end], value)
		return false
	}
	// Rewrite the value where it is, so the field keeps its place in the
	// order HGETALL shows.
	lenAt := vs - uvarintLen(uint64(end-vs))
	var head [binary.MaxVarintLen64]byte
	hn := binary.PutUvarint(head[:], uint64(len(value)))
	newEnd := lenAt + hn + len(value)
	tail := len(h.data) - end
	if grow := newEnd - end; grow > 0 {
		h.data = append(h.data, make([]byte, grow)...)
	}
	copy(h.data[newEnd:], h.data[end:end+tail])
	copy(h.data[lenAt:], head[:hn])
	copy(h.data[lenAt+hn:], value)
	h.data = h.data[:newEnd+tail]
	return false
}

func (h *Hash) setIndexed(field, value []byte) bool {
	x := h.idx
	fh := fieldHash(field)
	if _, n, ok := h.findIndexed(field, fh); ok {
		off := int(x.offs[n])
		_, vs, end := hashEntryAt(h.data, off)
		if end-vs == len(value) {
			copy(h.data[vs:end], value)
			return false
		}
		// The entry changes size: append a new copy and let compaction
		// reclaim the old bytes. The entry number, hence the table, stays.
		x.deadBytes += end - off
		x.offs[n] = uint64(len(h.data))
		h.data = appendHashEntry(h.data, field, value)
		h.maybeCompact()
		return false
	}
	t := &x.tab
	if t.needGrow() {
		t.grow()
	}
	i := fh & t.mask
	for slotRef(t.slots[i]) != 0 {
		i = t.next(i)
	}
	x.offs = append(x.offs, uint64(len(h.data)))
	t.slots[i] = mkSlot(fh, uint32(len(x.offs)))
	t.count++
	h.data = appendHashEntry(h.data, field, value)
	h.count++
	return true
}

// Delete removes field and reports whether it existed.
func (h *Hash) Delete(field []byte) bool {
	if h.idx == nil {
		off, ok := h.findCompact(field)
		if !ok {
			return false
		}
		_, _, end := hashEntryAt(h.data, off)
		h.data = append(h.data[:off], h.data[end:]...)
		h.count--
		if cap(h.data) > 256 && len(h.data) < cap(h.data)/4 {
			// Mostly emptied: give the spare capacity back.
			h.data = append([]byte(nil), h.data...)
		}
		return true
	}
	x := h.idx
	slot, n, ok := h.findIndexed(field, fieldHash(field))
	if !ok {
		return false
	}
	off := int(x.offs[n])
	_, _, end := hashEntryAt(h.data, off)
	x.deadBytes += end - off
	x.deadEntries++
	x.offs[n] = deadEntry
	t := &x.tab
	t.removeAt(slot)
	t.count--
	h.count--
	if t.count*8 < len(t.slots) {
		t.shrinkIfSparse()
	}
	h.maybeCompact()
	return true
}

// convert builds the index over the compact entries, which stay in data in
// their order.
func (h *Hash) convert() {
	x := &hashIndex{offs: make([]uint64, 0, h.count)}
	t := &x.tab
	for off := 0; off < len(h.data); {
		f, _, end := hashEntryAt(h.data, off)
		x.offs = append(x.offs, uint64(off))
		if t.needGrow() {
			t.grow()
		}
		fh := fieldHash(f)
		i := fh & t.mask
		for slotRef(t.slots[i]) != 0 {
			i = t.next(i)
		}
		t.slots[i] = mkSlot(fh, uint32(len(x.offs)))
		t.count++
		off = end
	}
	h.idx = x
}

// maybeCompact rewrites data and offs without the dead entries once they
// make up half of either, which keeps updates and deletes amortised O(1)
// and the waste bounded.
func (h *Hash) maybeCompact() {
	x := h.idx
	if x.deadBytes <= len(h.data)/2 && x.deadEntries <= len(x.offs)/2 {
		return
	}
	if len(h.data) < 256 && len(x.offs) < 32 {
		return // not worth a pass yet
	}
	// Renumber the live entries in order; a slot keeps its place (its home
	// depends on the hash alone), only its entry number changes.
	renum := make([]uint32, len(x.offs))
	data := make([]byte, 0, len(h.data)-x.deadBytes)
	offs := make([]uint64, 0, h.count)
	for n, off := range x.offs {
		if off == deadEntry {
			continue
		}
		_, _, end := hashEntryAt(h.data, int(off))
		offs = append(offs, uint64(len(data)))
		data = append(data, h.data[off:end]...)
		renum[n] = uint32(len(offs))
	}
	t := &x.tab
	for i, sl := range t.slots {
		if ref := slotRef(sl); ref != 0 {
			t.slots[i] = mkSlot(slotHash(sl), renum[ref-1])
		}
	}
	h.data, x.offs = data, offs
	x.deadBytes, x.deadEntries = 0, 0
}

// All yields every field and value in the order the fields were added (a
// field set again keeps its place): the order Redis's listpack gives, and a
// stable one for snapshots of indexed hashes. The slices are valid until
// the hash changes, and the hash must not change during the loop.
func (h *Hash) All() iter.Seq2[[]byte, []byte] {
	return func(yield func([]byte, []byte) bool) {
		if h.idx == nil {
			for off := 0; off < len(h.data); {
				f, vs, end := hashEntryAt(h.data, off)
				if !yield(f, h.data[vs:end]) {
					return
				}
				off = end
			}
			return
		}
		for _, off := range h.idx.offs {
			if off == deadEntry {
				continue
			}
			f, vs, end := hashEntryAt(h.data, int(off))
			if !yield(f, h.data[vs:end]) {
				return
			}
		}
	}
}

// Scan continues an HSCAN from cursor. A compact hash offers every pair and
// returns 0, as Redis does for a listpack. An indexed one offers the pairs
// of table buckets in reverse-binary cursor order, as SCAN does, until about
// count were offered (or 10*count buckets were visited), and returns the
// next cursor, 0 when done. Only the low 32 bits of the cursor matter, as
// Redis ignores bits above its table's mask.
func (h *Hash) Scan(cursor uint64, count int, fn func(field, value []byte)) uint64 {
	if h.idx == nil {
		for f, v := range h.All() {
			fn(f, v)
		}
		return 0
	}
	x := h.idx
	t := &x.tab
	v := uint32(cursor)
	var buf [16]uint32
	offered := 0
	for buckets := 0; t.count > 0; {
		refs := t.scanBucket(v, buf[:0])
		for _, ref := range refs {
			f, vs, end := hashEntryAt(h.data, int(x.offs[ref-1]))
			fn(f, h.data[vs:end])
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

// IncrBy adds delta to the integer in field (0 if absent) and returns the
// new value. It fails with ErrNotInteger if the value is not an integer and
// ErrOverflow if the sum leaves int64, changing nothing.
func (h *Hash) IncrBy(field []byte, delta int64, lim HashLimits) (int64, error) {
	var cur int64
	if v, ok := h.Get(field); ok {
		if cur, ok = ParseInt(v); !ok {
			return 0, ErrNotInteger
		}
	}
	if (delta < 0 && cur < 0 && delta < math.MinInt64-cur) ||
		(delta > 0 && cur > 0 && delta > math.MaxInt64-cur) {
		return 0, ErrOverflow
	}
	cur += delta
	var buf [20]byte
	h.Set(field, strconv.AppendInt(buf[:0], cur, 10), lim)
	return cur, nil
}

// IncrByFloat adds incr to the number in field (0 if absent) in long double
// precision, as Redis does, stores the result and returns its text. It fails
// with ErrNotFloat if the value is not a number and ErrNaNOrInf if the sum
// is not finite, changing nothing.
func (h *Hash) IncrByFloat(field []byte, incr *big.Float, lim HashLimits) (string, error) {
	cur := new(big.Float)
	if v, ok := h.Get(field); ok {
		if cur, ok = ParseLongDouble(v); !ok {
			return "", ErrNotFloat
		}
	}
	sum, ok := AddLongDouble(cur, incr)
	if !ok {
		return "", ErrNaNOrInf
	}
	out := FormatLongDouble(sum)
	h.Set(field, []byte(out), lim)
	return out, nil
}

// Random returns a field and its value picked uniformly at random from a
// hash that is not empty. A compact hash is walked to the chosen entry
// (it is short); an indexed one draws entry numbers until a live one
// comes up, fewer than two draws on average since compaction keeps dead
// entries at most half of them.
func (h *Hash) Random() (field, value []byte) {
	if h.idx == nil {
		k := rand.IntN(h.count)
		for off := 0; off < len(h.data); k-- {
			f, vs, end := hashEntryAt(h.data, off)
			if k == 0 {
				return f, h.data[vs:end]
			}
			off = end
		}
		return nil, nil
	}
	offs := h.idx.offs
	for {
		if off := offs[rand.IntN(len(offs))]; off != deadEntry {
			f, vs, end := hashEntryAt(h.data, int(off))
			return f, h.data[vs:end]
		}
	}
}
