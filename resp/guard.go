package resp

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"time"
)

// The guard sits between a client's socket and redcon's reader. redcon
// trusts the lengths it is sent: a bulk length near 2^63 overflows its
// bounds check and panics, taking the whole process down, and nothing stops
// a client from announcing gigabytes. The guard parses the byte stream as
// Redis's own request parser does and enforces the same limits, so that
// redcon only ever sees well-formed multibulk requests:
//
//   - multibulk counts up to 2^31-1 (10 before AUTH when a password is set),
//   - bulk lengths up to proto-max-bulk-len (16 KiB before AUTH),
//   - count and length lines, and inline requests, up to 64 KiB,
//   - one request's bytes up to client-query-buffer-limit.
//
// Inline requests (telnet, redis-cli's raw mode) are split with Redis's
// quoting rules and handed on as multibulk requests, so quoting behaves
// exactly as in Redis. On a violation, every request before the bad one is
// still served; then the client gets Redis's "Protocol error" reply and
// only its own connection is closed.

// Limits are the protocol limits. They can change at run time (CONFIG SET).
type Limits struct {
	MaxBulkLen    atomic.Int64 // proto-max-bulk-len
	QueryBufLimit atomic.Int64 // client-query-buffer-limit
}

// NewLimits returns Redis's defaults.
func NewLimits() *Limits {
	l := &Limits{}
	l.MaxBulkLen.Store(512 << 20)
	l.QueryBufLimit.Store(1 << 30)
	return l
}

const (
	maxInline        = 64 * 1024 // PROTO_INLINE_MAX_SIZE
	maxMultibulk     = 1<<31 - 1 // INT_MAX
	unauthMultibulk  = 10
	unauthBulk       = 16384
	holdMultibulk    = 1024
	initialInBuf     = 16 * 1024
	errorWriteWindow = time.Second
)

// ProtocolError is a request the guard refused. The connection is closed
// after its reply is sent.
type ProtocolError struct {
	Msg string // the reply, without "-ERR "; empty to close without a reply
}

func (e *ProtocolError) Error() string {
	if e.Msg == "" {
		return "query buffer limit exceeded"
	}
	return e.Msg
}

// ErrShutdown is returned to redcon's reader when the server is draining.
var ErrShutdown = errors.New("server shutting down")

type parseState uint8

const (
	atBoundary parseState = iota
	atArgHeader
	inBody
)

// guard wraps one client connection.
type guard struct {
	net.Conn
	srv *Server

	in               []byte
	ipos, vpos, iend int // in[ipos:vpos] validated, in[vpos:iend] not yet parsed
	conv             []byte
	cpos             int // conv[cpos:] is a converted inline request to deliver first

	state    parseState
	args     int64 // bulk arguments still expected in this request
	body     int64 // bytes still expected in this bulk, with its CRLF
	reqBytes int64 // bytes of the current request so far

	err    *ProtocolError
	hold   bool        // the current request is delivered only when complete
	noAuth atomic.Bool // unauthenticated limits apply
	// inRead is set while the connection waits on its socket; Shutdown wakes
	// only those, so that commands being executed finish and flush first.
	inRead atomic.Bool
}

func newGuard(c net.Conn, srv *Server) *guard {
	return &guard{Conn: c, srv: srv, in: make([]byte, initialInBuf)}
}

// Read hands redcon validated bytes only. It runs on redcon's connection
// goroutine, where nothing recovers a panic: a bug here must cost this
// connection, not the process.
func (g *guard) Read(p []byte) (n int, err error) {
	defer func() {
		if r := recover(); r != nil {
			if g.srv.OnPanic != nil {
				g.srv.OnPanic(r)
			}
			n, err = 0, errGuardPanic
		}
	}()
	return g.read(p)
}

var errGuardPanic = errors.New("internal error in the protocol guard")

func (g *guard) read(p []byte) (int, error) {
	for {
		if g.cpos < len(g.conv) {
			n := copy(p, g.conv[g.cpos:])
			g.cpos += n
			if g.cpos == len(g.conv) {
				g.conv, g.cpos = g.conv[:0], 0
			}
			return n, nil
		}
		if g.ipos < g.vpos && !g.hold {
			n := copy(p, g.in[g.ipos:g.vpos])
			g.ipos += n
			return n, nil
		}
		if g.err != nil {
			return 0, g.fail()
		}
		if g.vpos < g.iend && g.parse() {
			continue
		}
		if g.err != nil {
			continue
		}
		if g.state == inBody && g.vpos == g.iend && g.body > 2 && len(p) > 0 && !g.hold {
			// A large payload goes straight from the socket to redcon; only
			// the CRLF after it passes through the buffer.
			want := min(int64(len(p)), g.body-2)
			n, err := g.readSocket(p[:want])
			g.body -= int64(n)
			g.reqBytes += int64(n)
			if err == nil && g.overLimitFail() {
				return 0, g.fail()
			}
			return n, err
		}
		if err := g.fill(); err != nil {
			return 0, err
		}
	}
}

// parse advances through unparsed bytes and reports whether it made
// progress (validated bytes, converted a request, skipped an empty one).
func (g *guard) parse() bool {
	progressed := false
	for g.vpos < g.iend && g.err == nil {
		var ok bool
		switch g.state {
		case atBoundary:
			ok = g.parseRequestStart()
		case atArgHeader:
			ok = g.parseArgHeader()
		case inBody:
			ok = g.parseBody()
		}
		if !ok {
			break
		}
		progressed = true
	}
	return progressed
}

// line finds the end of a count or length line starting at vpos: the index
// of its '\r' and of the byte after the one that follows (Redis takes any
// byte there as the '\n'). It sets a protocol error if no '\r' comes within
// the inline limit.
func (g *guard) line(tooBig string) (cr, next int, ok bool) {
	buf := g.in[g.vpos:g.iend]
	i := bytes.IndexByte(buf, '\r')
	if i < 0 || i+1 >= len(buf) {
		if len(buf) > maxInline {
			g.err = &ProtocolError{Msg: "Protocol error: " + tooBig}
		}
		return 0, 0, false
	}
	return g.vpos + i, g.vpos + i + 2, true
}

func (g *guard) parseRequestStart() bool {
	if g.in[g.vpos] != '*' {
		return g.parseInline()
	}
	cr, next, ok := g.line("too big mbulk count string")
	if !ok {
		return false
	}
	n, ok := parseLen(g.in[g.vpos+1 : cr])
	switch {
	case !ok || n > maxMultibulk:
		g.err = &ProtocolError{Msg: "Protocol error: invalid multibulk length"}
		return false
	case n <= 0:
		// An empty request: Redis ignores it. Drop its bytes, which means
		// delivering what came before first.
		if g.ipos != g.vpos {
			return false
		}
		g.ipos, g.vpos = next, next
		return true
	case n > unauthMultibulk && g.noAuth.Load():
		g.err = &ProtocolError{Msg: "Protocol error: unauthenticated multibulk length"}
		return false
	case n > holdMultibulk:
		// redcon re-parses an incomplete request from its start on every
		// read and walks its announced argument count each time, so a
		// request announcing millions of arguments and trickling in would
		// cost millions of steps per byte. Such requests are handed over
		// only once complete.
		if g.ipos != g.vpos {
			return false
		}
		g.hold = true
	}
	g.in[cr+1] = '\n'
	g.reqBytes = int64(next - g.vpos)
	g.vpos = next
	g.args = n
	g.state = atArgHeader
	return !g.overLimitFail()
}

func (g *guard) parseArgHeader() bool {
	if c := g.in[g.vpos]; c != '$' {
		g.err = &ProtocolError{Msg: "Protocol error: expected '$', got '" + string(c) + "'"}
		return false
	}
	cr, next, ok := g.line("too big bulk count string")
	if !ok {
		return false
	}
	n, ok := parseLen(g.in[g.vpos+1 : cr])
	if !ok || n < 0 || n > g.srv.Limits.MaxBulkLen.Load() {
		g.err = &ProtocolError{Msg: "Protocol error: invalid bulk length"}
		return false
	}
	if n > unauthBulk && g.noAuth.Load() {
		g.err = &ProtocolError{Msg: "Protocol error: unauthenticated bulk length"}
		return false
	}
	g.in[cr+1] = '\n'
	g.reqBytes += int64(next - g.vpos)
	g.vpos = next
	g.body = n + 2
	g.state = inBody
	return !g.overLimitFail()
}

func (g *guard) parseBody() bool {
	take := min(int64(g.iend-g.vpos), g.body)
	g.fixCRLF(g.vpos, take)
	g.vpos += int(take)
	g.body -= take
	g.reqBytes += take
	if g.body == 0 {
		g.args--
		if g.args == 0 {
			g.state = atBoundary
			g.reqBytes = 0
			g.hold = false
		} else {
			g.state = atArgHeader
		}
	}
	return !g.overLimitFail()
}

// fixCRLF writes CRLF over whichever of a payload's two trailing bytes lie
// in the take bytes at start. Redis skips those two bytes without looking
// at them; redcon insists on CRLF, so both end up agreeing. Counting from
// start, the CR is byte body-2 and the LF byte body-1.
func (g *guard) fixCRLF(start int, take int64) {
	if k := g.body - 2; k >= 0 && k < take {
		g.in[start+int(k)] = '\r'
	}
	if k := g.body - 1; k >= 0 && k < take {
		g.in[start+int(k)] = '\n'
	}
}

// parseInline converts one inline request, if a whole line is there.
func (g *guard) parseInline() bool {
	buf := g.in[g.vpos:g.iend]
	nl := bytes.IndexByte(buf, '\n')
	if nl < 0 {
		if len(buf) > maxInline {
			g.err = &ProtocolError{Msg: "Protocol error: too big inline request"}
		}
		return false
	}
	if g.ipos != g.vpos || g.cpos < len(g.conv) {
		return false // deliver what precedes it first
	}
	line := buf[:nl]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	args, ok := SplitArgs(line)
	if !ok {
		g.err = &ProtocolError{Msg: "Protocol error: unbalanced quotes in request"}
		return false
	}
	if len(args) > 0 {
		g.conv = appendCommand(g.conv[:0], args)
		g.cpos = 0
	}
	g.vpos += nl + 1
	g.ipos = g.vpos
	return true
}

func (g *guard) overLimit() bool {
	return g.reqBytes > g.srv.Limits.QueryBufLimit.Load()
}

func (g *guard) overLimitFail() bool {
	if g.overLimit() {
		g.err = &ProtocolError{}
		return true
	}
	return false
}

// fill reads more bytes from the socket into the buffer.
func (g *guard) fill() error {
	if g.ipos == g.iend {
		g.ipos, g.vpos, g.iend = 0, 0, 0
	}
	if g.iend == len(g.in) {
		if g.ipos > 0 {
			copy(g.in, g.in[g.ipos:g.iend])
			g.vpos -= g.ipos
			g.iend -= g.ipos
			g.ipos = 0
		} else {
			// Room is needed for a line still being looked for (a bit over
			// 64 KiB at most, the limits above cut it off there) or for a
			// held request (up to client-query-buffer-limit).
			nb := make([]byte, 2*len(g.in))
			copy(nb, g.in[:g.iend])
			g.in = nb
		}
	} else if g.iend == 0 && len(g.in) > initialInBuf {
		g.in = make([]byte, initialInBuf) // give back a buffer a long line grew
	}
	n, err := g.readSocket(g.in[g.iend:])
	g.iend += n
	if n > 0 {
		return nil
	}
	return err
}

func (g *guard) readSocket(p []byte) (int, error) {
	if g.srv.draining.Load() {
		return 0, ErrShutdown
	}
	if t := g.srv.idleTimeout.Load(); t > 0 {
		g.Conn.SetReadDeadline(time.Now().Add(time.Duration(t)))
	}
	g.inRead.Store(true)
	if g.srv.draining.Load() {
		g.inRead.Store(false)
		return 0, ErrShutdown
	}
	n, err := g.Conn.Read(p)
	g.inRead.Store(false)
	g.srv.netInput.Add(int64(n))
	if err != nil && g.srv.draining.Load() {
		err = ErrShutdown
	}
	return n, err
}

// fail sends the latched protocol error, if it has a reply, and returns the
// error that makes redcon drop the connection.
func (g *guard) fail() error {
	if g.err.Msg != "" {
		g.Conn.SetWriteDeadline(time.Now().Add(errorWriteWindow))
		g.Write([]byte("-ERR " + g.err.Msg + "\r\n"))
	}
	if g.srv.OnProtocolError != nil {
		g.srv.OnProtocolError(g, g.err)
	}
	return g.err
}

// Write counts output bytes.
func (g *guard) Write(p []byte) (int, error) {
	n, err := g.Conn.Write(p)
	g.srv.netOutput.Add(int64(n))
	return n, err
}

// parseLen parses a count or length as Redis's string2ll does.
func parseLen(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || b[0] < '1' || b[0] > '9' {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil || v > 1<<63 || (!neg && v > 1<<63-1) {
		return 0, false
	}
	if neg {
		return -int64(v), true
	}
	return int64(v), true
}

// appendCommand encodes args as a multibulk request.
func appendCommand(b []byte, args [][]byte) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}

var _ io.Reader = (*guard)(nil)
