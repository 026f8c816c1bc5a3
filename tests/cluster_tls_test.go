package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/limitkv/limitkv/cluster"
	"github.com/limitkv/limitkv/internal/testserver"
)

// A TLS cluster (tls-cluster yes): the bus runs over TLS with the
// servers' certificates, nodes are known by their TLS ports, and a
// plaintext client is redirected to the plaintext port, as Redis does.
func TestClusterTLS(t *testing.T) {
	cli := redisCLIPath(t)
	testserver.TrackSources()
	f := newTLSFiles(t)
	clientCert, clientKey := f.client.Write(t, f.dir, "client")
	var tlsPorts, plainPorts []int
	var taken []int
	for range 3 {
		tp, err := testserver.FreeClusterPort(taken...)
		if err != nil {
			t.Fatal(err)
		}
		taken = append(taken, tp)
		tlsPorts = append(tlsPorts, tp)
		pp := freePort(t)
		plainPorts = append(plainPorts, pp)
	}
	for i := range 3 {
		dir := t.TempDir()
		args := testserver.LimitkvArgs(plainPorts[i], dir, append(f.flags(tlsPorts[i], "--tls-cluster", "yes"),
			testserver.ClusterArgs(clusterNodeTimeout)...)...)
		startProcess(t, testserver.Spec{Kind: testserver.Limitkv, Bin: limitkvBin, Addr: testserver.Addr(plainPorts[i]), Dir: dir, Args: args})
	}
	create := []string{"--tls", "--cacert", f.caFile, "--cert", clientCert, "--key", clientKey, "--cluster", "create"}
	for _, p := range tlsPorts {
		create = append(create, testserver.Addr(p))
	}
	cmd := exec.Command(cli, append(create, "--cluster-yes")...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "[OK] All 16384 slots covered.") {
		t.Fatalf("redis-cli --tls --cluster create: %v\n%s", err, out)
	}

	ctx := context.Background()
	plain := make([]*redis.Client, 3)
	for i, p := range plainPorts {
		plain[i] = goRedis(t, testserver.Addr(p), 2)
	}
	waitFor(t, clusterWait, "the TLS cluster's nodes to agree", func() bool {
		for _, c := range plain {
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:3") {
				return false
			}
		}
		return true
	})
	tc := redis.NewClient(&redis.Options{Addr: testserver.Addr(tlsPorts[0]), TLSConfig: f.clientConfig(f.client), DialTimeout: 5 * time.Second})
	t.Cleanup(func() { tc.Close() })
	// A TLS client is shown the nodes' TLS ports.
	nodes := tc.ClusterNodes(ctx).Val()
	for i, p := range tlsPorts {
		if want := fmt.Sprintf("127.0.0.1:%d@%d", p, p+cluster.BusPortOffset); !strings.Contains(nodes, want) {
			t.Errorf("CLUSTER NODES does not know node %d by its TLS port (%s):\n%s", i, want, nodes)
		}
	}
	// A key of the third master's slots, asked of the first.
	key := "k"
	for cluster.KeySlot([]byte(key)) < 10923 {
		key += "k"
	}
	slot := cluster.KeySlot([]byte(key))
	if err := plain[0].Get(ctx, key).Err(); err == nil || err.Error() != fmt.Sprintf("MOVED %d 127.0.0.1:%d", slot, plainPorts[2]) {
		t.Errorf("a plaintext client is redirected with %v, want the plaintext port %d", err, plainPorts[2])
	}
	// CLUSTER NODES and SLOTS name the nodes by the port the asking
	// client can use.
	for i := range 3 {
		if want := fmt.Sprintf("127.0.0.1:%d@%d", plainPorts[i], tlsPorts[i]+cluster.BusPortOffset); !strings.Contains(plain[1].ClusterNodes(ctx).Val(), want) {
			t.Errorf("CLUSTER NODES to a plaintext client lacks %s", want)
		}
	}
	if slots := plain[1].ClusterSlots(ctx).Val(); len(slots) != 3 || slots[2].Nodes[0].Addr != fmt.Sprintf("127.0.0.1:%d", plainPorts[2]) {
		t.Errorf("CLUSTER SLOTS to a plaintext client: %+v", slots)
	}
	if err := tc.Get(ctx, key).Err(); err == nil || err.Error() != fmt.Sprintf("MOVED %d 127.0.0.1:%d", slot, tlsPorts[2]) {
		t.Errorf("a TLS client is redirected with %v, want the TLS port %d", err, tlsPorts[2])
	}
	if slots := tc.ClusterSlots(ctx).Val(); len(slots) != 3 || slots[2].Nodes[0].Addr != fmt.Sprintf("127.0.0.1:%d", tlsPorts[2]) {
		t.Errorf("CLUSTER SLOTS to a TLS client: %+v", slots)
	}
}
