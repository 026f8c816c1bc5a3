// Package persist keeps limitkv's keyspace on disk as incremental
// snapshots in a Pebble database. The in-memory engine is the source of
// truth; every snapshot interval the keys written, deleted or expired since
// the last snapshot are written in one synced batch, so a crash at any
// instant leaves the previous complete snapshot and loses at most one
// interval. It knows the engine, not the wire.
package persist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"limitkv/engine"
)

// On-disk layout. Every Pebble key starts with a tag byte:
//
//	0x00 "meta"                  format marker: magic, format version
//	0x01 db (2 bytes, BE) key    one key of the keyspace
//
// A value is a type byte, the absolute expiry in ms as a uvarint (0: none),
// then the body:
//
//	's' string     the bytes
//	'l' list       count, then each element as (uvarint length, bytes)
//	'h' hash       count, then (field, value) pairs as length-prefixed bytes
//	'z' zset       1 if in the large encoding (else 0), count, then (member
//	               as length-prefixed bytes, score as 8 bytes little-endian
//	               IEEE 754)
//	'r' ratelimit  the engine's state bytes
const (
	magic         = "limitkv-snapshot"
	formatVersion = 1

	tagMeta byte = 0x00
	tagKey  byte = 0x01

	typeString byte = 's'
	typeList   byte = 'l'
	typeHash   byte = 'h'
	typeZSet   byte = 'z'
	typeLimit  byte = 'r'
)

var metaKey = []byte{tagMeta, 'm', 'e', 't', 'a'}

func metaValue() []byte {
	b := append([]byte(magic), 0)
	return binary.AppendUvarint(b, formatVersion)
}

// parseMeta returns the format version recorded in a meta value.
func parseMeta(v []byte) (int, error) {
	if len(v) < len(magic)+2 || string(v[:len(magic)]) != magic || v[len(magic)] != 0 {
		return 0, errors.New("meta record is not limitkv's")
	}
	n, w := binary.Uvarint(v[len(magic)+1:])
	if w <= 0 {
		return 0, errors.New("meta record is damaged")
	}
	return int(n), nil
}

// dataKey is the Pebble key of key in database db.
func dataKey(dst []byte, db int, key []byte) []byte {
	dst = append(dst, tagKey, byte(db>>8), byte(db))
	return append(dst, key...)
}

// dbPrefix and dbEnd bound database db's keys, for range deletions.
func dbPrefix(db int) []byte { return []byte{tagKey, byte(db >> 8), byte(db)} }
func dbEnd(db int) []byte    { return dbPrefix(db + 1) }

func parseDataKey(k []byte) (db int, key []byte, ok bool) {
	if len(k) < 3 || k[0] != tagKey {
		return 0, nil, false
	}
	return int(k[1])<<8 | int(k[2]), k[3:], true
}

// encodeValue appends the encoding of entry e (in shard s, locked).
func encodeValue(dst []byte, s *engine.Shard, e engine.Entry) ([]byte, error) {
	exp := uint64(max(e.ExpireAt(), 0))
	var scratch [24]byte
	switch e.Kind() {
	case engine.KindString:
		v, err := e.StringOf(scratch[:0])
		if err != nil {
			return dst, err
		}
		dst = append(dst, typeString)
		dst = binary.AppendUvarint(dst, exp)
		return append(dst, v...), nil
	case engine.KindList:
		l := s.Object(e).(*engine.List)
		dst = append(dst, typeList)
		dst = binary.AppendUvarint(dst, exp)
		dst = binary.AppendUvarint(dst, uint64(l.Len()))
		for v := range l.All() {
			dst = appendBytes(dst, v)
		}
		return dst, nil
	case engine.KindHash:
		h := s.Object(e).(*engine.Hash)
		dst = append(dst, typeHash)
		dst = binary.AppendUvarint(dst, exp)
		dst = binary.AppendUvarint(dst, uint64(h.Len()))
		for f, v := range h.All() {
			dst = appendBytes(dst, f)
			dst = appendBytes(dst, v)
		}
		return dst, nil
	case engine.KindZSet:
		z := s.Object(e).(*engine.ZSet)
		dst = append(dst, typeZSet)
		dst = binary.AppendUvarint(dst, exp)
		large := byte(0)
		if z.Encoding() == "skiplist" {
			large = 1
		}
		dst = append(dst, large)
		dst = binary.AppendUvarint(dst, uint64(z.Len()))
		for m, sc := range z.All() {
			dst = appendBytes(dst, m)
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(sc))
		}
		return dst, nil
	case engine.KindLimit:
		dst = append(dst, typeLimit)
		dst = binary.AppendUvarint(dst, exp)
		return append(dst, s.LimitBytes(e)...), nil
	}
	return dst, fmt.Errorf("cannot encode a value of type %s", e.Kind())
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// Limits are the compact-encoding limits that rebuilt hashes and sorted
// sets must follow.
type Limits struct {
	Hash engine.HashLimits
	ZSet engine.ZSetLimits
}

// reader reads length-prefixed fields and remembers the first error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
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

func (r *reader) bytes() []byte {
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
// cannot make the loader allocate without bound.
func (r *reader) count() int {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.err = errors.New("element count larger than the value")
		return 0
	}
	return int(n)
}

// restore decodes value v and stores it at key in database db of shard s
// (locked). It reports whether the key had already expired at now, in which
// case nothing is stored.
func restore(s *engine.Shard, db int, key, v []byte, now int64, lim Limits) (expired bool, err error) {
	if len(v) == 0 {
		return false, errors.New("empty value")
	}
	r := reader{b: v[1:]}
	exp := int64(r.uvarint())
	if r.err != nil {
		return false, r.err
	}
	if exp != 0 && now > exp {
		return true, nil
	}
	switch v[0] {
	case typeString:
		s.SetString(db, key, r.b, exp)
	case typeList:
		n := r.count()
		l := engine.NewList()
		for i := 0; i < n && r.err == nil; i++ {
			l.PushTail(r.bytes())
		}
		if r.err == nil && n > 0 {
			s.SetObject(db, key, engine.KindList, l, exp)
		}
	case typeHash:
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
		h := engine.NewHashFrom(pairs, lim.Hash)
		if r.err == nil && h.Len() > 0 {
			s.SetObject(db, key, engine.KindHash, h, exp)
		}
	case typeZSet:
		large := r.uvarint() == 1
		n := r.count()
		pairs := func(yield func([]byte, float64) bool) {
			for i := 0; i < n && r.err == nil; i++ {
				m := r.bytes()
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
		z, zerr := engine.ZSetFrom(lim.ZSet, large, pairs)
		if zerr != nil && r.err == nil {
			r.err = zerr
		}
		if r.err == nil && z.Len() > 0 {
			s.SetObject(db, key, engine.KindZSet, z, exp)
		}
	case typeLimit:
		if len(r.b) == 0 {
			return false, errors.New("empty rate-limit state")
		}
		s.SetLimitState(db, key, now, r.b, exp)
	default:
		return false, fmt.Errorf("unknown value type %q", v[0])
	}
	return false, r.err
}
