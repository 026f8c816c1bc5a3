package commands

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limitkv/limitkv/resp"
)

// MONITOR: every command a client runs is streamed to the clients that
// asked, as Redis's replicationFeedMonitors formats it:
//
//	+1732851234.123456 [0 127.0.0.1:52114] "set" "foo" "bar"
//
// A command is shown once it has run (so inside EXEC each queued command
// comes before EXEC itself), with its database, the client's address
// ("lua" for a script's redis.call) and its arguments quoted as Redis's
// sdscatrepr quotes them. EVAL and FCALL are shown before they run, so
// that their script's commands follow them. Commands refused before they
// ran (unknown, wrong arity, NOAUTH, ACL) are not shown, nor
// administrative ones (CONFIG, CLIENT LIST, DEBUG, ...), as in Redis;
// passwords are shown as "(redacted)". What a replica applies from its
// master is the keys' new states, not commands, and is not shown.
//
// A monitor is a push target like a subscriber, and is limited as one:
// past client-output-buffer-limit pubsub a monitor that does not read is
// closed. (Redis applies the normal class, without a limit by default, so
// that a stuck monitor there grows without bound.)

func monitorCommands() []*command {
	return []*command{
		cmd("monitor", 1, "admin noscript loading stale", cmdMonitor),
	}
}

// monitorList is the clients in MONITOR mode. Every command reads it, so
// it is a copy-on-write slice behind an atomic pointer: a command with no
// monitor pays one atomic load.
type monitorList struct {
	mu   sync.Mutex
	list atomic.Pointer[[]*Client]
}

func (m *monitorList) load() []*Client {
	if p := m.list.Load(); p != nil {
		return *p
	}
	return nil
}

func (m *monitorList) add(cl *Client) {
	m.mu.Lock()
	defer m.mu.Unlock()
	next := append(append([]*Client(nil), m.load()...), cl)
	m.list.Store(&next)
}

func (m *monitorList) remove(cl *Client) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.load()
	next := make([]*Client, 0, len(cur))
	for _, x := range cur {
		if x != cl {
			next = append(next, x)
		}
	}
	m.list.Store(&next)
}

func cmdMonitor(c *Ctx) {
	cl := c.Client
	if c.held || cl.conn == nil {
		// Inside EXEC: Redis's CLIENT_DENY_BLOCKING client.
		c.W.Error("ERR MONITOR isn't allowed for DENY BLOCKING client")
		return
	}
	if cl.replica.Load() || cl.monitor.Load() {
		return // Redis ignores it, and answers nothing
	}
	c.W.OK()
	// The OK goes to the output queue first, so that no line pushed
	// once the client is listed can overtake it.
	cl.conn.Commit()
	cl.monitor.Store(true)
	cl.settleClass()
	c.Srv.monitors.add(cl)
}

// stopMonitoring takes the client out of MONITOR mode (RESET, or its
// connection closed).
func (s *Server) stopMonitoring(cl *Client) {
	if cl.monitor.Swap(false) {
		s.monitors.remove(cl)
		cl.settleClass()
	}
}

// feedMonitors shows c's command to every monitor. Server.run calls it,
// and decides which commands are shown and when. The line's length is
// known before it is made: a monitor whose output limit it would pass is
// closed without it, and if every monitor is, nothing is made (an
// argument of proto-max-bulk-len bytes would make a line of up to four
// times that).
func (s *Server) feedMonitors(c *Ctx) {
	mons := s.monitors.load()
	if len(mons) == 0 {
		return
	}
	hide := redactedArgs(c.Args)
	n := int64(monitorHeadMax)
	for i, a := range c.Args {
		if i < 64 && hide&(1<<i) != 0 {
			n += int64(len(redacted)) + 1
		} else {
			n += int64(reprLen(a)) + 1
		}
	}
	var line []byte
	for _, m := range mons {
		if m.conn.Refuses(n) {
			continue
		}
		if line == nil {
			line = s.monitorLine(make([]byte, 0, n), c, hide, time.Now())
		}
		if m == c.Client && !c.held && !c.script {
			// The monitor's own request: after its reply, as Redis
			// appends it.
			c.W.Raw(line)
			continue
		}
		m.conn.Push(line)
	}
}

// monitorHeadMax bounds what a line holds besides its arguments: the
// time, the database, the client's address, brackets, spaces, CRLF.
const monitorHeadMax = 96

// redacted is what MONITOR shows for a hidden argument.
const redacted = `"(redacted)"`

// monitorLine formats what MONITOR shows of c's command at t, the
// arguments in hide (as bits) redacted.
func (s *Server) monitorLine(b []byte, c *Ctx, hide uint64, t time.Time) []byte {
	us := t.UnixMicro()
	b = append(b, '+')
	b = strconv.AppendInt(b, us/1e6, 10)
	b = append(b, '.')
	frac := us % 1e6
	for d := int64(100000); d > 1 && frac < d; d /= 10 {
		b = append(b, '0')
	}
	b = strconv.AppendInt(b, frac, 10)
	b = append(b, " ["...)
	b = strconv.AppendInt(b, int64(c.DB), 10)
	b = append(b, ' ')
	switch {
	case c.script:
		b = append(b, "lua"...)
	case c.Client.conn != nil:
		b = append(b, c.Client.conn.RemoteAddr()...)
	}
	b = append(b, "] "...)
	for i, a := range c.Args {
		if i > 0 {
			b = append(b, ' ')
		}
		if i < 64 && hide&(1<<i) != 0 {
			b = append(b, redacted...)
			continue
		}
		b = appendRepr(b, a)
	}
	return append(b, '\r', '\n')
}

// redactedArgs returns the positions (as bits) of the arguments MONITOR
// hides, as Redis redacts them: every argument of AUTH; the user name and
// password of HELLO's AUTH and MIGRATE's AUTH and AUTH2, as their parsers
// find them.
func redactedArgs(args [][]byte) uint64 {
	var hide uint64
	mark := func(i int) {
		if i < 64 {
			hide |= 1 << i
		}
	}
	switch name := args[0]; {
	case is(name, "AUTH"):
		for i := 1; i < len(args); i++ {
			mark(i)
		}
	case is(name, "HELLO"):
		for j := 2; j < len(args); j++ {
			more := len(args) - 1 - j
			switch {
			case is(args[j], "AUTH") && more >= 2:
				mark(j + 1)
				mark(j + 2)
				j += 2
			case is(args[j], "SETNAME") && more >= 1:
				j++
			default:
				return hide // HELLO refuses the rest
			}
		}
	case is(name, "MIGRATE"):
		for j := 6; j < len(args); j++ {
			more := len(args) - 1 - j
			switch {
			case is(args[j], "COPY"), is(args[j], "REPLACE"):
			case is(args[j], "AUTH") && more >= 1:
				j++
				mark(j)
			case is(args[j], "AUTH2") && more >= 2:
				mark(j + 1)
				mark(j + 2)
				j += 2
			default:
				return hide // KEYS, or an error: nothing more to hide
			}
		}
	}
	return hide
}

// appendRepr appends s quoted as Redis's sdscatrepr quotes it: a
// backslash before a backslash or a double quote, the C escapes of \n \r
// \t \a \b, and \xHH for any other byte that is not printable ASCII.
func appendRepr(b, s []byte) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for _, ch := range s {
		switch e := reprEscape[ch]; {
		case e != 0:
			b = append(b, '\\', e)
		case ch >= ' ' && ch <= '~':
			b = append(b, ch)
		default:
			b = append(b, '\\', 'x', hex[ch>>4], hex[ch&15])
		}
	}
	return append(b, '"')
}

// reprLen is the length of appendRepr's quoting of s.
func reprLen(s []byte) int {
	n := 2
	for _, ch := range s {
		switch {
		case reprEscape[ch] != 0:
			n += 2
		case ch >= ' ' && ch <= '~':
			n++
		default:
			n += 4
		}
	}
	return n
}

// reprEscape is the letter after the backslash of each byte sdscatrepr
// escapes with one; 0 for the others.
var reprEscape = [256]byte{'\\': '\\', '"': '"', '\n': 'n', '\r': 'r', '\t': 't', '\a': 'a', '\b': 'b'}

// settleClass puts the client's connection in the output class its state
// calls for: a monitor's or a subscriber's pushes are limited by the
// pubsub class; a replica keeps its own.
func (cl *Client) settleClass() {
	if cl.conn == nil || cl.replica.Load() {
		return
	}
	if cl.monitor.Load() || cl.subscribed() {
		cl.conn.SetClass(resp.ClassPubSub)
	} else {
		cl.conn.SetClass(resp.ClassNormal)
	}
}
