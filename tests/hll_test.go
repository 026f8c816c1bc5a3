package tests

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/limitkv/limitkv/resp"
)

// TestHLLMatchesRedis adds the same 100,000 elements to a HyperLogLog on
// limitkv and on redis-server and compares the stored bytes (sparse, then
// dense) and the counts along the way; then it carries HyperLogLogs from
// one server to the other with GET and SET and checks that they keep
// growing and merging identically on both.
func TestHLLMatchesRedis(t *testing.T) {
	rd := dialRaw(t, startRedis(t).Addr)
	kv := dialRaw(t, startLimitkv(t).Addr)
	both := func(args ...string) (resp.Value, resp.Value) {
		t.Helper()
		a, b := rd.do(args...), kv.do(args...)
		if a.Type != b.Type || !bytes.Equal(a.Str, b.Str) || a.Int != b.Int || a.Null != b.Null {
			t.Fatalf("%q: redis %c %d %.60q, limitkv %c %d %.60q", args, a.Type, a.Int, a.Str, b.Type, b.Int, b.Str)
		}
		return a, b
	}
	const total, batch = 100000, 250
	sawSparse, sawDense := false, false
	for i := 0; i < total; i += batch {
		args := []string{"PFADD", "h"}
		for j := i; j < i+batch; j++ {
			// Mixed lengths, so every tail length of the hash's blocks shows up.
			args = append(args, "el:"+strconv.Itoa(j)+string(bytes.Repeat([]byte{'x'}, j%13)))
		}
		both(args...)
		if i%(20*batch) == 0 || i < 20*batch {
			v, _ := both("GET", "h")
			if v.Str[4] == 1 {
				sawSparse = true
			} else {
				sawDense = true
			}
			both("PFCOUNT", "h")
			both("GET", "h") // the cached count written back
		}
	}
	if !sawSparse || !sawDense {
		t.Fatalf("sparse seen %v, dense seen %v", sawSparse, sawDense)
	}
	n, _ := both("PFCOUNT", "h")
	if n.Int < total*97/100 || n.Int > total*103/100 {
		t.Fatalf("PFCOUNT of %d elements: %d", total, n.Int)
	}

	// A sparse one and a dense one, carried each way with GET and SET.
	both("PFADD", "s", "a", "b", "c")
	for _, key := range []string{"s", "h"} {
		fromRedis := string(rd.do("GET", key).Str)
		fromKV := string(kv.do("GET", key).Str)
		// Both servers get both copies: Redis works on limitkv's bytes
		// and limitkv on Redis's, and they must still agree.
		for k, v := range map[string]string{key + ":fromkv": fromKV, key + ":fromredis": fromRedis} {
			both("SET", k, v)
			both("PFCOUNT", k)
			both("PFADD", k, "new1", "new2", "new3", "x:"+k)
			both("GET", k)
			both("PFCOUNT", k)
		}
	}
	// Copies made across: each server counts the other's bytes as its own.
	if a, b := rd.do("GET", "h").Str, kv.do("GET", "h").Str; !bytes.Equal(a, b) {
		t.Fatal("dense HyperLogLogs differ")
	}
	kv.do("SET", "cross", string(rd.do("GET", "s").Str))
	if got, want := kv.do("PFCOUNT", "cross").Int, rd.do("PFCOUNT", "s").Int; got != want {
		t.Fatalf("PFCOUNT of Redis's HLL on limitkv: %d, Redis: %d", got, want)
	}

	both("PFMERGE", "m", "s", "h", "s:fromkv")
	both("GET", "m")
	both("PFCOUNT", "m")
	both("PFMERGE", "m2", "s", "s:fromredis")
	both("GET", "m2")
	both("PFCOUNT", "h", "s", "m2")
}
