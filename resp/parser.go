package resp

import (
	"bytes"
	"io"
	"strconv"
)

// The request parser reads a client's byte stream as Redis's own parser
// (processMultibulkBuffer, processInlineBuffer) does, once, and enforces
// the same limits as it goes:
//
//   - multibulk counts up to 2^31-1 (10 before AUTH when a password is set),
//   - bulk lengths up to proto-max-bulk-len (16 KiB before AUTH),
//   - count and length lines, and inline requests, up to 64 KiB,
//   - one request's bytes up to client-query-buffer-limit.
//
// A request's arguments point into the connection's read buffer, and the
// slice that holds them is reused: serving a request allocates nothing. They
// are valid until the handler returns. A bulk argument of BigArg bytes or
// more is read from the socket straight into an allocation of its own,
// which the connection forgets once the request is served: a handler may
// keep it (see Conn.Adopt and Conn.KeepArgs).
//
// Inline requests (telnet, redis-cli's raw mode) are split in place with
// Redis's quoting rules. On a violation, every request before the bad one
// is served; then the client gets Redis's "Protocol error" reply and only
// its own connection is closed.

const (
	initialReadBuf = 16 * 1024
	// bigHeadroomMax bounds the spare bytes put in front of a big argument,
	// where a store can write a record header without copying the argument
	// (engine: a string value adopts the argument's memory).
	bigHeadroomMax = 512
	// keepArgs bounds the argument slices a connection keeps between
	// requests; a request with more arguments gets its own.
	keepArgs = 1024
)

// span locates one argument of the request being parsed: an offset from
// the start of the request in the read buffer, or (big >= 0) one of the
// request's big arguments.
type span struct {
	off, n int
	big    int
}

// bigArg is a big argument's allocation: the argument is b[head:head+n],
// followed by the two bytes that end it on the wire.
type bigArg struct {
	b       []byte
	head, n int
}

type parser struct {
	limits    *Limits
	noAuth    bool
	beforeBig func(n int) // see Server.BeforeBigArg

	buf  []byte
	pos  int // start of the current request: buf[:pos] is consumed
	scan int // parse position
	end  int // buf[scan:end] is read and not parsed yet
	// mark is where the unserved input began when the last read added to
	// it: buf[mark:end] is what Redis's query buffer holds while the
	// requests of that read are served, those served already included.
	mark int

	inMulti  bool
	want     int64 // bulk arguments still expected
	bulk     int64 // length of the bulk being read, -1 before its header
	reqBytes int64 // bytes of the current request so far
	spans    []span
	bigs     []bigArg
	fill     int // bytes of bigs[len(bigs)-1] read so far, while one is filling
	filling  bool

	argv [][]byte
}

func newParser(l *Limits) *parser {
	return &parser{limits: l, buf: make([]byte, initialReadBuf), bulk: -1}
}

// next returns the next complete request, or nil when more input is
// needed. After a request is served, done must be called before next.
func (p *parser) next() ([][]byte, *ProtocolError) {
	for {
		if !p.inMulti {
			if p.scan == p.end {
				return nil, nil
			}
			if p.buf[p.scan] != '*' {
				args, progressed, err := p.inline()
				if err != nil || args != nil || !progressed {
					return args, err
				}
				continue // an empty line
			}
			cr, next, ok, err := p.line("too big mbulk count string")
			if !ok {
				return nil, err
			}
			n, ok := parseLen(p.buf[p.scan+1 : cr])
			switch {
			case !ok || n > maxMultibulk:
				return nil, p.fail("Protocol error: invalid multibulk length")
			case n <= 0: // an empty request: Redis ignores it
				p.scan, p.pos = next, next
				continue
			case n > unauthMultibulk && p.noAuth:
				return nil, p.fail("Protocol error: unauthenticated multibulk length")
			}
			p.inMulti, p.want, p.bulk = true, n, -1
			p.reqBytes = int64(next - p.scan)
			p.scan = next
			if err := p.checkQueryLimit(); err != nil {
				return nil, err
			}
		}
		for p.want > 0 {
			if p.filling {
				complete := p.fillBig()
				if err := p.checkQueryLimit(); err != nil {
					return nil, err
				}
				if !complete {
					return nil, nil
				}
				continue
			}
			if p.bulk < 0 {
				if p.scan == p.end {
					return nil, nil
				}
				cr, next, ok, err := p.line("too big bulk count string")
				if !ok {
					return nil, err
				}
				if c := p.buf[p.scan]; c != '$' {
					return nil, p.fail("Protocol error: expected '$', got '" + string([]byte{c}) + "'")
				}
				n, ok := parseLen(p.buf[p.scan+1 : cr])
				if !ok || n < 0 || n > p.limits.MaxBulkLen.Load() {
					return nil, p.fail("Protocol error: invalid bulk length")
				}
				if n > unauthBulk && p.noAuth {
					return nil, p.fail("Protocol error: unauthenticated bulk length")
				}
				p.reqBytes += int64(next - p.scan)
				p.scan = next
				p.bulk = n
				if err := p.checkQueryLimit(); err != nil {
					return nil, err
				}
				if n >= BigArg {
					p.startBig(int(n))
					continue // the filling branch above takes over
				}
			}
			// A small bulk and the two bytes after it, whatever they are:
			// Redis skips them without looking.
			need := int(p.bulk) + 2
			if p.end-p.scan < need {
				return nil, nil
			}
			p.spans = append(p.spans, span{off: p.scan - p.pos, n: int(p.bulk), big: -1})
			p.scan += need
			p.reqBytes += int64(need)
			p.want--
			p.bulk = -1
			if err := p.checkQueryLimit(); err != nil {
				return nil, err
			}
		}
		return p.request(), nil
	}
}

// startBig allocates a big argument of n bytes; fillBig then takes what
// the read buffer already holds of it.
func (p *parser) startBig(n int) {
	head := 32
	for _, s := range p.spans {
		if s.big < 0 {
			head += s.n
		}
	}
	head = min(head, bigHeadroomMax)
	if p.beforeBig != nil {
		p.beforeBig(n)
	}
	p.bigs = append(p.bigs, bigArg{b: make([]byte, head+n+2), head: head, n: n})
	p.fill = 0
	p.filling = true
}

// fillBig moves buffered bytes into the big argument being read and
// reports whether it is complete.
func (p *parser) fillBig() bool {
	b := &p.bigs[len(p.bigs)-1]
	dst := b.b[b.head+p.fill:]
	k := copy(dst, p.buf[p.scan:p.end])
	p.scan += k
	p.fill += k
	p.reqBytes += int64(k)
	if p.fill < b.n+2 {
		return false
	}
	p.spans = append(p.spans, span{n: b.n, big: len(p.bigs) - 1})
	p.filling = false
	p.want--
	p.bulk = -1
	return true
}

// bigDst returns where the next socket read should go when a big argument
// is being filled and the buffer holds nothing more of it.
func (p *parser) bigDst() []byte {
	if !p.filling || p.scan != p.end {
		return nil
	}
	b := &p.bigs[len(p.bigs)-1]
	return b.b[b.head+p.fill:]
}

// request builds the argument slice of the request just completed.
func (p *parser) request() [][]byte {
	argv := p.argv[:0]
	for _, s := range p.spans {
		if s.big >= 0 {
			b := p.bigs[s.big]
			argv = append(argv, b.b[b.head:b.head+b.n:b.head+b.n])
			continue
		}
		a := p.pos + s.off
		argv = append(argv, p.buf[a:a+s.n:a+s.n])
	}
	p.argv = argv
	p.inMulti = false
	return argv
}

// done drops the request just served: its bytes become free space and its
// big arguments belong to whoever kept them. It returns the bytes of the
// big arguments nobody adopted, which are garbage now.
func (p *parser) done() (dropped int) {
	for _, b := range p.bigs {
		dropped += len(b.b)
	}
	p.pos = p.scan
	p.reqBytes = 0
	clear(p.argv)
	p.argv = p.argv[:0]
	p.spans = p.spans[:0]
	clear(p.bigs)
	p.bigs = p.bigs[:0]
	if cap(p.argv) > keepArgs {
		p.argv = nil
	}
	if cap(p.spans) > keepArgs {
		p.spans = nil
	}
	return dropped
}

// inline splits one inline request in place, if a whole line is there.
// progressed is set when an empty line was skipped.
func (p *parser) inline() (args [][]byte, progressed bool, err *ProtocolError) {
	buf := p.buf[p.scan:p.end]
	nl := bytes.IndexByte(buf, '\n')
	if nl < 0 {
		if len(buf) > maxInline {
			return nil, false, p.fail("Protocol error: too big inline request")
		}
		return nil, false, nil
	}
	line := buf[:nl]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	argv, ok := splitArgsInPlace(line, p.argv[:0], false)
	p.argv = argv
	if !ok {
		return nil, false, p.fail("Protocol error: unbalanced quotes in request")
	}
	p.scan += nl + 1
	if len(argv) == 0 {
		p.pos = p.scan
		return nil, true, nil
	}
	return argv, true, nil
}

// line finds the end of a count or length line starting at scan: the index
// of its '\r' and of the byte after the one that follows (Redis takes any
// byte there as the '\n'). With no '\r' within the inline limit it fails
// with "Protocol error: " + tooBig.
func (p *parser) line(tooBig string) (cr, next int, ok bool, err *ProtocolError) {
	buf := p.buf[p.scan:p.end]
	i := bytes.IndexByte(buf, '\r')
	if i < 0 || i+1 >= len(buf) {
		if len(buf) > maxInline {
			return 0, 0, false, p.fail("Protocol error: " + tooBig)
		}
		return 0, 0, false, nil
	}
	return p.scan + i, p.scan + i + 2, true, nil
}

func (p *parser) checkQueryLimit() *ProtocolError {
	if p.reqBytes <= p.limits.QueryBufLimit.Load() {
		return nil
	}
	head := p.buf[p.pos:min(p.end, p.pos+64)]
	if p.filling || len(p.bigs) > 0 {
		b := p.bigs[len(p.bigs)-1]
		head = b.b[b.head : b.head+min(64, b.n)]
	}
	return &ProtocolError{Head: string(head)}
}

func (p *parser) fail(msg string) *ProtocolError {
	return &ProtocolError{Msg: msg}
}

// readFrom reads more input from r: into the big argument being filled
// when the buffer holds nothing more of it, else into the read buffer,
// which is compacted or grown as needed.
func (p *parser) readFrom(r io.Reader) (int, error) {
	if dst := p.bigDst(); dst != nil {
		n, err := r.Read(dst)
		p.fill += n
		p.reqBytes += int64(n)
		return n, err
	}
	p.makeRoom()
	p.mark = p.pos
	n, err := r.Read(p.buf[p.end:])
	p.end += n
	return n, err
}

// makeRoom makes room at the end of the read buffer: it starts again at
// the beginning when everything read was served, and compacts or grows it
// when it is full.
func (p *parser) makeRoom() {
	if p.pos == p.end && !p.inMulti {
		p.pos, p.scan, p.end = 0, 0, 0
		if len(p.buf) > initialReadBuf {
			p.buf = make([]byte, initialReadBuf) // give back what a big request grew
		}
	}
	if p.end == len(p.buf) {
		if p.pos > 0 {
			copy(p.buf, p.buf[p.pos:p.end])
			p.scan -= p.pos
			p.end -= p.pos
			p.pos = 0
		} else {
			// The request so far fills the buffer. Its size is bounded by
			// the line limits and client-query-buffer-limit.
			nb := make([]byte, 2*len(p.buf))
			copy(nb, p.buf[:p.end])
			p.buf = nb
		}
	}
}

// buffered returns the bytes read and not yet served (Redis's qbuf), the
// free room after them (qbuf-free) and the memory of the current request's
// big arguments (argv-mem).
func (p *parser) buffered() (qbuf, free, argv int) {
	for _, b := range p.bigs {
		argv += len(b.b)
	}
	return p.end - p.pos, len(p.buf) - p.end, argv
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
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (1<<64-1-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	if v > 1<<63 || (!neg && v > 1<<63-1) {
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
