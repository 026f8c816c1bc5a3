package tests

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// rueidis, the Redis organisation's Go client, with its default options:
// client-side caching on (it refuses to start against a server without
// CLIENT TRACKING). DoCache answers from its cache until another client
// changes the key, then from the server again; a cached RL.FIXED_RO
// answer is dropped by the next decision on its key.
func TestRueidisClientSideCaching(t *testing.T) {
	s := startLimitkv(t)
	ctx := context.Background()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr}})
	if err != nil {
		t.Fatalf("rueidis with its defaults: %v", err)
	}
	defer c.Close()
	other := goRedis(t, s.Addr, 2)
	other.Set(ctx, "page", "v1", 0)

	get := func() (string, bool) {
		r := c.DoCache(ctx, c.B().Get().Key("page").Cache(), time.Minute)
		v, err := r.ToString()
		if err != nil {
			t.Fatal(err)
		}
		return v, r.IsCacheHit()
	}
	if v, hit := get(); v != "v1" || hit {
		t.Fatalf("first read: %q, cache hit %v", v, hit)
	}
	if v, hit := get(); v != "v1" || !hit {
		t.Fatalf("second read: %q, cache hit %v", v, hit)
	}
	other.Set(ctx, "page", "v2", 0)
	waitCache(t, func() bool { v, hit := get(); return v == "v2" && !hit })

	peek := func() ([]int64, bool) {
		cmd := rueidis.Cacheable(c.B().Arbitrary("RL.FIXED_RO").Keys("api").Args("3", "1h").Build())
		r := c.DoCache(ctx, cmd, time.Minute)
		v, err := r.AsIntSlice()
		if err != nil {
			t.Fatal(err)
		}
		return v, r.IsCacheHit()
	}
	if d, hit := peek(); d[2] != 2 || hit {
		t.Fatalf("first peek: %v, cache hit %v", d, hit)
	}
	if d, hit := peek(); d[2] != 2 || !hit {
		t.Fatalf("second peek: %v, cache hit %v", d, hit)
	}
	other.Do(ctx, "RL.FIXED", "api", "3", "1h")
	waitCache(t, func() bool { d, hit := peek(); return d[2] == 1 && !hit })
}

// waitCache polls until an invalidation has reached the client (bounded).
func waitCache(t *testing.T, ok func() bool) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if ok() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the client's cache was never invalidated")
}
