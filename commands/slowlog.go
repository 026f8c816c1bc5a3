package commands

import (
	"strconv"
	"sync"
	"time"

	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/engine"
)

// SLOWLOG, as Redis 7.0's slowlog.c: commands that took at least
// slowlog-log-slower-than microseconds, newest first, at most
// slowlog-max-len of them. An entry keeps 32 arguments at most (the last
// saying how many more there were) and 128 bytes of each (with how many
// more there were), secrets replaced by "(redacted)" as Redis redacts
// them, and the client's address and name. EXEC is not logged but the
// commands it runs are; EVAL is logged and so are the commands its script
// calls (with the address "?:0", the script's client).

const (
	slowlogMaxArgs  = 32
	slowlogMaxBytes = 128
)

type slowEntry struct {
	id, unix, micros int64
	args             [][]byte
	addr, name       string
}

// slowLog is a ring of entries that grows up to slowlog-max-len.
type slowLog struct {
	mu     sync.Mutex
	ring   []slowEntry
	head   int // the oldest entry
	n      int
	nextID int64
}

// add logs the command c ran, which took micros microseconds.
func (l *slowLog) add(c *Ctx, micros int64, maxLen int) {
	args := c.Args
	if c.sent != nil {
		args = c.sent
	}
	e := slowEntry{
		unix:   time.Now().Unix(),
		micros: micros,
		args:   slowlogArgs(c.Spec, args),
		addr:   clientAddr(c.Client),
		name:   c.Client.Name(),
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e.id = l.nextID
	l.nextID++
	if maxLen <= 0 {
		l.trimLocked(0)
		return
	}
	if l.n == len(l.ring) {
		if len(l.ring) < maxLen {
			l.resizeLocked(min(max(2*len(l.ring), 8), maxLen))
		} else {
			l.ring[l.head] = slowEntry{}
			l.head = (l.head + 1) % len(l.ring)
			l.n--
		}
	}
	l.ring[(l.head+l.n)%len(l.ring)] = e
	l.n++
	l.trimLocked(maxLen)
}

// resizeLocked moves the entries to a ring of size n >= l.n.
func (l *slowLog) resizeLocked(n int) {
	ring := make([]slowEntry, n)
	for i := 0; i < l.n; i++ {
		ring[i] = l.ring[(l.head+i)%len(l.ring)]
	}
	l.ring, l.head = ring, 0
}

// trim drops the oldest entries beyond maxLen (a smaller slowlog-max-len).
func (l *slowLog) trim(maxLen int) {
	l.mu.Lock()
	l.trimLocked(maxLen)
	l.mu.Unlock()
}

func (l *slowLog) trimLocked(maxLen int) {
	for l.n > maxLen {
		l.ring[l.head] = slowEntry{}
		l.head = (l.head + 1) % len(l.ring)
		l.n--
	}
	if len(l.ring) > 2*max(maxLen, 8) {
		l.resizeLocked(max(l.n, 8))
	}
}

func (l *slowLog) reset() {
	l.mu.Lock()
	l.ring, l.head, l.n = nil, 0, 0
	l.mu.Unlock()
}

func (l *slowLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// newest returns up to count entries, newest first.
func (l *slowLog) newest(count int) []slowEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]slowEntry, min(count, l.n))
	for i := range out {
		out[i] = l.ring[(l.head+l.n-1-i)%len(l.ring)]
	}
	return out
}

// clientAddr is the address SLOWLOG shows for a client: "?:0" for a
// script's, which has no connection, as in Redis.
func clientAddr(cl *Client) string {
	if cl.conn == nil {
		return "?:0"
	}
	return cl.conn.RemoteAddr()
}

var redacted = []byte("(redacted)")

// slowlogArgs copies a command's arguments for the slow log, within its
// limits, with secrets redacted.
func slowlogArgs(spec *cmdspec.Spec, args [][]byte) [][]byte {
	n := min(len(args), slowlogMaxArgs)
	size := 0
	for _, a := range args[:n] {
		size += min(len(a), slowlogMaxBytes) + 24
	}
	buf := make([]byte, 0, size)
	out := make([][]byte, n)
	secret := secretArgs(spec, args)
	for j := 0; j < n; j++ {
		start := len(buf)
		switch a := args[j]; {
		case n < len(args) && j == n-1:
			buf = append(buf, "... ("...)
			buf = strconv.AppendInt(buf, int64(len(args)-n+1), 10)
			buf = append(buf, " more arguments)"...)
		case secret(j):
			buf = append(buf, redacted...)
		case len(a) > slowlogMaxBytes:
			buf = append(buf, a[:slowlogMaxBytes]...)
			buf = append(buf, "... ("...)
			buf = strconv.AppendInt(buf, int64(len(a)-slowlogMaxBytes), 10)
			buf = append(buf, " more bytes)"...)
		default:
			buf = append(buf, a...)
		}
		out[j] = buf[start:len(buf):len(buf)]
	}
	return out
}

// secretArgs returns which arguments of a command Redis redacts from the
// slow log: AUTH's password (and user), HELLO's AUTH pair, the values of
// sensitive settings in CONFIG SET, everything ACL SETUSER says. Redis
// redacts as the command runs, so a request it refuses before that point
// is kept as sent; the checks below follow the same points.
func secretArgs(spec *cmdspec.Spec, args [][]byte) func(int) bool {
	none := func(int) bool { return false }
	switch spec.FullName() {
	case "auth":
		if len(args) > 3 {
			return none
		}
		return func(j int) bool { return j == 1 || j == 2 && len(args) == 3 }
	case "hello":
		if len(args) < 2 {
			return none
		}
		if v, ok := engine.ParseInt(args[1]); !ok || v < 2 || v > 3 {
			return none
		}
		hide := map[int]bool{}
		for j := 2; j < len(args); j++ {
			more := len(args) - 1 - j
			switch {
			case is(args[j], "AUTH") && more >= 2:
				hide[j+1], hide[j+2] = true, true
				j += 2
			case is(args[j], "SETNAME") && more >= 1:
				j++
			default:
				j = len(args)
			}
		}
		return func(j int) bool { return hide[j] }
	case "config|set":
		if len(args) < 4 || len(args)%2 != 0 {
			return none
		}
		return func(j int) bool {
			if j < 3 || j%2 == 0 {
				return false
			}
			switch string(lower(args[j-1])) {
			case "requirepass", "masterauth", "masteruser":
				return true
			}
			return false
		}
	case "acl|setuser":
		return func(j int) bool { return j >= 2 }
	case "migrate":
		return migrateSecrets(args)
	}
	return none
}

func lower(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

// SLOWLOG GET [count]: newest first, 10 by default, -1 for all.
func cmdSlowlogGet(c *Ctx) {
	count := int64(10)
	switch len(c.Args) {
	case 2:
	case 3:
		n, ok := engine.ParseInt(c.Args[2])
		if !ok || n < -1 {
			c.W.Error("count should be greater than or equal to -1")
			return
		}
		count = n
	default:
		c.W.Error("unknown subcommand or wrong number of arguments for '" + trunc(string(c.Args[1]), 128) + "'. Try SLOWLOG HELP.")
		return
	}
	l := &c.Srv.slowlog
	if count == -1 {
		count = int64(l.len())
	}
	entries := l.newest(int(min(count, 1<<31)))
	c.W.Array(len(entries))
	for _, e := range entries {
		c.W.Array(6)
		c.W.Int(e.id)
		c.W.Int(e.unix)
		c.W.Int(e.micros)
		c.W.Array(len(e.args))
		for _, a := range e.args {
			c.W.Bulk(a)
		}
		c.W.BulkString(e.addr)
		c.W.BulkString(e.name)
	}
}

func cmdSlowlogLen(c *Ctx) { c.W.Int(int64(c.Srv.slowlog.len())) }

func cmdSlowlogReset(c *Ctx) {
	c.Srv.slowlog.reset()
	c.W.OK()
}

func cmdSlowlogHelp(c *Ctx) {
	help(c, "SLOWLOG", []string{
		"GET [<count>]", "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
		"    Entries are made of:", "    id, timestamp, time in microseconds, arguments array, client IP and port,",
		"    client name",
		"LEN", "    Return the length of the slowlog.",
		"RESET", "    Reset the slowlog.",
	})
}
