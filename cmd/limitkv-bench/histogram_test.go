package main

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

// Every value must land in a bucket whose range holds it, buckets must be
// ordered with the values, and no bucket above 256 ns may be wider than
// 1/128 of its lowest value.
func TestHistogramBuckets(t *testing.T) {
	check := func(ns int64) {
		i := bucketOf(ns)
		if i < 0 || i >= histBuckets {
			t.Fatalf("bucketOf(%d) = %d, outside [0,%d)", ns, i, histBuckets)
		}
		lo, hi := bucketRange(i)
		if ns < lo || ns > hi {
			t.Fatalf("value %d in bucket %d covering [%d,%d]", ns, i, lo, hi)
		}
		if lo >= 256 && float64(hi-lo+1)/float64(lo) > 1.0/128 {
			t.Fatalf("bucket %d [%d,%d] wider than 1/128", i, lo, hi)
		}
	}
	for ns := int64(0); ns < 100_000; ns++ {
		check(ns)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1_000_000 {
		check(r.Int64N(histMaxNS + 1))
	}
	check(histMaxNS)
	prevHi := int64(-1)
	for i := 0; i < histBuckets; i++ {
		lo, hi := bucketRange(i)
		if lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, previous ended at %d", i, lo, prevHi)
		}
		prevHi = hi
	}
	if prevHi != histMaxNS {
		t.Fatalf("last bucket ends at %d, want %d", prevHi, histMaxNS)
	}
	if bucketOf(histMaxNS+12345) != histBuckets-1 || bucketOf(-5) != 0 {
		t.Fatal("out-of-range values are not clamped to the end buckets")
	}
}

// Percentiles of a known sample must be within 1% of the exact ones, from
// 1 µs to 10 s, and never below them.
func TestHistogramQuantiles(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var h histogram
	var all []int64
	for range 200_000 {
		// Log-uniform from 1 µs to 10 s: every decade equally filled.
		ns := int64(1000 * math.Pow(10, r.Float64()*7))
		all = append(all, ns)
		h.record(time.Duration(ns))
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	for _, q := range []float64{0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999, 1} {
		exact := all[int(q*float64(len(all))+0.999999)-1]
		got := int64(h.quantile(q))
		if got < exact || float64(got-exact) > 0.01*float64(exact) {
			t.Errorf("q%v = %d ns, exact %d ns", q, got, exact)
		}
	}
	if h.quantile(1) != time.Duration(all[len(all)-1]) {
		t.Errorf("q1 = %v, want the max %v", h.quantile(1), time.Duration(all[len(all)-1]))
	}
	if h.n != uint64(len(all)) || h.min != all[0] || h.max != all[len(all)-1] {
		t.Errorf("n/min/max = %d/%d/%d, want %d/%d/%d", h.n, h.min, h.max, len(all), all[0], all[len(all)-1])
	}
}

func TestHistogramSmallSample(t *testing.T) {
	var h histogram
	for _, us := range []int{100, 200, 300, 400, 500, 600, 700, 800, 900, 1000} {
		h.record(time.Duration(us) * time.Microsecond)
	}
	near := func(got time.Duration, us int) bool {
		want := time.Duration(us) * time.Microsecond
		return got >= want && got <= want+want/100
	}
	if !near(h.quantile(0.5), 500) {
		t.Errorf("p50 = %v, want 500µs", h.quantile(0.5))
	}
	if !near(h.quantile(0.9), 900) {
		t.Errorf("p90 = %v, want 900µs", h.quantile(0.9))
	}
	if !near(h.quantile(0.99), 1000) || !near(h.quantile(0.999), 1000) {
		t.Errorf("p99 = %v, p99.9 = %v, want 1ms", h.quantile(0.99), h.quantile(0.999))
	}
	if h.mean() != 550*time.Microsecond {
		t.Errorf("mean = %v, want 550µs", h.mean())
	}
	var empty histogram
	if empty.quantile(0.99) != 0 || empty.mean() != 0 {
		t.Error("an empty histogram reports latencies")
	}
}

// Merging per-connection histograms must give what one histogram of all
// the values gives.
func TestHistogramMerge(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var whole histogram
	parts := make([]histogram, 7)
	for i := range 70_000 {
		d := time.Duration(r.Int64N(int64(20 * time.Millisecond)))
		whole.record(d)
		parts[i%7].record(d)
	}
	var merged histogram
	merged.merge(&histogram{}) // an empty part changes nothing
	for i := range parts {
		merged.merge(&parts[i])
	}
	if merged != whole {
		t.Fatal("merged histogram differs from the histogram of all values")
	}
}

func TestHistogramRecordDoesNotAllocate(t *testing.T) {
	h := new(histogram)
	allocs := testing.AllocsPerRun(1000, func() { h.record(123 * time.Microsecond) })
	if allocs != 0 {
		t.Fatalf("record allocates %.1f times", allocs)
	}
}
