package rdb

import (
	"iter"
	"math"
	"slices"
	"strconv"
)

// The RDB object types (rdb.h) DUMP payloads start with.
const (
	TypeString           = 0
	TypeList             = 1
	TypeSet              = 2
	TypeZSet             = 3
	TypeHash             = 4
	TypeZSet2            = 5
	TypeModule2          = 7
	TypeHashZipmap       = 9
	TypeListZiplist      = 10
	TypeSetIntset        = 11
	TypeZSetZiplist      = 12
	TypeHashZiplist      = 13
	TypeListQuicklist    = 14
	TypeStreamListpacks  = 15
	TypeHashListpack     = 16
	TypeZSetListpack     = 17
	TypeListQuicklist2   = 18
	TypeStreamListpacks2 = 19
)

// Kind is what a decoded value is, whatever its encoding was.
type Kind uint8

const (
	KindString Kind = iota + 1
	KindList
	KindSet
	KindZSet
	KindHash
	KindStream
)

// Value is a decoded DUMP payload.
type Value struct {
	Kind Kind
	// Type is the RDB type the payload had (TypeZSet2, TypeHashListpack,
	// ...), for callers that follow the sender's choice of encoding.
	Type byte
	// Str is a string's bytes.
	Str []byte
	// Elems are a list's elements in order, a set's members, a sorted
	// set's members (scores in Scores, same index), or a hash's fields
	// and values alternating.
	Elems  [][]byte
	Scores []float64
	// Stream is a stream's value.
	Stream *Stream
	// MaxLen is the length of the longest element (a hash's fields and
	// values, a sorted set's members), which with the count decides the
	// compact encoding on the receiving side.
	MaxLen int

	// While decoding, elements go into one buffer without pointers, cut
	// into Elems at the end: growing a slice of a million slices copies
	// pointers under the garbage collector's write barriers, many times
	// slower.
	arena []byte
	ends  []int
}

// Len is the number of elements: list elements, members, hash fields.
func (v *Value) Len() int {
	if v.Kind == KindHash {
		return len(v.Elems) / 2
	}
	return len(v.Elems)
}

// Decode reads a type byte and a value from payload: what Open returned,
// or, as Redis's RESTORE reads it, the whole DUMP payload, its footer
// included (a value that claims more bytes than precede the footer is read
// into it). Like RESTORE it ignores bytes after the value. It refuses with
// ErrBadData what Redis refuses (or would crash on): truncated or
// malformed encodings, empty collections, repeated members or fields, NaN
// scores, damaged streams (see decodeStream), and the types limitkv does
// not hold (modules, the pre-2.6 zipmap hashes).
//
// The strings of the result alias payload where they were stored verbatim.
func Decode(payload []byte) (Value, error) {
	r := NewReader(payload)
	t := r.Byte()
	v := Value{Type: t}
	if r.err != nil {
		return v, ErrBadData
	}
	ok := true
	switch t {
	case TypeString:
		v.Kind = KindString
		v.Str = r.String()
		if v.Str == nil {
			v.Str = []byte{}
		}
	case TypeList:
		v.Kind = KindList
		n := r.count()
		for i := 0; i < n && r.err == nil; i++ {
			v.add(r.String())
		}
	case TypeListZiplist:
		v.Kind = KindList
		ok = readZiplist(r.String(), v.addElement)
	case TypeListQuicklist, TypeListQuicklist2:
		v.Kind = KindList
		n := r.count()
		for i := 0; i < n && ok && r.err == nil; i++ {
			container := uint64(2)
			if t == TypeListQuicklist2 {
				container = r.Len()
			}
			node := r.String()
			switch {
			case r.err != nil || len(node) == 0:
				ok = false
			case container == 1: // a plain node: one element as it is
				v.add(node)
			case container != 2:
				ok = false
			case t == TypeListQuicklist2:
				ok = readListpack(node, v.addElement)
			default:
				ok = readZiplist(node, v.addElement)
			}
		}
	case TypeSet:
		v.Kind = KindSet
		n := r.count()
		for i := 0; i < n && r.err == nil; i++ {
			v.add(r.String())
		}
	case TypeSetIntset:
		v.Kind = KindSet
		ok = readIntset(r.String(), func(x int64) { v.add(strconv.AppendInt(nil, x, 10)) })
	case TypeZSet, TypeZSet2:
		v.Kind = KindZSet
		n := r.count()
		for i := 0; i < n && r.err == nil; i++ {
			m := r.String()
			var s float64
			if t == TypeZSet2 {
				s = r.BinaryDouble()
			} else {
				s = r.Double()
			}
			v.add(m)
			v.Scores = append(v.Scores, s)
		}
	case TypeZSetZiplist, TypeZSetListpack:
		v.Kind = KindZSet
		member := true
		read := readZiplist
		if t == TypeZSetListpack {
			read = readListpack
		}
		ok = read(r.String(), func(e lpElement) bool {
			if member {
				v.addElement(e)
			} else if e.isInt {
				v.Scores = append(v.Scores, float64(e.v))
			} else if s, good := parseScore(e.s); good {
				v.Scores = append(v.Scores, s)
			} else {
				return false
			}
			member = !member
			return true
		}) && member
	case TypeHash:
		v.Kind = KindHash
		n := r.count()
		for i := 0; i < n && r.err == nil; i++ {
			v.add(r.String())
			v.add(r.String())
		}
	case TypeHashZiplist, TypeHashListpack:
		v.Kind = KindHash
		read := readZiplist
		if t == TypeHashListpack {
			read = readListpack
		}
		ok = read(r.String(), v.addElement) && len(v.Elems)%2 == 0
	case TypeStreamListpacks, TypeStreamListpacks2:
		v.Kind = KindStream
		v.Stream, ok = decodeStream(r, t)
	default:
		return v, ErrBadData
	}
	v.cut()
	if !ok || r.err != nil || !v.check() {
		return Value{}, ErrBadData
	}
	return v, nil
}

// count reads an element count, refusing one that the remaining bytes
// cannot hold (each element takes a byte at least), so that a forged count
// cannot make the decoder reserve memory without bound.
func (r *Reader) count() int {
	n := r.Len()
	if n > uint64(len(r.b)) {
		r.fail()
		return 0
	}
	return int(n)
}

func (v *Value) add(s []byte) {
	v.arena = append(v.arena, s...)
	v.ends = append(v.ends, len(v.arena))
	v.MaxLen = max(v.MaxLen, len(s))
}

// cut makes Elems from the decoding buffer.
func (v *Value) cut() {
	v.Elems = make([][]byte, len(v.ends))
	start := 0
	for i, end := range v.ends {
		v.Elems[i] = v.arena[start:end:end]
		start = end
	}
	v.arena, v.ends = nil, nil
}

func (v *Value) addElement(e lpElement) bool {
	v.add(e.bytes())
	return true
}

// check refuses what Redis refuses once a value is read: no elements, a
// NaN score, a member or field twice.
func (v *Value) check() bool {
	switch v.Kind {
	case KindString, KindStream:
		return true
	case KindList:
		return len(v.Elems) > 0
	case KindZSet:
		if len(v.Scores) != len(v.Elems) {
			return false
		}
		for _, s := range v.Scores {
			if math.IsNaN(s) {
				return false
			}
		}
	}
	if len(v.Elems) == 0 {
		return false
	}
	step := 1
	if v.Kind == KindHash {
		step = 2
	}
	seen := make(map[string]struct{}, len(v.Elems)/step)
	for i := 0; i < len(v.Elems); i += step {
		if _, dup := seen[string(v.Elems[i])]; dup {
			return false
		}
		seen[string(v.Elems[i])] = struct{}{}
	}
	return true
}

// parseScore reads a listpack score stored as text (zzlStrtod).
func parseScore(b []byte) (float64, bool) {
	switch string(b) {
	case "inf", "+inf":
		return math.Inf(1), true
	case "-inf":
		return math.Inf(-1), true
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil && !isRangeErr(err) {
		return 0, false
	}
	return f, true
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// AppendStringValue appends a string value (RDB_TYPE_STRING).
func AppendStringValue(dst, s []byte) []byte {
	return AppendString(append(dst, TypeString), s)
}

// quicklist settings of Redis 7.0's defaults: list-max-listpack-size -2
// (nodes of at most 8 kB), counted as _quicklistNodeAllowInsert does.
const (
	quicklistNodeMax      = 8192
	quicklistOverhead     = 8
	quicklistPacked       = 2
	quicklistPlain        = 1
	quicklistPlainElement = 1 << 30
)

// AppendList appends a list as Redis 7.0 writes one
// (RDB_TYPE_LIST_QUICKLIST_2): its listpack nodes, split where pushing the
// elements one by one at the tail would have split them, each stored as a
// string (so compressed when that pays). n is the number of elements.
func AppendList(dst []byte, elems iter.Seq[[]byte]) []byte {
	// The node count comes first: the nodes are encoded after it, in
	// place, and the count is written in front of them at the end.
	var body []byte
	nodes := 0
	lp := listpack{b: make([]byte, lpHeader, quicklistNodeMax)}
	flush := func() {
		body = AppendLen(body, quicklistPacked)
		body = AppendString(body, lp.finish())
		lp.b, lp.n = lp.b[:lpHeader], 0
		nodes++
	}
	for e := range elems {
		// An element of 1 GB or more is a plain node in Redis; a
		// listpack holds it here too (limitkv's strings stop at 512 MB).
		if lp.n > 0 && lp.size()+len(e)+quicklistOverhead > quicklistNodeMax {
			flush()
		}
		lp.add(e)
	}
	if lp.n > 0 {
		flush()
	}
	dst = AppendLen(append(dst, TypeListQuicklist2), uint64(nodes))
	return append(dst, body...)
}

// AppendHashListpack appends a small hash (RDB_TYPE_HASH_LISTPACK): its
// pairs in order, as one listpack.
func AppendHashListpack(dst []byte, pairs iter.Seq2[[]byte, []byte]) []byte {
	lp := newListpack()
	for f, v := range pairs {
		lp.add(f)
		lp.add(v)
	}
	return AppendString(append(dst, TypeHashListpack), lp.finish())
}

// AppendHash appends a big hash (RDB_TYPE_HASH) of n pairs.
func AppendHash(dst []byte, n int, pairs iter.Seq2[[]byte, []byte]) []byte {
	dst = AppendLen(append(dst, TypeHash), uint64(n))
	for f, v := range pairs {
		dst = AppendString(dst, f)
		dst = AppendString(dst, v)
	}
	return dst
}

// AppendZSetListpack appends a small sorted set (RDB_TYPE_ZSET_LISTPACK),
// its members in rank order, each followed by its score as zzlInsertAt
// stores it: an integer when the score is one (-0 included), else "%.17g".
func AppendZSetListpack(dst []byte, members iter.Seq2[[]byte, float64]) []byte {
	lp := newListpack()
	var buf []byte
	for m, s := range members {
		lp.add(m)
		if i, ok := double2ll(s); ok {
			lp.addInt(i)
			continue
		}
		buf = appendScore(buf[:0], s)
		lp.add(buf)
	}
	return AppendString(append(dst, TypeZSetListpack), lp.finish())
}

// double2ll is Redis's: a score within ±LLONG_MAX/2 with no fraction.
func double2ll(f float64) (int64, bool) {
	const lim = float64(math.MaxInt64 / 2)
	if f < -lim || f > lim || f != math.Trunc(f) {
		return 0, false
	}
	return int64(f), true
}

// appendScore formats as d2string does for a score double2ll refused.
func appendScore(dst []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(dst, "inf"...)
	case math.IsInf(f, -1):
		return append(dst, "-inf"...)
	}
	return strconv.AppendFloat(dst, f, 'g', 17, 64)
}

// AppendZSet2 appends a big sorted set (RDB_TYPE_ZSET_2) of n members.
// Redis writes them from the highest rank down (so that loading inserts
// each at the skiplist's head): desc must yield them in that order.
func AppendZSet2(dst []byte, n int, desc iter.Seq2[[]byte, float64]) []byte {
	dst = AppendLen(append(dst, TypeZSet2), uint64(n))
	for m, s := range desc {
		dst = AppendString(dst, m)
		dst = AppendBinaryDouble(dst, s)
	}
	return dst
}

// IntsetMembers returns members as integers, ascending, if every one is
// the canonical form of an int64 (what an intset may hold).
func IntsetMembers(members [][]byte) ([]int64, bool) {
	vs := make([]int64, 0, len(members))
	for _, m := range members {
		v, ok := ParseInt(m)
		if !ok {
			return nil, false
		}
		vs = append(vs, v)
	}
	slices.Sort(vs)
	return vs, true
}

// AppendSetIntset appends a set of integers (RDB_TYPE_SET_INTSET), the
// form Redis 7.0 gives a set whose members are all integers, at most
// set-max-intset-entries of them. vs must be distinct.
func AppendSetIntset(dst []byte, vs []int64) []byte {
	vs = slices.Clone(vs)
	slices.Sort(vs)
	return AppendString(append(dst, TypeSetIntset), appendIntset(nil, vs))
}

// AppendSet appends any other set (RDB_TYPE_SET): the count, then the
// members in the set's own order.
func AppendSet(dst []byte, members [][]byte) []byte {
	dst = AppendLen(append(dst, TypeSet), uint64(len(members)))
	for _, m := range members {
		dst = AppendString(dst, m)
	}
	return dst
}
