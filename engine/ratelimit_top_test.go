package engine

import (
	"cmp"
	"fmt"
	"math/rand"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"github.com/limitkv/limitkv/ratelimit"
)

// The counts cover the current period and the one before; older ones are
// forgotten, and a clock that goes back changes nothing.
func TestTopDenialsPeriods(t *testing.T) {
	e := New(Config{})
	note := func(key string, now int64, n int) {
		for i := 0; i < n; i++ {
			e.ShardFor([]byte(key)).NoteDenial(0, []byte(key), now)
		}
	}
	want := func(now int64, exp ...any) {
		t.Helper()
		got := e.TopDenials(10, now, false)
		var flat []any
		for _, d := range got {
			flat = append(flat, string(d.Key), d.Count)
			if d.Err != 0 {
				t.Fatalf("error %d on an exact count", d.Err)
			}
		}
		if fmt.Sprint(flat...) != fmt.Sprint(exp...) {
			t.Fatalf("at %d: %v, want %v", now, flat, exp)
		}
	}
	base := int64(1_700_000_000_000) - 1_700_000_000_000%ratelimit.TopPeriod
	note("a", base+10, 3)
	note("b", base+20, 1)
	want(base+30, "a", int64(3), "b", int64(1))
	note("b", base+ratelimit.TopPeriod, 5)
	want(base+ratelimit.TopPeriod+1, "b", int64(6), "a", int64(3))
	want(base+2*ratelimit.TopPeriod-1, "b", int64(6), "a", int64(3))
	want(base+2*ratelimit.TopPeriod, "b", int64(5))
	note("a", base+ratelimit.TopPeriod, 1) // the clock went back: still counted
	want(base+2*ratelimit.TopPeriod, "b", int64(5), "a", int64(1))
	want(base+5*ratelimit.TopPeriod, []any{}...)
	note("c", base+5*ratelimit.TopPeriod, 2)
	e.ResetDenials(false)
	want(base+5*ratelimit.TopPeriod, []any{}...)
	// TopDenials with n below the number of keys, ties by key.
	for _, k := range []string{"x", "w", "v", "y"} {
		note(k, base, 1)
	}
	note("z", base, 2)
	if got := e.TopDenials(3, base, false); len(got) != 3 || string(got[0].Key) != "z" || string(got[1].Key) != "v" || string(got[2].Key) != "w" {
		t.Fatalf("top 3: %v", got)
	}
}

// zipfDenials feeds n denials over keys, Zipf-distributed with exponent s,
// at time now, and returns the exact count of each key.
func zipfDenials(e *Engine, keys [][]byte, n int, s float64, now int64, seed int64) []int64 {
	exact := make([]int64, len(keys))
	zipfInto(e, keys, exact, n, s, now, seed)
	return exact
}

func zipfInto(e *Engine, keys [][]byte, exact []int64, n int, s float64, now int64, seed int64) {
	z := rand.NewZipf(rand.New(rand.NewSource(seed)), s, 1, uint64(len(keys)-1))
	for i := 0; i < n; i++ {
		k := z.Uint64()
		exact[k]++
		sh := e.ShardFor(keys[k])
		sh.NoteDenial(0, keys[k], now)
	}
}

func topKeys(n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("user:%07d", i))
	}
	return keys
}

// checkDenials checks RL.TOP's guarantees against exact counts: every
// reported count brackets the true one, and no key is missing whose true
// count exceeds what its shard's summaries could have let slip.
func checkDenials(t *testing.T, e *Engine, keys [][]byte, exact []int64, now int64) []ratelimit.Denial {
	t.Helper()
	all := e.TopDenials(len(keys), now, false)
	seen := map[int]bool{}
	for _, d := range all {
		i, err := strconv.Atoi(string(d.Key[5:]))
		if err != nil || d.DB != 0 || d.KeyLen != len(d.Key) {
			t.Fatalf("unexpected entry %+v", d)
		}
		if seen[i] {
			t.Fatalf("%s reported twice", d.Key)
		}
		seen[i] = true
		if d.Count-d.Err > exact[i] || exact[i] > d.Count {
			t.Fatalf("%s: denied %d times, reported %d with error %d", d.Key, exact[i], d.Count, d.Err)
		}
	}
	for i, n := range exact {
		d := e.ShardFor(keys[i]).denials
		if n > 0 && !seen[i] && n > d.Floor() {
			t.Fatalf("%s denied %d times is missing (floors %d)", keys[i], n, d.Floor())
		}
	}
	return all
}

// TestTopDenialsModel: skewed streams over two periods, checked against
// exact counts of the last two periods.
func TestTopDenialsModel(t *testing.T) {
	keys := topKeys(100_000)
	for run, s := range []float64{1.1, 1.3, 2} {
		e := New(Config{})
		base := int64(run+1) * 1000 * ratelimit.TopPeriod
		old := zipfDenials(e, keys, 50_000, s, base-ratelimit.TopPeriod, int64(run))
		prev := zipfDenials(e, keys, 200_000, s, base, int64(run)+10)
		cur := zipfDenials(e, keys, 300_000, s, base+ratelimit.TopPeriod+5, int64(run)+20)
		_ = old // forgotten: two periods before
		exact := make([]int64, len(keys))
		for i := range exact {
			exact[i] = prev[i] + cur[i]
		}
		all := checkDenials(t, e, keys, exact, base+2*ratelimit.TopPeriod-1)
		// A top-k reply holds every key whose true count beats the k-th
		// reported count.
		for _, k := range []int{10, 100, 1000} {
			k = min(k, len(all))
			top := all[:k]
			in := map[string]bool{}
			for _, d := range top {
				in[string(d.Key)] = true
			}
			for i, n := range exact {
				if n > top[k-1].Count && !in[string(keys[i])] {
					t.Fatalf("top %d misses %s, denied %d times > %d", k, keys[i], n, top[k-1].Count)
				}
			}
			got := e.TopDenials(k, base+2*ratelimit.TopPeriod-1, false)
			if len(got) != len(top) {
				t.Fatalf("TopDenials(%d) returned %d entries of %d", k, len(got), len(all))
			}
			for i := range got {
				if string(got[i].Key) != string(top[i].Key) || got[i].Count != top[i].Count {
					t.Fatalf("TopDenials(%d) is not the head of the full list at %d: %+v vs %+v", k, i, got[i], top[i])
				}
			}
		}
	}
}

// TestTopAccuracy measures RL.TOP against exact counts on a Zipf workload
// and prints recall, count errors and memory: 10M denials over 1M keys
// with -v (the figures), 1M otherwise (the check alone):
//
//	go test ./engine -run TestTopAccuracy -v
func TestTopAccuracy(t *testing.T) {
	n := 1_000_000
	if testing.Verbose() {
		n = 10_000_000
	}
	keys := topKeys(1_000_000)
	for _, s := range []float64{1.1, 1.5} {
		e := New(Config{})
		now := int64(1_700_000_000_000)
		exact := make([]int64, len(keys))
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		zipfInto(e, keys, exact, n, s, now, 1)
		runtime.GC()
		runtime.ReadMemStats(&after)
		all := checkDenials(t, e, keys, exact, now)

		byCount := make([]int, len(keys))
		for i := range byCount {
			byCount[i] = i
		}
		slices.SortFunc(byCount, func(a, b int) int { return cmp.Compare(exact[b], exact[a]) })
		distinct := 0
		for _, c := range exact {
			if c > 0 {
				distinct++
			}
		}
		line := fmt.Sprintf("s=%.1f: %d denials over %d keys (%d distinct):", s, n, len(keys), distinct)
		for _, k := range []int{10, 100, 1000} {
			// Recall: the share of the reply's k keys that belong to
			// the true top k (ties at the k-th count count as in).
			kth := exact[byCount[k-1]]
			hits := 0
			var maxErr, maxBound int64
			for _, d := range all[:k] {
				i, _ := strconv.Atoi(string(d.Key[5:]))
				if exact[i] >= kth {
					hits++
				}
				maxErr = max(maxErr, d.Count-exact[i])
				maxBound = max(maxBound, d.Err)
			}
			line += fmt.Sprintf(" top%d recall %.3f, max overcount %d (bound %d, k-th true count %d);",
				k, float64(hits)/float64(k), maxErr, maxBound, kth)
		}
		t.Log(line)
		t.Logf("s=%.1f: sketch memory %d bytes counted, heap growth %d bytes (%d shards x 2 periods x %d counters)",
			s, e.denialBytes(false), int64(after.HeapAlloc)-int64(before.HeapAlloc), Shards, ratelimit.TopSlots)
		runtime.KeepAlive(exact)
	}
}

// topMemoryBound is the most the summaries may hold: every counter with a
// full key buffer.
const topMemoryBound = Shards * 2 * (ratelimit.TopSlots*(64+4+ratelimit.TopKeyBytes) + 4*2*ratelimit.TopSlots)

// TestTopMemoryBounded: a million distinct keys, some longer than
// ratelimit.TopKeyBytes, cost no more than the fixed bound, and no more than a
// thousand do once the buffers are grown.
func TestTopMemoryBounded(t *testing.T) {
	e := New(Config{})
	now := int64(1_700_000_000_000)
	buf := make([]byte, 0, 300)
	r := rand.New(rand.NewSource(1))
	feed := func(from, to int) {
		for i := from; i < to; i++ {
			buf = strconv.AppendInt(append(buf[:0], "k:"...), int64(i), 10)
			for j := r.Intn(200); j > 0; j-- {
				buf = append(buf, '.')
			}
			e.ShardFor(buf).NoteDenial(0, buf, now)
		}
	}
	feed(0, 200_000)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	counted := e.denialBytes(false)
	feed(200_000, 1_000_000)
	runtime.GC()
	runtime.ReadMemStats(&after)
	if got := e.denialBytes(false); got > topMemoryBound || got < counted {
		t.Fatalf("summaries hold %d bytes after 1M keys (%d after 200k), bound %d", got, counted, topMemoryBound)
	}
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > int64(topMemoryBound-counted)+1<<20 {
		t.Fatalf("heap grew by %d bytes over 800k more keys", grew)
	}
	top := e.TopDenials(1000, now, false)
	if len(top) != 1000 {
		t.Fatalf("top: %d entries", len(top))
	}
	for _, d := range top {
		if len(d.Key) != min(d.KeyLen, ratelimit.TopKeyBytes) {
			t.Fatalf("%q: %d bytes kept of %d", d.Key, len(d.Key), d.KeyLen)
		}
	}
	t.Logf("1M distinct keys: %d bytes counted (bound %d)", e.denialBytes(false), topMemoryBound)
}

// BenchmarkNoteDenial is a denied request's extra cost: counting it in its
// shard's summary, under the shard lock the command holds anyway (taken
// here too, so that parallel runs show contention). Keys are Zipf-
// distributed over 1M, kept in one buffer and collected before the timer
// starts, so that the collector has nothing of the fixture to scan.
func BenchmarkNoteDenial(b *testing.B) {
	const keyLen = 12
	arena := make([]byte, 0, keyLen*1_000_000)
	for i := 0; i < 1_000_000; i++ {
		arena = fmt.Appendf(arena, "user:%07d", i)
	}
	for _, s := range []float64{0, 1.1, 1.5} {
		name := fmt.Sprintf("s=%.1f", s)
		if s == 0 {
			// The same loop without counting: what a denial costs
			// anyway here, to subtract.
			name, s = "baseline", 1.1
		}
		count := name != "baseline"
		b.Run(name, func(b *testing.B) {
			e := New(Config{})
			now := int64(1_700_000_000_000)
			z := rand.NewZipf(rand.New(rand.NewSource(1)), s, 1, 999_999)
			order := make([]uint32, 1<<20)
			for i := range order {
				order[i] = uint32(z.Uint64())
			}
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := rand.Intn(len(order))
				for pb.Next() {
					at := int(order[i&(len(order)-1)]) * keyLen
					k := arena[at : at+keyLen : at+keyLen]
					i++
					sh := e.ShardFor(k)
					sh.Lock()
					if count {
						sh.NoteDenial(0, k, now)
					}
					sh.Unlock()
				}
			})
		})
	}
}
