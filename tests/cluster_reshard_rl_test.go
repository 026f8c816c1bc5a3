package tests

import (
	"context"
	"fmt"
	"testing"

	"github.com/limitkv/limitkv/internal/testserver"
)

// TestClusterReshardRateLimit: in a cluster of three limitkv masters,
// rate-limit keys in the first 100 slots, each used a different number of
// times, move with their slots under redis-cli --cluster reshard (CLUSTER
// GETKEYSINSLOT, MIGRATE ... KEYS) to another master, and every key's
// remaining allowance is afterwards exactly what it was.
func TestClusterReshardRateLimit(t *testing.T) {
	c := startClusterNodes(t, repeatKind(testserver.Limitkv, 3))
	ctx := context.Background()
	c.create(3, 0)
	cc := c.clusterClient([]int{0})
	keys := slotKeys()[:100]
	remaining := func(key string) int64 {
		t.Helper()
		v, err := cc.Do(ctx, "RL.FIXED_RO", key, "10", "1h", "ALIGN", "FIRST").Int64Slice()
		if err != nil || len(v) != 5 {
			t.Fatalf("RL.FIXED_RO %s: %v %v", key, v, err)
		}
		return v[2]
	}
	before := make([]int64, len(keys))
	for s, k := range keys {
		for range 1 + s%7 {
			if err := cc.Do(ctx, "RL.FIXED", k, "10", "1h", "ALIGN", "FIRST").Err(); err != nil {
				t.Fatalf("RL.FIXED %s: %v", k, err)
			}
		}
		before[s] = remaining(k)
	}
	from, to := c.id(0), c.id(1)
	c.cliOK([]string{"--cluster", "reshard", c.addr(0), "--cluster-from", from, "--cluster-to", to,
		"--cluster-slots", "100", "--cluster-yes"}, "Ready to move 100 slots.", "Moving slot 0 from "+c.addr(0)+" to "+c.addr(1))
	c.waitAgree(3)
	own := c.owners(0)
	for s := range keys {
		if own[s] != 1 {
			t.Fatalf("slot %d is served by node %d after the reshard, want 1", s, own[s])
		}
		n, err := c.conns[1].Do(ctx, "CLUSTER", "COUNTKEYSINSLOT", s).Int64()
		if err != nil || n != 1 {
			t.Fatalf("CLUSTER COUNTKEYSINSLOT %d on the new owner: %d %v", s, n, err)
		}
	}
	if n, err := c.conns[0].DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("the old owner holds %d keys after the reshard (%v)", n, err)
	}
	for s, k := range keys {
		if got := remaining(k); got != before[s] {
			t.Errorf("%s (slot %d): %d remaining after the reshard, %d before", k, s, got, before[s])
		}
		if ttl, err := c.conns[1].PTTL(ctx, k).Result(); err != nil || ttl <= 0 {
			t.Errorf("%s at the new owner: PTTL %v %v, want the window's", k, ttl, err)
		}
	}
	ok, err := cc.Do(ctx, "RL.FIXED", keys[6], "10", "1h", "ALIGN", "FIRST").Int64Slice()
	if err != nil || fmt.Sprint(ok[:3]) != fmt.Sprint([]int64{1, 10, 2}) {
		t.Fatalf("RL.FIXED %s after the reshard: %v %v, want allowed with 2 left", keys[6], ok, err)
	}
}
