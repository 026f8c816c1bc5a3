package tests

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/limitkv/limitkv/internal/testserver"
	"github.com/limitkv/limitkv/resp"
)

// Pub/sub: what the differential suite cannot show, checked against the real
// binary and, where it says so, against redis-server too.

// pubsubWithRedis adds redis-server to the servers a test runs on when it is
// installed (always under CI).
func pubsubWithRedis(t *testing.T, servers map[string]*server) {
	if testserver.Available("redis-server") {
		servers["redis-server"] = startRedis(t)
	}
}

// pubsubWait polls cond for up to 5 seconds.
func pubsubWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("after 5s: %s", what)
		}
	}
}

// TestSlowSubscriberDisconnected: a subscriber that never reads while a
// publisher publishes 1 KB messages is disconnected past
// client-output-buffer-limit pubsub (Redis's default, 32mb 8mb 60), the
// server logs it, its memory stays bounded, and the channel has no
// subscriber afterwards.
func TestSlowSubscriberDisconnected(t *testing.T) {
	s := startLimitkv(t, "--persistence", "no")
	pub := dialRaw(t, s.Addr)
	if v := pub.do("CONFIG", "GET", "client-output-buffer-limit"); !strings.Contains(v.String(), "pubsub 33554432 8388608 60") {
		t.Fatalf("default limits: %s", v)
	}
	base := procStatus(t, s, "VmRSS")

	sub := dialRaw(t, s.Addr)
	sub.send(resp.AppendCommand(nil, []byte("SUBSCRIBE"), []byte("firehose")))
	if v := sub.read(); v.String() != `["subscribe", "firehose", :1]` {
		t.Fatal(v)
	}
	// From here on the subscriber reads nothing.

	msg := bytes.Repeat([]byte("m"), 1024)
	batch := bytes.Repeat(resp.AppendCommand(nil, []byte("PUBLISH"), []byte("firehose"), msg), 1000)
	sent, peak := 0, int64(0)
	const most = 300_000 // 300 MB: far past the limits and the socket buffers
	for closed := false; !closed; {
		if sent >= most {
			t.Fatalf("a subscriber that does not read is still subscribed after %d MB of messages", sent>>10)
		}
		pub.send(batch)
		for i := 0; i < 1000; i++ {
			v := pub.read()
			if v.Type != ':' || v.Int > 1 {
				t.Fatalf("PUBLISH: %s", v)
			}
			closed = closed || v.Int == 0
		}
		sent += 1000
		peak = max(peak, procStatus(t, s, "VmRSS")-base)
	}
	t.Logf("the subscriber was closed after %d messages of 1 KB; RSS grew by at most %d MB", sent, peak>>20)
	if peak > 128<<20 {
		t.Errorf("RSS grew by %d MB for one subscriber limited to 32 MB", peak>>20)
	}
	if v := pub.do("PUBLISH", "firehose", "anyone?"); v.Int != 0 {
		t.Errorf("PUBLISH after the disconnection: %s", v)
	}
	if n := infoField(t, pub, "stats", "pubsub_channels"); n != 0 {
		t.Errorf("pubsub_channels %d", n)
	}
	// The subscriber gets what was sent before the limit, then the end.
	sub.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := sub.r.Discard(1 << 30); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Errorf("the subscriber's connection is still open: %v", err)
	}
	s.Stop()
	if !regexp.MustCompile(`Client id=\d+ .*flags=P .*sub=1 .*cmd=subscribe.* scheduled to be closed ASAP for overcoming of output buffer limits\.`).MatchString(s.Output()) {
		t.Errorf("no output buffer limit line for the subscriber in the log:\n%.2000s", s.Output())
	}
}

// TestSubscriberInClientListAndInfo: CLIENT LIST's flags, sub, psub and
// ssub, its TYPE filter, INFO's pub/sub figures and CLIENT KILL TYPE pubsub,
// on limitkv as on redis-server.
func TestSubscriberInClientListAndInfo(t *testing.T) {
	servers := map[string]*server{"limitkv": startLimitkv(t, "--persistence", "no")}
	pubsubWithRedis(t, servers)
	field := regexp.MustCompile(` (flags|sub|psub|ssub|cmd)=(\S*)`)
	fields := func(line string) string {
		var out []string
		for _, m := range field.FindAllStringSubmatch(line, -1) {
			out = append(out, m[1]+"="+m[2])
		}
		return strings.Join(out, " ")
	}
	for name, s := range servers {
		c := dialRaw(t, s.Addr)
		sub := dialRaw(t, s.Addr)
		id := sub.do("CLIENT", "ID").Int
		sub.do("SUBSCRIBE", "a")
		sub.send(resp.AppendCommand(nil, []byte("SUBSCRIBE"), []byte("a"), []byte("b")))
		sub.read()
		sub.read()
		sub.do("PSUBSCRIBE", "p*")
		sub.do("SSUBSCRIBE", "s")
		other := dialRaw(t, s.Addr)
		otherID := other.do("CLIENT", "ID").Int
		other.do("SUBSCRIBE", "b")

		list := func(args ...string) map[int64]string {
			out := map[int64]string{}
			v := c.do(append([]string{"CLIENT", "LIST"}, args...)...)
			for _, line := range strings.Split(strings.TrimSpace(string(v.Str)), "\n") {
				if m := regexp.MustCompile(`^id=(\d+) `).FindStringSubmatch(line); m != nil {
					n, _ := strconv.ParseInt(m[1], 10, 64)
					out[n] = fields(line)
				}
			}
			return out
		}
		all := list()
		if want := "flags=P sub=2 psub=1 ssub=1 cmd=ssubscribe"; all[id] != want {
			t.Errorf("%s: CLIENT LIST: %q, want %q", name, all[id], want)
		}
		if pubsub := list("TYPE", "pubsub"); len(pubsub) != 2 || pubsub[id] == "" {
			t.Errorf("%s: CLIENT LIST TYPE pubsub: %v", name, pubsub)
		}
		if normal := list("TYPE", "normal"); len(normal) != 1 || normal[id] != "" {
			t.Errorf("%s: CLIENT LIST TYPE normal: %v", name, normal)
		}
		for f, want := range map[string]int64{"pubsub_channels": 2, "pubsub_patterns": 1, "pubsubshard_channels": 1} {
			if n := infoField(t, c, "stats", f); n != want {
				t.Errorf("%s: %s:%d, want %d", name, f, n, want)
			}
		}
		// Leaving pub/sub mode makes a client normal again.
		other.do("UNSUBSCRIBE")
		if got := list()[otherID]; got != "flags=N sub=0 psub=0 ssub=0 cmd=unsubscribe" {
			t.Errorf("%s: after UNSUBSCRIBE: %q", name, got)
		}
		other.do("SUBSCRIBE", "b")
		if v := c.do("CLIENT", "KILL", "TYPE", "pubsub"); v.Int != 2 {
			t.Errorf("%s: CLIENT KILL TYPE pubsub: %s", name, v)
		}
		if got := sub.readAll(); got != "" {
			t.Errorf("%s: the subscriber read %q", name, got)
		}
		pubsubWait(t, name+": subscriptions of killed clients gone", func() bool {
			return infoField(t, c, "stats", "pubsub_channels") == 0
		})
		if v := c.do("PUBSUB", "NUMSUB", "a", "b"); v.String() != `["a", :0, "b", :0]` {
			t.Errorf("%s: PUBSUB NUMSUB: %s", name, v)
		}
		if n := infoField(t, c, "stats", "pubsub_patterns") + infoField(t, c, "stats", "pubsubshard_channels"); n != 0 {
			t.Errorf("%s: %d patterns and shard channels left", name, n)
		}
		if v := c.do("PING"); v.String() != "+PONG" {
			t.Errorf("%s: PING: %s", name, v)
		}
	}
}

// TestQuitAndCloseUnsubscribe: QUIT and a closed connection end every
// subscription.
func TestQuitAndCloseUnsubscribe(t *testing.T) {
	s := startLimitkv(t, "--persistence", "no")
	c := dialRaw(t, s.Addr)
	quitter, closer := dialRaw(t, s.Addr), dialRaw(t, s.Addr)
	for _, sub := range []*rawConn{quitter, closer} {
		sub.do("SUBSCRIBE", "ch")
		sub.do("PSUBSCRIBE", "c*")
		sub.do("SSUBSCRIBE", "ch")
	}
	if v := c.do("PUBLISH", "ch", "x"); v.Int != 4 {
		t.Fatalf("PUBLISH to two subscribers of a channel and a pattern: %s", v)
	}
	for _, sub := range []*rawConn{quitter, closer} {
		sub.read()
		sub.read()
	}
	if v := quitter.do("QUIT"); v.String() != "+OK" {
		t.Fatalf("QUIT in pub/sub mode: %s", v)
	}
	closer.c.Close()
	pubsubWait(t, "no subscriber left", func() bool {
		return c.do("PUBLISH", "ch", "y").Int == 0
	})
	if v := c.do("PUBSUB", "NUMPAT"); v.Int != 0 {
		t.Errorf("PUBSUB NUMPAT %s", v)
	}
	if v := c.do("PUBSUB", "SHARDNUMSUB", "ch"); v.String() != `["ch", :0]` {
		t.Errorf("PUBSUB SHARDNUMSUB %s", v)
	}
}

// TestGoRedisPubSub: go-redis's PubSub, as an app broadcasting a changed
// limit to its servers would use it, over RESP2 and RESP3.
func TestGoRedisPubSub(t *testing.T) {
	s := startLimitkv(t, "--persistence", "no")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			c := goRedis(t, s.Addr, proto)
			ps := c.Subscribe(ctx, "limits")
			defer ps.Close()
			if _, err := ps.Receive(ctx); err != nil { // the confirmation
				t.Fatal(err)
			}
			if err := ps.PSubscribe(ctx, "limits:*"); err != nil {
				t.Fatal(err)
			}
			if err := ps.Ping(ctx, "hi"); err != nil {
				t.Fatal(err)
			}
			ch := ps.Channel()
			pub := goRedis(t, s.Addr, proto)
			// The PSUBSCRIBE is under way when PUBLISH counts: wait for it.
			pubsubWait(t, "the pattern subscription", func() bool {
				n, _ := pub.PubSubNumPat(ctx).Result()
				return n == 1
			})
			for i := 0; i < 100; i++ {
				if n, err := pub.Publish(ctx, "limits", "rl:sms 3 1h #"+strconv.Itoa(i)).Result(); err != nil || n != 1 {
					t.Fatalf("PUBLISH = %d %v", n, err)
				}
			}
			if n, err := pub.Publish(ctx, "limits:eu", "both").Result(); err != nil || n != 1 {
				t.Fatalf("PUBLISH to the pattern = %d %v", n, err)
			}
			for i := 0; i < 101; i++ {
				var m *redis.Message
				select {
				case m = <-ch:
				case <-ctx.Done():
					t.Fatalf("message %d never came", i)
				}
				want := &redis.Message{Channel: "limits", Payload: "rl:sms 3 1h #" + strconv.Itoa(i)}
				if i == 100 {
					want = &redis.Message{Channel: "limits:eu", Pattern: "limits:*", Payload: "both"}
				}
				if m.Channel != want.Channel || m.Pattern != want.Pattern || m.Payload != want.Payload {
					t.Fatalf("message %d: %+v, want %+v", i, m, want)
				}
			}
			if got, err := pub.PubSubNumSub(ctx, "limits").Result(); err != nil || got["limits"] != 1 {
				t.Fatalf("PUBSUB NUMSUB = %v %v", got, err)
			}
		})
	}
}
