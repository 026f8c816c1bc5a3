package migrate

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/limitkv/limitkv/resp"
)

// The errors Send returns are the replies MIGRATE gives, in Redis's words.
var (
	ErrConnect = errors.New("IOERR error or timeout connecting to the client")
	ErrWrite   = errors.New("IOERR error or timeout writing to target instance")
	ErrRead    = errors.New("IOERR error or timeout reading to target instance")
)

// TargetError is the first error the target replied to AUTH, SELECT or a
// RESTORE.
type TargetError struct {
	Line string // the reply without its '-'
}

func (e *TargetError) Error() string {
	return "ERR Target instance replied with error: " + e.Line
}

// chunk is how much Redis writes to the target at a time.
const chunk = 64 << 10

// Target is where a batch goes and how to log in there.
type Target struct {
	Addr    string        // host:port
	Timeout time.Duration // for connecting, and for each write and read
	DB      int64         // selected before the RESTOREs
	// Auth sends AUTH first: AUTH Pass when User is nil, AUTH User Pass
	// otherwise.
	Auth       bool
	User, Pass []byte
}

// Batch is the RESTORE commands of one exchange, framed as they are sent,
// so that the caller can build it under its locks and send it after.
type Batch struct {
	// Asking sends RESTORE-ASKING, as a cluster node does: the target
	// is importing the slot, and serves only commands that say so.
	Asking bool
	buf    []byte
	n      int
}

// Restore adds a RESTORE of key with the given TTL in ms (0: none) and
// DUMP payload.
func (b *Batch) Restore(key []byte, ttl int64, payload []byte, replace bool) {
	name := "RESTORE"
	if b.Asking {
		name = "RESTORE-ASKING"
	}
	args := [][]byte{[]byte(name), key, strconv.AppendInt(nil, ttl, 10), payload}
	if replace {
		args = append(args, []byte("REPLACE"))
	}
	b.buf = resp.AppendCommand(b.buf, args...)
	b.n++
}

// Len is how many RESTOREs b holds.
func (b *Batch) Len() int { return b.n }

// Send runs migrateCommand's exchange with the target: AUTH if asked,
// SELECT if the connection has another database selected, then the
// RESTOREs of b, written in 64 kB chunks; then it reads the replies. It
// returns which RESTOREs the target accepted, in b's order, and the error
// MIGRATE replies (nil for OK). On a socket error before any reply, not a
// timeout, it tries once more on a new connection, as Redis does for a
// cached connection the target has closed.
func (p *Pool) Send(t Target, b *Batch) ([]bool, error) {
	var authCmd []byte
	if t.Auth {
		if t.User != nil {
			authCmd = resp.AppendCommand(nil, []byte("AUTH"), t.User, t.Pass)
		} else {
			authCmd = resp.AppendCommand(nil, []byte("AUTH"), t.Pass)
		}
	}
	addr, wait, db, body, n := t.Addr, t.Timeout, t.DB, b.buf, b.n
	acked := make([]bool, n)
	for retry := true; ; retry = false {
		s, err := p.Get(addr, wait)
		if err != nil {
			if errors.Is(err, syscall.ECONNREFUSED) {
				// Redis's non-blocking connect "succeeds" and its
				// first write fails.
				return acked, ErrWrite
			}
			return acked, ErrConnect
		}
		sel := s.lastDB != db
		buf := authCmd
		if sel {
			buf = resp.AppendCommand(bytes.Clone(buf), []byte("SELECT"), strconv.AppendInt(nil, db, 10))
		}
		timedOut, writing, socketErr := false, false, false
		fail := func(err error) {
			socketErr = true
			timedOut = errors.Is(err, os.ErrDeadlineExceeded)
		}
		// One stream, AUTH and SELECT first, written 64 kB at a time.
		out := make([]byte, 0, chunk)
		flush := func() {
			if len(out) > 0 && !socketErr {
				s.conn.SetWriteDeadline(time.Now().Add(wait))
				if _, err := s.conn.Write(out); err != nil {
					fail(err)
					writing = true
				}
			}
			out = out[:0]
		}
		for _, part := range [][]byte{buf, body} {
			for len(part) > 0 && !socketErr {
				k := min(len(part), chunk-len(out))
				out = append(out, part[:k]...)
				part = part[k:]
				if len(out) == chunk {
					flush()
				}
			}
		}
		flush()
		readLine := func() []byte {
			if socketErr {
				return nil
			}
			s.conn.SetReadDeadline(time.Now().Add(wait))
			line, err := readReplyLine(s.r)
			if err != nil {
				fail(err)
			}
			return line
		}
		var authReply, selReply []byte
		if authCmd != nil {
			authReply = readLine()
		}
		if sel {
			selReply = readLine()
		}
		var targetErr error
		got := 0
		if !socketErr {
			for ; got < n; got++ {
				line := readLine()
				if socketErr {
					break
				}
				switch {
				case authCmd != nil && len(authReply) > 0 && authReply[0] == '-':
					line = authReply
				case sel && len(selReply) > 0 && selReply[0] == '-':
					line = selReply
				}
				if len(line) > 0 && line[0] == '-' {
					if targetErr == nil {
						targetErr = &TargetError{Line: string(line[1:])}
					}
					continue
				}
				acked[got] = true
			}
		}
		if socketErr {
			s.conn.Close()
			if got == 0 && retry && !timedOut && targetErr == nil {
				continue
			}
			if targetErr != nil {
				return acked, targetErr
			}
			if writing {
				return acked, ErrWrite
			}
			return acked, ErrRead
		}
		if targetErr != nil {
			s.lastDB = -1
		} else {
			s.lastDB = db
		}
		p.Put(addr, s)
		return acked, targetErr
	}
}

// readReplyLine reads one line of the target's reply as Redis's
// connSyncReadLine does: up to 1024 bytes, without its "\r\n".
func readReplyLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
		return nil, err
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	return bytes.Clone(line), nil
}
