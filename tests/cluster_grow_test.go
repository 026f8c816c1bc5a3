package tests

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/limitkv/limitkv/internal/testserver"
)

// TestClusterGrow takes a cluster of three masters holding a key in every
// slot through the life redis-cli --cluster gives it: a master and its
// replica added, slots with their keys resharded to the new master, a
// rebalance onto an empty master, that master emptied and deleted, and a
// slot left migrating fixed; every key must be readable through the
// cluster after each step. In the mixed subtests nodes of one kind join a
// cluster of the other and take slots, with their keys, from it.
func TestClusterGrow(t *testing.T) {
	l, r := testserver.Limitkv, testserver.Redis
	t.Run("redis", func(t *testing.T) { clusterGrow(t, repeatKind(r, 6), true) })
	t.Run("limitkv", func(t *testing.T) { clusterGrow(t, repeatKind(l, 6), true) })
	// Mixed: a node of one kind joins a cluster of the other and takes
	// slots, with their keys, from it; the rest of the life (rebalance,
	// del-node, fix) is each kind's own, run above, and would only make
	// the suite slower here.
	t.Run("mixed", func(t *testing.T) {
		t.Run("redis-joins-limitkv", func(t *testing.T) { clusterGrow(t, []string{l, l, l, r, r, r}, false) })
		t.Run("limitkv-joins-redis", func(t *testing.T) { clusterGrow(t, []string{r, r, r, l, l, l}, false) })
	})
}

// clusterGrow runs on six nodes: the first three make the cluster, the
// fourth joins as a master, the fifth as its replica, the sixth as the
// empty master of the rebalance. Without whole, it stops once the fourth
// holds the slots resharded to it.
func clusterGrow(t *testing.T, kinds []string, whole bool) {
	c := startClusterNodes(t, kinds)
	ctx := context.Background()
	c.create(3, 0)
	cc := c.clusterClient([]int{0})
	writeSlotKeys(t, cc)

	ids := make([]string, 6)
	for i := range ids {
		ids[i] = c.id(i)
	}
	slots := func(i int) int {
		t.Helper()
		own := c.owners(0)
		n := 0
		for _, o := range own {
			if o == i {
				n++
			}
		}
		return n
	}
	dbsize := func(i int) int64 {
		t.Helper()
		n, err := c.conns[i].DBSize(ctx).Result()
		if err != nil {
			t.Fatalf("DBSIZE on %s %s: %v", c.kinds[i], c.addr(i), err)
		}
		return n
	}
	added := "[OK] New node added correctly."

	// A policy set before a node joins reaches it once it has.
	if kinds[0] == testserver.Limitkv {
		if err := c.conns[0].Do(ctx, "RL.POLICY", "SET", "login", "SLIDE", "5", "1h").Err(); err != nil {
			t.Fatal(err)
		}
	}
	c.cliOK([]string{"--cluster", "add-node", c.addr(3), c.addr(0)}, added)
	c.waitAgree(4)
	if kinds[0] == testserver.Limitkv && kinds[3] == testserver.Limitkv {
		waitFor(t, clusterWait, "the policy set before it joined to reach "+c.addr(3), func() bool {
			v, err := c.conns[3].Do(ctx, "RL.POLICY", "GET", "login").StringSlice()
			return err == nil && strings.Join(v, " ") == "SLIDE 5 1h"
		})
	}
	c.cliOK([]string{"--cluster", "add-node", c.addr(4), c.addr(1), "--cluster-slave", "--cluster-master-id", ids[3]}, added)
	c.waitAgree(5)
	role, err := c.conns[4].Do(ctx, "ROLE").Slice()
	if err != nil || len(role) < 3 || role[0] != "slave" || testserver.Addr(int(role[2].(int64))) != c.addr(3) {
		t.Fatalf("ROLE of the node added with --cluster-slave: %v %v, want a replica of %s", role, err, c.addr(3))
	}

	// 100 slots, each with its key, from the first master to the new one.
	c.cliOK([]string{"--cluster", "reshard", c.addr(0), "--cluster-from", ids[0], "--cluster-to", ids[3],
		"--cluster-slots", "100", "--cluster-yes"}, "Ready to move 100 slots.", "Moving slot 0 from "+c.addr(0)+" to "+c.addr(3))
	c.waitAgree(5)
	if n := slots(3); n != 100 {
		t.Fatalf("the new master serves %d slots after the reshard, want 100", n)
	}
	if n := dbsize(3); n != 100 {
		t.Fatalf("the new master holds %d keys after the reshard of 100 slots with a key each, want 100", n)
	}
	checkSlotKeys(t, c.clusterClient([]int{1}))
	waitFor(t, clusterWait, "the new replica to hold the 100 keys of its master", func() bool { return dbsize(4) == 100 })
	c.cliOK([]string{"--cluster", "check", c.addr(4)}, "[OK] All nodes agree about slots configuration.", "[OK] All 16384 slots covered.")

	if !whole {
		return
	}

	// An empty master joins and the rebalance gives it its share.
	c.cliOK([]string{"--cluster", "add-node", c.addr(5), c.addr(2)}, added)
	c.waitAgree(6)
	c.cliOK([]string{"--cluster", "rebalance", c.addr(0), "--cluster-use-empty-masters"}, ">>> Rebalancing across 5 nodes. Total weight = 5.00")
	c.waitAgree(6)
	for _, i := range []int{0, 1, 2, 3, 5} {
		// The rebalance leaves every master within its default threshold
		// of 2% of an even share.
		if n := slots(i); n < 3276-66 || n > 3277+66 {
			t.Fatalf("master %s serves %d slots after the rebalance, want about 16384/5", c.addr(i), n)
		}
	}
	c.cliOK([]string{"--cluster", "rebalance", c.addr(1), "--cluster-use-empty-masters"}, "*** No rebalancing needed! All nodes are within the 2.00% threshold.")
	checkSlotKeys(t, c.clusterClient([]int{5}))

	// Emptied, the sixth node is deleted.
	n := slots(5)
	c.cliOK([]string{"--cluster", "reshard", c.addr(1), "--cluster-from", ids[5], "--cluster-to", ids[0],
		"--cluster-slots", strconv.Itoa(n), "--cluster-yes"}, fmt.Sprintf("Ready to move %d slots.", n))
	c.waitAgree(6)
	// A master that gives its last slot away becomes a replica of the
	// node that took it (cluster-allow-replica-migration, on by default),
	// as Redis's CLUSTER SETSLOT NODE makes it; as a replica it then
	// copies that master's keys.
	if n := slots(5); n != 0 {
		t.Fatalf("the emptied master still serves %d slots", n)
	}
	waitFor(t, clusterWait, "the emptied master to replicate the node that took its last slot", func() bool {
		role, err := c.conns[5].Do(ctx, "ROLE").Slice()
		return err == nil && len(role) >= 3 && role[0] == "slave" && testserver.Addr(int(role[2].(int64))) == c.addr(0)
	})
	c.cliOK([]string{"--cluster", "del-node", c.addr(0), ids[5]},
		fmt.Sprintf(">>> Removing node %s from cluster %s", ids[5], c.addr(0)),
		">>> Sending CLUSTER FORGET messages to the cluster...",
		">>> Sending CLUSTER RESET SOFT to the deleted node.")
	c.gone[5] = true
	c.waitAgree(6)
	checkSlotKeys(t, c.clusterClient([]int{2}))

	// A slot left migrating, with its key still at its owner: check
	// reports it, fix closes it.
	own := c.owners(0)
	slot := 16000
	from, to := own[slot], own[(slot+5000)%clusterSlots]
	if from == to {
		to = own[(slot+10000)%clusterSlots]
	}
	if err := c.conns[from].Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[to]).Err(); err != nil {
		t.Fatal(err)
	}
	out, code := c.cli("--cluster", "check", c.addr(0))
	want := fmt.Sprintf("[WARNING] Node %s has slots in migrating state %d.", c.addr(from), slot)
	if code == 0 || !strings.Contains(out, want) || !strings.Contains(out, fmt.Sprintf("[WARNING] The following slots are open: %d.", slot)) {
		t.Fatalf("--cluster check with slot %d migrating exited with %d, want an error and %q:\n%s", slot, code, want, out)
	}
	c.cliOK([]string{"--cluster", "fix", c.addr(0)}, fmt.Sprintf(">>> Fixing open slot %d", slot))
	c.waitAgree(6)
	out = c.cliOK([]string{"--cluster", "check", c.addr(1)}, "[OK] All nodes agree about slots configuration.", "[OK] All 16384 slots covered.")
	if strings.Contains(out, "[WARNING]") {
		t.Fatalf("--cluster check after --cluster fix still warns:\n%s", out)
	}
	checkSlotKeys(t, c.clusterClient([]int{3}))
}
