package commands

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limitkv/limitkv/cluster"
	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/replication"
	"github.com/limitkv/limitkv/resp"
)

// clusterPortPair finds a port whose bus port, 10000 above, is free too.
func clusterPortPair(t testing.TB) int {
	t.Helper()
	for range 200 {
		p := 20000 + rand.IntN(30000)
		a, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		b, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+cluster.BusPortOffset))
		a.Close()
		if err != nil {
			continue
		}
		b.Close()
		return p
	}
	t.Fatal("no free port pair")
	return 0
}

// clusterServer is an in-process server in cluster mode: its engine
// indexes keys by slot, and its bus listens on loopback.
type clusterServer struct {
	*scriptServer
	bus  *cluster.Bus
	port int
}

func newClusterServer(t *testing.T) *clusterServer {
	t.Helper()
	eng := engine.New(engine.Config{Databases: 16, Clock: engine.NewManualClock(transcriptEpoch), Slots: true})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := New(eng, NewConfig(), quiet)
	port := clusterPortPair(t)
	bus, err := cluster.NewBus(cluster.BusConfig{IP: "127.0.0.1", Port: uint16(port), NodeTimeout: 5000, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bus.Close() })
	srv.Cluster = bus
	return &clusterServer{scriptServer: &scriptServer{t: t, srv: srv, w: resp.NewWriter(2), client: newTestClient(srv)}, bus: bus, port: port}
}

// reply runs a request as dispatch would, refusals included, and gives
// the reply's text.
func (s *scriptServer) reply(args ...string) string {
	s.t.Helper()
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	s.w.Reset()
	spec, msg := s.srv.lookup(bs)
	if msg != "" {
		s.w.Error(msg)
	} else {
		s.c = Ctx{Srv: s.srv, Client: s.client, W: s.w, Args: bs, Now: transcriptEpoch, Spec: spec}
		s.srv.run(&s.c)
	}
	v, err := resp.ReadValue(bufio.NewReader(bytes.NewReader(s.w.Bytes())))
	if err != nil {
		s.t.Fatalf("%v: unreadable reply %q: %v", args, s.w.Bytes(), err)
	}
	return v.String()
}

func TestClusterDisabled(t *testing.T) {
	s := newScriptServer(t)
	want := newScriptServer(t).reply("CLUSTER", "INFO")
	if want != "-ERR This instance has cluster support disabled" {
		t.Fatalf("CLUSTER INFO without cluster mode: %s", want)
	}
	for _, sub := range testTable().Lookup([]byte("cluster")).Sub {
		args := []string{"CLUSTER", sub.Name}
		for len(args) < max(sub.Arity, -sub.Arity) {
			args = append(args, "1")
		}
		if got := s.reply(args...); got != want {
			t.Errorf("%v: %s", args, got)
		}
	}
	for _, c := range []string{"READONLY", "READWRITE", "ASKING"} {
		if got := s.reply(c); got != want {
			t.Errorf("%s: %s", c, got)
		}
	}
	if got := s.reply("INFO", "cluster"); !strings.Contains(got, "cluster_enabled:0") {
		t.Errorf("INFO cluster: %s", got)
	}
}

// clusterScript is a sequence of requests to a lone fresh node, whose
// replies must be Redis's; $me stands for the node's ID, and $port for
// its port, in requests and replies.
var clusterScript = [][]string{
	{"CLUSTER", "KEYSLOT", "foo"},
	{"CLUSTER", "KEYSLOT", "{user1000}.following"},
	{"CLUSTER", "COUNTKEYSINSLOT", "abc"},
	{"CLUSTER", "COUNTKEYSINSLOT", "16384"},
	{"CLUSTER", "COUNTKEYSINSLOT", "0"},
	{"CLUSTER", "GETKEYSINSLOT", "0", "-1"},
	{"CLUSTER", "GETKEYSINSLOT", "x", "1"},
	{"CLUSTER", "GETKEYSINSLOT", "0", "10"},
	{"CLUSTER", "ADDSLOTS", "16384"},
	{"CLUSTER", "ADDSLOTS", "-1"},
	{"CLUSTER", "ADDSLOTS", "1", "1"},
	{"CLUSTER", "ADDSLOTS", "1", "2"},
	{"CLUSTER", "ADDSLOTS", "3", "2", "x"},
	{"CLUSTER", "ADDSLOTS", "3", "2"},
	{"CLUSTER", "ADDSLOTSRANGE", "5"},
	{"CLUSTER", "ADDSLOTSRANGE", "5", "6", "7"},
	{"CLUSTER", "ADDSLOTSRANGE", "10", "5"},
	{"CLUSTER", "ADDSLOTSRANGE", "1", "3", "x", "y"},
	{"CLUSTER", "ADDSLOTSRANGE", "20", "30", "x", "y"},
	{"CLUSTER", "ADDSLOTSRANGE", "20", "30", "25", "26"},
	{"CLUSTER", "ADDSLOTSRANGE", "10", "30", "40", "50"},
	{"CLUSTER", "DELSLOTS", "3"},
	{"CLUSTER", "DELSLOTSRANGE", "10", "12"},
	{"CLUSTER", "DELSLOTSRANGE", "10", "12"},
	{"CLUSTER", "SETSLOT", "1", "MIGRATING", "0123456789012345678901234567890123456789"},
	{"CLUSTER", "SETSLOT", "1", "IMPORTING", "$me"},
	{"CLUSTER", "SETSLOT", "1", "NODE", "nosuchnode"},
	{"CLUSTER", "SETSLOT", "1", "FOO"},
	{"CLUSTER", "SETSLOT", "1", "STABLE", "x"},
	{"CLUSTER", "SETSLOT", "x", "STABLE"},
	{"CLUSTER", "SETSLOT", "5000", "MIGRATING", "$me"},
	{"CLUSTER", "SETSLOT", "1", "MIGRATING", "$me"},
	{"CLUSTER", "SETSLOT", "1", "STABLE"},
	{"CLUSTER", "BUMPEPOCH"},
	{"CLUSTER", "BUMPEPOCH"},
	{"CLUSTER", "SETSLOT", "5000", "IMPORTING", "$me"},
	{"CLUSTER", "SETSLOT", "5000", "NODE", "$me"},
	{"CLUSTER", "BUMPEPOCH"},
	{"CLUSTER", "SET-CONFIG-EPOCH", "x"},
	{"CLUSTER", "SET-CONFIG-EPOCH", "-1"},
	{"CLUSTER", "SET-CONFIG-EPOCH", "5"},
	{"CLUSTER", "NODES"},
	{"CLUSTER", "SLOTS"},
	{"CLUSTER", "SHARDS"},
	{"CLUSTER", "MYID"},
	{"CLUSTER", "REPLICAS", "$me"},
	{"CLUSTER", "SLAVES", "nosuchnode"},
	{"CLUSTER", "COUNT-FAILURE-REPORTS", "$me"},
	{"CLUSTER", "COUNT-FAILURE-REPORTS", "nosuchnode"},
	{"CLUSTER", "FORGET", "$me"},
	{"CLUSTER", "FORGET", "nosuchnode"},
	{"CLUSTER", "REPLICATE", "$me"},
	{"CLUSTER", "REPLICATE", "nosuchnode"},
	{"CLUSTER", "MEET", "127.0.0.1", "x"},
	{"CLUSTER", "MEET", "127.0.0.1", "7000", "y"},
	{"CLUSTER", "MEET", "foo", "7000"},
	{"CLUSTER", "MEET", "127.0.0.1", "70000"},
	{"CLUSTER", "MEET", "127.0.0.1", "0"},
	{"CLUSTER", "MEET", "127.0.0.1", "7000", "0"},
	{"CLUSTER", "MEET", "1", "2", "3", "4"},
	{"CLUSTER", "RESET", "foo"},
	{"CLUSTER", "RESET", "soft", "x"},
	{"CLUSTER", "LINKS"},
	{"CLUSTER", "HELP"},
	{"CLUSTER", "HELP", "x"},
	{"CLUSTER", "FOO"},
	{"CLUSTER"},
	{"READONLY"},
	{"READWRITE"},
	{"ASKING"},
	{"READONLY", "x"},
	{"CLUSTER", "SAVECONFIG"},
	{"CLUSTER", "FLUSHSLOTS"},
	{"CLUSTER", "NODES"},
	{"CLUSTER", "RESET", "SOFT"},
	{"CLUSTER", "BUMPEPOCH"},
	{"CLUSTER", "RESET", "HARD"},
	{"CLUSTER", "BUMPEPOCH"},
	{"CLUSTER", "NODES"},
}

// clusterInfoHead are CLUSTER INFO's lines that do not depend on timing:
// not the state and size, which a master does not decide until two
// seconds after its first update. A lone node counts no messages.
func clusterInfoHead(info string) string {
	var out []string
	// The reply's text escapes its CRLFs.
	for _, l := range strings.Split(info, `\r\n`) {
		if !strings.HasPrefix(l, "cluster_state:") && !strings.HasPrefix(l, "cluster_size:") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// normalize replaces the node's ID and port, and the pong times CLUSTER
// NODES prints, which differ from node to node and run to run.
func normalize(reply, me string, port int) string {
	reply = strings.ReplaceAll(reply, me, "$me")
	reply = strings.ReplaceAll(reply, strconv.Itoa(port+cluster.BusPortOffset), "$cport")
	reply = strings.ReplaceAll(reply, strconv.Itoa(port), "$port")
	return reply
}

// TestClusterLikeRedis runs clusterScript on our node and on a lone
// redis-server 7.0 in cluster mode, and wants the same replies.
func TestClusterLikeRedis(t *testing.T) {
	rport, do := startClusterRedis(t)
	want := clusterScriptReplies(t, rport, do)
	s := newClusterServer(t)
	got := clusterScriptReplies(t, s.port, s.reply)
	for i := range clusterScript {
		if got[i] != want[i] {
			t.Errorf("%v:\n got: %s\nwant: %s", clusterScript[i], got[i], want[i])
		}
	}
	if g, w := clusterInfoHead(unquote(s.reply("CLUSTER", "INFO"))), clusterInfoHead(unquote(do("CLUSTER", "INFO"))); g != w {
		t.Errorf("CLUSTER INFO:\n got: %s\nwant: %s", g, w)
	}
	if g, w := s.reply("INFO", "cluster"), do("INFO", "cluster"); g != w {
		t.Errorf("INFO cluster: %s, want %s", g, w)
	}
}

func TestClusterConnectionModes(t *testing.T) {
	s := newClusterServer(t)
	s.reply("READONLY")
	if !s.client.readOnly {
		t.Fatal("READONLY did not set the mode")
	}
	s.reply("READWRITE")
	if s.client.readOnly {
		t.Fatal("READWRITE did not clear the mode")
	}
	s.reply("ASKING")
	if !s.client.asking {
		t.Fatal("ASKING did not set the pass")
	}
}

// clusterScriptReplies runs clusterScript through do, with $me
// substituted and the replies normalized.
func clusterScriptReplies(t *testing.T, port int, do func(...string) string) []string {
	t.Helper()
	me := unquote(do("CLUSTER", "MYID"))
	var out []string
	for _, req := range clusterScript {
		args := make([]string, len(req))
		for i, a := range req {
			args[i] = strings.ReplaceAll(a, "$me", me)
		}
		r := do(args...)
		out = append(out, normalize(r, me, port))
		if len(req) == 3 && req[1] == "RESET" && req[2] == "HARD" {
			me = unquote(do("CLUSTER", "MYID"))
		}
	}
	return out
}

func unquote(s string) string { return strings.Trim(s, `"`) }

// startClusterRedis starts a lone redis-server in cluster mode on free
// loopback ports and gives its port and a function sending it a request
// and giving its reply's text. It skips without redis-server, except in
// CI, which installs it.
func startClusterRedis(t *testing.T) (int, func(...string) string) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is required in CI")
		}
		t.Skip("redis-server not on PATH")
	}
	dir := t.TempDir()
	port := clusterPortPair(t)
	cmd := exec.Command(bin, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--cluster-announce-ip", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var conn net.Conn
	for range 200 {
		if conn, err = net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("redis-server did not start: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	r := bufio.NewReader(conn)
	w := resp.NewWriter(2)
	return port, func(args ...string) string {
		t.Helper()
		w.Reset()
		w.Array(len(args))
		for _, a := range args {
			w.BulkString(a)
		}
		if _, err := conn.Write(w.Bytes()); err != nil {
			t.Fatal(err)
		}
		v, err := resp.ReadValue(r)
		if err != nil {
			t.Fatal(err)
		}
		return v.String()
	}
}

// meet starts another cluster node, has s meet it, and waits until s
// knows it; it returns the node and its ID.
func meet(t *testing.T, s *clusterServer) (*clusterServer, string) {
	t.Helper()
	other := newClusterServer(t)
	s.reply("CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(other.port))
	otherID := unquote(other.reply("CLUSTER", "MYID"))
	for i := 0; !known(s, otherID); i++ {
		if i == 1000 {
			t.Fatal("the MEET did not complete")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return other, otherID
}

// TestClusterKeys checks the subcommands that read the keyspace, with
// Redis's texts.
func TestClusterKeys(t *testing.T) {
	s := newClusterServer(t)
	me := unquote(s.reply("CLUSTER", "MYID"))
	_, otherID := meet(t, s)
	slot := cluster.KeySlot([]byte("foo"))
	sl := strconv.Itoa(int(slot))
	for _, c := range []struct{ req, want string }{
		{"CLUSTER ADDSLOTS " + sl, "+OK"},
		{"SET foo 1", "+OK"},
		{"SET {foo}2 1", "+OK"},
		{"CLUSTER COUNTKEYSINSLOT " + sl, ":2"},
		{"exec", ""},
		{"CLUSTER GETKEYSINSLOT " + sl + " 0", "[]"},
		{"CLUSTER GETKEYSINSLOT " + sl + " 1", "len 1"},
		{"CLUSTER GETKEYSINSLOT " + sl + " 10", "len 2"},
		{"CLUSTER FLUSHSLOTS", "-ERR DB must be empty to perform CLUSTER FLUSHSLOTS."},
		{"CLUSTER REPLICATE " + otherID, "-ERR To set a master the node must be empty and without assigned slots."},
		{"CLUSTER RESET", "-ERR CLUSTER RESET can't be called with master nodes containing keys"},
		{"CLUSTER SETSLOT " + sl + " NODE " + otherID, "-ERR Can't assign hashslot " + sl + " to a different node while I still hold keys for this hash slot."},
		{"CLUSTER SETSLOT " + sl + " MIGRATING " + otherID, "+OK"},
		{"DEL foo {foo}2", ":2"},
		{"CLUSTER SETSLOT " + sl + " NODE " + otherID, "+OK"},
		{"CLUSTER REPLICATE " + otherID, "+OK"},
		{"CLUSTER REPLICATE " + me, "-ERR Can't replicate myself"},
		{"CLUSTER FORGET " + otherID, "-ERR Can't forget my master!"},
		{"CLUSTER SETSLOT 1 STABLE", "-ERR Please use SETSLOT only with masters."},
		{"CLUSTER RESET", "+OK"},
	} {
		if c.req == "exec" {
			// In EXEC, which holds every shard already, the key counts read the
			// index without taking a lock again.
			w := resp.NewWriter(2)
			for _, req := range []string{"MULTI", "CLUSTER COUNTKEYSINSLOT " + sl, "CLUSTER GETKEYSINSLOT " + sl + " 1", "EXEC"} {
				var args [][]byte
				for _, a := range strings.Fields(req) {
					args = append(args, []byte(a))
				}
				w.Reset()
				s.srv.execute(s.client, w, args, transcriptEpoch)
			}
			if v, err := resp.ReadValue(bufio.NewReader(bytes.NewReader(w.Bytes()))); err != nil || !strings.HasPrefix(v.String(), "[:2, [") {
				t.Errorf("EXEC of the key counts: %v %v", v, err)
			}
			continue
		}
		got := s.reply(strings.Fields(c.req)...)
		if strings.HasPrefix(c.want, "len ") {
			if n := strings.Count(got, `"`) / 2; "len "+strconv.Itoa(n) != c.want {
				t.Errorf("%s: %s, want %s keys", c.req, got, c.want[4:])
			}
			continue
		}
		if got != c.want {
			t.Errorf("%s: %s, want %s", c.req, got, c.want)
		}
	}
}

func known(s *clusterServer, id string) bool {
	ok := false
	s.bus.Do(func(st *cluster.State) { n := st.Node(id); ok = n != nil && !n.Handshake() })
	return ok
}

// What myself announces follows CONFIG SET, as in Redis.
func TestClusterAnnounceSettings(t *testing.T) {
	s := newClusterServer(t)
	for _, req := range [][]string{
		{"CONFIG", "SET", "cluster-announce-hostname", "node-a.example"},
		{"CONFIG", "SET", "cluster-replica-no-failover", "yes"},
		{"CONFIG", "SET", "cluster-announce-bus-port", "23456"},
	} {
		if got := s.reply(req...); got != "+OK" {
			t.Fatalf("%v: %s", req, got)
		}
	}
	nodes := s.reply("CLUSTER", "NODES")
	for _, want := range []string{"@23456,node-a.example ", "myself,master,nofailover "} {
		if !strings.Contains(nodes, want) {
			t.Errorf("CLUSTER NODES lacks %q:\n%s", want, nodes)
		}
	}
	s.reply("CONFIG", "SET", "cluster-replica-no-failover", "no")
	if nodes := s.reply("CLUSTER", "NODES"); strings.Contains(nodes, "nofailover") {
		t.Errorf("nofailover stayed after CONFIG SET cluster-replica-no-failover no:\n%s", nodes)
	}
}

// While a full sync loads the keyspace, the views of the cluster are
// answered (redis-cli --cluster reads them from replicas it has just
// made), and commands on keys are not.
func TestClusterViewsWhileLoading(t *testing.T) {
	s := newClusterServer(t)
	s.srv.loadState.Store(int32(replication.LoadFull))
	defer s.srv.loadState.Store(int32(replication.LoadNone))
	w := resp.NewWriter(2)
	run := func(req ...string) string {
		var args [][]byte
		for _, a := range req {
			args = append(args, []byte(a))
		}
		w.Reset()
		s.srv.execute(s.client, w, args, transcriptEpoch)
		return string(w.Bytes())
	}
	for _, req := range [][]string{{"CLUSTER", "NODES"}, {"CLUSTER", "INFO"}, {"CLUSTER", "SLOTS"}, {"CLUSTER", "MYID"}, {"CLUSTER", "KEYSLOT", "k"}} {
		if got := run(req...); strings.HasPrefix(got, "-LOADING") {
			t.Errorf("%v while loading: %q", req, got)
		}
	}
	if got := run("CLUSTER", "COUNTKEYSINSLOT", "1"); !strings.HasPrefix(got, "-LOADING") {
		t.Errorf("CLUSTER COUNTKEYSINSLOT while loading: %q, want LOADING", got)
	}
}

// TestClusterRoutedAgainUnderLocks: a request routed here by a key that
// another client migrates away, or whose slot is given to another node,
// before the request holds its shard's lock is routed again once it
// does: it answers ASK or MOVED instead of creating the key afresh here,
// alone, in a transaction and in a script; it counts as rejected, not as
// a call. Between the routing and the lock, beforeLock plays the other
// client.
func TestClusterRoutedAgainUnderLocks(t *testing.T) {
	s := newClusterServer(t)
	other, otherID := meet(t, s)
	if got := s.reply("CLUSTER", "ADDSLOTSRANGE", "0", "16383"); got != "+OK" {
		t.Fatalf("CLUSTER ADDSLOTSRANGE: %s", got)
	}
	for i := 0; !s.bus.Routing().OK; i++ {
		if i == 1500 {
			t.Fatal("the cluster did not come up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	const key = "foo"
	slot := int(cluster.KeySlot([]byte(key)))
	eng := s.srv.Eng
	w := resp.NewWriter(2)
	run := func(req ...string) string {
		var args [][]byte
		for _, a := range req {
			args = append(args, []byte(a))
		}
		w.Reset()
		s.srv.request(s.client, w, args)
		return strings.TrimSuffix(string(w.Bytes()), "\r\n")
	}
	exists := func() bool {
		m := eng.MaskOf([]byte(key))
		eng.Lock(m)
		defer eng.Unlock(m)
		return eng.ShardFor([]byte(key)).Exists(0, []byte(key), eng.Now())
	}
	// migrateAway deletes the key, as MIGRATE does once the target has it.
	migrateAway := func(*Ctx) {
		m := eng.MaskOf([]byte(key))
		eng.Lock(m)
		eng.ShardFor([]byte(key)).Delete(0, []byte(key), eng.Now())
		eng.Unlock(m)
	}
	giveAway := func(c *Ctx) {
		migrateAway(c)
		s.bus.Do(func(st *cluster.State) { st.SetOwner(uint16(slot), otherID) })
	}
	ask := fmt.Sprintf("-ASK %d 127.0.0.1:%d", slot, other.port)
	moved := fmt.Sprintf("-MOVED %d 127.0.0.1:%d", slot, other.port)
	decide := []string{"RL.FIXED", key, "10", "1h"}
	script := []string{"EVAL", "return redis.call('RL.FIXED', KEYS[1], 10, '1h')", "1", key}
	for _, tc := range []struct {
		name      string
		migrating bool
		meanwhile func(*Ctx)
		reqs      [][]string
		want      string
	}{
		{name: "migrating, key kept", migrating: true, reqs: [][]string{decide}, want: "*5"},
		{name: "migrating, key migrated", migrating: true, meanwhile: migrateAway, reqs: [][]string{decide}, want: ask},
		{name: "slot given away", meanwhile: giveAway, reqs: [][]string{decide}, want: moved},
		{name: "EXEC, key migrated", migrating: true, meanwhile: migrateAway,
			reqs: [][]string{{"MULTI"}, decide, {"EXEC"}}, want: ask},
		{name: "EXEC, slot given away", meanwhile: giveAway, reqs: [][]string{{"MULTI"}, decide, {"EXEC"}}, want: moved},
		{name: "script, key migrated", migrating: true, meanwhile: migrateAway, reqs: [][]string{script}, want: ask},
		{name: "script, slot given away", meanwhile: giveAway, reqs: [][]string{script}, want: moved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.bus.Do(func(st *cluster.State) { st.SetOwner(uint16(slot), st.Myself) })
			run("DISCARD")
			if got := run("CLUSTER", "SETSLOT", strconv.Itoa(slot), "STABLE"); got != "+OK" {
				t.Fatalf("CLUSTER SETSLOT STABLE: %s", got)
			}
			if got := run(decide...); !strings.HasPrefix(got, "*5") {
				t.Fatalf("%v: %s", decide, got)
			}
			if tc.migrating {
				if got := run("CLUSTER", "SETSLOT", strconv.Itoa(slot), "MIGRATING", otherID); got != "+OK" {
					t.Fatalf("CLUSTER SETSLOT MIGRATING: %s", got)
				}
			}
			run("CONFIG", "RESETSTAT")
			defer func() { s.srv.beforeLock = nil }()
			var got string
			for i, req := range tc.reqs {
				if i == len(tc.reqs)-1 {
					s.srv.beforeLock = tc.meanwhile
				}
				got = run(req...)
			}
			s.srv.beforeLock = nil
			if !strings.HasPrefix(got, tc.want) {
				t.Fatalf("%v: %q, want %q", tc.reqs[len(tc.reqs)-1], got, tc.want)
			}
			if tc.meanwhile != nil && exists() {
				t.Errorf("the key, migrated away, was made afresh here")
			}
			if got := run("MULTI"); got != "+OK" {
				t.Errorf("MULTI after the request: %s (the transaction must be over)", got)
			}
			run("DISCARD")
			if tc.meanwhile == nil {
				return
			}
			stats := run("INFO", "commandstats")
			last := strings.ToLower(tc.reqs[len(tc.reqs)-1][0])
			if !strings.Contains(stats, "cmdstat_"+last+":calls=0,") || !strings.Contains(stats, "rejected_calls=1,") {
				t.Errorf("%s routed elsewhere under its locks must count as rejected, not called:\n%s", last, stats)
			}
		})
	}
}
