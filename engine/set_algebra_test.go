package engine

import (
	"fmt"
	"slices"
	"testing"
)

// TestSetAlgebra checks the algebra against a model, with SDIFF's two
// algorithms each taken (a small first set against large others, and a
// large first set against small ones) and missing inputs as empty sets.
func TestSetAlgebra(t *testing.T) {
	lim := SetLimits{IntsetEntries: 512}
	mk := func(from, to, step int) (*Set, map[string]bool) {
		s, m := NewSet(), map[string]bool{}
		for i := from; i < to; i += step {
			k := fmt.Sprint(i)
			s.Add([]byte(k), lim)
			m[k] = true
		}
		return s, m
	}
	members := func(s *Set) []string {
		var out []string
		for m := range s.All() {
			out = append(out, string(m))
		}
		slices.Sort(out)
		return out
	}
	model := func(keep func(k string) bool, ms ...map[string]bool) []string {
		var out []string
		seen := map[string]bool{}
		for _, m := range ms {
			for k := range m {
				if !seen[k] && keep(k) {
					out = append(out, k)
				}
				seen[k] = true
			}
		}
		slices.Sort(out)
		return out
	}
	for _, sizes := range [][3]int{{10, 2000, 3000}, {3000, 20, 30}} {
		a, ma := mk(0, sizes[0], 1)
		b, mb := mk(0, sizes[1], 2)
		c, mc := mk(0, sizes[2], 3)
		var inter []string
		InterSets([]*Set{a, b, c}, func(m []byte) bool {
			inter = append(inter, string(m))
			return true
		})
		slices.Sort(inter)
		if want := model(func(k string) bool { return mb[k] && mc[k] }, ma); !slices.Equal(inter, want) {
			t.Errorf("%v: InterSets %v, want %v", sizes, inter, want)
		}
		if got, want := members(UnionSets([]*Set{a, nil, b, c}, lim)), model(func(string) bool { return true }, ma, mb, mc); !slices.Equal(got, want) {
			t.Errorf("%v: UnionSets: %d members, want %d", sizes, len(got), len(want))
		}
		if got, want := members(DiffSets([]*Set{a, b, nil, c}, lim)), model(func(k string) bool { return !mb[k] && !mc[k] }, ma); !slices.Equal(got, want) {
			t.Errorf("%v: DiffSets %v, want %v", sizes, got, want)
		}
		if got := DiffSets([]*Set{a, b, a}, lim); got.Len() != 0 {
			t.Errorf("%v: a set minus itself has %d members", sizes, got.Len())
		}
		if got := DiffSets([]*Set{nil, a}, lim); got.Len() != 0 {
			t.Errorf("%v: a missing set minus another has %d members", sizes, got.Len())
		}
	}
	n := 0
	InterSets([]*Set{func() *Set { s, _ := mk(0, 100, 1); return s }()}, func([]byte) bool { n++; return n < 5 })
	if n != 5 {
		t.Errorf("InterSets went on after fn returned false: %d calls", n)
	}
}
