package client

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The tests run against a real limitkv: TestMain builds ./cmd/limitkv once
// into a temporary directory and starts it on a free loopback port without
// persistence; every test uses keys of its own.
var serverAddr string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "limitkv-client-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "limitkv")
	build := exec.Command("go", "build", "-o", bin, "../cmd/limitkv")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building limitkv:", err)
		return 1
	}
	port, err := freePort()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	serverAddr = "127.0.0.1:" + strconv.Itoa(port)
	var log bytes.Buffer
	srv := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--dir", filepath.Join(dir, "data"), "--persistence", "no")
	srv.Stdout, srv.Stderr = &log, &log
	if err := srv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "starting limitkv:", err)
		return 1
	}
	exited := make(chan struct{})
	go func() { srv.Wait(); close(exited) }()
	defer func() {
		// Stopped by its pid, as any process we started.
		srv.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			srv.Process.Kill()
			<-exited
		}
	}()
	if err := waitReady(serverAddr, exited); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n%s", err, log.String())
		return 1
	}
	return m.Run()
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func waitReady(addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("limitkv exited at start-up")
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.SetDeadline(time.Now().Add(2 * time.Second))
			c.Write([]byte("*1\r\n$4\r\nPING\r\n"))
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.HasPrefix(line, "+PONG") {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("limitkv at %s not ready", addr)
}

// trackSources stats the server's sources so that go test's cache, which
// sees the files a test opens but not what TestMain built, treats a change
// of the server as a change of these tests' inputs.
var trackOnce sync.Once

func trackSources() {
	trackOnce.Do(func() {
		filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if d.IsDir() && path != ".." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "tests" || d.Name() == "client") {
				return filepath.SkipDir
			}
			if !d.IsDir() && (strings.HasSuffix(path, ".go") || d.Name() == "go.mod" || d.Name() == "go.sum") {
				os.Stat(path)
			}
			return nil
		})
	})
}

// recorder is a go-redis hook that keeps every command and its raw reply,
// so that a test compares a typed result with the very reply it came from.
type recorder struct {
	mu    sync.Mutex
	calls []call
}

type call struct {
	args  []any
	reply any
	err   error
}

func (r *recorder) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *recorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if c, ok := cmd.(*redis.Cmd); ok {
			r.mu.Lock()
			r.calls = append(r.calls, call{args: c.Args(), reply: c.Val(), err: c.Err()})
			r.mu.Unlock()
		}
		return err
	}
}

func (r *recorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (r *recorder) last(t testing.TB) call {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.calls) == 0 {
		t.Fatal("no command recorded")
	}
	return r.calls[len(r.calls)-1]
}

// newClient connects to the test server; rec, if not nil, records every
// command.
func newClient(t testing.TB, rec *recorder) (*Client, *redis.Client) {
	t.Helper()
	trackSources()
	rdb := redis.NewClient(&redis.Options{Addr: serverAddr})
	t.Cleanup(func() { rdb.Close() })
	if rec != nil {
		rdb.AddHook(rec)
	}
	return New(rdb), rdb
}

// key is a key no other test uses.
func key(t testing.TB, suffix string) string {
	return "client-test:" + t.Name() + ":" + suffix
}

// rawFive reads a recorded reply as the five integers of an RL reply.
func rawFive(t testing.TB, c call) [5]int64 {
	t.Helper()
	v, ok := c.reply.([]any)
	if !ok || len(v) != 5 {
		t.Fatalf("reply %#v to %v is not five integers", c.reply, c.args)
	}
	var n [5]int64
	for i, e := range v {
		x, ok := e.(int64)
		if !ok {
			t.Fatalf("reply %#v to %v: element %d is %T", c.reply, c.args, i, e)
		}
		n[i] = x
	}
	return n
}

// argString writes recorded arguments as one line, for comparisons.
func argString(args []any) string {
	s := make([]string, len(args))
	for i, a := range args {
		s[i] = fmt.Sprint(a)
	}
	return strings.Join(s, " ")
}
