package engine

import (
	"bytes"
	"testing"
)

// TestUnchanged: an entry Capture returned stays Unchanged until the key
// is written, changed in place, given another expiry, or deleted; reads
// and a write to another key do not count.
func TestUnchanged(t *testing.T) {
	const now = 1000
	key := []byte("big")
	val := bytes.Repeat([]byte("v"), 300<<10)
	for _, tc := range []struct {
		name    string
		change  func(s *Shard)
		changed bool
	}{
		{"nothing", func(s *Shard) {}, false},
		{"a read", func(s *Shard) { s.GetString(0, key, now, nil) }, false},
		{"another key", func(s *Shard) { s.SetString(0, []byte("other"), []byte("x"), 0) }, false},
		{"SET, same length", func(s *Shard) { s.SetString(0, key, bytes.Repeat([]byte("w"), len(val)), 0) }, true},
		{"changed in place", func(s *Shard) {
			e, b, _ := s.MutableString(0, key, now, 10)
			b[0] = 'x'
			s.Touch(e)
		}, true},
		{"APPEND", func(s *Shard) {
			e, b, _ := s.MutableString(0, key, now, len(val)+1)
			b[len(val)] = 'x'
			s.Touch(e)
		}, true},
		{"an expiry", func(s *Shard) {
			e, _ := s.Find(0, key, now)
			s.SetExpire(e, now+60_000)
		}, true},
		{"DEL", func(s *Shard) { s.Delete(0, key, now) }, true},
		{"DEL and SET again", func(s *Shard) { s.Delete(0, key, now); s.SetString(0, key, val, 0) }, true},
	} {
		e := New(Config{Databases: 1})
		e.TrackChanges(true)
		s := e.ShardFor(key)
		s.SetString(0, key, val, 0)
		ent, live, skip := s.Capture(0, key, now)
		if !live || skip {
			t.Fatalf("%s: Capture: live %v, skip %v", tc.name, live, skip)
		}
		if !s.Unchanged(0, key, ent, now) {
			t.Fatalf("%s: changed right after Capture", tc.name)
		}
		tc.change(s)
		if got := !s.Unchanged(0, key, ent, now); got != tc.changed {
			t.Errorf("%s: changed = %v, want %v", tc.name, got, tc.changed)
		}
	}
}

// TestAppendStringHead: the head and the bytes of a string make its
// encoding, with or without an expiry.
func TestAppendStringHead(t *testing.T) {
	e := New(Config{Databases: 1})
	s := e.Shard(0)
	for _, exp := range []int64{0, 1_800_000_000_000} {
		val := bytes.Repeat([]byte("x"), 300<<10)
		ent := s.SetString(0, []byte("k"), val, exp)
		want, err := AppendValue(nil, s, ent)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := ent.StringOf(nil)
		if got := append(AppendStringHead(nil, ent), v...); !bytes.Equal(got, want) {
			t.Fatalf("expiry %d: head and bytes %.20x..., want %.20x...", exp, got, want)
		}
	}
}

// TestChangesCount: Changes counts what Redis's server.dirty does, with
// change tracking on or off: each write of a key (the same key written
// three times is three changes), each deletion, each key of a flushed
// database, a SWAPDB; not reads, nor keys that expire.
func TestChangesCount(t *testing.T) {
	for _, track := range []bool{false, true} {
		const now = 1000
		e := New(Config{Databases: 2})
		e.TrackChanges(track)
		step := func(what string, want int64, fn func(s *Shard)) {
			t.Helper()
			before := e.Changes(false)
			s := e.ShardFor([]byte("a"))
			s.Lock()
			fn(s)
			s.Unlock()
			if got := e.Changes(false) - before; got != want {
				t.Errorf("tracking %v: %s: %d changes, want %d", track, what, got, want)
			}
		}
		step("SET a 1, SET a 2, SET a 3", 3, func(s *Shard) {
			for _, v := range []string{"1", "2", "3"} {
				s.SetString(0, []byte("a"), []byte(v), 0)
			}
		})
		step("GET a", 0, func(s *Shard) { s.GetString(0, []byte("a"), now, nil) })
		step("DEL a", 1, func(s *Shard) { s.Delete(0, []byte("a"), now) })
		step("DEL a again", 0, func(s *Shard) { s.Delete(0, []byte("a"), now) })
		step("SET a with a TTL", 1, func(s *Shard) { s.SetString(0, []byte("a"), []byte("v"), now+10) })
		step("a expires", 0, func(s *Shard) { s.GetString(0, []byte("a"), now+20, nil) })
		for i := range 5 {
			k := []byte{'k', byte('0' + i)}
			s := e.ShardFor(k)
			s.Lock()
			s.SetString(1, k, []byte("v"), 0)
			s.Unlock()
		}
		before := e.Changes(false)
		e.FlushDB(1, false)
		if got := e.Changes(false) - before; got != 5 {
			t.Errorf("tracking %v: FLUSHDB of 5 keys: %d changes, want 5", track, got)
		}
		before = e.Changes(false)
		e.SwapDB(0, 1, false)
		if got := e.Changes(false) - before; got != 1 {
			t.Errorf("tracking %v: SWAPDB: %d changes, want 1", track, got)
		}
	}
}
