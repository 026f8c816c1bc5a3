package tests

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/limitkv/limitkv/internal/testserver"
)

// clusterMessages: what the bus carries besides the cluster's own state.
// A PUBLISH on any node reaches the subscribers of every node, replicas
// and nodes of the other kind included; an SPUBLISH those of the shard
// of its channel. Named rate-limit policies set or deleted on one
// limitkv node reach every limitkv node, in MODULE messages that
// redis-server nodes ignore.
func clusterMessages(c *testCluster) {
	t := c.t
	ctx := context.Background()
	for from := range c.nodes {
		channel := fmt.Sprintf("news-from-%d", from)
		subs := make([]chan string, len(c.nodes))
		for i := range c.nodes {
			if i == from {
				continue
			}
			ps := c.conns[i].Subscribe(ctx, channel)
			t.Cleanup(func() { ps.Close() })
			if _, err := ps.Receive(ctx); err != nil {
				t.Fatalf("SUBSCRIBE on %s %s: %v", c.kinds[i], c.addr(i), err)
			}
			ch := make(chan string, 1)
			subs[i] = ch
			go func() {
				if m, err := ps.ReceiveMessage(ctx); err == nil {
					ch <- m.Payload
				}
			}()
		}
		if err := c.conns[from].Publish(ctx, channel, "hello").Err(); err != nil {
			t.Fatalf("PUBLISH on %s %s: %v", c.kinds[from], c.addr(from), err)
		}
		for i, ch := range subs {
			if ch == nil {
				continue
			}
			select {
			case got := <-ch:
				if got != "hello" {
					t.Fatalf("a subscriber on %s got %q", c.addr(i), got)
				}
			case <-time.After(clusterWait):
				t.Fatalf("a PUBLISH on %s %s did not reach the subscriber on %s %s", c.kinds[from], c.addr(from), c.kinds[i], c.addr(i))
			}
		}
	}

	// Policies are changed on masters (a replica refuses writes) and
	// reach every limitkv node, replicas included.
	var limitkvs, masters []int
	own := c.owners(0)
	for i, k := range c.kinds {
		if k == testserver.Limitkv {
			limitkvs = append(limitkvs, i)
			if slices.Contains(own[:], i) {
				masters = append(masters, i)
			}
		}
	}
	if len(masters) < 2 {
		return
	}
	policy := func(i int) string {
		v, err := c.conns[i].Do(ctx, "RL.POLICY", "GET", "api").StringSlice()
		if err != nil {
			return err.Error()
		}
		return fmt.Sprint(v)
	}
	set := func(on int, limit string) {
		t.Helper()
		if err := c.conns[on].Do(ctx, "RL.POLICY", "SET", "api", "FIXED", limit, "1m").Err(); err != nil {
			t.Fatalf("RL.POLICY SET on %s: %v", c.addr(on), err)
		}
		want := fmt.Sprint([]string{"FIXED", limit, "1m"})
		waitFor(t, clusterWait, "the policy set on "+c.addr(on)+" to reach every limitkv node", func() bool {
			return !slices.ContainsFunc(limitkvs, func(i int) bool { return policy(i) != want })
		})
	}
	set(masters[0], "10")
	// A later change on another node wins everywhere.
	set(masters[1], "20")
	// RL.CHECK applies it on whichever node serves the key. (It is sent
	// to that node directly: a cluster client that read COMMAND from a
	// redis-server node does not know that RL.CHECK's key is its second
	// argument.)
	for _, key := range []string{"user:1", "user:2", "user:3"} {
		owner := own[slotOf(key)]
		if c.kinds[owner] != testserver.Limitkv {
			continue
		}
		for i := 1; i <= 21; i++ {
			d, err := c.conns[owner].Do(ctx, "RL.CHECK", "api", key).Int64Slice()
			if err != nil || len(d) != 5 {
				t.Fatalf("RL.CHECK api %s: %v %v", key, d, err)
			}
			if allowed := d[0] == 1; allowed != (i <= 20) {
				t.Fatalf("RL.CHECK api %s, request %d: %v, want the limit of 20 set on another node", key, i, d)
			}
		}
	}
	// Changes of one policy made at once on two masters converge: every
	// node ends with the same one, whichever it is.
	var wg sync.WaitGroup
	for i, m := range masters[:2] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.conns[m].Do(ctx, "RL.POLICY", "SET", "race", "FIXED", strconv.Itoa(30+i), "1m")
		}()
	}
	wg.Wait()
	waitFor(t, clusterWait, "concurrent changes of one policy to converge", func() bool {
		first := ""
		for _, i := range limitkvs {
			v, err := c.conns[i].Do(ctx, "RL.POLICY", "GET", "race").StringSlice()
			if err != nil {
				return false
			}
			if got := fmt.Sprint(v); first == "" {
				first = got
			} else if got != first {
				return false
			}
		}
		return true
	})
	if err := c.conns[masters[1]].Do(ctx, "RL.POLICY", "DEL", "api").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, clusterWait, "the policy's deletion to reach every limitkv node", func() bool {
		return !slices.ContainsFunc(limitkvs, func(i int) bool { return policy(i) != "ERR no such policy 'api'" })
	})
	// The redis-server nodes took the MODULE messages in their stride.
	for i, k := range c.kinds {
		if k == testserver.Redis {
			if err := c.conns[i].Ping(ctx).Err(); err != nil {
				t.Fatalf("redis-server %s after the policy messages: %v", c.addr(i), err)
			}
		}
	}
}
