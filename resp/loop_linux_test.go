//go:build linux

package resp

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"syscall"
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

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (server, client *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cl, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close(); sv.Close() })
	return sv.(*net.TCPConn), cl.(*net.TCPConn)
}

// readSoon reads through s until input arrives, for at most a few seconds.
func readSoon(t *testing.T, s *rawSock, b []byte) (int, error) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if n, err := s.Read(b); !errors.Is(err, errAgain) {
			return n, err
		}
	}
	t.Fatal("no input within 5s")
	return 0, nil
}

// TestRawSock: the loop's reads and writes, raw system calls on the
// non-blocking socket, never wait: nothing to read and a full socket
// buffer both give errAgain; input, the peer's end and a closed socket
// read as a blocking read would give them.
func TestRawSock(t *testing.T) {
	sv, cl := tcpPair(t)
	rc, err := sv.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	s := newRawSock(rc)
	buf := make([]byte, 64)
	if n, err := s.Read(buf); n != 0 || !errors.Is(err, errAgain) {
		t.Fatalf("read with no input: %d, %v", n, err)
	}
	if n, err := s.Read(nil); n != 0 || err != nil {
		t.Fatalf("read into no room: %d, %v", n, err)
	}
	cl.Write([]byte("PING\r\n"))
	if n, err := readSoon(t, s, buf); err != nil || string(buf[:n]) != "PING\r\n" {
		t.Fatalf("read: %q, %v", buf[:n], err)
	}
	// The client does not read: the socket's buffers fill, and a write
	// then takes what fits, or nothing, without waiting.
	chunk := make([]byte, 1<<20)
	total, full := 0, false
	for i := 0; i < 256 && !full; i++ {
		n, err := s.Write(chunk)
		total += n
		switch {
		case errors.Is(err, errAgain):
			full = true
		case err != nil:
			t.Fatalf("write: %v", err)
		}
	}
	if !full || total == 0 {
		t.Fatalf("256 MB written to a client that does not read (full %v, %d bytes)", full, total)
	}
	got, err := io.ReadFull(cl, make([]byte, total))
	if err != nil || got != total {
		t.Fatalf("the client read %d of %d bytes: %v", got, total, err)
	}
	cl.Close()
	if n, err := readSoon(t, s, buf); n != 0 || err != nil {
		t.Fatalf("read after the peer closed: %d, %v (want end of input)", n, err)
	}
	sv.Close()
	if n, err := s.Read(buf); n != 0 || err == nil || errors.Is(err, errAgain) {
		t.Fatalf("read from a closed socket: %d, %v", n, err)
	}
	if n, err := s.Write(buf); n != 0 || err == nil || errors.Is(err, errAgain) {
		t.Fatalf("write to a closed socket: %d, %v", n, err)
	}
}

// pipeSet makes an epoll set watching a pipe's read end for events, with
// id as the event's data, and returns the set and the pipe's write end;
// the test's end closes them.
func pipeSet(t *testing.T, events uint32, id uint64) (epfd, wr int) {
	t.Helper()
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(epfd) })
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(p[0]); syscall.Close(p[1]) })
	ev := syscall.EpollEvent{Events: events}
	setEventID(&ev, id)
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, p[0], &ev); err != nil {
		t.Fatal(err)
	}
	return epfd, p[1]
}

// TestEpollPoll: the loop's poll of its set returns at once, with the
// events there are or none.
func TestEpollPoll(t *testing.T) {
	epfd, wr := pipeSet(t, syscall.EPOLLIN, 7<<32|9)
	events := make([]syscall.EpollEvent, 4)
	if n, errno := epollPoll(epfd, events); n != 0 || errno != 0 {
		t.Fatalf("poll of a quiet set: %d, %v", n, errno)
	}
	syscall.Write(wr, []byte{1})
	if n, errno := epollPoll(epfd, events); n != 1 || errno != 0 || eventID(&events[0]) != 7<<32|9 {
		t.Fatalf("poll with the pipe readable: %d, %v, id %x", n, errno, eventID(&events[0]))
	}
	if n, errno := epollPoll(-1, events); n != 0 || errno != syscall.EBADF {
		t.Fatalf("poll of no set: %d, %v", n, errno)
	}
}

// TestReadableLeavesEvents: a loop's look at a sibling's set tells whether
// it has events and leaves them for the sibling, edge-triggered ones too.
func TestReadableLeavesEvents(t *testing.T) {
	epfd, wr := pipeSet(t, syscall.EPOLLIN|epollET, 5)
	if readable(epfd) {
		t.Fatal("a quiet set looks readable")
	}
	syscall.Write(wr, []byte{1})
	for i := 0; i < 2; i++ {
		if !readable(epfd) {
			t.Fatalf("look %d: a set with an event looks quiet", i)
		}
	}
	events := make([]syscall.EpollEvent, 4)
	if n, _ := epollPoll(epfd, events); n != 1 || eventID(&events[0]) != 5 {
		t.Fatalf("the event after the looks: %d", n)
	}
	if readable(epfd) {
		t.Fatal("the set looks readable once its event is taken")
	}
	if readable(-1) {
		t.Fatal("no set looks readable")
	}
}
