package engine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"
)

// modelEntry is what the model expects a key to hold.
type modelEntry struct {
	val []byte
	exp int64
}

// TestShardAgainstModel drives one shard with random sets, deletes, expiry
// changes and reads over keys and values of every size class (and past the
// arena's limit), and checks each step against a plain map.
func TestShardAgainstModel(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			e := New(Config{Databases: 3})
			s := e.Shard(0)
			model := make([]map[string]modelEntry, 3)
			for i := range model {
				model[i] = map[string]modelEntry{}
			}
			now := int64(1_000_000)
			randKey := func() []byte {
				n := rng.IntN(400)
				switch rng.IntN(10) {
				case 0:
					n = 900 + rng.IntN(400) // keys that need a heap record
				case 1:
					n = 0
				}
				k := make([]byte, n)
				for i := range k {
					k[i] = byte('a' + rng.IntN(3))
				}
				if n > 3 {
					k[0] = byte(rng.IntN(256)) // binary keys
				}
				return k
			}
			var keys [][]byte
			for i := 0; i < 300; i++ {
				keys = append(keys, randKey())
			}
			randVal := func() []byte {
				switch rng.IntN(6) {
				case 0:
					return []byte(fmt.Sprint(rng.Int64N(1<<40) - 1<<39)) // integers
				case 1:
					return make([]byte, 1000+rng.IntN(3000))
				default:
					v := make([]byte, rng.IntN(120))
					for i := range v {
						v[i] = byte(rng.IntN(256))
					}
					return v
				}
			}
			for step := 0; step < 30000; step++ {
				db := rng.IntN(3)
				k := keys[rng.IntN(len(keys))]
				m := model[db]
				switch op := rng.IntN(10); {
				case op < 4:
					v := randVal()
					var exp int64
					if rng.IntN(3) == 0 {
						exp = now + int64(rng.IntN(50))
					}
					// Big values are sometimes handed over with room in
					// front, as a connection hands over a big argument.
					head := rng.IntN(len(k) + 40)
					buf := append(make([]byte, head), v...)
					if rng.IntN(2) == 0 || !s.AdoptString(db, k, buf, head, exp) {
						s.SetString(db, k, v, exp)
					}
					m[string(k)] = modelEntry{append([]byte(nil), v...), exp}
				case op < 5:
					got := s.Delete(db, k, now)
					_, want := m[string(k)]
					if want && m[string(k)].exp != 0 && now > m[string(k)].exp {
						want = false
					}
					if got != want {
						t.Fatalf("step %d: Delete = %v, want %v", step, got, want)
					}
					delete(m, string(k))
				case op < 6:
					ent, ok := s.Find(db, k, now)
					me, mok := m[string(k)]
					if mok && me.exp != 0 && now > me.exp {
						mok = false
						delete(m, string(k))
					}
					if ok != mok {
						t.Fatalf("step %d: Find = %v, want %v", step, ok, mok)
					}
					if ok {
						exp := int64(0)
						if rng.IntN(2) == 0 {
							exp = now + int64(rng.IntN(100))
						}
						s.SetExpire(ent, exp)
						me.exp = exp
						m[string(k)] = me
					}
				case op < 7:
					now += int64(rng.IntN(5))
				default:
					v, ok, err := s.GetString(db, k, now, nil)
					if err != nil {
						t.Fatal(err)
					}
					me, mok := m[string(k)]
					if mok && me.exp != 0 && now > me.exp {
						mok = false
						delete(m, string(k))
					}
					if ok != mok || (ok && !bytes.Equal(v, me.val)) {
						t.Fatalf("step %d: Get(%q) = %q %v, want %q %v", step, k, v, ok, me.val, mok)
					}
				}
				if step%1000 == 0 {
					e.ActiveExpire(now, 1e9)
					for db := range model {
						for k, me := range model[db] {
							if me.exp != 0 && now > me.exp {
								delete(model[db], k)
							}
						}
						if got, want := s.Len(db), len(model[db]); got != want {
							t.Fatalf("step %d: db %d has %d keys, model %d", step, db, got, want)
						}
					}
				}
			}
			// Everything left must be readable and accounted for.
			for db := range model {
				for k, me := range model[db] {
					v, ok, _ := s.GetString(db, []byte(k), now, nil)
					if me.exp != 0 && now > me.exp {
						if ok {
							t.Fatalf("expired key %q still there", k)
						}
						continue
					}
					if !ok || !bytes.Equal(v, me.val) {
						t.Fatalf("final: %q = %q %v, want %q", k, v, ok, me.val)
					}
				}
			}
			checkCount(t, e)
			for db := range model {
				s.Flush(db)
			}
			if e.MemoryUsed() != 0 {
				t.Fatalf("engine counts %d bytes after flushing everything", e.MemoryUsed())
			}
			if s.arena.used != 0 {
				t.Fatalf("arena still holds %d bytes after flushing everything", s.arena.used)
			}
		})
	}
}

func TestTableScanVisitsEveryKeyAcrossResizes(t *testing.T) {
	e := New(Config{Databases: 1})
	const n = 5000
	for i := 0; i < n; i++ {
		k := []byte(fmt.Sprintf("key:%d", i))
		e.ShardFor(k).SetString(0, k, []byte("v"), 0)
	}
	seen := map[string]int{}
	cursor := uint64(0)
	added := 0
	for {
		cursor = e.Scan(0, cursor, 50, 0, false, func(k []byte, _ Kind) { seen[string(k)]++ })
		// Grow the keyspace while scanning: tables double under the cursor.
		for j := 0; j < 200 && added < 20000; j++ {
			k := []byte(fmt.Sprintf("extra:%d", added))
			e.ShardFor(k).SetString(0, k, []byte("v"), 0)
			added++
		}
		if cursor == 0 {
			break
		}
	}
	for i := 0; i < n; i++ {
		if seen[fmt.Sprintf("key:%d", i)] == 0 {
			t.Fatalf("key:%d was never returned", i)
		}
	}
}

// Redis's matcher fails "*" against the empty string; KEYS and SCAN treat a
// lone "*" as "everything" before matching, and so does limitkv.
func TestMatch(t *testing.T) {
	cases := []struct {
		pat, s string
		want   bool
	}{
		{"*", "", false}, {"*", "abc", true}, {"a*", "abc", true}, {"a*c", "abc", true},
		{"a*d", "abc", false}, {"a?c", "abc", true}, {"a?c", "ac", false},
		{"[abc]x", "bx", true}, {"[^abc]x", "bx", false}, {"[^abc]x", "dx", true},
		{"[a-c]", "b", true}, {"[c-a]", "b", true}, {"[a-c]", "d", false},
		{"\\*", "*", true}, {"\\*", "a", false}, {"[", "a", false}, {"[^", "a", true},
		{"[a", "a", true}, {"[a", "ab", false}, {"h*llo", "heeeello", true},
		{"a*a*a*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false},
		{"user:*", "user:42", true}, {"*:42", "user:42", true}, {"[\\]]", "]", true},
	}
	for _, c := range cases {
		if got := Match([]byte(c.pat), []byte(c.s), false); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.pat, c.s, got, c.want)
		}
	}
	if !Match([]byte("HELLO*"), []byte("hello world"), true) {
		t.Error("nocase match failed")
	}
}

func TestParseInt(t *testing.T) {
	good := map[string]int64{"0": 0, "1": 1, "-1": -1, "9223372036854775807": 1<<63 - 1, "-9223372036854775808": -1 << 63}
	for s, want := range good {
		if got, ok := ParseInt([]byte(s)); !ok || got != want {
			t.Errorf("ParseInt(%q) = %d %v", s, got, ok)
		}
	}
	for _, s := range []string{"", "-", "+1", "01", "-0", " 1", "1 ", "9223372036854775808", "-9223372036854775809", "1.0", "0x10", "123456789012345678901"} {
		if _, ok := ParseInt([]byte(s)); ok {
			t.Errorf("ParseInt(%q) accepted", s)
		}
	}
}

// TestActiveExpiryFreesIdleKeys: keys nobody reads again are removed by the
// sweeper, their memory goes back to the arena and the tables shrink.
func TestActiveExpiryFreesIdleKeys(t *testing.T) {
	e := New(Config{Databases: 1})
	for i := 0; i < 50000; i++ {
		k := []byte(fmt.Sprintf("idle:%d", i))
		e.ShardFor(k).SetString(0, k, []byte("value"), 1000)
	}
	keep := []byte("keeper")
	e.ShardFor(keep).SetString(0, keep, []byte("v"), 0)
	var usedBefore int64
	for i := range e.shards {
		usedBefore += e.shards[i].arena.used
	}
	ticks := 0
	for e.DBSize(0, false) > 1 {
		e.ActiveExpire(2000, 1e9)
		if ticks++; ticks > 10000 {
			t.Fatalf("sweeper left %d keys after %d ticks", e.DBSize(0, false), ticks)
		}
	}
	var used, slots int64
	for i := range e.shards {
		used += e.shards[i].arena.used
		slots += int64(len(e.shards[i].dbs[0].slots))
	}
	if used*100 > usedBefore {
		t.Fatalf("arena still holds %d of %d bytes", used, usedBefore)
	}
	if slots > Shards*minTableSize {
		t.Fatalf("tables hold %d slots for one key", slots)
	}
	if v, ok, _ := e.ShardFor(keep).GetString(0, keep, 2000, nil); !ok || string(v) != "v" {
		t.Fatal("a key without TTL was swept")
	}
	t.Logf("%d sweeper ticks", ticks)
}

// TestAdoptString checks that a big value handed over is stored in the
// memory it came in, header in front, and that it is refused when it is
// small, an integer, or when the header does not fit.
func TestAdoptString(t *testing.T) {
	e := New(Config{Databases: 1})
	s := e.Shard(0)
	val := bytes.Repeat([]byte("x"), 100000)
	key := []byte("big")
	mk := func(head int) []byte { return append(make([]byte, head), val...) }
	for _, tc := range []struct {
		buf  []byte
		head int
		exp  int64
		ok   bool
	}{
		{mk(64), 64, 0, true},
		{mk(64), 64, 5_000_000, true},
		{mk(3), 3, 0, false},                                 // no room for the header
		{append(make([]byte, 64), "12345"...), 64, 0, false}, // small
		{append(make([]byte, 64), make([]byte, 2000)...), 64, 0, true},
	} {
		if got := s.AdoptString(0, key, tc.buf, tc.head, tc.exp); got != tc.ok {
			t.Fatalf("AdoptString(head %d, %d bytes) = %v", tc.head, len(tc.buf)-tc.head, got)
		}
		if !tc.ok {
			continue
		}
		ent, found := s.Find(0, key, 1)
		if !found || ent.ExpireAt() != tc.exp {
			t.Fatalf("found %v, expiry %d", found, ent.ExpireAt())
		}
		v, _ := ent.StringOf(nil)
		if !bytes.Equal(v, tc.buf[tc.head:]) || &v[0] != &tc.buf[tc.head] {
			t.Fatal("the value was copied or changed")
		}
	}
	// Replacing any value frees it, and FreedBytes counts big ones.
	s.SetObject(0, []byte("l"), KindList, NewList(), 0)
	if !s.AdoptString(0, []byte("l"), mk(64), 64, 0) {
		t.Fatal("replacing a list")
	}
	before := e.FreedBytes()
	if !s.Delete(0, []byte("l"), 1) || e.FreedBytes()-before < int64(len(val)) {
		t.Fatalf("Delete freed %d bytes", e.FreedBytes()-before)
	}
}

// TestActiveExpireWorkExcludesLockWaits: a sweep that waits for a shard
// held by someone else (a script holds every shard) reports only its own
// work, which is what the expire-cycle latency event shows: in Redis the
// cycle cannot run during a script at all.
func TestActiveExpireWorkExcludesLockWaits(t *testing.T) {
	e := New(Config{Databases: 1})
	for i := 0; i < 100; i++ {
		k := []byte(fmt.Sprintf("k:%d", i))
		e.ShardFor(k).SetString(0, k, []byte("v"), 1000)
	}
	// The sweep's clock: 1 ns per reading, plus the 60 ms the holder of
	// the first shard adds before it lets go. The sweep's own work then
	// takes a few nanoseconds, whatever the machine does, and a wait
	// counted as work shows as 60 ms.
	const hold = 60 * time.Millisecond
	var fake, reads atomic.Int64
	e.sweepClock = func() time.Time { return time.Unix(0, fake.Load()+reads.Add(1)) }
	s := &e.shards[0]
	s.mu.Lock()
	var unlocked atomic.Bool
	go func() {
		for reads.Load() == 0 { // the sweep has started
			time.Sleep(time.Millisecond)
		}
		// Let it reach the lock: if it is not there yet, the test proves
		// less, but cannot fail for it.
		time.Sleep(10 * time.Millisecond)
		fake.Add(int64(hold))
		unlocked.Store(true)
		s.mu.Unlock()
	}()
	st := e.ActiveExpire(500, 10*time.Second)
	if !unlocked.Load() {
		t.Fatal("the sweep ended before the held shard was released: it did not wait for it")
	}
	if st.Work >= hold {
		t.Fatalf("work %v of a sweep that waited %v for a lock, its own work taking nanoseconds: the wait is counted", st.Work, hold)
	}
}
