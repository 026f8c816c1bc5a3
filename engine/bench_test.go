package engine

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"
)

// BenchmarkKeyFootprint loads counters with a TTL, the shape of a
// fixed-window rate-limit key, and reports the memory each key costs:
// table slot, record and arena overhead, measured from the Go heap.
func BenchmarkKeyFootprint(b *testing.B) {
	const n = 1_000_000
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		e := New(Config{Databases: 1})
		key := make([]byte, 0, 32)
		for j := 0; j < n; j++ {
			key = strconv.AppendInt(append(key[:0], "rl:user:"...), int64(j), 10)
			e.ShardFor(key).SetInt(0, key, int64(j%100), 1_800_000_000_000)
		}
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/key")
		var used, slots int64
		for s := range e.shards {
			used += e.shards[s].arena.used
			slots += int64(len(e.shards[s].dbs[0].slots))
		}
		b.ReportMetric(float64(used)/n, "record-B/key")
		b.ReportMetric(float64(slots*8)/n, "table-B/key")
		runtime.KeepAlive(e)
	}
}

func benchKeys(n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("key:%08d", i))
	}
	return keys
}

func BenchmarkGet(b *testing.B) {
	e := New(Config{Databases: 1})
	keys := benchKeys(100_000)
	for _, k := range keys {
		e.ShardFor(k).SetString(0, k, []byte("value-of-some-length"), 0)
	}
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := keys[i%len(keys)]
		s := e.ShardFor(k)
		s.Lock()
		s.GetString(0, k, 1, buf)
		s.Unlock()
	}
}

func BenchmarkSet(b *testing.B) {
	e := New(Config{Databases: 1})
	keys := benchKeys(100_000)
	val := []byte("value-of-some-length")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := keys[i%len(keys)]
		s := e.ShardFor(k)
		s.Lock()
		s.SetString(0, k, val, 0)
		s.Unlock()
	}
}

func BenchmarkIncr(b *testing.B) {
	e := New(Config{Databases: 1})
	keys := benchKeys(100_000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := keys[i%len(keys)]
		s := e.ShardFor(k)
		s.Lock()
		s.IncrBy(0, k, 1, 1)
		s.Unlock()
	}
}
