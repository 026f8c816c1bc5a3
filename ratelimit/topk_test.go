package ratelimit

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"math/rand"
	"testing"
)

type topKey struct {
	db  int
	key string
}

// checkTopK checks the Space-Saving guarantees of t against exact counts.
func checkTopK(t *testing.T, tk *topK, exact map[topKey]int64, hashOf func(int, []byte) uint64) {
	t.Helper()
	var total, sum int64
	for _, n := range exact {
		total += n
	}
	if tk.total != total {
		t.Fatalf("total %d, want %d", tk.total, total)
	}
	for i := range tk.items {
		sum += tk.items[i].count
	}
	if len(tk.items) == tk.size && sum != total {
		t.Fatalf("a full summary's counts add up to %d, want the stream's length %d", sum, total)
	}
	floor := tk.floor()
	if floor*int64(tk.size) > total {
		t.Fatalf("floor %d above total/size = %d/%d", floor, total, tk.size)
	}
	for k, n := range exact {
		key := []byte(k.key)
		it, ok := tk.lookup(k.db, key, hashOf(k.db, key))
		if !ok {
			if n > floor {
				t.Fatalf("%v occurred %d times, more than the floor %d, and is not tracked", k, n, floor)
			}
			continue
		}
		if it.count < n || it.count-it.err > n || it.err > floor {
			t.Fatalf("%v occurred %d times: count %d err %d floor %d", k, n, it.count, it.err, floor)
		}
	}
	// The heap and the table agree with the items.
	for i, idx := range tk.heap {
		if int(tk.items[idx].pos) != i {
			t.Fatalf("heap[%d]=%d but the item says pos %d", i, idx, tk.items[idx].pos)
		}
		if c := 2*i + 1; c < len(tk.heap) && tk.items[tk.heap[c]].count < tk.items[idx].count {
			t.Fatalf("heap order broken at %d", i)
		}
	}
	used := 0
	for _, v := range tk.table {
		if v != 0 {
			used++
		}
	}
	if used != len(tk.items) {
		t.Fatalf("table holds %d items, the summary %d", used, len(tk.items))
	}
}

// TestTopKModel runs random skewed streams through small summaries, with
// hashes from a tiny range in some runs so that the table's probing and
// deletion are exercised by collisions, and checks the guarantees after
// every step of the short runs and at the end of the long ones.
func TestTopKModel(t *testing.T) {
	seed := maphash.MakeSeed()
	for run := 0; run < 60; run++ {
		r := rand.New(rand.NewSource(int64(run)))
		size := 1 + r.Intn(40)
		keys := 1 + r.Intn(300)
		steps := 1 + r.Intn(5000)
		hashOf := func(db int, key []byte) uint64 { return maphash.Bytes(seed, key) + uint64(db) }
		if run%3 == 0 {
			hashOf = func(db int, key []byte) uint64 { return maphash.Bytes(seed, key) % 5 }
		}
		z := rand.NewZipf(r, 1.05+r.Float64(), 1, uint64(keys-1))
		tk := newTopK(size)
		exact := map[topKey]int64{}
		for i := 0; i < steps; i++ {
			k := topKey{db: r.Intn(2), key: fmt.Sprint("k", z.Uint64())}
			exact[k]++
			tk.add(k.db, []byte(k.key), hashOf(k.db, []byte(k.key)))
			if steps < 500 {
				checkTopK(t, tk, exact, hashOf)
			}
		}
		checkTopK(t, tk, exact, hashOf)
		tk.reset()
		checkTopK(t, tk, map[topKey]int64{}, hashOf)
	}
}

// Keys are copied, at most TopKeyBytes of them; keys that share those
// bytes but differ later, or in length, or in database, are counted apart.
func TestTopKKeys(t *testing.T) {
	tk := newTopK(8)
	long := bytes.Repeat([]byte("x"), 1<<20)
	long2 := bytes.Clone(long)
	long2[len(long2)-1] = 'y'
	short := []byte("user:1")
	seed := maphash.MakeSeed()
	hash := func(b []byte) uint64 { return maphash.Bytes(seed, b) }
	tk.add(0, long, hash(long))
	tk.add(0, long2, hash(long2))
	tk.add(0, long2, hash(long2))
	tk.add(0, long[:TopKeyBytes], hash(long[:TopKeyBytes]))
	tk.add(1, short, hash(short))
	tk.add(0, short, hash(short))
	short[0] = 'X' // the caller's buffer is not kept
	if it, ok := tk.lookup(0, []byte("user:1"), hash([]byte("user:1"))); !ok || it.count != 1 || string(it.key) != "user:1" {
		t.Fatalf("user:1 in db 0: %+v %v", it, ok)
	}
	if it, ok := tk.lookup(1, []byte("user:1"), hash([]byte("user:1"))); !ok || it.count != 1 {
		t.Fatalf("user:1 in db 1: %+v %v", it, ok)
	}
	it, ok := tk.lookup(0, long2, hash(long2))
	if !ok || it.count != 2 || it.keyLen != 1<<20 || len(it.key) != TopKeyBytes || cap(it.key) > TopKeyBytes {
		t.Fatalf("long key: count %d len %d kept %d (cap %d)", it.count, it.keyLen, len(it.key), cap(it.key))
	}
	if it, ok := tk.lookup(0, long, hash(long)); !ok || it.count != 1 {
		t.Fatal("the other long key is not counted apart")
	}
	if it, ok := tk.lookup(0, long[:TopKeyBytes], hash(long[:TopKeyBytes])); !ok || it.count != 1 || it.keyLen != TopKeyBytes {
		t.Fatal("the key equal to the long keys' prefix is not counted apart")
	}
	if len(tk.items) != 5 {
		t.Fatalf("%d items, want 5", len(tk.items))
	}
}

// Counting allocates nothing once the key buffers have grown: neither a
// tracked key's denial nor a new key taking over a counter.
func TestTopKAllocs(t *testing.T) {
	tk := newTopK(64)
	seed := maphash.MakeSeed()
	keys := make([][]byte, 1000)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("rl:api:user:%06d", i))
	}
	for _, k := range keys {
		tk.add(0, k, maphash.Bytes(seed, k))
	}
	i := 0
	allocs := testing.AllocsPerRun(10000, func() {
		k := keys[i%len(keys)]
		tk.add(0, k, maphash.Bytes(seed, k))
		i += 7
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per count", allocs)
	}
}
