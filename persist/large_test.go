package persist

import (
	"bytes"
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/limitkv/limitkv/engine"
)

// hookWriter calls before ahead of each chunk of operations the store
// sends, with no lock held: how a test changes the keyspace between the
// parts of a big value.
type hookWriter struct {
	writer
	n      int
	before func(n int)
}

func (h *hookWriter) write(ctx context.Context, ops []byte) error {
	h.n++
	if h.before != nil {
		h.before(h.n)
	}
	return h.writer.write(ctx, ops)
}

func randomBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// TestLargeValues: values past largeValue round-trip, sent in parts: a
// string copied from the keyspace a part at a time, a hash encoded whole,
// and a string of a database rewritten after FLUSHDB.
func TestLargeValues(t *testing.T) {
	fs := vfs.NewMem()
	clock := engine.NewManualClock(t0)
	eng, st := restart(t, fs, clock)
	hw := &hookWriter{writer: st.w}
	st.w = hw
	with(eng, "s", func(s *engine.Shard, k []byte) { s.SetString(0, k, randomBytes(1, 3<<20+17), 0) })
	with(eng, "ttl", func(s *engine.Shard, k []byte) { s.SetString(0, k, randomBytes(2, largeValue+1), t0+60_000) })
	with(eng, "edge", func(s *engine.Shard, k []byte) { s.SetString(0, k, randomBytes(3, largeValue), 0) })
	with(eng, "h", func(s *engine.Shard, k []byte) {
		h := engine.NewHash()
		for i := 0; i < 3000; i++ {
			h.Set([]byte("f"+strconv.Itoa(i)), randomBytes(uint64(i), 200), engine.HashLimits{Entries: 512, Value: 64})
		}
		s.SetObject(0, k, engine.KindHash, h, 0)
	})
	for i := 0; i < 100; i++ {
		with(eng, "small"+strconv.Itoa(i), func(s *engine.Shard, k []byte) { s.SetInt(0, k, int64(i), 0) })
	}
	if err := st.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if hw.n < 3<<20/sendChunk {
		t.Fatalf("%d chunks sent for more than 4 MB of values", hw.n)
	}
	// A rewritten database: its values are encoded whole.
	eng.FlushDB(1, false)
	with(eng, "s1", func(s *engine.Shard, k []byte) { s.SetString(1, k, randomBytes(4, 1<<20), 0) })
	if err := st.Snapshot(); err != nil {
		t.Fatal(err)
	}
	want := dump(t, eng)
	st.Close()
	eng2, _ := restart(t, fs, clock)
	sameDump(t, dump(t, eng2), want)
	if cap(st.buf) > keepBuffer || cap(st.stage) > keepBuffer || cap(st.kbuf) > keepBuffer {
		t.Errorf("buffers kept after the snapshots: %d, %d, %d bytes", cap(st.buf), cap(st.stage), cap(st.kbuf))
	}
}

// TestLargeValueChangedWhileSent: a big string changed between two of
// its parts is abandoned and sent again as it is now; what reaches the
// disk is the keyspace's value, never a mix.
func TestLargeValueChangedWhileSent(t *testing.T) {
	const n = 2<<20 + 5
	for _, tc := range []struct {
		name   string
		change func(eng *engine.Engine)
	}{
		{"APPEND", func(eng *engine.Engine) {
			with(eng, "big", func(s *engine.Shard, k []byte) {
				e, b, _ := s.MutableString(0, k, t0, n+3)
				copy(b[n:], "end")
				s.Touch(e)
			})
		}},
		{"SETRANGE", func(eng *engine.Engine) {
			with(eng, "big", func(s *engine.Shard, k []byte) {
				e, b, _ := s.MutableString(0, k, t0, 10)
				copy(b, "changed")
				copy(b[n-7:], "changed")
				s.Touch(e)
			})
		}},
		{"SET another big value", func(eng *engine.Engine) {
			with(eng, "big", func(s *engine.Shard, k []byte) { s.SetString(0, k, randomBytes(9, n), 0) })
		}},
		{"SET a small value", func(eng *engine.Engine) {
			with(eng, "big", func(s *engine.Shard, k []byte) { s.SetString(0, k, []byte("small"), 0) })
		}},
		{"EXPIRE", func(eng *engine.Engine) {
			with(eng, "big", func(s *engine.Shard, k []byte) {
				e, _ := s.Find(0, k, t0)
				s.SetExpire(e, t0+3_600_000)
			})
		}},
		{"DEL", func(eng *engine.Engine) {
			with(eng, "big", func(s *engine.Shard, k []byte) { s.Delete(0, k, t0) })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			clock := engine.NewManualClock(t0)
			eng, st := restart(t, fs, clock)
			// On disk first: a change must not leave a mix of old and
			// new either.
			with(eng, "big", func(s *engine.Shard, k []byte) { s.SetString(0, k, randomBytes(7, n), 0) })
			if err := st.Snapshot(); err != nil {
				t.Fatal(err)
			}
			with(eng, "big", func(s *engine.Shard, k []byte) { s.SetString(0, k, randomBytes(8, n), 0) })
			with(eng, "other", func(s *engine.Shard, k []byte) { s.SetString(0, k, []byte("v"), 0) })
			changed := false
			st.w = &hookWriter{writer: st.w, before: func(i int) {
				if i == 3 { // two parts sent
					tc.change(eng)
					changed = true
				}
			}}
			if err := st.Snapshot(); err != nil {
				t.Fatal(err)
			}
			if !changed {
				t.Fatal("the snapshot sent fewer than 3 chunks")
			}
			want := dump(t, eng)
			st.Close()
			eng2, _ := restart(t, fs, clock)
			sameDump(t, dump(t, eng2), want)
		})
	}
}

// TestBatchBuilderRejects: operations out of the large-value protocol
// fail the batch rather than write a wrong value.
func TestBatchBuilderRejects(t *testing.T) {
	db, err := pebble.Open("/db", &pebble.Options{FS: vfs.NewMem(), Logger: localLogger{quiet, newLogThrottle(0)}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	large := appendSetLarge(nil, []byte("k"), 10)
	for _, tc := range []struct {
		name string
		ops  [][]byte
		want string
	}{
		{"a part without a value", [][]byte{appendPart(nil, []byte("x"))}, "past the end"},
		{"a part too long", [][]byte{large, appendPart(nil, bytes.Repeat([]byte("x"), 11))}, "past the end"},
		{"a set inside a value", [][]byte{large, appendSet(nil, []byte("a"), []byte("b"))}, "inside a large value"},
		{"cut short", [][]byte{large, appendPart(nil, []byte("12345"))}, "cut short"},
		{"abandoning nothing", [][]byte{{opAbandon}}, "abandoning no large value"},
		{"truncated", [][]byte{large[:len(large)-1]}, "truncated"},
	} {
		var bb batchBuilder
		for _, ops := range tc.ops {
			bb.add(db, ops)
		}
		b, err := bb.take()
		if b != nil {
			b.Close()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	// In parts over several chunks, and abandoned then overridden.
	var bb batchBuilder
	bb.add(db, append(appendSetLarge(nil, []byte("k"), 6), appendPart(nil, []byte("abc"))...))
	bb.add(db, appendPart(nil, []byte("def")))
	bb.add(db, appendPart(appendSetLarge(nil, []byte("j"), 6), []byte("xy")))
	bb.add(db, appendSet([]byte{opAbandon}, []byte("j"), []byte("right")))
	b, err := bb.take()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	b.Close()
	for k, want := range map[string]string{"k": "abcdef", "j": "right"} {
		v, closer, err := db.Get([]byte(k))
		if err != nil || string(v) != want {
			t.Errorf("%s = %q, %v; want %q", k, v, err, want)
		}
		if err == nil {
			closer.Close()
		}
	}
}
