package commands

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/resp"
)

// BenchmarkDispatchKeys is BenchmarkDispatch over 100,000 keys drawn at
// random, as redis-benchmark -r 100000 draws them: the engine's cache
// misses are in it, as they are in a server under load. It compares the
// rate limits' cost with a counter's (the decision should cost what INCR
// does) without the network's noise.
func BenchmarkDispatchKeys(b *testing.B) {
	const keys = 100000
	cases := []struct {
		name string
		args func(k string) []string
	}{
		{"GET", func(k string) []string { return []string{"GET", "key:" + k} }},
		{"SET", func(k string) []string { return []string{"SET", "key:" + k, "xxx"} }},
		{"INCR", func(k string) []string { return []string{"INCR", "counter:" + k} }},
		{"RL.FIXED", func(k string) []string { return []string{"RL.FIXED", "fixed:" + k, "100", "60s"} }},
		{"RL.SLIDE", func(k string) []string { return []string{"RL.SLIDE", "slide:" + k, "100", "60s"} }},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			eng := engine.New(engine.Config{Databases: 1})
			srv := New(eng, NewConfig(), slog.New(slog.NewTextHandler(io.Discard, nil)))
			cl := newTestClient(srv)
			w := resp.NewWriter(2)
			reqs := make([][][]byte, keys)
			x := uint32(2463534242)
			for i := range reqs {
				x ^= x << 13
				x ^= x >> 17
				x ^= x << 5
				s := tc.args(fmt.Sprintf("%012d", x%keys))
				reqs[i] = make([][]byte, len(s))
				for j := range s {
					reqs[i][j] = []byte(s[j])
				}
			}
			for _, r := range reqs {
				srv.request(cl, w, r)
				w.Reset()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				srv.request(cl, w, reqs[i%keys])
				w.Reset()
			}
		})
	}
}

// TestWallClock: the Unix time made from monotonic readings stays within
// a millisecond of the wall clock's, across refreshes.
func TestWallClock(t *testing.T) {
	var w wallClock
	for i := 0; i < 2000; i++ {
		before := time.Now().UnixMilli()
		got := w.unixMilli(monoNow())
		after := time.Now().UnixMilli()
		if got < before-1 || got > after+1 {
			t.Fatalf("reading %d: %d, the wall clock read %d then %d", i, got, before, after)
		}
		if i%500 == 0 {
			time.Sleep(2 * time.Millisecond) // past a refresh
		}
	}
	// A reading from before the base (another loop's, taken earlier) is
	// the wall clock's at that reading, not the base's.
	before := time.Now().UnixMilli()
	early := monoNow()
	after := time.Now().UnixMilli()
	time.Sleep(2 * time.Millisecond) // past a refresh
	w.unixMilli(monoNow())
	if got := w.unixMilli(early); got < before-1 || got > after+1 {
		t.Fatalf("early reading: %d, the wall clock read %d then %d", got, before, after)
	}
}
