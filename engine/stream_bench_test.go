package engine

import (
	"runtime"
	"strconv"
	"testing"
)

// BenchmarkStreamMemory adds 1,000,000 entries of one small pair ("f" and
// the entry's number) with "*" IDs, about 1000 per millisecond, and
// reports the bytes per entry by MemoryUsage and by the heap's growth.
//
// Redis 7.0.15 for the same data (redis-cli --pipe of XADD big * f <i>,
// i = 0..999999, arriving about 1000 per ms): used_memory grew by
// 15,715,256 bytes, 15.7 B/entry; MEMORY USAGE big reports 16,418,976
// (16.4 B/entry) with its default 5 samples and 19,416,748 (19.4 B/entry)
// with SAMPLES 0.
func BenchmarkStreamMemory(b *testing.B) {
	const entries = 1_000_000
	field := []byte("f")
	val := make([]byte, 0, 20)
	fv := [][]byte{field, nil}
	var s *Stream
	var heap int64
	for i := 0; i < b.N; i++ {
		s = nil
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s = NewStream()
		for j := 0; j < entries; j++ {
			val = strconv.AppendInt(val[:0], int64(j), 10)
			fv[1] = val
			if _, err := s.Add(StreamID{}, XAddAuto, fv, DefaultStreamNodeLimits, 1795932533019+int64(j/1000)); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap = int64(after.HeapAlloc) - int64(before.HeapAlloc)
		b.StartTimer()
	}
	b.ReportMetric(float64(s.MemoryUsage())/entries, "bytes/entry")
	b.ReportMetric(float64(heap)/entries, "heap-bytes/entry")
	b.ReportMetric(float64(s.NodeCount()), "nodes")
	runtime.KeepAlive(s)
}

// BenchmarkStreamAdd is the cost of one XADD of a small entry.
func BenchmarkStreamAdd(b *testing.B) {
	s := NewStream()
	fv := [][]byte{[]byte("sensor"), []byte("42"), []byte("site"), []byte("berlin")}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		s.Add(StreamID{}, XAddAuto, fv, DefaultStreamNodeLimits, int64(i/100))
	}
}

// BenchmarkStreamRange reads 100 entries from the middle of a stream of
// 100,000, forward, as XRANGE key start + COUNT 100 does.
func BenchmarkStreamRange(b *testing.B) {
	s := NewStream()
	fv := [][]byte{[]byte("sensor"), []byte("42"), []byte("site"), []byte("berlin")}
	for i := 0; i < 100_000; i++ {
		s.Add(StreamID{}, XAddAuto, fv, DefaultStreamNodeLimits, int64(i))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := StreamID{uint64(i % 99_000), 0}
		n := s.Range(start, MaxStreamID, 100, false, func(StreamID, [][]byte) bool { return true })
		if n != 100 {
			b.Fatal(n)
		}
	}
}
