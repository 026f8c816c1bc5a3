//go:build linux

package resp

import (
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// WatchHangup watches, while the connection's goroutine waits in a
// handler (a blocked BLPOP), for the client to close its end: nobody
// reads the socket then, so the close would go unnoticed until the wait
// ends. hung is closed when the peer has hung up or the socket failed;
// stop ends the watch (it returns once the watcher is gone) and must be
// called before the connection reads again. Input the client sends
// meanwhile stays in the socket, unread, as Redis keeps a blocked
// client's pipeline for after the reply. A connection without a socket
// (a pipe in tests) gives a nil hung, which never fires.
func (c *Conn) WatchHangup() (hung <-chan struct{}, stop func()) {
	if c.rc == nil {
		return nil, func() {}
	}
	// A read deadline left by the idle timeout would end the watch: a
	// blocked client is not idle.
	c.raw.SetReadDeadline(time.Time{})
	ch := make(chan struct{})
	gone := make(chan struct{})
	var quit atomic.Bool
	go func() {
		defer close(gone)
		err := c.rc.Read(func(fd uintptr) bool {
			if quit.Load() {
				return true
			}
			return peerClosed(int(fd))
		})
		if err == nil && !quit.Load() {
			close(ch)
		}
	}()
	return ch, func() {
		// The deadline wakes the watcher's wait in the poller; quit tells
		// it that this is not a hangup. The write happens before the
		// deadline's, which the poller's wake-up orders before the read.
		quit.Store(true)
		c.raw.SetReadDeadline(time.Unix(1, 0))
		<-gone
		c.raw.SetReadDeadline(time.Time{})
	}
}

// peerClosed polls the socket without waiting: true once the peer shut
// down its side (POLLRDHUP, even with unread input before it) or the
// socket has failed; false to wait for its next event.
func peerClosed(fd int) bool {
	const (
		pollErr   = 0x8
		pollHup   = 0x10
		pollNval  = 0x20
		pollRDHUP = 0x2000
	)
	pfd := struct {
		fd             int32
		events, revent int16
	}{fd: int32(fd), events: pollRDHUP}
	var ts syscall.Timespec
	n, _, errno := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	if errno == syscall.EINTR {
		return false
	}
	if errno != 0 {
		return true
	}
	return n > 0 && pfd.revent&(pollRDHUP|pollHup|pollErr|pollNval) != 0
}
