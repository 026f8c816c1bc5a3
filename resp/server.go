package resp

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tidwall/redcon"
)

// Handler serves the connections of a Server.
type Handler interface {
	// Open is called for a new connection. A non-empty result refuses it
	// with that error reply.
	Open(c *Conn) (refuse string)
	// Serve executes one request. Replies go to c.W.
	Serve(c *Conn, args [][]byte)
	// Closed is called once the connection is gone.
	Closed(c *Conn)
}

// Conn is one client connection as handlers see it.
type Conn struct {
	W Writer // replies for the current request
	// Ctx is the handler's per-connection state.
	Ctx any

	rc     redcon.Conn
	g      *guard
	srv    *Server
	fd     int
	closed bool // QUIT or a fatal error: drop the rest of the pipeline
}

// FD returns the socket's file descriptor, or -1.
func (c *Conn) FD() int { return c.fd }

// RemoteAddr and LocalAddr name the two ends.
func (c *Conn) RemoteAddr() string { return c.g.RemoteAddr().String() }
func (c *Conn) LocalAddr() string  { return c.g.LocalAddr().String() }

// CloseAfterReply closes the connection once the current reply is sent and
// ignores any requests that follow it in the pipeline (QUIT, RESET errors).
func (c *Conn) CloseAfterReply() { c.closed = true }

// Closing reports whether CloseAfterReply was called.
func (c *Conn) Closing() bool { return c.closed }

// Kill closes the connection from any goroutine (CLIENT KILL, timeouts).
func (c *Conn) Kill() { c.g.Conn.Close() }

// SetAuthenticated switches the unauthenticated request limits off or on.
func (c *Conn) SetAuthenticated(ok bool) { c.g.noAuth.Store(!ok) }

// Server accepts connections on any number of listeners and feeds their
// requests, through the protocol guard and redcon, to a Handler.
type Server struct {
	Handler Handler
	Limits  *Limits
	// OnProtocolError, if set, is told of each refused request.
	OnProtocolError func(c net.Conn, err *ProtocolError)
	// OnPanic, if set, is told of a handler that panicked; the connection
	// that sent the request is closed, the server carries on.
	OnPanic func(recovered any)

	mu       sync.Mutex
	servers  []*redcon.Server
	conns    map[*Conn]struct{}
	wg       sync.WaitGroup
	draining atomic.Bool

	idleTimeout atomic.Int64 // ns; 0 = never
	netInput    atomic.Int64
	netOutput   atomic.Int64
}

// NewServer returns a Server for h with Redis's default limits.
func NewServer(h Handler) *Server {
	return &Server{Handler: h, Limits: NewLimits(), conns: make(map[*Conn]struct{})}
}

// SetIdleTimeout closes connections idle for longer than d (0: never).
func (s *Server) SetIdleTimeout(d time.Duration) { s.idleTimeout.Store(int64(d)) }

// NetBytes returns the bytes read from and written to clients.
func (s *Server) NetBytes() (in, out int64) { return s.netInput.Load(), s.netOutput.Load() }

// Listen opens a TCP listener on addr. Serve must be called to use it.
func (s *Server) Listen(addr string) (net.Listener, error) {
	return net.Listen("tcp", addr)
}

// Serve serves ln until Shutdown. It returns when the listener is closed.
func (s *Server) Serve(ln net.Listener) error {
	rs := redcon.NewServer(ln.Addr().String(), s.serveRequest, s.accept, s.closed)
	s.mu.Lock()
	if s.draining.Load() {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.servers = append(s.servers, rs)
	s.mu.Unlock()
	return rs.Serve(&guardListener{Listener: ln, srv: s})
}

type guardListener struct {
	net.Listener
	srv *Server
}

func (l *guardListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	return newGuard(c, l.srv), nil
}

func (s *Server) accept(rc redcon.Conn) bool {
	g, ok := rc.NetConn().(*guard)
	if !ok {
		return false
	}
	c := &Conn{rc: rc, g: g, srv: s, fd: -1}
	if sc, ok := g.Conn.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			raw.Control(func(fd uintptr) { c.fd = int(fd) })
		}
	}
	c.W.SetProto(2)
	if s.draining.Load() {
		return false
	}
	if msg := s.Handler.Open(c); msg != "" {
		c.W.Error(msg)
		rc.WriteRaw(c.W.Bytes())
		return false
	}
	rc.SetContext(c)
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	return true
}

func (s *Server) closed(rc redcon.Conn, err error) {
	c, ok := rc.Context().(*Conn)
	if !ok {
		return
	}
	s.mu.Lock()
	_, present := s.conns[c]
	delete(s.conns, c)
	s.mu.Unlock()
	if present {
		s.Handler.Closed(c)
		s.wg.Done()
	}
}

func (s *Server) serveRequest(rc redcon.Conn, cmd redcon.Command) {
	c, ok := rc.Context().(*Conn)
	if !ok || c.closed {
		return
	}
	s.call(c, cmd.Args)
	if c.W.Len() > 0 {
		rc.WriteRaw(c.W.Bytes())
		c.W.Reset()
	}
	if c.closed {
		rc.Close()
	}
}

// call runs the handler, turning a panic into an error reply and a closed
// connection instead of a crashed process.
func (s *Server) call(c *Conn, args [][]byte) {
	defer func() {
		if r := recover(); r != nil {
			if s.OnPanic != nil {
				s.OnPanic(r)
			}
			c.W.Error("ERR internal error")
			c.closed = true
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
	conns := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	// Connections waiting for input are woken now; the others will find
	// the server draining when they next read, after flushing their replies.
	for _, c := range conns {
		if c.g.inRead.Load() {
			c.g.Conn.SetReadDeadline(time.Now())
		}
	}
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			s.mu.Lock()
			n := len(s.conns)
			rest := make([]*Conn, 0, n)
			for c := range s.conns {
				rest = append(rest, c)
			}
			s.mu.Unlock()
			if n == 0 {
				close(done)
				return
			}
			for _, c := range rest {
				if c.g.inRead.Load() {
					c.g.Conn.SetReadDeadline(time.Now())
				}
			}
			<-tick.C
		}
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.mu.Lock()
	servers := s.servers
	s.servers = nil
	s.mu.Unlock()
	for _, rs := range servers {
		if cerr := rs.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) && err == nil {
			err = cerr
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
