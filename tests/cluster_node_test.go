package tests

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/limitkv/limitkv/internal/testserver"
)

// A cluster node is its nodes.conf: restarted, it comes back with its id,
// epochs and slots; with a nodes.conf it cannot read it refuses to start,
// naming the line, rather than joining its cluster as a stranger.
func TestClusterNodesConfRestart(t *testing.T) {
	testserver.TrackSources()
	dir := t.TempDir()
	port, err := testserver.FreeClusterPort()
	if err != nil {
		t.Fatal(err)
	}
	args := testserver.LimitkvArgs(port, dir, testserver.ClusterArgs(clusterNodeTimeout)...)
	start := func() *server {
		return startProcess(t, testserver.Spec{Kind: testserver.Limitkv, Bin: limitkvBin, Addr: testserver.Addr(port), Dir: dir, Args: args})
	}
	ctx := context.Background()
	s := start()
	c := goRedis(t, s.Addr, 2)
	for _, cmd := range [][]any{
		{"CLUSTER", "ADDSLOTSRANGE", "0", "99"},
		{"CLUSTER", "ADDSLOTS", "200"},
		{"CLUSTER", "SET-CONFIG-EPOCH", "7"},
	} {
		if err := c.Do(ctx, cmd...).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	id := c.Do(ctx, "CLUSTER", "MYID").Val()
	line := func() string {
		t.Helper()
		out, err := goRedis(t, s.Addr, 2).ClusterNodes(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "myself") {
				f := strings.Fields(l)
				// id, address, flags, master, epoch and slots: not the
				// ping and pong times.
				return strings.Join(append(f[:4:4], f[6:]...), " ")
			}
		}
		t.Fatalf("no myself line in CLUSTER NODES:\n%s", out)
		return ""
	}
	before := line()
	if !strings.Contains(before, " 7 connected 0-99 200") {
		t.Fatalf("CLUSTER NODES before the restart: %s", before)
	}
	s.Stop()
	s = start()
	if after := line(); after != before {
		t.Fatalf("after a restart the node is\n%s\nwas\n%s", after, before)
	}
	if got := goRedis(t, s.Addr, 2).Do(ctx, "CLUSTER", "MYID").Val(); got != id {
		t.Fatalf("MYID after the restart: %s, was %s", got, id)
	}
	info := goRedis(t, s.Addr, 2).ClusterInfo(ctx).Val()
	if !strings.Contains(info, "cluster_current_epoch:7\r\n") || !strings.Contains(info, "cluster_my_epoch:7\r\n") {
		t.Fatalf("CLUSTER INFO after the restart:\n%s", info)
	}
	s.Stop()

	path := filepath.Join(dir, "nodes.conf")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	lines = append(lines[:1], append([]string{"this is not a node\n"}, lines[1:]...)...)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runBinary(t, args...)
	if err == nil {
		t.Fatalf("limitkv started with a damaged nodes.conf:\n%s", out)
	}
	if !strings.Contains(out, "nodes.conf") || !strings.Contains(out, "line 2") {
		t.Fatalf("the refusal does not name the file and its line:\n%s", out)
	}
	if got, _ := os.ReadFile(path); !strings.Contains(string(got), "this is not a node") {
		t.Fatal("the damaged nodes.conf was replaced")
	}
}
