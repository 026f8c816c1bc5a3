package engine

import (
	"math"
	"slices"
	"testing"
)

// TestZAlgebra: weights, aggregates, plain sets scoring 1, missing inputs
// and the NaN rules, on small inputs whose results are known.
func TestZAlgebra(t *testing.T) {
	z, err := ZSetFrom(ZSetLimits{Entries: 128, Value: 64}, false, func(yield func([]byte, float64) bool) {
		for _, p := range []struct {
			m string
			s float64
		}{{"a", 1}, {"b", 2}, {"c", math.Inf(1)}} {
			if !yield([]byte(p.m), p.s) {
				return
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	st := NewSet()
	for _, m := range []string{"b", "c", "d"} {
		st.Add([]byte(m), SetLimits{})
	}
	result := func(items []ZItem) []ZItem {
		SortZItems(items)
		return items
	}
	src := func(wz, ws float64) []ZSource {
		return []ZSource{{Z: z, Weight: wz}, {Set: st, Weight: ws}}
	}
	for _, c := range []struct {
		name string
		got  []ZItem
		want []ZItem
	}{
		{"union sum", ZUnion(src(1, 1), ZAggrSum, nil), []ZItem{{"a", 1}, {"d", 1}, {"b", 3}, {"c", math.Inf(1)}}},
		{"union min, weighted", ZUnion(src(2, 10), ZAggrMin, nil), []ZItem{{"a", 2}, {"b", 4}, {"c", 10}, {"d", 10}}},
		{"union sum of inf and -inf", ZUnion(src(1, math.Inf(-1)), ZAggrSum, nil), []ZItem{{"b", math.Inf(-1)}, {"d", math.Inf(-1)}, {"c", 0}, {"a", 1}}},
		{"union 0 times inf", ZUnion(src(0, 1), ZAggrMax, nil), []ZItem{{"a", 0}, {"b", 1}, {"c", 1}, {"d", 1}}},
		{"inter max", ZInter(src(1, 5), ZAggrMax, nil), []ZItem{{"b", 5}, {"c", math.Inf(1)}}},
		{"inter with a missing input", ZInter([]ZSource{{Weight: 1}, {Z: z, Weight: 1}}, ZAggrSum, nil), nil},
		{"diff", ZDiff(src(1, 1), nil), []ZItem{{"a", 1}}},
		{"diff of itself", ZDiff([]ZSource{{Z: z}, {Set: st}, {Z: z}}, nil), nil},
	} {
		if got := result(c.got); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if n := ZInterCard(src(1, 1), 0, nil); n != 2 {
		t.Errorf("ZInterCard: %d, want 2", n)
	}
	if n := ZInterCard(src(1, 1), 1, nil); n != 1 {
		t.Errorf("ZInterCard LIMIT 1: %d, want 1", n)
	}
}

// TestRandRanks: distinct ranks below n, as many as asked.
func TestRandRanks(t *testing.T) {
	for _, c := range [][2]int{{1, 0}, {2, 1}, {10, 9}, {1 << 40, 1000}} {
		r := RandRanks(c[0], c[1])
		if len(r) != c[1] {
			t.Fatalf("RandRanks(%d, %d): %d ranks", c[0], c[1], len(r))
		}
		seen := map[int]bool{}
		for _, x := range r {
			if x < 0 || x >= c[0] || seen[x] {
				t.Fatalf("RandRanks(%d, %d): %d out of range or repeated", c[0], c[1], x)
			}
			seen[x] = true
		}
	}
}
