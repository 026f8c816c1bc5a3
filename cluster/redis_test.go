package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisNode is a cluster-enabled redis-server run for a test, the
// reference the codec, the slots and nodes.conf are checked against.
type redisNode struct {
	port int
	dir  string
	c    *redis.Client
	// kill ends the server by its pid and waits for it; calling it
	// again does nothing.
	kill func()
}

// needRedis skips without redis-server, except under CI, whose runner
// installs it: there a missing binary would silently drop the interop
// checks.
func needRedis(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is required in CI")
		}
		t.Skip("redis-server not on PATH")
	}
	return path
}

// freePortPair finds a port p such that p and its bus port p+10000 are
// both free on 127.0.0.1, since a cluster node listens on both.
func freePortPair(t *testing.T) int {
	t.Helper()
	for range 200 {
		p := 20000 + rand.IntN(30000)
		a, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		b, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+10000))
		a.Close()
		if err != nil {
			continue
		}
		b.Close()
		return p
	}
	t.Fatal("no free port pair")
	return 0
}

func startRedis(t *testing.T) *redisNode {
	t.Helper()
	bin := needRedis(t)
	dir := t.TempDir()
	for attempt := 0; ; attempt++ {
		port := freePortPair(t)
		cmd := exec.Command(bin,
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--port", strconv.Itoa(port),
			"--bind", "127.0.0.1",
			"--save", "",
			"--appendonly", "no",
			"--dir", dir,
			"--logfile", filepath.Join(dir, "redis.log"))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		stop := func() {
			cmd.Process.Kill()
			<-exited
		}
		c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port)})
		ctx := context.Background()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if c.Ping(ctx).Err() == nil {
				t.Cleanup(func() { c.Close(); stop() })
				return &redisNode{port: port, dir: dir, c: c, kill: stop}
			}
			select {
			case <-exited:
			case <-time.After(50 * time.Millisecond):
				if time.Now().Before(deadline) {
					continue
				}
			}
			break
		}
		c.Close()
		stop()
		log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
		// Another process may take the port between the probe and the
		// start; a few retries make that race harmless.
		if attempt == 3 {
			t.Fatalf("redis-server did not start:\n%s", log)
		}
		os.Remove(filepath.Join(dir, "nodes.conf"))
	}
}
