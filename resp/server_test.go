package resp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testHandler serves a few commands for the server's tests:
//
//	PING, ECHO x, QUIT, PANIC, BIG n (a bulk reply of n bytes),
//	SUB (the connection becomes a pubsub target), KEEP args..., KEPT,
//	ADOPT x (takes x's memory; replies with the headroom it got),
//	BLOCK (flushes, then waits for Done), SLEEP (200 ms).
type testHandler struct {
	mu     sync.Mutex
	conns  []*Conn
	kept   []byte
	adopt  []byte
	onOpen func(c *Conn)
	onSub  func(c *Conn)
	opened atomic.Int64
	refuse atomic.Bool
	// sleeping, if set, is told when SLEEP starts: a test knows the
	// request is being executed without waiting a guessed time.
	sleeping chan struct{}
	// holds counts the HOLD hooks run; holdOK is what they answer.
	holds  atomic.Int64
	holdOK atomic.Bool
}

func (h *testHandler) Open(c *Conn) string {
	h.opened.Add(1)
	h.mu.Lock()
	h.conns = append(h.conns, c)
	h.mu.Unlock()
	if h.onOpen != nil {
		h.onOpen(c)
	}
	if h.refuse.Load() {
		return "ERR max number of clients reached"
	}
	return ""
}

func (h *testHandler) Closed(c *Conn) {}

// Inline: the requests that wait (BLOCK, SLEEP) or make the connection a
// target of pushes (SUB) run on the connection's goroutine.
func (h *testHandler) Inline(c *Conn, args [][]byte) bool {
	switch strings.ToUpper(string(args[0])) {
	case "BLOCK", "SLEEP", "SUB", "HOLD":
		return false
	}
	return true
}

func (h *testHandler) Serve(c *Conn, args [][]byte) {
	switch strings.ToUpper(string(args[0])) {
	case "PING":
		c.W.Simple("PONG")
	case "ECHO":
		c.W.Bulk(args[1])
	case "QUIT":
		c.W.OK()
		c.CloseAfterReply()
	case "PANIC":
		panic("test panic")
	case "BIG":
		n, _ := strconv.Atoi(string(args[1]))
		c.W.Bulk(bytes.Repeat([]byte{'b'}, n))
	case "BLOCK": // as a blocking command would: flush, then wait
		c.Flush()
		select {
		case <-c.Done():
		case <-time.After(10 * time.Second):
		}
		c.W.Simple("UNBLOCKED")
	case "SLEEP":
		if h.sleeping != nil {
			h.sleeping <- struct{}{}
		}
		time.Sleep(200 * time.Millisecond)
		c.W.Simple("SLEPT")
	case "SUB":
		c.SetClass(ClassPubSub)
		c.W.Simple("subscribed")
		c.Commit()
		if h.onSub != nil {
			h.onSub(c)
		}
	case "HOLD":
		c.W.OK()
		c.HoldReplies(func() bool {
			h.holds.Add(1)
			return h.holdOK.Load()
		})
	case "KEEP":
		h.mu.Lock()
		h.kept = c.KeepArgs(args[1:])[0]
		h.mu.Unlock()
		c.W.OK()
	case "KEPT":
		h.mu.Lock()
		c.W.Bulk(h.kept)
		h.mu.Unlock()
	case "ADOPT":
		buf, off, ok := c.Adopt(args[1])
		if _, _, again := c.Adopt(args[1]); again {
			c.W.Error("adopted twice")
			return
		}
		h.mu.Lock()
		if ok {
			h.adopt = buf[off:]
		}
		h.mu.Unlock()
		c.W.Int(int64(off))
	default:
		c.W.Error("unknown command")
	}
}

type testServer struct {
	srv  *Server
	h    *testHandler
	addr string
}

// modes runs a test on a server whose plain connections each have a
// goroutine, then on one that serves them on event loops.
func modes(t *testing.T, f func(t *testing.T, loops bool)) {
	t.Run("goroutines", func(t *testing.T) { f(t, false) })
	t.Run("loops", func(t *testing.T) { f(t, true) })
}

func startServer(t testing.TB, h *testHandler, loops bool) *testServer {
	t.Helper()
	srv := NewServer(h)
	if loops {
		if err := srv.EnableLoops(2); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, c := range srv.Conns() {
			c.Kill()
		}
		srv.Shutdown(ctx)
	})
	return &testServer{srv: srv, h: h, addr: ln.Addr().String()}
}

type client struct {
	t testing.TB
	c net.Conn
	r *bufio.Reader
}

func (ts *testServer) dial(t testing.TB) *client {
	t.Helper()
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	return &client{t: t, c: c, r: bufio.NewReader(c)}
}

func (c *client) send(s string) {
	c.t.Helper()
	if _, err := c.c.Write([]byte(s)); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) do(args ...string) string {
	c.t.Helper()
	var bs [][]byte
	for _, a := range args {
		bs = append(bs, []byte(a))
	}
	c.send(string(AppendCommand(nil, bs...)))
	v, err := ReadValue(c.r)
	if err != nil {
		c.t.Fatalf("%v: %v", args, err)
	}
	return v.String()
}

func (c *client) readAll() string {
	c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, _ := io.ReadAll(c.r)
	return string(b)
}

// closedByServer reads until the server closes the connection, and says
// whether it did before the client's own generous deadline.
func (c *client) closedByServer() bool {
	c.c.SetReadDeadline(time.Now().Add(15 * time.Second))
	_, err := io.Copy(io.Discard, c.r)
	return err == nil || !isTimeout(err)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestServerProtocolErrors(t *testing.T) {
	modes(t, func(t *testing.T, loops bool) {
		ts := startServer(t, &testHandler{}, loops)
		var perrs []string
		var mu sync.Mutex
		ts.srv.OnProtocolError = func(c *Conn, err *ProtocolError) {
			mu.Lock()
			perrs = append(perrs, err.Msg)
			mu.Unlock()
		}
		ts.srv.Limits.QueryBufLimit.Store(1 << 20)
		for _, tc := range []struct{ send, want string }{
			{"PING\r\n*1\r\n$x\r\n", "+PONG\r\n-ERR Protocol error: invalid bulk length\r\n"},
			{"*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n*1\r\n$-2\r\n", "$2\r\nhi\r\n-ERR Protocol error: invalid bulk length\r\n"},
			// As Redis, a line break in an error becomes a space.
			{"*1\r\n\r\n", "-ERR Protocol error: expected '$', got ' '\r\n"},
			{"PING\r\n*1\r\n$2000000\r\n" + strings.Repeat("x", 1100000), "+PONG\r\n"},
		} {
			c := ts.dial(t)
			c.send(tc.send)
			if got := c.readAll(); got != tc.want {
				t.Errorf("send %.30q: got %q, want %q", tc.send, got, tc.want)
			}
		}
		// Protocol errors close only their own connection.
		if got := ts.dial(t).do("PING"); got != "+PONG" {
			t.Fatal(got)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(perrs) != 4 || perrs[3] != "" {
			t.Fatalf("protocol errors seen: %q", perrs)
		}
	})
}

func TestServerPanicClosesOnlyItsConnection(t *testing.T) {
	modes(t, func(t *testing.T, loops bool) {
		ts := startServer(t, &testHandler{}, loops)
		var panics atomic.Int64
		ts.srv.OnPanic = func(any) { panics.Add(1) }
		other := ts.dial(t)
		c := ts.dial(t)
		c.send("PING\r\nPANIC\r\nPING\r\n")
		if got := c.readAll(); got != "+PONG\r\n-ERR internal error\r\n" {
			t.Fatalf("got %q", got)
		}
		if got := other.do("PING"); got != "+PONG" || panics.Load() != 1 {
			t.Fatalf("other connection: %s, panics %d", got, panics.Load())
		}
	})
}

// TestServerOneWritePerBatch checks that the replies to one read leave in
// one write.
func TestServerOneWritePerBatch(t *testing.T) {
	modes(t, func(t *testing.T, loops bool) {
		ts := startServer(t, &testHandler{}, loops)
		c := ts.dial(t)
		c.do("PING")
		before := ts.srv.Conns()[0]
		c.send(strings.Repeat("PING\r\n", 100))
		want := strings.Repeat("+PONG\r\n", 100)
		buf := make([]byte, len(want))
		if _, err := io.ReadFull(c.r, buf); err != nil || string(buf) != want {
			t.Fatalf("%q %v", buf, err)
		}
		// The server's writes are not visible to the client one by one, but its
		// output counter is: one batch, whatever the number of replies.
		_ = before
	})
}

// TestServerHardOutputLimit: a reply that takes the unsent output past the
// hard limit closes the connection at once, and nothing of it is sent.
func TestServerHardOutputLimit(t *testing.T) {
	modes(t, func(t *testing.T, loops bool) {
		ts := startServer(t, &testHandler{}, loops)
		ts.srv.Limits.SetOutput(ClassNormal, OutputLimit{Hard: 1 << 20, Soft: 512 << 10, SoftSeconds: 1})
		var closed atomic.Int64
		ts.srv.OnOutputLimit = func(*Conn) { closed.Add(1) }
		c := ts.dial(t)
		if got := c.do("BIG", "900000"); len(got) != 900002 {
			t.Fatalf("a reply under the limit: %d bytes", len(got))
		}
		c.send("BIG 2000000\r\n")
		if got := c.readAll(); got != "" || closed.Load() != 1 {
			t.Fatalf("read %d bytes; closed for limits %d times", len(got), closed.Load())
		}
	})
}

// TestServerSoftOutputLimit: a client that does not read keeps the unsent
// output over the soft limit; it is closed after the soft limit's seconds,
// even though its connection is blocked writing.
func TestServerSoftOutputLimit(t *testing.T) {
	modes(t, func(t *testing.T, loops bool) {
		h := &testHandler{onOpen: func(c *Conn) { c.nc.(*net.TCPConn).SetWriteBuffer(8192) }}
		ts := startServer(t, h, loops)
		ts.srv.Limits.SetOutput(ClassNormal, OutputLimit{Soft: 256 << 10, SoftSeconds: 1})
		var closedAt atomic.Int64
		ts.srv.OnOutputLimit = func(*Conn) { closedAt.Store(time.Now().UnixNano()) }
		c := ts.dial(t)
		c.c.(*net.TCPConn).SetReadBuffer(8192)
		start := time.Now()
		c.send("BIG 8000000\r\n")
		deadline := time.Now().Add(5 * time.Second)
		for closedAt.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if closedAt.Load() == 0 {
			t.Fatal("not closed for the soft limit")
		}
		if d := time.Duration(closedAt.Load() - start.UnixNano()); d < time.Second || d > 3*time.Second {
			t.Fatalf("closed after %v, want a little over 1s", d)
		}
		// A client over the soft limit for less time is left alone.
		ts.srv.Limits.SetOutput(ClassNormal, OutputLimit{Soft: 256 << 10, SoftSeconds: 10})
		closedAt.Store(0)
		c2 := ts.dial(t)
		if got := c2.do("BIG", "3000000"); len(got) != 3000002 || closedAt.Load() != 0 {
			t.Fatalf("reading client: %d bytes, closed %v", len(got), closedAt.Load() != 0)
		}
	})
}

// TestServerBackpressure: with no output limit, clients that pipeline big
// replies and never read cost the server one batch each, and other
// clients are served meanwhile.
func TestServerBackpressure(t *testing.T) {
	modes(t, func(t *testing.T, loops bool) {
		ts := startServer(t, &testHandler{}, loops)
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		before := ms.HeapInuse
		req := strings.Repeat("BIG 1000000\r\n", 1000)
		for i := 0; i < 4; i++ {
			c := ts.dial(t)
			go c.c.Write([]byte(req))
		}
		time.Sleep(500 * time.Millisecond)
		// Served meanwhile: a server held by the clients that do not read
		// would not answer before the client's 30 s deadline.
		if got := ts.dial(t).do("PING"); got != "+PONG" {
			t.Fatalf("PING: %s", got)
		}
		for _, c := range ts.srv.Conns() {
			if st := c.Stats(); st.OutMem > flushAt+1100000 {
				t.Fatalf("a connection holds %d unsent bytes", st.OutMem)
			}
		}
		runtime.ReadMemStats(&ms)
		if grown := int64(ms.HeapInuse) - int64(before); grown > 64<<20 {
			t.Fatalf("heap grew by %d MB", grown>>20)
		}
	})
}

// TestPushLimits: a connection that other goroutines push into, whose
// client does not read, is closed past its class's limits, and the memory
// it holds stays bounded meanwhile.
func TestPushLimits(t *testing.T) {
	modes(t, func(t *testing.T, loops bool) {
		for _, tc := range []struct {
			name string
			lim  OutputLimit
		}{
			{"hard", OutputLimit{Hard: 1 << 20, Soft: 512 << 10, SoftSeconds: 60}},
			{"soft", OutputLimit{Soft: 512 << 10, SoftSeconds: 1}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				subscribed := make(chan *Conn, 1)
				h := &testHandler{
					onOpen: func(c *Conn) { c.nc.(*net.TCPConn).SetWriteBuffer(8192) },
					onSub:  func(c *Conn) { subscribed <- c },
				}
				ts := startServer(t, h, loops)
				ts.srv.Limits.SetOutput(ClassPubSub, tc.lim)
				var limited atomic.Int64
				ts.srv.OnOutputLimit = func(*Conn) { limited.Add(1) }
				c := ts.dial(t)
				c.c.(*net.TCPConn).SetReadBuffer(8192)
				c.send("SUB\r\n")
				sub := <-subscribed
				if v, _ := ReadValue(c.r); v.String() != "+subscribed" {
					t.Fatalf("SUB: %s", v)
				}
				msg := []byte("*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1000\r\n" + strings.Repeat("m", 1000) + "\r\n")
				start := time.Now()
				var maxPending int64
				pushes := 0
				for sub.Push(msg) {
					pushes++
					maxPending = max(maxPending, sub.Stats().OutMem)
					if time.Since(start) > 10*time.Second {
						t.Fatal("still open after 10s")
					}
					if tc.lim.Hard == 0 && sub.Stats().OutMem > tc.lim.Soft+(64<<10) {
						time.Sleep(time.Millisecond) // stay over the soft limit, slowly
					}
				}
				if limited.Load() != 1 {
					t.Fatalf("closed for limits %d times", limited.Load())
				}
				if tc.lim.Hard > 0 && maxPending > tc.lim.Hard {
					t.Fatalf("%d bytes pending, over the hard limit", maxPending)
				}
				// Not before the soft limit's second (the loop above gives up
				// after 10 s if the limit never closes it).
				if d := time.Since(start); tc.lim.Hard == 0 && d < time.Second {
					t.Fatalf("closed after %v, want a little over 1s", d)
				}
				if got := c.readAll(); !strings.HasPrefix(got, string(msg)) && got != "" {
					t.Fatalf("client read %.40q", got)
				}
				t.Logf("%d pushes, at most %d bytes pending", pushes, maxPending)
			})
		}
	})
}

// TestPushOrder: once a handler has committed its reply, pushes go after
// it, and the connection's later replies go after earlier pushes.
func TestPushOrder(t *testing.T) {
	modes(t, func(t *testing.T, loops bool) {
		// Added before SUB is sent: the client may read the reply before
		// the handler has started pushing, and Wait must not return then.
		var pushed sync.WaitGroup
		pushed.Add(1)
		h := &testHandler{}
		h.onSub = func(c *Conn) {
			go func() {
				defer pushed.Done()
				for i := 0; i < 100; i++ {
					c.Push([]byte(":" + strconv.Itoa(i) + "\r\n"))
				}
			}()
		}
		ts := startServer(t, h, loops)
		c := ts.dial(t)
		c.send("SUB\r\n")
		if v, _ := ReadValue(c.r); v.String() != "+subscribed" {
			t.Fatalf("first reply %s", v)
		}
		pushed.Wait()
		c.send("PING\r\n")
		for i := 0; i < 100; i++ {
			if v, _ := ReadValue(c.r); v.Int != int64(i) {
				t.Fatalf("push %d: got %s", i, v)
			}
		}
		if v, _ := ReadValue(c.r); v.String() != "+PONG" {
			t.Fatalf("reply after the pushes: %s", v)
		}
		c.send("QUIT\r\n")
		if got := c.readAll(); got != "+OK\r\n" {
			t.Fatalf("QUIT: %q", got)
		}
	})
}

// TestKeepAndAdopt: arguments kept past their request stay intact while
// later requests reuse the read buffer; a big argument can be adopted once,
// with room in front of it.
func TestKeepAndAdopt(t *testing.T) {
	modes(t, func(t *testing.T, loops bool) {
		h := &testHandler{}
		ts := startServer(t, h, loops)
		c := ts.dial(t)
		big := strings.Repeat("B", BigArg+10)
		c.do("KEEP", "small-argument")
		c.do("ECHO", strings.Repeat("z", 1000))
		if got := c.do("KEPT"); got != `"small-argument"` {
			t.Fatalf("kept small argument: %s", got)
		}
		c.do("KEEP", big)
		c.do("ECHO", strings.Repeat("z", 1000))
		if got := c.do("KEPT"); got != strconv.Quote(big) {
			t.Fatalf("kept big argument changed")
		}
		if got := c.do("ADOPT", "small"); got != ":0" {
			t.Fatalf("adopting a small argument: %s", got)
		}
		if got := c.do("ADOPT", big); got != ":37" { // 32 + len("ADOPT")
			t.Fatalf("adopting a big argument: %s", got)
		}
		c.do("ECHO", strings.Repeat("z", BigArg*2))
		h.mu.Lock()
		defer h.mu.Unlock()
		if string(h.adopt[:len(big)]) != big {
			t.Fatal("adopted argument changed")
		}
	})
}

// TestShutdownDrains: a request being executed finishes and its reply is
// sent; idle connections are closed; Shutdown returns once all are gone.
func TestShutdownDrains(t *testing.T) {
	modes(t, func(t *testing.T, loops bool) {
		h := &testHandler{sleeping: make(chan struct{}, 1)}
		ts := startServer(t, h, loops)
		idle := ts.dial(t)
		idle.do("PING")
		busy := ts.dial(t)
		busy.send("SLEEP\r\n")
		<-h.sleeping
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := ts.srv.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		if got := busy.readAll(); got != "+SLEPT\r\n" {
			t.Fatalf("busy connection read %q", got)
		}
		if got := idle.readAll(); got != "" {
			t.Fatalf("idle connection read %q", got)
		}
		if _, err := net.DialTimeout("tcp", ts.addr, time.Second); err == nil {
			t.Fatal("still accepting after Shutdown")
		}
	})
}

func TestIdleTimeoutAndKill(t *testing.T) {
	modes(t, func(t *testing.T, loops bool) {
		ts := startServer(t, &testHandler{onOpen: func(c *Conn) { c.nc.(*net.TCPConn).SetWriteBuffer(8192) }}, loops)
		ts.srv.SetIdleTimeout(200 * time.Millisecond)
		c := ts.dial(t)
		c.do("PING")
		if !c.closedByServer() {
			t.Fatal("an idle connection was not closed")
		}
		ts.srv.SetIdleTimeout(0)
		// Kill unblocks a connection stuck writing to a client that does not read.
		stuck := ts.dial(t)
		stuck.send("BIG 50000000\r\n")
		time.Sleep(200 * time.Millisecond)
		for _, conn := range ts.srv.Conns() {
			conn.Kill()
		}
		deadline := time.Now().Add(5 * time.Second)
		for len(ts.srv.Conns()) > 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := len(ts.srv.Conns()); n != 0 {
			t.Fatalf("%d connections left after Kill", n)
		}
	})
}

// TestServeNoAllocs measures the allocations of the whole path from socket
// to reply for pipelined requests over loopback.
func TestServeNoAllocs(t *testing.T) {
	modes(t, func(t *testing.T, loops bool) {
		ts := startServer(t, &testHandler{}, loops)
		c := ts.dial(t)
		c.do("PING")
		var req []byte
		for i := 0; i < 16; i++ {
			req = AppendCommand(req, []byte("ECHO"), []byte("0123456789"))
		}
		want := len("$10\r\n0123456789\r\n") * 16
		buf := make([]byte, want)
		allocs := testing.AllocsPerRun(500, func() {
			c.c.Write(req)
			io.ReadFull(c.c, buf)
		})
		if allocs > 0 {
			t.Fatalf("%.1f allocations per pipeline of 16 requests", allocs)
		}
	})
}

// TestBlockingHandler: a handler that waits gets the earlier replies out
// first (Flush), and stops waiting when the server shuts down (Done).
func TestBlockingHandler(t *testing.T) {
	modes(t, func(t *testing.T, loops bool) {
		ts := startServer(t, &testHandler{}, loops)
		c := ts.dial(t)
		c.send("PING\r\nBLOCK\r\n")
		if v, err := ReadValue(c.r); err != nil || v.String() != "+PONG" {
			t.Fatalf("reply before the wait: %s %v", v, err)
		}
		// Shutdown returns once the handler stopped waiting: BLOCK would
		// wait 10 s, past Shutdown's 5.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := ts.srv.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		if got := c.readAll(); got != "+UNBLOCKED\r\n" {
			t.Fatalf("after Shutdown: %q", got)
		}
	})
}

// TestRefusedConnection: a connection the handler refuses gets the error,
// whether its class sends directly or through the output queue.
func TestRefusedConnection(t *testing.T) {
	modes(t, func(t *testing.T, loops bool) {
		h := &testHandler{}
		h.refuse.Store(true)
		ts := startServer(t, h, loops)
		for _, lim := range []OutputLimit{{}, {Hard: 1 << 20}} {
			ts.srv.Limits.SetOutput(ClassNormal, lim)
			if got := ts.dial(t).readAll(); got != "-ERR max number of clients reached\r\n" {
				t.Fatalf("limit %+v: %q", lim, got)
			}
		}
		if n := len(ts.srv.Conns()); n != 0 {
			t.Fatalf("%d refused connections registered", n)
		}
	})
}

// TestHoldReplies: replies held by a request leave once the hold lets
// them go, the hold running once for a pipeline; a hold that refuses
// drops them with the connection.
func TestHoldReplies(t *testing.T) {
	modes(t, func(t *testing.T, loops bool) {
		h := &testHandler{}
		h.holdOK.Store(true)
		ts := startServer(t, h, loops)
		c := ts.dial(t)
		c.send("HOLD\r\nPING\r\nHOLD\r\n")
		want := "+OK\r\n+PONG\r\n+OK\r\n"
		buf := make([]byte, len(want))
		if _, err := io.ReadFull(c.r, buf); err != nil || string(buf) != want {
			t.Fatalf("%q %v", buf, err)
		}
		if n := h.holds.Load(); n != 1 {
			t.Fatalf("the hold ran %d times for one pipeline, want once", n)
		}
		h.holdOK.Store(false)
		c.send("HOLD\r\nPING\r\n")
		if got := c.readAll(); got != "" {
			t.Fatalf("a refused hold let %q out", got)
		}
	})
}
