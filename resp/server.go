package resp

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Handler serves the connections of a Server.
type Handler interface {
	// Open is called for a new connection, on its own goroutine. A
	// non-empty result refuses it with that error reply.
	Open(c *Conn) (refuse string)
	// Serve executes one request. Replies go to c.W. args and their bytes
	// are valid until Serve returns; see Conn.KeepArgs and Conn.Adopt.
	Serve(c *Conn, args [][]byte)
	// Closed is called once the connection is gone.
	Closed(c *Conn)
}

// Inliner is a Handler whose requests may run on an event loop: Inline
// reports whether a request can run without ever waiting (for a lock held
// long, another goroutine, a timer, the disk or the network). A request
// it refuses, and every request of a Handler without Inline, runs on the
// connection's own goroutine.
type Inliner interface {
	Inline(c *Conn, args [][]byte) bool
}

// Server accepts connections on any number of listeners and serves each
// on a goroutine of its own: one parser reads its requests (see parser.go),
// the Handler executes them, and their replies leave in one write per read
// (see Conn). It works over any net.Conn.
type Server struct {
	Handler Handler
	Limits  *Limits
	// OnProtocolError, if set, is told of each refused request (the query
	// buffer limit included).
	OnProtocolError func(c *Conn, err *ProtocolError)
	// OnOutputLimit, if set, is told of a connection about to be closed for
	// passing its client-output-buffer-limit.
	OnOutputLimit func(c *Conn)
	// OnPanic, if set, is told of a handler that panicked; the connection
	// that sent the request is closed, the server carries on.
	OnPanic func(recovered any)
	// BeforeBigArg, if set, is called on a connection's goroutine before
	// an argument of n bytes (BigArg or more) is allocated, so that memory
	// let go of may be collected first and reused.
	BeforeBigArg func(n int)
	// HandshakeTimeout bounds a TLS handshake (0: DefaultHandshakeTimeout).
	HandshakeTimeout time.Duration

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*Conn]struct{}
	draining  atomic.Bool

	idleTimeout atomic.Int64 // ns; 0 = never
	// Bytes of closed connections, and big buffers let go of.
	closedIn, closedOut atomic.Int64
	released            atomic.Int64

	// loops serve plain connections when EnableLoops started them.
	loops   *loops
	inliner Inliner
	connIDs atomic.Uint64
}

// NewServer returns a Server for h with Redis's default limits.
func NewServer(h Handler) *Server {
	return &Server{Handler: h, Limits: NewLimits(), conns: make(map[*Conn]struct{}), listeners: make(map[net.Listener]struct{})}
}

// EnableLoops serves plain TCP connections on n event loops (one per two
// processors when n is 0) instead of a goroutine each, where the platform
// allows and the Handler implements Inliner (see loop_linux.go). Call it
// before serving.
func (s *Server) EnableLoops(n int) error {
	in, ok := s.Handler.(Inliner)
	if !ok {
		return errors.New("resp: the handler cannot say which requests may run on a loop")
	}
	if n <= 0 {
		n = loopCount()
	}
	s.inliner = in
	return s.startLoops(n)
}

// SetIdleTimeout closes connections idle for longer than d (0: never).
func (s *Server) SetIdleTimeout(d time.Duration) { s.idleTimeout.Store(int64(d)) }

// NetBytes returns the bytes read from and written to clients.
func (s *Server) NetBytes() (in, out int64) {
	in, out = s.closedIn.Load(), s.closedOut.Load()
	s.mu.Lock()
	for c := range s.conns {
		in += c.netIn.Load()
		out += c.netOut.Load()
	}
	s.mu.Unlock()
	return in, out
}

// ReleasedBytes counts the bytes of big buffers (big arguments nobody
// kept, read and reply buffers that grew) that connections have let go of
// since the start: memory the process may hand back to the system.
func (s *Server) ReleasedBytes() int64 { return s.released.Load() }

// ClientMemory returns the memory of the connections' buffers (tot-mem),
// for replicas and for every other connection (INFO's mem_clients_slaves
// and mem_clients_normal).
func (s *Server) ClientMemory() (replicas, normal int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.Class() == ClassReplica {
			replicas += c.Stats().TotalMem
		} else {
			normal += c.Stats().TotalMem
		}
	}
	return replicas, normal
}

// Listen opens a TCP listener on addr. Serve must be called to use it.
func (s *Server) Listen(addr string) (net.Listener, error) {
	return net.Listen("tcp", addr)
}

// Serve serves ln until Shutdown. It returns when the listener is closed.
func (s *Server) Serve(ln net.Listener) error { return s.serve(ln, nil) }

// ServeTLS serves ln as Serve does, with TLS: each connection takes the
// configuration config returns as it starts (nil: it is closed), so a
// new configuration applies to new connections while the others keep
// theirs. See Conn.Handshake.
func (s *Server) ServeTLS(ln net.Listener, config func() *tls.Config) error {
	if config == nil {
		return errors.New("resp: ServeTLS without a configuration")
	}
	return s.serve(ln, config)
}

func (s *Server) serve(ln net.Listener, tlsConfig func() *tls.Config) error {
	s.mu.Lock()
	if s.draining.Load() {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.draining.Load() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				// Out of file descriptors and the like: wait, as net/http does.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		go s.serveConn(nc, tlsConfig)
	}
}

func isTemporary(err error) bool {
	t, ok := err.(interface{ Temporary() bool })
	return ok && t.Temporary()
}

// serveConn runs one connection. A panic anywhere in it, the parser's
// included, costs this connection only.
func (s *Server) serveConn(nc net.Conn, tlsConfig func() *tls.Config) {
	if s.draining.Load() {
		nc.Close()
		return
	}
	var cfg *tls.Config
	if tlsConfig != nil {
		if cfg = tlsConfig(); cfg == nil {
			nc.Close()
			return
		}
	}
	c := newConn(nc, cfg, s)
	opened, looped := false, false
	defer func() {
		if r := recover(); r != nil && s.OnPanic != nil {
			s.OnPanic(r)
		}
		if looped {
			return // the loop, or the goroutine it hands the connection to, finishes it
		}
		if opened {
			s.finish(c)
		} else {
			c.close()
		}
	}()
	if msg := s.Handler.Open(c); msg != "" {
		if !c.handshaken() {
			// A TLS client refused before its handshake (max clients)
			// can be sent nothing: it is dropped, as in Redis.
			return
		}
		c.W.Error(msg)
		c.nc.SetWriteDeadline(time.Now().Add(errorWriteWindow))
		if c.flush() {
			c.drainQueue() // a class with limits sends through the queue
		}
		return
	}
	if c.Handshake() != nil { // the handler did not ask for it: done here
		s.Handler.Closed(c)
		return
	}
	s.mu.Lock()
	if s.draining.Load() {
		s.mu.Unlock()
		s.Handler.Closed(c)
		return
	}
	s.conns[c] = struct{}{}
	opened = true
	s.mu.Unlock()
	if s.loops != nil && s.loops.pick().attach(c) {
		looped = true
		return
	}
	c.serveOwn(nil)
	if !c.killed.Load() {
		c.drainQueue()
	}
}

// finish releases a connection that was open and tells the handler it is
// gone.
func (s *Server) finish(c *Conn) {
	c.close()
	s.mu.Lock()
	delete(s.conns, c)
	s.closedIn.Add(c.netIn.Load())
	s.closedOut.Add(c.netOut.Load())
	s.mu.Unlock()
	s.Handler.Closed(c)
}

// call runs the handler, turning a panic into an error reply and a closed
// connection instead of a crashed process.
func (s *Server) call(c *Conn, args [][]byte) {
	defer func() {
		if r := recover(); r != nil {
			if s.OnPanic != nil {
				s.OnPanic(r)
			}
			c.W.Error("internal error")
			c.closing = true
		}
	}()
	s.Handler.Serve(c, args)
}

// Shutdown stops accepting connections, lets every connection finish the
// requests it is executing and flush their replies, closes them and waits
// for them to go, or for ctx to end.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	s.mu.Lock()
	var err error
	for ln := range s.listeners {
		if cerr := ln.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) && err == nil {
			err = cerr
		}
	}
	s.mu.Unlock()
	// Connections waiting for input are woken now; the others will find
	// the server draining when they next read, after flushing their replies.
	if s.loops != nil {
		for _, l := range s.loops.all {
			l.poke()
		}
	}
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			s.mu.Lock()
			n := len(s.conns)
			for c := range s.conns {
				c.signalDone() // a handler waiting (BLPOP) stops waiting
				if c.inRead.Load() {
					c.nc.SetReadDeadline(time.Now())
				}
			}
			s.mu.Unlock()
			if n == 0 {
				close(done)
				return
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	select {
	case <-done:
	case <-ctx.Done():
		if err == nil {
			err = ctx.Err()
		}
	}
	return err
}

// Conns returns the open connections.
func (s *Server) Conns() []*Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	return out
}
