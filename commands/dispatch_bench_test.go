package commands

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/limitkv/limitkv/cluster"
	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/resp"
)

// BenchmarkDispatch runs requests through dispatch as Serve does, without
// the network: lookup, admission, the shard lock, the handler, and what
// follows it (the command's timing and counters). It shows the cost of
// dispatch itself, which BenchmarkNetPath's round trips hide.
func BenchmarkDispatch(b *testing.B) {
	eng := engine.New(engine.Config{Databases: 1})
	srv := New(eng, NewConfig(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	cl := newTestClient(srv)
	w := resp.NewWriter(2)
	argv := func(s []string) [][]byte {
		out := make([][]byte, len(s))
		for i := range s {
			out[i] = []byte(s[i])
		}
		return out
	}
	for _, tc := range netPathCases {
		b.Run(tc.name, func(b *testing.B) {
			for _, s := range tc.setup {
				srv.request(cl, w, argv(s))
				w.Reset()
			}
			args := argv(tc.args)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				srv.request(cl, w, args)
				w.Reset()
			}
		})
	}
}

// BenchmarkDispatchCluster is BenchmarkDispatch on a node of a cluster
// that serves every slot, none of them migrating: the cost of routing
// each request by its keys' slot.
func BenchmarkDispatchCluster(b *testing.B) {
	eng := engine.New(engine.Config{Databases: 1, Slots: true})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := New(eng, NewConfig(), quiet)
	port := clusterPortPair(b)
	bus, err := cluster.NewBus(cluster.BusConfig{IP: "127.0.0.1", Port: uint16(port), NodeTimeout: 5000, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bus.Close() })
	srv.Cluster = bus
	cl := newTestClient(srv)
	w := resp.NewWriter(2)
	argv := func(s ...string) [][]byte {
		out := make([][]byte, len(s))
		for i := range s {
			out[i] = []byte(s[i])
		}
		return out
	}
	srv.request(cl, w, argv("CLUSTER", "ADDSLOTSRANGE", "0", "16383"))
	if got := string(w.Bytes()); got != "+OK\r\n" {
		b.Fatalf("CLUSTER ADDSLOTSRANGE: %q", got)
	}
	for i := 0; !bus.Routing().OK; i++ {
		if i == 1500 {
			b.Fatal("the cluster did not come up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, tc := range netPathCases {
		b.Run(tc.name, func(b *testing.B) {
			for _, s := range tc.setup {
				w.Reset()
				srv.request(cl, w, argv(s...))
			}
			args := argv(tc.args...)
			w.Reset()
			srv.request(cl, w, args)
			if out := w.Bytes(); len(out) == 0 || out[0] == '-' {
				b.Fatalf("%s: %q", tc.args, out)
			}
			w.Reset()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				srv.request(cl, w, args)
				w.Reset()
			}
		})
	}
}

// BenchmarkDispatchMaxmemory is BenchmarkDispatch's GET and SET with
// maxmemory set, under the limit: the cost of the check before every
// command (maxmemory.go), which BenchmarkDispatch does without.
func BenchmarkDispatchMaxmemory(b *testing.B) {
	eng := engine.New(engine.Config{Databases: 1})
	cfg := NewConfig()
	if err := cfg.Set([][2]string{{"maxmemory", "1gb"}, {"maxmemory-policy", "allkeys-lru"}}, true); err != nil {
		b.Fatal(err)
	}
	srv := New(eng, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	b.Cleanup(func() { srv.Cfg.Set([][2]string{{"maxmemory", "0"}}, false) })
	cl := newTestClient(srv)
	w := resp.NewWriter(2)
	for _, args := range [][]string{{"SET", "key", "value"}, {"GET", "key"}} {
		b.Run(args[0], func(b *testing.B) {
			argv := make([][]byte, len(args))
			for i := range args {
				argv[i] = []byte(args[i])
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				srv.request(cl, w, argv)
				w.Reset()
			}
		})
	}
}
