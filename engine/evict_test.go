package engine

import (
	"strconv"
	"testing"
	"time"
)

// loadEvictable fills an engine with n keys "k:<i>"; every other one has a
// TTL, later for higher i.
func loadEvictable(e *Engine, n int, now int64) {
	for i := 0; i < n; i++ {
		k := []byte("k:" + strconv.Itoa(i))
		var exp int64
		if i%2 == 0 {
			exp = now + 3_600_000 + int64(i)*1000
		}
		s := e.ShardFor(k)
		s.Lock()
		s.SetString(0, k, []byte("a value of some thirty bytes.."), exp)
		s.Unlock()
	}
}

func exists(e *Engine, k string, now int64) bool {
	s := e.ShardFor([]byte(k))
	s.Lock()
	defer s.Unlock()
	return s.Exists(0, []byte(k), now)
}

func TestEvictNoEvictionFails(t *testing.T) {
	clock := NewManualClock(1_700_000_000_000)
	e := New(Config{Databases: 1, Clock: clock})
	loadEvictable(e, 100, clock.Now())
	if f, res := e.Evict(func() int64 { return 1000 }, clock.Now(), time.Second); f != 0 || res != EvictFailed {
		t.Fatalf("noeviction: freed %d, %v", f, res)
	}
	if e.EvictedKeys() != 0 || e.DBSize(0, false) != 100 {
		t.Fatalf("noeviction evicted %d keys", e.EvictedKeys())
	}
}

// TestEvictPolicies checks what each policy takes: half the memory is
// asked for, and the keys that go must be the ones the policy ranks first,
// with the approximation Redis's sampling allows.
func TestEvictPolicies(t *testing.T) {
	const n = 4000
	for _, pol := range []Policy{AllKeysLRU, VolatileLRU, AllKeysLFU, VolatileLFU, AllKeysRandom, VolatileRandom, VolatileTTL} {
		t.Run(pol.String(), func(t *testing.T) {
			clock := NewManualClock(1_700_000_000_000)
			e := New(Config{Databases: 1, Clock: clock})
			e.SetEviction(Eviction{Policy: pol, Samples: 5, LFULogFactor: 10, LFUDecayTime: 1})
			loadEvictable(e, n, clock.Now())
			// An hour later, the upper half of the keys is read (LRU: recent;
			// LFU: 50 times each, frequent).
			clock.Advance(3_600_000)
			now := clock.Now()
			for i := n / 2; i < n; i++ {
				k := []byte("k:" + strconv.Itoa(i))
				s := e.ShardFor(k)
				s.Lock()
				for j := 0; j < 50; j++ {
					s.Lookup(0, k, now)
				}
				s.Unlock()
			}
			used := e.MemoryUsed()
			target := used - used/8
			freed, res := e.Evict(func() int64 { return e.MemoryUsed() - target }, now, time.Minute)
			if res != EvictDone || freed < used/8 {
				t.Fatalf("freed %d of %d asked: %v", freed, used/8, res)
			}
			var lowGone, highGone, persistentGone int
			for i := 0; i < n; i++ {
				if exists(e, "k:"+strconv.Itoa(i), now) {
					continue
				}
				if i%2 == 1 {
					persistentGone++
				}
				if i < n/2 {
					lowGone++
				} else {
					highGone++
				}
			}
			gone := lowGone + highGone
			if int64(gone) != e.EvictedKeys() {
				t.Fatalf("%d keys gone, %d counted evicted", gone, e.EvictedKeys())
			}
			t.Logf("evicted %d keys: %d of the lower half, %d of the upper; %d without TTL", gone, lowGone, highGone, persistentGone)
			if pol.Volatile() && persistentGone != 0 {
				t.Errorf("a volatile policy evicted %d keys without a TTL", persistentGone)
			}
			switch pol {
			case AllKeysLRU, VolatileLRU, AllKeysLFU, VolatileLFU:
				// The keys read recently or often are kept: sampling 5 at a
				// time with a pool of 16 lets few of them go.
				if highGone*10 > gone {
					t.Errorf("%d of %d evicted keys were the ones in use", highGone, gone)
				}
			case VolatileTTL:
				// Expiry grows with i: the lower half expires first.
				if highGone*10 > gone {
					t.Errorf("%d of %d evicted keys had the latest expiries", highGone, gone)
				}
			default:
				if lowGone == 0 || highGone == 0 {
					t.Errorf("random eviction took %d low and %d high keys", lowGone, highGone)
				}
			}
		})
	}
}

// TestEvictionIsADeletion: snapshots log evicted keys and WATCH sees them.
func TestEvictionIsADeletion(t *testing.T) {
	clock := NewManualClock(1_700_000_000_000)
	e := New(Config{Databases: 1, Clock: clock})
	e.SetEviction(Eviction{Policy: AllKeysRandom, Samples: 5})
	k := []byte("only")
	s := e.ShardFor(k)
	s.SetString(0, k, []byte("v"), 0)
	e.TrackChanges(true)
	var w Watch
	s.AddWatch(0, k, clock.Now(), &w)
	oneKey := func() int64 { return 1 - e.EvictedKeys() }
	if _, res := e.Evict(oneKey, clock.Now(), time.Second); res != EvictDone {
		t.Fatalf("eviction: %v", res)
	}
	if !w.Dirty() {
		t.Error("WATCH did not see the eviction")
	}
	if e.PendingChanges(false) != 1 {
		t.Errorf("change log holds %d keys, want the evicted one", e.PendingChanges(false))
	}
	if _, res := e.Evict(func() int64 { return 1 }, clock.Now(), time.Second); res != EvictFailed {
		t.Errorf("eviction from an empty keyspace: %v", res)
	}
}

func TestAccessStamps(t *testing.T) {
	clock := NewManualClock(1_700_000_000_000)
	e := New(Config{Databases: 1, Clock: clock})
	s := e.Shard(0)
	k := []byte("k")
	s.SetString(0, k, []byte("v"), 0)
	clock.Advance(10_500)
	en, _ := s.Peek(0, k, clock.Now())
	if idle := s.IdleTime(en, clock.Now()); idle != 10_000 {
		t.Errorf("idle %d ms after 10.5 s, want 10000 (1 s resolution)", idle)
	}
	en, _ = s.Find(0, k, clock.Now())
	if idle := s.IdleTime(en, clock.Now()); idle != 0 {
		t.Errorf("idle %d ms right after an access", idle)
	}
	// A rewrite that moves the record keeps its stamp.
	clock.Advance(5000)
	s.SetString(0, k, []byte("a longer value that needs another block"), 0)
	en, _ = s.Peek(0, k, clock.Now())
	if idle := s.IdleTime(en, clock.Now()); idle != 5000 {
		t.Errorf("idle %d ms after a rewrite, want the 5000 before it", idle)
	}

	e.SetEviction(Eviction{Policy: AllKeysLFU, Samples: 5, LFULogFactor: 10, LFUDecayTime: 1})
	s.SetString(0, []byte("new"), []byte("v"), 0)
	en, _ = s.Peek(0, []byte("new"), clock.Now())
	if f := s.Frequency(en, clock.Now()); f != lfuInitVal {
		t.Errorf("new key's LFU counter %d, want %d", f, lfuInitVal)
	}
	for i := 0; i < 1000; i++ {
		s.Find(0, []byte("new"), clock.Now())
	}
	en, _ = s.Peek(0, []byte("new"), clock.Now())
	f := s.Frequency(en, clock.Now())
	if f <= lfuInitVal || f > 40 {
		t.Errorf("counter %d after 1000 accesses (log factor 10), want a little above %d", f, lfuInitVal)
	}
	// Decay: one less per lfu-decay-time minutes.
	clock.Advance(3 * 60_000)
	if g := s.Frequency(en, clock.Now()); g != f-3 {
		t.Errorf("counter %d three minutes later, want %d", g, f-3)
	}
}

// TestEvictConcurrent: writers on every shard evict as they go, as
// connections do; memory ends at the limit and the counts agree (run with
// -race for the locking).
func TestEvictConcurrent(t *testing.T) {
	clock := NewManualClock(1_700_000_000_000)
	e := New(Config{Databases: 1, Clock: clock})
	e.SetEviction(Eviction{Policy: AllKeysLRU, Samples: 5, LFULogFactor: 10, LFUDecayTime: 1})
	const limit = 1 << 20
	excess := func() int64 { return e.MemoryUsed() - limit }
	done := make(chan struct{})
	for w := 0; w < 4; w++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; i < 20000; i++ {
				if excess() > 0 {
					if _, res := e.Evict(excess, clock.Now(), time.Second); res == EvictFailed {
						t.Error("eviction failed with keys to evict")
						return
					}
				}
				k := []byte("w" + strconv.Itoa(w) + ":" + strconv.Itoa(i))
				s := e.ShardFor(k)
				s.Lock()
				s.SetString(0, k, []byte("a value of some thirty bytes.."), 0)
				s.Unlock()
			}
		}()
	}
	for w := 0; w < 4; w++ {
		<-done
	}
	if used := e.MemoryUsed(); used > limit+limit/20 {
		t.Errorf("%d bytes used, limit %d", used, limit)
	}
	if n := int64(e.DBSize(0, false)) + e.EvictedKeys(); n != 80000 {
		t.Errorf("%d keys kept and evicted of 80000", n)
	}
	checkCount(t, e)
}

// BenchmarkEvict: a full engine takes a new key and evicts one, per op, as
// a server under a flood does (volatile-ttl, 200,000 keys).
func BenchmarkEvict(b *testing.B) {
	for _, pol := range []Policy{AllKeysLRU, AllKeysLFU, VolatileTTL, AllKeysRandom} {
		b.Run(pol.String(), func(b *testing.B) {
			clock := NewManualClock(1_700_000_000_000)
			e := New(Config{Databases: 16, Clock: clock})
			e.SetEviction(Eviction{Policy: pol, Samples: 5, LFULogFactor: 10, LFUDecayTime: 1})
			now := clock.Now()
			key := func(i int) []byte { return []byte("rl:user:" + strconv.Itoa(i)) }
			for i := 0; i < 200_000; i++ {
				k := key(i)
				e.ShardFor(k).SetString(0, k, []byte("state"), now+int64(i))
			}
			limit := e.MemoryUsed()
			excess := func() int64 { return e.MemoryUsed() - limit }
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				k := key(200_000 + i)
				s := e.ShardFor(k)
				s.Lock()
				s.SetString(0, k, []byte("state"), now+int64(200_000+i))
				s.Unlock()
				e.Evict(excess, now, time.Second)
			}
		})
	}
}
