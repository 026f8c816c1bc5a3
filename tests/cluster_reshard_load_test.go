package tests

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/limitkv/limitkv/internal/testserver"
)

// reshardDecider is a rate-limit command as the load of
// TestClusterReshardUnderLoad sends it: limit decisions per key in a
// window that outlasts the test.
type reshardDecider struct {
	name    string
	limit   int64
	args    func(key string) []any
	allowed func(reply []int64) bool
}

var reshardDeciders = []reshardDecider{
	{"RL.FIXED", 10, func(k string) []any { return []any{"RL.FIXED", k, 10, "1h", "ALIGN", "FIRST"} },
		func(v []int64) bool { return v[0] == 1 }},
	{"RL.SLIDE", 10, func(k string) []any { return []any{"RL.SLIDE", k, 10, "1h"} },
		func(v []int64) bool { return v[0] == 1 }},
	// A burst of 10 and one token more an hour: none comes back while
	// the test runs. redis-cell's reply: 0 is allowed.
	{"CL.THROTTLE", 10, func(k string) []any { return []any{"CL.THROTTLE", k, 9, 1, 3600, 1} },
		func(v []int64) bool { return v[0] == 0 }},
}

const (
	// reshardSlots slots, each holding one key, move from the first
	// master to the second.
	reshardSlots = 2000
	// reshardConns goroutines share a ClusterClient with as many
	// connections per node.
	reshardConns = 24
	// reshardRequests decisions are asked of each key: 2.5 times the
	// limit.
	reshardRequests = 25
)

// TestClusterReshardUnderLoad: while redis-cli --cluster reshard moves
// 2,000 slots, each holding a rate-limit key, from one master of three to
// another, 24 goroutines of one go-redis ClusterClient ask decisions on
// all those keys, 2.5 times each key's limit, paced by the reshard's
// progress: some spread over all of it, most around the move of the
// key's own slot. Every key must have admitted exactly its limit, every
// reply must be a decision (MOVED and ASK are the client's to follow),
// the reshard must succeed without meeting a key already at its target,
// and at the end the second master serves the slots and holds the keys,
// the first none.
func TestClusterReshardUnderLoad(t *testing.T) {
	for _, d := range reshardDeciders {
		t.Run(d.name, func(t *testing.T) { reshardUnderLoad(t, d) })
	}
}

// movingSlot matches what redis-cli prints, and flushes, as it starts to
// move a slot.
var movingSlot = regexp.MustCompile(`Moving slot \d+ from \S+ to \S+: `)

func reshardUnderLoad(t *testing.T, d reshardDecider) {
	c := startClusterNodes(t, repeatKind(testserver.Limitkv, 3))
	ctx := context.Background()
	c.create(3, 0)
	keys := slotKeys()[:reshardSlots]
	own := c.owners(0)
	for s := range keys {
		if own[s] != 0 {
			t.Fatalf("slot %d is served by node %d, want the first", s, own[s])
		}
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{c.addr(0), c.addr(1), c.addr(2)},
		PoolSize: reshardConns, DialTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, MaxRedirects: 16})
	t.Cleanup(func() { cc.Close() })
	if err := cc.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return n.Ping(ctx).Err() }); err != nil {
		t.Fatal(err)
	}

	// The reshard; its progress is the number of slots it has started.
	cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cli := exec.CommandContext(cctx, c.cliBin, "--cluster", "reshard", c.addr(0), "--cluster-from", c.id(0),
		"--cluster-to", c.id(1), "--cluster-slots", strconv.Itoa(reshardSlots), "--cluster-yes")
	pr, pw := io.Pipe()
	cli.Stdout, cli.Stderr = pw, pw
	var moved atomic.Int64
	var output bytes.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 4096)
		var pending []byte
		for {
			n, err := pr.Read(buf)
			output.Write(buf[:n])
			pending = append(pending, buf[:n]...)
			if m := movingSlot.FindAllIndex(pending, -1); len(m) > 0 {
				moved.Add(int64(len(m)))
				pending = pending[m[len(m)-1][1]:]
			}
			if len(pending) > 256 {
				pending = pending[len(pending)-256:]
			}
			if err != nil {
				return
			}
		}
	}()
	start := time.Now()
	if err := cli.Start(); err != nil {
		t.Fatal(err)
	}
	cliDone := make(chan struct{})
	var cliErr error
	go func() {
		cliErr = cli.Wait()
		pw.Close()
		close(cliDone)
	}()
	resharding := func() bool {
		select {
		case <-cliDone:
			return false
		default:
			return true
		}
	}

	// The decisions, each released when the reshard reaches a slot:
	// each key's first ten at slots spread over the whole reshard, the
	// other fifteen around its own slot's move, from seven slots before
	// to seven after, so that the keys being migrated are the busiest.
	type request struct{ key, release int }
	var plan []request
	for k := range keys {
		for j := range reshardRequests {
			release := k + j - 17
			if j < 10 {
				release = j*reshardSlots/10 + k*7919%(reshardSlots/10) // 7919 is prime: spread
			}
			plan = append(plan, request{k, max(release, 0)})
		}
	}
	sort.SliceStable(plan, func(a, b int) bool { return plan[a].release < plan[b].release })
	total := int64(len(plan))
	var next, during, denied atomic.Int64
	allowed := make([]atomic.Int64, len(keys))
	var emu sync.Mutex
	errs := map[string]int{}
	var wg sync.WaitGroup
	for range reshardConns {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= total {
					return
				}
				r := plan[i]
				// moved counts the slots started: slot s moves once it
				// is s+1.
				for moved.Load() <= int64(r.release) && resharding() {
					time.Sleep(time.Millisecond)
				}
				k := r.key
				v, err := cc.Do(ctx, d.args(keys[k])...).Int64Slice()
				if resharding() {
					during.Add(1)
				}
				if err == nil && len(v) != 5 {
					err = fmt.Errorf("%s answered %v", d.name, v)
				}
				if err != nil {
					emu.Lock()
					errs[err.Error()]++
					emu.Unlock()
					continue
				}
				if d.allowed(v) {
					allowed[k].Add(1)
				} else {
					denied.Add(1)
				}
			}
		})
	}
	wg.Wait()
	<-cliDone
	<-read
	elapsed := time.Since(start)
	out := ansiColor.ReplaceAllString(output.String(), "")
	if cctx.Err() != nil {
		t.Fatalf("the reshard did not finish in 3 minutes:\n%s", tail(out, 40))
	}
	if cliErr != nil || strings.Contains(out, "Target key exists") || strings.Contains(out, "BUSYKEY") {
		t.Fatalf("the reshard under load failed (%v):\n%s", cliErr, tail(out, 40))
	}
	if !strings.Contains(out, "Ready to move 2000 slots.") || moved.Load() != reshardSlots {
		t.Fatalf("the reshard moved %d slots, want %d:\n%s", moved.Load(), reshardSlots, tail(out, 40))
	}
	t.Logf("%s: %d decisions on %d keys in %v, %d of them while the reshard ran", d.name, total, len(keys), elapsed.Round(time.Millisecond), during.Load())

	if len(errs) > 0 {
		var lines []string
		for text, n := range errs {
			lines = append(lines, fmt.Sprintf("%6d × %s", n, text))
		}
		sort.Strings(lines)
		t.Errorf("replies that were not decisions:\n%s", strings.Join(lines, "\n"))
	}
	var wrong []string
	sum := int64(0)
	for k := range keys {
		n := allowed[k].Load()
		sum += n
		if n != d.limit {
			wrong = append(wrong, fmt.Sprintf("%s (slot %d): %d allowed", keys[k], k, n))
		}
	}
	if len(wrong) > 0 {
		t.Errorf("%d keys did not admit exactly their limit of %d:\n%s", len(wrong), d.limit, strings.Join(wrong[:min(len(wrong), 20)], "\n"))
	}
	if sum+denied.Load() != total && len(errs) == 0 {
		t.Errorf("%d allowed and %d denied decisions, want %d in all", sum, denied.Load(), total)
	}
	if during.Load() < int64(len(keys)) {
		t.Errorf("only %d decisions were answered while the reshard ran: the load did not overlap it", during.Load())
	}

	c.waitAgree(3)
	own = c.owners(0)
	for s := range keys {
		if own[s] != 1 {
			t.Fatalf("slot %d is served by node %d after the reshard, want the second", s, own[s])
		}
	}
	for i, want := range []int64{0, int64(len(keys))} {
		if n, err := c.conns[i].DBSize(ctx).Result(); err != nil || n != want {
			t.Errorf("node %d holds %d keys after the reshard (%v), want %d", i, n, err, want)
		}
	}
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestClusterMigrationInterrupted: a slot holding 3,000 keys, rate-limit
// states of every kind and strings, is being moved batch by batch as
// redis-cli moves it (CLUSTER SETSLOT IMPORTING and MIGRATING, CLUSTER
// GETKEYSINSLOT, MIGRATE ... KEYS) when the target is killed with
// SIGKILL. The target takes no periodic snapshot (snapshot-interval 0),
// yet restarted from its directory it holds every key it acknowledged: a
// node importing a key answers once the key is on disk. redis-cli
// --cluster fix closes the slot (it gives it to the node holding most of
// its keys, the source here, and moves the target's there) and
// --cluster check finds the cluster whole: every key is there, once,
// with its state as it was before the move.
func TestClusterMigrationInterrupted(t *testing.T) {
	c := startClusterNodes(t, repeatKind(testserver.Limitkv, 3))
	ctx := context.Background()
	c.create(3, 0)
	const src, dst = 0, 1
	own := c.owners(0)
	tag := ""
	for i := 0; tag == ""; i++ {
		if tg := "{moving:" + strconv.Itoa(i) + "}"; own[slotOf(tg)] == src {
			tag = tg
		}
	}
	slot := slotOf(tag)
	srcConn, dstConn := c.conns[src], c.conns[dst]

	const n = 3000
	keys := make([]string, n)
	_, err := srcConn.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range keys {
			keys[i] = tag + ":" + strconv.Itoa(i)
			k := keys[i]
			for range 1 + i%5 {
				switch i % 4 {
				case 0:
					p.Do(ctx, "RL.FIXED", k, 10, "1h")
				case 1:
					p.Do(ctx, "RL.SLIDE", k, 10, "1h")
				case 2:
					p.Do(ctx, "CL.THROTTLE", k, 9, 1, 3600, 1)
				case 3:
					p.Append(ctx, k, "x")
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("writing the slot's keys: %v", err)
	}
	before := dumps(t, srcConn, keys)

	srcID, dstID := c.id(src), c.id(dst)
	do := func(conn *redis.Client, args ...any) any {
		t.Helper()
		v, err := conn.Do(ctx, args...).Result()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return v
	}
	do(dstConn, "CONFIG", "SET", "snapshot-interval", "0")
	do(dstConn, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID)
	do(srcConn, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID)
	host, port := "127.0.0.1", strconv.Itoa(c.nodes[dst].Port())
	batch := func() []string {
		t.Helper()
		ks, err := srcConn.ClusterGetKeysInSlot(ctx, slot, 100).Result()
		if err != nil || len(ks) == 0 {
			t.Fatalf("CLUSTER GETKEYSINSLOT %d 100: %v %v", slot, ks, err)
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		for _, k := range ks {
			args = append(args, k)
		}
		if v := do(srcConn, args...); v != "OK" {
			t.Fatalf("MIGRATE: %v", v)
		}
		return ks
	}
	// The target takes no periodic snapshot: what it acknowledged must
	// be on its disk because it acknowledged it.
	var moved []string
	for range 6 {
		moved = append(moved, batch()...)
	}
	c.nodes[dst].Kill()
	if err := c.nodes[dst].Restart(); err != nil {
		t.Fatal(err)
	}
	c.waitAgree(3)

	// Before the fix: the source holds what it did not send, the target
	// what its snapshot held, no key both.
	inSlot := func(i int) []string {
		t.Helper()
		ks, err := c.conns[i].ClusterGetKeysInSlot(ctx, slot, 2*n).Result()
		if err != nil {
			t.Fatalf("CLUSTER GETKEYSINSLOT on node %d: %v", i, err)
		}
		if count, err := c.conns[i].ClusterCountKeysInSlot(ctx, slot).Result(); err != nil || count != int64(len(ks)) {
			t.Fatalf("CLUSTER COUNTKEYSINSLOT on node %d: %d %v, GETKEYSINSLOT gave %d keys", i, count, err, len(ks))
		}
		slices.Sort(ks)
		return ks
	}
	sorted := func(ks []string) []string { ks = slices.Clone(ks); slices.Sort(ks); return ks }
	var left []string
	for _, k := range keys {
		if !slices.Contains(moved, k) {
			left = append(left, k)
		}
	}
	if got := inSlot(src); !slices.Equal(got, sorted(left)) {
		t.Errorf("the source holds %d keys of the slot after the target's restart, want the %d it did not send", len(got), len(left))
	}
	if got := inSlot(dst); !slices.Equal(got, sorted(moved)) {
		t.Errorf("the restarted target holds %d keys of the slot, want the %d it acknowledged", len(got), len(moved))
	}

	// Both nodes hold keys of the slot: fix gives it to the one with
	// the most (the source, here) and moves the other's keys there.
	c.cliOK([]string{"--cluster", "fix", c.addr(src)}, fmt.Sprintf(">>> Fixing open slot %d", slot),
		fmt.Sprintf(">>> Case 2: Moving all the %d slot keys to its owner %s", slot, c.addr(src)))
	c.waitAgree(3)
	out := c.cliOK([]string{"--cluster", "check", c.addr(2)}, "[OK] All nodes agree about slots configuration.", "[OK] All 16384 slots covered.")
	if strings.Contains(out, "[WARNING]") {
		t.Fatalf("--cluster check after --cluster fix warns:\n%s", out)
	}
	if owner := c.owners(2)[slot]; owner != src {
		t.Fatalf("slot %d is served by node %d after the fix, want the source, which held most of its keys", slot, owner)
	}

	// After the fix: every key on the source, once, with its state as
	// it was.
	for _, i := range []int{dst, 2} {
		if got := inSlot(i); len(got) != 0 {
			t.Errorf("node %d still holds %d keys of the slot after the fix", i, len(got))
		}
	}
	got := inSlot(src)
	if !slices.Equal(got, sorted(keys)) {
		t.Fatalf("the source holds %d keys of the slot after the fix, want all %d", len(got), len(keys))
	}
	after := dumps(t, srcConn, got)
	changed := 0
	for _, k := range got {
		if !bytes.Equal(after[k], before[k]) {
			if changed++; changed <= 10 {
				t.Errorf("%s: its state after the fix differs from before the move", k)
			}
		}
	}
	t.Logf("%d keys: %d moved to the target before it was killed, and moved back by --cluster fix; %d never moved", n, len(moved), len(left))
}

// dumps reads the DUMP payload of each key from one node.
func dumps(t *testing.T, conn *redis.Client, keys []string) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	cmds, err := conn.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Dump(ctx, k)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("DUMP: %v", err)
	}
	out := make(map[string][]byte, len(keys))
	for i, cmd := range cmds {
		v, err := cmd.(*redis.StringCmd).Bytes()
		if err != nil {
			t.Fatalf("DUMP %s: %v", keys[i], err)
		}
		out[keys[i]] = v
	}
	return out
}
