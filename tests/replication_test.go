package tests

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Replication, with real processes on loopback: a master and replicas
// that converge under a write load of every kind of key, replicas killed
// and restarted, expiry as replicas see it, WAIT and min-replicas, and
// promotion. Convergence is judged by DEBUG DIGEST, a signature of every
// key's name, value and expiry.

// startMaster starts limitkv for the replication tests.
func startMaster(t testing.TB, flags ...string) *server {
	t.Helper()
	return startLimitkv(t, append([]string{"--enable-debug-command", "yes"}, flags...)...)
}

// startReplicaOf starts limitkv as a replica of master, in dir when given.
func startReplicaOf(t testing.TB, master *server, dir string, flags ...string) *server {
	t.Helper()
	host, port, _ := net.SplitHostPort(master.Addr)
	args := append([]string{"--enable-debug-command", "yes", "--replicaof", host, port}, flags...)
	if dir == "" {
		return startLimitkv(t, args...)
	}
	return startLimitkvIn(t, dir, args...)
}

// replInfo reads one field of INFO.
func replInfo(t testing.TB, c *redis.Client, section, field string) string {
	t.Helper()
	s, err := c.Info(context.Background(), section).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(s, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	return ""
}

// waitInSync waits until every replica has applied the master's whole
// stream, as the replicas and the master both tell.
func waitInSync(t testing.TB, master *redis.Client, replicas ...*redis.Client) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := master.Do(ctx, "WAIT", len(replicas), 1000).Int()
		if err != nil {
			t.Fatal(err)
		}
		off := replInfo(t, master, "replication", "master_repl_offset")
		synced := n == len(replicas)
		for _, r := range replicas {
			if replInfo(t, r, "replication", "master_link_status") != "up" ||
				replInfo(t, r, "replication", "slave_repl_offset") != off {
				synced = false
			}
		}
		if synced {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replicas not in sync after 30s (master at %s, WAIT answered %d)", off, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func digestOf(t testing.TB, c *redis.Client) string {
	t.Helper()
	d, err := c.Do(context.Background(), "DEBUG", "DIGEST").Text()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// sameKeyspace waits for every replica's digest to equal the master's
// (keys that expire meanwhile can make one reading differ).
func sameKeyspace(t testing.TB, master *redis.Client, replicas ...*redis.Client) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		want := digestOf(t, master)
		same := true
		var got []string
		for _, r := range replicas {
			d := digestOf(t, r)
			got = append(got, d)
			same = same && d == want
		}
		if same {
			if want == strings.Repeat("0", 40) {
				t.Fatal("the keyspace is empty: nothing was compared")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replicas differ from their master: master %s, replicas %v", want, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// replicationLoad runs a mixed write load: every type of key, rate-limit
// decisions, scripts, transactions, expiring keys (TTLs under 1.5 s, or
// over 100 s so that none expires while keyspaces are compared), on a
// small set of keys so that commands meet.
func replicationLoad(t testing.TB, addr string, workers, ops int, seed uint64) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			c := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: 30 * time.Second})
			defer c.Close()
			ctx := context.Background()
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			key := func(prefix string) string { return prefix + strconv.Itoa(r.IntN(20)) }
			for i := 0; i < ops; i++ {
				var err error
				switch r.IntN(29) {
				case 0:
					err = c.Set(ctx, key("s:"), r.IntN(1000), 0).Err()
				case 1:
					err = c.Set(ctx, key("t:"), "v", time.Duration(200+r.IntN(1200))*time.Millisecond).Err()
				case 2:
					err = c.Incr(ctx, key("n:")).Err()
				case 3:
					err = c.Append(ctx, key("a:"), "xy").Err()
				case 4:
					err = c.SetRange(ctx, key("a:"), int64(r.IntN(50)), "z").Err()
				case 5:
					err = c.SetBit(ctx, key("b:"), int64(r.IntN(4000)), r.IntN(2)).Err()
				case 6:
					err = c.LPush(ctx, "biglist", i).Err()
				case 7:
					err = c.RPush(ctx, key("l:"), i, i+1).Err()
				case 8:
					err = c.LPop(ctx, key("l:")).Err()
				case 9:
					err = c.LMove(ctx, key("l:"), key("l:"), "LEFT", "RIGHT").Err()
				case 10:
					err = c.HSet(ctx, key("h:"), "f"+strconv.Itoa(r.IntN(10)), i).Err()
				case 11:
					err = c.HIncrByFloat(ctx, key("h:"), "fl", 0.1).Err()
				case 12:
					err = c.ZAdd(ctx, key("z:"), redis.Z{Score: float64(r.IntN(100)), Member: strconv.Itoa(r.IntN(30))}).Err()
				case 13:
					err = c.ZPopMin(ctx, key("z:")).Err()
				case 14:
					err = c.Do(ctx, "RL.FIXED", key("rf:"), 5, "1h", 20, "1d").Err()
				case 15:
					err = c.Do(ctx, "RL.SLIDE", key("rs:"), 3, "10s", 10, "1h").Err()
				case 16:
					err = c.Do(ctx, "RL.LOGIN", key("rlg:"), 3, "1h").Err()
				case 17:
					err = c.Do(ctx, "CL.THROTTLE", key("cl:"), 5, 10, 60).Err()
				case 18:
					err = c.Eval(ctx, "redis.call('INCR', KEYS[1]); redis.call('RPUSH', KEYS[2], ARGV[1]); "+
						"redis.call('SET', KEYS[3], ARGV[1], 'PX', 800); return redis.call('RL.SLIDE', KEYS[4], 2, '1m')",
						[]string{key("n:"), key("l:"), key("t:"), key("rs:")}, i).Err()
				case 19:
					_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
						p.Incr(ctx, key("n:"))
						p.LPush(ctx, "biglist", "tx")
						p.Expire(ctx, key("n:"), 200*time.Second)
						p.Do(ctx, "RL.FIXED", key("rf:"), 3, "1m")
						return nil
					})
				case 20:
					err = c.Del(ctx, key("s:"), key("l:")).Err()
				case 21:
					err = c.Rename(ctx, key("s:"), key("s:")).Err()
					if err != nil && strings.Contains(err.Error(), "no such key") {
						err = nil
					}
				case 22:
					err = c.Expire(ctx, key("a:"), time.Duration(r.IntN(2))*time.Second+time.Duration(100+r.IntN(2))*time.Second).Err()
				case 23:
					err = c.GetEx(ctx, key("t:"), 900*time.Millisecond).Err()
				case 24:
					// Integers and strings: sets move from intset to hashtable.
					m := strconv.Itoa(r.IntN(40))
					if r.IntN(8) == 0 {
						m = "m" + m
					}
					err = c.SAdd(ctx, key("set:"), m, r.IntN(600)).Err()
				case 25:
					err = c.SRem(ctx, key("set:"), strconv.Itoa(r.IntN(40)), "m"+strconv.Itoa(r.IntN(40))).Err()
				case 26:
					// Random choices replicate as what they removed.
					if r.IntN(2) == 0 {
						err = c.SPop(ctx, key("set:")).Err()
					} else {
						err = c.SPopN(ctx, key("set:"), int64(r.IntN(4))).Err()
					}
				case 27:
					err = c.SMove(ctx, key("set:"), key("set:"), strconv.Itoa(r.IntN(40))).Err()
				case 28:
					if r.IntN(2) == 0 {
						err = c.SUnionStore(ctx, key("set:"), key("set:"), key("set:")).Err()
					} else {
						err = c.Eval(ctx, "redis.call('SPOP', KEYS[1], 2); return redis.call('SINTERSTORE', KEYS[2], KEYS[1], KEYS[3])",
							[]string{key("set:"), key("set:"), key("set:")}).Err()
					}
				}
				if err != nil && err != redis.Nil && !strings.HasPrefix(err.Error(), "WRONGTYPE") {
					errs <- fmt.Errorf("worker %d op %d: %v", w, i, err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestReplicationConverges: one replica follows the master from the
// start, another joins while the load runs (a full sync of a keyspace
// that changes meanwhile); both end with the master's keyspace.
func TestReplicationConverges(t *testing.T) {
	m := startMaster(t, "--persistence", "no")
	mc := goRedis(t, m.Addr, 2)
	r1 := startReplicaOf(t, m, "", "--persistence", "no")
	r1c := goRedis(t, r1.Addr, 2)
	waitInSync(t, mc, r1c)

	var r2 *server
	done := make(chan struct{})
	go func() {
		defer close(done)
		replicationLoad(t, m.Addr, 8, 1500, 1)
	}()
	time.Sleep(300 * time.Millisecond)
	r2 = startReplicaOf(t, m, "", "--persistence", "no")
	r2c := goRedis(t, r2.Addr, 2)
	<-done
	// A second round after the full sync, and keys in other databases.
	replicationLoad(t, m.Addr, 4, 500, 2)
	ctx := context.Background()
	m1 := goRedis(t, m.Addr, 2, func(o *redis.Options) { o.DB = 3 })
	if err := m1.Set(ctx, "in-db-3", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	waitInSync(t, mc, r1c, r2c)
	sameKeyspace(t, mc, r1c, r2c)
	if got := replInfo(t, mc, "replication", "connected_slaves"); got != "2" {
		t.Fatalf("connected_slaves = %s", got)
	}
	// The replicas hold the rate-limit states the master decided: a
	// promoted replica goes on from them (see TestPromotion).
	for _, r := range []*redis.Client{r1c, r2c} {
		if err := r.Set(ctx, "x", 1, 0).Err(); err == nil || err.Error() != "READONLY You can't write against a read only replica." {
			t.Fatalf("write on a replica: %v", err)
		}
	}
}

// TestReplicaResumesAfterKill: a replica killed with SIGKILL restarts from
// its own snapshot and continues from its position (a partial sync).
func TestReplicaResumesAfterKill(t *testing.T) {
	m := startMaster(t, "--persistence", "no")
	mc := goRedis(t, m.Addr, 2)
	dir := t.TempDir()
	r := startReplicaOf(t, m, dir, "--snapshot-interval", "100ms")
	rc := goRedis(t, r.Addr, 2)
	replicationLoad(t, m.Addr, 4, 500, 3)
	waitInSync(t, mc, rc)
	// A snapshot after the load: every change the replica applied is saved,
	// with its position.
	waitFor(t, 30*time.Second, "the replica's snapshot of the load", func() bool {
		return replInfo(t, rc, "persistence", "rdb_changes_since_last_save") == "0"
	})
	r.Kill()
	replicationLoad(t, m.Addr, 4, 200, 4) // what the replica misses
	r = startReplicaOf(t, m, dir, "--snapshot-interval", "100ms")
	rc = goRedis(t, r.Addr, 2)
	waitInSync(t, mc, rc)
	sameKeyspace(t, mc, rc)
	if got := replInfo(t, mc, "stats", "sync_full"); got != "1" {
		t.Fatalf("sync_full = %s, want 1: the restarted replica took a full copy", got)
	}
	if got := replInfo(t, mc, "stats", "sync_partial_ok"); got != "1" {
		t.Fatalf("sync_partial_ok = %s, want 1", got)
	}
}

// TestReplicaKilledDuringFullSync: a replica killed while it loads its
// master's copy starts again and converges.
func TestReplicaKilledDuringFullSync(t *testing.T) {
	m := startMaster(t, "--persistence", "no")
	mc := goRedis(t, m.Addr, 2)
	fill(t, m.Addr, 300_000)
	dir := t.TempDir()
	r := startReplicaOf(t, m, dir)
	rc := goRedis(t, r.Addr, 2)
	deadline := time.Now().Add(10 * time.Second)
	for replInfo(t, mc, "stats", "sync_full") == "0" && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	r.Kill()
	if strings.Contains(r.Output(), "sync: Finished with success") {
		t.Log("the replica finished loading before it was killed")
	}
	replicationLoad(t, m.Addr, 2, 200, 5)
	r = startReplicaOf(t, m, dir)
	rc = goRedis(t, r.Addr, 2)
	waitInSync(t, mc, rc)
	sameKeyspace(t, mc, rc)
}

// fill writes n keys through one pipelined connection.
func fill(t testing.TB, addr string, n int) {
	t.Helper()
	c := dialRaw(t, addr)
	var buf []byte
	for i := 0; i < n; i++ {
		k := []byte("fill:" + strconv.Itoa(i))
		buf = appendCmd(buf, "SET", string(k), strconv.Itoa(i))
		if len(buf) > 1<<20 || i == n-1 {
			c.send(buf)
			buf = buf[:0]
		}
	}
	for i := 0; i < n; i++ {
		if v := c.read(); v.String() != "+OK" {
			t.Fatalf("SET %d: %v", i, v)
		}
	}
}

func appendCmd(b []byte, args ...string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}

// TestReplicaExpiry: a replica hides keys past their expiry but deletes
// them only when its master says so.
func TestReplicaExpiry(t *testing.T) {
	ctx := context.Background()
	m := startMaster(t, "--persistence", "no")
	mc := goRedis(t, m.Addr, 2)
	r := startReplicaOf(t, m, "", "--persistence", "no")
	rc := goRedis(t, r.Addr, 2)
	if err := mc.Do(ctx, "DEBUG", "SET-ACTIVE-EXPIRE", 0).Err(); err != nil {
		t.Fatal(err)
	}
	set := time.Now()
	mc.Set(ctx, "short", "v", 2*time.Second)
	mc.Set(ctx, "keep", "v", 0)
	waitInSync(t, mc, rc)
	if v, _ := rc.Get(ctx, "short").Result(); v != "v" && time.Since(set) < 2*time.Second {
		t.Fatalf("replica GET short = %q before expiry", v)
	}
	time.Sleep(time.Until(set.Add(2100 * time.Millisecond)))
	if _, err := rc.Get(ctx, "short").Result(); err != redis.Nil {
		t.Fatalf("replica GET short after its expiry: %v, want nil", err)
	}
	if n, _ := rc.DBSize(ctx).Result(); n != 2 {
		t.Fatalf("replica DBSIZE = %d: it deleted an expired key by itself", n)
	}
	// The master expires it when touched, and the replica follows.
	if _, err := mc.Get(ctx, "short").Result(); err != redis.Nil {
		t.Fatalf("master GET short: %v", err)
	}
	waitInSync(t, mc, rc)
	if n, _ := rc.DBSize(ctx).Result(); n != 1 {
		t.Fatalf("replica DBSIZE = %d after the master's deletion", n)
	}
}

// TestWaitAndMinReplicas: WAIT counts the replicas that acknowledged a
// client's writes; min-replicas-to-write refuses writes without them.
func TestWaitAndMinReplicas(t *testing.T) {
	ctx := context.Background()
	m := startMaster(t, "--persistence", "no")
	mc := goRedis(t, m.Addr, 2)
	r1 := startReplicaOf(t, m, "", "--persistence", "no")
	r2 := startReplicaOf(t, m, "", "--persistence", "no")
	r1c, r2c := goRedis(t, r1.Addr, 2), goRedis(t, r2.Addr, 2)
	waitInSync(t, mc, r1c, r2c)
	mc.Set(ctx, "k", "v", 0)
	if n, err := mc.Do(ctx, "WAIT", 2, 5000).Int(); err != nil || n != 2 {
		t.Fatalf("WAIT 2 = %d, %v", n, err)
	}
	start := time.Now()
	if n, _ := mc.Do(ctx, "WAIT", 3, 200).Int(); n != 2 || time.Since(start) < 150*time.Millisecond {
		t.Fatalf("WAIT 3 200 = %d after %v, want 2 after the timeout", n, time.Since(start))
	}
	for _, c := range []struct {
		args []any
		want string
	}{
		{[]any{"WAIT", "x", 0}, "ERR value is not an integer or out of range"},
		{[]any{"WAIT", 1, -1}, "ERR timeout is negative"},
		{[]any{"WAIT", 1, "1.5"}, "ERR timeout is not an integer or out of range"},
	} {
		if err := mc.Do(ctx, c.args...).Err(); err == nil || err.Error() != c.want {
			t.Fatalf("%v: %v, want %q", c.args, err, c.want)
		}
	}
	if err := r1c.Do(ctx, "WAIT", 1, 10).Err(); err == nil || !strings.HasPrefix(err.Error(), "WAIT cannot be used with replica instances") {
		t.Fatalf("WAIT on a replica: %v", err)
	}
	mc.ConfigSet(ctx, "min-replicas-to-write", "2")
	if err := mc.Set(ctx, "k", "v2", 0).Err(); err != nil {
		t.Fatalf("write with 2 good replicas: %v", err)
	}
	if got := replInfo(t, mc, "replication", "min_slaves_good_slaves"); got != "2" {
		t.Fatalf("min_slaves_good_slaves = %s", got)
	}
	r2.Kill()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := mc.Set(ctx, "k", "v3", 0).Err()
		if err != nil && err.Error() == "NOREPLICAS Not enough good replicas to write." {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("writes still accepted with one replica: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The writes of v3 accepted before the master saw its replica go
	// legitimately set it; a write refused from now on must change nothing.
	if err := mc.Set(ctx, "k", "v4", 0).Err(); err == nil || err.Error() != "NOREPLICAS Not enough good replicas to write." {
		t.Fatalf("write after the refusal: %v", err)
	}
	if v, _ := mc.Get(ctx, "k").Result(); v == "v4" {
		t.Fatal("a refused write changed the key")
	}
	// Reads still go.
	if err := mc.Get(ctx, "k").Err(); err != nil {
		t.Fatal(err)
	}
}

// TestMasterDown: a replica whose master is gone answers MASTERDOWN when
// replica-serve-stale-data is no, and stays readable otherwise.
func TestMasterDown(t *testing.T) {
	ctx := context.Background()
	m := startMaster(t, "--persistence", "no")
	mc := goRedis(t, m.Addr, 2)
	r := startReplicaOf(t, m, "", "--persistence", "no")
	rc := goRedis(t, r.Addr, 2)
	rr := dialRaw(t, r.Addr)
	mc.Set(ctx, "k", "v", 0)
	waitInSync(t, mc, rc)
	// A read-only replica refuses a script that declared flags but not
	// no-writes before it runs, and one without a shebang at its first
	// write, as Redis does.
	const readOnly = "-READONLY You can't write against a read only replica."
	mustDo(t, rr, readOnly, "EVAL", "#!lua\nreturn 1", "0")
	mustDo(t, rr, `"v"`, "EVAL", "#!lua flags=no-writes\nreturn redis.call('GET', KEYS[1])", "1", "k")
	mustDo(t, rr, readOnly+" script: bd6f3018b28bbdb36260f19d3c44afed740db987, on @user_script:1.", "EVAL", "return redis.call('SET', KEYS[1], 'x')", "1", "k")
	mustDo(t, rr, `"v"`, "GET", "k")
	m.Kill()
	deadline := time.Now().Add(10 * time.Second)
	for replInfo(t, rc, "replication", "master_link_status") != "down" {
		if time.Now().After(deadline) {
			t.Fatal("the replica did not see its master go")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if v, _ := rc.Get(ctx, "k").Result(); v != "v" {
		t.Fatalf("stale read = %q", v)
	}
	rc.ConfigSet(ctx, "replica-serve-stale-data", "no")
	const masterDown = "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."
	if err := rc.Get(ctx, "k").Err(); err == nil || err.Error() != masterDown {
		t.Fatalf("GET with the link down: %v", err)
	}
	// Scripts run only if they declared allow-stale.
	mustDo(t, rr, "-"+masterDown, "EVAL", "return 1", "0")
	mustDo(t, rr, "-"+masterDown, "EVAL", "#!lua flags=no-writes\nreturn 1", "0")
	mustDo(t, rr, ":1", "EVAL", "#!lua flags=no-writes,allow-stale\nreturn 1", "0")
	if err := rc.Ping(ctx).Err(); err == nil {
		t.Fatal("PING is not a stale command in Redis: it should be refused too")
	}
	if got := replInfo(t, rc, "replication", "master_link_down_since_seconds"); got == "" || got == "-1" {
		t.Fatalf("master_link_down_since_seconds = %q", got)
	}
}

// TestPromotion: REPLICAOF NO ONE makes a replica a master that goes on
// from the rate-limit states it received; the other replica, pointed at
// it, continues with a partial sync; the old master rejoins as a replica.
func TestPromotion(t *testing.T) {
	ctx := context.Background()
	m := startMaster(t, "--persistence", "no")
	mc := goRedis(t, m.Addr, 2)
	r1 := startReplicaOf(t, m, "", "--persistence", "no")
	r2 := startReplicaOf(t, m, "", "--persistence", "no")
	r1c, r2c := goRedis(t, r1.Addr, 2), goRedis(t, r2.Addr, 2)
	for i := 0; i < 3; i++ {
		if err := mc.Do(ctx, "RL.SLIDE", "limit", 3, "1h").Err(); err != nil {
			t.Fatal(err)
		}
	}
	replicationLoad(t, m.Addr, 2, 200, 6)
	waitInSync(t, mc, r1c, r2c)
	sameKeyspace(t, mc, r1c, r2c)

	if err := r1c.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	role, err := r1c.Do(ctx, "ROLE").Slice()
	if err != nil || role[0] != "master" {
		t.Fatalf("ROLE after promotion = %v, %v", role, err)
	}
	// The limit used up on the old master is used up on the new one.
	d, err := r1c.Do(ctx, "RL.SLIDE", "limit", 3, "1h").Int64Slice()
	if err != nil || d[0] != 0 {
		t.Fatalf("RL.SLIDE on the promoted replica = %v, %v: it forgot the decisions of the old master", d, err)
	}
	host, port, _ := net.SplitHostPort(r1.Addr)
	if err := r2c.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		t.Fatal(err)
	}
	if got, _ := r2c.Do(ctx, "REPLICAOF", host, port).Text(); got != "OK Already connected to specified master" {
		t.Fatalf("REPLICAOF again = %q", got)
	}
	replicationLoad(t, r1.Addr, 2, 200, 7)
	waitInSync(t, r1c, r2c)
	sameKeyspace(t, r1c, r2c)
	if got := replInfo(t, r1c, "stats", "sync_partial_ok"); got != "1" {
		t.Fatalf("the other replica did not continue with a partial sync: sync_partial_ok = %s, sync_full = %s",
			got, replInfo(t, r1c, "stats", "sync_full"))
	}
	// The old master joins the new one.
	if err := mc.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		t.Fatal(err)
	}
	waitInSync(t, r1c, r2c, mc)
	sameKeyspace(t, r1c, r2c, mc)
	role, _ = mc.Do(ctx, "ROLE").Slice()
	if len(role) != 5 || role[0] != "slave" || role[3] != "connected" {
		t.Fatalf("ROLE of the old master = %v", role)
	}
	if got := r1c.ConfigGet(ctx, "replicaof").Val(); got["replicaof"] != "" {
		t.Fatalf("CONFIG GET replicaof on the new master = %v", got)
	}
	if got := mc.ConfigGet(ctx, "replicaof").Val(); got["replicaof"] != host+" "+port {
		t.Fatalf("CONFIG GET replicaof on the old master = %v", got)
	}
}

// TestSlowReplicaDropped: a replica that stops reading is dropped once its
// output passes client-output-buffer-limit replica, and the master goes on
// serving everyone else at full speed meanwhile.
func TestSlowReplicaDropped(t *testing.T) {
	ctx := context.Background()
	m := startMaster(t, "--persistence", "no", "--client-output-buffer-limit", "replica 2mb 1mb 1")
	mc := goRedis(t, m.Addr, 2)
	good := startReplicaOf(t, m, "", "--persistence", "no")
	gc := goRedis(t, good.Addr, 2)
	waitInSync(t, mc, gc)
	// A replica that asks for the stream and never reads it.
	stuck := dialRaw(t, m.Addr)
	stuck.send(appendCmd(nil, "REPLCONF", "listening-port", "1"))
	stuck.send(appendCmd(nil, "PSYNC", "?", "-1"))
	waitFor(t, 10*time.Second, "two replicas", func() bool { return replInfo(t, mc, "replication", "connected_slaves") == "2" })
	big := strings.Repeat("v", 100_000)
	for i := 0; i < 200; i++ { // 20 MB of stream
		start := time.Now()
		if err := mc.Set(ctx, "big:"+strconv.Itoa(i%10), big, 0).Err(); err != nil {
			t.Fatal(err)
		}
		// A write held by the replica that does not read would wait
		// until the replica is dropped: a generous bound tells.
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("a write took %v while a replica did not read", d)
		}
	}
	waitFor(t, 10*time.Second, "the stuck replica to be dropped", func() bool {
		return replInfo(t, mc, "replication", "connected_slaves") == "1"
	})
	if !strings.Contains(m.Output(), "scheduled to be closed ASAP for overcoming of output buffer limits") {
		t.Fatalf("no log line for the dropped replica:\n%s", m.Output())
	}
	waitInSync(t, mc, gc)
	sameKeyspace(t, mc, gc)
}

// TestStuckFullSyncGivenUp: a replica that stops reading in the middle of
// its full sync is given up after repl-timeout, and SWAPDB, which waits for
// full syncs to finish capturing, is not held up for ever.
func TestStuckFullSyncGivenUp(t *testing.T) {
	ctx := context.Background()
	m := startMaster(t, "--persistence", "no", "--repl-timeout", "2")
	mc := goRedis(t, m.Addr, 2)
	fill(t, m.Addr, 200_000) // about 10 MB of copy: more than a sync lets wait unread
	stuck := dialRaw(t, m.Addr)
	stuck.send(appendCmd(nil, "PSYNC", "?", "-1"))
	waitFor(t, 10*time.Second, "the full sync to start", func() bool { return replInfo(t, mc, "stats", "sync_full") == "1" })
	start := time.Now()
	if err := mc.Do(ctx, "SWAPDB", 0, 1).Err(); err != nil {
		t.Fatal(err)
	}
	// Held by the stuck sync, SWAPDB would wait for ever; repl-timeout
	// (2 s) ends it.
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("SWAPDB waited %v", d)
	}
	waitFor(t, 10*time.Second, "the stuck replica to be dropped", func() bool {
		return replInfo(t, mc, "replication", "connected_slaves") == "0"
	})
	if n, _ := goRedis(t, m.Addr, 2, func(o *redis.Options) { o.DB = 1 }).DBSize(ctx).Result(); n != 200_000 {
		t.Fatalf("db 1 holds %d keys after SWAPDB", n)
	}
}

// TestReplicationAuth: a replica authenticates with masterauth (and
// masteruser, an ACL user allowed only what replication needs), announces
// the address and port it is told to, and a wrong password keeps it out.
func TestReplicationAuth(t *testing.T) {
	ctx := context.Background()
	m := startMaster(t, "--persistence", "no", "--requirepass", "s3cret")
	mc := goRedis(t, m.Addr, 2, func(o *redis.Options) { o.Password = "s3cret" })
	if err := mc.Do(ctx, "ACL", "SETUSER", "repl", "on", ">replpass", "+psync", "+replconf", "+ping").Err(); err != nil {
		t.Fatal(err)
	}
	mc.Set(ctx, "k", "v", 0)
	r1 := startReplicaOf(t, m, "", "--persistence", "no", "--masterauth", "s3cret",
		"--replica-announce-ip", "127.0.0.7", "--replica-announce-port", "4567")
	r2 := startReplicaOf(t, m, "", "--persistence", "no", "--masteruser", "repl", "--masterauth", "replpass")
	r1c, r2c := goRedis(t, r1.Addr, 2), goRedis(t, r2.Addr, 2)
	waitInSync(t, mc, r1c, r2c)
	sameKeyspace(t, mc, r1c, r2c)
	if info := replInfo(t, mc, "replication", "slave0") + replInfo(t, mc, "replication", "slave1"); !strings.Contains(info, "ip=127.0.0.7,port=4567,state=online") {
		t.Fatalf("the announced address is not in INFO: %s", info)
	}
	bad := startReplicaOf(t, m, "", "--persistence", "no", "--masterauth", "wrong")
	bc := goRedis(t, bad.Addr, 2)
	waitFor(t, 30*time.Second, "the log line for the refused AUTH", func() bool {
		return strings.Contains(bad.Output(), "Unable to AUTH to MASTER")
	})
	if got := replInfo(t, bc, "replication", "master_link_status"); got != "down" {
		t.Fatalf("a replica with a wrong password has its link %s", got)
	}
}

// TestReplicationTLS: with tls-replication, a replica reaches its master's
// TLS port, with the client certificate mutual TLS asks for.
func TestReplicationTLS(t *testing.T) {
	ctx := context.Background()
	f := newTLSFiles(t)
	mPort := freePort(t)
	m := startMaster(t, append([]string{"--persistence", "no"}, f.flags(mPort)...)...)
	mc := goRedis(t, m.Addr, 2)
	mc.Set(ctx, "k", "v", 0)
	clientCert, clientKey := f.client.Write(t, f.dir, "replica")
	r := startLimitkv(t, append([]string{"--persistence", "no", "--enable-debug-command", "yes",
		"--replicaof", "127.0.0.1", strconv.Itoa(mPort), "--tls-replication", "yes",
		"--tls-client-cert-file", clientCert, "--tls-client-key-file", clientKey}, f.flags(freePort(t))...)...)
	rc := goRedis(t, r.Addr, 2)
	waitInSync(t, mc, rc)
	sameKeyspace(t, mc, rc)
}
