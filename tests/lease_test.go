package tests

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/limitkv/limitkv/resp"
)

// RL.ACQUIRE / RL.RELEASE, black box: a semaphore under many connections,
// across a restart and on a replica.

// TestLeaseAtomicity: 128 connections acquire distinct ids on one
// semaphore at once: exactly limit are admitted; then every connection
// releases all its ids at once and exactly limit releases free a lease,
// leaving no key.
func TestLeaseAtomicity(t *testing.T) {
	const conns, each, limit = 128, 4, 50
	s, ctl := frozenServer(t, 1_800_000_000_000)
	run := func(cmd string) int64 {
		batches := make([][]byte, conns)
		for ci := range batches {
			for i := 0; i < each; i++ {
				id := "req:" + strconv.Itoa(ci) + ":" + strconv.Itoa(i)
				if cmd == "RL.ACQUIRE" {
					batches[ci] = resp.AppendCommand(batches[ci], toBytes([]string{cmd, "sem", strconv.Itoa(limit), "1h", id})...)
				} else {
					batches[ci] = resp.AppendCommand(batches[ci], toBytes([]string{cmd, "sem", id})...)
				}
			}
		}
		var n atomic.Int64
		hammer(t, s.Addr, batches, each, func(v resp.Value) {
			switch {
			case v.Type == '*' && len(v.Elems) == 5 && v.Elems[0].Int == 1,
				v.Type == ':' && v.Int == 1:
				n.Add(1)
			case v.Type == '-':
				t.Errorf("%s: %s", cmd, v)
			}
		})
		return n.Load()
	}
	if got := run("RL.ACQUIRE"); got != limit {
		t.Fatalf("%d of %d acquires admitted, want exactly %d", got, conns*each, limit)
	}
	if d := decision(t, ctl.do("RL.ACQUIRE", "sem", strconv.Itoa(limit), "1h", "late")); d != [5]int64{0, limit, 0, 3_600_000, 3_600_000} {
		t.Fatalf("acquire on the full semaphore: %v", d)
	}
	if got := run("RL.RELEASE"); got != limit {
		t.Fatalf("%d releases freed a lease, want exactly %d", got, limit)
	}
	if v := ctl.do("EXISTS", "sem"); v.Int != 0 {
		t.Fatal("the key outlived its last lease")
	}
}

// TestLeaseSurvivesRestart: leases are saved with their absolute ends: a
// restarted server refuses a new id on the full semaphore, renews a
// holder, frees a released lease and keeps the key's expiry.
func TestLeaseSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	s := startLimitkvIn(t, dir, "--snapshot-interval", "1h")
	c := dialRaw(t, s.Addr)
	for _, id := range []string{"a", "b"} {
		if d := decision(t, c.do("RL.ACQUIRE", "sem", "2", "1h", id)); d[0] != 1 {
			t.Fatalf("acquire %s: %v", id, d)
		}
	}
	exp := c.do("PEXPIRETIME", "sem").Int
	enc := c.do("OBJECT", "ENCODING", "sem").String()
	s.Stop()

	s2 := startLimitkvIn(t, dir)
	if !strings.Contains(s2.Output(), "snapshot loaded") {
		t.Fatalf("log:\n%s", s2.Output())
	}
	c2 := dialRaw(t, s2.Addr)
	if got := c2.do("PEXPIRETIME", "sem").Int; got != exp {
		t.Fatalf("PEXPIRETIME after restart %d, before %d", got, exp)
	}
	if got := c2.do("OBJECT", "ENCODING", "sem").String(); got != enc {
		t.Fatalf("OBJECT ENCODING after restart %s, before %s", got, enc)
	}
	if d := decision(t, c2.do("RL.ACQUIRE", "sem", "2", "1h", "c")); d[0] != 0 || d[3] <= 0 || d[3] > 3_600_000 {
		t.Fatalf("new id on the full semaphore after restart: %v", d)
	}
	if d := decision(t, c2.do("RL.ACQUIRE", "sem", "2", "1h", "a")); d[0] != 1 {
		t.Fatalf("renewal after restart: %v", d)
	}
	if v := c2.do("RL.RELEASE", "sem", "b"); v.Int != 1 {
		t.Fatalf("release after restart: %s", v)
	}
	if d := decision(t, c2.do("RL.ACQUIRE", "sem", "2", "1h", "c")); d[0] != 1 || d[2] != 0 {
		t.Fatalf("acquire into the released slot: %v", d)
	}
}

// TestLeaseReplicates: a replica holds the master's leases, ends and
// expiry included (same DEBUG DIGEST), follows releases (the key goes with
// its last lease) and, promoted, makes the master's next decisions.
func TestLeaseReplicates(t *testing.T) {
	ctx := context.Background()
	m := startMaster(t, "--persistence", "no")
	mc := goRedis(t, m.Addr, 2)
	r := startReplicaOf(t, m, "", "--persistence", "no")
	rc := goRedis(t, r.Addr, 2)
	do := func(args ...any) any {
		t.Helper()
		v, err := mc.Do(ctx, args...).Result()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for i := 0; i < 3; i++ {
		do("RL.ACQUIRE", "sem", 3, "1h", fmt.Sprint("id", i))
	}
	do("RL.ACQUIRE", "sem", 3, "1h", "id0") // a renewal
	do("RL.ACQUIRE", "sem", 3, "1h", "id9") // denied: replicates nothing
	do("RL.ACQUIRE", "one", 1, "1h", "x")
	do("RL.RELEASE", "one", "x")
	do("RL.ACQUIRE", "gone", 1, "1h", "x")
	do("RL.RELEASE", "gone", "x")
	do("RL.ACQUIRE", "two", 2, "1h", "x")
	do("RL.ACQUIRE", "two", 2, "1h", "y")
	do("RL.RELEASE", "two", "x")
	waitInSync(t, mc, rc)
	sameKeyspace(t, mc, rc)
	if n, _ := rc.Exists(ctx, "one", "gone").Result(); n != 0 {
		t.Fatalf("released keys still on the replica: %d", n)
	}
	want, _ := mc.PExpireTime(ctx, "sem").Result()
	if got, _ := rc.PExpireTime(ctx, "sem").Result(); got != want {
		t.Fatalf("replica PEXPIRETIME %v, master %v", got, want)
	}

	if err := rc.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	d, err := rc.Do(ctx, "RL.ACQUIRE", "sem", 3, "1h", "id9").Int64Slice()
	if err != nil || d[0] != 0 {
		t.Fatalf("new id on the promoted replica = %v, %v: it forgot the master's leases", d, err)
	}
	if n, err := rc.Do(ctx, "RL.RELEASE", "sem", "id1").Int(); err != nil || n != 1 {
		t.Fatalf("release on the promoted replica = %v, %v", n, err)
	}
	if n, err := rc.Do(ctx, "RL.RELEASE", "two", "x").Int(); err != nil || n != 0 {
		t.Fatalf("release of a lease the master released = %v, %v", n, err)
	}
	if d, err := rc.Do(ctx, "RL.ACQUIRE", "two", 2, "1h", "z").Int64Slice(); err != nil || d[0] != 1 || d[2] != 0 {
		t.Fatalf("acquire on the promoted replica = %v, %v", d, err)
	}
}
