package engine

import (
	"math/rand"
	"slices"
	"testing"
)

// TestSortOrders: the merge sort is stable and sorts; pqsort puts the
// right items in its window, whatever the ties.
func TestSortOrders(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	cmp := func(a, b *sortKey) int { return int(a.score - b.score) }
	idxs := func(v []sortKey) []int32 {
		out := make([]int32, len(v))
		for i := range v {
			out[i] = v[i].idx
		}
		return out
	}
	for round := 0; round < 300; round++ {
		n := rng.Intn(200)
		v := make([]sortKey, n)
		for i := range v {
			v[i] = sortKey{score: float64(rng.Intn(1 + n/3)), idx: int32(i)}
		}
		want := slices.Clone(v)
		slices.SortStableFunc(want, func(a, b sortKey) int { return cmp(&a, &b) })
		got := slices.Clone(v)
		mergeSort(got, make([]sortKey, n), cmp)
		if !slices.Equal(idxs(got), idxs(want)) {
			t.Fatalf("mergeSort: %v, want %v", idxs(got), idxs(want))
		}
		if n == 0 {
			continue
		}
		lo := rng.Intn(n)
		hi := lo + rng.Intn(n-lo)
		p := slices.Clone(v)
		pqsort(p, 0, n, cmp, lo, hi)
		for i := lo; i <= hi; i++ {
			if p[i].score != want[i].score {
				t.Fatalf("pqsort window %d..%d: rank %d holds %v, want %v", lo, hi, i, p[i].score, want[i].score)
			}
		}
		sorted := idxs(p)
		slices.Sort(sorted)
		if !slices.Equal(sorted, idxs(v)) {
			t.Fatalf("pqsort lost or duplicated items: %v", idxs(p))
		}
	}
}
