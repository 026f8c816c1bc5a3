package tests

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// go-redis's stream API against limitkv, as an app uses it for a queue:
// producers XADD with a cap, a consumer group reads with XREADGROUP
// (blocking), acknowledges, and a second consumer claims what the first
// left pending; XINFO and XPENDING report it. The same calls against
// redis-server give the same answers.
func TestStreamsGoRedis(t *testing.T) {
	for name, srv := range map[string]*server{"redis-server": startRedis(t), "limitkv": startLimitkv(t)} {
		ctx := context.Background()
		c := goRedis(t, srv.Addr, 3)
		for i := 1; i <= 5; i++ {
			if err := c.XAdd(ctx, &redis.XAddArgs{Stream: "jobs", MaxLen: 4, Approx: false, ID: "1-" + string(rune('0'+i)), Values: []any{"n", i}}).Err(); err != nil {
				t.Fatalf("%s: XADD: %v", name, err)
			}
		}
		if n := c.XLen(ctx, "jobs").Val(); n != 4 {
			t.Fatalf("%s: XLEN %d", name, n)
		}
		if err := c.XGroupCreate(ctx, "jobs", "workers", "0").Err(); err != nil {
			t.Fatalf("%s: XGROUP CREATE: %v", name, err)
		}
		got, err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "workers", Consumer: "w1", Streams: []string{"jobs", ">"}, Count: 3, Block: time.Second}).Result()
		if err != nil || len(got) != 1 || len(got[0].Messages) != 3 || got[0].Messages[0].ID != "1-2" {
			t.Fatalf("%s: XREADGROUP: %v %v", name, got, err)
		}
		if n := c.XAck(ctx, "jobs", "workers", "1-2").Val(); n != 1 {
			t.Fatalf("%s: XACK %d", name, n)
		}
		p := c.XPending(ctx, "jobs", "workers").Val()
		if p.Count != 2 || p.Lower != "1-3" || p.Higher != "1-4" || p.Consumers["w1"] != 2 {
			t.Fatalf("%s: XPENDING %+v", name, p)
		}
		claimed := c.XClaimJustID(ctx, &redis.XClaimArgs{Stream: "jobs", Group: "workers", Consumer: "w2", Messages: []string{"1-3"}}).Val()
		if len(claimed) != 1 || claimed[0] != "1-3" {
			t.Fatalf("%s: XCLAIM %v", name, claimed)
		}
		// What is left goes to w1; then a blocked reader is served by the
		// next XADD.
		if s := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "workers", Consumer: "w1", Streams: []string{"jobs", ">"}}).Val(); len(s) != 1 || len(s[0].Messages) != 1 {
			t.Fatalf("%s: XREADGROUP of the rest: %v", name, s)
		}
		done := make(chan []redis.XStream, 1)
		go func() {
			r := goRedis(t, srv.Addr, 2)
			s, _ := r.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "workers", Consumer: "w3", Streams: []string{"jobs", ">"}, Block: 10 * time.Second}).Result()
			done <- s
		}()
		for i := 0; i < 500 && infoMap(t, c, "clients")["blocked_clients"] != "1"; i++ {
			time.Sleep(10 * time.Millisecond)
		}
		c.XAdd(ctx, &redis.XAddArgs{Stream: "jobs", ID: "2-1", Values: []any{"n", 6}})
		if s := <-done; len(s) != 1 || len(s[0].Messages) != 1 || s[0].Messages[0].ID != "2-1" {
			t.Fatalf("%s: blocked XREADGROUP got %v", name, s)
		}
		info := c.XInfoStream(ctx, "jobs").Val()
		if info.Length != 5 || info.Groups != 1 || info.LastGeneratedID != "2-1" || info.EntriesAdded != 6 {
			t.Fatalf("%s: XINFO STREAM %+v", name, info)
		}
		groups := c.XInfoGroups(ctx, "jobs").Val()
		if len(groups) != 1 || groups[0].Pending != 4 || groups[0].Consumers != 3 || groups[0].LastDeliveredID != "2-1" {
			t.Fatalf("%s: XINFO GROUPS %+v", name, groups)
		}
	}
}

// redis-py's stream API, from Debian's python3-redis as apps run it: the
// same queue, with its reply parsing of XREADGROUP, XPENDING and XINFO.
func TestStreamsRedisPy(t *testing.T) {
	if _, err := os.Stat(examplePython); err != nil {
		exampleNeeds(t, examplePython)
	}
	s := startLimitkv(t)
	_, port, _ := net.SplitHostPort(s.Addr)
	script := `
import sys, redis
r = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]), decode_responses=True)
for i in range(1, 6):
    r.xadd("jobs", {"n": i}, id="1-%d" % i, maxlen=4, approximate=False)
r.xgroup_create("jobs", "workers", id="0")
got = r.xreadgroup("workers", "w1", {"jobs": ">"}, count=3, block=1000)
print(len(got[0][1]), got[0][1][0][0], got[0][1][0][1]["n"])
print(r.xack("jobs", "workers", "1-2"))
p = r.xpending("jobs", "workers")
print(p["pending"], p["min"], p["max"], p["consumers"][0]["name"])
print(r.xclaim("jobs", "workers", "w2", 0, ["1-3"], justid=True))
info = r.xinfo_stream("jobs")
print(info["length"], info["groups"], info["last-generated-id"])
print(r.xrange("jobs", "-", "+", count=1))
`
	out, err := exec.Command(examplePython, "-c", script, port).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "No module named") {
			exampleNeeds(t, "python3-redis")
		}
		t.Fatalf("%v\n%s", err, out)
	}
	want := "3 1-2 2\n1\n2 1-3 1-4 w1\n['1-3']\n4 1 1-5\n[('1-2', {'n': '2'})]\n"
	if string(out) != want {
		t.Fatalf("redis-py got:\n%s\nwant:\n%s", out, want)
	}
}
