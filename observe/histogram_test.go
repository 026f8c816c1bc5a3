package observe

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestHistBuckets: every duration falls in the bucket whose bounds hold
// it, buckets follow each other without gaps, and none is wider than
// 1/32 of its lower bound past the exact ones.
func TestHistBuckets(t *testing.T) {
	prevHi := int64(0)
	for i := 0; i < histBuckets; i++ {
		lo, hi := histBounds(i)
		if lo != prevHi {
			t.Fatalf("bucket %d starts at %d, the previous ended at %d", i, lo, prevHi)
		}
		if lo >= 2*histSub && (hi-lo)*histSub > lo {
			t.Fatalf("bucket %d [%d, %d) is wider than 1/%d of its start", i, lo, hi, histSub)
		}
		if histIndex(lo) != i || histIndex(hi-1) != i {
			t.Fatalf("bucket %d [%d, %d): its ends map to %d and %d", i, lo, hi, histIndex(lo), histIndex(hi-1))
		}
		prevHi = hi
	}
	if prevHi != histMax+1 {
		t.Fatalf("the last bucket ends at %d, want %d", prevHi, int64(histMax+1))
	}
	for _, v := range []int64{-5, 0} {
		if histIndex(v) != 0 {
			t.Errorf("histIndex(%d) = %d", v, histIndex(v))
		}
	}
	if histIndex(1<<62) != histBuckets-1 {
		t.Errorf("a huge duration is not in the last bucket")
	}
}

// TestHistPercentiles checks percentiles against the exact ones of a
// skewed sample: within the buckets' 1/32.
func TestHistPercentiles(t *testing.T) {
	var h Histogram
	r := rand.New(rand.NewPCG(1, 2))
	var all []int64
	for i := 0; i < 20000; i++ {
		d := int64(200 + r.ExpFloat64()*5000)
		if i%100 == 0 {
			d *= 1000 // a slow tail
		}
		all = append(all, d)
		h.Record(int64(i), d)
	}
	slices.Sort(all)
	var s HistogramSnapshot
	if !h.Snapshot(&s) || s.Total != uint64(len(all)) {
		t.Fatalf("snapshot: total %d", s.Total)
	}
	var sum int64
	for _, d := range all {
		sum += d
	}
	if s.Sum != sum {
		t.Errorf("sum %d, want %d", s.Sum, sum)
	}
	for _, p := range []float64{1, 50, 90, 99, 99.9, 100} {
		rank := max(int(p/100*float64(len(all))+0.5), 1)
		exact := all[rank-1]
		got := s.Percentile(p)
		if got < exact || float64(got-exact) > float64(exact)/histSub {
			t.Errorf("p%v = %d, exact %d", p, got, exact)
		}
	}
	if lo := s.Percentile(0); lo > all[0] {
		t.Errorf("p0 = %d above the smallest, %d", lo, all[0])
	}
	if n := s.Below(time.Duration(all[len(all)/2])); n < uint64(len(all)/2)-uint64(len(all)/20) || n > uint64(len(all)/2) {
		t.Errorf("below the median: %d of %d", n, len(all))
	}
	h.Reset()
	if h.Snapshot(&s) {
		t.Error("a reset histogram still has counts")
	}
}

// TestHistCDF: LATENCY HISTOGRAM's levels carry Redis's labels and
// cumulative counts, and skip levels that add nothing.
func TestHistCDF(t *testing.T) {
	var h Histogram
	for _, d := range []int64{10, 900, 1500, 1500, 40_000, 3 << 35} {
		h.Record(1, d)
	}
	var s HistogramSnapshot
	h.Snapshot(&s)
	got := fmt.Sprint(s.CDF())
	want := "[{1 2} {2 4} {66 5} {69256347 6}]"
	if got != want {
		t.Errorf("cdf %s, want %s", got, want)
	}
	// Redis's labels: an HdrHistogram bucket's highest value at 1024 ns,
	// 2048 ns, ...
	var labels []int64
	for level := int64(1024); level <= 1<<20; level *= 2 {
		labels = append(labels, (level+level>>7-1)/1000)
	}
	if fmt.Sprint(labels) != "[1 2 4 8 16 33 66 132 264 528 1056]" {
		t.Errorf("labels %v", labels)
	}
}

// TestRecordNoAllocs: every command's accounting runs these on the
// request path, which allocates nothing per request once a connection
// is warm (commands' TestNetPathNoAllocs).
func TestRecordNoAllocs(t *testing.T) {
	var h Histogram
	var c CallCounter
	h.Record(1, 1000) // the stripe's first duration allocates it
	if a := testing.AllocsPerRun(100, func() {
		h.Record(1, 12345)
		c.Add(1, 12345)
	}); a != 0 {
		t.Errorf("%.1f allocations per command recorded", a)
	}
}
