package tests

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/limitkv/limitkv/internal/testserver"
	"github.com/limitkv/limitkv/resp"
)

func goRedis(t testing.TB, addr string, proto int, opts ...func(*redis.Options)) *redis.Client {
	t.Helper()
	o := &redis.Options{Addr: addr, Protocol: proto, DialTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second}
	for _, f := range opts {
		f(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestGoRedis drives limitkv with go-redis v9 over RESP2 and RESP3.
func TestGoRedis(t *testing.T) {
	s := startLimitkv(t)
	ctx := context.Background()
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			c := goRedis(t, s.Addr, proto)
			if err := c.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if v, err := c.Ping(ctx).Result(); err != nil || v != "PONG" {
				t.Fatalf("PING = %q %v", v, err)
			}
			if err := c.Set(ctx, "k", "v", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
				t.Fatalf("GET = %q %v", v, err)
			}
			if ttl, err := c.TTL(ctx, "k").Result(); err != nil || ttl < 59*time.Second || ttl > time.Minute {
				t.Fatalf("TTL = %v %v", ttl, err)
			}
			if _, err := c.Get(ctx, "missing").Result(); err != redis.Nil {
				t.Fatalf("GET missing: %v, want redis.Nil", err)
			}
			if n, err := c.IncrBy(ctx, "n", 41).Result(); err != nil || n != 41 {
				t.Fatalf("INCRBY = %d %v", n, err)
			}
			if f, err := c.IncrByFloat(ctx, "f", 10.5).Result(); err != nil || f != 10.5 {
				t.Fatalf("INCRBYFLOAT = %v %v", f, err)
			}
			if err := c.Incr(ctx, "k").Err(); err == nil || err.Error() != "ERR value is not an integer or out of range" {
				t.Fatalf("INCR on text: %v", err)
			}
			vals, err := c.MGet(ctx, "k", "missing", "n").Result()
			if err != nil || len(vals) != 3 || vals[0] != "v" || vals[1] != nil || vals[2] != "41" {
				t.Fatalf("MGET = %#v %v", vals, err)
			}
			info, err := c.Info(ctx, "server", "keyspace").Result()
			if err != nil || !strings.Contains(info, "redis_version:7.0.15") || !strings.Contains(info, "db0:keys=3") {
				t.Fatalf("INFO = %q %v", info, err)
			}
			cfg, err := c.ConfigGet(ctx, "maxclients").Result()
			if err != nil || cfg["maxclients"] != "10000" {
				t.Fatalf("CONFIG GET = %v %v", cfg, err)
			}
			keys, cursor, err := c.Scan(ctx, 0, "*", 100).Result()
			if err != nil || cursor != 0 || len(keys) != 3 {
				t.Fatalf("SCAN = %v %d %v", keys, cursor, err)
			}
			// A pipeline and a transaction.
			pipe := c.Pipeline()
			for i := 0; i < 100; i++ {
				pipe.Incr(ctx, "p")
			}
			cmds, err := pipe.Exec(ctx)
			if err != nil || cmds[99].(*redis.IntCmd).Val() != 100 {
				t.Fatalf("pipeline: %v", err)
			}
			tx, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, "a", "1", 0)
				p.Incr(ctx, "a")
				return nil
			})
			if err != nil || tx[1].(*redis.IntCmd).Val() != 2 {
				t.Fatalf("MULTI/EXEC: %v", err)
			}
			if id, err := c.ClientID(ctx).Result(); err != nil || id <= 0 {
				t.Fatalf("CLIENT ID = %d %v", id, err)
			}
			// Binary and empty keys and values.
			bin := "\x00\xff\r\n*1\r\n$-1"
			if err := c.Set(ctx, bin, bin, 0).Err(); err != nil {
				t.Fatal(err)
			}
			if v, err := c.Get(ctx, bin).Result(); err != nil || v != bin {
				t.Fatalf("binary GET = %q %v", v, err)
			}
			if err := c.Set(ctx, "", "", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if v, err := c.Get(ctx, "").Result(); err != nil || v != "" {
				t.Fatalf("empty GET = %q %v", v, err)
			}
			big := strings.Repeat("x", 3<<20)
			if err := c.Set(ctx, "big", big, 0).Err(); err != nil {
				t.Fatal(err)
			}
			if n, err := c.Append(ctx, "big", "yz").Result(); err != nil || n != int64(len(big)+2) {
				t.Fatalf("APPEND big = %d %v", n, err)
			}
			if v, err := c.GetRange(ctx, "big", -3, -1).Result(); err != nil || v != "xyz" {
				t.Fatalf("GETRANGE big = %q %v", v, err)
			}
		})
	}
}

// TestOverflowFrame is the regression test for the frame that made redcon
// panic and take the process down: a bulk length of 2^63-1.
func TestOverflowFrame(t *testing.T) {
	s := startLimitkv(t)
	neighbour := dialRaw(t, s.Addr)
	if v := neighbour.do("SET", "k", "v"); v.String() != "+OK" {
		t.Fatal(v)
	}
	for _, frame := range []string{
		"*1\r\n$9223372036854775807\r\nabc\r\n",
		"*1\r\n$9223372036854775806\r\nabc\r\n",
		"*9223372036854775807\r\n$3\r\nabc\r\n",
		"*1\r\n$-9223372036854775808\r\nabc\r\n",
		"*1\r\n$99999999999999999999999\r\nabc\r\n",
	} {
		c := dialRaw(t, s.Addr)
		c.send([]byte(frame))
		got := c.readAll()
		if !strings.HasPrefix(got, "-ERR Protocol error: invalid") {
			t.Errorf("frame %q: reply %q", frame, got)
		}
	}
	if s.Exited() {
		t.Fatalf("server died:\n%s", s.Output())
	}
	if v := neighbour.do("GET", "k"); v.String() != `"v"` {
		t.Fatalf("neighbour connection disturbed: %s", v)
	}
}

// TestProtocolLimits checks Redis's limits and texts, and that only the
// offending connection is closed.
func TestProtocolLimits(t *testing.T) {
	s := startLimitkv(t, "--proto-max-bulk-len", "1mb")
	cases := []struct{ send, want string }{
		{"*1\r\n$1048577\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"*2147483648\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"*1\r\n:1\r\n", "-ERR Protocol error: expected '$', got ':'\r\n"},
		{"*abc\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"*1\r\n$abc\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"*" + strings.Repeat("1", 70000), "-ERR Protocol error: too big mbulk count string\r\n"},
		{"*1\r\n$" + strings.Repeat("1", 70000), "-ERR Protocol error: too big bulk count string\r\n"},
		{strings.Repeat("a", 70000), "-ERR Protocol error: too big inline request\r\n"},
		{"SET a \"b\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n"},
		{"PING\r\n*1\r\n$x\r\n", "+PONG\r\n-ERR Protocol error: invalid bulk length\r\n"},
	}
	for _, tc := range cases {
		c := dialRaw(t, s.Addr)
		c.send([]byte(tc.send))
		if got := c.readAll(); got != tc.want {
			t.Errorf("send %.40q: got %q, want %q", tc.send, got, tc.want)
		}
	}
	// Inline commands, empty requests and pipelines still work.
	c := dialRaw(t, s.Addr)
	c.send([]byte("\r\n*0\r\n*-1\r\nset \"a b\" 'c d'\r\nGET \"a b\"\r\nECHO \"\\x41\\n\"\r\n"))
	for _, want := range []string{`+OK`, `"c d"`, `"A\n"`} {
		if got := c.read().String(); got != want {
			t.Fatalf("inline: got %s, want %s", got, want)
		}
	}
}

// TestHugeArgumentsBounded sends a request that announces 1M arguments and
// then stops: the server must not allocate for what was announced.
func TestHugeArgumentsBounded(t *testing.T) {
	s := startLimitkv(t)
	c := dialRaw(t, s.Addr)
	c.send([]byte("*1000000\r\n$3\r\nSET\r\n"))
	time.Sleep(100 * time.Millisecond)
	other := dialRaw(t, s.Addr)
	if v := other.do("PING"); v.String() != "+PONG" {
		t.Fatal(v)
	}
	rss := serverRSS(t, s)
	if rss > 200<<20 {
		t.Fatalf("server RSS %d MB after an announced 1M-argument request", rss>>20)
	}
}

func serverRSS(t testing.TB, s *server) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", s.Cmd.Process.Pid))
	if err != nil {
		t.Skip("no /proc")
	}
	var size, rss int64
	fmt.Sscan(string(b), &size, &rss)
	return rss * int64(os.Getpagesize())
}

func TestAuth(t *testing.T) {
	s := startLimitkv(t, "--requirepass", "s3cret")
	c := dialRaw(t, s.Addr)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"GET", "k"}, "-NOAUTH Authentication required."},
		{[]string{"PING"}, "-NOAUTH Authentication required."},
		{[]string{"AUTH", "wrong"}, "-WRONGPASS invalid username-password pair or user is disabled."},
		{[]string{"AUTH", "nobody", "s3cret"}, "-WRONGPASS invalid username-password pair or user is disabled."},
		{[]string{"AUTH", "s3cret"}, "+OK"},
		{[]string{"GET", "k"}, "nil"},
		{[]string{"RESET"}, "+RESET"},
		{[]string{"GET", "k"}, "-NOAUTH Authentication required."},
		{[]string{"AUTH", "default", "s3cret"}, "+OK"},
		{[]string{"SET", "k", "v"}, "+OK"},
	} {
		if got := c.do(tc.args...).String(); got != tc.want {
			t.Errorf("%v: got %s, want %s", tc.args, got, tc.want)
		}
	}
	// Before AUTH, large requests are refused as in Redis.
	c2 := dialRaw(t, s.Addr)
	c2.send([]byte("*11\r\n"))
	if got := c2.readAll(); got != "-ERR Protocol error: unauthenticated multibulk length\r\n" {
		t.Errorf("unauthenticated multibulk: %q", got)
	}
	// HELLO with AUTH, and go-redis with a password.
	ctx := context.Background()
	rc := goRedis(t, s.Addr, 3, func(o *redis.Options) { o.Password = "s3cret" })
	if v, err := rc.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("go-redis with password: %q %v", v, err)
	}
	bad := goRedis(t, s.Addr, 3, func(o *redis.Options) { o.Password = "nope" })
	if err := bad.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("wrong password: %v", err)
	}
}

func TestMaxClients(t *testing.T) {
	s := startLimitkv(t, "--maxclients", "2")
	// The start-up probe's connection may still count until the server
	// has seen it close: dial until both clients are admitted.
	admitted := func() *rawConn {
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			c := dialRaw(t, s.Addr)
			if v := c.do("PING"); v.String() == "+PONG" {
				return c
			}
			c.c.Close()
		}
		t.Fatal("a client within maxclients was never admitted")
		return nil
	}
	a, _ := admitted(), admitted()
	c := dialRaw(t, s.Addr)
	if got := c.readAll(); got != "-ERR max number of clients reached\r\n" {
		t.Fatalf("third client: %q", got)
	}
	// Once the server has seen a client leave, its slot is free again.
	a.c.Close()
	admitted()
}

// TestAuthGuessersLeave: password guessers that pipeline thousands of
// wrong AUTHs keep no client slot once they have gone, and do not hold up
// a shutdown while they stay: each used to be served its whole queue at
// the slowed rate (about 45 minutes for 108 KB), so that with maxclients
// 5 the right password was refused for that long, and SIGTERM waited its
// 10 s drain limit.
func TestAuthGuessersLeave(t *testing.T) {
	s := startLimitkv(t, "--requirepass", "s3cret", "--maxclients", "5")
	var pipe []byte
	for i := 0; len(pipe) < 108<<10; i++ {
		pipe = resp.AppendCommand(pipe, []byte("AUTH"), []byte("guess"+strconv.Itoa(i)))
	}
	// admitted dials until the server takes the connection (the start-up
	// probe's may still count for a moment).
	admitted := func() *rawConn {
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			c := dialRaw(t, s.Addr)
			if v := c.do("AUTH", "nope"); strings.HasPrefix(v.String(), "-WRONGPASS") {
				return c
			}
			c.c.Close()
		}
		t.Fatal("a client within maxclients was never admitted")
		return nil
	}
	for range 5 {
		g := admitted()
		g.send(pipe)
		g.c.Close()
	}
	start := time.Now()
	for {
		c := dialRaw(t, s.Addr)
		v := c.do("AUTH", "s3cret")
		if v.String() == "+OK" {
			t.Logf("the right password got in %v after the guessers left", time.Since(start).Round(time.Millisecond))
			c.c.Close()
			break
		}
		c.c.Close()
		// Served their whole queues, the guessers would hold their slots
		// for about 45 minutes; dropped, a second or two: a generous
		// bound tells them apart.
		if v.String() != "-ERR max number of clients reached" || time.Since(start) > 20*time.Second {
			t.Fatalf("AUTH with the right password %v after the guessers left: %s", time.Since(start), v)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Guessers that stay, their queues full: SIGTERM does not wait for them.
	for range 5 {
		admitted().send(pipe)
	}
	time.Sleep(100 * time.Millisecond)
	s.Cmd.Process.Signal(syscall.SIGTERM)
	code, took := waitExit(t, s, 15*time.Second)
	t.Logf("SIGTERM with 5 guessers connected: exit code %d after %v", code, took.Round(time.Millisecond))
	// Waiting for them would take their queues' 45 minutes.
	if code != 0 || took > 10*time.Second {
		t.Fatalf("SIGTERM with 5 guessers connected: exit code %d after %v:\n%s", code, took, s.Output())
	}
}

func TestIdleTimeout(t *testing.T) {
	s := startLimitkv(t, "--timeout", "1")
	c := dialRaw(t, s.Addr)
	c.do("PING")
	start := time.Now()
	// Closed by the server (EOF), not by the client's generous deadline;
	// and not before the timeout.
	c.c.SetReadDeadline(time.Now().Add(15 * time.Second))
	_, err := io.Copy(io.Discard, c.r)
	if d := time.Since(start); err != nil || d < 800*time.Millisecond {
		t.Fatalf("idle connection: %v after %v, want closed by the server after about 1s", err, d)
	}
}

func TestClientKill(t *testing.T) {
	s := startLimitkv(t)
	victim, killer := dialRaw(t, s.Addr), dialRaw(t, s.Addr)
	id := victim.do("CLIENT", "ID").Int
	victim.do("CLIENT", "SETNAME", "victim")
	list := killer.do("CLIENT", "LIST").String()
	if !strings.Contains(list, "name=victim") {
		t.Fatalf("CLIENT LIST: %s", list)
	}
	if v := killer.do("CLIENT", "KILL", "ID", fmt.Sprint(id)); v.Int != 1 {
		t.Fatalf("CLIENT KILL = %s", v)
	}
	if got := victim.readAll(); got != "" {
		t.Fatalf("victim read %q after kill", got)
	}
	if v := killer.do("PING"); v.String() != "+PONG" {
		t.Fatal(v)
	}
}

// TestConcurrentIncr hammers one counter from 100 connections and checks
// that no increment is lost.
func TestConcurrentIncr(t *testing.T) {
	s := startLimitkv(t)
	ctx := context.Background()
	c := goRedis(t, s.Addr, 2, func(o *redis.Options) { o.PoolSize = 100 })
	const conns, each = 100, 200
	var wg sync.WaitGroup
	var errs atomic.Int64
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < each; j++ {
				if c.Incr(ctx, "ctr").Err() != nil {
					errs.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if errs.Load() != 0 {
		t.Fatalf("%d errors", errs.Load())
	}
	if n, _ := c.Get(ctx, "ctr").Int(); n != conns*each {
		t.Fatalf("counter = %d, want %d", n, conns*each)
	}
}

// TestGracefulShutdown: SHUTDOWN and SIGTERM stop the server cleanly; a
// pipeline in flight gets every reply before the connection closes.
func TestGracefulShutdown(t *testing.T) {
	s := startLimitkv(t)
	c := dialRaw(t, s.Addr)
	var req []byte
	for i := 0; i < 1000; i++ {
		req = append(req, "*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n"...)
	}
	c.send(req)
	for i := 1; i <= 1000; i++ {
		if v := c.read(); v.Int != int64(i) {
			t.Fatalf("reply %d = %s", i, v)
		}
	}
	other := dialRaw(t, s.Addr)
	other.send([]byte("*1\r\n$8\r\nSHUTDOWN\r\n"))
	if got := other.readAll(); got != "" {
		t.Fatalf("SHUTDOWN replied %q", got)
	}
	select {
	case <-s.Done:
	case <-time.After(10 * time.Second):
		t.Fatal("server did not exit after SHUTDOWN")
	}
	if code := s.Cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d:\n%s", code, s.Output())
	}

	s2 := startLimitkv(t)
	idle := dialRaw(t, s2.Addr)
	idle.do("PING")
	s2.Cmd.Process.Signal(syscall.SIGTERM)
	if got := idle.readAll(); got != "" {
		t.Fatalf("idle client read %q", got)
	}
	select {
	case <-s2.Done:
	case <-time.After(10 * time.Second):
		t.Fatal("server did not exit after SIGTERM")
	}
	if !strings.Contains(s2.Output(), "limitkv stopped") {
		t.Fatalf("log:\n%s", s2.Output())
	}
}

func TestFlagsAndConfigFile(t *testing.T) {
	out, err := exec.Command(limitkvBin, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "-requirepass") || !strings.Contains(string(out), "-maxclients") {
		t.Fatalf("--help: %v\n%s", err, out)
	}
	out, err = exec.Command(limitkvBin, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "limitkv") {
		t.Fatalf("--version: %v\n%s", err, out)
	}
	out, err = exec.Command(limitkvBin, "--port", "abc").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "port") {
		t.Fatalf("--port abc: %v\n%s", err, out)
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "limitkv.conf")
	os.WriteFile(conf, []byte("# test config\nmaxclients 77\nrequirepass \"pa ss\"\nhash-max-ziplist-entries 64\n"+
		"client-output-buffer-limit pubsub 64mb 16mb 30\nclient-output-buffer-limit replica 1gb 256mb 90\n"), 0o644)
	s := startLimitkv(t, "--config", conf, "--maxclients", "88", "--client-output-buffer-limit", "normal 1gb 512mb 20")
	c := dialRaw(t, s.Addr)
	if v := c.do("AUTH", "pa ss"); v.String() != "+OK" {
		t.Fatal(v)
	}
	if v := c.do("CONFIG", "GET", "maxclients"); v.String() != `["maxclients", "88"]` {
		t.Fatalf("flag should win over the file: %s", v)
	}
	if v := c.do("CONFIG", "GET", "hash-max-listpack-entries"); v.String() != `["hash-max-listpack-entries", "64"]` {
		t.Fatalf("alias from file: %s", v)
	}
	// Each line and the flag change only the classes they name.
	if v := c.do("CONFIG", "GET", "client-output-buffer-limit"); v.String() != `["client-output-buffer-limit", "normal 1073741824 536870912 20 slave 1073741824 268435456 90 pubsub 67108864 16777216 30"]` {
		t.Fatalf("client-output-buffer-limit from file and flag: %s", v)
	}
	c.do("CONFIG", "SET", "timeout", "123")
	if v := c.do("CONFIG", "REWRITE"); v.String() != "+OK" {
		t.Fatal(v)
	}
	data, _ := os.ReadFile(conf)
	if !strings.Contains(string(data), "timeout 123") || !strings.Contains(string(data), "# test config") {
		t.Fatalf("rewritten config:\n%s", data)
	}
	// The rewritten file gives the same limits back.
	s.Stop()
	s2 := startLimitkv(t, "--config", conf)
	c2 := dialRaw(t, s2.Addr)
	c2.do("AUTH", "pa ss")
	if v := c2.do("CONFIG", "GET", "client-output-buffer-limit"); v.String() != `["client-output-buffer-limit", "normal 1073741824 536870912 20 slave 1073741824 268435456 90 pubsub 67108864 16777216 30"]` {
		t.Fatalf("client-output-buffer-limit after CONFIG REWRITE: %s\n%s", v, data)
	}
}

// TestRedisCLIHints runs redis-cli interactively under a pseudo-terminal
// (script(1)) and checks the argument hints it draws from COMMAND DOCS.
func TestRedisCLIHints(t *testing.T) {
	cli := testserver.Require(t, "redis-cli")
	scriptBin, err := exec.LookPath("script")
	if err != nil {
		t.Skip("script(1) not available")
	}
	s := startLimitkv(t)
	host, port, _ := net.SplitHostPort(s.Addr)
	cmd := exec.Command(scriptBin, "-qfec", "stty cols 200 rows 50; exec "+cli+" -h "+host+" -p "+port, "/dev/null")
	cmd.Env = append(os.Environ(), "TERM=xterm", "HOME="+t.TempDir())
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Skipf("script: %v", err)
	}
	defer cmd.Process.Kill()
	var mu sync.Mutex
	var out strings.Builder
	go func() {
		r := bufio.NewReader(stdout)
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			mu.Lock()
			out.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	waitFor := func(s string) bool {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			ok := strings.Contains(out.String(), s)
			mu.Unlock()
			if ok {
				return true
			}
			time.Sleep(20 * time.Millisecond)
		}
		return false
	}
	if !waitFor(port + ">") {
		t.Fatalf("no prompt:\n%q", out.String())
	}
	io.WriteString(stdin, "SET mykey ")
	if !waitFor("value [NX|XX] [GET]") {
		t.Fatalf("no hint for SET:\n%q", out.String())
	}
	io.WriteString(stdin, "\x15SET hello world\r")
	// The next line is typed once the prompt is back: linenoise flushes
	// what was typed before it switches the terminal to raw mode, so a
	// line typed ahead on a loaded machine is lost.
	if !waitFor("OK\r\n" + host + ":" + port + "> ") {
		t.Fatalf("no reply:\n%q", out.String())
	}
	io.WriteString(stdin, "GET hello\r")
	if !waitFor("\"world\"") {
		t.Fatalf("no GET reply:\n%q", out.String())
	}
	io.WriteString(stdin, "quit\r")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("redis-cli did not quit")
	}
}

// TestConfigSetPortAndBind: CONFIG SET port and bind move the listeners at
// run time, as in Redis 7.0: the new port or addresses accept, the old
// ones no longer do, connections already open stay; a port or address
// that cannot be listened on answers Redis's error and leaves the server
// listening where it was. Each step runs on redis-server and on limitkv,
// and their replies must be the same.
func TestConfigSetPortAndBind(t *testing.T) {
	redisSrv, kv := startRedis(t), startLimitkv(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0") // a port in use
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	_, busyPort, _ := net.SplitHostPort(busy.Addr().String())
	accepts := func(addr string) bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write([]byte("PING\r\n"))
		line, _ := bufio.NewReader(c).ReadString('\n')
		return line == "+PONG\r\n"
	}
	run := func(s *server) []string {
		var out []string
		old := dialRaw(t, s.Addr)
		cur := s.Addr
		note := func(reply string) { out = append(out, reply) }
		port := strconv.Itoa(freePort(t))
		note(old.str("CONFIG", "SET", "port", port))
		moved := "127.0.0.1:" + port
		if !accepts(moved) {
			t.Errorf("%s: the new port does not accept", s.Addr)
		}
		if accepts(cur) {
			t.Errorf("%s: the old port still accepts", s.Addr)
		}
		cur = moved
		note(old.str("PING")) // the connection from before stays
		note(old.str("CONFIG", "GET", "bind"))
		// A port in use, an address that is not the machine's: refused,
		// still listening where it was.
		note(old.str("CONFIG", "SET", "port", busyPort))
		note(old.str("CONFIG", "SET", "bind", "192.0.2.1"))
		note(old.str("CONFIG", "SET", "bind", "127.0.0.1 192.0.2.1"))
		note(old.str("CONFIG", "GET", "bind"))
		if !accepts(cur) {
			t.Errorf("%s: no longer accepts after the refusals", s.Addr)
		}
		// Both at once; then every address (the same port on an address
		// that overlaps); then none.
		port2 := strconv.Itoa(freePort(t))
		note(old.str("CONFIG", "SET", "port", port2, "bind", "127.0.0.1"))
		cur = "127.0.0.1:" + port2
		note(old.str("CONFIG", "SET", "bind", "*"))
		note(old.str("CONFIG", "GET", "bind"))
		if !accepts(cur) {
			t.Errorf("%s: does not accept on every address", s.Addr)
		}
		note(old.str("CONFIG", "SET", "bind", ""))
		if accepts(cur) {
			t.Errorf("%s: accepts with no bind address", s.Addr)
		}
		note(old.str("CONFIG", "SET", "bind", "127.0.0.1"))
		if !accepts(cur) {
			t.Errorf("%s: does not accept after bind 127.0.0.1", s.Addr)
		}
		// Port 0: no plain listener at all.
		note(old.str("CONFIG", "SET", "port", "0"))
		if accepts(cur) {
			t.Errorf("%s: accepts after port 0", s.Addr)
		}
		note(old.str("PING"))
		return out
	}
	want, got := run(redisSrv), run(kv)
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("reply %d: redis %s, limitkv %s", i, want[i], got[i])
		}
	}
}
