package tests

import (
	"context"
	"fmt"
	"math"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/limitkv/limitkv/cluster"
	"github.com/limitkv/limitkv/internal/testserver"
)

// Redis Cluster as its users drive it: redis-cli --cluster creates, checks,
// grows, reshards, rebalances, shrinks and fixes clusters; cluster-aware
// clients route keys by slot and follow MOVED and ASK; a node answers a key
// it does not serve with Redis's redirections and errors, to the byte.
// Every scenario runs on all-redis-server clusters (which make the
// expectations honest), all-limitkv ones and mixed ones, where nodes of
// both kinds share one bus. The subtests are named after the kinds, so
// that -run 'TestCluster.*/redis$' runs the all-redis ones.

// clusterNodeTimeout is short so that the nodes agree quickly; nothing
// here waits for a failure to be detected.
const clusterNodeTimeout = 3 * time.Second

// clusterWait bounds every wait for the nodes to agree: a guard against a
// hang, far above the second or so the bus takes.
const clusterWait = 60 * time.Second

// clusterSlots is the number of hash slots of Redis Cluster.
const clusterSlots = 16384

// clusterKinds are the clusters every scenario of six nodes runs on.
var clusterKinds = []struct {
	name  string
	kinds []string
}{
	{"redis", repeatKind(testserver.Redis, 6)},
	{"limitkv", repeatKind(testserver.Limitkv, 6)},
	// Two limitkv masters and a redis-server one, node 3+m replicating
	// master m. A replica is of its master's kind: limitkv's replication
	// stream carries rate-limit state that redis-server cannot read, and
	// limitkv does not load redis-server's RDB stream.
	{"mixed", []string{testserver.Limitkv, testserver.Redis, testserver.Limitkv, testserver.Limitkv, testserver.Redis, testserver.Limitkv}},
}

func repeatKind(kind string, n int) []string {
	kinds := make([]string, n)
	for i := range kinds {
		kinds[i] = kind
	}
	return kinds
}

// testCluster is a set of cluster-enabled nodes and a connection to each.
type testCluster struct {
	t *testing.T
	// root is the test that started the nodes, which a node restarted in
	// a subtest lives as long as.
	root  *testing.T
	kinds []string
	nodes []*server
	conns []*redis.Client
	gone  map[int]bool // nodes deleted from the cluster
	// created says that redis-cli --cluster create made the cluster.
	created bool
	cliBin  string
}

// startClusterNodes starts one node of each kind, none of them knowing
// the others yet.
func startClusterNodes(t *testing.T, kinds []string) *testCluster {
	t.Helper()
	return startClusterNodesTimeout(t, kinds, clusterNodeTimeout)
}

// startClusterNodesTimeout is startClusterNodes with the node timeout
// given.
func startClusterNodesTimeout(t *testing.T, kinds []string, nodeTimeout time.Duration) *testCluster {
	t.Helper()
	cli := testserver.Require(t, "redis-cli")
	spec := testserver.ClusterSpec{Kinds: kinds, Limitkv: limitkvBin, Dir: t.TempDir(), NodeTimeout: nodeTimeout}
	if slices.Contains(kinds, testserver.Redis) {
		spec.Redis = redisServerPath(t)
	}
	if slices.Contains(kinds, testserver.Limitkv) {
		testserver.TrackSources()
	}
	c := &testCluster{t: t, root: t, kinds: kinds, nodes: testserver.StartClusterTest(t, spec), gone: map[int]bool{}, cliBin: cli}
	for _, n := range c.nodes {
		c.conns = append(c.conns, goRedis(t, n.Addr, 2))
	}
	return c
}

// cli runs redis-cli with args and returns what it printed, stdout and
// stderr together, and its exit status.
func (c *testCluster) cli(args ...string) (string, int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, c.cliBin, args...).CombinedOutput()
	if ctx.Err() != nil {
		c.t.Fatalf("redis-cli %s did not finish in 3 minutes:\n%s", strings.Join(args, " "), out)
	}
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			c.t.Fatalf("redis-cli %s: %v", strings.Join(args, " "), err)
		}
		code = ee.ExitCode()
	}
	return ansiColor.ReplaceAllString(string(out), ""), code
}

// ansiColor matches the color codes redis-cli --cluster writes even when
// its output is not a terminal.
var ansiColor = regexp.MustCompile("\x1b\\[[0-9;]*m")

// cliOK runs redis-cli, requires it to succeed and to print every line of
// want, and returns its output.
func (c *testCluster) cliOK(args []string, want ...string) string {
	c.t.Helper()
	out, code := c.cli(args...)
	if code != 0 {
		c.t.Fatalf("redis-cli %s exited with %d:\n%s", strings.Join(args, " "), code, out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			c.t.Fatalf("redis-cli %s did not print %q:\n%s", strings.Join(args, " "), w, out)
		}
	}
	return out
}

// run runs f on the cluster as a subtest of the current test, and says
// whether it passed.
func (c *testCluster) run(name string, f func(*testCluster)) bool {
	parent := c.t
	defer func() { c.t = parent }()
	return parent.Run(name, func(t *testing.T) {
		c.t = t
		f(c)
	})
}

func (c *testCluster) addr(i int) string { return c.nodes[i].Addr }

// live are the indexes of the nodes still in the cluster.
func (c *testCluster) live(upTo int) []int {
	var idx []int
	for i := range upTo {
		if !c.gone[i] {
			idx = append(idx, i)
		}
	}
	return idx
}

func (c *testCluster) id(i int) string {
	c.t.Helper()
	id, err := c.conns[i].Do(context.Background(), "CLUSTER", "MYID").Text()
	if err != nil {
		c.t.Fatalf("CLUSTER MYID on %s %s: %v", c.kinds[i], c.addr(i), err)
	}
	return id
}

// create runs redis-cli --cluster create on the first n nodes and checks
// what it printed.
func (c *testCluster) create(n, replicas int) string {
	c.t.Helper()
	args := []string{"--cluster", "create"}
	for i := range n {
		args = append(args, c.addr(i))
	}
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	masters := n / (replicas + 1)
	want := []string{fmt.Sprintf(">>> Performing hash slots allocation on %d nodes...", n)}
	for m, r := range slotRanges(masters) {
		want = append(want, fmt.Sprintf("Master[%d] -> Slots %d - %d", m, r[0], r[1]))
	}
	want = append(want, "[OK] All nodes agree about slots configuration.", "[OK] All 16384 slots covered.")
	out := c.cliOK(args, want...)
	c.waitAgree(n)
	return out
}

// slotRanges are the ranges redis-cli --cluster create gives n masters.
func slotRanges(n int) [][2]int {
	per := float64(clusterSlots) / float64(n)
	var ranges [][2]int
	first := 0
	cursor := 0.0
	for m := range n {
		last := int(math.Round(cursor + per - 1))
		if last > clusterSlots || m == n-1 {
			last = clusterSlots - 1
		}
		ranges = append(ranges, [2]int{first, last})
		first = last + 1
		cursor += per
	}
	return ranges
}

// nodesView is a node's CLUSTER NODES reduced to what every node must
// agree on: each node's id, address, flags (but myself), master, config
// epoch and slots (but the importing and migrating marks only the node
// itself shows), one line per node, sorted; and whether the node sees any
// link down or node failing.
func nodesView(text string) (view string, healthy bool) {
	healthy = true
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return text, false
		}
		addr, _, _ := strings.Cut(f[1], ",")
		var flags []string
		for _, fl := range strings.Split(f[2], ",") {
			switch fl {
			case "myself":
			case "fail", "fail?", "handshake", "noaddr":
				healthy = false
				flags = append(flags, fl)
			default:
				flags = append(flags, fl)
			}
		}
		if f[7] != "connected" {
			healthy = false
		}
		var slots []string
		for _, s := range f[8:] {
			if !strings.HasPrefix(s, "[") {
				slots = append(slots, s)
			}
		}
		lines = append(lines, strings.Join([]string{f[0], addr, strings.Join(flags, ","), f[3], f[6], strings.Join(slots, " ")}, " "))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n"), healthy
}

// slotsView is a node's CLUSTER SLOTS as text, the ranges in order and
// each range's replicas sorted: nodes list a master's replicas in the
// order they learnt of them.
func slotsView(slots []redis.ClusterSlot) string {
	var lines []string
	for _, s := range slots {
		var nodes []string
		for _, n := range s.Nodes {
			nodes = append(nodes, n.Addr+"/"+n.ID)
		}
		if len(nodes) > 1 {
			slices.Sort(nodes[1:])
		}
		lines = append(lines, fmt.Sprintf("%05d-%05d %s", s.Start, s.End, strings.Join(nodes, " ")))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// agreement is what one node says of the cluster.
type agreement struct {
	nodes, slots, state string
	healthy             bool
	count               int
}

func (c *testCluster) view(i int) agreement {
	ctx := context.Background()
	var a agreement
	text, err := c.conns[i].ClusterNodes(ctx).Result()
	if err != nil {
		return agreement{nodes: err.Error()}
	}
	a.nodes, a.healthy = nodesView(text)
	a.count = strings.Count(strings.TrimSpace(text), "\n") + 1
	slots, err := c.conns[i].ClusterSlots(ctx).Result()
	if err != nil {
		a.slots = err.Error()
	} else {
		a.slots = slotsView(slots)
	}
	info, err := c.conns[i].ClusterInfo(ctx).Result()
	if err != nil {
		a.state = err.Error()
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "cluster_state:"); ok {
			a.state = v
		}
	}
	return a
}

// waitAgree waits until every live node of the first n knows all of them,
// sees every link up and no node failing, says the cluster is ok, and
// prints the same CLUSTER NODES and CLUSTER SLOTS as every other.
func (c *testCluster) waitAgree(n int) {
	c.t.Helper()
	live := c.live(n)
	deadline := time.Now().Add(clusterWait)
	for {
		views := make([]agreement, len(live))
		ok := true
		for j, i := range live {
			views[j] = c.view(i)
			v := views[j]
			if !v.healthy || v.count != len(live) || v.state != "ok" || v.nodes != views[0].nodes || v.slots != views[0].slots {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for j, i := range live {
				fmt.Fprintf(&b, "--- %s %s: state %s, %d nodes, healthy %v\n%s\n%s\n", c.kinds[i], c.addr(i), views[j].state, views[j].count, views[j].healthy, views[j].nodes, views[j].slots)
			}
			c.t.Fatalf("the nodes did not agree within %v:\n%s", clusterWait, b.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// owners maps every slot to the index of the node serving it, as node i
// says.
func (c *testCluster) owners(i int) [clusterSlots]int {
	c.t.Helper()
	slots, err := c.conns[i].ClusterSlots(context.Background()).Result()
	if err != nil {
		c.t.Fatal(err)
	}
	var own [clusterSlots]int
	for s := range own {
		own[s] = -1
	}
	for _, r := range slots {
		j := slices.IndexFunc(c.nodes, func(n *server) bool { return n.Addr == r.Nodes[0].Addr })
		for s := r.Start; s <= r.End; s++ {
			own[s] = j
		}
	}
	return own
}

// slotKeys holds, for each slot, a key that hashes to it.
var slotKeys = sync.OnceValue(func() []string {
	keys := make([]string, clusterSlots)
	left := clusterSlots
	for n := 0; left > 0; n++ {
		k := "key:" + strconv.Itoa(n)
		if s := cluster.KeySlot([]byte(k)); keys[s] == "" {
			keys[s] = k
			left--
		}
	}
	return keys
})

// slotValue is what the tests write at a slot's key.
func slotValue(slot int) string { return "v" + strconv.Itoa(slot) }

// clusterClient is a go-redis ClusterClient seeded with the given nodes.
func (c *testCluster) clusterClient(idx []int) *redis.ClusterClient {
	var addrs []string
	for _, i := range idx {
		addrs = append(addrs, c.addr(i))
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, DialTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, MaxRedirects: 16})
	c.t.Cleanup(func() { cc.Close() })
	return cc
}

// writeSlotKeys writes every slot's key through a cluster client.
func writeSlotKeys(t *testing.T, cc *redis.ClusterClient) {
	t.Helper()
	ctx := context.Background()
	keys := slotKeys()
	_, err := cc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for s, k := range keys {
			p.Set(ctx, k, slotValue(s), 0)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("writing a key in every slot: %v", err)
	}
}

// checkSlotKeys reads every slot's key back through a cluster client.
func checkSlotKeys(t *testing.T, cc *redis.ClusterClient) {
	t.Helper()
	ctx := context.Background()
	keys := slotKeys()
	cmds, err := cc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Get(ctx, k)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading the key of every slot: %v", err)
	}
	for s, cmd := range cmds {
		if v, err := cmd.(*redis.StringCmd).Result(); err != nil || v != slotValue(s) {
			t.Fatalf("GET %s (slot %d) through the cluster: %q %v, want %q", keys[s], s, v, err, slotValue(s))
		}
	}
}

// TestCluster creates a cluster of three masters with a replica each,
// checks it with redis-cli, drives it with the cluster clients, and asks
// its masters for the redirections and errors. The scenarios share the
// cluster, each leaving it as it found it.
func TestCluster(t *testing.T) {
	for _, k := range clusterKinds {
		t.Run(k.name, func(t *testing.T) {
			c := startClusterNodes(t, k.kinds)
			if !c.run("create", clusterCreate) {
				return
			}
			if !c.created {
				t.Fatalf("the later steps need the cluster the create step makes: run TestCluster/%s whole", k.name)
			}
			c.run("clients", clusterClients)
			c.run("messages", clusterMessages)
			c.run("errors", clusterErrors)
		})
	}
}

// clusterCreate: redis-cli --cluster create, check and info on six nodes.
func clusterCreate(c *testCluster) {
	t := c.t
	if slices.Contains(c.kinds, testserver.Redis) && slices.Contains(c.kinds, testserver.Limitkv) {
		// Mixed: redis-cli would pair masters and replicas as it likes, so
		// the masters are made first and each is given its replica, of
		// its kind.
		c.create(3, 0)
		for m := range 3 {
			c.cliOK([]string{"--cluster", "add-node", c.addr(3 + m), c.addr(0), "--cluster-slave", "--cluster-master-id", c.id(m)},
				"[OK] New node added correctly.")
			c.waitAgree(4 + m)
		}
	} else {
		c.create(6, 1)
	}
	c.created = true
	ids := make([]string, 6)
	for i := range ids {
		ids[i] = c.id(i)
	}
	own := c.owners(0)
	want := []string{"[OK] All nodes agree about slots configuration.", "[OK] All 16384 slots covered."}
	for m, r := range slotRanges(3) {
		if own[r[0]] != m || own[r[1]] != m {
			t.Fatalf("slots %d-%d are served by node %d and %d, want the master %d", r[0], r[1], own[r[0]], own[r[1]], m)
		}
		want = append(want, fmt.Sprintf("M: %s %s\n   slots:[%d-%d] (%d slots) master\n   1 additional replica(s)", ids[m], c.addr(m), r[0], r[1], r[1]-r[0]+1))
	}
	out := c.cliOK([]string{"--cluster", "check", c.addr(3)}, want...)
	if n := strings.Count(out, "\nS: "); n != 3 {
		t.Fatalf("--cluster check lists %d replicas, want 3:\n%s", n, out)
	}
	if strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERR]") {
		t.Fatalf("--cluster check warns on a new cluster:\n%s", out)
	}
	var info []string
	for m, r := range slotRanges(3) {
		info = append(info, fmt.Sprintf("%s (%s...) -> 0 keys | %d slots | 1 slaves.", c.addr(m), ids[m][:8], r[1]-r[0]+1))
	}
	c.cliOK([]string{"--cluster", "info", c.addr(4)}, append(info, "[OK] 0 keys in 3 masters.", "0.00 keys per slot on average.")...)

	// Each replica replicates a master, and the masters are the first three.
	for i := 3; i < 6; i++ {
		role, err := c.conns[i].Do(context.Background(), "ROLE").Slice()
		if err != nil || len(role) < 3 || role[0] != "slave" {
			t.Fatalf("ROLE of the replica %s %s: %v %v", c.kinds[i], c.addr(i), role, err)
		}
		master := testserver.Addr(int(role[2].(int64)))
		if !slices.ContainsFunc(c.nodes[:3], func(n *server) bool { return n.Addr == master }) {
			t.Fatalf("the replica %s replicates %s, not one of the masters", c.addr(i), master)
		}
	}
}

func slotOf(key string) int { return int(cluster.KeySlot([]byte(key))) }

// clusterErrors asks the masters for what a cluster answers a key it
// cannot serve as asked: MOVED, CROSSSLOT, ASK, TRYAGAIN, the importing
// side's answers with and without ASKING, and CLUSTERDOWN, in Redis's
// words, which the all-redis subtest holds the texts to.
func clusterErrors(c *testCluster) {
	t := c.t
	own := c.owners(0)
	ids := []string{c.id(0), c.id(1), c.id(2)}
	conns := make([]*rawConn, 3)
	for i := range conns {
		conns[i] = dialRaw(t, c.addr(i))
	}
	expect := func(i int, want string, args ...string) {
		t.Helper()
		v := conns[i].do(args...)
		if got := v.String(); got != want {
			t.Fatalf("%s on %s %s: %s, want %s", strings.Join(args, " "), c.kinds[i], c.addr(i), got, want)
		}
	}
	errText := func(format string, args ...any) string { return "-" + fmt.Sprintf(format, args...) }
	const ok, null = "+OK", "nil"
	bulk := strconv.Quote

	// MOVED from both other masters, to the owner's address.
	keys := slotKeys()
	for m := range 3 {
		slot := slotRanges(3)[m][0] + 11
		if own[slot] != m {
			t.Fatalf("slot %d is served by node %d, want %d", slot, own[slot], m)
		}
		for _, other := range []int{(m + 1) % 3, (m + 2) % 3} {
			expect(other, errText("MOVED %d %s", slot, c.addr(m)), "GET", keys[slot])
			expect(other, errText("MOVED %d %s", slot, c.addr(m)), "SET", keys[slot], "x")
		}
	}

	// CROSSSLOT, on the node that serves the first key and on one that
	// serves neither.
	a, b := keys[slotRanges(3)[0][0]+1], keys[slotRanges(3)[1][0]+1]
	expect(0, errText("CROSSSLOT Keys in request don't hash to the same slot"), "MSET", a, "1", b, "2")
	// A script routes by its declared keys; without keys it runs anywhere.
	elsewhere := keys[slotRanges(3)[1][0]+2]
	expect(0, errText("MOVED %d %s", slotRanges(3)[1][0]+2, c.addr(1)), "EVAL", "return 1", "1", elsewhere)
	expect(0, errText("CROSSSLOT Keys in request don't hash to the same slot"), "EVAL", "return 1", "2", a, b)
	expect(0, ":1", "EVAL", "return 1", "0")
	// A transaction queues what it can, and EXEC answers the redirection
	// of the keys it queued, discarding the transaction.
	expect(0, ok, "MULTI")
	expect(0, errText("MOVED %d %s", slotRanges(3)[1][0]+2, c.addr(1)), "GET", elsewhere)
	expect(0, "+QUEUED", "GET", a)
	expect(0, "-EXECABORT Transaction discarded because of previous errors.", "EXEC")
	// SELECT of another database is refused, as the cluster has one.
	expect(0, "-ERR SELECT is not allowed in cluster mode", "SELECT", "1")
	expect(0, ok, "SELECT", "0")
	expect(0, "-ERR MOVE is not allowed in cluster mode", "MOVE", a, "1")
	expect(0, "-ERR SWAPDB is not allowed in cluster mode", "SWAPDB", "0", "1")
	expect(0, "-ERR Copying to another database is not allowed in cluster mode", "COPY", a, "{"+a+"}2", "DB", "1")
	expect(2, errText("CROSSSLOT Keys in request don't hash to the same slot"), "MGET", a, b)

	// A replica redirects to its master, but serves reads after
	// READONLY, until READWRITE.
	for r := 3; r < 6; r++ {
		master := ""
		for _, l := range strings.Split(c.conns[r].ClusterNodes(context.Background()).Val(), "\n") {
			if f := strings.Fields(l); len(f) > 3 && strings.Contains(f[2], "myself") {
				master = f[3]
			}
		}
		m := slices.Index(ids, master)
		if m < 0 {
			t.Fatalf("node %s replicates %q, not a master", c.addr(r), master)
		}
		slot := slotRanges(3)[m][0] + 13
		key := "{" + keys[slot] + "}ro"
		if err := c.conns[m].Set(context.Background(), key, "replicated", 0).Err(); err != nil {
			t.Fatal(err)
		}
		rc := dialRaw(t, c.addr(r))
		want := errText("MOVED %d %s", slot, c.addr(m))
		expectRaw := func(args ...string) string { return rc.do(args...).String() }
		if got := expectRaw("GET", key); got != want {
			t.Fatalf("GET on the replica %s %s: %s, want %s", c.kinds[r], c.addr(r), got, want)
		}
		expectRaw("READONLY")
		waitFor(t, clusterWait, "the replica "+c.addr(r)+" to have the key", func() bool {
			return expectRaw("GET", key) == bulk("replicated")
		})
		for _, step := range []struct {
			args []string
			want string
		}{
			{[]string{"SET", key, "x"}, want},
			{[]string{"READWRITE"}, ok},
			{[]string{"GET", key}, want},
		} {
			if got := rc.do(step.args...).String(); got != step.want {
				t.Fatalf("%s on the replica %s %s: %s, want %s", strings.Join(step.args, " "), c.kinds[r], c.addr(r), got, step.want)
			}
		}
	}

	// A slot of master 0 migrating to master 1.
	present, absent := "{ask}present", "{ask}absent"
	slot := slotOf(present)
	src, dst := own[slot], (own[slot]+1)%3
	expect(src, ok, "SET", present, "here")
	expect(dst, ok, "CLUSTER", "SETSLOT", strconv.Itoa(slot), "IMPORTING", ids[src])
	expect(src, ok, "CLUSTER", "SETSLOT", strconv.Itoa(slot), "MIGRATING", ids[dst])
	expect(src, bulk("here"), "GET", present)
	expect(src, errText("ASK %d %s", slot, c.addr(dst)), "GET", absent)
	expect(src, errText("TRYAGAIN Multiple keys request during rehashing of slot"), "MGET", present, absent)
	expect(dst, errText("MOVED %d %s", slot, c.addr(src)), "GET", absent)
	expect(dst, ok, "ASKING")
	expect(dst, null, "GET", absent)
	expect(dst, ok, "ASKING")
	expect(dst, ok, "SET", absent, "there")
	// ASKING holds for one command only.
	expect(dst, errText("MOVED %d %s", slot, c.addr(src)), "GET", absent)
	expect(dst, ok, "ASKING")
	expect(dst, bulk("there"), "GET", absent)
	expect(dst, ok, "ASKING")
	expect(dst, errText("TRYAGAIN Multiple keys request during rehashing of slot"), "MGET", absent, present)
	expect(dst, ok, "ASKING")
	expect(dst, ":1", "DEL", absent)
	expect(src, ":1", "DEL", present)
	expect(dst, ok, "CLUSTER", "SETSLOT", strconv.Itoa(slot), "STABLE")
	expect(src, ok, "CLUSTER", "SETSLOT", strconv.Itoa(slot), "STABLE")
	expect(dst, errText("MOVED %d %s", slot, c.addr(src)), "GET", absent)

	// A master that gives up one of its slots no longer serves it, and, the
	// slots no longer all covered, no other either.
	gone := slotRanges(3)[2][0] + 5
	kept := gone + 1
	expect(2, ok, "CLUSTER", "DELSLOTS", strconv.Itoa(gone))
	expect(2, errText("CLUSTERDOWN Hash slot not served"), "GET", keys[gone])
	deadline := time.Now().Add(clusterWait)
	for c.view(2).state != "fail" {
		if time.Now().After(deadline) {
			t.Fatalf("cluster_state of %s is not fail after CLUSTER DELSLOTS %d", c.addr(2), gone)
		}
		time.Sleep(50 * time.Millisecond)
	}
	expect(2, errText("CLUSTERDOWN The cluster is down"), "GET", keys[kept])
	expect(2, errText("CLUSTERDOWN Hash slot not served"), "GET", keys[gone])
	expect(2, ok, "CLUSTER", "ADDSLOTS", strconv.Itoa(gone))
	c.waitAgree(6)
	expect(2, bulk(slotValue(gone)), "GET", keys[gone])
	expect(2, bulk(slotValue(kept)), "GET", keys[kept])
}
