package client

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/limitkv/limitkv/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// The tests run against a real limitkv: TestMain builds ./cmd/limitkv once
// and starts it on a free loopback port without persistence; every test
// uses keys of its own. limitkvBin is the binary, for the tests that start
// nodes of their own.
var serverAddr, limitkvBin string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	bin, remove, err := testserver.BuildTemp()
	if err != nil {
		fmt.Fprintln(os.Stderr, "building limitkv:", err)
		return 1
	}
	defer remove()
	limitkvBin = bin
	port, err := testserver.FreePort()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir := filepath.Join(filepath.Dir(bin), "data")
	srv, err := testserver.Start(testserver.Spec{Kind: testserver.Limitkv, Bin: bin, Addr: testserver.Addr(port), Dir: dir,
		Args: testserver.LimitkvArgs(port, dir, "--bind", "127.0.0.1", "--persistence", "no")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer srv.Stop()
	serverAddr = srv.Addr
	return m.Run()
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
	testserver.TrackSources()
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
