package engine

import (
	"iter"
	"math/rand/v2"
)

// The draws of ZRANDMEMBER and HRANDFIELD, which share Redis's rules for
// random members.

// CompactPairs copies the pairs of a compact set or hash (a few hundred
// at most, as the encoding's limits allow) for repeated random draws.
func CompactPairs[V any](all iter.Seq2[[]byte, V]) ([][]byte, []V) {
	var ks [][]byte
	var vs []V
	for k, v := range all {
		ks = append(ks, append([]byte(nil), k...))
		vs = append(vs, v)
	}
	return ks, vs
}

// RandRanks picks count distinct numbers below n (count < n) in random
// order: a partial Fisher-Yates over a map, so its cost follows count,
// not n.
func RandRanks(n, count int) []int {
	out := make([]int, count)
	swapped := make(map[int]int, count)
	for i := 0; i < count; i++ {
		j := i + rand.IntN(n-i)
		vj, ok := swapped[j]
		if !ok {
			vj = j
		}
		vi, ok := swapped[i]
		if !ok {
			vi = i
		}
		swapped[j] = vi
		out[i] = vj
	}
	return out
}
