package migrate

import (
	"bufio"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeTarget is a node that answers each command it reads with what
// reply says (+OK when reply is nil); with closeAfterFirst it closes each
// connection after its first batch, as a target that dropped a cached
// connection would be found. It counts the connections it accepted and
// records the commands' names.
type fakeTarget struct {
	addr     string
	accepted atomic.Int32
	mu       sync.Mutex
	names    []string
}

func (f *fakeTarget) commands() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.names...)
}

func startTarget(t *testing.T, closeAfterFirst bool, reply func(args []string) string) *fakeTarget {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	f := &fakeTarget{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.accepted.Add(1)
			go f.serve(c, closeAfterFirst, reply)
		}
	}()
	return f
}

func (f *fakeTarget) serve(c net.Conn, closeAfterFirst bool, reply func([]string) string) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(c)
	line := func() (string, error) {
		s, err := r.ReadString('\n')
		return strings.TrimSuffix(s, "\r\n"), err
	}
	var out []byte
	for {
		head, err := line()
		if err != nil || !strings.HasPrefix(head, "*") {
			return
		}
		n, _ := strconv.Atoi(head[1:])
		args := make([]string, n)
		for i := range args {
			if _, err := line(); err != nil { // $len
				return
			}
			if args[i], err = line(); err != nil {
				return
			}
		}
		f.mu.Lock()
		f.names = append(f.names, args[0])
		f.mu.Unlock()
		rep := "+OK"
		if reply != nil {
			rep = reply(args)
		}
		out = append(out, rep+"\r\n"...)
		if r.Buffered() == 0 {
			c.Write(out)
			out = out[:0]
			if closeAfterFirst {
				return
			}
		}
	}
}

func restores(keys ...string) *Batch {
	var b Batch
	for _, k := range keys {
		b.Restore([]byte(k), 0, []byte("payload"), false)
	}
	return &b
}

// fakeClock holds the idle timers until the test fires them.
type fakeClock struct {
	mu     sync.Mutex
	timers []*fakeTimer
}

type fakeTimer struct {
	f       func()
	stopped atomic.Bool
}

func (t *fakeTimer) Stop() bool { return !t.stopped.Swap(true) }

func (c *fakeClock) afterFunc(d time.Duration, f func()) stopper {
	if d != socketTTL {
		panic("idle timer of " + d.String())
	}
	t := &fakeTimer{f: f}
	c.mu.Lock()
	c.timers = append(c.timers, t)
	c.mu.Unlock()
	return t
}

// elapse fires every timer still running, as if ten seconds had passed.
func (c *fakeClock) elapse() {
	c.mu.Lock()
	ts := c.timers
	c.timers = nil
	c.mu.Unlock()
	for _, t := range ts {
		if t.Stop() {
			t.f()
		}
	}
}

// TestPoolConcurrent: exchanges with one target at once each get a
// connection of their own; run with -race.
func TestPoolConcurrent(t *testing.T) {
	f := startTarget(t, false, nil)
	var p Pool
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				acked, err := p.Send(Target{Addr: f.addr, Timeout: time.Second, DB: int64(i % 3)}, restores("a", "b"))
				if err != nil || !acked[0] || !acked[1] {
					t.Errorf("send: %v %v", err, acked)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := p.Cached(); n != 1 {
		t.Errorf("%d cached connections to one target, want 1", n)
	}
}

// TestPoolRetry: a cached connection the target has closed is replaced,
// once, without the caller seeing an error.
func TestPoolRetry(t *testing.T) {
	f := startTarget(t, true, nil)
	var p Pool
	for i := 0; i < 3; i++ {
		acked, err := p.Send(Target{Addr: f.addr, Timeout: time.Second}, restores("k"))
		if err != nil || !acked[0] {
			t.Fatalf("send %d: %v %v", i, err, acked)
		}
		time.Sleep(50 * time.Millisecond) // let the target's close arrive
	}
}

// TestPoolReuse: the second exchange with a target takes the first's
// connection, which needs no SELECT when the database is the same.
func TestPoolReuse(t *testing.T) {
	f := startTarget(t, false, nil)
	var p Pool
	target := Target{Addr: f.addr, Timeout: time.Second, DB: 2, Auth: true, Pass: []byte("pw")}
	for i := 0; i < 2; i++ {
		if _, err := p.Send(target, restores("k")); err != nil {
			t.Fatal(err)
		}
	}
	target.DB = 3
	if _, err := p.Send(target, restores("k")); err != nil {
		t.Fatal(err)
	}
	if n := f.accepted.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
	want := "AUTH SELECT RESTORE AUTH RESTORE AUTH SELECT RESTORE"
	if got := strings.Join(f.commands(), " "); got != want {
		t.Errorf("commands %q, want %q", got, want)
	}
	if n := p.Cached(); n != 1 {
		t.Errorf("Cached() = %d, want 1", n)
	}
}

// TestPoolIdleExpiry: a connection unused for ten seconds is closed and
// the next exchange connects again; one in use is not expired.
func TestPoolIdleExpiry(t *testing.T) {
	f := startTarget(t, false, nil)
	var clock fakeClock
	p := Pool{afterFunc: clock.afterFunc}
	target := Target{Addr: f.addr, Timeout: time.Second}
	if _, err := p.Send(target, restores("k")); err != nil {
		t.Fatal(err)
	}
	c, err := p.Get(f.addr, time.Second) // in use: its timer stopped
	if err != nil {
		t.Fatal(err)
	}
	clock.elapse()
	if n := p.Cached(); n != 0 {
		t.Errorf("Cached() = %d while in use, want 0", n)
	}
	p.Put(f.addr, c)
	if n := p.Cached(); n != 1 {
		t.Errorf("Cached() = %d after Put, want 1", n)
	}
	if _, err := p.Send(target, restores("k")); err != nil {
		t.Fatal(err)
	}
	if n := f.accepted.Load(); n != 1 {
		t.Fatalf("%d connections before expiry, want 1", n)
	}
	clock.elapse()
	if n := p.Cached(); n != 0 {
		t.Errorf("Cached() = %d after ten idle seconds, want 0", n)
	}
	if _, err := p.Send(target, restores("k")); err != nil {
		t.Fatal(err)
	}
	if n := f.accepted.Load(); n != 2 {
		t.Errorf("%d connections after expiry, want 2", n)
	}
}

// TestSendTargetError: a RESTORE the target refuses is not acked and its
// error is the one returned; the others still are; the connection, kept,
// selects its database again next time.
func TestSendTargetError(t *testing.T) {
	f := startTarget(t, false, func(args []string) string {
		if args[0] == "RESTORE" && args[1] == "bad" {
			return "-BUSYKEY Target key name already exists."
		}
		return "+OK"
	})
	var p Pool
	target := Target{Addr: f.addr, Timeout: time.Second, DB: 1}
	acked, err := p.Send(target, restores("a", "bad", "c"))
	var te *TargetError
	if !errors.As(err, &te) || err.Error() != "ERR Target instance replied with error: BUSYKEY Target key name already exists." {
		t.Fatalf("err %v", err)
	}
	if !acked[0] || acked[1] || !acked[2] {
		t.Errorf("acked %v", acked)
	}
	if _, err := p.Send(target, restores("a")); err != nil {
		t.Fatal(err)
	}
	want := "SELECT RESTORE RESTORE RESTORE SELECT RESTORE"
	if got := strings.Join(f.commands(), " "); got != want {
		t.Errorf("commands %q, want %q", got, want)
	}
}

// TestSendAuthError: when AUTH is refused no RESTORE counts, and the
// error is AUTH's.
func TestSendAuthError(t *testing.T) {
	f := startTarget(t, false, func(args []string) string {
		if args[0] == "AUTH" {
			return "-WRONGPASS invalid username-password pair or user is disabled."
		}
		return "+OK"
	})
	var p Pool
	acked, err := p.Send(Target{Addr: f.addr, Timeout: time.Second, Auth: true, User: []byte("u"), Pass: []byte("p")}, restores("a", "b"))
	if err == nil || err.Error() != "ERR Target instance replied with error: WRONGPASS invalid username-password pair or user is disabled." {
		t.Fatalf("err %v", err)
	}
	if acked[0] || acked[1] {
		t.Errorf("acked %v", acked)
	}
}

// TestSendRefused: a refused connection is reported as Redis reports it,
// as a failed write.
func TestSendRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var p Pool
	if _, err := p.Send(Target{Addr: addr, Timeout: time.Second}, restores("a")); err != ErrWrite {
		t.Errorf("err %v, want %v", err, ErrWrite)
	}
}
