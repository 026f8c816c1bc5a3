package tests

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/limitkv/limitkv/resp"
)

// TestScriptRedisRate drives go-redis/redis_rate (GCRA in Lua, through
// EVALSHA with an EVAL fallback) against limitkv and a real redis-server
// with the same sequence of calls, and compares the results. Both servers
// read their own clocks (the script calls TIME), so the decisions and the
// remaining counts must be equal and the durations close.
func TestScriptRedisRate(t *testing.T) {
	redisSrv := startRedis(t)
	kv := startLimitkv(t)
	ctx := context.Background()
	limiters := []*redis_rate.Limiter{
		redis_rate.NewLimiter(goRedis(t, redisSrv.Addr, 2)),
		redis_rate.NewLimiter(goRedis(t, kv.Addr, 2)),
	}
	perMinute, perHour := redis_rate.PerMinute(10), redis_rate.PerHour(20)
	steps := []struct {
		name string
		call func(l *redis_rate.Limiter) (*redis_rate.Result, error)
	}{}
	add := func(name string, n int, call func(l *redis_rate.Limiter) (*redis_rate.Result, error)) {
		for i := 0; i < n; i++ {
			steps = append(steps, struct {
				name string
				call func(l *redis_rate.Limiter) (*redis_rate.Result, error)
			}{fmt.Sprintf("%s #%d", name, i+1), call})
		}
	}
	add("Allow per minute", 12, func(l *redis_rate.Limiter) (*redis_rate.Result, error) {
		return l.Allow(ctx, "rate:a", perMinute)
	})
	add("AllowN 3 per hour", 8, func(l *redis_rate.Limiter) (*redis_rate.Result, error) {
		return l.AllowN(ctx, "rate:b", perHour, 3)
	})
	add("AllowAtMost 5 per hour", 3, func(l *redis_rate.Limiter) (*redis_rate.Result, error) {
		return l.AllowAtMost(ctx, "rate:b", perHour, 5)
	})
	add("AllowN 0 (peek)", 1, func(l *redis_rate.Limiter) (*redis_rate.Result, error) {
		return l.AllowN(ctx, "rate:a", perMinute, 0)
	})
	add("Reset", 1, func(l *redis_rate.Limiter) (*redis_rate.Result, error) {
		return &redis_rate.Result{}, l.Reset(ctx, "rate:a")
	})
	add("Allow after Reset", 2, func(l *redis_rate.Limiter) (*redis_rate.Result, error) {
		return l.Allow(ctx, "rate:a", perMinute)
	})
	add("AllowN beyond the burst", 1, func(l *redis_rate.Limiter) (*redis_rate.Result, error) {
		return l.AllowN(ctx, "rate:c", perMinute, 11)
	})
	allowed, denied := 0, 0
	for _, step := range steps {
		var results [2]*redis_rate.Result
		for i, l := range limiters {
			res, err := step.call(l)
			if err != nil {
				t.Fatalf("%s: server %d: %v", step.name, i, err)
			}
			results[i] = res
		}
		want, got := results[0], results[1]
		if want.Allowed > 0 {
			allowed++
		} else if want.RetryAfter > 0 {
			denied++
		}
		if want.Allowed != got.Allowed || want.Remaining != got.Remaining {
			t.Errorf("%s: redis allowed %d remaining %d; limitkv allowed %d remaining %d",
				step.name, want.Allowed, want.Remaining, got.Allowed, got.Remaining)
		}
		for _, d := range []struct {
			what      string
			want, got time.Duration
		}{{"retry after", want.RetryAfter, got.RetryAfter}, {"reset after", want.ResetAfter, got.ResetAfter}} {
			if (d.want < 0) != (d.got < 0) || math.Abs(float64(d.want-d.got)) > float64(250*time.Millisecond) {
				t.Errorf("%s: %s: redis %v, limitkv %v", step.name, d.what, d.want, d.got)
			}
		}
	}
	if allowed < 10 || denied < 5 {
		t.Fatalf("the sequence should both allow and deny: %d allowed, %d denied", allowed, denied)
	}
	// The state the script leaves is a float the script wrote with
	// redis.call (formatted as Redis formats Lua numbers): both must read
	// it back as a number of the same magnitude.
	var tats [2]float64
	for i, addr := range []string{redisSrv.Addr, kv.Addr} {
		v, err := goRedis(t, addr, 2).Get(ctx, "rate:rate:b").Float64()
		if err != nil {
			t.Fatalf("GET rate:rate:b (redis_rate prefixes its keys): %v", err)
		}
		tats[i] = v
	}
	if math.Abs(tats[0]-tats[1]) > 5 {
		t.Errorf("stored TAT: redis %v, limitkv %v", tats[0], tats[1])
	}
}

// TestScriptBusyAndKill runs a script that never ends: past
// busy-reply-threshold other clients get BUSY, SCRIPT KILL stops it and
// its caller gets Redis's error; a script that wrote cannot be killed, and
// only SHUTDOWN NOSAVE gets the server out of it.
func TestScriptBusyAndKill(t *testing.T) {
	kv := startLimitkv(t, "--busy-reply-threshold", "100")
	runner := dialRaw(t, kv.Addr)
	other := dialRaw(t, kv.Addr)

	if v := other.do("SCRIPT", "KILL"); v.String() != "-NOTBUSY No scripts in execution right now." {
		t.Fatalf("SCRIPT KILL with no script: %s", v)
	}
	const loop = "while true do end"
	runner.send(encodeCommand("EVAL", loop, "0"))
	waitBusy(t, other)
	if v := other.do("PING"); v.String() != "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE." {
		t.Fatalf("PING while busy: %s", v)
	}
	if v := other.do("MULTI"); v.String() != "+OK" {
		t.Fatalf("MULTI (allowed while busy): %s", v)
	}
	if v := other.do("DISCARD"); v.String() != "+OK" {
		t.Fatalf("DISCARD: %s", v)
	}
	// Inside MULTI a command is refused before it is queued, and EXEC
	// (not allowed while busy) discards the transaction saying why.
	other.do("MULTI")
	if v := other.do("INCR", "x"); !strings.HasPrefix(v.String(), "-BUSY ") {
		t.Fatalf("INCR queued while busy: %s", v)
	}
	if v := other.do("EXEC"); v.String() != "-EXECABORT Transaction discarded because of: BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE." {
		t.Fatalf("EXEC while busy: %s", v)
	}
	if v := other.do("DISCARD"); v.String() != "-ERR DISCARD without MULTI" {
		t.Fatalf("DISCARD after the aborted transaction: %s", v)
	}
	if v := other.do("SCRIPT", "KILL"); v.String() != "+OK" {
		t.Fatalf("SCRIPT KILL: %s", v)
	}
	want := "-ERR Script killed by user with SCRIPT KILL... script: " + sha1Hex(loop) + ", on @user_script:1."
	if v := runner.read(); v.String() != want {
		t.Fatalf("killed script's reply: %s, want %s", v, want)
	}
	if v := other.do("PING"); v.String() != "+PONG" {
		t.Fatalf("PING after the kill: %s", v)
	}
	// A script stuck in a pcall loop is still stopped: the kill is raised
	// again at the next instruction outside pcall.
	const pcallLoop = "while true do pcall(function() while true do end end) end"
	runner.send(encodeCommand("EVAL", pcallLoop, "0"))
	waitBusy(t, other)
	if v := other.do("SCRIPT", "KILL"); v.String() != "+OK" {
		t.Fatalf("SCRIPT KILL (pcall loop): %s", v)
	}
	if v := runner.read(); !strings.HasPrefix(v.String(), "-ERR Script killed by user with SCRIPT KILL...") {
		t.Fatalf("killed pcall loop's reply: %s", v)
	}

	// A loop inside a coroutine is stopped too.
	const coroutineLoop = "coroutine.wrap(function() while true do end end)()"
	runner.send(encodeCommand("EVAL", coroutineLoop, "0"))
	waitBusy(t, other)
	if v := other.do("SCRIPT", "KILL"); v.String() != "+OK" {
		t.Fatalf("SCRIPT KILL (coroutine loop): %s", v)
	}
	if v := runner.read(); !strings.HasPrefix(v.String(), "-ERR Script killed by user with SCRIPT KILL...") {
		t.Fatalf("killed coroutine loop's reply: %s", v)
	}

	const writer = "redis.call('set', 'x', '1') while true do end"
	runner.send(encodeCommand("EVAL", writer, "0"))
	waitBusy(t, other)
	if v := other.do("SCRIPT", "KILL"); !strings.HasPrefix(v.String(), "-UNKILLABLE Sorry the script already executed write commands") {
		t.Fatalf("SCRIPT KILL after a write: %s", v)
	}
	if v := other.do("SHUTDOWN"); !strings.HasPrefix(v.String(), "-BUSY") {
		t.Fatalf("SHUTDOWN (saving) while busy: %s", v)
	}
	other.send(encodeCommand("SHUTDOWN", "NOSAVE"))
	select {
	case <-kv.Done:
	case <-time.After(5 * time.Second):
		t.Fatal("SHUTDOWN NOSAVE did not stop the server while a script was running")
	}
}

func encodeCommand(args ...string) []byte {
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	return resp.AppendCommand(nil, bs...)
}

func sha1Hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// waitBusy polls until the server answers BUSY (the script has run past
// the threshold).
func waitBusy(t *testing.T, c *rawConn) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if v := c.do("GET", "x"); strings.HasPrefix(v.String(), "-BUSY") {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the server never answered BUSY")
}

// TestScriptAtomicity: many connections run a read-modify-write script on
// one key (GET, then SET to the value plus one) while others INCR it; no
// update may be lost, which needs the script to run with nothing in
// between its calls.
func TestScriptAtomicity(t *testing.T) {
	kv := startLimitkv(t)
	ctx := context.Background()
	const (
		scripters  = 16
		incrers    = 4
		iterations = 300
	)
	script := redis.NewScript(`
local v = tonumber(redis.call('GET', KEYS[1]) or '0')
redis.call('SET', KEYS[1], v + 1)
return v + 1`)
	var wg sync.WaitGroup
	errs := make(chan error, scripters+incrers)
	for i := 0; i < scripters+incrers; i++ {
		c := goRedis(t, kv.Addr, 2)
		wg.Add(1)
		go func(useScript bool) {
			defer wg.Done()
			for j := 0; j < iterations; j++ {
				var err error
				if useScript {
					err = script.Run(ctx, c, []string{"counter"}).Err()
				} else {
					err = c.Incr(ctx, "counter").Err()
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}(i < scripters)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	n, err := goRedis(t, kv.Addr, 2).Get(ctx, "counter").Int()
	if err != nil {
		t.Fatal(err)
	}
	if want := (scripters + incrers) * iterations; n != want {
		t.Fatalf("counter = %d after %d increments: updates were lost", n, want)
	}
}

// smsSlidingWindowTranscript is an SMS limit's sliding-window script on a
// ZSET (1 minute, limit 3, with its ">" that admits a fourth request) with
// literal timestamps.
const smsSlidingWindowTranscript = `SCRIPT LOAD "--根据score删除数据\nredis.call(\"zremrangebyscore\",KEYS[1],ARGV[1],ARGV[2])\n\n--获取个数\nlocal zSetLen = redis.call(\"zcard\", KEYS[1])\n\n\n\nif tonumber(zSetLen) > tonumber(ARGV[4]) then\n    return 0\nend\n--zadd添加数据\nlocal res = redis.call(\"zadd\",KEYS[1], ARGV[5], ARGV[6])\nredis.call(\"expire\",KEYS[1],ARGV[3])\nreturn res\n\n\n"
EVALSHA %[1]s 1 zhangsan 0 1699999940000 60 3 1700000000000 1700000000000
EVALSHA %[1]s 1 zhangsan 0 1699999941000 60 3 1700000001000 1700000001000
EVALSHA %[1]s 1 zhangsan 0 1699999942000 60 3 1700000002000 1700000002000
EVALSHA %[1]s 1 zhangsan 0 1699999943000 60 3 1700000003000 1700000003000
EVALSHA %[1]s 1 zhangsan 0 1699999944000 60 3 1700000004000 1700000004000
EVALSHA %[1]s 1 zhangsan 0 1699999945000 60 3 1700000005000 1700000005000
ZRANGE zhangsan 0 -1 WITHSCORES
approx: TTL zhangsan
EVALSHA %[1]s 1 zhangsan 0 1700000001500 60 3 1700000061500 1700000061500
ZRANGE zhangsan 0 -1 WITHSCORES
EVAL "--根据score删除数据\nredis.call(\"zremrangebyscore\",KEYS[1],ARGV[1],ARGV[2])\n\n--获取个数\nlocal zSetLen = redis.call(\"zcard\", KEYS[1])\n\n\n\nif tonumber(zSetLen) > tonumber(ARGV[4]) then\n    return 0\nend\n--zadd添加数据\nlocal res = redis.call(\"zadd\",KEYS[1], ARGV[5], ARGV[6])\nredis.call(\"expire\",KEYS[1],ARGV[3])\nreturn res\n\n\n" 1 lisi 0 1699999940000 60 3 1700000000000 1700000000000
SET str x
EVALSHA %[1]s 1 str 0 1699999940000 60 3 1700000000000 1700000000000
EVAL "redis.setresp(3) local t = redis.call('zscore', KEYS[1], ARGV[1]) return {type(t), t.double}" 1 zhangsan 1700000061500
EVAL "redis.setresp(3) return redis.call('zscore', KEYS[1], ARGV[1])" 1 zhangsan 1700000061500
EVAL "redis.setresp(3) return redis.call('zrange', KEYS[1], 0, -1, 'withscores')" 1 zhangsan
@resp3
ignore: HELLO 3
EVAL "redis.setresp(3) return redis.call('zscore', KEYS[1], ARGV[1])" 1 zhangsan 1700000061500
EVAL "redis.setresp(3) return redis.call('zrange', KEYS[1], 0, -1, 'withscores')" 1 zhangsan
EVAL "return redis.call('zrange', KEYS[1], 0, -1, 'withscores')" 1 zhangsan
`

// TestSMSSlidingWindowScript compares the SMS sliding-window script on
// limitkv and redis-server, reply by reply. It needs sorted sets; on a
// build without them it is skipped.
func TestSMSSlidingWindowScript(t *testing.T) {
	redisSrv := startRedis(t)
	kv := startLimitkv(t)
	if v := dialRaw(t, kv.Addr).do("COMMAND", "INFO", "zadd"); len(v.Elems) != 1 || v.Elems[0].Null {
		t.Skip("this build has no sorted sets; the SMS sliding-window script needs ZADD, ZCARD and ZREMRANGEBYSCORE")
	}
	body := "--根据score删除数据\nredis.call(\"zremrangebyscore\",KEYS[1],ARGV[1],ARGV[2])\n\n--获取个数\nlocal zSetLen = redis.call(\"zcard\", KEYS[1])\n\n\n\nif tonumber(zSetLen) > tonumber(ARGV[4]) then\n    return 0\nend\n--zadd添加数据\nlocal res = redis.call(\"zadd\",KEYS[1], ARGV[5], ARGV[6])\nredis.call(\"expire\",KEYS[1],ARGV[3])\nreturn res\n\n\n"
	path := filepath.Join(t.TempDir(), "sms-sliding-window.txt")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(smsSlidingWindowTranscript, sha1Hex(body))), 0o644); err != nil {
		t.Fatal(err)
	}
	if n := runDiffFile(t, path, redisSrv.Addr, kv.Addr); n < 10 {
		t.Fatalf("only %d commands compared", n)
	}
}

// TestKilledScriptIsNeverSaved: SHUTDOWN NOSAVE may stop a script that
// has written; the half it ran stays in memory until the process exits,
// and no snapshot may write it meanwhile (snapshots run every 20 ms here,
// so the exit's draining leaves plenty of time for one).
func TestKilledScriptIsNeverSaved(t *testing.T) {
	dir := t.TempDir()
	kv := startLimitkvIn(t, dir, "--busy-reply-threshold", "100", "--snapshot-interval", "20ms")
	runner := dialRaw(t, kv.Addr)
	other := dialRaw(t, kv.Addr)
	if v := other.do("SET", "before", "1"); v.String() != "+OK" {
		t.Fatalf("SET: %s", v)
	}
	if v := other.do("SAVE"); v.String() != "+OK" {
		t.Fatalf("SAVE: %s", v)
	}
	runner.send(encodeCommand("EVAL", "redis.call('SET','wk3','v') while true do end", "0"))
	waitBusy(t, other)
	other.send(encodeCommand("SHUTDOWN", "NOSAVE"))
	select {
	case <-kv.Done:
	case <-time.After(10 * time.Second):
		t.Fatal("SHUTDOWN NOSAVE did not stop the server")
	}
	again := startLimitkvIn(t, dir)
	c := dialRaw(t, again.Addr)
	if v := c.do("GET", "wk3"); v.String() != "nil" {
		t.Fatalf("GET wk3 after the restart: %s; the killed script's write was saved", v)
	}
	if v := c.do("GET", "before"); v.String() != "\"1\"" {
		t.Fatalf("GET before after the restart: %s", v)
	}
}

// TestPauseWriteRunsNoWritesScripts: during CLIENT PAUSE WRITE, a script
// or a function that declared no-writes runs at once, on its own or in a
// transaction, while one that may write waits for the pause's end, on
// redis-server 7.0 and on limitkv alike. The pause is long (30 s) and
// every reply that must not wait for it is read with a 10 s deadline, so
// that a server that holds them back fails rather than answers late.
func TestPauseWriteRunsNoWritesScripts(t *testing.T) {
	const lib = "#!lua name=ro\n" +
		"redis.register_function{function_name='peek', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}}"
	const noWrites = "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])"
	for _, s := range []struct {
		name string
		srv  *server
	}{{"redis", startRedis(t)}, {"limitkv", startLimitkv(t)}} {
		t.Run(s.name, func(t *testing.T) {
			admin, c := dialRaw(t, s.srv.Addr), dialRaw(t, s.srv.Addr)
			mustDo(t, admin, `"ro"`, "FUNCTION", "LOAD", lib)
			mustDo(t, admin, "+OK", "SET", "k", "v")
			sha := c.do("SCRIPT", "LOAD", noWrites).String()
			mustDo(t, admin, "+OK", "CLIENT", "PAUSE", "30000", "WRITE")
			defer admin.do("CLIENT", "UNPAUSE")

			c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
			mustDo(t, c, `"v"`, "EVAL", noWrites, "1", "k")
			mustDo(t, c, `"v"`, "EVALSHA", strings.Trim(sha, `"`), "1", "k")
			mustDo(t, c, `"v"`, "FCALL", "peek", "1", "k")
			mustDo(t, c, "+OK", "MULTI")
			mustDo(t, c, "+QUEUED", "EVAL", noWrites, "1", "k")
			mustDo(t, c, "+QUEUED", "FCALL", "peek", "1", "k")
			mustDo(t, c, `["v", "v"]`, "EXEC")

			// A script without flags may write: it waits, counted among
			// the blocked clients, until the pause ends.
			c.send(resp.AppendCommand(nil, []byte("EVAL"), []byte("return redis.call('get', KEYS[1])"), []byte("1"), []byte("k")))
			for i := 0; ; i++ {
				if strings.Contains(string(admin.do("INFO", "clients").Str), "blocked_clients:1\r\n") {
					break
				}
				if i == 1000 {
					t.Fatal("EVAL of a script without flags was not held back by the pause")
				}
				time.Sleep(10 * time.Millisecond)
			}
			mustDo(t, admin, "+OK", "CLIENT", "UNPAUSE")
			if v := c.read().String(); v != `"v"` {
				t.Fatalf("EVAL after the pause: %s", v)
			}
		})
	}
}
