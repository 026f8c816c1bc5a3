package tests

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/limitkv/limitkv/rdb"
	"github.com/limitkv/limitkv/resp"
)

// Streams as whole values, black box: DUMP's bytes against redis-server's
// for the same stream, payloads both ways, a restart, a replica's full
// sync, and RESTORE's refusals against a Redis that checks payloads deeply.

// streamBuild returns commands that build stream key with explicit IDs,
// shaped by seed: entry counts across node boundaries, fields shared with
// the node's master entry or not, integer, short, long (LZF-compressible)
// and binary values, deletions, trimming, XSETID.
func streamBuild(key string, seed uint64) [][]string {
	rng := rand.New(rand.NewPCG(seed, 70))
	sizes := []int{1, 3, 99, 100, 101, 250, 1200}
	n := sizes[int(seed)%len(sizes)]
	value := func(i int) string {
		switch rng.IntN(6) {
		case 0:
			return strconv.Itoa(i)
		case 1:
			return strconv.FormatInt(-rng.Int64N(1<<40), 10)
		case 2:
			return strings.Repeat("ab", 10+rng.IntN(40))
		case 3:
			b := make([]byte, rng.IntN(30))
			for j := range b {
				b[j] = byte(rng.IntN(256))
			}
			return string(b)
		case 4:
			return ""
		}
		return fmt.Sprintf("value-%d", i)
	}
	var cmds [][]string
	var ids []string
	ms, seq := uint64(1_700_000_000_000+seed*1000), uint64(0)
	for i := 0; i < n; i++ {
		if rng.IntN(3) == 0 {
			seq++
		} else {
			ms += uint64(1 + rng.IntN(5000))
			seq = 0
		}
		id := fmt.Sprintf("%d-%d", ms, seq)
		ids = append(ids, id)
		c := []string{"XADD", key, id}
		switch rng.IntN(10) {
		case 0: // fields of its own
			for f := rng.IntN(4); f >= 0; f-- {
				c = append(c, fmt.Sprintf("field%d", rng.IntN(9)), value(i))
			}
		case 1: // the master's fields in another order
			c = append(c, "ts", value(i), "sensor", value(i))
		default:
			c = append(c, "sensor", value(i), "ts", value(i))
		}
		cmds = append(cmds, c)
	}
	for i := 0; i < n/7; i++ {
		cmds = append(cmds, []string{"XDEL", key, ids[rng.IntN(n)]})
	}
	if n > 10 {
		switch seed % 3 {
		case 0:
			cmds = append(cmds, []string{"XTRIM", key, "MAXLEN", "~", strconv.Itoa(n / 2)})
		case 1:
			cmds = append(cmds, []string{"XTRIM", key, "MINID", ids[n/3]})
		case 2:
			cmds = append(cmds, []string{"XSETID", key, fmt.Sprintf("%d-0", ms+10), "ENTRIESADDED", strconv.Itoa(n + 40), "MAXDELETEDID", ids[n-2]})
		}
	}
	return cmds
}

// streamGroups returns commands that give key consumer groups, pending
// entries, acknowledgements, claims and an idle consumer.
func streamGroups(key string) [][]string {
	return [][]string{
		{"XGROUP", "CREATE", key, "readers", "0"},
		{"XGROUP", "CREATE", key, "12345", "$"},
		{"XGROUP", "CREATE", key, "late", "0", "ENTRIESREAD", "0"},
		{"XREADGROUP", "GROUP", "readers", "alice", "COUNT", "20", "STREAMS", key, ">"},
		{"XREADGROUP", "GROUP", "readers", "a-consumer-with-a-name-long-enough-to-compress-compress", "COUNT", "7", "STREAMS", key, ">"},
		{"XREADGROUP", "GROUP", "late", "7", "COUNT", "3", "STREAMS", key, ">"},
		{"XGROUP", "CREATECONSUMER", key, "12345", "idle"},
	}
}

// runBoth sends each command to both servers and fails on different
// replies.
func runBoth(t *testing.T, a, b *rawConn, cmds [][]string) {
	t.Helper()
	for _, c := range cmds {
		va, vb := a.do(c...), b.do(c...)
		if va.String() != vb.String() {
			t.Fatalf("%.80q: redis %.200s, limitkv %.200s", c, va, vb)
		}
	}
}

func streamDo(t *testing.T, c *rawConn, args ...string) resp.Value {
	t.Helper()
	v := c.do(args...)
	if v.Type == '-' {
		t.Fatalf("%.80q: %s", args, v)
	}
	return v
}

// maskTimes replaces every integer that is a time in ms (delivery and seen
// times) in a reply.
func maskTimes(v resp.Value) resp.Value {
	if v.Type == ':' && v.Int > 1_000_000_000_000 {
		v.Int = -7
	}
	for i := range v.Elems {
		v.Elems[i] = maskTimes(v.Elems[i])
	}
	return v
}

// TestStreamDumpMatchesRedis: the same stream built on both servers has
// the same DUMP payload, byte for byte; with groups, whose times differ,
// each side's payload restored on the other gives the same stream; and a
// round trip Redis -> limitkv -> Redis keeps the stream exactly.
func TestStreamDumpMatchesRedis(t *testing.T) {
	rs, kv := startRedis(t), startLimitkv(t)
	r, k := dialRaw(t, rs.Addr), dialRaw(t, kv.Addr)
	limits := [][2]string{{"100", "4096"}, {"3", "0"}, {"0", "300"}, {"100", "4096"}, {"17", "1000"}, {"100", "4096"}, {"100", "4096"}}
	for seed := uint64(0); seed < 14; seed++ {
		key := "s" + strconv.FormatUint(seed, 10)
		lim := limits[seed%uint64(len(limits))]
		runBoth(t, r, k, [][]string{
			{"CONFIG", "SET", "stream-node-max-entries", lim[0]},
			{"CONFIG", "SET", "stream-node-max-bytes", lim[1]},
		})
		runBoth(t, r, k, streamBuild(key, seed))
		dr, dk := streamDo(t, r, "DUMP", key), streamDo(t, k, "DUMP", key)
		if !bytes.Equal(dr.Str, dk.Str) {
			t.Fatalf("%s: DUMP differs (%d bytes from Redis, %d from limitkv)\nredis   %q\nlimitkv %q", key, len(dr.Str), len(dk.Str), dr.Str, dk.Str)
		}
		info := streamDo(t, k, "XINFO", "STREAM", key)
		t.Logf("%s: %d entries in %d nodes, DUMP of %d bytes equal to Redis's", key, info.Elems[1].Int, info.Elems[3].Int, len(dk.Str))

		runBoth(t, r, k, streamGroups(key))
		// limitkv's payload on Redis: the same stream as Redis's own,
		// times aside, and Redis writes it back in the same bytes.
		dk = streamDo(t, k, "DUMP", key)
		streamDo(t, r, "RESTORE", key+":kv", "0", string(dk.Str))
		if back := streamDo(t, r, "DUMP", key+":kv"); !bytes.Equal(back.Str, dk.Str) {
			t.Fatalf("%s: Redis re-dumps limitkv's payload differently", key)
		}
		want := maskTimes(streamDo(t, r, "XINFO", "STREAM", key, "FULL")).String()
		if got := maskTimes(streamDo(t, r, "XINFO", "STREAM", key+":kv", "FULL")).String(); got != want {
			t.Fatalf("%s: limitkv's stream on Redis\n%.2000s\nwant\n%.2000s", key, got, want)
		}
		// Redis's payload on limitkv, and back: every time kept.
		dr = streamDo(t, r, "DUMP", key)
		streamDo(t, k, "RESTORE", key+":r", "0", string(dr.Str))
		back := streamDo(t, k, "DUMP", key+":r")
		if !bytes.Equal(back.Str, dr.Str) {
			t.Fatalf("%s: limitkv re-dumps Redis's payload differently", key)
		}
		streamDo(t, r, "RESTORE", key+":rt", "0", string(back.Str))
		for _, read := range [][]string{{"XINFO", "STREAM", "%s", "FULL"}, {"XRANGE", "%s", "-", "+"}, {"XLEN", "%s"}} {
			orig := streamDo(t, r, withKey(read, key)...).String()
			if got := streamDo(t, r, withKey(read, key+":rt")...).String(); got != orig {
				t.Fatalf("%s: %v after the round trip\n%.2000s\nwant\n%.2000s", key, read, got, orig)
			}
			if got := streamDo(t, k, withKey(read, key+":r")...).String(); got != orig {
				t.Fatalf("%s: %v on limitkv\n%.2000s\nwant\n%.2000s", key, read, got, orig)
			}
		}
	}
}

func withKey(read []string, key string) []string {
	out := make([]string, len(read))
	for i, a := range read {
		out[i] = strings.ReplaceAll(a, "%s", key)
	}
	return out
}

// streamFixture fills a limitkv with streams of every kind: built there
// with XADD and groups, restored from redis-server's payloads, empty, with
// a TTL, in another database. It returns the keys to compare (db, key).
func streamFixture(t *testing.T, c *rawConn) [][2]string {
	t.Helper()
	rs := startRedis(t)
	r := dialRaw(t, rs.Addr)
	var keys [][2]string
	for seed := uint64(3); seed < 7; seed++ {
		key := "local" + strconv.FormatUint(seed, 10)
		for _, cmd := range append(streamBuild(key, seed), streamGroups(key)...) {
			streamDo(t, c, cmd...)
		}
		keys = append(keys, [2]string{"0", key})
		// The same from Redis, by its payload.
		rkey := "redis" + strconv.FormatUint(seed, 10)
		for _, cmd := range append(streamBuild(rkey, seed), streamGroups(rkey)...) {
			streamDo(t, r, cmd...)
		}
		streamDo(t, c, "RESTORE", rkey, "0", string(streamDo(t, r, "DUMP", rkey).Str))
		keys = append(keys, [2]string{"0", rkey})
	}
	streamDo(t, c, "XADD", "empty", "MAXLEN", "0", "5-5", "f", "v")
	streamDo(t, c, "XGROUP", "CREATE", "empty", "g", "$")
	streamDo(t, c, "COPY", "local4", "ttl")
	streamDo(t, c, "PEXPIREAT", "ttl", "4102444800000")
	streamDo(t, c, "COPY", "redis5", "other", "DB", "5")
	keys = append(keys, [2]string{"0", "empty"}, [2]string{"0", "ttl"}, [2]string{"5", "other"})
	return keys
}

// streamState reads what must survive of each key: its payload (times
// included), its expiry, and the stream as XINFO STREAM FULL shows it.
func streamState(t *testing.T, c *rawConn, keys [][2]string) []string {
	t.Helper()
	var out []string
	for _, k := range keys {
		streamDo(t, c, "SELECT", k[0])
		out = append(out,
			fmt.Sprintf("%s/%s DUMP %q", k[0], k[1], streamDo(t, c, "DUMP", k[1]).Str),
			fmt.Sprintf("%s/%s PEXPIRETIME %s", k[0], k[1], streamDo(t, c, "PEXPIRETIME", k[1])),
			fmt.Sprintf("%s/%s TYPE %s", k[0], k[1], streamDo(t, c, "TYPE", k[1])),
			fmt.Sprintf("%s/%s XINFO %s", k[0], k[1], streamDo(t, c, "XINFO", "STREAM", k[1], "FULL")))
	}
	streamDo(t, c, "SELECT", "0")
	return out
}

func sameStreams(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d readings, want %d", what, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s:\n%.1500s\nwant\n%.1500s", what, got[i], want[i])
		}
	}
}

// TestStreamRestartKeepsStreams: a clean shutdown and restart (the Pebble
// snapshot) keep every stream whole: nodes, metadata, groups, pending
// entries with their times, consumers, expiries, databases.
func TestStreamRestartKeepsStreams(t *testing.T) {
	dir := t.TempDir()
	s := startLimitkvIn(t, dir, "--snapshot-interval", "1h")
	c := dialRaw(t, s.Addr)
	keys := streamFixture(t, c)
	before := streamState(t, c, keys)
	scan := streamDo(t, c, "SCAN", "0", "TYPE", "stream", "COUNT", "1000")
	s.Stop()
	if !strings.Contains(s.Output(), "limitkv stopped") {
		t.Fatalf("unclean stop:\n%s", s.Output())
	}
	s2 := startLimitkvIn(t, dir)
	c2 := dialRaw(t, s2.Addr)
	sameStreams(t, "after a restart", streamState(t, c2, keys), before)
	if got := streamDo(t, c2, "SCAN", "0", "TYPE", "stream", "COUNT", "1000"); len(got.Elems[1].Elems) != len(scan.Elems[1].Elems) {
		t.Fatalf("SCAN TYPE stream after a restart: %s, before %s", got, scan)
	}
	if enc := streamDo(t, c2, "OBJECT", "ENCODING", "local6"); string(enc.Str) != "stream" {
		t.Fatalf("OBJECT ENCODING of a stream: %s", enc)
	}
	if n := streamDo(t, c2, "MEMORY", "USAGE", "local6").Int; n < 20_000 {
		t.Fatalf("MEMORY USAGE of a stream of some 600 entries: %d", n)
	}
	// The restarted stream takes new entries and deliveries.
	streamDo(t, c2, "XADD", "local5", "*", "after", "restart")
	streamDo(t, c2, "XREADGROUP", "GROUP", "readers", "carol", "STREAMS", "local5", ">")
}

// TestStreamReplicaFullSync: a replica's full sync copies streams whole,
// and streams restored on the master afterwards reach it too.
func TestStreamReplicaFullSync(t *testing.T) {
	m := startMaster(t)
	mc := dialRaw(t, m.Addr)
	keys := streamFixture(t, mc)
	rp := startReplicaOf(t, m, "")
	master, replica := goRedis(t, m.Addr, 2), goRedis(t, rp.Addr, 2)
	waitInSync(t, master, replica)
	rc := dialRaw(t, rp.Addr)
	sameStreams(t, "the replica after its full sync", streamState(t, rc, keys), streamState(t, mc, keys))

	streamDo(t, mc, "RESTORE", "restored", "0", string(streamDo(t, mc, "DUMP", "redis3").Str))
	streamDo(t, mc, "XADD", "local3", "*", "after", "sync")
	first := streamDo(t, mc, "XRANGE", "redis6", "-", "+", "COUNT", "1").Elems[0].Elems[0].Str
	streamDo(t, mc, "XDEL", "redis6", string(first))
	keys = append(keys, [2]string{"0", "restored"})
	waitInSync(t, master, replica)
	sameStreams(t, "the replica after more writes", streamState(t, rc, keys), streamState(t, mc, keys))
	if d := digestOf(t, master); d != digestOf(t, replica) {
		t.Fatalf("DEBUG DIGEST differs: master %s, replica %s", d, digestOf(t, replica))
	}
	if _, err := replica.Do(context.Background(), "XADD", "local3", "*", "a", "b").Result(); err == nil {
		t.Fatal("a replica took a write")
	}
}

// TestStreamRestoreRefusalsMatchSanitizingRedis: every single-byte change
// to a node of a stream's payload (resealed, so that only the value is
// damaged) is refused by limitkv whenever a redis-server that checks
// payloads deeply (sanitize-dump-payload yes, the checks limitkv always
// makes) refuses it, and when limitkv takes one, Redis takes it too and
// both write back the same payload. limitkv refuses a few that Redis
// takes: a listpack header whose element count is wrong (Redis's stream
// check skips it), a one-byte backlen with its continuation bit set after
// a zero byte (Redis's backward decoding reads it as the same length), and
// a node whose first entry is not at its master ID; also (not made here) a
// length that is not the nodes' live entries, which Redis believes.
func TestStreamRestoreRefusalsMatchSanitizingRedis(t *testing.T) {
	rs, kv := startRedis(t, "--sanitize-dump-payload", "yes"), startLimitkv(t)
	r, k := dialRaw(t, rs.Addr), dialRaw(t, kv.Addr)
	runBoth(t, r, k, [][]string{
		{"CONFIG", "SET", "stream-node-max-entries", "3"},
		{"XADD", "s", "1-1", "f", "1", "g", "abc"},
		{"XADD", "s", "1-2", "f", "-7000", "g", "x"},
		{"XADD", "s", "2-0", "other", "y"},
		{"XADD", "s", "3-0", "f", "3", "g", "z"},
		{"XDEL", "s", "1-2"},
		{"XGROUP", "CREATE", "s", "g", "0"},
	})
	streamDo(t, r, "XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", "s", ">")
	payload := streamDo(t, r, "DUMP", "s").Str
	body, err := rdb.Open(payload)
	if err != nil {
		t.Fatal(err)
	}
	v, err := rdb.Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	lp := v.Stream.Nodes[0].LP
	refusedByBoth, onlyLimitkv := 0, 0
	for i := 0; i < len(lp); i++ {
		for _, delta := range []byte{1, 0x80, 0xff} {
			damaged := bytes.Clone(lp)
			damaged[i] += delta
			v.Stream.Nodes[0].LP = damaged
			p := string(rdb.Seal(rdb.AppendStream(nil, v.Stream)))
			vr, vk := r.do("RESTORE", "d", "0", p, "REPLACE"), k.do("RESTORE", "d", "0", p, "REPLACE")
			switch {
			case vr.String() == vk.String() && vr.Type == '-':
				refusedByBoth++
			case vr.String() == vk.String():
				if a, b := streamDo(t, r, "DUMP", "d").Str, streamDo(t, k, "DUMP", "d").Str; !bytes.Equal(a, b) {
					t.Fatalf("byte %d += %#x: taken by both, written back differently", i, delta)
				}
			case vk.Type == '-' && vr.Type != '-':
				onlyLimitkv++
			default:
				t.Fatalf("byte %d += %#x: Redis %s, limitkv %s", i, delta, vr, vk)
			}
		}
	}
	v.Stream.Nodes[0].LP = lp
	if refusedByBoth == 0 {
		t.Fatal("no damage was refused")
	}
	t.Logf("%d changes refused by both, %d by limitkv alone", refusedByBoth, onlyLimitkv)

	// A pending entry that no consumer owns: refused by both.
	g := &v.Stream.Groups[0]
	owned := g.Consumers[0].Pending
	g.Consumers[0].Pending = owned[:1]
	p := string(rdb.Seal(rdb.AppendStream(nil, v.Stream)))
	if vr, vk := r.do("RESTORE", "e", "0", p), k.do("RESTORE", "e", "0", p); vr.String() != "-ERR Bad data format" || vk.String() != vr.String() {
		t.Fatalf("a PEL entry without a consumer: Redis %s, limitkv %s", vr, vk)
	}
}
