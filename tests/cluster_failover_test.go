package tests

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/limitkv/limitkv/internal/testserver"
)

// failoverNodeTimeout is the node timeout of the failover tests: Redis's
// failover time is about twice it, which the closing figures compare.
const failoverNodeTimeout = 2 * time.Second

// TestClusterFailover: a master of a cluster of three masters with a
// replica each is killed with SIGKILL under load. Its replica is elected
// and takes its slots, the cluster is ok again, clients go on, and every
// write the master acknowledged with WAIT 1 is there. The old master,
// restarted from its directory, comes back as a replica of the new one and
// takes its data; a CLUSTER FAILOVER then gives it its slots back without
// losing a write, and FORCE and TAKEOVER move them again. In the mixed
// cluster a limitkv replica is elected with a redis-server master's vote,
// then a redis-server replica with limitkv masters' votes.
func TestClusterFailover(t *testing.T) {
	for _, k := range clusterKinds {
		t.Run(k.name, func(t *testing.T) {
			c := startClusterNodesTimeout(t, k.kinds, failoverNodeTimeout)
			if !c.run("create", clusterCreate) || !c.created {
				return
			}
			c.run("kill", func(c *testCluster) { clusterKillMaster(c, 0) })
			if slices.Contains(k.kinds, testserver.Redis) && slices.Contains(k.kinds, testserver.Limitkv) {
				c.run("kill-redis", func(c *testCluster) { clusterKillMaster(c, 1) })
			}
			c.run("manual", clusterManualFailover)
			if slices.Contains(k.kinds, testserver.Limitkv) {
				c.run("restart", clusterRestartAll)
			}
		})
	}
}

// replicaOf is the index of the node that replicates node m.
func (c *testCluster) replicaOf(m int) int {
	c.t.Helper()
	ctx := context.Background()
	for i := range c.nodes {
		if i == m || c.nodes[i].Exited() {
			continue
		}
		role, err := c.conns[i].Do(ctx, "ROLE").Slice()
		if err == nil && len(role) >= 3 && role[0] == "slave" && testserver.Addr(int(role[2].(int64))) == c.addr(m) {
			return i
		}
	}
	c.t.Fatalf("no node replicates %s", c.addr(m))
	return -1
}

// masterSlots is a slot of each range the create step gave master m.
func masterKeys(m, n int) []string {
	r := slotRanges(3)[m]
	var keys []string
	for s := r[0]; s <= r[1] && len(keys) < n; s += max(1, (r[1]-r[0])/n) {
		keys = append(keys, slotKeys()[s])
	}
	return keys
}

// ackedWrites writes keys on node m, each acknowledged by WAIT 1 (one
// replica has it), and returns those acknowledged.
func (c *testCluster) ackedWrites(m int, keys []string, value string) []string {
	c.t.Helper()
	ctx := context.Background()
	conn := c.conns[m].Conn()
	defer conn.Close()
	var acked []string
	for _, k := range keys {
		if err := conn.Set(ctx, k, value, 0).Err(); err != nil {
			c.t.Fatalf("SET %s on %s: %v", k, c.addr(m), err)
		}
		n, err := conn.Do(ctx, "WAIT", 1, 5000).Int64()
		if err != nil {
			c.t.Fatalf("WAIT on %s: %v", c.addr(m), err)
		}
		if n >= 1 {
			acked = append(acked, k)
		}
	}
	if len(acked) == 0 {
		c.t.Fatalf("no write on %s was acknowledged by a replica", c.addr(m))
	}
	return acked
}

// ackedDecisions spends three of ten RL.FIXED allowances of keys on
// node m, a limitkv master, acknowledged by WAIT 1, and returns each
// key's RL.FIXED_RO reply there; nothing on a redis-server master.
func (c *testCluster) ackedDecisions(m int) map[string]string {
	c.t.Helper()
	if c.kinds[m] != testserver.Limitkv {
		return nil
	}
	ctx := context.Background()
	conn := c.conns[m].Conn()
	defer conn.Close()
	seen := map[string]string{}
	for _, k := range masterKeys(m, 20) {
		k = "rl:{" + k + "}"
		for range 3 {
			if err := conn.Do(ctx, "RL.FIXED", k, 10, "1h").Err(); err != nil {
				c.t.Fatalf("RL.FIXED %s on %s: %v", k, c.addr(m), err)
			}
		}
		if n, err := conn.Do(ctx, "WAIT", 1, 5000).Int64(); err != nil || n < 1 {
			c.t.Fatalf("WAIT after RL.FIXED %s: %d %v", k, n, err)
		}
		v, err := conn.Do(ctx, "RL.FIXED_RO", k, 10, "1h").Int64Slice()
		if err != nil || len(v) < 3 {
			c.t.Fatalf("RL.FIXED_RO %s: %v %v", k, v, err)
		}
		seen[k] = fmt.Sprint(v[:3])
	}
	return seen
}

// checkDecisions requires each key of ackedDecisions to answer
// RL.FIXED_RO's allowed, limit and remaining as before the failover:
// the new master has every decision acknowledged.
func checkDecisions(t *testing.T, cc *redis.ClusterClient, seen map[string]string) {
	t.Helper()
	ctx := context.Background()
	for k, want := range seen {
		v, err := cc.Do(ctx, "RL.FIXED_RO", k, 10, "1h").Int64Slice()
		if err != nil || len(v) < 3 || fmt.Sprint(v[:3]) != want {
			t.Fatalf("RL.FIXED_RO %s after the failover: %v %v, want %s as before", k, v, err, want)
		}
	}
}

// checkValues reads keys through the cluster, each of which must hold
// value. A request that fails is tried again, as an application would,
// until the client has learnt where the slot went; a wrong value fails
// at once.
func checkValues(t *testing.T, cc *redis.ClusterClient, keys []string, value string) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(clusterWait)
	for _, k := range keys {
		for {
			v, err := cc.Get(ctx, k).Result()
			if err == nil && v == value {
				break
			}
			if err == nil || err == redis.Nil || time.Now().After(deadline) {
				t.Fatalf("GET %s through the cluster: %q %v, want the acknowledged %q", k, v, err, value)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// load sends decisions and writes through a cluster client until stopped,
// counting the requests that succeeded, and the errors by text.
type load struct {
	stop   chan struct{}
	wg     sync.WaitGroup
	ok     atomic.Int64
	mu     sync.Mutex
	errors map[string]int
}

func startLoad(cc *redis.ClusterClient, workers int) *load {
	l := &load{stop: make(chan struct{}), errors: map[string]int{}}
	keys := slotKeys()
	for w := range workers {
		l.wg.Go(func() {
			ctx := context.Background()
			for i := w; ; i += workers {
				select {
				case <-l.stop:
					return
				default:
				}
				k := "load:" + keys[(i*7919)%clusterSlots]
				err := cc.Incr(ctx, k).Err()
				if err == nil {
					l.ok.Add(1)
					continue
				}
				l.mu.Lock()
				msg := err.Error()
				if len(msg) > 40 {
					msg = msg[:40]
				}
				l.errors[msg]++
				l.mu.Unlock()
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	return l
}

func (l *load) end() map[string]int {
	close(l.stop)
	l.wg.Wait()
	return l.errors
}

// waitMaster waits until every live node sees node r as the master of
// the slots of range m and says the cluster is ok, and returns how long
// it took from since.
func (c *testCluster) waitMaster(r, m int, since time.Time) time.Duration {
	c.t.Helper()
	rng := slotRanges(3)[m]
	deadline := time.Now().Add(clusterWait)
	for {
		done := true
		for i := range c.nodes {
			if c.nodes[i].Exited() {
				continue
			}
			if c.view(i).state != "ok" {
				done = false
				break
			}
			own := c.ownersQuiet(i)
			if own == nil || own[rng[0]] != r || own[rng[1]] != r {
				done = false
				break
			}
		}
		if done {
			return time.Since(since)
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for i := range c.nodes {
				if !c.nodes[i].Exited() {
					v := c.view(i)
					fmt.Fprintf(&b, "--- %s %s: %s\n%s\n", c.kinds[i], c.addr(i), v.state, v.nodes)
				}
			}
			c.t.Fatalf("node %s did not become the master of slots %d-%d within %v:\n%s", c.addr(r), rng[0], rng[1], clusterWait, b.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// becameMaster reports whether node r serves the first slot of range m
// in its own view within d.
func (c *testCluster) becameMaster(r, m int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if own := c.ownersQuiet(r); own != nil && own[slotRanges(3)[m][0]] == r {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// ownersQuiet is owners without failing the test: nil when node i does
// not answer.
func (c *testCluster) ownersQuiet(i int) []int {
	slots, err := c.conns[i].ClusterSlots(context.Background()).Result()
	if err != nil {
		return nil
	}
	own := make([]int, clusterSlots)
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

// restart starts node i again from its directory, as it was started.
func (c *testCluster) restart(i int) {
	c.t.Helper()
	old := c.nodes[i]
	s := startProcess(c.root, testserver.Spec{Kind: old.Kind, Bin: old.Bin, Args: old.Args, Addr: old.Addr, Dir: old.Dir, WorkDir: old.Dir})
	c.nodes[i] = s
	c.conns[i] = goRedis(c.root, s.Addr, 2)
}

// waitReplicaOf waits until node i replicates node m, with its link up
// and as many keys as m.
func (c *testCluster) waitReplicaOf(i, m int) {
	c.t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(clusterWait)
	for {
		role, err := c.conns[i].Do(ctx, "ROLE").Slice()
		if err == nil && len(role) >= 4 && role[0] == "slave" && testserver.Addr(int(role[2].(int64))) == c.addr(m) && role[3] == "connected" {
			a, errA := c.conns[i].DBSize(ctx).Result()
			b, errB := c.conns[m].DBSize(ctx).Result()
			if errA == nil && errB == nil && a == b {
				return
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s did not become an in-sync replica of %s within %v: ROLE %v %v", c.addr(i), c.addr(m), clusterWait, role, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// clusterKillMaster kills master m under load and follows the failover,
// then restarts m, which must come back as its replica's replica.
func clusterKillMaster(c *testCluster, m int) {
	t := c.t
	r := c.replicaOf(m)
	cc := c.clusterClient([]int{0, 1, 2, 3, 4, 5})
	checkSlotsReachable(t, cc)
	acked := c.ackedWrites(m, masterKeys(m, 50), "acked-"+strconv.Itoa(m))
	limited := c.ackedDecisions(m)
	// The load's client has go-redis's defaults, as an application's
	// would: its requests for the dead master's slots fail fast and make
	// it reload the slots' owners.
	lc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{c.addr(0), c.addr(1), c.addr(2), c.addr(3), c.addr(4), c.addr(5)}})
	defer lc.Close()
	l := startLoad(lc, 8)
	for deadline := time.Now().Add(clusterWait); l.ok.Load() < 100; {
		if time.Now().After(deadline) {
			t.Fatalf("the load made no progress before the kill: %v", l.errors)
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.nodes[m].Kill()
	killed := time.Now()
	took := c.waitMaster(r, m, killed)
	t.Logf("failover: %s %s replaced %s %s after %v (node timeout %v)", c.kinds[r], c.addr(r), c.kinds[m], c.addr(m), took.Round(10*time.Millisecond), failoverNodeTimeout)
	// Clients go on: the load's requests succeed again.
	before := l.ok.Load()
	deadline := time.Now().Add(clusterWait)
	for l.ok.Load() < before+100 {
		if time.Now().After(deadline) {
			t.Fatalf("the load made no progress after the failover: %v", l.errors)
		}
		time.Sleep(10 * time.Millisecond)
	}
	errs := l.end()
	t.Logf("load during the failover: %d requests, errors %v", l.ok.Load(), errs)
	// go-redis's ClusterClient keeps sending some slots' requests to the
	// dead node for up to a minute, on redis-server clusters as well: the
	// checks use a client that learns the slots afresh.
	lc = redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{c.addr(r)}})
	defer lc.Close()
	checkValues(t, lc, acked, "acked-"+strconv.Itoa(m))
	checkDecisions(t, lc, limited)
	t.Logf("acknowledged writes read back %v after the kill", time.Since(killed).Round(10*time.Millisecond))

	// The old master comes back as a replica of the new one.
	c.restart(m)
	start := time.Now()
	c.waitReplicaOf(m, r)
	t.Logf("the old master is a replica in sync after %v", time.Since(start).Round(10*time.Millisecond))
	c.waitAgree(6)
	t.Logf("all nodes agree after %v", time.Since(start).Round(10*time.Millisecond))
	checkValues(t, lc, acked, "acked-"+strconv.Itoa(m))
	checkSlotsReachable(t, lc)
}

// checkSlotsReachable writes and reads a key in every slot through the
// cluster.
func checkSlotsReachable(t *testing.T, cc *redis.ClusterClient) {
	t.Helper()
	writeSlotKeys(t, cc)
	checkSlotKeys(t, cc)
}

// clusterManualFailover: CLUSTER FAILOVER on the replica of the first
// range's master moves the slots to it with no acknowledged write lost,
// then FORCE and TAKEOVER move them back and forth.
func clusterManualFailover(c *testCluster) {
	t := c.t
	ctx := context.Background()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{c.addr(0), c.addr(1), c.addr(2), c.addr(3), c.addr(4), c.addr(5)}})
	defer cc.Close()
	for step, mode := range []string{"", "FORCE", "TAKEOVER"} {
		own := c.owners(0)
		m := own[slotRanges(3)[0][0]]
		r := c.replicaOf(m)
		value := "manual-" + strconv.Itoa(step)
		acked := c.ackedWrites(m, masterKeys(0, 50), value)
		l := startLoad(cc, 4)
		args := []any{"CLUSTER", "FAILOVER"}
		if mode != "" {
			args = append(args, mode)
		}
		// A replica holds one election per twice the auth timeout (8 s
		// here), as in Redis: a manual failover asked for sooner, by a
		// replica that has just won one, times out and is asked again.
		start := time.Now()
		for attempt := 1; ; attempt++ {
			if err := c.conns[r].Do(ctx, args...).Err(); err != nil {
				t.Fatalf("%v on %s %s: %v", args, c.kinds[r], c.addr(r), err)
			}
			if c.becameMaster(r, 0, 6*time.Second) || attempt == 4 {
				break
			}
			t.Logf("%v on %s: not master yet, asking again", args, c.addr(r))
		}
		took := c.waitMaster(r, 0, start)
		t.Logf("CLUSTER FAILOVER %s: %s %s took the slots of %s after %v", mode, c.kinds[r], c.addr(r), c.addr(m), took.Round(10*time.Millisecond))
		c.waitReplicaOf(m, r)
		c.waitAgree(6)
		errs := l.end()
		t.Logf("load during CLUSTER FAILOVER %s: %d requests, errors %v", mode, l.ok.Load(), errs)
		checkValues(t, cc, acked, value)
	}
	// The texts of what cannot be done.
	own := c.owners(0)
	m := own[slotRanges(3)[0][0]]
	for _, tc := range []struct {
		node int
		args []any
		want string
	}{
		{m, []any{"CLUSTER", "FAILOVER"}, "ERR You should send CLUSTER FAILOVER to a replica"},
		{c.replicaOf(m), []any{"CLUSTER", "FAILOVER", "NOW"}, "ERR syntax error"},
		{c.replicaOf(m), []any{"CLUSTER", "FAILOVER", "FORCE", "x"}, "ERR unknown subcommand or wrong number of arguments for 'FAILOVER'. Try CLUSTER HELP."},
	} {
		if err := c.conns[tc.node].Do(ctx, tc.args...).Err(); err == nil || err.Error() != tc.want {
			t.Errorf("%v on %s: %v, want %q", tc.args, c.kinds[tc.node], err, tc.want)
		}
	}
}

// TestClusterReplicaMigration: in a cluster of three masters where the
// first has two replicas, killing the only replica of another master
// leaves it orphaned, and after Redis's delay one of the first master's
// replicas migrates to it and takes its data (cluster-migration-barrier
// 1: the first master keeps one).
func TestClusterReplicaMigration(t *testing.T) {
	for _, kind := range []string{testserver.Limitkv, testserver.Redis} {
		t.Run(kind, func(t *testing.T) {
			c := startClusterNodesTimeout(t, repeatKind(kind, 7), failoverNodeTimeout)
			c.create(6, 1)
			c.cliOK([]string{"--cluster", "add-node", c.addr(6), c.addr(0), "--cluster-slave", "--cluster-master-id", c.id(0)},
				"[OK] New node added correctly.")
			c.waitAgree(7)
			cc := c.clusterClient([]int{0, 1, 2})
			writeSlotKeys(t, cc)
			orphan := 1
			victim := c.replicaOf(orphan)
			spare := []int{}
			for i := 3; i < 7; i++ {
				if i != victim && c.replicaOfQuiet(i) == 0 {
					spare = append(spare, i)
				}
			}
			if len(spare) != 2 {
				t.Fatalf("the first master has replicas %v, want two", spare)
			}
			c.nodes[victim].Kill()
			killed := time.Now()
			deadline := killed.Add(clusterWait)
			for {
				moved := -1
				for _, i := range spare {
					if c.replicaOfQuiet(i) == orphan {
						moved = i
					}
				}
				if moved >= 0 {
					t.Logf("%s %s migrated to the orphaned master after %v", c.kinds[moved], c.addr(moved), time.Since(killed).Round(10*time.Millisecond))
					c.waitReplicaOf(moved, orphan)
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no replica of the first master migrated to the orphaned one within %v:\n%s", clusterWait, c.view(0).nodes)
				}
				time.Sleep(50 * time.Millisecond)
			}
			checkSlotKeys(t, cc)
		})
	}
}

// replicaOfQuiet is the index of the node that node i replicates, -1
// when it replicates none that is known or does not answer.
func (c *testCluster) replicaOfQuiet(i int) int {
	role, err := c.conns[i].Do(context.Background(), "ROLE").Slice()
	if err != nil || len(role) < 3 || role[0] != "slave" {
		return -1
	}
	addr := testserver.Addr(int(role[2].(int64)))
	return slices.IndexFunc(c.nodes, func(n *server) bool { return n.Addr == addr })
}

// clusterRestartAll: a named policy set on one master, and one deleted,
// stay as they were on every limitkv node after every node of the cluster
// restarts, and the cluster comes back whole from its nodes.conf files.
func clusterRestartAll(c *testCluster) {
	t := c.t
	ctx := context.Background()
	var lk []int
	for i, k := range c.kinds {
		if k == testserver.Limitkv {
			lk = append(lk, i)
		}
	}
	set := func(i int, args ...any) {
		t.Helper()
		if err := c.conns[i].Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%v on %s: %v", args, c.addr(i), err)
		}
	}
	var masters []int
	for _, i := range lk {
		if c.replicaOfQuiet(i) < 0 {
			masters = append(masters, i)
		}
	}
	set(masters[0], "RL.POLICY", "SET", "kept", "SLIDE", "7", "1h")
	set(masters[0], "RL.POLICY", "SET", "dropped", "FIXED", "3", "1m")
	// The deletion comes after the other master has the policy: a
	// deletion within the same millisecond as the change it races may
	// lose to it (on every node alike).
	last := masters[len(masters)-1]
	for deadline := time.Now().Add(clusterWait); c.conns[last].Do(ctx, "RL.POLICY", "GET", "dropped").Err() != nil; {
		if time.Now().After(deadline) {
			t.Fatalf("the policy set on %s did not reach %s", c.addr(masters[0]), c.addr(last))
		}
		time.Sleep(20 * time.Millisecond)
	}
	set(last, "RL.POLICY", "DEL", "dropped")
	want := func(i int) {
		t.Helper()
		deadline := time.Now().Add(clusterWait)
		for {
			kept, errK := c.conns[i].Do(ctx, "RL.POLICY", "GET", "kept").StringSlice()
			_, errD := c.conns[i].Do(ctx, "RL.POLICY", "GET", "dropped").StringSlice()
			if errK == nil && strings.Contains(strings.Join(kept, " "), "7") && errD != nil && strings.Contains(errD.Error(), "no such policy") {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("RL.POLICY GET on %s: kept %v %v, dropped %v", c.addr(i), kept, errK, errD)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, i := range lk {
		want(i)
	}
	for i := range c.nodes {
		c.nodes[i].Stop()
	}
	for i := range c.nodes {
		c.restart(i)
	}
	c.waitAgree(6)
	for _, i := range lk {
		want(i)
	}
}
