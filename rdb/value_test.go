package rdb

import (
	"bytes"
	"fmt"
	"iter"
	"math"
	"math/rand"
	"slices"
	"strconv"
	"testing"
)

func seq(xs [][]byte) iter.Seq[[]byte] { return slices.Values(xs) }

func pairs(xs [][]byte) iter.Seq2[[]byte, []byte] {
	return func(yield func([]byte, []byte) bool) {
		for i := 0; i+1 < len(xs); i += 2 {
			if !yield(xs[i], xs[i+1]) {
				return
			}
		}
	}
}

func scored(ms [][]byte, ss []float64, desc bool) iter.Seq2[[]byte, float64] {
	return func(yield func([]byte, float64) bool) {
		for i := range ms {
			j := i
			if desc {
				j = len(ms) - 1 - i
			}
			if !yield(ms[j], ss[j]) {
				return
			}
		}
	}
}

func elems(n int, f func(i int) string) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte(f(i))
	}
	return out
}

func roundTrip(t *testing.T, name string, b []byte) Value {
	t.Helper()
	p, err := Open(Seal(b))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	v, err := Decode(p)
	if err != nil {
		t.Fatalf("%s: Decode: %v", name, err)
	}
	return v
}

func TestValueRoundTrips(t *testing.T) {
	mixed := func(i int) string {
		switch i % 5 {
		case 0:
			return strconv.Itoa(i * 7919 * (1 - 2*(i%2)))
		case 1:
			return strconv.FormatInt(int64(i)<<40, 10)
		case 2:
			return ""
		case 3:
			return string(bytes.Repeat([]byte{byte(i)}, i%300))
		}
		return fmt.Sprintf("elem-%d", i)
	}
	for _, n := range []int{1, 5, 200, 5000} {
		xs := elems(n, mixed)
		v := roundTrip(t, "list", AppendList(nil, seq(xs)))
		if v.Kind != KindList || !slices.EqualFunc(v.Elems, xs, bytes.Equal) {
			t.Fatalf("list of %d came back as %d elements", n, len(v.Elems))
		}
		fv := elems(2*n, func(i int) string {
			if i%2 == 0 {
				return fmt.Sprintf("f%d", i)
			}
			return mixed(i)
		})
		for name, b := range map[string][]byte{
			"hash listpack": AppendHashListpack(nil, pairs(fv)),
			"hash":          AppendHash(nil, n, pairs(fv)),
		} {
			v := roundTrip(t, name, b)
			if v.Kind != KindHash || !slices.EqualFunc(v.Elems, fv, bytes.Equal) {
				t.Fatalf("%s of %d fields differs", name, n)
			}
		}
		ms := elems(n, func(i int) string { return fmt.Sprintf("m%06d", i) })
		ss := make([]float64, n)
		for i := range ss {
			ss[i] = []float64{float64(i), float64(i) + 0.5, -1e300, 3e-5, math.Inf(1)}[i%5]
		}
		v = roundTrip(t, "zset listpack", AppendZSetListpack(nil, scored(ms, ss, false)))
		if !slices.EqualFunc(v.Elems, ms, bytes.Equal) || !slices.Equal(v.Scores, ss) {
			t.Fatalf("zset listpack of %d differs", n)
		}
		v = roundTrip(t, "zset2", AppendZSet2(nil, n, scored(ms, ss, true)))
		slices.Reverse(v.Elems)
		slices.Reverse(v.Scores)
		if !slices.EqualFunc(v.Elems, ms, bytes.Equal) || !slices.Equal(v.Scores, ss) {
			t.Fatalf("zset2 of %d differs", n)
		}
		ints := make([]int64, n)
		for i := range ints {
			ints[i] = int64(i*i*i*i) - 5
		}
		v = roundTrip(t, "intset", AppendSetIntset(nil, ints))
		want := elems(n, func(i int) string { return strconv.FormatInt(ints[i], 10) })
		if v.Kind != KindSet || !slices.EqualFunc(v.Elems, want, bytes.Equal) {
			t.Fatalf("intset of %d differs", n)
		}
		v = roundTrip(t, "set", AppendSet(nil, ms))
		if v.Kind != KindSet || !slices.EqualFunc(v.Elems, ms, bytes.Equal) {
			t.Fatalf("set of %d differs", n)
		}
	}
}

func TestQuicklistNodes(t *testing.T) {
	// 1000 elements of 100 bytes: Redis puts 80 in a node (8 kB).
	xs := elems(1000, func(i int) string { return fmt.Sprintf("%0100d", i) + "x" })
	b := AppendList(nil, seq(xs))
	r := NewReader(b[1:])
	if n := r.Len(); n != 13 {
		t.Errorf("%d nodes, want 13", n)
	}
}

// TestDecodeRefusesDamage: no truncation or corruption of a valid value
// panics, and none that Decode accepts breaks the rules of values.
func TestDecodeRefusesDamage(t *testing.T) {
	xs := elems(40, func(i int) string { return fmt.Sprint(i*1000, "v") })
	vals := [][]byte{
		AppendList(nil, seq(xs)),
		AppendHashListpack(nil, pairs(xs)),
		AppendHash(nil, 20, pairs(xs)),
		AppendZSetListpack(nil, scored(xs, make([]float64, 40), false)),
		AppendSetIntset(nil, []int64{1, 2, 300000}),
		AppendStringValue(nil, bytes.Repeat([]byte("ab"), 50)),
	}
	rng := rand.New(rand.NewSource(2))
	for _, b := range vals {
		for cut := 0; cut < len(b); cut++ {
			Decode(b[:cut])
		}
		for i := 0; i < 3000; i++ {
			d := slices.Clone(b)
			for k := rng.Intn(3) + 1; k > 0; k-- {
				d[rng.Intn(len(d))] = byte(rng.Intn(256))
			}
			v, err := Decode(d)
			if err == nil && v.Kind != KindString && v.Len() == 0 {
				t.Fatal("an empty collection was accepted")
			}
		}
	}
	for name, b := range map[string][]byte{
		"empty list":       {TypeListQuicklist2, 0},
		"empty hash":       {TypeHash, 0},
		"dup hash field":   AppendHash(nil, 2, pairs(elems(4, func(i int) string { return "a" }))),
		"dup zset member":  AppendZSet2(nil, 2, scored(elems(2, func(int) string { return "m" }), []float64{1, 2}, true)),
		"nan score":        AppendZSet2(nil, 1, scored(elems(1, func(int) string { return "m" }), []float64{math.NaN()}, true)),
		"stream cut short": {TypeStreamListpacks, 0},
		"unknown":          {99},
		"huge count":       AppendLen([]byte{TypeList}, 1<<40),
	} {
		if _, err := Decode(b); err != ErrBadData {
			t.Errorf("%s: Decode = %v, want ErrBadData", name, err)
		}
	}
}
