package engine

import (
	"slices"
	"strconv"
	"testing"
)

// Adopt swaps a dataset built in a staging engine for the live one: the
// keys of the staged one are found (big strings and objects included),
// the old ones are gone and left in the staging engine, the memory counts
// follow both, watched keys of either dataset are touched, and the next
// snapshot rewrites every database.
func TestAdoptSwapsDatasets(t *testing.T) {
	e := New(Config{Databases: 3, Clock: NewManualClock(1_700_000_000_000)})
	e.TrackChanges(true)
	e.TakeFlushed()
	now := e.Now()
	put := func(eng *Engine, prefix string, db, n int) {
		for i := 0; i < n; i++ {
			k := []byte(prefix + strconv.Itoa(i))
			s := eng.ShardFor(k)
			s.mu.Lock()
			switch i % 3 {
			case 0:
				s.SetString(db, k, []byte("v"+strconv.Itoa(i)), 0)
			case 1:
				s.SetString(db, k, make([]byte, 3000), now+3_600_000) // a heap record
			default:
				l := NewList()
				l.PushTail([]byte("a"))
				l.PushTail([]byte("b"))
				s.SetObject(db, k, KindList, l, 0)
			}
			s.mu.Unlock()
		}
	}
	put(e, "old:", 0, 500)
	// The changes of the old dataset are left untaken: the swap drops them
	// with their bytes (every database is rewritten instead), so the old
	// dataset is counted without them.
	logBytes := int64(0)
	for i := range e.shards {
		logBytes += int64(cap(e.shards[i].dirtyLog))
	}
	stage := e.NewStaging()
	put(stage, "new:", 2, 700)
	oldMem, newMem := e.MemoryUsed()-logBytes, stage.MemoryUsed()

	var watchOld, watchNew, watchNone Watch
	for _, w := range []struct {
		key string
		db  int
		w   *Watch
	}{{"old:4", 0, &watchOld}, {"new:5", 2, &watchNew}, {"nothing", 1, &watchNone}} {
		s := e.ShardFor([]byte(w.key))
		s.mu.Lock()
		s.AddWatch(w.db, []byte(w.key), now, w.w)
		s.mu.Unlock()
	}

	e.Adopt(stage, false)

	if got := e.DBSize(0, false); got != 0 {
		t.Fatalf("database 0 holds %d keys after the swap", got)
	}
	if got := e.DBSize(2, false); got != 700 {
		t.Fatalf("database 2 holds %d keys, want 700", got)
	}
	if got := stage.DBSize(0, false); got != 500 {
		t.Fatalf("the staging engine holds %d old keys, want 500", got)
	}
	for _, k := range []string{"new:0", "new:1", "new:2", "new:699"} {
		s := e.ShardFor([]byte(k))
		s.mu.Lock()
		ent, ok := s.Lookup(2, []byte(k), now)
		if !ok {
			t.Fatalf("%s not found after the swap", k)
		}
		if k == "new:2" {
			if l, _ := s.Object(ent).(*List); l == nil || l.Len() != 2 {
				t.Fatalf("%s: list %v", k, s.Object(ent))
			}
		}
		s.mu.Unlock()
	}
	if e.MemoryUsed() != newMem || stage.MemoryUsed() != oldMem {
		t.Fatalf("memory: live %d (want %d), staging %d (want %d)", e.MemoryUsed(), newMem, stage.MemoryUsed(), oldMem)
	}
	checkCount(t, e)
	checkCount(t, stage)
	if !watchOld.Dirty() || !watchNew.Dirty() || watchNone.Dirty() {
		t.Fatalf("watches dirty: old key %v, new key %v, absent key %v", watchOld.Dirty(), watchNew.Dirty(), watchNone.Dirty())
	}
	if got := e.TakeFlushed(); !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("databases to rewrite: %v, want all", got)
	}
	if e.PendingChanges(false) != 0 {
		t.Fatalf("the old dataset's change log survived: %d", e.PendingChanges(false))
	}
	// Writes after the swap go to the adopted dataset and count there.
	put(e, "after:", 2, 30)
	checkCount(t, e)
	if got := e.DBSize(2, false); got != 730 {
		t.Fatalf("database 2 holds %d keys, want 730", got)
	}
}

// The checker refuses what StoreValue refuses and keeps nothing.
func TestValueChecker(t *testing.T) {
	e := New(Config{Databases: 1})
	s := e.ShardFor([]byte("k"))
	l := NewList()
	l.PushTail([]byte("x"))
	ent := s.SetObject(0, []byte("k"), KindList, l, 0)
	good, err := AppendValue(nil, s, ent)
	if err != nil {
		t.Fatal(err)
	}
	c := NewValueChecker()
	if err := c.Check(good, DefaultLimits); err != nil {
		t.Fatalf("a good value: %v", err)
	}
	for _, bad := range [][]byte{nil, {0xee}, good[:len(good)-1]} {
		if err := c.Check(bad, DefaultLimits); err == nil {
			t.Fatalf("%q passed the check", bad)
		}
	}
	if n := c.e.TotalKeys(false); n != 0 {
		t.Fatalf("the checker keeps %d keys", n)
	}
}
