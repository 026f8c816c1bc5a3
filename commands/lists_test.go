package commands

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/resp"
)

// TestLMoveShards moves elements between keys chosen to live in the same
// shard and in different shards, with a destination that has just expired:
// looking it up deletes it, and creating it changes the shard, so the source
// entry must be found again before it is touched or deleted.
func TestLMoveShards(t *testing.T) {
	h := newHarness(t)
	eng := h.srv.Eng
	var same, apart []string
	for i := 0; same == nil || apart == nil; i++ {
		src, dst := fmt.Sprint("src", i), fmt.Sprint("dst", i)
		if eng.ShardFor([]byte(src)) == eng.ShardFor([]byte(dst)) {
			if same == nil {
				same = []string{src, dst}
			}
		} else if apart == nil {
			apart = []string{src, dst}
		}
	}
	for _, pair := range [][]string{same, apart} {
		src, dst := pair[0], pair[1]
		expect(t, h, ":2", "RPUSH", src, "1", "2")
		expect(t, h, ":1", "RPUSH", dst, "old")
		expect(t, h, ":1", "PEXPIRE", dst, "10")
		expect(t, h, `"1"`, "LMOVE", src, dst, "LEFT", "LEFT")
		expect(t, h, `["1", "old"]`, "LRANGE", dst, "0", "-1")
		expect(t, h, `["2"]`, "LRANGE", src, "0", "-1")
		h.clock.Advance(20)
		expect(t, h, `"2"`, "RPOPLPUSH", src, dst)
		expect(t, h, ":0", "EXISTS", src)
		expect(t, h, `["2"]`, "LRANGE", dst, "0", "-1")
		expect(t, h, ":-1", "PTTL", dst)
		expect(t, h, `"2"`, "LMOVE", dst, src, "RIGHT", "LEFT")
		expect(t, h, ":0", "EXISTS", dst)
		expect(t, h, `["2"]`, "LRANGE", src, "0", "-1")
		h.do("DEL", src)
	}
}

// TestLMoveWhileShardGrows empties a source list into a new destination in
// the same shard at every fill level of that shard up to a few hundred
// keys, so that creating the destination grows the shard's table at some
// step: the source must still be the key that gets deleted.
func TestLMoveWhileShardGrows(t *testing.T) {
	h := newHarness(t)
	eng := h.srv.Eng
	src := "src"
	shard := eng.ShardFor([]byte(src))
	i := 0
	for eng.ShardFor([]byte(fmt.Sprint("dst", i))) != shard {
		i++
	}
	dst := fmt.Sprint("dst", i)
	next := 0
	for fillers := 0; fillers < 300; fillers++ {
		expect(t, h, ":1", "RPUSH", src, "v")
		expect(t, h, `"v"`, "LMOVE", src, dst, "LEFT", "RIGHT")
		expect(t, h, ":0", "EXISTS", src)
		expect(t, h, `["v"]`, "LRANGE", dst, "0", "-1")
		expect(t, h, fmt.Sprintf(":%d", fillers+1), "DBSIZE")
		expect(t, h, ":1", "DEL", dst)
		// One more key in the same shard for the next round.
		for eng.ShardFor([]byte(fmt.Sprint("fill", next))) != shard {
			next++
		}
		expect(t, h, "+OK", "SET", fmt.Sprint("fill", next), "x")
		next++
	}
}

func expect(t *testing.T, h *harness, want string, args ...string) {
	t.Helper()
	if got := h.do(args...).String(); got != want {
		t.Fatalf("%q: got %s, want %s", args, got, want)
	}
}

// TestListHugeArguments checks that indexes and counts far beyond the list
// cost nothing: replies are sized by the list, not by the argument.
func TestListHugeArguments(t *testing.T) {
	h := newHarness(t)
	h.do("RPUSH", "l", "a", "b", "c")
	expect(t, h, `["a", "b", "c"]`, "LRANGE", "l", "0", "9999999999")
	expect(t, h, `["a", "b", "c"]`, "LRANGE", "l", "-9223372036854775808", "9223372036854775807")
	expect(t, h, "[:1]", "LPOS", "l", "b", "COUNT", "9223372036854775807", "MAXLEN", "9223372036854775807")
	expect(t, h, ":0", "LREM", "l", "9223372036854775807", "zz")
	expect(t, h, `["a", "b", "c"]`, "LPOP", "l", "9223372036854775807")
	expect(t, h, ":0", "EXISTS", "l")
}

// BenchmarkListCommands runs list handlers directly, as dispatch does
// under the key's lock, to show what a command costs beyond the engine.
// A login check (LINDEX, RPUSH, LTRIM on five timestamps) makes
// three small allocations: the sixth timestamp moves the list out of its
// inline array into a chunk, and LTRIM moves it back, which is what keeps
// every such list at 48 bytes between logins. LRANGE allocates nothing.
func BenchmarkListCommands(b *testing.B) {
	eng := engine.New(engine.Config{Databases: 1})
	srv := New(eng, NewConfig(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	w := resp.NewWriter(2)
	c := &Ctx{Srv: srv, W: w, Now: transcriptEpoch}
	run := func(args [][]byte) {
		c.Args = args
		c.Spec = srv.Table.Lookup(args[0])
		s := c.Shard(args[1])
		s.Lock()
		srv.cmd(c.Spec).run(c)
		s.Unlock()
		w.Reset()
	}
	key := []byte("1001")
	for i := 0; i < 5; i++ {
		run([][]byte{[]byte("RPUSH"), key, []byte(fmt.Sprint(1732123456789 + i))})
	}
	lindex := [][]byte{[]byte("LINDEX"), key, []byte("4")}
	rpush := [][]byte{[]byte("RPUSH"), key, []byte("1732130896789")}
	ltrim := [][]byte{[]byte("LTRIM"), key, []byte("0"), []byte("4")}
	lrange := [][]byte{[]byte("LRANGE"), key, []byte("0"), []byte("-1")}
	b.Run("login-check", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			run(lindex)
			run(rpush)
			run(ltrim)
		}
	})
	b.Run("lrange-all", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			run(lrange)
		}
	})
}
