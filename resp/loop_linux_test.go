//go:build linux

package resp

import (
	"context"
	"net"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestEndedLoopsCloseOnlyTheirOwn: servers with event loops start and shut
// down; the files opened afterwards reuse their descriptors' numbers, and
// must still be open after the collector ran the finalizers. A loop once
// closed its epoll descriptor both by number and through the os.File that
// owned it, so the file's finalizer closed whatever had the number by
// then: in the tests' process, another server's loop, which then served
// nobody.
func TestEndedLoopsCloseOnlyTheirOwn(t *testing.T) {
	for i := 0; i < 10; i++ {
		srv := NewServer(&testHandler{})
		if err := srv.EnableLoops(2); err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(ln)
		c := (&testServer{srv: srv, addr: ln.Addr().String()}).dial(t)
		if got := c.do("PING"); got != "+PONG" {
			t.Fatalf("PING: %q", got)
		}
		c.c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		srv.Shutdown(ctx)
		cancel()
		for _, l := range srv.loops.all {
			for end := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
				l.mu.Lock()
				closed := l.closed
				l.mu.Unlock()
				if closed {
					break
				}
				if time.Now().After(end) {
					t.Fatal("a loop did not end with its server")
				}
			}
		}
	}
	var files []*os.File
	for i := 0; i < 64; i++ {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, r, w)
	}
	for i := 0; i < 3; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	for i := 0; i < len(files); i += 2 {
		if _, err := files[i+1].Write([]byte{1}); err != nil {
			t.Fatalf("a pipe opened after the servers ended: %v", err)
		}
		var b [1]byte
		if _, err := files[i].Read(b[:]); err != nil {
			t.Fatalf("a pipe opened after the servers ended: %v", err)
		}
		files[i].Close()
		files[i+1].Close()
	}
}
