package engine

import (
	"bytes"
	"iter"
	"math"
	"strconv"
)

// A ZSet is a sorted set: unique members ordered by score, then by member
// bytes. It starts in a compact encoding (zset_compact.go: one []byte, what
// Redis calls a listpack) and moves for good to the large one (zset_big.go:
// an order-statistic B+tree plus a member index) once it holds more than
// ZSetLimits.Entries members or a member longer than ZSetLimits.Value
// bytes, as Redis 7.0 converts at zset-max-listpack-entries/-value.
//
// Positions are ranks: 0 is the lowest score. Every range command reduces to
// a window of ranks [lo, hi) and walks it, so both encodings implement the
// same few primitives. Member slices passed to callbacks are valid only
// during the call.
type ZSet struct {
	lp   []byte // compact entries, sorted; unused once big is set
	n    int32  // entries in lp
	tail int32  // offset of the last entry in lp
	big  *zbig
}

// zsetBytes is a ZSet's allocation class, for MemoryUsage.
const zsetBytes = 48

// ZSetLimits are the compact encoding's limits: zset-max-listpack-entries
// and zset-max-listpack-value.
type ZSetLimits struct {
	Entries int
	Value   int
}

// NewZSet returns an empty sorted set in the compact encoding.
func NewZSet() *ZSet { return &ZSet{} }

// ZSetFrom builds a sorted set from (member, score) pairs, for restoring
// snapshots: each pair is added as ZADD would (a repeated member takes the
// later score) and the encoding follows lim as if the pairs had been added
// one by one; pairs in rank order, as All yields them, take both
// encodings' fast path for members that sort last. With large set, the set
// starts in the large encoding, as the saved one was: the compact encoding
// turns -0 into 0 and would change the scores of a large set. It fails with
// ErrNotFloat on a NaN score.
func ZSetFrom(lim ZSetLimits, large bool, pairs iter.Seq2[[]byte, float64]) (*ZSet, error) {
	z := NewZSet()
	if large {
		z.convert()
	}
	for m, s := range pairs {
		if math.IsNaN(s) {
			return nil, ErrNotFloat
		}
		z.Add(m, s, 0, lim)
	}
	return z, nil
}

// All yields every member and its score in rank order, for snapshots.
func (z *ZSet) All() iter.Seq2[[]byte, float64] {
	return func(yield func([]byte, float64) bool) {
		z.Range(0, z.Len(), false, nil, yield)
	}
}

// Len returns the number of members.
func (z *ZSet) Len() int {
	if z.big != nil {
		return z.big.tree.n
	}
	return int(z.n)
}

// Encoding names the representation as Redis's OBJECT ENCODING does.
func (z *ZSet) Encoding() string {
	if z.big != nil {
		return "skiplist"
	}
	return "listpack"
}

// MemoryUsage estimates the bytes the set holds.
func (z *ZSet) MemoryUsage() int64 {
	n := int64(zsetBytes)
	if z.big != nil {
		return n + z.big.memoryUsage()
	}
	return n + int64(cap(z.lp))
}

// ZAddFlags are ZADD's options.
type ZAddFlags uint8

const (
	ZAddNX   ZAddFlags = 1 << iota // only add new members
	ZAddXX                         // only update existing members
	ZAddGT                         // only update to a greater score
	ZAddLT                         // only update to a lower score
	ZAddIncr                       // add the score to the current one
)

// ZAddResult says what Add did.
type ZAddResult uint8

const (
	ZAddSkipped   ZAddResult = iota // an option ruled the change out
	ZAddAdded                       // a new member
	ZAddUpdated                     // the member's score changed
	ZAddUnchanged                   // the member already had that score
	ZAddNaN                         // the increment gave NaN; nothing changed
)

// Add adds member with score, or updates its score, under ZADD's options
// f, and returns what it did and the member's score afterwards (valid
// unless the result is ZAddSkipped or ZAddNaN). The set leaves the compact
// encoding when the new member would pass lim. Scores compare with ==, so
// -0 and 0 are the same score, as in Redis; the compact encoding stores -0
// as 0 because Redis's listpack does.
func (z *ZSet) Add(member []byte, score float64, f ZAddFlags, lim ZSetLimits) (ZAddResult, float64) {
	if math.IsNaN(score) {
		return ZAddNaN, 0
	}
	cur, found := z.Score(member)
	if found {
		if f&ZAddNX != 0 {
			return ZAddSkipped, 0
		}
		if f&ZAddIncr != 0 {
			score += cur
			if math.IsNaN(score) {
				return ZAddNaN, 0
			}
		}
		if (f&ZAddLT != 0 && score >= cur) || (f&ZAddGT != 0 && score <= cur) {
			return ZAddSkipped, 0
		}
		if score == cur {
			return ZAddUnchanged, score
		}
		if z.big != nil {
			z.big.setScore(member, score)
		} else {
			z.lpSetScore(member, score)
		}
		return ZAddUpdated, score
	}
	if f&ZAddXX != 0 {
		return ZAddSkipped, 0
	}
	if z.big == nil && (z.Len()+1 > lim.Entries || len(member) > lim.Value || len(z.lp)+len(member) > lpMaxBytes) {
		z.convert()
	}
	if z.big != nil {
		z.big.add(member, score)
	} else {
		z.lpInsert(member, score)
	}
	return ZAddAdded, score
}

// Score returns member's score.
func (z *ZSet) Score(member []byte) (float64, bool) {
	if z.big != nil {
		id, _, ok := z.big.lookup(member)
		if !ok {
			return 0, false
		}
		return z.big.items[id].score, true
	}
	_, _, e, ok := z.lpFind(member)
	return e.score, ok
}

// Rank returns member's rank counted from the lowest score.
func (z *ZSet) Rank(member []byte) (int, bool) {
	if z.big != nil {
		return z.big.rank(member)
	}
	rank, _, _, ok := z.lpFind(member)
	return rank, ok
}

// Remove deletes member and reports whether it was there.
func (z *ZSet) Remove(member []byte) bool {
	if z.big != nil {
		return z.big.remove(member)
	}
	_, off, e, ok := z.lpFind(member)
	if ok {
		z.lpCut(off, e.end, 1)
	}
	return ok
}

// RemoveRange deletes the members of ranks [lo, hi) and returns how many
// it deleted.
func (z *ZSet) RemoveRange(lo, hi int) int {
	lo, hi = max(lo, 0), min(hi, z.Len())
	if lo >= hi {
		return 0
	}
	if z.big != nil {
		z.big.removeRange(lo, hi)
	} else {
		z.lpRemoveRange(lo, hi)
	}
	return hi - lo
}

// Range calls fn for the members of ranks [lo, hi), in ascending rank order
// or, with rev, descending, until fn returns false; fn must not change the
// set. buf is scratch space for members that must be formatted or copied
// (nil is fine); passing one with spare capacity avoids allocating.
func (z *ZSet) Range(lo, hi int, rev bool, buf []byte, fn func(member []byte, score float64) bool) {
	lo, hi = max(lo, 0), min(hi, z.Len())
	if lo >= hi {
		return
	}
	if z.big != nil {
		z.big.walk(lo, hi, rev, buf, fn)
	} else {
		z.lpWalk(lo, hi, rev, buf, fn)
	}
}

// RankWindow turns ZRANGE's start and stop indexes (negative ones count
// from the end) into the window of ranks [lo, hi) they cover.
func (z *ZSet) RankWindow(start, stop int64) (lo, hi int) {
	n := int64(z.Len())
	if start < 0 {
		start += n
	}
	if stop < 0 {
		stop += n
	}
	start = max(start, 0)
	if start > stop || start >= n {
		return 0, 0
	}
	stop = min(stop, n-1)
	return int(start), int(stop + 1)
}

// ScoreRange is a score interval as ZRANGEBYSCORE takes it.
type ScoreRange struct {
	Min, Max     float64
	MinEx, MaxEx bool // the bound is exclusive: "(1.5"
}

func (r *ScoreRange) aboveMin(s float64) bool {
	if r.MinEx {
		return s > r.Min
	}
	return s >= r.Min
}

func (r *ScoreRange) belowMax(s float64) bool {
	if r.MaxEx {
		return s < r.Max
	}
	return s <= r.Max
}

// ParseScoreRange parses ZRANGEBYSCORE's min and max as Redis does: an
// optional "(" for an exclusive bound, then anything C's strtod takes in
// full (leading blanks, hex, "inf", an overflow to infinity), except NaN.
func ParseScoreRange(min, max []byte) (ScoreRange, bool) {
	var r ScoreRange
	var ok1, ok2 bool
	r.Min, r.MinEx, ok1 = parseScoreBound(min)
	r.Max, r.MaxEx, ok2 = parseScoreBound(max)
	return r, ok1 && ok2
}

func parseScoreBound(b []byte) (float64, bool, bool) {
	ex := len(b) > 0 && b[0] == '('
	if ex {
		b = b[1:]
	}
	f, ok := parseStrtod(b)
	return f, ex, ok
}

// parseStrtod accepts what strtod converts in full: Redis's range parsing
// checks only that strtod consumed everything and gave no NaN, so an empty
// string is 0 and out-of-range values become infinity or zero.
func parseStrtod(b []byte) (float64, bool) {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i] // strtod reads a C string
	}
	if len(b) == 0 {
		return 0, true
	}
	i := 0
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	s := string(b[i:])
	if s == "" || bytes.IndexByte(b, '_') >= 0 {
		return 0, false
	}
	if hexPrefix(s) && !hasHexExponent(s) {
		s += "p0"
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); !ok || ne.Err != strconv.ErrRange {
			return 0, false
		}
		// Out of range: f is already the infinity or zero strtod returns.
	}
	if math.IsNaN(f) {
		return 0, false
	}
	return f, true
}

func hasHexExponent(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 'p' || s[i] == 'P' {
			return true
		}
	}
	return false
}

// ScoreSpan returns the ranks [lo, hi) of the members whose scores are in
// r: members are sorted by score, so they are one window.
func (z *ZSet) ScoreSpan(r ScoreRange) (lo, hi int) {
	if z.big != nil {
		// "" sorts first among members, so (score, "") is the lowest key
		// with that score.
		lo = z.big.tree.search(r.Min, "", r.MinEx)
		hi = z.big.tree.search(r.Max, "", !r.MaxEx)
	} else {
		lo, hi = z.lpScoreSpan(r)
	}
	return lo, max(hi, lo)
}

// LexBound is one end of a ZRANGEBYLEX range: "-" (Inf -1), "+" (Inf 1),
// or a string, inclusive ("[a") or exclusive ("(a").
type LexBound struct {
	Value []byte
	Inf   int8
	Excl  bool
}

// LexRange is a member interval as ZRANGEBYLEX takes it.
type LexRange struct{ Min, Max LexBound }

// ParseLexRange parses ZRANGEBYLEX's min and max.
func ParseLexRange(min, max []byte) (LexRange, bool) {
	var r LexRange
	var ok1, ok2 bool
	r.Min, ok1 = parseLexBound(min)
	r.Max, ok2 = parseLexBound(max)
	return r, ok1 && ok2
}

func parseLexBound(b []byte) (LexBound, bool) {
	if len(b) == 0 {
		return LexBound{}, false
	}
	switch b[0] {
	case '-', '+':
		if len(b) > 1 && b[1] != 0 { // Redis tests the C string
			return LexBound{}, false
		}
		if b[0] == '-' {
			return LexBound{Inf: -1, Excl: true}, true
		}
		return LexBound{Inf: 1, Excl: true}, true
	case '(':
		return LexBound{Value: b[1:], Excl: true}, true
	case '[':
		return LexBound{Value: b[1:]}, true
	}
	return LexBound{}, false
}

// cmpLex orders two bounds, "-" below and "+" above every string.
func cmpLex(a, b LexBound) int {
	if a.Inf != 0 || b.Inf != 0 {
		return int(a.Inf) - int(b.Inf)
	}
	return bytes.Compare(a.Value, b.Value)
}

// empty reports whether no string can be in r, as Redis checks up front.
func (r *LexRange) empty() bool {
	c := cmpLex(r.Min, r.Max)
	return c > 0 || (c == 0 && (r.Min.Excl || r.Max.Excl))
}

func (r *LexRange) aboveMin(m []byte) bool {
	switch r.Min.Inf {
	case -1:
		return true
	case 1:
		return false
	}
	c := bytes.Compare(m, r.Min.Value)
	return c > 0 || (c == 0 && !r.Min.Excl)
}

func (r *LexRange) belowMax(m []byte) bool {
	switch r.Max.Inf {
	case 1:
		return true
	case -1:
		return false
	}
	c := bytes.Compare(m, r.Max.Value)
	return c < 0 || (c == 0 && !r.Max.Excl)
}

// LexWindow returns the ranks ZRANGEBYLEX visits for r after skipping
// offset members and taking at most limit (negative: no limit): [lo, hi),
// walked upwards, or downwards from hi-1 with rev. Lex ranges assume every
// member has the same score; for sets where that does not hold, the compact
// encoding reproduces Redis's listpack walk exactly.
func (z *ZSet) LexWindow(r LexRange, rev bool, offset, limit int64) (lo, hi int) {
	if r.empty() || z.Len() == 0 || offset < 0 || offset >= int64(z.Len()) {
		return 0, 0
	}
	if z.big != nil {
		lo, hi = z.big.lexSpan(&r)
		if lo >= hi {
			return 0, 0
		}
		return window(lo, hi, rev, offset, limit)
	}
	return z.lpLexWindow(&r, rev, int(offset), limit)
}

// ScoreWindow returns the ranks ZRANGEBYSCORE visits for r after skipping
// offset members and taking at most limit (negative: no limit), like
// LexWindow.
func (z *ZSet) ScoreWindow(r ScoreRange, rev bool, offset, limit int64) (lo, hi int) {
	if offset < 0 || offset >= int64(z.Len()) {
		return 0, 0
	}
	lo, hi = z.ScoreSpan(r)
	return window(lo, hi, rev, offset, limit)
}

// window cuts offset and limit out of the span [lo, hi), from the top end
// with rev.
func window(lo, hi int, rev bool, offset, limit int64) (int, int) {
	n := int64(hi - lo)
	if offset >= n {
		return 0, 0
	}
	take := n - offset
	if limit >= 0 && limit < take {
		take = limit
	}
	if rev {
		top := int64(hi) - offset
		return int(top - take), int(top)
	}
	start := int64(lo) + offset
	return int(start), int(start + take)
}

// Scan calls fn for a batch of members as ZSCAN returns them and returns
// the cursor to continue from (0 when done). The compact encoding returns
// everything at once, as Redis does for a listpack; the large one walks its
// member index with SCAN's reverse-binary cursor, so members present for a
// whole iteration are returned at least once even if the set is resized
// in between. count is ZSCAN's COUNT.
func (z *ZSet) Scan(cursor uint64, count int, buf []byte, fn func(member []byte, score float64)) uint64 {
	if z.big != nil {
		return z.big.scan(cursor, count, buf, fn)
	}
	z.lpWalk(0, z.Len(), false, buf, func(m []byte, s float64) bool {
		fn(m, s)
		return true
	})
	return 0
}

// AppendScanScore formats a score as ZSCAN shows it for this set: a
// listpack keeps scores as text written by Redis's d2string (integers
// within ±2^62 in full, others with %.17g); the large encoding formats them
// with %.17g.
func (z *ZSet) AppendScanScore(dst []byte, score float64) []byte {
	if z.big == nil && score >= -(1<<62) && score <= 1<<62 && score == math.Trunc(score) {
		return strconv.AppendInt(dst, int64(score), 10)
	}
	return AppendFloat(dst, score)
}

// convert moves a compact set to the large encoding.
func (z *ZSet) convert() {
	b := newZBig(z.Len())
	z.lpWalk(0, z.Len(), false, nil, func(m []byte, s float64) bool {
		b.add(m, s)
		return true
	})
	z.big, z.lp, z.n, z.tail = b, nil, 0, 0
}
