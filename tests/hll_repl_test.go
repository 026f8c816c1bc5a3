package tests

import (
	"context"
	"strconv"
	"testing"
)

// TestReplicatedHLLBitfieldSort: PFADD, PFCOUNT's cached count, PFMERGE,
// BITFIELD and SORT ... STORE (BY a pattern, every shard locked) reach a
// replica, which ends with the same keys, byte for byte.
func TestReplicatedHLLBitfieldSort(t *testing.T) {
	m := startMaster(t, "--persistence", "no")
	mc := goRedis(t, m.Addr, 2)
	r := startReplicaOf(t, m, "", "--persistence", "no")
	rc := goRedis(t, r.Addr, 2)
	waitInSync(t, mc, rc)
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3000; i++ {
		must(mc.PFAdd(ctx, "hll:"+strconv.Itoa(i%3), "e"+strconv.Itoa(i)).Err())
	}
	must(mc.PFCount(ctx, "hll:0").Err()) // caches the count in the string
	must(mc.PFMerge(ctx, "hll:all", "hll:0", "hll:1", "hll:2").Err())
	must(mc.PFCount(ctx, "hll:0", "hll:1").Err())
	must(mc.Do(ctx, "BITFIELD", "bf", "SET", "u8", "#3", "200", "INCRBY", "i5", "100", "-7", "OVERFLOW", "SAT", "INCRBY", "u8", "#3", "100").Err())
	for i := 0; i < 50; i++ {
		must(mc.RPush(ctx, "list", i).Err())
		must(mc.Set(ctx, "w_"+strconv.Itoa(i), (i*37)%50, 0).Err())
	}
	must(mc.Do(ctx, "SORT", "list", "BY", "w_*", "DESC", "GET", "#", "GET", "w_*", "STORE", "sorted").Err())
	must(mc.Do(ctx, "SORT", "list", "LIMIT", "5", "10", "ALPHA", "STORE", "sorted2").Err())
	waitInSync(t, mc, rc)
	sameKeyspace(t, mc, rc)
	for _, k := range []string{"hll:0", "hll:all", "bf"} {
		a, _ := mc.Get(ctx, k).Result()
		b, _ := rc.Get(ctx, k).Result()
		if a != b || a == "" {
			t.Fatalf("%s: master %q, replica %q", k, a, b)
		}
	}
}
