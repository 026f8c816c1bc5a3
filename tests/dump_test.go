package tests

import (
	"bytes"
	"fmt"
	"math/rand"
	"sort"
	"strconv"
	"testing"
)

// dumpCase is one value built on redis-server, moved to limitkv with
// DUMP/RESTORE and back, and read on both.
type dumpCase struct {
	name  string
	build [][]string // commands that build key "k"
	read  []string   // a command whose reply is the value ("k" is the key)
	// same: the two servers' DUMP payloads must be equal byte for byte
	// (values whose layout does not depend on a hash table's order).
	same bool
}

func dumpCases() []dumpCase {
	rng := rand.New(rand.NewSource(16))
	randStr := func(n int, alphabet string) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.Intn(len(alphabet))]
		}
		return string(b)
	}
	binary := string(func() []byte { b := make([]byte, 256); rng.Read(b); return b }())
	push := func(cmd string, n int, f func(i int) string) [][]string {
		var cmds [][]string
		for i := 0; i < n; i += 500 {
			c := []string{cmd, "k"}
			for j := i; j < n && j < i+500; j++ {
				c = append(c, f(j))
			}
			cmds = append(cmds, c)
		}
		return cmds
	}
	pairs := func(cmd string, n int, a, b func(i int) string) [][]string {
		var cmds [][]string
		for i := 0; i < n; i += 500 {
			c := []string{cmd, "k"}
			for j := i; j < n && j < i+500; j++ {
				c = append(c, a(j), b(j))
			}
			cmds = append(cmds, c)
		}
		return cmds
	}
	mixed := func(i int) string {
		switch i % 6 {
		case 0:
			return strconv.Itoa(i)
		case 1:
			return strconv.Itoa(-i * 100003)
		case 2:
			return strconv.FormatInt(int64(i)<<45, 10)
		case 3:
			return ""
		case 4:
			return binary[:i%256]
		}
		return fmt.Sprintf("element:%d:%s", i, randStr(i%90, "abc"))
	}
	score := func(i int) string {
		switch i % 7 {
		case 0:
			return strconv.Itoa(i)
		case 1:
			return strconv.FormatFloat(rng.NormFloat64()*1e6, 'g', -1, 64)
		case 2:
			return "-inf"
		case 3:
			return "inf"
		case 4:
			return "1e300"
		case 5:
			return "0.1"
		}
		return strconv.FormatFloat(float64(i)/3, 'g', 17, 64)
	}
	member := func(i int) string { return fmt.Sprintf("m%d-%s", i, randStr(i%30, "xyz")) }
	fv := func(i int) string { return fmt.Sprintf("f%d", i) }
	str := func(s string) [][]string { return [][]string{{"SET", "k", s}} }
	return []dumpCase{
		{"string empty", str(""), []string{"GET", "k"}, true},
		{"string int", str("-123456"), []string{"GET", "k"}, true},
		{"string int64", str("9223372036854775807"), []string{"GET", "k"}, true},
		{"string binary", str(binary), []string{"GET", "k"}, true},
		{"string compressible", str(randStr(5000, "ab")), []string{"GET", "k"}, true},
		{"string random 100k", str(randStr(100000, "abcdefghijklmnopqrstuvwxyz0123456789")), []string{"GET", "k"}, true},
		{"string 2MB", str(randStr(2<<20, "abcd")), []string{"GET", "k"}, true},
		{"list small", push("RPUSH", 7, mixed), []string{"LRANGE", "k", "0", "-1"}, true},
		{"list 1000x100B", push("RPUSH", 1000, func(i int) string { return randStr(100, "0123456789") }), []string{"LRANGE", "k", "0", "-1"}, true},
		{"list mixed 20000", push("RPUSH", 20000, mixed), []string{"LRANGE", "k", "0", "-1"}, true},
		{"list big elements", push("RPUSH", 30, func(i int) string { return randStr(3000+i*400, "abcdefgh") }), []string{"LRANGE", "k", "0", "-1"}, true},
		// Built at the head, Redis's nodes split elsewhere than a push at
		// the tail would: the payloads differ, the values do not.
		{"list lpush 3000", push("LPUSH", 3000, mixed), []string{"LRANGE", "k", "0", "-1"}, false},
		{"hash small", pairs("HSET", 20, fv, mixed), []string{"HGETALL", "k"}, true},
		{"hash 128", pairs("HSET", 128, fv, mixed), []string{"HGETALL", "k"}, true},
		{"hash 129", pairs("HSET", 129, fv, mixed), []string{"HGETALL", "k"}, false},
		{"hash long value", pairs("HSET", 3, fv, func(i int) string { return randStr(60+i, "q") }), []string{"HGETALL", "k"}, false},
		{"hash 5000", pairs("HSET", 5000, fv, mixed), []string{"HGETALL", "k"}, false},
		{"zset small", pairs("ZADD", 20, score, member), []string{"ZRANGE", "k", "0", "-1", "WITHSCORES"}, true},
		{"zset 128", pairs("ZADD", 128, score, member), []string{"ZRANGE", "k", "0", "-1", "WITHSCORES"}, true},
		{"zset 129", pairs("ZADD", 129, score, member), []string{"ZRANGE", "k", "0", "-1", "WITHSCORES"}, true},
		{"zset long member", pairs("ZADD", 3, score, func(i int) string { return randStr(65, "m") + strconv.Itoa(i) }), []string{"ZRANGE", "k", "0", "-1", "WITHSCORES"}, true},
		{"zset 5000", pairs("ZADD", 5000, score, member), []string{"ZRANGE", "k", "0", "-1", "WITHSCORES"}, true},
	}
}

// sortedPairs makes HGETALL's reply comparable: a hash table's order is
// its own.
func sortedPairs(s string, v []string) string {
	if len(v) < 2 {
		return s
	}
	var ps []string
	for i := 0; i+1 < len(v); i += 2 {
		ps = append(ps, strconv.Quote(v[i])+"="+strconv.Quote(v[i+1]))
	}
	sort.Strings(ps)
	return fmt.Sprint(ps)
}

func (rc *rawConn) value(t *testing.T, read []string) string {
	t.Helper()
	v := rc.do(read...)
	if v.Type == '-' {
		t.Fatalf("%v: %s", read, v.Str)
	}
	if read[0] == "HGETALL" {
		var fs []string
		for _, e := range v.Elems {
			fs = append(fs, string(e.Str))
		}
		return sortedPairs(v.String(), fs)
	}
	return v.String()
}

// TestDumpRestoreWithRedis: for every type and encoding size, a value
// dumped by redis-server restores on limitkv to the same value and
// encoding; limitkv's DUMP of it restores on redis-server to the same
// value again; and where the layout is deterministic, the two DUMPs are
// the same bytes.
func TestDumpRestoreWithRedis(t *testing.T) {
	rs := startRedis(t)
	kv := startLimitkv(t)
	r, k := dialRaw(t, rs.Addr), dialRaw(t, kv.Addr)
	for _, c := range dumpCases() {
		t.Run(c.name, func(t *testing.T) {
			for _, conn := range []*rawConn{r, k} {
				conn.do("FLUSHALL")
			}
			for _, cmd := range c.build {
				if v := r.do(cmd...); v.Type == '-' {
					t.Fatalf("%s: %s", cmd[0], v.Str)
				}
			}
			want := r.value(t, c.read)
			fromRedis := r.do("DUMP", "k")
			if fromRedis.Type != '$' || fromRedis.Null {
				t.Fatalf("redis DUMP: %s", fromRedis)
			}
			if v := k.do("RESTORE", "k", "0", string(fromRedis.Str)); v.String() != "+OK" {
				t.Fatalf("limitkv RESTORE of redis's payload: %s", v)
			}
			if got := k.value(t, c.read); got != want {
				t.Fatalf("limitkv restored another value:\n got %.300s\nwant %.300s", got, want)
			}
			if c.read[0] != "GET" && c.read[0] != "LRANGE" {
				re, ke := r.do("OBJECT", "ENCODING", "k"), k.do("OBJECT", "ENCODING", "k")
				if re.String() != ke.String() {
					t.Errorf("encoding on limitkv %s, on redis %s", ke, re)
				}
			}
			fromKV := k.do("DUMP", "k")
			if fromKV.Type != '$' || fromKV.Null {
				t.Fatalf("limitkv DUMP: %s", fromKV)
			}
			if c.same && !bytes.Equal(fromKV.Str, fromRedis.Str) {
				t.Errorf("DUMP payloads differ (%d bytes from redis, %d from limitkv)", len(fromRedis.Str), len(fromKV.Str))
			}
			if v := r.do("RESTORE", "k2", "0", string(fromKV.Str)); v.String() != "+OK" {
				t.Fatalf("redis RESTORE of limitkv's payload: %s", v)
			}
			read2 := append([]string{c.read[0], "k2"}, c.read[2:]...)
			if got := r.value(t, read2); got != want {
				t.Fatalf("redis restored another value from limitkv's payload")
			}
			// And limitkv takes its own payload back.
			if v := k.do("RESTORE", "k", "0", string(fromKV.Str), "REPLACE"); v.String() != "+OK" {
				t.Fatalf("limitkv RESTORE of its own payload: %s", v)
			}
			if got := k.value(t, c.read); got != want {
				t.Fatalf("limitkv's own round trip changed the value")
			}
		})
	}
}

// TestRestoreDamagedChangesNothing: every truncation and many corruptions
// of real payloads are refused by limitkv with Redis's errors, leave the
// key as it was, and never take the server down.
func TestRestoreDamagedChangesNothing(t *testing.T) {
	rs := startRedis(t)
	kv := startLimitkv(t)
	r, k := dialRaw(t, rs.Addr), dialRaw(t, kv.Addr)
	rng := rand.New(rand.NewSource(7))
	for _, c := range dumpCases()[:20] {
		r.do("FLUSHALL")
		for _, cmd := range c.build {
			r.do(cmd...)
		}
		p := r.do("DUMP", "k").Str
		k.do("SET", "k", "before")
		try := func(b []byte) {
			v := k.do("RESTORE", "k", "0", string(b), "REPLACE")
			switch v.String() {
			case "+OK":
				// A corruption the checksum cannot see: the value must
				// still be one Redis itself accepts.
				if rv := r.do("RESTORE", "probe", "0", string(b), "REPLACE"); rv.String() != "+OK" {
					t.Fatalf("%s: limitkv accepted a payload redis refuses (%s)", c.name, rv)
				}
				k.do("SET", "k", "before")
			case "-ERR DUMP payload version or checksum are wrong", "-ERR Bad data format":
				if got := k.do("GET", "k"); string(got.Str) != "before" {
					t.Fatalf("%s: a refused RESTORE changed the key: %s", c.name, got)
				}
			default:
				t.Fatalf("%s: RESTORE of a damaged payload: %s", c.name, v)
			}
		}
		for i := 0; i < 20; i++ {
			try(p[:rng.Intn(len(p))])
			d := bytes.Clone(p)
			d[rng.Intn(len(d))] ^= byte(1 + rng.Intn(255))
			try(d)
		}
	}
	if v := k.do("PING"); v.String() != "+PONG" {
		t.Fatalf("server after damaged payloads: %s", v)
	}
}
