package commands

import (
	"io"
	"log/slog"
	"testing"

	"limitkv/engine"
	"limitkv/resp"
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
