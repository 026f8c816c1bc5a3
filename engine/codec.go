package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/limitkv/limitkv/ratelimit"
)

// The value codec: one key's value and expiry as bytes, the form in which
// snapshots keep keys on disk and replication sends them to replicas. A
// value is a type byte, the absolute expiry in ms as a uvarint (0: none),
// then the body:
//
//	's' string     the bytes
//	'l' list       count, then each element as (uvarint length, bytes)
//	'h' hash       count, then (field, value) pairs as length-prefixed bytes
//	'z' zset       1 if in the large encoding (else 0), count, then (member
//	               as length-prefixed bytes, score as 8 bytes little-endian
//	               IEEE 754)
//	'S' set        1 if in the hashtable encoding (0: intset), count, then
//	               each member as (uvarint length, bytes)
//	'r' ratelimit  the rate-limit state bytes
//	'L' list       a list banned by RL.LOGIN BAN: the ban's end in ms (zig-zag
//	               varint), then the body of 'l'
//	'x' stream     see stream_codec.go
//
// The bytes are part of the on-disk format: changing them means a new
// snapshot format version.
const (
	valString byte = 's'
	valList   byte = 'l'
	valHash   byte = 'h'
	valZSet   byte = 'z'
	valLimit  byte = 'r'
	valSet    byte = 'S'
)

// valListBan is a list with an RL.LOGIN ban (format 3).
const valListBan byte = 'L'

// AppendStringHead appends the encoding of a string entry's value up to
// its bytes, which follow it (StringOf): a snapshot copies a big string a
// part at a time rather than encode it whole.
func AppendStringHead(dst []byte, e Entry) []byte {
	dst = append(dst, valString)
	return binary.AppendUvarint(dst, uint64(max(e.ExpireAt(), 0)))
}

// AppendValue appends the encoding of entry e, found in shard s (locked).
func AppendValue(dst []byte, s *Shard, e Entry) ([]byte, error) {
	exp := uint64(max(e.ExpireAt(), 0))
	var scratch [24]byte
	switch e.Kind() {
	case KindString:
		v, err := e.StringOf(scratch[:0])
		if err != nil {
			return dst, err
		}
		dst = append(dst, valString)
		dst = binary.AppendUvarint(dst, exp)
		return append(dst, v...), nil
	case KindList:
		l := s.Object(e).(*List)
		if ban := listBanEnd(e.rec); ban != 0 {
			dst = append(dst, valListBan)
			dst = binary.AppendUvarint(dst, exp)
			dst = binary.AppendVarint(dst, ban)
		} else {
			dst = append(dst, valList)
			dst = binary.AppendUvarint(dst, exp)
		}
		dst = binary.AppendUvarint(dst, uint64(l.Len()))
		for v := range l.All() {
			dst = appendLenBytes(dst, v)
		}
		return dst, nil
	case KindHash:
		h := s.Object(e).(*Hash)
		dst = append(dst, valHash)
		dst = binary.AppendUvarint(dst, exp)
		dst = binary.AppendUvarint(dst, uint64(h.Len()))
		for f, v := range h.All() {
			dst = appendLenBytes(dst, f)
			dst = appendLenBytes(dst, v)
		}
		return dst, nil
	case KindZSet:
		z := s.Object(e).(*ZSet)
		dst = append(dst, valZSet)
		dst = binary.AppendUvarint(dst, exp)
		large := byte(0)
		if z.Encoding() == "skiplist" {
			large = 1
		}
		dst = append(dst, large)
		dst = binary.AppendUvarint(dst, uint64(z.Len()))
		for m, sc := range z.All() {
			dst = appendLenBytes(dst, m)
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(sc))
		}
		return dst, nil
	case KindSet:
		st := s.Object(e).(*Set)
		dst = append(dst, valSet)
		dst = binary.AppendUvarint(dst, exp)
		dst = append(dst, b2byte(!st.IsIntset()))
		dst = binary.AppendUvarint(dst, uint64(st.Len()))
		for m := range st.All() {
			dst = appendLenBytes(dst, m)
		}
		return dst, nil
	case KindLimit:
		dst = append(dst, valLimit)
		dst = binary.AppendUvarint(dst, exp)
		return append(dst, limitBytes(s, e)...), nil
	case KindStream:
		dst = append(dst, valStream)
		dst = binary.AppendUvarint(dst, exp)
		return appendStreamBody(dst, s.Object(e).(*Stream)), nil
	}
	return dst, fmt.Errorf("cannot encode a value of type %s", e.Kind())
}

func b2byte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

func appendLenBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// ValueExpireAt returns the expiry recorded in an encoded value (0: none).
func ValueExpireAt(v []byte) (int64, error) {
	if len(v) == 0 {
		return 0, errors.New("empty value")
	}
	exp, n := binary.Uvarint(v[1:])
	if n <= 0 {
		return 0, errors.New("truncated expiry")
	}
	return int64(exp), nil
}

// Limits are the compact-encoding limits that decoded hashes, sorted sets
// and sets follow.
type Limits struct {
	Hash HashLimits
	ZSet ZSetLimits
	Set  SetLimits
}

// DefaultLimits are Redis's default listpack and intset limits.
var DefaultLimits = Limits{
	Hash: HashLimits{Entries: 512, Value: 64},
	ZSet: ZSetLimits{Entries: 128, Value: 64},
	Set:  SetLimits{IntsetEntries: 512},
}

// codecReader reads length-prefixed fields and remembers the first error.
type codecReader struct {
	b   []byte
	err error
}

func (r *codecReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errors.New("truncated number")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// varint reads a zig-zag encoded signed number.
func (r *codecReader) varint() int64 {
	u := r.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

func (r *codecReader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = errors.New("truncated field")
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

// count reads an element count, refusing one that the remaining bytes
// cannot hold (each element takes a byte at least), so that a damaged value
// cannot make the decoder allocate without bound.
func (r *codecReader) count() int {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.err = errors.New("element count larger than the value")
		return 0
	}
	return int(n)
}

// StoreValue decodes v, an encoded value, and stores it at key in database
// db, replacing whatever the key held, expired or not: the caller decides
// what an expiry in the past means (StoreValue stores it as it is). A value
// with no elements deletes the key. On a malformed value the key is left
// as it was and the error says what is wrong.
func (s *Shard) StoreValue(db int, key, v []byte, lim Limits) error {
	if len(v) == 0 {
		return errors.New("empty value")
	}
	r := codecReader{b: v[1:]}
	exp := int64(r.uvarint())
	if r.err != nil {
		return r.err
	}
	switch v[0] {
	case valString:
		s.SetString(db, key, r.b, exp)
		return nil
	case valList, valListBan:
		var ban int64
		if v[0] == valListBan {
			ban = r.varint()
		}
		n := r.count()
		l := NewList()
		for i := 0; i < n && r.err == nil; i++ {
			l.PushTail(r.bytes())
		}
		if r.err != nil {
			return r.err
		}
		s.storeObject(db, key, KindList, l, n, exp)
		if e, ok := s.Raw(db, key); ok && n > 0 && ban != 0 {
			s.setListBan(e, ban, exp)
		}
		return nil
	case valHash:
		n := r.count()
		pairs := func(yield func([]byte, []byte) bool) {
			for i := 0; i < n && r.err == nil; i++ {
				f := r.bytes()
				val := r.bytes()
				if r.err != nil || !yield(f, val) {
					return
				}
			}
		}
		h := NewHashFrom(pairs, lim.Hash)
		if r.err != nil {
			return r.err
		}
		s.storeObject(db, key, KindHash, h, h.Len(), exp)
		return nil
	case valZSet:
		large := r.uvarint() == 1
		n := r.count()
		pairs := func(yield func([]byte, float64) bool) {
			for i := 0; i < n && r.err == nil; i++ {
				m := r.bytes()
				if r.err != nil {
					return
				}
				if len(r.b) < 8 {
					r.err = errors.New("truncated score")
					return
				}
				sc := math.Float64frombits(binary.LittleEndian.Uint64(r.b))
				r.b = r.b[8:]
				if !yield(m, sc) {
					return
				}
			}
		}
		z, err := ZSetFrom(lim.ZSet, large, pairs)
		if r.err != nil {
			return r.err
		}
		if err != nil {
			return err
		}
		s.storeObject(db, key, KindZSet, z, z.Len(), exp)
		return nil
	case valSet:
		var st *Set
		if r.uvarint() == 1 {
			st = NewStringSet()
		} else {
			st = NewSet()
		}
		n := r.count()
		for i := 0; i < n && r.err == nil; i++ {
			if m := r.bytes(); r.err == nil {
				st.Add(m, lim.Set)
			}
		}
		if r.err != nil {
			return r.err
		}
		s.storeObject(db, key, KindSet, st, st.Len(), exp)
		return nil
	case valStream:
		st, err := decodeStreamBody(&r)
		if err != nil {
			return err
		}
		// An empty stream is a key all the same.
		s.SetObject(db, key, KindStream, st, exp)
		return nil
	case valLimit:
		if len(r.b) == 0 {
			return errors.New("empty rate-limit state")
		}
		var hb [binary.MaxVarintLen64]byte
		n := binary.PutUvarint(hb[:], uint64(len(r.b)))
		s.put(db, key, encLimit, exp, hb[:n], r.b, false, false)
		return nil
	}
	return fmt.Errorf("unknown value type %q", v[0])
}

// storeObject stores a decoded collection, or deletes the key when it has
// no elements (an empty collection is no key, as in Redis).
func (s *Shard) storeObject(db int, key []byte, kind Kind, obj any, n int, exp int64) {
	if n == 0 {
		s.Remove(db, key)
		return
	}
	s.SetObject(db, key, kind, obj, exp)
}

// Remove deletes key whether or not it has expired, and reports whether it
// existed: for deletions that come from elsewhere (a replica applying its
// master's), where this server's clock has no say.
func (s *Shard) Remove(db int, key []byte) bool {
	t := &s.dbs[db]
	i, _, ok := s.find(t, key, uint32(s.eng.hash(key)))
	if !ok {
		return false
	}
	s.deleteAt(db, t, i)
	return true
}

// Raw returns key's entry whether or not it has expired, with no side
// effect: for reading back what a command just wrote.
func (s *Shard) Raw(db int, key []byte) (Entry, bool) {
	t := &s.dbs[db]
	i, r, ok := s.find(t, key, uint32(s.eng.hash(key)))
	if !ok {
		return Entry{}, false
	}
	return Entry{rec: r, db: db, slot: i}, true
}

// AppendLimitValue appends the encoding of entry e, found in shard s
// (locked), with no expiry, when e holds what Redis has no type for: a
// rate-limit state, or a login list with its ban (RL.LOGIN BAN). It
// returns dst and false for any other value.
func AppendLimitValue(dst []byte, s *Shard, e Entry) ([]byte, bool) {
	switch {
	case e.Kind() == KindLimit:
	case e.Kind() == KindList && listBanEnd(e.rec) != 0:
	default:
		return dst, false
	}
	start := len(dst)
	dst, err := AppendValue(dst, s, e)
	if err != nil {
		return dst[:start], false
	}
	v, err := withExpireAt(dst[start:], 0)
	if err != nil {
		return dst[:start], false
	}
	return append(dst[:start], v...), true
}

// LimitValue checks v, an encoding that AppendLimitValue wrote and a
// client sent back (RESTORE), and returns it with expiry exp (0: none) for
// StoreValue. Only a whole rate-limit state (ratelimit.CheckState) and a
// login list with a ban and at least one element pass.
func LimitValue(v []byte, exp int64) ([]byte, error) {
	if len(v) == 0 {
		return nil, errors.New("empty value")
	}
	r := codecReader{b: v[1:]}
	r.uvarint()
	switch v[0] {
	case valLimit:
		if r.err == nil {
			r.err = ratelimit.CheckState(r.b)
		}
	case valListBan:
		ban := r.varint()
		n := r.count()
		for i := 0; i < n && r.err == nil; i++ {
			r.bytes()
		}
		if r.err == nil && (ban == 0 || n == 0 || len(r.b) != 0) {
			r.err = errors.New("not a banned login list")
		}
	default:
		return nil, fmt.Errorf("not a rate-limit value: type %q", v[0])
	}
	if r.err != nil {
		return nil, r.err
	}
	return withExpireAt(v, exp)
}

// withExpireAt returns a copy of the encoded value v with its expiry
// replaced by exp (0: none).
func withExpireAt(v []byte, exp int64) ([]byte, error) {
	if len(v) == 0 {
		return nil, errors.New("empty value")
	}
	_, n := binary.Uvarint(v[1:])
	if n <= 0 {
		return nil, errors.New("truncated expiry")
	}
	out := make([]byte, 0, len(v)+binary.MaxVarintLen64)
	out = append(out, v[0])
	out = binary.AppendUvarint(out, uint64(max(exp, 0)))
	return append(out, v[1+n:]...), nil
}
