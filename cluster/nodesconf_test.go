package cluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	idA = "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca"
	idB = "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1"
	idC = "292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f"
	idD = "824fe116063bc5fcf9f4ffd895bc17aee7731ac3"
)

// A file in the shapes Redis 7.0 writes: a master with slots and a
// migration and an import, a replica, a failing node with a hostname, a
// node in handshake and one without an address.
var sampleConf = idA + " 127.0.0.1:30001@40001,host-a.example myself,master - 0 1700000000000 1 connected 0-5460 5462 [5461->-" + idB + "] [10923-<-" + idC + "]\n" +
	idB + " 127.0.0.1:30002@40002 master - 0 1700000000001 2 connected 5461 5463-10922\n" +
	idC + " 127.0.0.1:30003@40003,host-c.example master,fail - 1700000000002 1700000000003 3 disconnected 10923-16383\n" +
	idD + " 127.0.0.1:30004@40004 slave,fail?,nofailover " + idB + " 0 0 2 connected\n" +
	"0000000000000000000000000000000000000000 :0@0 master,noaddr - 0 0 0 disconnected\n" +
	"vars currentEpoch 6 lastVoteEpoch 4\n"

func TestNodesConfRoundTrip(t *testing.T) {
	c, err := ParseNodesConf([]byte(sampleConf))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(c.Append(nil)); got != sampleConf {
		t.Fatalf("renders\n%s\nwant\n%s", got, sampleConf)
	}
	a := c.Nodes[0]
	if a.ID != idA || a.IP != "127.0.0.1" || a.Port != 30001 || a.CPort != 40001 || a.Hostname != "host-a.example" ||
		a.Flags != NodeMyself|NodeMaster || a.Master != "" || a.PongRecv != 1700000000000 || a.ConfigEpoch != 1 || !a.Connected {
		t.Errorf("node A: %+v", a)
	}
	if !slices.Equal(a.Slots, []SlotRange{{0, 5460}, {5462, 5462}}) {
		t.Errorf("node A's slots: %v", a.Slots)
	}
	if !slices.Equal(a.Moves, []SlotMove{{5461, false, idB}, {10923, true, idC}}) {
		t.Errorf("node A's migrations: %v", a.Moves)
	}
	if d := c.Nodes[3]; d.Master != idB || d.Flags != NodeSlave|NodePFail|NodeNoFailover {
		t.Errorf("node D: %+v", d)
	}
	if c.CurrentEpoch != 6 || c.LastVoteEpoch != 4 {
		t.Errorf("epochs %d %d", c.CurrentEpoch, c.LastVoteEpoch)
	}
}

func TestNodesConfLenient(t *testing.T) {
	// What Redis reads too but writes its own way: a line without a bus
	// port (before Redis 4), blank lines, flags in any case and order,
	// "noflags", unknown vars, and the vars line anywhere.
	in := "vars lastVoteEpoch 2 someday 1 currentEpoch 3\n\n" +
		idA + " 10.0.0.1:6379 MASTER,Myself - 0 0 0 connected 1\r\n" +
		"  \n" +
		idB + " [::1]:6380@16390 noflags - 0 0 0 disconnected\n"
	want := idA + " 10.0.0.1:6379@16379 myself,master - 0 0 0 connected 1\n" +
		idB + " [::1]:6380@16390 noflags - 0 0 0 disconnected\n" +
		"vars currentEpoch 3 lastVoteEpoch 2\n"
	c, err := ParseNodesConf([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(c.Append(nil)); got != want {
		t.Fatalf("renders\n%s\nwant\n%s", got, want)
	}
}

func TestNodesConfErrors(t *testing.T) {
	good := idA + " 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-100\n"
	for _, c := range []struct {
		name, in string
		line     int
		msg      string
	}{
		{"no myself", idA + " 127.0.0.1:30001@40001 master - 0 0 1 connected\n", 0, "no node is flagged myself"},
		{"empty", "", 0, "no node is flagged myself"},
		{"two myselves", good + "\n" + strings.Replace(good, idA, idB, 1), 3, "second node flagged myself (the first is on line 1)"},
		{"few fields", good + idB + " 127.0.0.1:1@2 master - 0 0 1\n", 2, "7 fields"},
		{"bad id", strings.Replace(good, idA, strings.ToUpper(idA), 1), 1, "node ID"},
		{"short id", strings.Replace(good, idA, idA[:39], 1), 1, "node ID"},
		{"no colon", strings.Replace(good, "127.0.0.1:30001@40001", "127.0.0.1", 1), 1, "has no ':'"},
		{"bad port", strings.Replace(good, ":30001@", ":70000@", 1), 1, "port \"70000\""},
		{"bad bus port", strings.Replace(good, "@40001", "@x", 1), 1, "bus port \"x\""},
		{"unknown flag", strings.Replace(good, "myself,master", "myself,primary", 1), 1, "unknown flag \"primary\""},
		{"empty flag", strings.Replace(good, "myself,master", "myself,", 1), 1, "unknown flag \"\""},
		{"bad master", strings.Replace(good, " - ", " abc ", 1), 1, "master ID \"abc\""},
		{"bad ping", strings.Replace(good, " - 0 0 1 ", " - x 0 1 ", 1), 1, "ping-sent"},
		{"bad epoch", strings.Replace(good, " 0 0 1 ", " 0 0 -1 ", 1), 1, "config epoch \"-1\""},
		{"bad link", strings.Replace(good, "connected", "up", 1), 1, "link state \"up\""},
		{"slot too high", strings.Replace(good, "0-100", "0-16384", 1), 1, "slots \"0-16384\""},
		{"slot not a number", strings.Replace(good, "0-100", "a", 1), 1, "slots \"a\""},
		{"reversed range", strings.Replace(good, "0-100", "100-0", 1), 1, "ends before it starts"},
		{"migration unclosed", strings.Replace(good, "0-100", "[5->-"+idB, 1), 1, "no closing"},
		{"migration direction", strings.Replace(good, "0-100", "[5-?-"+idB+"]", 1), 1, "neither"},
		{"migration slot", strings.Replace(good, "0-100", "[99999->-"+idB+"]", 1), 1, "slot \"99999\""},
		{"migration node", strings.Replace(good, "0-100", "[5->-xyz]", 1), 1, "node ID \"xyz\""},
		{"vars without value", good + "vars currentEpoch\n", 2, "has no value"},
		{"vars bad epoch", good + "vars currentEpoch x lastVoteEpoch 0\n", 2, "not an epoch"},
		{"quoted", good + "vars currentEpoch \"1\" lastVoteEpoch 0\n", 2, "quoted"},
	} {
		_, err := ParseNodesConf([]byte(c.in))
		var ce *ConfError
		if !errors.As(err, &ce) {
			t.Errorf("%s: error %v, want a ConfError", c.name, err)
			continue
		}
		if ce.Line != c.line || !strings.Contains(ce.Msg, c.msg) {
			t.Errorf("%s: %v; want line %d and %q", c.name, err, c.line, c.msg)
		}
		if c.line > 0 && !strings.Contains(err.Error(), "line "+strconv.Itoa(c.line)+":") {
			t.Errorf("%s: %q does not name its line", c.name, err)
		}
	}
}

func TestNodesConfWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "nodes.conf")
	if c, err := LoadNodesConf(path); c != nil || err != nil {
		t.Fatalf("missing file: %v, %v", c, err)
	}
	os.WriteFile(path, nil, 0o644)
	if c, err := LoadNodesConf(path); c != nil || err != nil {
		t.Fatalf("empty file: %v, %v", c, err)
	}
	// A longer old file must not leave its tail behind.
	os.WriteFile(path, []byte(strings.Repeat("#", 10000)), 0o600)
	c, err := ParseNodesConf([]byte(sampleConf))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WriteFile(path, true); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != sampleConf {
		t.Fatalf("wrote %q, %v", got, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, Redis writes 0644", fi.Mode().Perm())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
	back, err := LoadNodesConf(path)
	if err != nil || string(back.Append(nil)) != sampleConf {
		t.Fatalf("reloaded: %v", err)
	}
	if err := c.WriteFile(filepath.Join(dir, "missing", "nodes.conf"), true); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
	os.WriteFile(path, []byte("garbage\n"), 0o644)
	if _, err := LoadNodesConf(path); err == nil || !strings.Contains(err.Error(), path+": nodes.conf line 1:") {
		t.Errorf("damaged file: %v", err)
	}
}

// TestNodesConfFromRedis parses the nodes.conf files real redis-servers
// write and renders them back. Redis writes its nodes in the order of
// its node table's hash iteration, which is seeded at random per
// process, so the lines are compared as sets; each line must render
// back byte for byte.
func TestNodesConfFromRedis(t *testing.T) {
	a := startRedis(t)
	b := startRedis(t)
	ctx := context.Background()
	bID := b.c.ClusterMyID(ctx).Val()
	if err := a.c.ConfigSet(ctx, "cluster-announce-hostname", "redis-a.test").Err(); err != nil {
		t.Fatal(err)
	}
	if err := a.c.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(b.port)).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "A to know B", func() bool {
		line := nodeLine(a.c.ClusterNodes(ctx).Val(), bID)
		return line != "" && !strings.Contains(line, "handshake")
	})
	for _, cmd := range [][]any{
		{"cluster", "addslotsrange", 0, 100},
		{"cluster", "addslots", 200},
		{"cluster", "setslot", 5, "migrating", bID},
		{"cluster", "setslot", 300, "importing", bID},
		{"cluster", "saveconfig"},
	} {
		if err := a.c.Do(ctx, cmd...).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	// B learns of A from A's MEET, but may still be in the handshake (or
	// not know A at all) when A already knows B.
	aID := a.c.ClusterMyID(ctx).Val()
	waitFor(t, 10*time.Second, "B to know A", func() bool {
		line := nodeLine(b.c.ClusterNodes(ctx).Val(), aID)
		return line != "" && !strings.Contains(line, "handshake")
	})
	if err := b.c.Do(ctx, "cluster", "saveconfig").Err(); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*redisNode{a, b} {
		raw, err := os.ReadFile(filepath.Join(r.dir, "nodes.conf"))
		if err != nil {
			t.Fatal(err)
		}
		c, err := ParseNodesConf(raw)
		if err != nil {
			t.Fatalf("%v in\n%s", err, raw)
		}
		if len(c.Nodes) != 2 {
			t.Errorf("%d nodes in\n%s", len(c.Nodes), raw)
		}
		lines := strings.SplitAfter(string(raw), "\n")
		for i := range c.Nodes {
			line := string(c.Nodes[i].AppendLine(nil)) + "\n"
			if !slices.Contains(lines, line) {
				t.Errorf("renders %q, not a line of\n%s", line, raw)
			}
		}
		got := strings.SplitAfter(string(c.Append(nil)), "\n")
		slices.Sort(got)
		slices.Sort(lines)
		if !slices.Equal(got, lines) {
			t.Errorf("renders\n%s\nfrom\n%s", c.Append(nil), raw)
		}
		t.Logf("redis-server on %d wrote:\n%s", r.port, raw)
	}
	// A's own line carries the slots and migrations set above.
	raw, _ := os.ReadFile(filepath.Join(a.dir, "nodes.conf"))
	c, _ := ParseNodesConf(raw)
	for _, n := range c.Nodes {
		if n.Flags&NodeMyself == 0 {
			continue
		}
		if n.Hostname != "redis-a.test" || !slices.Equal(n.Slots, []SlotRange{{0, 100}, {200, 200}}) ||
			!slices.Equal(n.Moves, []SlotMove{{5, false, bID}, {300, true, bID}}) {
			t.Errorf("A's line: %+v", n)
		}
	}
}
