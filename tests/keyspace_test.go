package tests

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/limitkv/limitkv/resp"
)

// Keyspace notifications against redis-server: each file of
// testdata/keyspace runs as a differential file (see diff_test.go) on
// servers with DEBUG enabled, which the files use to stop active expiry
// (DEBUG SET-ACTIVE-EXPIRE 0) and to let keys expire (DEBUG SLEEP); a
// subscriber's "<<" compares every event both servers published.
func TestKeyspaceEventsDifferential(t *testing.T) {
	redisSrv := startRedis(t, "--enable-debug-command", "yes")
	kv := startLimitkv(t, "--enable-debug-command", "yes")
	files, _ := filepath.Glob("testdata/keyspace/*.txt")
	if len(files) == 0 {
		t.Fatal("no keyspace event files")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			for _, addr := range []string{redisSrv.Addr, kv.Addr} {
				c := dialRaw(t, addr)
				for _, cmd := range [][]string{{"CONFIG", "SET", "notify-keyspace-events", ""}, {"DEBUG", "SET-ACTIVE-EXPIRE", "1"}} {
					if v := c.do(cmd...); v.String() != "+OK" {
						t.Fatalf("%s: %v", cmd, v)
					}
				}
			}
			runDiffFile(t, f, redisSrv.Addr, kv.Addr)
		})
	}
}

// The rate-limit events (class r): rl.denied for each request a limit
// refuses, rl.ban when a denial starts a ban, on the server's frozen
// clock; none for allowed requests, PEEKs, or with the class off ("A"
// leaves it out).
func TestKeyspaceEventsRateLimit(t *testing.T) {
	s, c := frozenServer(t, 1_700_000_000_000)
	sub := dialRaw(t, s.Addr)
	sub.do("PSUBSCRIBE", "__key*__:*")
	expect := func(want ...string) {
		t.Helper()
		got := strings.TrimSpace(drainMessages(t, sub, dialRaw(t, s.Addr)))
		if w := strings.Join(want, "\n  "); got != w {
			t.Fatalf("events:\n  %s\nwant:\n  %s", got, w)
		}
	}
	msg := func(ch, m string) string { return `["pmessage", "__key*__:*", "` + ch + `", "` + m + `"]` }
	c.do("CONFIG", "SET", "notify-keyspace-events", "KEA")
	c.do("RL.FIXED", "k", "1", "1m")
	c.do("RL.FIXED", "k", "1", "1m")
	expect()
	c.do("CONFIG", "SET", "notify-keyspace-events", "Er")
	if v := c.do("CONFIG", "GET", "notify-keyspace-events"); v.Elems[1].String() != `"Er"` {
		t.Fatalf("CONFIG GET: %s", v)
	}
	c.do("RL.FIXED", "k", "1", "1m") // denied
	c.do("RL.FIXED", "k", "1", "1m", "PEEK")
	c.do("RL.SLIDE", "s", "1", "1m", "BAN", "10m") // allowed
	c.do("RL.SLIDE", "s", "1", "1m", "BAN", "10m") // denied: the ban starts
	c.do("RL.SLIDE", "s", "1", "1m", "BAN", "10m") // denied by the ban
	c.do("CL.THROTTLE", "g", "0", "1", "60")
	c.do("CL.THROTTLE", "g", "0", "1", "60")
	c.do("RL.LOGIN", "u", "1", "1m", "BAN", "1h")
	c.do("RL.LOGIN", "u", "1", "1m", "BAN", "1h")
	expect(msg("__keyevent@0__:rl.denied", "k"),
		msg("__keyevent@0__:rl.denied", "s"), msg("__keyevent@0__:rl.ban", "s"),
		msg("__keyevent@0__:rl.denied", "s"),
		msg("__keyevent@0__:rl.denied", "g"),
		msg("__keyevent@0__:rl.denied", "u"), msg("__keyevent@0__:rl.ban", "u"))
	c.do("CONFIG", "SET", "notify-keyspace-events", "Kr")
	c.do("SELECT", "3")
	c.do("RL.FIXED", "k", "1", "1m")
	c.do("RL.FIXED", "k", "1", "1m", "SHADOW") // counted as shadow-denied, answered allowed
	c.do("RL.FIXED", "k", "1", "1m")
	expect(msg("__keyspace@3__:k", "rl.denied"))
}

// Active expiry's events: the sweeper deletes a key nobody touches, and
// both servers say so.
func TestKeyspaceEventsActiveExpiry(t *testing.T) {
	for _, addr := range []string{startRedis(t).Addr, startLimitkv(t).Addr} {
		c, sub := dialRaw(t, addr), dialRaw(t, addr)
		c.do("CONFIG", "SET", "notify-keyspace-events", "Ex")
		sub.do("SUBSCRIBE", "__keyevent@0__:expired")
		c.do("SET", "gone", "v", "PX", "20")
		sub.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if v := sub.read(); v.String() != `["message", "__keyevent@0__:expired", "gone"]` {
			t.Fatalf("%s: %s", addr, v)
		}
	}
}

// A flood of denials cannot pile up in a subscriber that does not read:
// its pub/sub output limit closes it, and the limiter goes on deciding.
func TestKeyspaceEventsDenialFloodBounded(t *testing.T) {
	s, c := frozenServer(t, 1_700_000_000_000)
	c.do("CONFIG", "SET", "notify-keyspace-events", "KEr")
	c.do("CONFIG", "SET", "client-output-buffer-limit", "pubsub 64kb 0 0")
	sub := dialRaw(t, s.Addr)
	sub.do("SUBSCRIBE", "__keyevent@0__:rl.denied")
	// With a 400-byte key, about 9 MB of events: 140 times the limit, and
	// twice what loopback's socket buffers can hold for a reader that
	// does not read.
	const n = 20000
	key := []byte(strings.Repeat("k", 400))
	var batch []byte
	for i := 0; i < n; i++ {
		batch = resp.AppendCommand(batch, []byte("RL.FIXED"), key, []byte("1"), []byte("1h"))
	}
	c.send(batch)
	denied := 0
	for i := 0; i < n; i++ {
		if v := c.read(); len(v.Elems) == 5 && v.Elems[0].Int == 0 {
			denied++
		}
	}
	if denied != n-1 {
		t.Fatalf("%d of %d denied", denied, n)
	}
	if v := c.do("CLIENT", "LIST", "TYPE", "pubsub"); strings.Contains(v.String(), "sub=1") {
		t.Fatalf("the subscriber that does not read is still there: %s", v)
	}
	start := time.Now()
	if got, closed := closedByServer(sub); !closed {
		t.Fatalf("the subscriber's connection is still open: read %d bytes in %v", len(got), time.Since(start))
	}
}

// redis-py's pub/sub reads keyspace events as it reads Redis's: a
// pattern subscriber gets each event of a SET with an expiry and of a
// rate-limit denial.
func TestKeyspaceEventsRedisPy(t *testing.T) {
	if _, err := os.Stat(examplePython); err != nil {
		exampleNeeds(t, examplePython)
	}
	s := startLimitkv(t)
	_, port, _ := net.SplitHostPort(s.Addr)
	script := `
import sys, redis
r = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]))
r.config_set("notify-keyspace-events", "KEA$gr")
p = r.pubsub()
p.psubscribe("__keyevent@0__:*")
p.get_message(timeout=5)  # the subscription's confirmation
r.set("page", "v", ex=60)
r.execute_command("RL.FIXED", "sms", 1, "1h")
r.execute_command("RL.FIXED", "sms", 1, "1h")
got = []
while len(got) < 3:
    m = p.get_message(timeout=5)
    if m is None:
        break
    got.append(m["channel"].decode() + " " + m["data"].decode())
print("\n".join(got))
`
	out, err := exec.Command(examplePython, "-c", script, port).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "No module named") {
			exampleNeeds(t, "python3-redis")
		}
		t.Fatalf("%v\n%s", err, out)
	}
	want := "__keyevent@0__:set page\n__keyevent@0__:expire page\n__keyevent@0__:rl.denied sms\n"
	if string(out) != want {
		t.Fatalf("redis-py got:\n%s\nwant:\n%s", out, want)
	}
}
