package tests

import (
	"strconv"
	"testing"

	"github.com/limitkv/limitkv/resp"
)

// TestSetMemoryPerKey measures what a 100-member set costs per key, as
// INFO's used_memory grows over 10,000 of them, on limitkv and on
// redis-server, for a set of integers (intset on both) and a set of
// strings ("member:123"; hashtable on both), and holds limitkv to at most
// Redis's figure. Run with -v to see the figures:
//
//	go test ./tests -run TestSetMemoryPerKey -v
func TestSetMemoryPerKey(t *testing.T) {
	const keys, members = 10_000, 100
	redisSrv := startRedis(t)
	kv := startLimitkv(t, "--persistence", "no")
	kinds := []struct {
		name, encoding string
		member         func(key, j int) string
	}{
		// Integers of int32 width, as user or item ids are.
		{"integer", "intset", func(key, j int) string { return strconv.Itoa(100_000 + key*members + j) }},
		{"string", "hashtable", func(key, j int) string { return "member:" + strconv.Itoa(key*members+j) }},
	}
	for _, kind := range kinds {
		var perKey [2]float64
		for i, addr := range []string{redisSrv.Addr, kv.Addr} {
			c := dialRaw(t, addr)
			c.do("FLUSHALL")
			before := infoField(t, c, "memory", "used_memory")
			const batch = 500
			for k := 0; k < keys; k += batch {
				var req []byte
				for kk := k; kk < k+batch; kk++ {
					args := [][]byte{[]byte("SADD"), []byte("set:" + strconv.Itoa(kk))}
					for j := 0; j < members; j++ {
						args = append(args, []byte(kind.member(kk, j)))
					}
					req = resp.AppendCommand(req, args...)
				}
				c.send(req)
				for kk := k; kk < k+batch; kk++ {
					if v := c.read(); v.Int != members {
						t.Fatalf("SADD: %s", v)
					}
				}
			}
			after := infoField(t, c, "memory", "used_memory")
			if enc := c.do("OBJECT", "ENCODING", "set:0"); string(enc.Str) != kind.encoding {
				t.Errorf("%s: OBJECT ENCODING %s, want %s", addr, enc, kind.encoding)
			}
			perKey[i] = float64(after-before) / keys
			c.do("FLUSHALL")
		}
		t.Logf("100-member %s set, used_memory per key: redis-server %.0f B, limitkv %.0f B (%.2fx)",
			kind.name, perKey[0], perKey[1], perKey[1]/perKey[0])
		if perKey[1] > perKey[0] {
			t.Errorf("%s sets: limitkv takes %.0f B per key, more than Redis's %.0f B", kind.name, perKey[1], perKey[0])
		}
	}
}
