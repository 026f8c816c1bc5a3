//go:build linux

package resp

import (
	"errors"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// Event loops. A goroutine per connection costs, for every request a
// client sends and waits for, a read that finds nothing, a park and a
// wake-up of the goroutine through Go's network poller, and often a
// futex to wake a thread: about half again Redis's CPU per request. So
// plain TCP connections are served by a few loops instead (loopCount),
// each waiting on an epoll set of its own and serving every
// connection that has input: read, parse, execute, write, as Redis's
// event loop does, with no goroutine switch. What follows the read is the
// serve loop a goroutine runs too (serve.go); the loop brings its own
// reads and writes, which never wait.
//
// A loop must never wait, or every connection on it waits. So a request
// runs on the loop only when the handler says it cannot block (Inline:
// the commands Redis marks fast, when no script is running); any other,
// and a reply that the socket cannot take at once, sends the connection
// to a goroutine of its own, which serves it as before (the blocking
// read, the writer's backpressure, handlers that wait) until it has no
// input left and nothing to send, then gives it back to its loop. TLS
// connections always have their goroutine: crypto/tls reads and writes
// through the blocking net.Conn.
//
// Sockets are read and written with non-blocking system calls through
// the connection's syscall.RawConn, which keeps the descriptor open while
// a call is under way, however another goroutine closes it (CLIENT KILL).
// The epoll set is edge-triggered; a read that fills less than the room
// it was given means the socket was empty then, and new input raises a
// new edge, so a loop never reads only to find nothing.

// loopReadBudget bounds the reads a loop gives one connection before it
// serves the others: a client pipelining without pause cannot hold its
// loop.
const loopReadBudget = 16

// loop is one event loop and the connections it serves.
type loop struct {
	srv  *Server
	epfd int
	// epf is epfd as Go's network poller knows it: the loop waits there
	// for the set to have events, parked like any goroutine waiting for a
	// socket, rather than blocking a thread in epoll_wait.
	epf     *os.File
	erc     syscall.RawConn
	waitFn  func(uintptr) bool // waitOnce, made once
	block   bool
	nEvents int
	wake    [2]int // a pipe whose read end is in the set: Kill and Shutdown write to it
	// siblings are the server's other loops, which this one watches for
	// being left parked with events (nudge).
	siblings []*loop
	// parked: the loop is, or is about to be, parked in the poller;
	// nudged: a sibling has asked for a processor to find it since.
	parked, nudged atomic.Bool
	gone           atomic.Bool // its descriptors are closed

	mu     sync.Mutex
	closed bool // its descriptors are closed: their numbers may be anyone's now
	conns  map[uint64]*Conn
	killed []*Conn // connections closed by other goroutines, to finish

	events []syscall.EpollEvent
	again  []*Conn // connections with input left after their budget
	unsent []*Conn // connections whose replies wait for the end of the turn
	now    int64   // Unix ns at the start of the turn, for lastRead
}

// loops are a server's event loops.
type loops struct {
	all  []*loop
	next atomic.Uint32
}

var errAgain = errors.New("resource temporarily unavailable")

// startLoops starts n event loops. On failure plain connections keep a
// goroutine each.
func (s *Server) startLoops(n int) error {
	ls := &loops{}
	for i := 0; i < n; i++ {
		l, err := newLoop(s)
		if err != nil {
			for _, l := range ls.all {
				l.close()
			}
			return err
		}
		ls.all = append(ls.all, l)
	}
	for _, l := range ls.all {
		for _, o := range ls.all {
			if o != l {
				l.siblings = append(l.siblings, o)
			}
		}
	}
	for _, l := range ls.all {
		go l.run()
	}
	s.loops = ls
	go s.reapIdle()
	return nil
}

func newLoop(s *Server) (*loop, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	l := &loop{srv: s, epfd: epfd, conns: map[uint64]*Conn{}, events: make([]syscall.EpollEvent, 128)}
	if err := syscall.Pipe2(l.wake[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
		syscall.Close(epfd)
		return nil, err
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN}
	setEventID(&ev, 0)
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, l.wake[0], &ev); err != nil {
		l.close()
		return nil, err
	}
	if err := syscall.SetNonblock(epfd, true); err != nil {
		l.close()
		return nil, err
	}
	l.epf = os.NewFile(uintptr(epfd), "epoll")
	rc, err := l.epf.SyscallConn()
	if err != nil {
		l.close()
		return nil, err
	}
	l.erc = rc
	l.waitFn = l.waitOnce
	return l, nil
}

// wait waits for events: at once when some are there, else parked in Go's
// poller until the set is readable.
func (l *loop) wait(block bool) int {
	l.block = block
	l.erc.Read(l.waitFn)
	l.parked.Store(false)
	l.nudged.Store(false)
	return max(l.nEvents, 0)
}

// waitOnce is wait's function for RawConn.Read: it takes the events there
// are; false (none, and the loop would block) parks it until there are.
func (l *loop) waitOnce(fd uintptr) bool {
	var errno syscall.Errno
	l.nEvents, errno = epollPoll(int(fd), l.events)
	if errno == syscall.EINTR {
		return false
	}
	if l.nEvents > 0 || !l.block {
		return true
	}
	l.parked.Store(true)
	return false
}

// A loop parked in the poller is woken only by a thread that polls the
// network: one blocked in netpoll, a processor looking for work, or
// sysmon, every 10 ms at best. A processor that finds a parked loop
// ready by its non-blocking poll runs it itself and wakes no idle one,
// so two loops can end up taking turns on one processor while the
// other idles and no thread waits in netpoll; then, while one of them
// runs a long stretch, the other stays parked with its input waiting
// until sysmon polls. So a loop that has events looks at its parked
// siblings, and when one's set has events too, starts a goroutine:
// that wakes an idle processor, whose scheduler polls the network and
// runs the sibling there. One look is a poll(2) per parked sibling,
// without waiting; the start happens once per park.
func (l *loop) nudge() {
	for _, o := range l.siblings {
		if !o.parked.Load() || o.nudged.Load() || o.gone.Load() || !readable(o.epfd) {
			continue
		}
		if o.nudged.CompareAndSwap(false, true) {
			go func() {}()
		}
	}
}

// readable reports whether fd has input, without waiting and without
// taking it (an epoll set's events stay for its loop).
func readable(fd int) bool {
	pfd := struct {
		fd             int32
		events, revent int16
	}{fd: int32(fd), events: 0x1} // POLLIN
	var ts syscall.Timespec
	n, _, errno := syscall.RawSyscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1,
		uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	return errno == 0 && n > 0 && pfd.revent&0x1 != 0
}

// The loop's system calls never block (the sockets are non-blocking, the
// epoll timeout is 0), so they are made raw, without telling the
// scheduler: syscall.Syscall's entersyscall wakes sysmon whenever it
// sleeps, which with idle processors between requests is on most of
// them, and sysmon then polls every 20µs: a sixth of the server's CPU
// under redis-benchmark.

// epollPoll takes the events there are, without waiting.
func epollPoll(epfd int, events []syscall.EpollEvent) (int, syscall.Errno) {
	n, _, errno := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(epfd),
		uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), 0
}

// close closes the loop's descriptors, once. The epoll descriptor is
// closed through epf when there is one, which owns it: closing the number
// directly as well would close whatever file reuses it next, in this
// process (a client's socket, another server's loop).
func (l *loop) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	l.gone.Store(true)
	if l.epf != nil {
		l.epf.Close()
	} else {
		syscall.Close(l.epfd)
	}
	syscall.Close(l.wake[0])
	syscall.Close(l.wake[1])
}

// The event's data is the connection's id (0: the wake pipe).
func setEventID(ev *syscall.EpollEvent, id uint64) {
	ev.Fd = int32(uint32(id))
	ev.Pad = int32(uint32(id >> 32))
}

func eventID(ev *syscall.EpollEvent) uint64 {
	return uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
}

// pick returns the loop for a new connection.
func (ls *loops) pick() *loop {
	return ls.all[int(ls.next.Add(1))%len(ls.all)]
}

// attach hands a connection to the loop, or reports false when it cannot
// (its goroutine goes on serving it).
func (l *loop) attach(c *Conn) bool {
	if c.fd < 0 || c.tls != nil || c.rc == nil {
		return false
	}
	if c.sock == nil {
		c.sock = newRawSock(c.rc)
	}
	c.lp = l
	c.lastRead.Store(time.Now().UnixNano())
	// Under the lock: a loop that ended (its server shut down) must not
	// be given a connection, nor its closed descriptor used.
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.conns[c.id] = c
	c.onLoop.Store(true)
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | epollET}
	setEventID(&ev, c.id)
	var err error
	ctl := c.rc.Control(func(fd uintptr) {
		err = syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, int(fd), &ev)
	})
	if ctl != nil || err != nil {
		c.onLoop.Store(false)
		delete(l.conns, c.id)
		return false
	}
	return true
}

// detach takes a connection out of the epoll set (it keeps its loop, to
// come back to).
func (l *loop) detach(c *Conn) {
	c.onLoop.Store(false)
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.conns, c.id)
	if l.closed {
		return
	}
	c.rc.Control(func(fd uintptr) {
		syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_DEL, int(fd), nil)
	})
}

// kick wakes the loop to notice that c was closed by another goroutine.
func (l *loop) kick(c *Conn) {
	l.mu.Lock()
	if _, ok := l.conns[c.id]; ok {
		l.killed = append(l.killed, c)
	}
	l.mu.Unlock()
	l.poke()
}

func (l *loop) poke() {
	l.mu.Lock()
	if !l.closed {
		syscall.Write(l.wake[1], []byte{1})
	}
	l.mu.Unlock()
}

func (l *loop) run() {
	var buf [64]byte
	var ready []*Conn
	for {
		// Connections with input left: look for others, then serve them.
		n := l.wait(len(l.again) == 0)
		if n > 0 {
			l.nudge()
		}
		ready = ready[:0]
		woken := false
		l.mu.Lock()
		for i := 0; i < n; i++ {
			id := eventID(&l.events[i])
			if id == 0 {
				woken = true
				continue
			}
			if c := l.conns[id]; c != nil {
				ready = append(ready, c)
			}
		}
		killed := l.killed
		l.killed = nil
		l.mu.Unlock()
		if woken {
			for {
				if k, _ := syscall.Read(l.wake[0], buf[:]); k <= 0 {
					break
				}
			}
		}
		ready = append(ready, l.again...)
		clear(l.again)
		l.again = l.again[:0]
		l.now = time.Now().UnixNano()
		for _, c := range ready {
			l.serve(c)
		}
		l.sendAll()
		for _, c := range killed {
			l.drop(c)
		}
		if woken && l.srv.draining.Load() {
			l.drainAll()
			if l.empty() {
				l.close() // the server is done: so is the loop
				return
			}
		}
	}
}

// drainAll closes the connections of a server that is shutting down: the
// loop's connections are waiting for input, their replies all sent.
func (l *loop) drainAll() {
	l.mu.Lock()
	conns := make([]*Conn, 0, len(l.conns))
	for _, c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		l.drop(c)
	}
}

func (l *loop) empty() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns) == 0
}

// drop ends a connection the loop serves.
func (l *loop) drop(c *Conn) {
	c.unsent = false
	l.mu.Lock()
	_, ok := l.conns[c.id]
	delete(l.conns, c.id)
	l.mu.Unlock()
	if ok {
		l.srv.finish(c)
	}
}

// serve reads and serves a connection until its socket is drained, its
// read budget is spent, or it leaves the loop.
func (l *loop) serve(c *Conn) {
	defer func() {
		if r := recover(); r != nil {
			if l.srv.OnPanic != nil {
				l.srv.OnPanic(r)
			}
			c.Kill()
			l.drop(c)
		}
	}()
	s := l.srv
	for reads := 0; ; reads++ {
		if c.killed.Load() || s.draining.Load() {
			l.drop(c)
			return
		}
		if reads == loopReadBudget {
			l.again = append(l.again, c)
			return
		}
		n, room, err := c.p.readRaw(c)
		if errors.Is(err, errAgain) {
			return
		}
		if n == 0 {
			l.drop(c) // end of input, or an error
			return
		}
		c.netIn.Add(int64(n))
		c.lastRead.Store(l.now)
		switch st, args, perr := c.serveInput(l); st {
		case stepGone:
			return // it left the loop, or ended
		case stepRefused, stepProtocol, stepQuit:
			// A request that may wait, an error to deliver, or QUIT's
			// queued output: the connection's goroutine does what a loop
			// may not.
			l.goroutine(c, args, perr)
			return
		}
		if n < room {
			return // drained: new input raises a new edge
		}
	}
}

// admits reports whether a request can run on the loop: only one the
// handler says never waits.
func (l *loop) admits(c *Conn, args [][]byte) bool { return l.srv.inliner.Inline(c, args) }

// flush holds the replies until the loop has served every connection with
// input in this turn, unless they are big enough to send now. Redis's
// loop sends in beforeSleep for the same reason: a client that gets the
// replies of all its connections together answers with all their next
// requests together, so the next turn finds them all, where replies sent
// one connection at a time are answered one at a time, and every answer
// costs the loop a poll, often a park, and the client a wake-up.
func (l *loop) flush(c *Conn) bool {
	if n := c.W.Len(); n == 0 || n >= flushAt {
		return l.flushNow(c)
	}
	if !c.unsent {
		c.unsent = true
		l.unsent = append(l.unsent, c)
	}
	return !c.killed.Load()
}

// sendAll sends the replies held in the turn.
func (l *loop) sendAll() {
	for i, c := range l.unsent {
		l.unsent[i] = nil
		if !c.unsent {
			continue // sent already, or handed to its goroutine, or dropped
		}
		if c.killed.Load() {
			l.drop(c)
			continue
		}
		l.flushNow(c)
	}
	l.unsent = l.unsent[:0]
}

// flushNow sends the replies without waiting (the loop as a runner); when
// the socket cannot take them all, or output goes through the push queue,
// the connection's goroutine takes over (what is left is still in W). It
// reports whether the connection stays on the loop.
func (l *loop) flushNow(c *Conn) bool {
	c.unsent = false
	b := c.W.Bytes()
	if len(b) == 0 {
		return !c.killed.Load()
	}
	if c.queued.Load() || c.limited() {
		l.goroutine(c, nil, nil)
		return false
	}
	c.outBuf.Store(int64(len(b)))
	if !c.addPending(int64(len(b))) {
		c.outBuf.Store(0)
		l.drop(c)
		return false
	}
	sent := 0
	for sent < len(b) {
		n, err := c.writeRaw(b[sent:])
		if n > 0 {
			sent += n
			c.netOut.Add(int64(n))
		}
		if errors.Is(err, errAgain) {
			break
		}
		if err != nil {
			c.subPending(int64(len(b)))
			c.outBuf.Store(0)
			c.Kill()
			l.drop(c)
			return false
		}
	}
	c.subPending(int64(len(b)))
	c.outBuf.Store(0)
	if sent < len(b) {
		// The client reads slowly: its goroutine sends the rest, waiting,
		// and stops reading it meanwhile.
		c.W.b = append(c.W.b[:0], b[sent:]...)
		l.goroutine(c, nil, nil)
		return false
	}
	c.resetW()
	return true
}

// goroutine hands the connection to a goroutine of its own, which serves
// args first (a request that may block), or answers a protocol error,
// then serves it as a goroutine-per-connection server does until it has
// no input left, and gives it back to the loop.
func (l *loop) goroutine(c *Conn, args [][]byte, perr *ProtocolError) {
	c.unsent = false // its goroutine sends them first
	l.detach(c)
	go c.serveDetached(args, perr)
}

// serveDetached runs on the connection's own goroutine; see loop.goroutine.
func (c *Conn) serveDetached(args [][]byte, perr *ProtocolError) {
	s := c.srv
	defer func() {
		if r := recover(); r != nil {
			if s.OnPanic != nil {
				s.OnPanic(r)
			}
			s.finish(c)
		}
	}()
	if perr != nil {
		c.protocolError(perr)
		s.finish(c)
		return
	}
	// Replies the loop could not send go first, before more are made.
	if c.W.Len() > 0 && !c.flush() {
		s.finish(c)
		return
	}
	if args != nil {
		c.run(args)
	}
	if !c.serveOwn(c.lp) {
		s.finish(c)
	}
}

// readRaw reads once, without waiting, into the parser's buffer or the big
// argument being filled; it returns the bytes read and the room there was.
func (p *parser) readRaw(c *Conn) (n, room int, err error) {
	if dst := p.bigDst(); dst != nil {
		room = len(dst)
	} else {
		p.makeRoom()
		room = len(p.buf) - p.end
	}
	n, err = p.readFrom(c.sock)
	return n, room, err
}

// rawSock reads and writes a connection's socket without waiting
// (errAgain when it cannot). Its functions are made once per connection,
// so that a call allocates nothing.
type rawSock struct {
	rc          syscall.RawConn
	b           []byte
	n           int
	err         error
	read, write func(fd uintptr) bool
}

func newRawSock(rc syscall.RawConn) *rawSock {
	s := &rawSock{rc: rc}
	s.read = func(fd uintptr) bool {
		s.n, s.err = readFD(fd, s.b)
		return true
	}
	s.write = func(fd uintptr) bool {
		s.n, s.err = writeFD(fd, s.b)
		return true
	}
	return s
}

func (s *rawSock) Read(b []byte) (int, error) {
	return s.do(s.rc.Read, s.read, b)
}

func (s *rawSock) Write(b []byte) (int, error) {
	return s.do(s.rc.Write, s.write, b)
}

func (s *rawSock) do(call func(func(uintptr) bool) error, fn func(uintptr) bool, b []byte) (int, error) {
	s.b = b
	cerr := call(fn)
	s.b = nil
	if cerr != nil {
		return 0, cerr
	}
	n, err := max(s.n, 0), s.err
	s.err = nil
	if err == syscall.EAGAIN || err == syscall.EINTR {
		return n, errAgain
	}
	return n, err
}

// writeRaw writes once without waiting.
func (c *Conn) writeRaw(b []byte) (int, error) { return c.sock.Write(b) }

// reapIdle closes the connections on loops idle longer than the timeout,
// as their goroutine's read deadline does for the others.
func (s *Server) reapIdle() {
	for {
		d := time.Duration(s.idleTimeout.Load())
		wait := time.Second
		if d > 0 && d/4 < wait {
			wait = max(d/4, 10*time.Millisecond)
		}
		time.Sleep(wait)
		if s.draining.Load() {
			return
		}
		if d <= 0 {
			continue
		}
		limit := time.Now().Add(-d).UnixNano()
		s.mu.Lock()
		for c := range s.conns {
			if c.onLoop.Load() && c.lastRead.Load() < limit {
				c.Kill()
			}
		}
		s.mu.Unlock()
	}
}

// loopCount is the number of event loops when the configuration leaves it
// to the server: one per two processors, at least one. A loop keeps its
// processor busy under load; the other half is for what a loop leaves to
// others: the kernel's network stack, the snapshot worker, the garbage
// collector, connections that wait on their own goroutine, and, on a
// small machine, the clients. Loops that outnumber the processors left
// free take turns with everything else and wait for the scheduler: on 2
// cores, a loop per core with redis-benchmark beside them answered its
// slowest 1% in 15-18 ms where one loop answers in 2-3.5
// (bench-results/tail.md).
func loopCount() int { return max(1, runtime.GOMAXPROCS(0)/2) }

// epollET is EPOLLET as the event mask's type takes it (the syscall
// package's constant is negative).
const epollET = 1 << 31
