package engine

import (
	"bytes"
	"encoding/binary"
	"math"
	"strconv"
)

// The compact encoding keeps a small set in one []byte of entries sorted by
// (score, member), like Redis's listpack but smaller for the data rate
// limiters store: a sliding-window log uses the request time in ms as both
// score and member, and such an entry takes 7 bytes here against about 20
// in a listpack. Each entry is
//
//	tag byte
//	member: a zigzag varint if lpNumMember (the member is the canonical
//	        decimal form of an int64), else uvarint length and bytes
//	score:  nothing if lpSameScore (the member's value), a zigzag varint if
//	        lpIntScore (an integer of at most 2^53), else 8 bytes float64
//
// Lookups walk the entries from the front, O(n) like a listpack, comparing
// encoded members without decoding them; the encoding is only used while n
// is small. The offset of the last entry is kept so that a member sorting
// last, the newest entry of a window log, is appended without a second
// walk, and so that ZPOPMAX-like accesses start there.
const (
	lpNumMember  byte = 1 << 0
	lpSameScore  byte = 0 << 1
	lpIntScore   byte = 1 << 1
	lpFloatScore byte = 2 << 1
	lpScoreMask  byte = 3 << 1
)

// lpMaxBytes caps the compact encoding, as Redis converts a listpack that
// would pass 1 GB whatever the configured limits; it also keeps offsets
// within int32.
const lpMaxBytes = 1 << 30

// lpEntry is one decoded entry.
type lpEntry struct {
	score float64
	num   int64  // the member, if isNum
	mem   []byte // the member, if !isNum; points into the set
	isNum bool
	end   int // offset of the next entry
}

func lpDecode(lp []byte, off int) lpEntry {
	var e lpEntry
	tag := lp[off]
	off++
	if tag&lpNumMember != 0 {
		v, w := binary.Varint(lp[off:])
		e.num, e.isNum = v, true
		off += w
	} else {
		l, w := binary.Uvarint(lp[off:])
		off += w
		e.mem = lp[off : off+int(l)]
		off += int(l)
	}
	switch tag & lpScoreMask {
	case lpSameScore:
		e.score = float64(e.num)
	case lpIntScore:
		v, w := binary.Varint(lp[off:])
		e.score = float64(v)
		off += w
	default:
		e.score = math.Float64frombits(binary.LittleEndian.Uint64(lp[off:]))
		off += 8
	}
	e.end = off
	return e
}

// member returns the entry's member, formatting a number into buf, which
// needs room for 20 bytes not to allocate.
func (e *lpEntry) member(buf []byte) []byte {
	if e.isNum {
		return strconv.AppendInt(buf[:0], e.num, 10)
	}
	return e.mem
}

// lpSkip returns the offset of the entry after the one at off, without
// decoding it.
func lpSkip(lp []byte, off int) int {
	tag := lp[off]
	off++
	if tag&lpNumMember != 0 {
		for lp[off] >= 0x80 {
			off++
		}
		off++
	} else {
		l, w := binary.Uvarint(lp[off:])
		off += w + int(l)
	}
	switch tag & lpScoreMask {
	case lpIntScore:
		for lp[off] >= 0x80 {
			off++
		}
		off++
	case lpFloatScore:
		off += 8
	}
	return off
}

// lpMemberField appends member as an entry encodes it after the tag and
// returns it with the tag's member bit, so that a search compares bytes
// instead of decoding entries.
func lpMemberField(dst, member []byte) ([]byte, byte) {
	if num, ok := ParseInt(member); ok {
		return binary.AppendVarint(dst, num), lpNumMember
	}
	dst = binary.AppendUvarint(dst, uint64(len(member)))
	return append(dst, member...), 0
}

// lpEncode appends the entry for (member, score) to dst.
func lpEncode(dst, member []byte, score float64) []byte {
	num, isNum := ParseInt(member)
	tag := lpFloatScore
	switch {
	case isNum && math.Float64bits(score) == math.Float64bits(float64(num)):
		tag = lpSameScore
	case score == math.Trunc(score) && math.Abs(score) <= 1<<53:
		tag = lpIntScore
	}
	if isNum {
		tag |= lpNumMember
	}
	dst = append(dst, tag)
	if isNum {
		dst = binary.AppendVarint(dst, num)
	} else {
		dst = binary.AppendUvarint(dst, uint64(len(member)))
		dst = append(dst, member...)
	}
	switch tag & lpScoreMask {
	case lpIntScore:
		dst = binary.AppendVarint(dst, int64(score))
	case lpFloatScore:
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(score))
	}
	return dst
}

// lpFind returns member's rank, offset and entry.
func (z *ZSet) lpFind(member []byte) (rank, off int, e lpEntry, ok bool) {
	var stack [80]byte
	field, bit := lpMemberField(stack[:0], member)
	for ; off < len(z.lp); rank++ {
		if z.lp[off]&lpNumMember == bit && bytes.HasPrefix(z.lp[off+1:], field) {
			return rank, off, lpDecode(z.lp, off), true
		}
		off = lpSkip(z.lp, off)
	}
	return 0, 0, lpEntry{}, false
}

// lpSeek returns the offset of the entry of rank i (len(lp) for n).
func (z *ZSet) lpSeek(i int) int {
	if i == int(z.n)-1 {
		return int(z.tail)
	}
	off := 0
	for ; i > 0; i-- {
		off = lpSkip(z.lp, off)
	}
	return off
}

// lpInsert adds a member known to be absent. A member that sorts last,
// like the newest entry of a sliding-window log, goes straight to the end.
func (z *ZSet) lpInsert(member []byte, score float64) {
	if score == 0 {
		score = 0 // a listpack stores -0 as "0"
	}
	var stack [96]byte
	enc := lpEncode(stack[:0], member, score)
	var num [20]byte
	after := func(e *lpEntry) bool {
		return e.score > score || (e.score == score && bytes.Compare(e.member(num[:0]), member) > 0)
	}
	off := len(z.lp)
	if z.n > 0 {
		if last := lpDecode(z.lp, int(z.tail)); after(&last) {
			for off = 0; ; {
				e := lpDecode(z.lp, off)
				if after(&e) {
					break
				}
				off = e.end
			}
		}
	}
	z.lpOpen(off, len(enc))
	copy(z.lp[off:], enc)
	z.n++
	if off == len(z.lp)-len(enc) {
		z.tail = int32(off)
	} else {
		z.tail += int32(len(enc))
	}
}

// lpOpen makes room for k bytes at off. Growth keeps an eighth spare so
// that a set growing one member at a time is not copied on every add, and
// asks for the capacity the allocator rounds up to anyway.
func (z *ZSet) lpOpen(off, k int) {
	need := len(z.lp) + k
	if need > cap(z.lp) {
		nb := append([]byte(nil), make([]byte, need+need/8)...)[:need]
		copy(nb, z.lp[:off])
		copy(nb[off+k:], z.lp[off:])
		z.lp = nb
		return
	}
	z.lp = z.lp[:need]
	copy(z.lp[off+k:], z.lp[off:need-k])
}

// lpCut deletes the bytes [off, end), which hold count entries, and gives
// memory back when the set has shrunk to under half its capacity.
func (z *ZSet) lpCut(off, end, count int) {
	lastGone := end == len(z.lp)
	n := copy(z.lp[off:], z.lp[end:])
	z.lp = z.lp[:off+n]
	z.n -= int32(count)
	switch {
	case z.n == 0:
		z.tail = 0
	case lastGone:
		z.tail = int32(z.lpSeekFront(int(z.n) - 1))
	default:
		z.tail -= int32(end - off)
	}
	if cap(z.lp) > 2*len(z.lp)+64 {
		nb := append([]byte(nil), make([]byte, len(z.lp)+len(z.lp)/8)...)[:len(z.lp)]
		copy(nb, z.lp)
		z.lp = nb
	}
}

func (z *ZSet) lpSetScore(member []byte, score float64) {
	_, off, e, _ := z.lpFind(member)
	z.lpCut(off, e.end, 1)
	z.lpInsert(member, score)
}

// lpSeekFront is lpSeek without the shortcut to the last entry.
func (z *ZSet) lpSeekFront(i int) int {
	off := 0
	for ; i > 0; i-- {
		off = lpSkip(z.lp, off)
	}
	return off
}

func (z *ZSet) lpRemoveRange(lo, hi int) {
	off := z.lpSeek(lo)
	end := off
	for i := lo; i < hi; i++ {
		end = lpSkip(z.lp, end)
	}
	z.lpCut(off, end, hi-lo)
}

// lpOffsets appends the offset of every entry from rank lo to rank hi-1.
func (z *ZSet) lpOffsets(dst []int32, lo, hi int) []int32 {
	off := z.lpSeek(lo)
	for i := lo; i < hi; i++ {
		dst = append(dst, int32(off))
		off = lpSkip(z.lp, off)
	}
	return dst
}

// lpWalk is Range for the compact encoding. Entries can only be decoded
// forwards, so a reverse walk first collects their offsets.
func (z *ZSet) lpWalk(lo, hi int, rev bool, buf []byte, fn func([]byte, float64) bool) {
	if cap(buf) < 20 {
		buf = make([]byte, 0, 20)
	}
	if !rev {
		off := z.lpSeek(lo)
		for i := lo; i < hi; i++ {
			e := lpDecode(z.lp, off)
			if !fn(e.member(buf), e.score) {
				return
			}
			off = e.end
		}
		return
	}
	var stack [128]int32
	offs := z.lpOffsets(stack[:0], lo, hi)
	for i := len(offs) - 1; i >= 0; i-- {
		e := lpDecode(z.lp, int(offs[i]))
		if !fn(e.member(buf), e.score) {
			return
		}
	}
}

func (z *ZSet) lpScoreSpan(r ScoreRange) (lo, hi int) {
	off := 0
	for n := z.Len(); lo < n; lo++ {
		e := lpDecode(z.lp, off)
		if r.aboveMin(e.score) {
			break
		}
		off = e.end
	}
	for hi = lo; hi < z.Len(); hi++ {
		e := lpDecode(z.lp, off)
		if !r.belowMax(e.score) {
			break
		}
		off = e.end
	}
	return lo, hi
}

// lpLexWindow walks the entries as Redis walks a listpack for a lex range,
// so that it answers alike even when members are not in lex order (mixed
// scores): the first member (last with rev) inside the range is found by a
// linear scan, offset entries are skipped without looking at them, then
// entries are taken while they stay on the near side of the far bound.
func (z *ZSet) lpLexWindow(r *LexRange, rev bool, offset int, limit int64) (int, int) {
	var stack [128]int32
	offs := z.lpOffsets(stack[:0], 0, z.Len())
	var num [20]byte
	mem := func(i int) []byte {
		e := lpDecode(z.lp, int(offs[i]))
		return e.member(num[:0])
	}
	n := len(offs)
	if !r.aboveMin(mem(n-1)) || !r.belowMax(mem(0)) {
		return 0, 0
	}
	if !rev {
		first := 0
		for first < n && !r.aboveMin(mem(first)) {
			first++
		}
		if first == n || !r.belowMax(mem(first)) {
			return 0, 0
		}
		p := first + offset
		if p >= n {
			return 0, 0
		}
		q := p
		for q < n && (limit < 0 || int64(q-p) < limit) && r.belowMax(mem(q)) {
			q++
		}
		return p, q
	}
	last := n - 1
	for last >= 0 && !r.belowMax(mem(last)) {
		last--
	}
	if last < 0 || !r.aboveMin(mem(last)) {
		return 0, 0
	}
	p := last - offset
	if p < 0 {
		return 0, 0
	}
	q := p
	for q >= 0 && (limit < 0 || int64(p-q) < limit) && r.aboveMin(mem(q)) {
		q--
	}
	return q + 1, p + 1
}
