package commands

import (
	"time"

	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/observe"
)

// slowlogCommands: the slow log.
func slowlogCommands() []*command {
	return []*command{
		cmd("slowlog", -2, "", nil).withSub(
			cmd("get", -2, "admin loading stale", cmdSlowlogGet),
			cmd("help", 2, "loading stale", cmdHelp),
			cmd("len", 2, "admin loading stale", cmdSlowlogLen),
			cmd("reset", 2, "admin loading stale", cmdSlowlogReset),
		),
	}
}

// SLOWLOG, as Redis 7.0's slowlog.c: commands that took at least
// slowlog-log-slower-than microseconds, in observe.SlowLog, which keeps
// their arguments within Redis's limits; here, which arguments are
// secrets (replaced by "(redacted)" as Redis redacts them) and the
// client's address and name. EXEC is not logged but the commands it runs
// are; EVAL is logged and so are the commands its script calls (with the
// address "?:0", the script's client).

// logSlow adds the command c ran, which took micros microseconds, to the
// slow log, keeping at most maxLen entries.
func (s *Server) logSlow(c *Ctx, micros int64, maxLen int) {
	args := c.Args
	if c.sent != nil {
		args = c.sent
	}
	s.slowlog.Add(observe.SlowEntry{
		Unix:   time.Now().Unix(),
		Micros: micros,
		Args:   observe.SlowlogArgs(args, secretArgs(c.Spec, args)),
		Addr:   clientAddr(c.Client),
		Name:   c.Client.Name(),
	}, maxLen)
}

// clientAddr is the address SLOWLOG shows for a client: "?:0" for a
// script's, which has no connection, as in Redis.
func clientAddr(cl *Client) string {
	if cl.conn == nil {
		return "?:0"
	}
	return cl.conn.RemoteAddr()
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
		count = int64(l.Len())
	}
	entries := l.Newest(int(min(count, 1<<31)))
	c.W.Array(len(entries))
	for _, e := range entries {
		c.W.Array(6)
		c.W.Int(e.ID)
		c.W.Int(e.Unix)
		c.W.Int(e.Micros)
		c.W.Array(len(e.Args))
		for _, a := range e.Args {
			c.W.Bulk(a)
		}
		c.W.BulkString(e.Addr)
		c.W.BulkString(e.Name)
	}
}

func cmdSlowlogLen(c *Ctx) { c.W.Int(int64(c.Srv.slowlog.Len())) }

func cmdSlowlogReset(c *Ctx) {
	c.Srv.slowlog.Reset()
	c.W.OK()
}
