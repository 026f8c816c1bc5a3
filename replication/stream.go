package replication

import (
	"errors"
	"fmt"
	"io"
	"strconv"
)

// The stream is RESP: each entry an array of bulk strings, as Redis's own
// replication stream. What a replica applies:
//
//	SELECT db                     the database of the entries that follow
//	LKV.SET key value             store the value codec's bytes at key
//	LKV.DEL key [key ...]         delete keys, expired or not
//	MULTI ... EXEC                apply the entries between as one
//	PING                          the master's heartbeat
//	REPLCONF GETACK *             answer with REPLCONF ACK now
//	anything else                 a command run as it is (FLUSHDB, SWAPDB,
//	                              PUBLISH, ...): one that gives the same
//	                              result wherever it runs
//
// A full sync sends, after +FULLRESYNC, "LKV.SYNC BEGIN", the function
// libraries (FUNCTION RESTORE payload FLUSH), the rate-limit policies
// ("LKV.POLICIES payload", when there are any), the keyspace as SELECT
// and LKV.SET entries, and "LKV.SYNC END"; those bytes do not count in
// the offsets. The stream proper follows.

// appendArrayHeader appends a RESP array header.
func appendArrayHeader(dst []byte, n int) []byte {
	dst = append(dst, '*')
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, '\r', '\n')
}

// appendBulk appends a RESP bulk string.
func appendBulk(dst, b []byte) []byte {
	dst = appendBulkHeader(dst, len(b))
	dst = append(dst, b...)
	return append(dst, '\r', '\n')
}

func appendBulkHeader(dst []byte, n int) []byte {
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, '\r', '\n')
}

func appendBulkString(dst []byte, s string) []byte {
	dst = appendBulkHeader(dst, len(s))
	dst = append(dst, s...)
	return append(dst, '\r', '\n')
}

func appendSelect(dst []byte, db int) []byte {
	var n [20]byte
	dst = append(dst, "*2\r\n$6\r\nSELECT\r\n"...)
	return appendBulk(dst, strconv.AppendInt(n[:0], int64(db), 10))
}

var (
	entryMulti = []byte("*1\r\n$5\r\nMULTI\r\n")
	entryExec  = []byte("*1\r\n$4\r\nEXEC\r\n")
	entryPing  = []byte("*1\r\n$4\r\nPING\r\n")
	entryAck   = []byte("*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n")
	syncBegin  = []byte("*2\r\n$8\r\nLKV.SYNC\r\n$5\r\nBEGIN\r\n")
	syncEnd    = []byte("*2\r\n$8\r\nLKV.SYNC\r\n$3\r\nEND\r\n")
	// policiesCmd carries a master's rate-limit policies in a full sync.
	policiesCmd = []byte("LKV.POLICIES")
)

// Limits on what a reader accepts from a master: a damaged or hostile
// stream must not make a replica allocate without bound.
const (
	maxEntryArgs = 1 << 20
	maxBulk      = 512 << 20 // proto-max-bulk-len's default
	maxLine      = 64 << 10
	readChunk    = 64 << 10
)

var errProtocol = errors.New("protocol error in the replication stream")

// entryReader reads the stream's entries and the master's reply lines.
type entryReader struct {
	r    io.Reader
	buf  []byte
	head int // start of what is not consumed yet
	args [][]byte
	n    int64 // bytes read from r so far
}

func newEntryReader(r io.Reader) *entryReader {
	return &entryReader{r: r, buf: make([]byte, 0, readChunk)}
}

// fill reads more bytes, keeping buf[head:].
func (er *entryReader) fill() error {
	if er.head > 0 && er.head == len(er.buf) {
		er.buf, er.head = er.buf[:0], 0
	}
	if len(er.buf) == cap(er.buf) {
		if er.head > 0 {
			n := copy(er.buf, er.buf[er.head:])
			er.buf, er.head = er.buf[:n], 0
		} else {
			nb := make([]byte, len(er.buf), 2*cap(er.buf))
			copy(nb, er.buf)
			er.buf = nb
		}
	}
	n, err := er.r.Read(er.buf[len(er.buf):cap(er.buf)])
	er.buf = er.buf[:len(er.buf)+n]
	er.n += int64(n)
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// line returns the next line without its CRLF (or LF).
func (er *entryReader) line() ([]byte, error) {
	for {
		b := er.buf[er.head:]
		for i, c := range b {
			if c == '\n' {
				l := b[:i]
				if len(l) > 0 && l[len(l)-1] == '\r' {
					l = l[:len(l)-1]
				}
				er.head += i + 1
				return l, nil
			}
		}
		if len(b) > maxLine {
			return nil, errProtocol
		}
		if err := er.fill(); err != nil {
			return nil, err
		}
	}
}

// reply reads a reply line of the handshake, skipping the empty lines a
// master sends to keep a waiting replica's link alive.
func (er *entryReader) reply() (string, error) {
	for {
		l, err := er.line()
		if err != nil {
			return "", err
		}
		if len(l) > 0 {
			return string(l), nil
		}
	}
}

// rdb reports whether what comes next is an RDB file ("$" and its length,
// or "$EOF:" and a mark): Redis's full sync, which a limitkv replica cannot
// load.
func (er *entryReader) rdb() bool {
	for {
		b := er.buf[er.head:]
		for len(b) > 0 && (b[0] == '\n' || b[0] == '\r') {
			b = b[1:]
			er.head++
		}
		if len(b) > 0 {
			return b[0] == '$'
		}
		if er.fill() != nil {
			return false
		}
	}
}

// entry reads the next entry. It returns its arguments and its raw bytes,
// both valid until the next call.
func (er *entryReader) entry() (args [][]byte, raw []byte, err error) {
	for {
		args, size, ok, perr := er.parse()
		if perr != nil {
			return nil, nil, perr
		}
		if ok {
			raw = er.buf[er.head : er.head+size]
			er.head += size
			return args, raw, nil
		}
		if err := er.fill(); err != nil {
			return nil, nil, err
		}
	}
}

// parse parses one complete entry at head, if there is one.
func (er *entryReader) parse() (args [][]byte, size int, ok bool, err error) {
	b := er.buf[er.head:]
	// Newlines between entries are the master's keep-alives.
	skip := 0
	for skip < len(b) && (b[skip] == '\n' || b[skip] == '\r') {
		skip++
	}
	if skip > 0 {
		er.head += skip
		b = b[skip:]
	}
	if len(b) == 0 {
		return nil, 0, false, nil
	}
	if b[0] != '*' {
		return nil, 0, false, fmt.Errorf("%w: expected an array, got %q", errProtocol, b[:min(len(b), 16)])
	}
	n, p, ok, err := parseCount(b, 1, maxEntryArgs)
	if !ok || err != nil {
		return nil, 0, false, err
	}
	er.args = er.args[:0]
	for i := 0; i < n; i++ {
		if p >= len(b) {
			return nil, 0, false, nil
		}
		if b[p] != '$' {
			return nil, 0, false, fmt.Errorf("%w: expected a bulk string", errProtocol)
		}
		l, q, ok, err := parseCount(b, p+1, maxBulk)
		if !ok || err != nil {
			return nil, 0, false, err
		}
		if q+l+2 > len(b) {
			// Make room for the whole argument in one read buffer.
			if need := q + l + 2; need > cap(er.buf)-er.head {
				nb := make([]byte, len(b), need+readChunk)
				copy(nb, b)
				er.buf, er.head = nb, 0
			}
			return nil, 0, false, nil
		}
		er.args = append(er.args, b[q:q+l])
		p = q + l + 2
	}
	return er.args, p, true, nil
}

// parseCount reads a decimal count ending in CRLF at b[i:], at most max.
// ok is false when the line is not complete yet.
func parseCount(b []byte, i, max int) (n, next int, ok bool, err error) {
	start := i
	for i < len(b) && b[i] != '\r' {
		c := b[i]
		if c < '0' || c > '9' || i-start > 10 {
			return 0, 0, false, fmt.Errorf("%w: bad length", errProtocol)
		}
		n = n*10 + int(c-'0')
		i++
	}
	if i+1 >= len(b) {
		return 0, 0, false, nil
	}
	if i == start || b[i+1] != '\n' || n > max {
		return 0, 0, false, fmt.Errorf("%w: bad length", errProtocol)
	}
	return n, i + 2, true, nil
}
