package tests

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/limitkv/limitkv/resp"
)

// The rate-limit commands, black box: atomicity under many connections,
// and one test per common rate-limit recipe showing that its bug cannot
// happen.

// frozenServer starts limitkv with the debug clock frozen at ms.
func frozenServer(t *testing.T, ms int64, flags ...string) (*server, *rawConn) {
	t.Helper()
	s := startLimitkv(t, append([]string{"--enable-debug-command", "yes"}, flags...)...)
	c := dialRaw(t, s.Addr)
	if v := c.do("DEBUG", "CLOCK", "SET", strconv.FormatInt(ms, 10)); v.Int != ms {
		t.Fatalf("DEBUG CLOCK SET: %s", v)
	}
	return s, c
}

func advance(t *testing.T, c *rawConn, ms int64) {
	t.Helper()
	if v := c.do("DEBUG", "CLOCK", "ADVANCE", strconv.FormatInt(ms, 10)); v.Type != ':' {
		t.Fatalf("DEBUG CLOCK ADVANCE: %s", v)
	}
}

// decision reads an RL reply.
func decision(t *testing.T, v resp.Value) [5]int64 {
	t.Helper()
	if v.Type != '*' || len(v.Elems) != 5 {
		t.Fatalf("not an RL reply: %s", v)
	}
	var d [5]int64
	for i, e := range v.Elems {
		d[i] = e.Int
	}
	return d
}

// TestRateLimitAtomicity: 128 connections hammer one key at once; exactly
// limit requests are admitted, for every rate-limit command.
func TestRateLimitAtomicity(t *testing.T) {
	const conns, each, limit = 128, 8, 300
	s, ctl := frozenServer(t, 1_800_000_000_000)
	cases := []struct {
		name    string
		args    []string
		allowed func(v resp.Value) bool
		want    int
	}{
		{"RL.FIXED", []string{"RL.FIXED", "k-fixed", strconv.Itoa(limit), "1h"}, func(v resp.Value) bool { return v.Elems[0].Int == 1 }, limit},
		{"RL.FIXED multi-rule", []string{"RL.FIXED", "k-fixed2", "1000", "1h", strconv.Itoa(limit), "1d", "COST", "1"}, func(v resp.Value) bool { return v.Elems[0].Int == 1 }, limit},
		{"RL.SLIDE", []string{"RL.SLIDE", "k-slide", strconv.Itoa(limit), "1h"}, func(v resp.Value) bool { return v.Elems[0].Int == 1 }, limit},
		{"RL.SLIDE PENALIZE", []string{"RL.SLIDE", "k-pen", strconv.Itoa(limit), "1h", "PENALIZE"}, func(v resp.Value) bool { return v.Elems[0].Int == 1 }, limit},
		// CL.THROTTLE with a frozen clock: the burst (max_burst + 1) and no more.
		{"CL.THROTTLE", []string{"CL.THROTTLE", "k-gcra", strconv.Itoa(limit - 1), "1", "3600"}, func(v resp.Value) bool { return v.Elems[0].Int == 0 }, limit},
		{"RL.LOGIN", []string{"RL.LOGIN", "k-login", strconv.Itoa(limit), "1h"}, func(v resp.Value) bool { return v.Elems[0].Int == 1 }, limit},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var admitted atomic.Int64
			hammer(t, s.Addr, sameBatches(conns, each, tc.args), each, func(v resp.Value) {
				if tc.allowed(v) {
					admitted.Add(1)
				}
			})
			if got := admitted.Load(); got != int64(tc.want) {
				t.Fatalf("%d of %d requests admitted, want exactly %d", got, conns*each, tc.want)
			}
		})
	}
	_ = ctl
}

// hammer opens a connection per batch, sends every batch at the same
// moment and hands each of the each replies a connection reads to
// onReply, from the connections' goroutines: many clients on one key at
// once, for the atomicity tests.
func hammer(t *testing.T, addr string, batches [][]byte, each int, onReply func(resp.Value)) {
	t.Helper()
	cs := make([]*rawConn, len(batches))
	for i := range cs {
		cs[i] = dialRaw(t, addr)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, c := range cs {
		wg.Add(1)
		go func(c *rawConn, batch []byte) {
			defer wg.Done()
			<-start
			c.send(batch)
			for j := 0; j < each; j++ {
				onReply(c.read())
			}
		}(c, batches[i])
	}
	close(start)
	wg.Wait()
}

// sameBatches is conns batches of each copies of one command.
func sameBatches(conns, each int, args []string) [][]byte {
	req := resp.AppendCommand(nil, toBytes(args)...)
	var batch []byte
	for i := 0; i < each; i++ {
		batch = append(batch, req...)
	}
	out := make([][]byte, conns)
	for i := range out {
		out[i] = batch
	}
	return out
}

func toBytes(args []string) [][]byte {
	out := make([][]byte, len(args))
	for i, a := range args {
		out[i] = []byte(a)
	}
	return out
}

// TestSMSSlidingWindowExact: the "3 SMS per hour" sliding-window Lua script
// compared with ">" and admitted limit+1, took timestamps from each app
// server's clock, and lost requests of the same millisecond (equal ZSET
// members). RL.SLIDE admits exactly limit, on the server's clock, counting
// requests of one millisecond one by one, and "3 per hour" refuses 3 more
// at 2:01 after 3 at 1:59.
func TestSMSSlidingWindowExact(t *testing.T) {
	base := time.Date(2026, 11, 21, 1, 59, 0, 0, time.UTC).UnixMilli()
	_, c := frozenServer(t, base)
	var req []byte
	for i := 0; i < 5; i++ { // five requests in the same millisecond
		req = append(req, resp.AppendCommand(nil, toBytes([]string{"RL.SLIDE", "sms:42", "3", "1h"})...)...)
	}
	c.send(req)
	var got []int64
	for i := 0; i < 5; i++ {
		got = append(got, decision(t, c.read())[0])
	}
	if fmt.Sprint(got) != "[1 1 1 0 0]" {
		t.Fatalf("same-millisecond requests: %v, want exactly 3 admitted", got)
	}
	advance(t, c, 2*60*1000) // 2:01
	if d := decision(t, c.do("RL.SLIDE", "sms:42", "3", "1h")); d[0] != 0 || d[3] != 58*60*1000 {
		t.Fatalf("at 2:01: %v, want refused until 2:59", d)
	}
	advance(t, c, 58*60*1000-1)
	if d := decision(t, c.do("RL.SLIDE", "sms:42", "3", "1h")); d[0] != 0 || d[3] != 1 {
		t.Fatalf("1 ms early: %v", d)
	}
	advance(t, c, 1)
	// The three of 1:59 have left; the two refused ones were never counted.
	if d := decision(t, c.do("RL.SLIDE", "sms:42", "3", "1h")); d[0] != 1 || d[2] != 2 {
		t.Fatalf("on time: %v", d)
	}
}

// TestQuotaNeverLosesItsTTL: a quota done with DECR on a key that expired a
// moment earlier created a key without TTL and blocked the user forever.
// A rate-limit key always carries the TTL of its window, at the very
// millisecond its window ends too.
func TestQuotaNeverLosesItsTTL(t *testing.T) {
	base := int64(1_800_000_000_000)
	_, c := frozenServer(t, base)
	for step := 0; step < 200; step++ {
		for _, cmd := range [][]string{
			{"RL.FIXED", "quota:first", "5", "60s", "ALIGN", "FIRST"},
			{"RL.FIXED", "quota:epoch", "5", "60s"},
			{"RL.SLIDE", "quota:slide", "5", "60s"},
		} {
			d := decision(t, c.do(cmd...))
			if ttl := c.do("PTTL", cmd[1]).Int; ttl == -1 || ttl > 60_000 {
				t.Fatalf("step %d %v: PTTL %d after %v", step, cmd, ttl, d)
			}
		}
		advance(t, c, 997) // lands on window edges over and over
	}
	// A blocked user is unblocked when the window ends, not never.
	d := decision(t, c.do("RL.FIXED", "quota:first", "5", "60s", "ALIGN", "FIRST", "COST", "5"))
	if d[0] == 0 {
		advance(t, c, d[3])
		if d2 := decision(t, c.do("RL.FIXED", "quota:first", "5", "60s", "ALIGN", "FIRST")); d2[0] != 1 {
			t.Fatalf("still blocked after retry_after: %v", d2)
		}
	}
}

// TestConversationDailyCapAtLocalMidnight: the new-conversations quota
// (hour*100+count in one value) rewrote its key without EX (losing the
// TTL) and reset at midnight in the app server's own time zone. RL.FIXED
// keeps the TTL itself and resets at midnight in the zone the command
// names, whatever zone the server runs in.
func TestConversationDailyCapAtLocalMidnight(t *testing.T) {
	os.Setenv("TZ", "America/Los_Angeles") // the server's own zone must not matter
	defer os.Unsetenv("TZ")
	sh := time.FixedZone("CST", 8*3600)
	base := time.Date(2026, 11, 21, 23, 59, 0, 0, sh).UnixMilli()
	_, c := frozenServer(t, base)
	for i := 0; i < 10; i++ {
		d := decision(t, c.do("RL.FIXED", "conv:7", "10", "1d", "TZ", "Asia/Shanghai"))
		if d[0] != 1 || d[4] != 60_000 {
			t.Fatalf("call %d: %v", i, d)
		}
		if ttl := c.do("PTTL", "conv:7").Int; ttl != 59_999 {
			t.Fatalf("PTTL %d, want the ms left to Shanghai midnight", ttl)
		}
	}
	if d := decision(t, c.do("RL.FIXED", "conv:7", "10", "1d", "TZ", "Asia/Shanghai")); d[0] != 0 || d[3] != 60_000 {
		t.Fatalf("11th: %v", d)
	}
	advance(t, c, 60_000) // 00:00 in Shanghai
	if d := decision(t, c.do("RL.FIXED", "conv:7", "10", "1d", "TZ", "Asia/Shanghai")); d[0] != 1 || d[2] != 9 || d[4] != 24*3600*1000 {
		t.Fatalf("after Shanghai midnight: %v", d)
	}
	// An hourly and a daily rule in one call: the "hour*100+count" encoding
	// of the conversation limits becomes two rules, all or nothing.
	for i := 0; i < 3; i++ {
		c.do("RL.FIXED", "conv:8", "3", "1h", "10", "1d", "TZ", "Asia/Shanghai")
	}
	if d := decision(t, c.do("RL.FIXED", "conv:8", "3", "1h", "10", "1d", "TZ", "Asia/Shanghai")); d[0] != 0 || d[1] != 3 {
		t.Fatalf("hourly rule should refuse: %v", d)
	}
}

// TestReplyRatePenalizedLogStaysBounded: the "5 replies per minute" ZSET
// log grew by a member per request, a million requests a million members.
// RL.SLIDE PENALIZE keeps refusing a client that keeps retrying, in bounded
// memory.
func TestReplyRatePenalizedLogStaysBounded(t *testing.T) {
	_, c := frozenServer(t, 1_800_000_000_000)
	const total = 100_000
	var batch []byte
	req := resp.AppendCommand(nil, toBytes([]string{"RL.SLIDE", "hist:harry:reply", "5", "60s", "PENALIZE"})...)
	admitted := 0
	for sent := 0; sent < total; sent += 1000 {
		batch = batch[:0]
		for i := 0; i < 1000; i++ {
			batch = append(batch, req...)
		}
		c.send(batch)
		for i := 0; i < 1000; i++ {
			admitted += int(decision(t, c.read())[0])
		}
		advance(t, c, 7) // 1000 requests every 7 ms of server time
	}
	if admitted != 5 {
		t.Fatalf("%d admitted, want 5", admitted)
	}
	mem := c.do("MEMORY", "USAGE", "hist:harry:reply").Int
	if mem <= 0 || mem > 256 {
		t.Fatalf("MEMORY USAGE %d bytes after %d penalized requests", mem, total)
	}
	t.Logf("MEMORY USAGE after %d penalized requests: %d bytes", total, mem)
	// Without PENALIZE a million refused requests cost nothing either.
	c.do("RL.SLIDE", "plain", "5", "60s", "COST", "5")
	before := c.do("MEMORY", "USAGE", "plain").Int
	for i := 0; i < 10; i++ {
		batch = batch[:0]
		for j := 0; j < 1000; j++ {
			batch = append(batch, resp.AppendCommand(nil, toBytes([]string{"RL.SLIDE", "plain", "5", "60s"})...)...)
		}
		c.send(batch)
		for j := 0; j < 1000; j++ {
			c.read()
		}
	}
	if after := c.do("MEMORY", "USAGE", "plain").Int; after != before {
		t.Fatalf("refused requests grew the key from %d to %d bytes", before, after)
	}
}

// TestRateLimitWithGoRedis: the commands through go-redis, RESP2 and RESP3.
func TestRateLimitWithGoRedis(t *testing.T) {
	s := startLimitkv(t)
	ctx := context.Background()
	for _, proto := range []int{2, 3} {
		c := goRedis(t, s.Addr, proto)
		key := fmt.Sprintf("api:%d", proto)
		for i := 0; i < 3; i++ {
			vals, err := c.Do(ctx, "RL.SLIDE", key, 2, "1m").Int64Slice()
			if err != nil {
				t.Fatal(err)
			}
			if allowed := vals[0] == 1; allowed != (i < 2) {
				t.Fatalf("RESP%d request %d: %v", proto, i, vals)
			}
		}
		vals, err := c.Do(ctx, "CL.THROTTLE", key+":gcra", 15, 30, 60).Int64Slice()
		if err != nil || fmt.Sprint(vals) != "[0 16 15 -1 2]" {
			t.Fatalf("CL.THROTTLE: %v %v", vals, err)
		}
		if typ, _ := c.Type(ctx, key).Result(); typ != "ratelimit" {
			t.Fatalf("TYPE %q", typ)
		}
		err = c.Do(ctx, "RL.FIXED", key, 0, "1m").Err()
		if err == nil || err.Error() != "ERR invalid limit '0': expected an integer from 1 to 9007199254740992" {
			t.Fatalf("error: %v", err)
		}
		_ = redis.Nil
	}
}

// TestLoginListKeepsNewest: the "5 logins per hour" filter read LINDEX 4,
// then RPUSHed and LTRIMmed 0 4 — keeping the five OLDEST logins, so the list
// froze — and raced between app servers. RL.LOGIN keeps the newest logins
// at the head, decides and records atomically, and many app servers
// logging the same user in at once get exactly the limit through.
func TestLoginListKeepsNewest(t *testing.T) {
	base := int64(1_800_000_000_000)
	s, c := frozenServer(t, base)
	var times []string
	for i := 0; i < 5; i++ {
		if d := decision(t, c.do("RL.LOGIN", "uid:9", "5", "1h", "KEEP", "5")); d[0] != 1 {
			t.Fatalf("login %d refused: %v", i, d)
		}
		times = append([]string{strconv.FormatInt(base+int64(i)*1000, 10)}, times...)
		advance(t, c, 1000)
	}
	if d := decision(t, c.do("RL.LOGIN", "uid:9", "5", "1h", "KEEP", "5")); d[0] != 0 {
		t.Fatalf("6th login within the hour allowed: %v", d)
	}
	// An hour after the first login it has left the window: a login is
	// allowed, goes to the head, and the oldest is dropped — the list moves
	// with time instead of freezing on the first five.
	advance(t, c, 3600*1000-5000)
	now := base + 3600*1000
	if d := decision(t, c.do("RL.LOGIN", "uid:9", "5", "1h", "KEEP", "5")); d[0] != 1 {
		t.Fatalf("login an hour after the first refused: %v", d)
	}
	want := append([]string{strconv.FormatInt(now, 10)}, times[:4]...)
	got := c.do("LRANGE", "uid:9", "0", "-1")
	if len(got.Elems) != 5 {
		t.Fatalf("history %s", got)
	}
	for i, e := range got.Elems {
		if string(e.Str) != want[i] {
			t.Fatalf("history %s, want %v (newest first)", got, want)
		}
	}
	// App servers racing on one user.
	const servers = 100
	var ok atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < servers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cc := dialRaw(t, s.Addr)
			if decision(t, cc.do("RL.LOGIN", "uid:race", "5", "1h"))[0] == 1 {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 5 {
		t.Fatalf("%d of %d simultaneous logins allowed, want 5", ok.Load(), servers)
	}
}
