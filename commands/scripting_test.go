package commands

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/resp"
)

// scriptServer is an in-process server whose commands run without the
// network: eval runs one command as dispatch would and returns its reply.
type scriptServer struct {
	t      testing.TB
	srv    *Server
	w      *resp.Writer
	c      Ctx
	client *Client
}

func newScriptServer(t testing.TB) *scriptServer {
	eng := engine.New(engine.Config{Databases: 16, Clock: engine.NewManualClock(transcriptEpoch)})
	srv := New(eng, NewConfig(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	return &scriptServer{t: t, srv: srv, w: resp.NewWriter(2), client: newTestClient(srv)}
}

// run executes args and leaves the reply in s.w.
func (s *scriptServer) run(args ...[]byte) {
	spec, msg := s.srv.lookup(args)
	if msg != "" {
		s.t.Fatalf("%s: %s", args[0], msg)
	}
	s.c = Ctx{Srv: s.srv, Client: s.client, W: s.w, Args: args, Now: transcriptEpoch, Spec: spec}
	s.srv.run(&s.c)
}

func (s *scriptServer) do(args ...string) string {
	s.t.Helper()
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	s.w.Reset()
	s.run(bs...)
	v, err := resp.ReadValue(bufio.NewReader(bytes.NewReader(s.w.Bytes())))
	if err != nil {
		s.t.Fatalf("%v: unreadable reply %q: %v", args, s.w.Bytes(), err)
	}
	return v.String()
}

// newTestClient is a client for requests made without a connection.
func newTestClient(srv *Server) *Client {
	cl := &Client{srv: srv, authed: true}
	cl.multiLen.Store(-1)
	return cl
}

func sha1Of(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestScriptArgumentFormatting: numbers passed to redis.call are written
// as Redis writes Lua numbers ("%.17g"), replies are truncated integers.
func TestScriptArgumentFormatting(t *testing.T) {
	s := newScriptServer(t)
	for in, want := range map[string]string{
		"3": `"3"`, "0.1": `"0.10000000000000001"`, "1e20": `"1e+20"`, "-0.0": `"-0"`,
		"2^53": `"9007199254740992"`, "1/0": `"inf"`, "-1/0": `"-inf"`,
	} {
		got := s.do("EVAL", "redis.call('set', 'k', "+in+") return redis.call('get', 'k')", "0")
		if got != want {
			t.Errorf("redis.call with %s stored %s, want %s", in, got, want)
		}
	}
}

// TestScriptStateDoesNotLeak: a script sees none of another's leftovers.
func TestScriptStateDoesNotLeak(t *testing.T) {
	s := newScriptServer(t)
	s.do("EVAL", "KEYS[1] = 'changed'; KEYS.extra = 1; table.insert(ARGV, 'more'); redis.setresp(3)", "1", "k", "a")
	if got := s.do("EVAL", "return {KEYS[1], tostring(KEYS.extra), #ARGV, type(redis.call('get', 'nokey'))}", "1", "k2", "b"); got != `["k2", "nil", :1, "boolean"]` {
		t.Fatalf("second script saw %s", got)
	}
	if got := s.do("EVAL", "x = 1", "0"); !strings.Contains(got, "Attempt to modify a readonly table") {
		t.Fatalf("global assignment: %s", got)
	}
}

// TestScriptLog: redis.log writes through the server's logger, at the
// level asked, its arguments joined by spaces (numbers as Lua writes them).
func TestScriptLog(t *testing.T) {
	s := newScriptServer(t)
	var buf bytes.Buffer
	s.srv.Log = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s.do("EVAL", "redis.log(redis.LOG_WARNING, 'limit', 'reached:', 3, 0.5) redis.log(redis.LOG_DEBUG, 'hidden')", "0")
	out := buf.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, `msg="limit reached: 3 0.5"`) || strings.Contains(out, "hidden") {
		t.Fatalf("log output: %s", out)
	}
}

// TestScriptCoroutinesLeakNothing: a coroutine left suspended must not
// keep a goroutine (the context package starts one per derived context
// unless the parent offers AfterFunc).
func TestScriptCoroutinesLeakNothing(t *testing.T) {
	s := newScriptServer(t)
	s.do("EVAL", "return 1", "0")
	before := runtime.NumGoroutine()
	got := s.do("EVAL", "for i = 1, 1000 do local co = coroutine.create(function() coroutine.yield(i) end) coroutine.resume(co) end return 1", "0")
	if got != ":1" {
		t.Fatal(got)
	}
	if after := runtime.NumGoroutine(); after > before+10 {
		t.Fatalf("%d goroutines before, %d after 1000 suspended coroutines", before, after)
	}
}

// TestScriptBrokenStateIsReplaced: gopher-lua lets an error escape PCall
// when the value stack is full while it handles another; the server must
// answer, release its locks and run the next script in a fresh state.
func TestScriptBrokenStateIsReplaced(t *testing.T) {
	s := newScriptServer(t)
	const before = "return redis.call('incr', KEYS[1])"
	if s.do("EVAL", before, "1", "n") != ":1" {
		t.Fatal("setup")
	}
	state := s.srv.scripts.ScriptState()
	got := s.do("EVAL", "local function f(...) local x = f(1, ...) return x end return f()", "0")
	if !strings.HasPrefix(got, "-ERR user_script:1: stack overflow") {
		t.Fatalf("overflowing the value stack: %s", got)
	}
	if s.srv.scripts.ScriptState() == state {
		t.Fatal("the state whose value stack grew is kept")
	}
	if s.do("EVALSHA", sha1Of(before), "1", "n") != ":2" || s.do("SET", "k", "v") != "+OK" {
		t.Fatal("the server does not run scripts and commands after the overflow")
	}
}

// BenchmarkEvalSha runs EVALSHA in-process, as dispatch does, locks
// included: a trivial script, a DECR quota script with a TTL marker key and
// redis_rate's GCRA script. Allocations per call are those of the Lua
// values (KEYS, ARGV, the strings of every reply read back) and of the
// commands' arguments.
func BenchmarkEvalSha(b *testing.B) {
	scripts := []struct {
		name, body string
		args       []string
	}{
		{"return-key", "return KEYS[1]", []string{"1", "key"}},
		{"incr", "return redis.call('INCR', KEYS[1])", []string{"1", "counter"}},
		{"quota-decr", "local key1 ,key2 = 'access:limit' ,'access:expire'\nif redis.call('EXISTS' ,key2) > 0 then\n\treturn redis.call('DECR' ,key1) ;\nelse \n\tredis.call('SET' ,key2 ,1)\n\tredis.call('EXPIRE' ,key2 ,60)\n\tredis.call('SET' ,key1 ,KEYS[1])\n\treturn KEYS[1]\nend", []string{"1", "1000000000"}},
		{"gcra-redis-rate", redisRateAllowN, []string{"1", "rate:user", "100", "100", "1", "1"}},
	}
	for _, sc := range scripts {
		b.Run(sc.name, func(b *testing.B) {
			s := newScriptServer(b)
			if got := s.do("SCRIPT", "LOAD", sc.body); got != `"`+sha1Of(sc.body)+`"` {
				b.Fatal(got)
			}
			args := [][]byte{[]byte("EVALSHA"), []byte(sha1Of(sc.body))}
			for _, a := range sc.args {
				args = append(args, []byte(a))
			}
			s.w.Reset()
			s.run(args...)
			if bytes.HasPrefix(s.w.Bytes(), []byte("-")) {
				b.Fatalf("%s", s.w.Bytes())
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s.w.Reset()
				s.run(args...)
			}
		})
	}
}

// redisRateAllowN is go-redis/redis_rate v10's allowN script.
const redisRateAllowN = `
redis.replicate_commands()
local rate_limit_key = KEYS[1]
local burst = ARGV[1]
local rate = ARGV[2]
local period = ARGV[3]
local cost = tonumber(ARGV[4])
local emission_interval = period / rate
local increment = emission_interval * cost
local burst_offset = emission_interval * burst
local jan_1_2017 = 1483228800
local now = redis.call("TIME")
now = (now[1] - jan_1_2017) + (now[2] / 1000000)
local tat = redis.call("GET", rate_limit_key)
if not tat then
  tat = now
else
  tat = tonumber(tat)
end
tat = math.max(tat, now)
local new_tat = tat + increment
local allow_at = new_tat - burst_offset
local diff = now - allow_at
local remaining = diff / emission_interval
if remaining < 0 then
  local reset_after = tat - now
  local retry_after = diff * -1
  return {0, 0, tostring(retry_after), tostring(reset_after)}
end
local reset_after = new_tat - now
if reset_after > 0 then
  redis.call("SET", rate_limit_key, new_tat, "EX", math.ceil(reset_after))
end
local retry_after = -1
return {cost, remaining, tostring(retry_after), tostring(reset_after)}
`

// EVALs from many clients at once are run by whichever of them holds the
// queue: every one runs exactly once, atomically, with its own client's
// reply, and plain commands in between still get their turn.
func TestScriptsFromManyClientsCombine(t *testing.T) {
	base := newScriptServer(t)
	const clients, each = 8, 300
	script := "local v = redis.call('INCR', KEYS[1]) redis.call('RPUSH', KEYS[2], v) return v"
	var wg sync.WaitGroup
	fail := make(chan string, clients+2)
	for i := range clients + 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &scriptServer{t: t, srv: base.srv, w: resp.NewWriter(2), client: newTestClient(base.srv)}
			last := int64(0)
			for range each {
				var args [][]byte
				if i < clients {
					args = [][]byte{[]byte("EVAL"), []byte(script), []byte("2"), []byte("n"), []byte("log")}
				} else {
					args = [][]byte{[]byte("INCR"), []byte("plain")}
				}
				s.w.Reset()
				s.run(args...)
				v, err := resp.ReadValue(bufio.NewReader(bytes.NewReader(s.w.Bytes())))
				if err != nil || v.Type != ':' || v.Int <= last {
					fail <- fmt.Sprintf("client %d: reply %q after %d", i, s.w.Bytes(), last)
					return
				}
				last = v.Int
			}
		}()
	}
	wg.Wait()
	close(fail)
	for msg := range fail {
		t.Fatal(msg)
	}
	if got := base.do("GET", "n"); got != fmt.Sprintf(`"%d"`, clients*each) {
		t.Fatalf("n = %s after %d script runs", got, clients*each)
	}
	if got := base.do("GET", "plain"); got != fmt.Sprintf(`"%d"`, 2*each) {
		t.Fatalf("plain = %s after %d INCRs", got, 2*each)
	}
	// The log holds 1..n in order: no two runs interleaved.
	if got := base.do("LLEN", "log"); got != fmt.Sprintf(":%d", clients*each) {
		t.Fatalf("LLEN log = %s", got)
	}
	for _, i := range []int{0, 1, clients*each/2 - 1, clients*each - 1} {
		want := fmt.Sprintf(`"%d"`, i+1)
		if got := base.do("LINDEX", "log", strconv.Itoa(i)); got != want {
			t.Fatalf("LINDEX log %d = %s, want %s", i, got, want)
		}
	}
}
