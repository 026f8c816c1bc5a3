package rdb

import (
	"fmt"
	"testing"
)

func BenchmarkAppendList(b *testing.B) {
	xs := elems(100000, func(i int) string { return fmt.Sprintf("element-number-%d", i) })
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		AppendList(nil, seq(xs))
	}
}

func BenchmarkAppendZSet2(b *testing.B) {
	ms := elems(100000, func(i int) string { return fmt.Sprintf("member-%d", i) })
	ss := make([]float64, len(ms))
	for i := range ss {
		ss[i] = float64(i)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		AppendZSet2(nil, len(ms), scored(ms, ss, true))
	}
}
