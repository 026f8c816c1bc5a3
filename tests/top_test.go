package tests

import (
	"fmt"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/limitkv/limitkv/resp"
)

// RL.TOP, black box: counts exact under 128 concurrent connections while
// it is read, and node-local state that neither a restart nor a replica
// sees.

// topEntries reads RL.TOP's reply (RESP2) as key -> denied, checking that
// each error is 0 (few keys: the counts are exact) and the order.
func topEntries(t *testing.T, v resp.Value) ([]string, map[string]int64) {
	t.Helper()
	if v.Type != '*' {
		t.Fatalf("RL.TOP: %s", v)
	}
	var keys []string
	counts := map[string]int64{}
	last := int64(1 << 62)
	for _, e := range v.Elems {
		if len(e.Elems) != 8 || string(e.Elems[0].Str) != "key" || string(e.Elems[2].Str) != "db" ||
			string(e.Elems[4].Str) != "denied" || string(e.Elems[6].Str) != "error" {
			t.Fatalf("RL.TOP entry: %s", e)
		}
		key := fmt.Sprintf("%d/%s", e.Elems[3].Int, e.Elems[1].Str)
		n := e.Elems[5].Int
		if e.Elems[7].Int != 0 || n > last {
			t.Fatalf("RL.TOP: %s", v)
		}
		last = n
		keys = append(keys, key)
		counts[key] = n
	}
	return keys, counts
}

func TestRLTopConcurrent(t *testing.T) {
	const conns = 128
	s, ctl := frozenServer(t, 1_800_000_000_000)
	// Key i gets i+1 requests from every connection, one of them
	// allowed in all: 128*(i+1)-1 denials.
	cmds := [][]string{
		{"RL.FIXED", "f%d", "1", "1h"},
		{"RL.SLIDE", "s%d", "1", "1h"},
		{"CL.THROTTLE", "t%d", "0", "1", "3600"},
	}
	var batch []byte
	n := 0
	for i := 0; i < 4; i++ {
		for _, c := range cmds {
			args := append([]string{c[0], fmt.Sprintf(c[1], i)}, c[2:]...)
			for j := 0; j <= i; j++ {
				batch = append(batch, resp.AppendCommand(nil, toBytes(args)...)...)
				n++
			}
		}
	}
	cs := make([]*rawConn, conns)
	for i := range cs {
		cs[i] = dialRaw(t, s.Addr)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, c := range cs {
		wg.Add(1)
		go func(c *rawConn) {
			defer wg.Done()
			<-start
			c.send(batch)
			for i := 0; i < n; i++ {
				c.read()
			}
		}(c)
	}
	// RL.TOP reads while the denials are counted.
	reader := dialRaw(t, s.Addr)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 50; i++ {
			if v := reader.do("RL.TOP", "1000"); v.Type != '*' {
				t.Errorf("RL.TOP during the load: %s", v)
				return
			}
		}
	}()
	close(start)
	wg.Wait()
	<-done
	keys, counts := topEntries(t, ctl.do("RL.TOP", "1000"))
	if len(keys) != 12 {
		t.Fatalf("RL.TOP: %v", counts)
	}
	for i := 0; i < 4; i++ {
		for _, p := range []string{"f", "s", "t"} {
			if k := fmt.Sprintf("0/%s%d", p, i); counts[k] != int64(conns*(i+1)-1) {
				t.Fatalf("%s denied %d times, want %d", k, counts[k], conns*(i+1)-1)
			}
		}
	}
	if keys, _ := topEntries(t, ctl.do("RL.TOP", "3")); fmt.Sprint(keys) != "[0/f3 0/s3 0/t3]" {
		t.Fatalf("RL.TOP 3: %v", keys)
	}
	// Through go-redis, in RESP3: a list of maps.
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, Protocol: 3})
	defer rdb.Close()
	v, err := rdb.Do(t.Context(), "RL.TOP", "1").Result()
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(v); got != "[map[db:0 denied:511 error:0 key:f3]]" {
		t.Fatalf("RL.TOP 1 in RESP3: %s", got)
	}
	if v := ctl.do("RL.TOP", "RESET"); v.String() != "+OK" {
		t.Fatalf("RL.TOP RESET: %s", v)
	}
	if v := ctl.do("RL.TOP"); len(v.Elems) != 0 {
		t.Fatalf("after RESET: %s", v)
	}
}

// TestRLTopNodeLocal: RL.TOP is the node's own view, like SLOWLOG: a
// replica does not see its master's denials (it makes no decisions), and
// a restart starts afresh while the limits' state survives.
func TestRLTopNodeLocal(t *testing.T) {
	dir := t.TempDir()
	m := startLimitkvIn(t, dir, "--enable-debug-command", "yes")
	r := startReplicaOf(t, m, "")
	mc := redis.NewClient(&redis.Options{Addr: m.Addr})
	rc := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer mc.Close()
	defer rc.Close()
	ctx := t.Context()
	for i := 0; i < 3; i++ {
		if err := mc.Do(ctx, "RL.FIXED", "k", "1", "1h").Err(); err != nil {
			t.Fatal(err)
		}
	}
	waitInSync(t, mc, rc)
	if v, err := mc.Do(ctx, "RL.TOP").Slice(); err != nil || len(v) != 1 {
		t.Fatalf("master's RL.TOP: %v %v", v, err)
	}
	if v, err := rc.Do(ctx, "RL.TOP").Slice(); err != nil || len(v) != 0 {
		t.Fatalf("replica's RL.TOP: %v %v", v, err)
	}
	if rc.Exists(ctx, "k").Val() != 1 {
		t.Fatal("the limit's state did not replicate")
	}
	if err := mc.Do(ctx, "SAVE").Err(); err != nil {
		t.Fatal(err)
	}
	m.Stop()
	m2 := startLimitkvIn(t, dir)
	c := dialRaw(t, m2.Addr)
	if v := c.do("RL.TOP"); v.Type != '*' || len(v.Elems) != 0 {
		t.Fatalf("RL.TOP after a restart: %s", v)
	}
	if d := decision(t, c.do("RL.FIXED", "k", "1", "1h")); d[0] != 0 {
		t.Fatalf("the limit was not kept: %v", d)
	}
	if _, counts := topEntries(t, c.do("RL.TOP")); counts["0/k"] != 1 {
		t.Fatalf("RL.TOP after a restart and a denial: %v", counts)
	}
}
