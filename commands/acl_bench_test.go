package commands

import (
	"io"
	"log/slog"
	"testing"

	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/resp"
)

// BenchmarkDispatchACL measures one request through execute (resolve,
// checks, ACL, shard lock, handler, reply) without the network, for the
// default user, whose check is one test, and for a user with key patterns
// and a command bitmap.
func BenchmarkDispatchACL(b *testing.B) {
	restricted := []string{"ACL", "SETUSER", "app", "on", "nopass", "~rl:*", "%R~ro:*", "-@all", "+@read", "+@ratelimit"}
	for _, tc := range []struct {
		name string
		user []string
		args []string
	}{
		{"GET/default", nil, []string{"GET", "rl:k"}},
		{"RL.SLIDE/default", nil, []string{"RL.SLIDE", "rl:user:42", "100", "60s"}},
		{"GET/restricted", restricted, []string{"GET", "rl:k"}},
		{"RL.SLIDE/restricted", restricted, []string{"RL.SLIDE", "rl:user:42", "100", "60s"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			eng := engine.New(engine.Config{Databases: 16})
			srv := New(eng, NewConfig(), slog.New(slog.NewTextHandler(io.Discard, nil)))
			cl := newTestClient(srv)
			cl.user.Store(srv.acl.def)
			w := resp.NewWriter(2)
			do := func(args []string) {
				bs := make([][]byte, len(args))
				for i, a := range args {
					bs[i] = []byte(a)
				}
				w.Reset()
				srv.execute(cl, w, bs, eng.Now())
			}
			do([]string{"SET", "rl:k", "v"})
			if tc.user != nil {
				do(tc.user)
				cl.user.Store(srv.acl.user("app"))
			}
			args := make([][]byte, len(tc.args))
			for i, a := range tc.args {
				args[i] = []byte(a)
			}
			now := eng.Now()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				w.Reset()
				srv.execute(cl, w, args, now)
			}
			if r := w.Bytes(); r[0] == '-' {
				b.Fatalf("%s", r)
			}
		})
	}
}
