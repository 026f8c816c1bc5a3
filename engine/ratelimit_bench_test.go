package engine

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/limitkv/limitkv/ratelimit"
)

// Decisions on an existing key must not allocate: the state is read from
// the record, decided with reusable scratch memory and written back in
// place. These benchmarks run the Shard operations the commands run under
// their shard lock (load, decide, store) and report allocations; the
// footprint benchmarks report what one key costs with a typical state.

func benchDecisionKeys(n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = []byte("rl:user:" + strconv.Itoa(i))
	}
	return keys
}

func BenchmarkDecideFixed(b *testing.B) {
	e := New(Config{Databases: 1})
	keys := benchDecisionKeys(10_000)
	rules := []ratelimit.Rule{{Limit: 1 << 40, Window: 60_000}}
	var sc LimitScratch
	now := int64(1_800_000_000_000)
	decide := func(k []byte) {
		s := e.ShardFor(k)
		s.Lock()
		_, err := s.Fixed(0, k, now, rules, ratelimit.FixedOptions{Cost: 1}, &sc)
		s.Unlock()
		if err != nil {
			b.Fatal(err)
		}
	}
	for _, k := range keys {
		decide(k)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		decide(keys[i%len(keys)])
	}
}

func BenchmarkDecideSlide100(b *testing.B) {
	e := New(Config{Databases: 1})
	keys := benchDecisionKeys(1000)
	rules := []ratelimit.Rule{{Limit: 100, Window: 60_000}}
	var sc LimitScratch
	now := int64(1_800_000_000_000)
	decide := func(k []byte) {
		s := e.ShardFor(k)
		s.Lock()
		_, err := s.Slide(0, k, now, rules, ratelimit.SlideOptions{Cost: 1}, &sc)
		s.Unlock()
		if err != nil {
			b.Fatal(err)
		}
	}
	// Fill every key with a full window of 100 requests 500 ms apart.
	for j := 0; j < 100; j++ {
		for _, k := range keys {
			decide(k)
		}
		now += 500
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%len(keys) == 0 {
			now += 600 // the oldest entry leaves, a new one fits
		}
		decide(keys[i%len(keys)])
	}
}

func BenchmarkDecideGCRA(b *testing.B) {
	e := New(Config{Databases: 1})
	keys := benchDecisionKeys(10_000)
	// One token per 953 ns, a burst of 2^30: every request is allowed and
	// stores a new TAT. (Count 2^30 per second, as before, is an emission
	// interval under 1 ns, which ratelimit.ErrZeroRate refuses before any decision.)
	g := ratelimit.GCRA{MaxBurst: 1 << 30, Count: 1 << 20, Period: 1, Quantity: 1}
	var sc LimitScratch
	now := int64(1_800_000_000_000)
	decide := func(k []byte) {
		s := e.ShardFor(k)
		s.Lock()
		_, err := s.Throttle(0, k, now, g, &sc)
		s.Unlock()
		if err != nil {
			b.Fatal(err)
		}
	}
	for _, k := range keys {
		decide(k)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		decide(keys[i%len(keys)])
	}
}

// footprint loads n keys through fill and reports the Go heap growth per
// key: slots, records and arena overhead together.
func footprint(b *testing.B, n int, fill func(e *Engine, k []byte)) {
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		e := New(Config{Databases: 1})
		key := make([]byte, 0, 32)
		for j := 0; j < n; j++ {
			key = strconv.AppendInt(append(key[:0], "rl:user:"...), int64(j), 10)
			fill(e, key)
		}
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "B/key")
		runtime.KeepAlive(e)
	}
}

func BenchmarkFootprintFixed(b *testing.B) {
	rules := []ratelimit.Rule{{Limit: 100, Window: 60_000}}
	var sc ratelimit.FixedScratch
	now := int64(1_800_000_000_000)
	footprint(b, 1_000_000, func(e *Engine, k []byte) {
		s := e.ShardFor(k)
		_, st, exp, _ := ratelimit.DecideFixed(nil, rules, now, ratelimit.FixedOptions{Cost: 1}, &sc, nil)
		s.SetLimitState(0, k, now, st, exp)
	})
}

func BenchmarkFootprintSlide100(b *testing.B) {
	rules := []ratelimit.Rule{{Limit: 100, Window: 60_000}}
	footprint(b, 100_000, func(e *Engine, k []byte) {
		s := e.ShardFor(k)
		now := int64(1_800_000_000_000)
		var st []byte
		for j := 0; j < 100; j++ {
			var exp int64
			_, st, exp, _ = ratelimit.DecideSlide(st, rules, now, ratelimit.SlideOptions{Cost: 1}, nil)
			s.SetLimitState(0, k, now, st, exp)
			now += 500
		}
	})
}
