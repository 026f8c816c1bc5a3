package engine

// Collection is a value kept as an object of the shard: what Get finds.
type Collection interface {
	*Hash | *Set | *List | *ZSet | *Stream
}

// Access says what a typed lookup is for. A read counts a keyspace hit or
// miss and touches the key's access stamp, as Redis's lookupKeyRead does;
// a write does neither (lookupKeyWrite): Lookup and Find.
type Access bool

const (
	ForRead  Access = true
	ForWrite Access = false
)

// Get finds the value of type T at key: the entry and the object, a nil
// object when the key does not exist, ErrWrongType when it holds another
// type. The one way commands reach a typed value.
func Get[T Collection](s *Shard, db int, key []byte, now int64, a Access) (Entry, T, error) {
	var e Entry
	var ok bool
	if a == ForRead {
		e, ok = s.Lookup(db, key, now)
	} else {
		e, ok = s.Find(db, key, now)
	}
	var none T
	if !ok {
		return e, none, nil
	}
	if e.Kind() != kindOf[T]() {
		return e, none, ErrWrongType
	}
	return e, s.Object(e).(T), nil
}

func kindOf[T Collection]() Kind {
	var v T
	switch any(v).(type) {
	case *Hash:
		return KindHash
	case *Set:
		return KindSet
	case *List:
		return KindList
	case *Stream:
		return KindStream
	}
	return KindZSet
}
