package tests

import (
	"strconv"
	"strings"
	"testing"

	"github.com/limitkv/limitkv/resp"
)

// pipeline sends the commands made by cmd(i) for i in [from, to), 1000 at
// a time, and returns how many replies were errors and the first error.
func pipeline(c *rawConn, from, to int, cmd func(i int) [][]byte) (errs int, first string) {
	for i := from; i < to; i += 1000 {
		end := min(i+1000, to)
		var buf []byte
		for j := i; j < end; j++ {
			buf = resp.AppendCommand(buf, cmd(j)...)
		}
		c.send(buf)
		for j := i; j < end; j++ {
			if v := c.read(); v.Type == '-' {
				if errs == 0 {
					first = v.String()
				}
				errs++
			}
		}
	}
	return errs, first
}

// TestMaxmemoryNoEviction: past maxmemory, writes are refused with Redis's
// error and memory stays at the limit; a huge SETRANGE is refused before
// it allocates; reads and deletes go on.
func TestMaxmemoryNoEviction(t *testing.T) {
	const max = 8 << 20
	s := startLimitkv(t, "--maxmemory", "8mb", "--persistence", "no")
	c := dialRaw(t, s.Addr)
	val := []byte(strings.Repeat("v", 1000))
	// 30 MB of values into an 8 MB server.
	errs, first := pipeline(c, 0, 30_000, func(i int) [][]byte {
		return [][]byte{[]byte("SET"), []byte("key:" + strconv.Itoa(i)), val}
	})
	if errs == 0 || first != "-OOM command not allowed when used memory > 'maxmemory'." {
		t.Fatalf("30 MB of SETs under maxmemory 8mb: %d errors, first %q", errs, first)
	}
	used := infoField(t, c, "memory", "used_memory")
	if used > max+max/10 || used < max-max/10 {
		t.Errorf("used_memory %d after the flood, want within 10%% of %d", used, max)
	}
	if n := infoField(t, c, "stats", "evicted_keys"); n != 0 {
		t.Errorf("noeviction evicted %d keys", n)
	}
	for i := 1; i <= 4; i++ {
		if v := c.do("SETRANGE", "big"+strconv.Itoa(i), "536870911", "x"); !strings.HasPrefix(v.String(), "-OOM") {
			t.Fatalf("SETRANGE at 512 MB under maxmemory: %s", v)
		}
	}
	if rss := serverRSS(t, s); rss > 200<<20 {
		t.Fatalf("RSS %d MB after refused SETRANGEs", rss>>20)
	}
	if v := c.do("GET", "key:1"); v.Type != '$' || len(v.Str) != 1000 {
		t.Fatalf("GET over maxmemory: %s", v)
	}
	if v := c.do("DEL", "key:1"); v.String() != ":1" {
		t.Fatalf("DEL over maxmemory: %s", v)
	}
}

// TestMaxmemoryEviction: a flood of distinct rate-limit keys under
// volatile-ttl keeps used_memory at maxmemory with no error, and the keys
// evicted are gone from the snapshot too (not brought back by a restart).
func TestMaxmemoryEviction(t *testing.T) {
	const max = 8 << 20
	dir := t.TempDir()
	s := startLimitkvIn(t, dir, "--maxmemory", "8mb", "--maxmemory-policy", "volatile-ttl", "--snapshot-interval", "1h")
	c := dialRaw(t, s.Addr)
	errs, first := pipeline(c, 0, 300_000, func(i int) [][]byte {
		// ALIGN FIRST: each key's window, hence its expiry, starts with
		// its first request, so the older keys expire first. (Aligned on
		// the hour, every key would expire at the same moment.)
		return [][]byte{[]byte("RL.FIXED"), []byte("flood:" + strconv.Itoa(i)), []byte("100"), []byte("1h"), []byte("ALIGN"), []byte("FIRST")}
	})
	if errs != 0 {
		t.Fatalf("%d errors under volatile-ttl, first %s", errs, first)
	}
	used := infoField(t, c, "memory", "used_memory")
	evicted := infoField(t, c, "stats", "evicted_keys")
	keys := c.do("DBSIZE").Int
	t.Logf("300,000 keys into 8 MB: used_memory %d, %d evicted, %d kept", used, evicted, keys)
	if used > max+max/10 {
		t.Errorf("used_memory %d, more than 10%% over %d", used, max)
	}
	if evicted == 0 || keys+evicted != 300_000 {
		t.Errorf("%d keys kept and %d evicted of 300,000", keys, evicted)
	}
	// volatile-ttl: the keys nearest their expiry, the oldest, go first.
	// It samples, as Redis does, so it is a tendency, not an order: far
	// fewer of the first keys than of the last are kept.
	kept := func(from int) int {
		n := 0
		for i := from; i < from+2000; i++ {
			n += int(c.do("EXISTS", "flood:"+strconv.Itoa(i)).Int)
		}
		return n
	}
	old, young := kept(0), kept(298_000)
	t.Logf("kept %d of the first 2,000 keys, %d of the last 2,000", old, young)
	if old*4 > young {
		t.Errorf("kept %d of the first 2,000 keys and %d of the last 2,000: volatile-ttl did not prefer the keys nearest their expiry", old, young)
	}
	if v := c.do("SAVE"); v.String() != "+OK" {
		t.Fatal(v)
	}
	s.Stop()
	s2 := startLimitkvIn(t, dir)
	c2 := dialRaw(t, s2.Addr)
	if got := c2.do("DBSIZE").Int; got != keys {
		t.Errorf("after a restart %d keys, before it %d: evictions did not reach the snapshot", got, keys)
	}
}
