package commands

import (
	"bufio"
	"bytes"
	"errors"
	"hash/maphash"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/rdb"
	"github.com/limitkv/limitkv/resp"
)

// MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE]
// [AUTH password | AUTH2 username password] [KEYS key...]
//
// As Redis's migrateCommand: the keys found are sent to the target as
// RESTORE commands (after AUTH and SELECT), in one write; each one the
// target accepts is deleted here, unless COPY.
//
// Unlike Redis, which does all of it in its one thread, limitkv never
// holds a shard lock while it waits for the network: it dumps the keys
// under their shards' locks, releases them, talks to the target, then
// takes the locks again to delete what the target took. A key written by
// another client in between is not deleted: its new value, which the
// target never saw, would be lost otherwise, while keeping it loses
// nothing (the target holds the value as it was when MIGRATE read it, as
// if the write had come just after the MIGRATE). Whether the key is
// unchanged is told by a 64-bit hash of its value and expiry in the
// engine's encoding, taken both times. Inside MULTI or a script every
// shard is already locked and stays so, as Redis's server does.
//
// Connections to targets are cached as Redis caches them (migrateSockets).

const (
	msgMigrateKeys = "When using MIGRATE KEYS option, the key argument must be set to the empty string"
	msgIOConnect   = "IOERR error or timeout connecting to the client"
	msgIOWrite     = "IOERR error or timeout writing to target instance"
	msgIORead      = "IOERR error or timeout reading to target instance"
	// migrateChunk is how much Redis writes to the target at a time.
	migrateChunk = 64 << 10
)

// migrateSecrets says which arguments of MIGRATE the slow log and MONITOR
// must not show: AUTH's password, AUTH2's username and password, as far
// as Redis's parser redacts them before it stops.
func migrateSecrets(args [][]byte) func(int) bool {
	hide := map[int]bool{}
	for j := 6; j < len(args); j++ {
		more := len(args) - 1 - j
		switch {
		case is(args[j], "COPY"), is(args[j], "REPLACE"):
		case is(args[j], "AUTH") && more >= 1:
			hide[j+1] = true
			j++
		case is(args[j], "AUTH2") && more >= 2:
			hide[j+1], hide[j+2] = true, true
			j += 2
		default:
			j = len(args)
		}
	}
	return func(j int) bool { return hide[j] }
}

// migrateKeys finds MIGRATE's keys as Redis does for ACL checks and
// COMMAND GETKEYS: from its key specs, the key argument, unless the
// second spec, which is incomplete, finds a KEYS (looking back from the
// next to last argument); then with migrateGetKeys: scanning forwards,
// skipping AUTH's and AUTH2's arguments, the keys after the first KEYS
// if the key argument is empty, none if it is not (MIGRATE refuses that).
func migrateKeys(args [][]byte, out []cmdspec.KeyRef) []cmdspec.KeyRef {
	keys := false
	for i := len(args) - 2; i >= 2; i-- {
		if is(args[i], "KEYS") {
			keys = true
			break
		}
	}
	if !keys {
		return append(out, cmdspec.KeyRef{Pos: 3, Spec: 0})
	}
	first, num := 3, 1
	for j := 6; j < len(args); j++ {
		switch {
		case is(args[j], "KEYS"):
			if len(args[3]) > 0 {
				num = 0
			} else {
				first, num = j+1, len(args)-j-1
			}
			j = len(args)
		case is(args[j], "AUTH"):
			j++
		case is(args[j], "AUTH2"):
			j += 2
		}
	}
	for i := first; i < first+num; i++ {
		out = append(out, cmdspec.KeyRef{Pos: i, Spec: 0})
	}
	return out
}

var migrateSeed = maphash.MakeSeed()

// migrating is one key on its way: its name, what was sent, and the hash
// of its value when it was read.
type migrating struct {
	key  []byte
	sum  uint64
	sent bool
}

func cmdMigrate(c *Ctx) {
	var copyKeys, replace bool
	var user, pass []byte
	auth := false
	keys := c.Args[3:4]
	for j := 6; j < len(c.Args); j++ {
		more := len(c.Args) - 1 - j
		switch {
		case is(c.Args[j], "COPY"):
			copyKeys = true
		case is(c.Args[j], "REPLACE"):
			replace = true
		case is(c.Args[j], "AUTH"):
			if more < 1 {
				c.W.Error(msgSyntax)
				return
			}
			j++
			auth, user, pass = true, nil, c.Args[j]
		case is(c.Args[j], "AUTH2"):
			if more < 2 {
				c.W.Error(msgSyntax)
				return
			}
			auth, user, pass = true, c.Args[j+1], c.Args[j+2]
			j += 2
		case is(c.Args[j], "KEYS"):
			if len(c.Args[3]) != 0 {
				c.W.Error(msgMigrateKeys)
				return
			}
			keys = c.Args[j+1:]
			j = len(c.Args)
		default:
			c.W.Error(msgSyntax)
			return
		}
	}
	timeout, ok := c.Int(5)
	if !ok {
		return
	}
	db, ok := c.Int(4)
	if !ok {
		return
	}
	if timeout <= 0 {
		timeout = 1000
	}
	wait := time.Duration(timeout) * time.Millisecond

	eng := c.Srv.Eng
	var m engine.Mask
	for _, k := range keys {
		m = eng.Add(m, k)
	}

	// Read the keys and build the RESTORE commands under their locks.
	var authCmd, out []byte
	if auth {
		if user != nil {
			authCmd = resp.AppendCommand(nil, []byte("AUTH"), user, pass)
		} else {
			authCmd = resp.AppendCommand(nil, []byte("AUTH"), pass)
		}
	}
	var moving []migrating
	var failed string
	found := 0
	c.withShards(m, func() {
		now := eng.Now()
		var payload, scratch []byte
		for _, k := range keys {
			sh := eng.ShardFor(k)
			e, ok := sh.Lookup(c.DB, k, c.Now)
			if !ok {
				continue
			}
			found++
			ttl := int64(0)
			if exp := e.ExpireAt(); exp != 0 {
				// Expired since it was looked up (the command's clock
				// is older than now): Redis skips it.
				if ttl = exp - now; ttl < 0 {
					continue
				}
				ttl = max(ttl, 1)
			}
			var msg string
			payload, msg = dumpValue(payload[:0], sh, e)
			if msg != "" {
				failed = msg
				return
			}
			payload = rdb.Seal(payload)
			args := [][]byte{[]byte("RESTORE"), k, strconv.AppendInt(nil, ttl, 10), payload}
			if replace {
				args = append(args, []byte("REPLACE"))
			}
			out = resp.AppendCommand(out, args...)
			scratch, _ = engine.AppendValue(scratch[:0], sh, e)
			moving = append(moving, migrating{key: k, sum: maphash.Bytes(migrateSeed, scratch)})
		}
	})
	if failed != "" {
		c.W.Error(failed)
		return
	}
	if found == 0 {
		c.W.Simple("NOKEY")
		return
	}

	// Talk to the target, holding no lock (unless MULTI or a script
	// holds them all).
	addr := net.JoinHostPort(string(c.Args[1]), strconv.FormatInt(engine.Atoi(c.Args[2]), 10))
	acked, reply := c.Srv.migrate.send(addr, wait, authCmd, db, out, len(moving))
	for i := range acked {
		moving[i].sent = acked[i]
	}

	// Delete what the target took, if it is still what was sent.
	if !copyKeys {
		c.withShards(m, func() {
			var scratch []byte
			for _, mv := range moving {
				if !mv.sent {
					continue
				}
				sh := eng.ShardFor(mv.key)
				e, ok := sh.Find(c.DB, mv.key, c.Now)
				if !ok {
					continue
				}
				scratch, _ = engine.AppendValue(scratch[:0], sh, e)
				if maphash.Bytes(migrateSeed, scratch) == mv.sum {
					sh.DeleteEntry(e)
				}
			}
		})
	}
	if reply == "" {
		c.W.OK()
	} else {
		c.W.Error(reply)
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

// withShards runs fn with the shards of m locked (unless the request
// holds them all already) and sends what it changed to the replicas, as
// dispatch does around a handler: for SelfLock commands that must let go
// of their locks between steps.
func (c *Ctx) withShards(m engine.Mask, fn func()) {
	s := c.Srv
	if !c.held {
		s.Eng.Lock(m)
		defer s.Eng.Unlock(m)
	}
	fn()
	if s.Repl.Recording() {
		s.propagate(c, m, false)
	}
}

// migrateSockets caches a connection per target, as Redis's
// migrate_cached_sockets does: it stays authenticated, remembers the
// database it last selected (no SELECT when it is the same), and is
// closed after ten seconds unused; at most 64 are kept. A connection in
// use is taken out of the cache, so that concurrent MIGRATEs to one
// target each have their own.
type migrateSockets struct {
	mu    sync.Mutex
	socks map[string]*migrateSock
}

type migrateSock struct {
	conn   net.Conn
	r      *bufio.Reader
	lastDB int64 // -1: none selected yet, or unknown after an error
	idle   *time.Timer
}

const (
	migrateSocketTTL   = 10 * time.Second
	migrateSocketItems = 64
)

// cached is INFO's migrate_cached_sockets: the connections kept for the
// next MIGRATE.
func (m *migrateSockets) cached() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.socks)
}

// get takes addr's cached connection, or connects.
func (m *migrateSockets) get(addr string, wait time.Duration) (*migrateSock, error) {
	m.mu.Lock()
	s := m.socks[addr]
	if s != nil {
		delete(m.socks, addr)
		s.idle.Stop()
	}
	m.mu.Unlock()
	if s != nil {
		return s, nil
	}
	conn, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		return nil, err
	}
	return &migrateSock{conn: conn, r: bufio.NewReaderSize(conn, 1024), lastDB: -1}, nil
}

// put gives s back to the cache, to be closed when unused for a while.
func (m *migrateSockets) put(addr string, s *migrateSock) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.socks == nil {
		m.socks = map[string]*migrateSock{}
	}
	if old := m.socks[addr]; old != nil {
		// Another MIGRATE to this target put one back meanwhile.
		s.conn.Close()
		return
	}
	if len(m.socks) >= migrateSocketItems {
		for a, old := range m.socks { // any one, as Redis drops a random one
			old.idle.Stop()
			old.conn.Close()
			delete(m.socks, a)
			break
		}
	}
	m.socks[addr] = s
	s.idle = time.AfterFunc(migrateSocketTTL, func() {
		m.mu.Lock()
		if m.socks[addr] == s {
			delete(m.socks, addr)
			s.conn.Close()
		}
		m.mu.Unlock()
	})
}

// send runs migrateCommand's exchange with the target: AUTH if given,
// SELECT if the connection has another database selected, then the n
// RESTORE commands of body, written in 64 kB chunks; then it reads the
// replies. It returns which RESTOREs the target accepted and the error
// to reply ("" for OK). On a socket error before any reply, not a
// timeout, it tries once more on a new connection, as Redis does for a
// cached connection the target has closed.
func (m *migrateSockets) send(addr string, wait time.Duration, authCmd []byte, db int64, body []byte, n int) ([]bool, string) {
	acked := make([]bool, n)
	for retry := true; ; retry = false {
		s, err := m.get(addr, wait)
		if err != nil {
			if errors.Is(err, syscall.ECONNREFUSED) {
				// Redis's non-blocking connect "succeeds" and its
				// first write fails.
				return acked, msgIOWrite
			}
			return acked, msgIOConnect
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
		chunk := make([]byte, 0, migrateChunk)
		flush := func() {
			if len(chunk) > 0 && !socketErr {
				s.conn.SetWriteDeadline(time.Now().Add(wait))
				if _, err := s.conn.Write(chunk); err != nil {
					fail(err)
					writing = true
				}
			}
			chunk = chunk[:0]
		}
		for _, part := range [][]byte{buf, body} {
			for len(part) > 0 && !socketErr {
				k := min(len(part), migrateChunk-len(chunk))
				chunk = append(chunk, part[:k]...)
				part = part[k:]
				if len(chunk) == migrateChunk {
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
		targetErr, got := "", 0
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
					if targetErr == "" {
						targetErr = "ERR Target instance replied with error: " + string(line[1:])
					}
					continue
				}
				acked[got] = true
			}
		}
		if socketErr {
			s.conn.Close()
			if got == 0 && retry && !timedOut && targetErr == "" {
				continue
			}
			if targetErr != "" {
				return acked, targetErr
			}
			if writing {
				return acked, msgIOWrite
			}
			return acked, msgIORead
		}
		if targetErr != "" {
			s.lastDB = -1
		} else {
			s.lastDB = db
		}
		m.put(addr, s)
		return acked, targetErr
	}
}
