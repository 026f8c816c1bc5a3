package tests

import (
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/limitkv/limitkv/resp"
)

// Consumer groups on a replica: XGROUP and XACK travel as they are; XCLAIM
// and XAUTOCLAIM, whose results depend on the clock, travel as Redis 7.0
// propagates them, an XCLAIM ... TIME RETRYCOUNT FORCE JUSTID LASTID per
// pending entry claimed or dropped (and XGROUP SETID for a LASTID that
// moved the group alone). The replica must end with the same groups, the
// same pending entries with the same delivery times and counts, and the
// same consumers; only seen-times may differ, as they do between Redis's
// master and replica, since a consumer is created on each by its clock.
func TestStreamGroupsReplication(t *testing.T) {
	master := startMaster(t)
	replica := startReplicaOf(t, master, "")
	mc := redis.NewClient(&redis.Options{Addr: master.Addr})
	rc := redis.NewClient(&redis.Options{Addr: replica.Addr})
	defer mc.Close()
	defer rc.Close()
	waitInSync(t, mc, rc)

	m := dialRaw(t, master.Addr)
	do := func(args ...string) resp.Value {
		t.Helper()
		v := m.do(args...)
		if v.Type == '-' {
			t.Fatalf("%v: %s", args, v)
		}
		return v
	}
	for _, id := range []string{"1-0", "2-0", "3-0", "4-0", "5-0", "6-0", "7-0", "8-0"} {
		do("XADD", "s", id, "f", id)
	}
	do("XGROUP", "CREATE", "s", "g", "0")
	do("XGROUP", "CREATE", "s", "g2", "$", "ENTRIESREAD", "8")
	do("XGROUP", "CREATE", "s", "gone", "0")
	do("XGROUP", "CREATECONSUMER", "s", "g", "idle")
	do("XGROUP", "CREATECONSUMER", "s", "g", "leaving")
	do("XCLAIM", "s", "g", "alice", "0", "1-0", "2-0", "3-0", "4-0", "FORCE", "TIME", "1000", "RETRYCOUNT", "2", "JUSTID")
	// IDLE is relative to the master's clock: the replica gets the time.
	do("XCLAIM", "s", "g", "bob", "0", "5-0", "6-0", "FORCE", "IDLE", "3600000")
	do("XCLAIM", "s", "g", "leaving", "0", "8-0", "FORCE", "JUSTID")
	// Nothing pending to claim; LASTID alone moves the group.
	if v := do("XCLAIM", "s", "g", "carol", "0", "7-0", "LASTID", "6-0"); len(v.Elems) != 0 {
		t.Fatalf("XCLAIM of an entry not pending: %s", v)
	}
	do("XDEL", "s", "2-0", "5-0")
	// Claims 1-0, drops the deleted 2-0, claims 3-0: three XCLAIMs.
	v := do("XAUTOCLAIM", "s", "g", "carol", "60000", "0", "COUNT", "3")
	if got := v.String(); !strings.Contains(got, `"4-0"`) || !strings.Contains(got, `["2-0"]`) {
		t.Fatalf("XAUTOCLAIM: %s", got)
	}
	// A deleted entry XCLAIM drops: 5-0 leaves bob's PEL on both sides.
	do("XCLAIM", "s", "g", "dave", "0", "5-0", "6-0", "IDLE", "5000", "RETRYCOUNT", "9")
	do("XACK", "s", "g", "3-0", "9-9")
	do("XGROUP", "SETID", "s", "g2", "4-0")
	do("XGROUP", "DELCONSUMER", "s", "g", "leaving")
	do("XGROUP", "DESTROY", "s", "gone")
	do("XGROUP", "CREATE", "t", "g", "$", "MKSTREAM")
	do("XCLAIM", "s", "g2", "erin", "0", "7-0", "FORCE", "JUSTID")
	// A transaction's claims reach the replica in it.
	do("MULTI")
	do("XCLAIM", "s", "g2", "erin", "0", "7-0", "TIME", "4242", "JUSTID")
	do("XAUTOCLAIM", "s", "g2", "frank", "0", "0", "JUSTID")
	do("XACK", "s", "g", "1-0")
	if v := do("EXEC"); len(v.Elems) != 3 {
		t.Fatalf("EXEC: %s", v)
	}
	waitInSync(t, mc, rc)
	if got, want := m.do("XPENDING", "s", "g").String(), `[:2, "4-0", "6-0", [["alice", "1"], ["dave", "1"]]]`; got != want {
		t.Fatalf("XPENDING s g on the master: %s, want %s", got, want)
	}

	r := dialRaw(t, replica.Addr)
	for _, cmd := range [][]string{
		{"XINFO", "STREAM", "s", "FULL"},
		{"XINFO", "GROUPS", "s"},
		{"XINFO", "CONSUMERS", "s", "g"},
		{"XINFO", "CONSUMERS", "s", "g2"},
		{"XPENDING", "s", "g"},
		{"XPENDING", "s", "g", "-", "+", "100"},
		{"XPENDING", "s", "g2", "-", "+", "100"},
		{"XINFO", "STREAM", "t", "FULL"},
	} {
		want, got := maskClock(m.do(cmd...), cmd[0] == "XPENDING").String(), maskClock(r.do(cmd...), cmd[0] == "XPENDING").String()
		if want != got {
			t.Errorf("%v:\n master: %s\nreplica: %s", cmd, want, got)
		}
	}
}

// TestStreamGroupsPropagation reads, at a replica's end of the link, what
// the group commands send: the XCLAIMs (with the NACK as it was, for a
// pending entry dropped because the stream lost it), XGROUP SETID for a
// LASTID that moved the group alone, XACK and XGROUP as they are; never
// XCLAIM's or XAUTOCLAIM's own words, nor the stream's whole value.
func TestStreamGroupsPropagation(t *testing.T) {
	kv := startLimitkv(t, "--persistence", "no")
	c := dialRaw(t, kv.Addr)
	do := func(args ...string) resp.Value {
		t.Helper()
		v := c.do(args...)
		if v.Type == '-' {
			t.Fatalf("%v: %s", args, v)
		}
		return v
	}
	for _, id := range []string{"1-0", "2-0", "3-0", "4-0", "5-0", "6-0"} {
		do("XADD", "s", id, "f", id)
	}
	do("XGROUP", "CREATE", "s", "g", "0")
	do("XCLAIM", "s", "g", "alice", "0", "1-0", "2-0", "3-0", "FORCE", "TIME", "1000", "RETRYCOUNT", "2", "JUSTID")
	do("XDEL", "s", "2-0")

	link := openReplicaLink(t, kv.Addr)
	readUntil, stream := link.readUntil, &link.stream
	do("SET", "marker-1", "x")
	readUntil("marker-1")
	from := stream.Len()

	do("XCLAIM", "s", "g", "bob", "0", "1-0", "TIME", "5000")
	do("XCLAIM", "s", "g", "bob", "0", "9-0", "LASTID", "4-0")
	do("XAUTOCLAIM", "s", "g", "carol", "0", "0", "COUNT", "10")
	do("XCLAIM", "s", "g", "bob", "100", "1-0") // idle too short: nothing
	do("XACK", "s", "g", "1-0")
	do("XGROUP", "CREATECONSUMER", "s", "g", "dave")
	// XAUTOCLAIM stamped its claims with the master's clock.
	claimedAt := ""
	group := field(field(do("XINFO", "STREAM", "s", "FULL"), "groups").Elems[0], "pending")
	for _, p := range group.Elems {
		if string(p.Elems[0].Str) == "3-0" {
			claimedAt = strconv.FormatInt(p.Elems[2].Int, 10)
		}
	}
	if claimedAt == "" {
		t.Fatalf("3-0 is not pending: %s", group)
	}
	do("SET", "marker-2", "x")
	readUntil("marker-2")
	got := stream.String()[from:]
	// (The markers' SETs travel as LKV.SET, the states they left.)
	for _, bad := range []string{"XAUTOCLAIM", "LKV.SET\r\n$1\r\nS\r\n", "$3\r\n9-0\r\n"} {
		if strings.Contains(strings.ToUpper(got), bad) {
			t.Fatalf("%s reached the replica: %q", bad, got)
		}
	}
	cmd := func(args ...string) string {
		var bs [][]byte
		for _, a := range args {
			bs = append(bs, []byte(a))
		}
		return string(resp.AppendCommand(nil, bs...))
	}
	claim := func(consumer, id, time, count, lastID string) string {
		return cmd("XCLAIM", "s", "g", consumer, "0", id, "TIME", time, "RETRYCOUNT", count, "FORCE", "JUSTID", "LASTID", lastID)
	}
	want := []string{
		claim("bob", "1-0", "5000", "3", "0-0"),
		cmd("XGROUP", "SETID", "s", "g", "4-0", "ENTRIESREAD", "-1"),
		cmd("MULTI"),
		claim("carol", "1-0", claimedAt, "4", "4-0"),
		claim("alice", "2-0", "1000", "2", "4-0"),
		claim("carol", "3-0", claimedAt, "3", "4-0"),
		cmd("EXEC"),
		cmd("XACK", "s", "g", "1-0"),
		cmd("XGROUP", "CREATECONSUMER", "s", "g", "dave"),
	}
	at := 0
	for _, w := range want {
		i := strings.Index(got[at:], w)
		if i < 0 {
			t.Fatalf("%q not in the stream (in order) after the first %d bytes: %q", w, at, got)
		}
		at += i + len(w)
	}
}

// field is the value after name in a reply of alternating names and
// values (a RESP2 map).
func field(v resp.Value, name string) resp.Value {
	for i := 0; i+1 < len(v.Elems); i += 2 {
		if string(v.Elems[i].Str) == name {
			return v.Elems[i+1]
		}
	}
	return resp.Value{}
}

// TestStreamGroupsTimesAgainstRedis compares, with redis-server, what the
// differential file can only compare masked: the delivery times and counts
// of XINFO STREAM FULL after claims, once XCLAIM ... TIME stamped them
// again. Only seen-times and idle times, which each server takes from its
// own clock, are masked here.
func TestStreamGroupsTimesAgainstRedis(t *testing.T) {
	conns := [2]*rawConn{dialRaw(t, startRedis(t).Addr), dialRaw(t, startLimitkv(t).Addr)}
	script := [][]string{
		{"XADD", "s", "1-0", "f", "1"}, {"XADD", "s", "2-0", "f", "2"}, {"XADD", "s", "3-0", "f", "3"},
		{"XADD", "s", "4-0", "f", "4"}, {"XADD", "s", "5-0", "f", "5"}, {"XADD", "s", "6-0", "f", "6"},
		{"XGROUP", "CREATE", "s", "g", "0"},
		{"XCLAIM", "s", "g", "alice", "0", "1-0", "2-0", "3-0", "4-0", "FORCE", "TIME", "1000", "RETRYCOUNT", "2", "JUSTID"},
		{"XCLAIM", "s", "g", "bob", "0", "5-0", "6-0", "FORCE", "TIME", "2000", "JUSTID"},
		{"XDEL", "s", "2-0", "6-0"},
		{"XINFO", "STREAM", "s", "FULL"},
		{"XAUTOCLAIM", "s", "g", "carol", "0", "0", "COUNT", "2"},
		{"XCLAIM", "s", "g", "carol", "0", "1-0", "TIME", "3000", "JUSTID"},
		{"XINFO", "STREAM", "s", "FULL"},
		{"XAUTOCLAIM", "s", "g", "dave", "0", "(1-0", "JUSTID"},
		{"XCLAIM", "s", "g", "dave", "0", "3-0", "4-0", "5-0", "TIME", "4000", "JUSTID"},
		{"XINFO", "STREAM", "s", "FULL"},
		{"XCLAIM", "s", "g", "erin", "0", "3-0", "RETRYCOUNT", "9", "TIME", "4500"},
		{"XCLAIM", "s", "g", "erin", "0", "4-0", "TIME", "4600"},
		{"XCLAIM", "s", "g", "erin", "5000000000000000", "5-0"},
		{"XINFO", "STREAM", "s", "FULL"},
		{"XINFO", "STREAM", "s", "FULL", "COUNT", "1"},
		{"XPENDING", "s", "g"},
		{"XPENDING", "s", "g", "-", "+", "10"},
		{"XPENDING", "s", "g", "IDLE", "1000", "-", "+", "10", "erin"},
		{"XINFO", "GROUPS", "s"},
		{"XINFO", "CONSUMERS", "s", "g"},
		{"XACK", "s", "g", "3-0"},
		{"XGROUP", "DELCONSUMER", "s", "g", "dave"},
		{"XINFO", "STREAM", "s", "FULL"},
		{"HELLO", "3"},
		{"XINFO", "STREAM", "s", "FULL"},
		{"XINFO", "CONSUMERS", "s", "g"},
		{"XPENDING", "s", "g", "-", "+", "10"},
	}
	for _, cmd := range script {
		var got [2]string
		for i, c := range conns {
			got[i] = maskClock(c.do(cmd...), cmd[0] == "XPENDING").String()
		}
		if cmd[0] == "HELLO" {
			continue
		}
		if got[0] != got[1] {
			t.Errorf("%v:\n  redis: %s\nlimitkv: %s", cmd, got[0], got[1])
		}
	}
}

// maskClock masks what each server takes from its own clock: the
// seen-time of XINFO STREAM FULL's consumers, XINFO CONSUMERS's idle, and,
// in XPENDING's entries ([id consumer idle count]), the idle time.
func maskClock(v resp.Value, pending bool) resp.Value {
	if len(v.Elems) == 0 {
		return v
	}
	out := v
	out.Elems = make([]resp.Value, len(v.Elems))
	for i, e := range v.Elems {
		out.Elems[i] = maskClock(e, pending)
		if i > 0 {
			if k := string(v.Elems[i-1].Str); k == "seen-time" || k == "idle" {
				out.Elems[i] = resp.Value{Type: ':'}
			}
		}
	}
	if pending && len(v.Elems) == 4 && v.Elems[1].Type == '$' && v.Elems[2].Type == ':' && v.Elems[3].Type == ':' {
		out.Elems[2] = resp.Value{Type: ':'}
	}
	return out
}
