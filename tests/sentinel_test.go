package tests

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitkv/limitkv/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// Failover under the real redis-sentinel (Debian's redis-sentinel
// package): three sentinels watch a limitkv master with two limitkv
// replicas while go-redis's failover client writes through them; the
// master is killed; a replica must be promoted, the client must go on
// writing to it, the other replica must follow it, and the old master,
// restarted, must come back as a replica.

// redisSentinelPath finds redis-sentinel; locally its test skips without
// it, under CI it fails.
func redisSentinelPath(t testing.TB) string {
	t.Helper()
	return testserver.Require(t, "redis-sentinel")
}

// startWithConfig starts limitkv from a config file of its own, which
// Sentinel's CONFIG REWRITE rewrites, in dir.
func startWithConfig(t testing.TB, dir string, port int, lines ...string) *server {
	t.Helper()
	testserver.TrackSources()
	conf := filepath.Join(dir, "limitkv.conf")
	if _, err := os.Stat(conf); err != nil {
		body := "# written by the failover test\nport " + strconv.Itoa(port) + "\ndir " + filepath.Join(dir, "data") + "\nenable-debug-command yes\n" +
			strings.Join(lines, "\n") + "\n"
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return startProcess(t, testserver.Spec{Kind: testserver.Limitkv, Bin: limitkvBin, Addr: testserver.Addr(port), Dir: dir,
		Args: []string{"--config", conf}})
}

func startSentinel(t testing.TB, bin string, masterPort int) *server {
	t.Helper()
	dir := t.TempDir()
	port := freePort(t)
	args, err := testserver.SentinelArgs(port, dir, testserver.Addr(masterPort),
		"sentinel down-after-milliseconds mymaster 1000",
		"sentinel failover-timeout mymaster 10000",
		"sentinel parallel-syncs mymaster 2")
	if err != nil {
		t.Fatal(err)
	}
	return startProcess(t, testserver.Spec{Kind: testserver.Sentinel, Bin: bin, Addr: testserver.Addr(port), Dir: dir, Args: args})
}

// sentinelView is what a sentinel knows of mymaster.
func sentinelMaster(ctx context.Context, s *redis.SentinelClient) (string, error) {
	addr, err := s.GetMasterAddrByName(ctx, "mymaster").Result()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(addr[0], addr[1]), nil
}

func TestSentinelFailover(t *testing.T) {
	bin := redisSentinelPath(t)
	ctx := context.Background()
	ports := []int{freePort(t), freePort(t), freePort(t)}
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	master := startWithConfig(t, dirs[0], ports[0])
	replicaOf := fmt.Sprintf("replicaof 127.0.0.1 %d", ports[0])
	nodes := []*server{master,
		startWithConfig(t, dirs[1], ports[1], replicaOf),
		startWithConfig(t, dirs[2], ports[2], replicaOf)}
	mc := goRedis(t, master.Addr, 2)
	waitInSync(t, mc, goRedis(t, nodes[1].Addr, 2), goRedis(t, nodes[2].Addr, 2))

	var sentinels []*redis.SentinelClient
	var sentinelAddrs []string
	for i := 0; i < 3; i++ {
		s := startSentinel(t, bin, ports[0])
		sentinelAddrs = append(sentinelAddrs, s.Addr)
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr})
		t.Cleanup(func() { sc.Close() })
		sentinels = append(sentinels, sc)
	}
	// The sentinels find the replicas and each other.
	waitFor(t, 30*time.Second, "sentinels to see 2 replicas and 2 other sentinels", func() bool {
		for _, sc := range sentinels {
			reps, err := sc.Replicas(ctx, "mymaster").Result()
			if err != nil || len(reps) != 2 {
				return false
			}
			sens, err := sc.Sentinels(ctx, "mymaster").Result()
			if err != nil || len(sens) != 2 {
				return false
			}
		}
		return true
	})

	client := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: "mymaster", SentinelAddrs: sentinelAddrs,
		DialTimeout: 500 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second,
		MaxRetries: -1,
	})
	t.Cleanup(func() { client.Close() })

	// The load: INCR on a counter (every acknowledged increment is a
	// write the client was told succeeded) and RL.FIXED decisions.
	var acked atomic.Int64
	var failing atomic.Int64 // Unix ns of the first failure of an outage
	var outage time.Duration
	var outMu sync.Mutex
	stop := make(chan struct{})
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_, err := client.Incr(ctx, "acked").Result()
			if err == nil {
				err = client.Do(ctx, "RL.FIXED", "rl:"+strconv.Itoa(i%50), 1000, "1h").Err()
			}
			if err != nil {
				failing.CompareAndSwap(0, time.Now().UnixNano())
				time.Sleep(20 * time.Millisecond)
				continue
			}
			if since := failing.Swap(0); since != 0 {
				outMu.Lock()
				outage += time.Since(time.Unix(0, since))
				outMu.Unlock()
			}
			acked.Add(1)
		}
	}()
	waitFor(t, 10*time.Second, "the client's first writes", func() bool { return acked.Load() > 200 })

	master.Kill()
	killed := time.Now()
	var promoted string
	waitFor(t, 60*time.Second, "a replica to be promoted", func() bool {
		addr, err := sentinelMaster(ctx, sentinels[0])
		if err != nil || addr == master.Addr {
			return false
		}
		promoted = addr
		return true
	})
	failover := time.Since(killed)
	before := acked.Load()
	waitFor(t, 30*time.Second, "the client to write to the new master", func() bool { return acked.Load() > before+200 })
	close(stop)
	<-loadDone

	// On a loaded machine the sentinels may fail over a second time (the
	// promoted replica missing down-after-milliseconds); what follows is
	// judged against whichever node they name as master now.
	byAddr := map[string]*server{}
	for _, n := range nodes[1:] {
		byAddr[n.Addr] = n
	}
	if byAddr[promoted] == nil {
		t.Fatalf("promoted %s is none of the replicas", promoted)
	}
	current := func() (*server, *server, string) {
		addr, err := sentinelMaster(ctx, sentinels[0])
		if err != nil || byAddr[addr] == nil {
			return nil, nil, ""
		}
		for a, n := range byAddr {
			if a != addr {
				_, port, _ := net.SplitHostPort(addr)
				return byAddr[addr], n, port
			}
		}
		return nil, nil, ""
	}
	var newMaster, other *server
	var newPort string
	waitFor(t, 30*time.Second, "the other replica to follow the new master", func() bool {
		if newMaster, other, newPort = current(); newMaster == nil {
			return false
		}
		oc := goRedis(t, other.Addr, 2)
		role, _ := goRedis(t, newMaster.Addr, 2).Do(ctx, "ROLE").Slice()
		return len(role) > 0 && role[0] == "master" &&
			replInfo(t, oc, "replication", "master_port") == newPort &&
			replInfo(t, oc, "replication", "master_link_status") == "up"
	})
	nmc := goRedis(t, newMaster.Addr, 2)

	// Every write the client was told succeeded is there, but those the
	// old master acknowledged and had not yet sent: the loss a failover
	// can cause without WAIT.
	got, err := nmc.Get(ctx, "acked").Int64()
	if err != nil {
		t.Fatal(err)
	}
	lost := acked.Load() - got
	if lost < 0 {
		lost = 0
	}
	t.Logf("failover: promoted %s %.1fs after the kill; client outage %.1fs; %d acknowledged increments, %d lost",
		promoted, failover.Seconds(), outage.Seconds(), acked.Load(), lost)

	// The old master comes back (its config file and data as it left
	// them) and is turned into a replica of the new one by the sentinels.
	old := startWithConfig(t, dirs[0], ports[0])
	oldc := goRedis(t, old.Addr, 2)
	waitFor(t, 60*time.Second, "the old master to rejoin as a replica", func() bool {
		if newMaster, other, newPort = current(); newMaster == nil {
			return false
		}
		return replInfo(t, oldc, "replication", "role") == "slave" &&
			replInfo(t, oldc, "replication", "master_port") == newPort &&
			replInfo(t, oldc, "replication", "master_link_status") == "up"
	})
	nmc = goRedis(t, newMaster.Addr, 2)
	oc := goRedis(t, other.Addr, 2)
	waitInSync(t, nmc, oc, oldc)
	sameKeyspace(t, nmc, oc, oldc)
	// Sentinel rewrote the configuration files: the old master's now
	// names its master.
	conf, _ := os.ReadFile(filepath.Join(dirs[0], "limitkv.conf"))
	if !strings.Contains(string(conf), "replicaof 127.0.0.1 "+newPort) {
		t.Fatalf("the old master's config after CONFIG REWRITE:\n%s", conf)
	}
	if !strings.HasPrefix(string(conf), "# written by the failover test") {
		t.Fatalf("CONFIG REWRITE dropped the file's comment:\n%s", conf)
	}
}

func waitFor(t testing.TB, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
