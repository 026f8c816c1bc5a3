package engine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/limitkv/limitkv/ratelimit"
)

// testSlot is the slot the engine files a key under.
func testSlot(key []byte) uint16 { return KeySlot(key) }

// naiveSlots lists, by scanning every table, the keys of database db in
// each slot, expired ones included.
func naiveSlots(e *Engine, db int) map[uint16][]string {
	m := map[uint16][]string{}
	for i := range e.shards {
		s := &e.shards[i]
		for _, sl := range s.dbs[db].slots {
			if ref := slotRef(sl); ref != 0 {
				k := recKey(s.record(ref))
				m[testSlot(k)] = append(m[testSlot(k)], string(k))
			}
		}
	}
	return m
}

// checkIndex compares every table's index with the keys the table holds,
// and the public calls with a scan of database 0.
func checkIndex(t *testing.T, e *Engine, step string) {
	t.Helper()
	for i := range e.shards {
		s := &e.shards[i]
		for db := range s.dbs {
			tb := &s.dbs[db]
			want := map[uint32]uint16{}
			for _, sl := range tb.slots {
				if ref := slotRef(sl); ref != 0 {
					slot := testSlot(recKey(s.record(ref)))
					if int(slot%Shards) != i {
						t.Fatalf("%s: key of slot %d in shard %d", step, slot, i)
					}
					want[ref] = slot
				}
			}
			got := 0
			if tb.bySlot != nil {
				for j := range tb.bySlot.sets {
					set := &tb.bySlot.sets[j]
					n := 0
					for _, ref := range set.refs {
						if ref == 0 {
							continue
						}
						n++
						slot, ok := want[ref]
						if !ok || int(slot/Shards) != j {
							t.Fatalf("%s: shard %d db %d: ref %d indexed under slot %d, table has it %v at slot %d", step, i, db, ref, j*Shards+i, ok, slot)
						}
					}
					if n != set.n {
						t.Fatalf("%s: shard %d db %d set %d counts %d, holds %d", step, i, db, j, set.n, n)
					}
					got += n
				}
			}
			if got != len(want) || got != tb.count {
				t.Fatalf("%s: shard %d db %d: index %d keys, table %d (count %d)", step, i, db, got, len(want), tb.count)
			}
		}
	}
	total := 0
	for slot, keys := range naiveSlots(e, 0) {
		if n := e.CountKeysInSlot(slot, false); n != len(keys) {
			t.Fatalf("%s: CountKeysInSlot(%d) = %d, want %d", step, slot, n, len(keys))
		}
		var got []string
		for _, k := range e.KeysInSlot(slot, len(keys)+1, false) {
			got = append(got, string(k))
		}
		slices.Sort(got)
		slices.Sort(keys)
		if !slices.Equal(got, keys) {
			t.Fatalf("%s: KeysInSlot(%d) = %q, want %q", step, slot, got, keys)
		}
		total += len(keys)
	}
	if n := e.DBSize(0, false); n != total {
		t.Fatalf("%s: DBSIZE %d, keys in slots %d", step, n, total)
	}
}

// slotOps runs a random sequence of every kind of write, expiry, eviction,
// flush and swap on an engine with slots, checking the index after each.
func slotOps(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	clock := NewManualClock(1_700_000_000_000)
	e := New(Config{Databases: 3, Clock: clock, Slots: true})
	e.SetEviction(Eviction{Policy: AllKeysRandom, Samples: 5, LFULogFactor: 10, LFUDecayTime: 1})
	key := func() []byte {
		// Few names, many sharing a hash tag, so that slots hold several
		// keys and every write meets an existing key often.
		if rng.IntN(3) == 0 {
			return []byte("{tag" + strconv.Itoa(rng.IntN(3)) + "}:" + strconv.Itoa(rng.IntN(20)))
		}
		return []byte("k" + strconv.Itoa(rng.IntN(60)))
	}
	value := func() []byte {
		if rng.IntN(8) == 0 {
			return bytes.Repeat([]byte("v"), 1100+rng.IntN(400)) // a heap record
		}
		return bytes.Repeat([]byte("v"), rng.IntN(60))
	}
	expiry := func() int64 {
		if rng.IntN(3) == 0 {
			return clock.Now() + int64(1+rng.IntN(5000))
		}
		return 0
	}
	var sc LimitScratch
	names := []string{"set", "setint", "incr", "append", "list", "del", "unlink", "expire", "persist",
		"lazy", "active", "evict", "flushdb", "flushall", "rename", "move", "copy", "swapdb",
		"restore", "throttle", "adopt", "delslot", "clock"}
	for step := 0; step < steps; step++ {
		op := names[rng.IntN(len(names))]
		db := rng.IntN(2)
		k := key()
		s := e.ShardFor(k)
		now := clock.Now()
		switch op {
		case "set":
			s.Lock()
			s.SetString(db, k, value(), expiry())
			s.Unlock()
		case "setint":
			s.Lock()
			s.SetInt(db, k, rng.Int64N(1000), expiry())
			s.Unlock()
		case "incr":
			s.Lock()
			s.IncrBy(db, k, now, 1)
			s.Unlock()
		case "append":
			s.Lock()
			if en, b, err := s.MutableString(db, k, now, rng.IntN(1500)); err == nil {
				if len(b) > 0 {
					b[0] = 'x'
				}
				s.Touch(en)
			}
			s.Unlock()
		case "list":
			l := NewList()
			l.PushTail([]byte("a"))
			s.Lock()
			s.SetObject(db, k, KindList, l, expiry())
			s.Unlock()
		case "del":
			s.Lock()
			s.Delete(db, k, now)
			s.Unlock()
		case "unlink":
			s.Lock()
			if en, ok := s.Find(db, k, now); ok {
				s.DeleteEntry(en)
			}
			s.Unlock()
		case "expire", "persist":
			s.Lock()
			if en, ok := s.Find(db, k, now); ok {
				at := int64(0)
				if op == "expire" {
					at = now + int64(1+rng.IntN(3000))
				}
				s.SetExpire(en, at)
			}
			s.Unlock()
		case "lazy":
			s.Lock()
			s.Lookup(db, k, now)
			s.Unlock()
		case "active":
			e.ActiveExpire(now, time.Hour)
		case "evict":
			n := rng.IntN(4)
			e.Evict(func() int64 { n--; return int64(n) }, now, time.Hour)
		case "flushdb":
			if rng.IntN(4) == 0 {
				e.FlushDB(db, false)
			}
		case "flushall":
			if rng.IntN(10) == 0 {
				e.FlushDB(-1, false)
			}
		case "rename":
			dst := key()
			m := e.MaskOf(k, dst)
			e.Lock(m)
			if en, ok := s.Find(db, k, now); ok && string(dst) != string(k) {
				Move(s, en, e.ShardFor(dst), db, dst)
			}
			e.Unlock(m)
		case "move":
			s.Lock()
			if en, ok := s.Find(db, k, now); ok && !s.Exists(1-db, k, now) {
				Move(s, en, s, 1-db, k)
			}
			s.Unlock()
		case "copy":
			dst := key()
			to := e.ShardFor(dst)
			m := e.MaskOf(k, dst)
			e.Lock(m)
			if en, ok := s.Peek(db, k, now); ok && string(dst) != string(k) {
				v, err := AppendValue(nil, s, en)
				if err != nil {
					t.Fatal(err)
				}
				if err := to.StoreValue(db, dst, v, DefaultLimits); err != nil {
					t.Fatal(err)
				}
			}
			e.Unlock(m)
		case "swapdb":
			e.SwapDB(0, 1+rng.IntN(2), false)
		case "restore":
			src := New(Config{Databases: 1})
			ss := src.ShardFor(k)
			ss.SetString(0, k, value(), expiry())
			en, _ := ss.Raw(0, k)
			v, err := AppendValue(nil, ss, en)
			if err != nil {
				t.Fatal(err)
			}
			s.Lock()
			if err := s.StoreValue(db, k, v, DefaultLimits); err != nil {
				t.Fatal(err)
			}
			s.Unlock()
		case "throttle":
			s.Lock()
			s.Throttle(db, k, now, ratelimit.GCRA{MaxBurst: 3, Count: 1, Period: 1, Quantity: 1}, &sc)
			s.Unlock()
		case "adopt":
			// A full sync: the replica builds the master's dataset aside
			// and takes it whole.
			st := e.NewStaging()
			for range rng.IntN(30) {
				kk := key()
				ss := st.ShardFor(kk)
				ss.SetString(rng.IntN(2), kk, value(), expiry())
			}
			checkIndex(t, st, fmt.Sprintf("step %d staging", step))
			e.Adopt(st, false)
		case "delslot":
			slot := testSlot(k)
			want := len(naiveSlots(e, 0)[slot])
			if n := e.DeleteKeysInSlot(slot); n != want {
				t.Fatalf("step %d: DeleteKeysInSlot(%d) = %d, want %d", step, slot, n, want)
			}
		case "clock":
			clock.Advance(int64(rng.IntN(2000)))
		}
		checkIndex(t, e, fmt.Sprintf("step %d (%s %q db %d)", step, op, k, db))
	}
	flushAllEmpty(t, e)
}

// flushAllEmpty runs FLUSHALL and checks that the engine then counts no
// memory: every index's bytes were counted and let go. A table emptied by
// deletions keeps its smallest size and its shard's arena until the flush
// finds every table of the shard empty, so each table is given a key first.
func flushAllEmpty(t *testing.T, e *Engine) {
	t.Helper()
	for i := 0; ; i++ {
		k := []byte("fill" + strconv.Itoa(i))
		s := e.ShardFor(k)
		for db := range s.dbs {
			if s.dbs[db].count == 0 {
				s.SetString(db, k, []byte("v"), 0)
			}
		}
		full := true
		for j := range e.shards {
			for db := range e.shards[j].dbs {
				full = full && e.shards[j].dbs[db].count > 0
			}
		}
		if full {
			break
		}
	}
	e.FlushDB(-1, false)
	for i := range e.shards {
		for db := range e.shards[i].dbs {
			if e.shards[i].dbs[db].bySlot != nil {
				t.Fatalf("shard %d db %d keeps its index after FLUSHALL", i, db)
			}
		}
	}
	if m := e.MemoryUsed(); m != 0 {
		t.Fatalf("after FLUSHALL the engine counts %d bytes", m)
	}
}

func TestSlotIndexAgainstModel(t *testing.T) {
	slotOps(t, 1, 3000)
	for seed := uint64(2); seed < 6; seed++ {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) { slotOps(t, seed, 1500) })
	}
}

// TestDeleteKeysInSlotAccounts checks that a slot's deletion is seen as
// DEL's: by WATCH, by the change counter, by the effect log replication
// takes, and in memory.
func TestDeleteKeysInSlotAccounts(t *testing.T) {
	e := New(Config{Databases: 1, Slots: true})
	var logged []string
	e.SetEffectSink(func(s *Shard) {
		log := s.TakeEffects(nil)
		for len(log) > 0 {
			_, k, rest, ok := ReadChange(log)
			if !ok {
				t.Fatal("bad effect log")
			}
			logged = append(logged, string(k))
			log = rest
		}
	})
	keys := []string{"{u1}a", "{u1}b", "{u1}c", "other"}
	for _, k := range keys {
		s := e.ShardFor([]byte(k))
		s.Lock()
		s.SetString(0, []byte(k), []byte("v"), 0)
		s.TakeEffects(nil)
		s.Unlock()
	}
	slot := testSlot([]byte("u1"))
	s := e.ShardFor([]byte("{u1}a"))
	s.Lock()
	w := &Watch{}
	s.AddWatch(0, []byte("{u1}b"), 0, w)
	s.Unlock()
	before := e.Changes(false)
	if n := e.DeleteKeysInSlot(slot); n != 3 {
		t.Fatalf("deleted %d keys, want 3", n)
	}
	if d := e.Changes(false) - before; d != 3 {
		t.Fatalf("changes grew by %d, want 3", d)
	}
	slices.Sort(logged)
	if !slices.Equal(logged, keys[:3]) {
		t.Fatalf("effects %q, want %q", logged, keys[:3])
	}
	if !w.Dirty() {
		t.Fatal("WATCH did not see the deletion")
	}
	if e.CountKeysInSlot(slot, false) != 0 || e.DBSize(0, false) != 1 {
		t.Fatalf("left %d in slot, %d in all", e.CountKeysInSlot(slot, false), e.DBSize(0, false))
	}
	flushAllEmpty(t, e)
}

// TestSlotIndexConcurrent writes different keys of one slot from several
// goroutines while another counts, for the race detector and for the
// final count.
func TestSlotIndexConcurrent(t *testing.T) {
	e := New(Config{Databases: 1, Slots: true})
	slot := testSlot([]byte("hot"))
	const writers, perWriter = 4, 500
	var wg sync.WaitGroup
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			n := e.CountKeysInSlot(slot, false)
			if n < 0 || n > writers*perWriter {
				t.Errorf("count %d", n)
				return
			}
			e.KeysInSlot(slot, 10, false)
			if n == writers*perWriter/2 {
				return
			}
			runtime.Gosched()
		}
	}()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				k := []byte("{hot}" + strconv.Itoa(w) + ":" + strconv.Itoa(i))
				s := e.ShardFor(k)
				s.Lock()
				s.SetString(0, k, []byte("v"), 0)
				s.Unlock()
			}
			for i := 0; i < perWriter; i += 2 {
				k := []byte("{hot}" + strconv.Itoa(w) + ":" + strconv.Itoa(i))
				s := e.ShardFor(k)
				s.Lock()
				s.Delete(0, k, 0)
				s.Unlock()
			}
		}()
	}
	wg.Wait()
	<-done
	if n := e.CountKeysInSlot(slot, false); n != writers*perWriter/2 {
		t.Fatalf("count %d, want %d", n, writers*perWriter/2)
	}
	if n := e.DeleteKeysInSlot(slot); n != writers*perWriter/2 || e.DBSize(0, false) != 0 {
		t.Fatalf("deleted %d, %d left", n, e.DBSize(0, false))
	}
}

// BenchmarkSlotIndexFootprint reports what the index costs per key: the
// bytes the engine counts for it and the growth of the Go heap over the
// same keys without it.
func BenchmarkSlotIndexFootprint(b *testing.B) {
	const n = 1_000_000
	heap := func(slots bool) (int64, *Engine) {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		e := New(Config{Databases: 1, Slots: slots})
		key := make([]byte, 0, 32)
		for j := 0; j < n; j++ {
			key = strconv.AppendInt(append(key[:0], "rl:user:"...), int64(j), 10)
			e.ShardFor(key).SetInt(0, key, int64(j%100), 1_800_000_000_000)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		return int64(after.HeapAlloc) - int64(before.HeapAlloc), e
	}
	for i := 0; i < b.N; i++ {
		plain, pe := heap(false)
		pm := pe.MemoryUsed()
		runtime.KeepAlive(pe)
		pe = nil
		indexed, ie := heap(true)
		var counted int64
		for s := range ie.shards {
			if x := ie.shards[s].dbs[0].bySlot; x != nil {
				counted += x.bytes()
			}
		}
		b.ReportMetric(float64(counted)/n, "index-B/key")
		b.ReportMetric(float64(indexed-plain)/n, "heap-B/key")
		b.ReportMetric(float64(ie.MemoryUsed()-pm)/n, "used_memory-B/key")
		runtime.KeepAlive(ie)
	}
}
