package resp

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// hangupHandler serves PING, and WATCH ms: it watches for a hangup for up
// to ms milliseconds, as a blocked command waits, and tells what ended the
// wait on outcome (and in its reply, when the client is still there).
type hangupHandler struct {
	outcome chan string
	// watching is told when a WATCH is watching.
	watching chan struct{}
}

func (h *hangupHandler) Open(c *Conn) string { return "" }
func (h *hangupHandler) Closed(c *Conn)      {}
func (h *hangupHandler) Inline(c *Conn, args [][]byte) bool {
	return !strings.EqualFold(string(args[0]), "WATCH")
}

func (h *hangupHandler) Serve(c *Conn, args [][]byte) {
	if !strings.EqualFold(string(args[0]), "WATCH") {
		c.W.Simple("PONG")
		return
	}
	d, _ := time.ParseDuration(string(args[1]) + "ms")
	c.Flush()
	hung, stop := c.WatchHangup()
	h.watching <- struct{}{}
	what := "timeout"
	select {
	case <-hung:
		what = "hangup"
	case <-c.Done():
		what = "done"
	case <-time.After(d):
	}
	stop()
	h.outcome <- what
	c.W.Simple(what)
}

// TestWatchHangup: a handler waiting with WatchHangup learns at once that
// its client closed the connection, even with requests unread behind the
// waiting one; a client that stays is not taken for gone, its pipelined
// requests are served after the wait, on event loops and goroutines.
func TestWatchHangup(t *testing.T) {
	modes(t, func(t *testing.T, loops bool) {
		h := &hangupHandler{outcome: make(chan string, 4), watching: make(chan struct{}, 4)}
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
			srv.Shutdown(ctx)
		})
		ts := &testServer{srv: srv, addr: ln.Addr().String()}

		// Stays: the watch ends by its timeout, the pipeline goes on,
		// twice (the watch is set up again on the same socket).
		c := ts.dial(t)
		for i := 0; i < 2; i++ {
			if got := c.do("PING"); got != "+PONG" {
				t.Fatalf("PING: %s", got)
			}
			c.send(string(AppendCommand(nil, []byte("WATCH"), []byte("50"))) + string(AppendCommand(nil, []byte("PING"))))
			<-h.watching
			if got := <-h.outcome; got != "timeout" {
				t.Fatalf("a client that stayed: %s", got)
			}
			for _, want := range []string{"+timeout", "+PONG"} {
				v, err := ReadValue(c.r)
				if err != nil || v.String() != want {
					t.Fatalf("got %v, %v; want %s", v, err, want)
				}
			}
		}

		// Goes, with a request unread behind the wait.
		for _, pipelined := range []bool{false, true} {
			c := ts.dial(t)
			c.do("PING")
			req := string(AppendCommand(nil, []byte("WATCH"), []byte("20000")))
			if pipelined {
				req += string(AppendCommand(nil, []byte("PING")))
			}
			c.send(req)
			<-h.watching
			c.c.Close()
			// Noticed, not waited out: the WATCH lasts 20 s.
			select {
			case got := <-h.outcome:
				if got != "hangup" {
					t.Errorf("pipelined=%v: %s", pipelined, got)
				}
			case <-time.After(15 * time.Second):
				t.Fatalf("pipelined=%v: the hangup went unnoticed", pipelined)
			}
		}
	})
}
