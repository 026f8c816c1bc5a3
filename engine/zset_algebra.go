package engine

import (
	"math"
	"slices"
	"strings"
)

// The sorted-set algebra of ZUNION, ZINTER, ZDIFF, their STORE forms and
// ZINTERCARD, as Redis's zunionInterDiffGenericCommand computes it, on
// inputs the command has found under its locks: time linear in the
// inputs, and memory the result's.

// ZAggregate is AGGREGATE's choice.
type ZAggregate uint8

const (
	ZAggrSum ZAggregate = iota
	ZAggrMin
	ZAggrMax
)

// Apply aggregates v into *target.
func (a ZAggregate) Apply(target *float64, v float64) {
	switch a {
	case ZAggrSum:
		*target += v
		if math.IsNaN(*target) { // inf + -inf
			*target = 0
		}
	case ZAggrMin:
		if v < *target {
			*target = v
		}
	case ZAggrMax:
		if v > *target {
			*target = v
		}
	}
}

// ZSource is one input of an algebra command: a sorted set, a plain set
// whose members score 1 (as Redis takes them), or neither for a missing
// key.
type ZSource struct {
	Z      *ZSet // nil: no such key, or a set
	Set    *Set  // a plain set: each member scores 1
	Weight float64
}

// Len is the input's number of members.
func (s *ZSource) Len() int {
	switch {
	case s.Z != nil:
		return s.Z.Len()
	case s.Set != nil:
		return s.Set.Len()
	}
	return 0
}

// score finds m in the input.
func (s *ZSource) score(m []byte) (float64, bool) {
	switch {
	case s.Z != nil:
		return s.Z.Score(m)
	case s.Set != nil:
		return 1, s.Set.Has(m)
	}
	return 0, false
}

// each calls fn for every member with its (unweighted) score.
func (s *ZSource) each(buf []byte, fn func(m []byte, sc float64) bool) {
	switch {
	case s.Z != nil:
		s.Z.Range(0, s.Z.Len(), false, buf, fn)
	case s.Set != nil:
		for m := range s.Set.All() {
			if !fn(m, 1) {
				return
			}
		}
	}
}

// ZItem is one member of a computed result; its member is a string so
// that it outlives the inputs' callbacks.
type ZItem struct {
	M string
	S float64
}

// SortZItems puts items in a sorted set's order: by score, then member.
func SortZItems(items []ZItem) {
	slices.SortFunc(items, func(a, b ZItem) int {
		switch {
		case a.S < b.S:
			return -1
		case a.S > b.S:
			return 1
		}
		return strings.Compare(a.M, b.M)
	})
}

func weighted(w, sc float64) float64 {
	v := w * sc
	if math.IsNaN(v) { // 0 * inf
		return 0
	}
	return v
}

// ZUnion is the union of src, each member's weighted scores aggregated in
// the inputs' order (Redis's: smallest first); buf is scratch for the
// inputs' members.
func ZUnion(src []ZSource, aggr ZAggregate, buf []byte) []ZItem {
	var items []ZItem
	at := make(map[string]int, src[len(src)-1].Len())
	for i := range src {
		w := src[i].Weight
		src[i].each(buf, func(m []byte, sc float64) bool {
			v := weighted(w, sc)
			if k, found := at[string(m)]; found {
				aggr.Apply(&items[k].S, v)
			} else {
				ms := string(m)
				at[ms] = len(items)
				items = append(items, ZItem{ms, v})
			}
			return true
		})
	}
	return items
}

// interEach calls fn for each member of every input with its aggregated
// score, walking the smallest input (src[0]), until fn returns false.
func interEach(src []ZSource, aggr ZAggregate, buf []byte, fn func(m []byte, sc float64) bool) {
	if src[0].Len() == 0 {
		return
	}
	src[0].each(buf, func(m []byte, sc0 float64) bool {
		score := weighted(src[0].Weight, sc0)
		for j := 1; j < len(src); j++ {
			sc, found := src[j].score(m)
			if !found {
				return true
			}
			v := sc * src[j].Weight // Redis leaves a weighted NaN here
			aggr.Apply(&score, v)
		}
		return fn(m, score)
	})
}

// ZInter is the intersection of src (smallest first, as Redis orders
// them), each member's weighted scores aggregated; buf is scratch for the
// inputs' members.
func ZInter(src []ZSource, aggr ZAggregate, buf []byte) []ZItem {
	var items []ZItem
	interEach(src, aggr, buf, func(m []byte, sc float64) bool {
		items = append(items, ZItem{string(m), sc})
		return true
	})
	return items
}

// ZInterCard counts the intersection of src (smallest first), stopping
// at limit (0: no limit).
func ZInterCard(src []ZSource, limit int64, buf []byte) int64 {
	var n int64
	interEach(src, ZAggrSum, buf, func([]byte, float64) bool {
		n++
		return limit == 0 || n < limit
	})
	return n
}

// ZDiff is the members of src[0], with their scores, in none of the
// other inputs.
func ZDiff(src []ZSource, buf []byte) []ZItem {
	var items []ZItem
	for j := 1; j < len(src); j++ {
		if src[j].Z != nil && src[j].Z == src[0].Z || src[j].Set != nil && src[j].Set == src[0].Set {
			return nil // a set minus itself
		}
	}
	src[0].each(buf, func(m []byte, sc float64) bool {
		for j := 1; j < len(src); j++ {
			if _, found := src[j].score(m); found {
				return true
			}
		}
		items = append(items, ZItem{string(m), sc})
		return true
	})
	return items
}
