package engine

import "testing"

// Get finds each collection type at its key, nil when the key is absent,
// ErrWrongType for another type; a read counts a hit or a miss, a write
// neither.
func TestGetTyped(t *testing.T) {
	e := New(Config{Databases: 1})
	now := e.Now()
	sh := e.Shard(0)
	sh.Lock()
	defer sh.Unlock()
	l := NewList()
	l.PushTail([]byte("x"))
	sh.SetObject(0, []byte("l"), KindList, l, 0)
	sh.SetString(0, []byte("s"), []byte("v"), 0)
	if _, got, err := Get[*List](sh, 0, []byte("l"), now, ForRead); err != nil || got != l {
		t.Fatalf("list: %v %v", got, err)
	}
	if _, got, err := Get[*Hash](sh, 0, []byte("l"), now, ForWrite); err != ErrWrongType || got != nil {
		t.Fatalf("a list read as a hash: %v %v", got, err)
	}
	if _, got, err := Get[*ZSet](sh, 0, []byte("s"), now, ForRead); err != ErrWrongType || got != nil {
		t.Fatalf("a string read as a sorted set: %v %v", got, err)
	}
	hits, misses := sh.Hits, sh.Misses
	if _, got, err := Get[*Set](sh, 0, []byte("none"), now, ForWrite); err != nil || got != nil {
		t.Fatalf("a missing key: %v %v", got, err)
	}
	if sh.Hits != hits || sh.Misses != misses {
		t.Fatal("a write lookup counted a hit or a miss")
	}
	if _, _, err := Get[*Set](sh, 0, []byte("none"), now, ForRead); err != nil || sh.Misses != misses+1 {
		t.Fatalf("a read of a missing key: %v, misses %d", err, sh.Misses-misses)
	}
}
