package tests

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestReplicationBlockingPops: pops made for blocked clients (lists,
// sorted sets, BLMOVE, served by plain pushes, by MULTI and by scripts)
// and the immediate forms reach a replica, which ends up with the
// master's keyspace; a CLIENT PAUSE WRITE on the master holds its
// clients' writes back but not the replica's stream.
func TestReplicationBlockingPops(t *testing.T) {
	ctx := context.Background()
	m := startMaster(t, "--persistence", "no")
	mc := goRedis(t, m.Addr, 2)
	r := startReplicaOf(t, m, "", "--persistence", "no")
	rc := goRedis(t, r.Addr, 2)
	waitInSync(t, mc, rc)

	blocked := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for replInfo(t, mc, "clients", "blocked_clients") != strconv.Itoa(n) {
			if time.Now().After(deadline) {
				t.Fatalf("blocked_clients never reached %d", n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	var wg sync.WaitGroup
	results := make([]string, 6)
	cmds := [][]any{
		{"BLPOP", "q", "0"},
		{"BRPOP", "q", "0"},
		{"BLMOVE", "src", "q", "RIGHT", "LEFT", "0"},
		{"BZPOPMIN", "z", "0"},
		{"BZMPOP", "0", "1", "z", "MAX", "COUNT", "2"},
		{"BLMPOP", "0", "1", "tx", "LEFT", "COUNT", "2"},
	}
	for i, cmd := range cmds {
		c := goRedis(t, m.Addr, 2)
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := c.Do(ctx, cmd...).Result()
			if err != nil {
				t.Errorf("%v: %v", cmd, err)
			}
			results[i] = toString(v)
		}()
		blocked(i + 1)
	}
	mc.RPush(ctx, "q", "a", "b", "c", "d")
	mc.RPush(ctx, "src", "s1", "s2")
	mc.ZAdd(ctx, "z", redis.Z{Score: 1, Member: "m1"}, redis.Z{Score: 2, Member: "m2"}, redis.Z{Score: 3, Member: "m3"}, redis.Z{Score: 4, Member: "m4"})
	pipe := mc.TxPipeline()
	pipe.RPush(ctx, "tx", "t1", "t2", "t3")
	pipe.LPop(ctx, "q")
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	want := []string{"[q a]", "[q d]", "s2", "[z m1 1]", "[z [[m4 4] [m3 3]]]", "[tx [t1 t2]]"}
	for i := range want {
		if results[i] != want[i] {
			t.Errorf("%v got %s, want %s", cmds[i], results[i], want[i])
		}
	}
	// Immediate forms, a script that pushes to a waiting client.
	mc.Do(ctx, "LMPOP", "1", "q", "RIGHT")
	mc.Do(ctx, "ZMPOP", "1", "z", "MIN")
	mc.Do(ctx, "BRPOPLPUSH", "src", "q", "0")
	c := goRedis(t, m.Addr, 2)
	done := make(chan string)
	go func() {
		v, _ := c.Do(ctx, "BLPOP", "fromscript", "0").Result()
		done <- toString(v)
	}()
	blocked(1)
	mc.Eval(ctx, "redis.call('rpush', KEYS[1], 'x', 'y'); return 1", []string{"fromscript"})
	if v := <-done; v != "[fromscript x]" {
		t.Errorf("served by a script: %s", v)
	}
	mc.Set(ctx, "marker", "1", 0)
	waitInSync(t, mc, rc)
	sameKeyspace(t, mc, rc)

	// A write pause: the replica keeps its link, the paused write runs
	// once the pause ends, and reaches it.
	if err := mc.Do(ctx, "CLIENT", "PAUSE", "100000", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	w := goRedis(t, m.Addr, 2)
	wrote := make(chan error)
	go func() { wrote <- w.Set(ctx, "paused", "v", 0).Err() }()
	blocked(1)
	if n, err := mc.Do(ctx, "WAIT", 1, 1000).Int(); err != nil || n != 1 {
		t.Errorf("WAIT during the pause: %d, %v", n, err)
	}
	if replInfo(t, rc, "replication", "master_link_status") != "up" {
		t.Error("the replica's link went down during the pause")
	}
	mc.Do(ctx, "CLIENT", "UNPAUSE")
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	waitInSync(t, mc, rc)
	sameKeyspace(t, mc, rc)
	if v, _ := rc.Get(ctx, "paused").Result(); v != "v" {
		t.Errorf("replica GET paused = %q", v)
	}
}

func toString(v any) string {
	switch x := v.(type) {
	case []any:
		s := "["
		for i, e := range x {
			if i > 0 {
				s += " "
			}
			s += toString(e)
		}
		return s + "]"
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case int64:
		return strconv.FormatInt(x, 10)
	case nil:
		return "nil"
	}
	return "?"
}
