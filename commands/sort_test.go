package commands

import (
	"math/rand"
	"slices"
	"strings"
	"testing"
)

func splitArgs(s string) [][]byte {
	var out [][]byte
	for _, f := range strings.Fields(s) {
		out = append(out, []byte(f))
	}
	return out
}

// TestSortKeys: the keys SORT locks and ACL checks, as Redis's
// sortGetKeys finds them (COMMAND GETKEYS in tests/testdata/diff/sort.txt
// compares with Redis).
func TestSortKeys(t *testing.T) {
	for _, c := range []struct {
		args string
		want []KeyRef
	}{
		{"SORT k", []KeyRef{{1, 0}}},
		{"SORT k STORE d", []KeyRef{{1, 0}, {3, 2}}},
		{"SORT k STORE d LIMIT 0 1 GET # BY w STORE e", []KeyRef{{1, 0}, {12, 2}}},
		{"SORT k LIMIT STORE d STORE", []KeyRef{{1, 0}}},
		{"SORT k GET STORE", []KeyRef{{1, 0}}},
		{"SORT k BY STORE STORE x", []KeyRef{{1, 0}, {5, 2}}},
		{"SORT k STORE", []KeyRef{{1, 0}}},
	} {
		if got := sortKeys(splitArgs(c.args), nil); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.args, got, c.want)
		}
	}
}

// TestSortLocksEveryShard: only patterns that read keys lock every shard.
func TestSortLocksEveryShard(t *testing.T) {
	for _, c := range []struct {
		args     string
		readOnly bool
		want     bool
	}{
		{"SORT k", false, false},
		{"SORT k BY nosort", false, false},
		{"SORT k BY w_*", false, true},
		{"SORT k BY w_* BY nosort", false, false}, // a constant BY stops the sorting for good
		{"SORT k BY nosort BY w_*", false, false},
		{"SORT k GET #", false, false},
		{"SORT k GET nostar", false, false},
		{"SORT k GET # GET h_*->f", false, true},
		{"SORT k STORE d BY w_*", false, true},
		{"SORT k STORE d BY w_*", true, false}, // a syntax error: nothing read
		{"SORT k BY w_* FOO", false, false},
		{"SORT k LIMIT 0 x GET *", false, false},
	} {
		if got := sortReadsPatterns(c.readOnly)(splitArgs(c.args)); got != c.want {
			t.Errorf("%s (read-only %v): %v, want %v", c.args, c.readOnly, got, c.want)
		}
	}
}

// TestSortOrders: the merge sort is stable and sorts; pqsort puts the
// right items in its window, whatever the ties.
func TestSortOrders(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for round := 0; round < 300; round++ {
		n := rng.Intn(200)
		keys := make([]int, n)
		for i := range keys {
			keys[i] = rng.Intn(1 + n/3)
		}
		cmp := func(a, b int32) int { return keys[a] - keys[b] }
		v := make([]int32, n)
		for i := range v {
			v[i] = int32(i)
		}
		want := slices.Clone(v)
		slices.SortStableFunc(want, cmp)
		got := slices.Clone(v)
		mergeSort(got, make([]int32, n), cmp)
		if !slices.Equal(got, want) {
			t.Fatalf("mergeSort of %v: %v, want %v", keys, got, want)
		}
		if n == 0 {
			continue
		}
		lo := rng.Intn(n)
		hi := lo + rng.Intn(n-lo)
		p := slices.Clone(v)
		pqsort(p, 0, n, cmp, lo, hi)
		for i := lo; i <= hi; i++ {
			if keys[p[i]] != keys[want[i]] {
				t.Fatalf("pqsort window %d..%d of %v: rank %d holds %d, want %d", lo, hi, keys, i, keys[p[i]], keys[want[i]])
			}
		}
		sorted := slices.Clone(p)
		slices.Sort(sorted)
		if !slices.Equal(sorted, v) {
			t.Fatalf("pqsort lost or duplicated items: %v", p)
		}
	}
}
