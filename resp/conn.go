package resp

import (
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// Conn is one client connection. One goroutine reads its requests, runs
// the handler and sends the replies; other goroutines may push data into
// its output (Push) and close it (Kill).
//
// Output: the replies to the requests of one read accumulate in W and
// leave in one write once that read's requests are served, or as soon as
// they pass flushAt bytes, so that a pipeline of big replies never piles
// up. Unsent bytes are checked against the client-output-buffer-limit of
// the connection's class: past the hard limit the connection is closed at
// once, and past the soft one for longer than its seconds, as Redis does.
//
// When the class has no limit (normal clients, by default), the write
// blocks this connection's goroutine only: a client that does not read
// stops being read from (backpressure), and what the server holds for it
// stays bounded by flushAt plus one reply, where Redis would buffer
// without bound. When the class has a limit, the connection behaves as in
// Redis: its replies go to an output queue that a writer goroutine sends,
// its goroutine keeps serving requests, and the limits close a client
// that lets its output pile up.
//
// Once anything is pushed, a writer goroutine sends the connection's output
// queue and the connection's own replies go through that queue too, so
// that the order is kept.
type Conn struct {
	W Writer // replies for the current request
	// Ctx is the handler's per-connection state.
	Ctx any

	nc  net.Conn // what requests and replies go through
	raw net.Conn // the socket: nc itself, or what a TLS nc runs over
	rc  syscall.RawConn
	id  uint64 // unique, for the event loops' epoll sets
	// lp is the event loop that serves the connection when its goroutine
	// does not (loop_linux.go); onLoop says it does now.
	lp     *loop
	sock   *rawSock
	onLoop atomic.Bool
	// unsent says the loop holds replies to send at the end of its turn.
	unsent   bool
	lastRead atomic.Int64 // Unix ns of the last input, for the idle timeout on a loop
	tls      *tls.Conn    // nc when the connection uses TLS
	hsErr    error        // the TLS handshake's outcome, once hsDone
	hsDone   bool         // only the connection's goroutine reads these two
	srv      *Server
	fd       int
	remote   string
	local    string
	p        *parser

	closing bool         // QUIT or a fatal error: drop the rest of the pipeline
	hold    func() bool  // what the replies in W wait for (HoldReplies)
	proto   atomic.Int32 // W's protocol, for other goroutines
	done    chan struct{}
	stop    sync.Once
	class   atomic.Uint32
	inRead  atomic.Bool // waiting on the socket: Shutdown wakes only these
	killed  atomic.Bool

	wmu       sync.Mutex   // one writer on the socket at a time
	pending   atomic.Int64 // unsent output: the batch being written, the queue
	softSince atomic.Int64 // Unix ns since pending passed the soft limit, or 0
	timerMu   sync.Mutex
	softTimer *time.Timer

	qmu    sync.Mutex
	q      *pushQueue // nil until something is pushed
	queued atomic.Bool

	// Figures for CLIENT LIST and INFO, published by the goroutines that
	// own what they describe.
	netIn, netOut        atomic.Int64
	qbuf, qfree, argvMem atomic.Int64
	readBuf, readBufPeak atomic.Int64
	outBuf, outCap       atomic.Int64
	blocksQueued         atomic.Int64
}

const (
	// flushAt is the size at which replies are sent before the read batch
	// is done.
	flushAt = 64 * 1024
	// writeChunk bounds one write, so that unsent bytes are known while a
	// slow client reads a big reply.
	writeChunk = 256 * 1024
	// keepOut is the largest reply buffer a connection keeps between
	// batches.
	keepOut = 256 * 1024
	// pushBlock is the size of the output queue's blocks.
	pushBlock = 16 * 1024
	// connOverhead estimates what a connection costs besides its buffers:
	// its structures and its goroutine's stack.
	connOverhead = int64(unsafe.Sizeof(Conn{}) + unsafe.Sizeof(parser{}) + 8192)
	// errorWriteWindow bounds the wait to deliver a protocol error.
	errorWriteWindow = time.Second
)

// newConn wraps nc, with TLS when cfg is not nil (the handshake waits
// for Handshake or the first read).
func newConn(nc net.Conn, cfg *tls.Config, srv *Server) *Conn {
	c := &Conn{nc: nc, raw: nc, srv: srv, fd: -1, p: newParser(srv.Limits), done: make(chan struct{})}
	if cfg != nil {
		c.tls = tls.Server(nc, cfg)
		c.nc = c.tls
	}
	c.p.beforeBig = srv.BeforeBigArg
	if a := nc.RemoteAddr(); a != nil {
		c.remote = a.String()
	}
	if a := nc.LocalAddr(); a != nil {
		c.local = a.String()
	}
	// The socket's descriptor, for CLIENT LIST (a TLS client's too, as in
	// Redis); -1 for a net.Conn that has none (a pipe in tests).
	if sc, ok := nc.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			raw.Control(func(fd uintptr) { c.fd = int(fd) })
			c.rc = raw
		}
	}
	c.id = srv.connIDs.Add(1)
	c.W.SetProto(2)
	c.proto.Store(2)
	c.readBuf.Store(int64(len(c.p.buf)))
	c.readBufPeak.Store(int64(len(c.p.buf)))
	return c
}

// FD returns the socket's file descriptor, or -1.
func (c *Conn) FD() int { return c.fd }

// RemoteAddr and LocalAddr name the two ends.
func (c *Conn) RemoteAddr() string { return c.remote }
func (c *Conn) LocalAddr() string  { return c.local }

// IsTLS reports whether the connection uses TLS.
func (c *Conn) IsTLS() bool { return c.tls != nil }

// CloseAfterReply closes the connection once the current reply is sent and
// ignores any requests that follow it in the pipeline (QUIT, RESET errors).
func (c *Conn) CloseAfterReply() { c.closing = true }

// Closing reports whether CloseAfterReply was called.
func (c *Conn) Closing() bool { return c.closing }

// Proto returns the protocol the client chose (2 or 3) as of its last
// request. Any goroutine may call it; the handler uses W.Proto.
func (c *Conn) Proto() int { return int(c.proto.Load()) }

// Done is closed when the connection is killed or the server shuts down.
// A handler that waits for something (a blocking command) must stop
// waiting then, and should call Flush before it starts to wait.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Flush sends the replies written so far, for a handler about to wait (a
// blocking command): the replies to the requests before it must not wait
// with it. It reports whether the connection is still open.
func (c *Conn) Flush() bool { return c.flush() }

// OnLoop reports whether an event loop is serving the connection's
// request now, where nothing may wait (Inliner said it would not).
func (c *Conn) OnLoop() bool { return c.onLoop.Load() }

func (c *Conn) signalDone() { c.stop.Do(func() { close(c.done) }) }

// Kill closes the connection from any goroutine (CLIENT KILL, timeouts).
func (c *Conn) Kill() {
	c.killed.Store(true)
	c.signalDone()
	// The socket itself: closing a TLS connection would first send it a
	// close_notify, which may wait for a client that does not read.
	c.raw.Close()
	if c.onLoop.Load() {
		c.lp.kick(c) // its loop finishes it
	}
	c.qmu.Lock()
	if c.q != nil {
		c.q.closed = true
		c.q.cond.Broadcast()
	}
	c.qmu.Unlock()
}

// SetAuthenticated switches the unauthenticated request limits off or on.
// Only the connection's goroutine may call it (Open, or a handler).
func (c *Conn) SetAuthenticated(ok bool) { c.p.noAuth = !ok }

// SetClass sets the class whose client-output-buffer-limit applies
// (normal by default; pubsub for subscribers, replica for replicas).
func (c *Conn) SetClass(cl OutputClass) { c.class.Store(uint32(cl)) }

// Class returns the connection's output class.
func (c *Conn) Class() OutputClass { return OutputClass(c.class.Load()) }

// Adopt hands over the memory of a big argument of the request being
// served, one of BigArg bytes or more that was read into an allocation of
// its own: buf[off:off+len(arg)] is arg, buf[:off] is free room in front of
// it that the caller may write, and the connection never touches buf again.
// It fails for any other argument, and for one already adopted. Only the
// handler serving the request may call it.
func (c *Conn) Adopt(arg []byte) (buf []byte, off int, ok bool) {
	if len(arg) < BigArg {
		return nil, 0, false
	}
	for i := range c.p.bigs {
		b := &c.p.bigs[i]
		if b.b != nil && b.n == len(arg) && &b.b[b.head] == &arg[0] {
			buf, off = b.b[:b.head+b.n], b.head
			b.b = nil
			return buf, off, true
		}
	}
	return nil, 0, false
}

// KeepArgs returns args in memory that stays valid after the request, for
// a handler that keeps a request (MULTI queues it): small arguments, which
// point into the read buffer, are copied into one allocation; big ones are
// shared, as the connection never reuses them.
func (c *Conn) KeepArgs(args [][]byte) [][]byte {
	total := 0
	for _, a := range args {
		if !c.isBig(a) {
			total += len(a)
		}
	}
	buf := make([]byte, 0, total)
	out := make([][]byte, len(args))
	for i, a := range args {
		if c.isBig(a) {
			out[i] = a
			continue
		}
		start := len(buf)
		buf = append(buf, a...)
		out[i] = buf[start:len(buf):len(buf)]
	}
	return out
}

func (c *Conn) isBig(a []byte) bool {
	if len(a) < BigArg {
		return false
	}
	for _, b := range c.p.bigs {
		if b.b != nil && b.n == len(a) && &b.b[b.head] == &a[0] {
			return true
		}
	}
	return false
}

// ConnStats are a connection's buffers, in CLIENT LIST's terms.
type ConnStats struct {
	QueryBuf     int64 // qbuf: bytes read and not yet served
	QueryBufFree int64 // qbuf-free: free room in the read buffer
	ArgvMem      int64 // argv-mem: big arguments of the request being read
	ReadBuf      int64 // rbs: read buffer size
	ReadBufPeak  int64 // rbp: largest read buffer so far
	OutBuf       int64 // obl: replies built and not yet sent
	OutBlocks    int64 // oll: blocks in the output queue
	OutMem       int64 // omem: unsent output, what the output limits check
	TotalMem     int64 // tot-mem: all of the above and the reply buffer
}

// Stats returns the connection's buffer figures. Any goroutine may call it.
func (c *Conn) Stats() ConnStats {
	s := ConnStats{
		QueryBuf:     c.qbuf.Load(),
		QueryBufFree: c.qfree.Load(),
		ArgvMem:      c.argvMem.Load(),
		ReadBuf:      c.readBuf.Load(),
		ReadBufPeak:  c.readBufPeak.Load(),
		OutBuf:       c.outBuf.Load(),
		OutBlocks:    c.blocksQueued.Load(),
		OutMem:       c.pending.Load(),
	}
	q := s.OutMem - s.OutBuf // queued, beyond the reply buffer's own bytes
	s.TotalMem = connOverhead + s.ReadBuf + s.ArgvMem + max(c.outCap.Load(), s.OutBuf) + max(q, 0)
	return s
}

// ServingStats is Stats as the request being served sees its own
// connection: the query buffer is what Redis's holds while it runs, the
// request itself and the rest of the read it came in (CLIENT INFO shows
// qbuf=26 in Redis, its own bytes). Only the request's handler may call
// it, on the goroutine or loop that serves the connection.
func (c *Conn) ServingStats() ConnStats {
	s := c.Stats()
	s.QueryBuf = int64(c.p.end - c.p.mark)
	s.QueryBufFree = int64(len(c.p.buf) - c.p.end)
	return s
}

// publishInput records the read side's figures.
func (c *Conn) publishInput() {
	qbuf, free, argv := c.p.buffered()
	c.qbuf.Store(int64(qbuf))
	c.qfree.Store(int64(free))
	c.argvMem.Store(int64(argv))
	if n := int64(len(c.p.buf)); n != c.readBuf.Load() {
		c.readBuf.Store(n)
		if n > c.readBufPeak.Load() {
			c.readBufPeak.Store(n)
		}
	}
}

// released notes big memory the connection let go of.
func (c *Conn) released(n int) {
	if n > 0 {
		c.srv.released.Add(int64(n))
	}
}

// read reads more input. It returns false when the connection is to close:
// an error, the idle timeout, or the server draining.
func (c *Conn) read() bool {
	s := c.srv
	if s.draining.Load() {
		return false
	}
	if t := s.idleTimeout.Load(); t > 0 {
		c.nc.SetReadDeadline(time.Now().Add(time.Duration(t)))
	}
	c.inRead.Store(true)
	if s.draining.Load() {
		c.inRead.Store(false)
		return false
	}
	size := len(c.p.buf)
	n, err := c.p.readFrom(c.nc)
	c.inRead.Store(false)
	if size > len(c.p.buf) { // a buffer a big request grew was given back
		c.released(size)
	}
	c.netIn.Add(int64(n))
	if c.p.filling {
		c.publishInput() // a big argument: CLIENT LIST shows its progress
	}
	return n > 0 || err == nil
}

// flush sends the replies built so far. It returns false when the
// connection must close.
func (c *Conn) flush() bool {
	b := c.W.Bytes()
	if len(b) == 0 {
		return !c.killed.Load()
	}
	if c.queued.Load() || c.limited() {
		ok := c.enqueueOwn(b)
		c.resetW()
		return ok
	}
	c.outBuf.Store(int64(len(b)))
	ok := c.addPending(int64(len(b)))
	if ok {
		c.wmu.Lock()
		ok = c.write(b)
		c.wmu.Unlock()
	}
	c.outBuf.Store(0)
	c.resetW()
	return ok
}

func (c *Conn) resetW() {
	if n := cap(c.W.b); n > keepOut {
		c.W.b = nil
		c.released(n)
	} else {
		c.W.b = c.W.b[:0]
	}
	c.outCap.Store(int64(cap(c.W.b)))
}

// write sends b in chunks, counting each against the unsent bytes. The
// caller holds wmu.
func (c *Conn) write(b []byte) bool {
	for len(b) > 0 {
		k := min(len(b), writeChunk)
		n, err := c.nc.Write(b[:k])
		c.netOut.Add(int64(n))
		c.subPending(int64(n))
		if err != nil {
			c.subPending(int64(len(b) - n))
			return false
		}
		b = b[n:]
	}
	return true
}

// limited reports whether the connection's class has an output limit.
func (c *Conn) limited() bool {
	lim := c.srv.Limits.Output(c.Class())
	return lim.Hard > 0 || lim.Soft > 0
}

// addPending counts n more unsent bytes and applies the class's output
// limits. It returns false when the connection was closed for them.
func (c *Conn) addPending(n int64) bool {
	v := c.pending.Add(n)
	lim := c.srv.Limits.Output(c.Class())
	if lim.Hard > 0 && v > lim.Hard {
		c.closeForLimits()
		return false
	}
	if lim.Soft > 0 && v > lim.Soft {
		now := time.Now().UnixNano()
		if c.softSince.CompareAndSwap(0, now) {
			c.armSoftTimer(time.Duration(lim.SoftSeconds)*time.Second + time.Millisecond)
		} else if since := c.softSince.Load(); since != 0 && now-since > lim.SoftSeconds*int64(time.Second) {
			c.closeForLimits()
			return false
		}
	}
	return !c.killed.Load()
}

func (c *Conn) subPending(n int64) {
	v := c.pending.Add(-n)
	if c.softSince.Load() != 0 {
		if lim := c.srv.Limits.Output(c.Class()); lim.Soft == 0 || v <= lim.Soft {
			c.softSince.Store(0)
		}
	}
}

func (c *Conn) armSoftTimer(d time.Duration) {
	c.timerMu.Lock()
	defer c.timerMu.Unlock()
	if c.softTimer == nil {
		c.softTimer = time.AfterFunc(d, c.checkSoftLimit)
	} else {
		c.softTimer.Reset(d)
	}
}

// checkSoftLimit runs when the soft limit's time may have run out: the
// connection may be blocked writing to a client that does not read, so the
// check cannot wait for more output.
func (c *Conn) checkSoftLimit() {
	since := c.softSince.Load()
	if since == 0 || c.killed.Load() {
		return
	}
	lim := c.srv.Limits.Output(c.Class())
	if lim.Soft == 0 || c.pending.Load() <= lim.Soft {
		c.softSince.Store(0)
		return
	}
	d := lim.SoftSeconds * int64(time.Second)
	if left := since + d - time.Now().UnixNano(); left >= 0 {
		c.armSoftTimer(time.Duration(left) + time.Millisecond)
		return
	}
	c.closeForLimits()
}

// closeForLimits closes a connection whose output passed its limits.
func (c *Conn) closeForLimits() {
	if c.killed.Load() {
		return
	}
	if f := c.srv.OnOutputLimit; f != nil {
		f(c)
	}
	c.Kill()
}

// protocolError sends the replies before a refused request, then Redis's
// error for it (none for the query buffer limit), and gives up the
// connection.
func (c *Conn) protocolError(perr *ProtocolError) {
	if perr.Msg != "" {
		c.W.Error(perr.Msg)
	}
	c.nc.SetWriteDeadline(time.Now().Add(errorWriteWindow))
	if c.flush() {
		c.drainQueue()
	}
	if f := c.srv.OnProtocolError; f != nil {
		f(c, perr)
	}
}

// close releases the connection's resources. The connection's goroutine
// calls it last.
func (c *Conn) close() {
	c.Kill()
	c.timerMu.Lock()
	if c.softTimer != nil {
		c.softTimer.Stop()
	}
	c.timerMu.Unlock()
	// Only what grew past the usual sizes counts as memory to give back.
	if n := len(c.p.buf); n > initialReadBuf {
		c.released(n)
	}
	if n := cap(c.W.b); n > keepOut {
		c.released(n)
	}
	c.released(c.p.done())
	c.p.buf, c.W.b = nil, nil
}
