package engine

import "slices"

// The set algebra of SINTER, SUNION, SDIFF and their STORE and CARD forms,
// on sets the command has found under its locks: one pass over the
// inputs, linear in their sizes, as Redis's.

// InterSets returns the members of the intersection of sets (none nil),
// in the order of the smallest set, to fn, stopping when fn returns
// false.
func InterSets(sets []*Set, fn func(m []byte) bool) {
	sorted := slices.Clone(sets)
	slices.SortStableFunc(sorted, func(a, b *Set) int { return a.Len() - b.Len() })
	first := sorted[0]
outer:
	for m := range first.All() {
		for _, o := range sorted[1:] {
			if o != first && !o.Has(m) {
				continue outer
			}
		}
		if !fn(m) {
			return
		}
	}
}

// UnionSets returns the union of sets (nil ones are empty) as a new set,
// built as Redis builds it: an intset while it can be one.
func UnionSets(sets []*Set, lim SetLimits) *Set {
	res := NewSet()
	for _, st := range sets {
		if st == nil {
			continue
		}
		for m := range st.All() {
			res.Add(m, lim)
		}
	}
	return res
}

// DiffSets returns the members of sets[0] in none of the others as a new
// set, choosing between Redis's two algorithms as it does: testing each
// member of the first set against the others (N*M), or copying the first
// and removing every member of the others (the sum of the sizes).
func DiffSets(sets []*Set, lim SetLimits) *Set {
	res := NewSet()
	first := sets[0]
	if first == nil || slices.Contains(sets[1:], first) {
		return res
	}
	var one, two int
	for _, st := range sets {
		if st != nil {
			one += first.Len()
			two += st.Len()
		}
	}
	if one/2 <= two {
		others := slices.Clone(sets[1:])
		slices.SortStableFunc(others, func(a, b *Set) int { return setLen(b) - setLen(a) })
	outer:
		for m := range first.All() {
			for _, o := range others {
				if o != nil && o.Has(m) {
					continue outer
				}
			}
			res.Add(m, lim)
		}
		return res
	}
	for m := range first.All() {
		res.Add(m, lim)
	}
	for _, st := range sets[1:] {
		if st == nil {
			continue
		}
		for m := range st.All() {
			res.Remove(m)
		}
		if res.Len() == 0 {
			break
		}
	}
	return res
}

func setLen(st *Set) int {
	if st == nil {
		return 0
	}
	return st.Len()
}
