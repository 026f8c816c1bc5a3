package engine

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"testing"
)

// hashModel is what a hash must hold: pairs in insertion order (a field set
// again keeps its place) and whether it must be indexed by now.
type hashModel struct {
	fields  []string
	values  map[string]string
	indexed bool
}

func (m *hashModel) set(f, v string, lim HashLimits) bool {
	if len(f) > lim.Value || len(v) > lim.Value {
		m.indexed = true
	}
	_, had := m.values[f]
	if !had {
		m.fields = append(m.fields, f)
	}
	m.values[f] = v
	if len(m.fields) > lim.Entries {
		m.indexed = true
	}
	return !had
}

func (m *hashModel) del(f string) bool {
	if _, ok := m.values[f]; !ok {
		return false
	}
	delete(m.values, f)
	m.fields = slices.DeleteFunc(m.fields, func(x string) bool { return x == f })
	return true
}

func checkHash(t *testing.T, step int, h *Hash, m *hashModel) {
	t.Helper()
	if h.Len() != len(m.fields) {
		t.Fatalf("step %d: Len %d, want %d", step, h.Len(), len(m.fields))
	}
	want := "listpack"
	if m.indexed {
		want = "hashtable"
	}
	if h.Encoding() != want {
		t.Fatalf("step %d: encoding %s, want %s", step, h.Encoding(), want)
	}
	i := 0
	for f, v := range h.All() {
		if i >= len(m.fields) || string(f) != m.fields[i] || string(v) != m.values[m.fields[i]] {
			t.Fatalf("step %d: pair %d is %q=%q, want order %q", step, i, f, v, m.fields)
		}
		i++
	}
	if i != len(m.fields) {
		t.Fatalf("step %d: All gave %d pairs, want %d", step, i, len(m.fields))
	}
}

// TestHashAgainstModel drives hashes with random sets, deletes and reads
// under several limits, so that some stay compact, some convert on a long
// value and some on their field count, and checks contents, order and
// encoding against a model after every step.
func TestHashAgainstModel(t *testing.T) {
	limits := []HashLimits{{512, 64}, {8, 16}, {0, 64}, {64, 0}, {1 << 20, 1 << 20}}
	for li, lim := range limits {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("%d/%d/%d", lim.Entries, lim.Value, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, uint64(li)))
				h := NewHash()
				m := &hashModel{values: map[string]string{}}
				pool := 20 + rng.IntN(2000)
				str := func(max int) string {
					b := make([]byte, rng.IntN(max+1))
					for i := range b {
						b[i] = byte(rng.IntN(256))
					}
					return string(b)
				}
				field := func() string {
					if rng.IntN(8) == 0 {
						return str(20)
					}
					return "f" + strconv.Itoa(rng.IntN(pool))
				}
				for step := 0; step < 20000; step++ {
					switch op := rng.IntN(20); {
					case op < 9:
						f := field()
						v := str(12)
						if rng.IntN(200) == 0 {
							v = str(200)
						}
						if got, want := h.Set([]byte(f), []byte(v), lim), m.set(f, v, lim); got != want {
							t.Fatalf("step %d: Set(%q) added=%v, want %v", step, f, got, want)
						}
					case op < 14:
						f := field()
						if got, want := h.Delete([]byte(f)), m.del(f); got != want {
							t.Fatalf("step %d: Delete(%q)=%v, want %v", step, f, got, want)
						}
					default:
						f := field()
						v, ok := h.Get([]byte(f))
						mv, mok := m.values[f]
						if ok != mok || string(v) != mv || h.Has([]byte(f)) != mok {
							t.Fatalf("step %d: Get(%q)=%q,%v want %q,%v", step, f, v, ok, mv, mok)
						}
					}
					if step%97 == 0 || h.Len() < 3 {
						checkHash(t, step, h, m)
					}
				}
				checkHash(t, -1, h, m)
				// A snapshot round trip keeps pairs and order.
				back := NewHashFrom(h.All(), lim)
				var a, b [][]byte
				for f, v := range h.All() {
					a = append(a, f, v)
				}
				for f, v := range back.All() {
					b = append(b, f, v)
				}
				if len(a) != len(b) {
					t.Fatalf("rebuilt hash has %d items, want %d", len(b), len(a))
				}
				for i := range a {
					if !bytes.Equal(a[i], b[i]) {
						t.Fatalf("rebuilt hash differs at %d: %q vs %q", i, b[i], a[i])
					}
				}
			})
		}
	}
}

// TestHashCompactSplice checks in-place value rewrites of every size change
// in the compact form, including length prefixes that change width.
func TestHashCompactSplice(t *testing.T) {
	lim := HashLimits{Entries: 512, Value: 1000}
	h := NewHash()
	for _, f := range []string{"a", "b", "c"} {
		h.Set([]byte(f), []byte(f+f), lim)
	}
	for _, n := range []int{0, 1, 127, 128, 300, 2, 128, 127, 0} {
		v := bytes.Repeat([]byte{'x'}, n)
		if h.Set([]byte("b"), v, lim) {
			t.Fatalf("Set of an existing field reported it new")
		}
		var got []string
		for f, val := range h.All() {
			got = append(got, string(f)+"="+strconv.Itoa(len(val)))
		}
		want := []string{"a=2", "b=" + strconv.Itoa(n), "c=2"}
		if !slices.Equal(got, want) {
			t.Fatalf("after a %d-byte value: %v, want %v", n, got, want)
		}
		if c, _ := h.Get([]byte("c")); string(c) != "cc" {
			t.Fatalf("c = %q", c)
		}
	}
	if h.Encoding() != "listpack" {
		t.Fatalf("encoding %s", h.Encoding())
	}
}

// TestHashScan checks HSCAN's guarantee on the indexed form: a field present
// for the whole scan is returned at least once, while other fields come and
// go, the table grows and shrinks and entries are compacted.
func TestHashScan(t *testing.T) {
	lim := HashLimits{Entries: 4, Value: 64}
	for seed := uint64(1); seed <= 5; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		h := NewHash()
		stable := map[string]bool{}
		for i := 0; i < 300; i++ {
			f := "s" + strconv.Itoa(i)
			stable[f] = true
			h.Set([]byte(f), []byte("v"), lim)
		}
		seen := map[string]bool{}
		cursor, calls := uint64(0), 0
		for {
			cursor = h.Scan(cursor, 1+rng.IntN(20), func(f, v []byte) {
				seen[string(f)] = true
				if string(v) == "" {
					t.Fatalf("empty value for %q", f)
				}
			})
			calls++
			// Churn: a burst of adds grows the table, deletes shrink it.
			n := rng.IntN(400)
			if rng.IntN(2) == 0 {
				for i := 0; i < n; i++ {
					h.Set([]byte("t"+strconv.Itoa(rng.IntN(5000))), []byte("w"), lim)
				}
			} else {
				for i := 0; i < n*4; i++ {
					h.Delete([]byte("t" + strconv.Itoa(rng.IntN(5000))))
				}
			}
			if cursor == 0 {
				break
			}
			if calls > 100000 {
				t.Fatal("scan does not terminate")
			}
		}
		for f := range stable {
			if !seen[f] {
				t.Fatalf("seed %d: %s was never returned", seed, f)
			}
		}
	}
	// A compact hash returns everything at once, whatever the cursor.
	h := NewHash()
	h.Set([]byte("a"), []byte("1"), HashLimits{512, 64})
	h.Set([]byte("b"), []byte("2"), HashLimits{512, 64})
	var got []string
	if next := h.Scan(12345, 1, func(f, v []byte) { got = append(got, string(f)+string(v)) }); next != 0 {
		t.Fatalf("compact scan cursor %d", next)
	}
	if !slices.Equal(got, []string{"a1", "b2"}) {
		t.Fatalf("compact scan %v", got)
	}
}

func TestHashIncr(t *testing.T) {
	lim := HashLimits{Entries: 512, Value: 64}
	h := NewHash()
	if n, err := h.IncrBy([]byte("n"), 5, lim); n != 5 || err != nil {
		t.Fatalf("IncrBy on a new field: %d %v", n, err)
	}
	if n, err := h.IncrBy([]byte("n"), -7, lim); n != -2 || err != nil {
		t.Fatalf("IncrBy: %d %v", n, err)
	}
	h.Set([]byte("max"), []byte(strconv.FormatInt(math.MaxInt64, 10)), lim)
	if _, err := h.IncrBy([]byte("max"), 1, lim); err != ErrOverflow {
		t.Fatalf("overflow: %v", err)
	}
	h.Set([]byte("min"), []byte(strconv.FormatInt(math.MinInt64, 10)), lim)
	if _, err := h.IncrBy([]byte("min"), -1, lim); err != ErrOverflow {
		t.Fatalf("underflow: %v", err)
	}
	for _, v := range []string{"x", "1.5", " 1", "01", ""} {
		h.Set([]byte("bad"), []byte(v), lim)
		if _, err := h.IncrBy([]byte("bad"), 1, lim); err != ErrNotInteger {
			t.Fatalf("IncrBy over %q: %v", v, err)
		}
	}
	one, _ := ParseLongDouble([]byte("0.1"))
	h.Set([]byte("f"), []byte("10.5"), lim)
	if s, err := h.IncrByFloat([]byte("f"), one, lim); s != "10.6" || err != nil {
		t.Fatalf("IncrByFloat: %q %v", s, err)
	}
	if v, _ := h.Get([]byte("f")); string(v) != "10.6" {
		t.Fatalf("stored %q", v)
	}
	h.Set([]byte("inf"), []byte("inf"), lim)
	if _, err := h.IncrByFloat([]byte("inf"), one, lim); err != ErrNaNOrInf {
		t.Fatalf("IncrByFloat over inf: %v", err)
	}
	h.Set([]byte("bad"), []byte("abc"), lim)
	if _, err := h.IncrByFloat([]byte("bad"), one, lim); err != ErrNotFloat {
		t.Fatalf("IncrByFloat over text: %v", err)
	}
	// A result longer than the value limit converts the hash.
	huge, _ := ParseLongDouble([]byte("1e80"))
	if _, err := h.IncrByFloat([]byte("g"), huge, lim); err != nil || h.Encoding() != "hashtable" {
		t.Fatalf("long result: %v, encoding %s", err, h.Encoding())
	}
}

// TestHashMemory reports what fields cost in each form; it fails if the
// indexed form costs more than Redis 7.0 does for the same fields (MEMORY
// USAGE there: about 66 bytes a field at 100k fields, 70 at 600).
func TestHashMemory(t *testing.T) {
	for _, n := range []int{100, 512, 10_000, 1_000_000} {
		lim := HashLimits{Entries: 512, Value: 64}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		h := NewHash()
		for i := 0; i < n; i++ {
			h.Set([]byte("field:"+strconv.Itoa(i)), []byte("value:"+strconv.Itoa(i)), lim)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		est := float64(h.MemoryUsage()) / float64(n)
		if n < 10_000 {
			// Too small for the heap counters to be meaningful.
			t.Logf("%8d fields (%s): MemoryUsage %.1f B/field", n, h.Encoding(), est)
			continue
		}
		heap := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
		t.Logf("%8d fields (%s): MemoryUsage %.1f B/field, heap %.1f B/field", n, h.Encoding(), est, heap)
		if est > 70 || heap > 70 {
			t.Errorf("%d fields cost %.1f bytes each (heap %.1f)", n, est, heap)
		}
		runtime.KeepAlive(h)
	}
}

func benchHash(n int) (*Hash, [][]byte) {
	lim := HashLimits{Entries: 512, Value: 64}
	h := NewHash()
	fields := make([][]byte, n)
	for i := range fields {
		fields[i] = []byte("field:" + strconv.Itoa(i))
		h.Set(fields[i], []byte("value:"+strconv.Itoa(i)), lim)
	}
	return h, fields
}

func BenchmarkHashGet(b *testing.B) {
	for _, n := range []int{16, 512, 100_000} {
		h, fields := benchHash(n)
		b.Run(fmt.Sprintf("%s-%d", h.Encoding(), n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, ok := h.Get(fields[i%n]); !ok {
					b.Fatal("missing")
				}
			}
		})
	}
}

func BenchmarkHashSetExisting(b *testing.B) {
	lim := HashLimits{Entries: 512, Value: 64}
	for _, n := range []int{16, 512, 100_000} {
		h, fields := benchHash(n)
		vals := [][]byte{[]byte("short"), []byte("a bit longer value")}
		b.Run(fmt.Sprintf("%s-%d", h.Encoding(), n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				h.Set(fields[i%n], vals[i&1], lim)
			}
		})
	}
}

// BenchmarkHashBuild inserts n fields into a new hash, crossing into the
// indexed form on the way for the larger sizes.
func BenchmarkHashBuild(b *testing.B) {
	lim := HashLimits{Entries: 512, Value: 64}
	for _, n := range []int{16, 512, 100_000} {
		fields := make([][]byte, n)
		for i := range fields {
			fields[i] = []byte("field:" + strconv.Itoa(i))
		}
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				h := NewHash()
				for _, f := range fields {
					h.Set(f, f, lim)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/field")
		})
	}
}

func BenchmarkHashDelete(b *testing.B) {
	lim := HashLimits{Entries: 512, Value: 64}
	h, fields := benchHash(100_000)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		f := fields[i%len(fields)]
		h.Delete(f)
		h.Set(f, f, lim)
	}
}
