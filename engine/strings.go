package engine

import (
	"encoding/binary"
	"math"
	"strconv"
)

// Strings are stored raw (encRaw) or, when the value is the canonical
// decimal form of an int64, as a varint (encInt): counters cost a few bytes
// and INCR never parses text.

// StringOf returns the value of a string entry; integers are formatted into
// buf. It fails with ErrWrongType for other types.
func (e Entry) StringOf(buf []byte) ([]byte, error) {
	switch e.rec[0] {
	case encRaw:
		return rawString(recPayload(e.rec)), nil
	case encInt:
		v, _ := binary.Varint(recPayload(e.rec))
		return strconv.AppendInt(buf[:0], v, 10), nil
	}
	return nil, ErrWrongType
}

// StrLen returns the length of a string entry.
func (e Entry) StrLen() (int, error) {
	switch e.rec[0] {
	case encRaw:
		n, _ := binary.Uvarint(recPayload(e.rec))
		return int(n), nil
	case encInt:
		var b [24]byte
		v, _ := binary.Varint(recPayload(e.rec))
		return len(strconv.AppendInt(b[:0], v, 10)), nil
	}
	return 0, ErrWrongType
}

// GetString looks up a string value for reading.
func (s *Shard) GetString(db int, key []byte, now int64, buf []byte) ([]byte, bool, error) {
	e, ok := s.Lookup(db, key, now)
	if !ok {
		return nil, false, nil
	}
	v, err := e.StringOf(buf)
	return v, err == nil, err
}

// SetString stores a string value under key, replacing a value of any type,
// with the given expiry (0 for none).
func (s *Shard) SetString(db int, key, val []byte, expireAt int64) Entry {
	if v, ok := ParseInt(val); ok {
		return s.SetInt(db, key, v, expireAt)
	}
	var hb [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(hb[:], uint64(len(val)))
	return s.put(db, key, encRaw, expireAt, hb[:n], val, false, false)
}

// SetInt stores an integer string value.
func (s *Shard) SetInt(db int, key []byte, v int64, expireAt int64) Entry {
	var hb [binary.MaxVarintLen64]byte
	n := binary.PutVarint(hb[:], v)
	return s.put(db, key, encInt, expireAt, hb[:n], nil, false, false)
}

// SetOptions are SET's conditions and expiry.
type SetOptions struct {
	NX, XX  bool
	Get     bool // return the old value; fail on a non-string
	KeepTTL bool
	// ExpireAt is the new absolute expiry in ms, 0 for none.
	ExpireAt int64
	// Owned, if set, is memory the caller gives up that holds the value at
	// Owned[OwnedOff:]: the shard may keep it as the value's record, writing
	// the record's header into Owned[:OwnedOff], instead of copying a big
	// value (see AdoptString).
	Owned    []byte
	OwnedOff int
}

// Set implements SET. With Get, the old value is appended to old and
// returned. It reports whether the value was written.
func (s *Shard) Set(db int, key, val []byte, now int64, o SetOptions, old []byte) (prev []byte, hadPrev, written bool, err error) {
	var e Entry
	var found bool
	if o.Get {
		e, found = s.Lookup(db, key, now)
	} else {
		e, found = s.Find(db, key, now)
	}
	if found && o.Get {
		var buf [24]byte
		v, err := e.StringOf(buf[:])
		if err != nil {
			return nil, false, false, err
		}
		prev, hadPrev = append(old[:0], v...), true
	}
	if (o.NX && found) || (o.XX && !found) {
		return prev, hadPrev, false, nil
	}
	exp := o.ExpireAt
	if o.KeepTTL && found {
		exp = e.ExpireAt()
	}
	if o.Owned == nil || !s.AdoptString(db, key, o.Owned, o.OwnedOff, exp) {
		s.SetString(db, key, val, exp)
	}
	return prev, hadPrev, true, nil
}

// AdoptString stores the string buf[off:] under key as SetString does, but
// in buf itself, when the value is big enough to live outside the arena and
// the record's header fits in buf[:off]: a big value then costs no copy and
// no second allocation. The caller gives buf up. It reports whether it
// stored the value; if not, buf is untouched.
func (s *Shard) AdoptString(db int, key []byte, buf []byte, off int, expireAt int64) bool {
	val := buf[off:]
	if len(val) <= maxBlock {
		return false
	}
	if _, isInt := ParseInt(val); isInt {
		return false
	}
	var hb [binary.MaxVarintLen64]byte
	hn := binary.PutUvarint(hb[:], uint64(len(val)))
	head := recSize(len(key), expireAt != 0, hn)
	if head > off {
		return false
	}
	r := buf[off-head:]
	writeRecord(r[:head], encRaw, 0, 0, key, expireAt, hb[:hn], nil) // putHeap sets the stamp
	s.putHeap(db, key, r, expireAt)
	return true
}

// IncrBy adds delta to the integer at key, creating it as 0 if absent, and
// keeps the key's TTL.
func (s *Shard) IncrBy(db int, key []byte, now int64, delta int64) (int64, error) {
	e, found := s.Find(db, key, now)
	var cur, exp int64
	if found {
		switch e.rec[0] {
		case encInt:
			cur, _ = binary.Varint(recPayload(e.rec))
		case encRaw:
			v, ok := ParseInt(rawString(recPayload(e.rec)))
			if !ok {
				return 0, ErrNotInteger
			}
			cur = v
		default:
			return 0, ErrWrongType
		}
		exp = e.ExpireAt()
	}
	if (delta < 0 && cur < 0 && delta < math.MinInt64-cur) ||
		(delta > 0 && cur > 0 && delta > math.MaxInt64-cur) {
		return 0, ErrOverflow
	}
	cur += delta
	if found && e.rec[0] == encInt {
		// Same width: rewrite the varint in place and skip the record rebuild.
		p := recPayload(e.rec)
		if varintLen(cur) == len(p) {
			binary.PutVarint(p, cur)
			s.Touch(e)
			return cur, nil
		}
	}
	s.SetInt(db, key, cur, exp)
	return cur, nil
}

func varintLen(v int64) int {
	u := uint64(v) << 1
	if v < 0 {
		u = ^u
	}
	return uvarintLen(u)
}

// IncrByFloat adds incr to the number at key in long double precision, as
// Redis does, and returns the stored text.
func (s *Shard) IncrByFloat(db int, key []byte, now int64, incr []byte) (string, error) {
	by, ok := ParseLongDouble(incr)
	if !ok {
		return "", ErrNotFloat
	}
	e, found := s.Find(db, key, now)
	var exp int64
	cur, _ := ParseLongDouble([]byte("0"))
	if found {
		var buf [24]byte
		v, err := e.StringOf(buf[:])
		if err != nil {
			return "", err
		}
		if cur, ok = ParseLongDouble(v); !ok {
			return "", ErrNotFloat
		}
		exp = e.ExpireAt()
	}
	sum, ok := AddLongDouble(cur, by)
	if !ok {
		return "", ErrNaNOrInf
	}
	out := FormatLongDouble(sum)
	s.SetString(db, key, []byte(out), exp)
	return out, nil
}

// MutableString returns a string entry's bytes, extended with zeros to at
// least n bytes, for the caller to change in place (APPEND, SETRANGE,
// SETBIT). A missing key is created empty without a TTL. The caller must
// call Touch on the returned entry after changing the bytes.
func (s *Shard) MutableString(db int, key []byte, now int64, n int) (Entry, []byte, error) {
	e, found := s.Find(db, key, now)
	var old []byte
	var exp int64
	if found {
		switch e.rec[0] {
		case encRaw:
			old = rawString(recPayload(e.rec))
			if len(old) >= n {
				return e, old, nil
			}
		case encInt:
			var buf [24]byte
			v, _ := e.StringOf(buf[:])
			old = append([]byte(nil), v...)
		default:
			return Entry{}, nil, ErrWrongType
		}
		exp = e.ExpireAt()
	}
	if n < len(old) {
		n = len(old)
	}
	e = s.growString(db, key, e, found, old, n, exp)
	return e, rawString(recPayload(e.rec)), nil
}

// growString rewrites key as a raw string of length n holding old followed
// by zeros. A big string (a heap record) is given spare capacity so that
// repeated appends cost amortised O(1) per byte, as Redis's sds strings do.
func (s *Shard) growString(db int, key []byte, e Entry, found bool, old []byte, n int, exp int64) Entry {
	var hb [binary.MaxVarintLen64]byte
	hn := binary.PutUvarint(hb[:], uint64(n))
	size := recSize(len(key), exp != 0, hn+n)
	if found && size > maxBlock {
		t := &s.dbs[db]
		ref := slotRef(t.slots[e.slot])
		stub := s.arena.bytes(ref, 6)
		if stub[0] == encStub && e.rec[0] == encRaw && size <= cap(e.rec) {
			// Extend in place when the length prefix keeps its width.
			p := recPayload(e.rec)
			_, w := binary.Uvarint(p)
			if w == hn {
				start := len(e.rec) - len(p)
				r := e.rec[:size]
				copy(r[start:], hb[:hn])
				clear(r[start+hn+len(old):])
				s.objs[le32(stub[2:])] = r
				e.rec = r
				return e
			}
		}
		if stub[0] == encStub {
			// Build the new record with room to grow, then swap it in.
			r := make([]byte, size, size+size/2)
			writeRecord(r, encRaw, 0, recStamp(e.rec), key, exp, hb[:hn], old)
			r[1] |= e.rec[1] & flagDirty
			s.replaceHeap(le32(stub[2:]), r)
			e.rec = r
			return e
		}
	}
	if size > maxBlock {
		// Build the heap record at once: a big value is allocated (and
		// its pages touched) once, not through a buffer and a copy.
		r := make([]byte, size)
		writeRecord(r, encRaw, 0, 0, key, exp, hb[:hn], old)
		return s.putHeap(db, key, r, exp)
	}
	buf := append(s.scratch[:0], old...)
	buf = append(buf, make([]byte, n-len(buf))...)
	s.scratch = buf
	return s.put(db, key, encRaw, exp, hb[:hn], buf, false, true)
}
