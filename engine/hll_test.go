package engine

import (
	"math/rand"
	"strconv"
	"testing"
)

// registersOf reads every register of a HyperLogLog.
func registersOf(t *testing.T, h []byte) []uint8 {
	t.Helper()
	regs := make([]uint8, HLLRegisters)
	if err := HLLMerge(regs, h); err != nil {
		t.Fatal(err)
	}
	return regs
}

// TestHLLSparseMatchesDense adds the same elements to a sparse HyperLogLog
// (under several promotion limits) and to registers kept by hand: the
// registers must agree whichever encoding the sparse one ends in.
func TestHLLSparseMatchesDense(t *testing.T) {
	for _, limit := range []int{0, 20, 300, 3000, 1 << 20} {
		rng := rand.New(rand.NewSource(int64(limit)))
		h := NewHLL()
		want := make([]uint8, HLLRegisters)
		for i := 0; i < 3000; i++ {
			el := []byte(strconv.Itoa(rng.Intn(1 << 30)))
			idx, count := hllPatLen(el)
			changed := count > want[idx]
			want[idx] = max(want[idx], count)
			if got := hllAdd(&h, el, limit); got != map[bool]int{true: 1, false: 0}[changed] {
				t.Fatalf("limit %d, add %d: %d, register changed %v", limit, i, got, changed)
			}
			if h[4] == hllSparse && len(h) > max(limit, 18) {
				t.Fatalf("limit %d: sparse HLL of %d bytes", limit, len(h))
			}
			if i%100 == 0 || i < 100 {
				if !IsHLL(h) {
					t.Fatalf("limit %d: not an HLL after %d adds", limit, i)
				}
				got := registersOf(t, h)
				for r := range want {
					if got[r] != want[r] {
						t.Fatalf("limit %d, after %d adds: register %d is %d, want %d", limit, i, r, got[r], want[r])
					}
				}
			}
		}
		var histo [64]int
		if !hllHisto(h, &histo) {
			t.Fatalf("limit %d: histogram says corrupt", limit)
		}
		if got, want := hllEstimate(&histo), HLLCountRegisters(want); got != want {
			t.Fatalf("limit %d: estimate %d from the HLL, %d from the registers", limit, got, want)
		}
	}
}

// TestHLLCorruptInput feeds random sparse bodies to every reader and
// writer: they may refuse, never panic or run past the string.
func TestHLLCorruptInput(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 20000; i++ {
		h := append([]byte("HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80"), make([]byte, rng.Intn(12))...)
		for j := hllHdrSize; j < len(h); j++ {
			h[j] = byte(rng.Intn(256))
		}
		var histo [64]int
		hllHisto(h, &histo)
		HLLMerge(make([]uint8, HLLRegisters), h)
		hllSparseToDense(h)
		c := append([]byte(nil), h...)
		hllAdd(&c, []byte(strconv.Itoa(i)), 3000)
	}
}

// TestHLLEmpty: an empty HyperLogLog counts 0 in both encodings.
func TestHLLEmpty(t *testing.T) {
	h := NewHLL()
	var histo [64]int
	if !hllHisto(h, &histo) || hllEstimate(&histo) != 0 {
		t.Fatal("empty sparse HLL does not count 0")
	}
	d, ok := hllSparseToDense(h)
	histo = [64]int{}
	if !ok || len(d) != HLLDenseSize || !hllHisto(d, &histo) || hllEstimate(&histo) != 0 {
		t.Fatal("empty dense HLL does not count 0")
	}
}
