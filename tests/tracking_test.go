package tests

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"
)

// A cached rate-limit answer is invalidated by the next decision that
// changes the key: a RESP3 client caching RL.FIXED_RO's answer is told
// when another client's RL.FIXED counts a request, and not when a
// denial leaves the state as it was.
func TestTrackingRateLimitDecisions(t *testing.T) {
	s, c := frozenServer(t, 1_700_000_000_000)
	cache := dialRaw(t, s.Addr)
	cache.do("HELLO", "3")
	if v := cache.do("CLIENT", "TRACKING", "ON"); v.String() != "+OK" {
		t.Fatal(v)
	}
	cache.do("RL.FIXED_RO", "api:1", "2", "1m")
	c.do("RL.FIXED", "api:1", "2", "1m")
	cache.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if v := cache.read(); v.String() != `>["invalidate", ["api:1"]]` {
		t.Fatalf("after a decision: %s", v)
	}
	cache.do("RL.FIXED_RO", "api:1", "2", "1m")
	c.do("RL.FIXED", "api:1", "2", "1m") // the second, allowed
	if v := cache.read(); v.String() != `>["invalidate", ["api:1"]]` {
		t.Fatalf("after the second decision: %s", v)
	}
	cache.do("RL.FIXED_RO", "api:1", "2", "1m")
	c.do("RL.FIXED", "api:1", "2", "1m") // denied: nothing changed
	if v := cache.do("PING"); v.String() != "+PONG" {
		t.Fatalf("a denial sent something: %s", v)
	}
	advance(t, c, 61_000) // the window ends: the key expires
	c.do("GET", "api:1")
	if v := cache.read(); v.String() != `>["invalidate", ["api:1"]]` {
		t.Fatalf("after the expiry: %s", v)
	}
}

// tracking-table-max-keys bounds the readers the server remembers: past
// it keys are forgotten at random and their readers told, as in Redis.
func TestTrackingTableMaxKeys(t *testing.T) {
	for _, srv := range []*server{startRedis(t), startLimitkv(t)} {
		c, cache := dialRaw(t, srv.Addr), dialRaw(t, srv.Addr)
		cache.do("HELLO", "3")
		cache.do("CLIENT", "TRACKING", "ON")
		for i := 0; i < 100; i++ {
			cache.do("GET", "k"+strconv.Itoa(i))
		}
		if n := infoField(t, c, "stats", "tracking_total_keys"); n != 100 {
			t.Fatalf("%s: tracking_total_keys %d, want 100", srv.Args[0], n)
		}
		c.do("CONFIG", "SET", "tracking-table-max-keys", "10")
		cache.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		seen := map[string]bool{}
		for len(seen) < 90 {
			v := cache.read()
			if len(v.Elems) != 2 || string(v.Elems[0].Str) != "invalidate" {
				t.Fatalf("%s: %s", srv.Args[0], v)
			}
			for _, k := range v.Elems[1].Elems {
				seen[string(k.Str)] = true
			}
		}
		if n := infoField(t, c, "stats", "tracking_total_keys"); n != 10 {
			t.Fatalf("%s: tracking_total_keys %d, want 10", srv.Args[0], n)
		}
		if n := infoField(t, c, "clients", "tracking_clients"); n != 1 {
			t.Fatalf("%s: tracking_clients %d", srv.Args[0], n)
		}
	}
}

// A replica's tracking clients are told of the changes its master sends:
// a replica applies states, not commands, and each applied key is
// invalidated as a local change would be (a rate-limit decision's too).
func TestTrackingOnReplica(t *testing.T) {
	m, r := startLimitkv(t), startLimitkv(t)
	mc, rc := goRedis(t, m.Addr, 2), goRedis(t, r.Addr, 2)
	host, port, _ := net.SplitHostPort(m.Addr)
	ctx := context.Background()
	if err := rc.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		t.Fatal(err)
	}
	mc.Set(ctx, "page", "v1", 0)
	mc.Do(ctx, "RL.FIXED", "api", "5", "1h")
	waitInSync(t, mc, rc)
	cache := dialRaw(t, r.Addr)
	cache.do("HELLO", "3")
	cache.do("CLIENT", "TRACKING", "ON")
	cache.do("GET", "page")
	cache.do("RL.FIXED_RO", "api", "5", "1h")
	mc.Set(ctx, "page", "v2", 0)
	mc.Do(ctx, "RL.FIXED", "api", "5", "1h")
	cache.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := map[string]bool{}
	for len(got) < 2 {
		v := cache.read()
		if len(v.Elems) != 2 || string(v.Elems[0].Str) != "invalidate" {
			t.Fatalf("on the replica: %s", v)
		}
		for _, k := range v.Elems[1].Elems {
			got[string(k.Str)] = true
		}
	}
	if !got["page"] || !got["api"] {
		t.Fatalf("invalidated %v, want page and api", got)
	}
}
