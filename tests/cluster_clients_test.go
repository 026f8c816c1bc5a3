package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/limitkv/limitkv/internal/testserver"
)

// clusterClients drives the created cluster with the cluster-aware
// clients users have: go-redis's ClusterClient, redis-py's RedisCluster,
// ioredis's Cluster and redis-cli -c. Each is given one node and must find
// the others and route every key to the master of its slot.
func clusterClients(c *testCluster) {
	t := c.t
	ctx := context.Background()
	cc := c.clusterClient([]int{4})
	writeSlotKeys(t, cc)
	checkSlotKeys(t, cc)
	var total int64
	for i := range 3 {
		n, err := c.conns[i].DBSize(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	if total != clusterSlots {
		t.Fatalf("the masters hold %d keys together, want the %d written", total, clusterSlots)
	}
	c.cliOK([]string{"--cluster", "info", c.addr(0)}, "[OK] 16384 keys in 3 masters.", "1.00 keys per slot on average.")

	c.run("redis-cli", clusterRedisCLIFollows)
	if slices.Contains(c.kinds[:3], testserver.Limitkv) {
		c.run("rate-limits", func(c *testCluster) { clusterRateLimits(c, cc) })
	}
	c.run("redis-py", clusterRedisPy)
	c.run("ioredis", clusterIORedis)
	checkSlotKeys(t, cc)
}

// clusterRedisCLIFollows: redis-cli -c, given a node that does not serve a
// key, follows the MOVED to the node that does.
func clusterRedisCLIFollows(c *testCluster) {
	t := c.t
	own := c.owners(0)
	keys := slotKeys()
	for m := range 3 {
		slot := slotRanges(3)[m][0] + 7
		other := (m + 1) % 3
		key := keys[slot]
		c.cliOK([]string{"-c", "-p", strconv.Itoa(c.nodes[other].Port()), "SET", key, "cli-" + key}, "OK")
		if out := c.cliOK([]string{"-c", "-p", strconv.Itoa(c.nodes[(m+2)%3].Port()), "GET", key}); strings.TrimSpace(out) != "cli-"+key {
			t.Fatalf("redis-cli -c GET %s from %s: %q", key, c.addr((m+2)%3), out)
		}
		if v, err := c.conns[own[slot]].Get(context.Background(), key).Result(); err != nil || v != "cli-"+key {
			t.Fatalf("GET %s on the master of slot %d after redis-cli -c SET: %q %v", key, slot, v, err)
		}
		c.conns[own[slot]].Set(context.Background(), key, slotValue(slot), 0)
	}
}

// clusterRateLimits: limitkv's rate-limit commands through the cluster
// client, each routed by its key to the limitkv master of its slot, with a
// limit of 3 an hour: 3 allowed, then denied, on keys in slots of every
// limitkv master.
func clusterRateLimits(c *testCluster, cc *redis.ClusterClient) {
	t := c.t
	ctx := context.Background()
	own := c.owners(0)
	for m := range 3 {
		if c.kinds[m] != testserver.Limitkv {
			continue
		}
		r := slotRanges(3)[m]
		for j, cmd := range [][]any{
			{"RL.SLIDE", "", 3, "1h"},
			{"RL.FIXED", "", 3, "1h"},
			{"CL.THROTTLE", "", 2, 3, 3600},
		} {
			key := fmt.Sprintf("rl:%d:%d", m, j)
			for slotOf(key) < r[0] || slotOf(key) > r[1] {
				key += "+"
			}
			cmd[1] = key
			for i := 1; i <= 4; i++ {
				d, err := cc.Do(ctx, cmd...).Int64Slice()
				if err != nil || len(d) != 5 {
					t.Fatalf("%v through the cluster client: %v %v", cmd, d, err)
				}
				// RL commands answer allowed 1 first; CL.THROTTLE, as
				// redis-cell, limited 1.
				denied := d[0] == 0
				if cmd[0] == "CL.THROTTLE" {
					denied = d[0] == 1
				}
				if denied != (i > 3) {
					t.Fatalf("%v request %d: %v, want %s", cmd, i, d, map[bool]string{false: "allowed", true: "denied"}[i > 3])
				}
			}
			if n, err := c.conns[own[slotOf(key)]].Exists(ctx, key).Result(); err != nil || n != 1 {
				t.Fatalf("%s is not on %s, the master of its slot: %d %v", key, c.addr(own[slotOf(key)]), n, err)
			}
		}
	}
}

// clusterRedisPy: redis-py's RedisCluster under Debian's python3 writes and
// reads keys in slots of every master.
func clusterRedisPy(c *testCluster) {
	t := c.t
	if _, err := os.Stat(examplePython); err != nil {
		exampleNeeds(t, examplePython)
	}
	if out, err := exec.Command(examplePython, "-c", "import redis.cluster").CombinedOutput(); err != nil {
		exampleNeeds(t, "python3-redis with redis.cluster ("+strings.TrimSpace(string(out))+")")
	}
	const script = `
import sys
from redis.cluster import RedisCluster
rc = RedisCluster(host="127.0.0.1", port=int(sys.argv[1]), decode_responses=True)
keys = sys.argv[2:]
for k in keys:
    rc.set("py:" + k, "py-" + k)
for k in keys:
    v = rc.get("py:" + k)
    if v != "py-" + k:
        sys.exit("GET py:%s = %r" % (k, v))
    rc.delete("py:" + k)
print("ok %d" % len(keys))
`
	keys := clientKeys()
	args := append([]string{"-c", script, strconv.Itoa(c.nodes[5].Port())}, keys...)
	out := runClient(c, exec.Command(examplePython, args...))
	if strings.TrimSpace(out) != "ok "+strconv.Itoa(len(keys)) {
		t.Fatalf("redis-py RedisCluster: %s", out)
	}
}

// clusterIORedis: ioredis's Cluster, from the Node example's dependencies,
// writes and reads keys in slots of every master.
func clusterIORedis(c *testCluster) {
	t := c.t
	dir, _ := filepath.Abs("../examples/node")
	node, err := exec.LookPath("node")
	if err != nil {
		exampleNeeds(t, "node")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "ioredis", "package.json")); err != nil {
		exampleNeeds(t, "examples/node/node_modules (npm ci in examples/node)")
	}
	const script = `
const Redis = require("ioredis");
const [port, ...keys] = process.argv.slice(1);
const rc = new Redis.Cluster([{ host: "127.0.0.1", port: Number(port) }]);
(async () => {
  for (const k of keys) await rc.set("io:" + k, "io-" + k);
  for (const k of keys) {
    const v = await rc.get("io:" + k);
    if (v !== "io-" + k) throw new Error("GET io:" + k + " = " + v);
    await rc.del("io:" + k);
  }
  console.log("ok " + keys.length);
  rc.disconnect();
})().catch((e) => { console.error(e); process.exit(1); });
`
	keys := clientKeys()
	cmd := exec.Command(node, append([]string{"-e", script, strconv.Itoa(c.nodes[3].Port())}, keys...)...)
	cmd.Dir = dir
	out := runClient(c, cmd)
	if strings.TrimSpace(out) != "ok "+strconv.Itoa(len(keys)) {
		t.Fatalf("ioredis Cluster: %s", out)
	}
}

// clientKeys are keys spread over the slots: a hundred, far apart.
func clientKeys() []string {
	var keys []string
	for s := 0; s < clusterSlots; s += clusterSlots / 100 {
		keys = append(keys, slotKeys()[s])
	}
	return keys
}

// runClient runs a client program to completion, bounded, and returns its
// output; a failure fails the test with it.
func runClient(c *testCluster, cmd *exec.Cmd) string {
	c.t.Helper()
	done := make(chan struct{})
	var out []byte
	var err error
	go func() {
		out, err = cmd.CombinedOutput()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		<-done
		c.t.Fatalf("%s did not finish in 2 minutes:\n%s", cmd.Path, out)
	}
	if err != nil {
		c.t.Fatalf("%s: %v\n%s", cmd.Path, err, out)
	}
	return string(out)
}
