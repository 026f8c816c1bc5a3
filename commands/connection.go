package commands

import (
	"strings"
	"time"

	"github.com/limitkv/limitkv/acl"
	"github.com/limitkv/limitkv/cmddocs"
	"github.com/limitkv/limitkv/engine"
)

// connectionCommands: a connection's own commands, CLIENT included
// (the handlers of CLIENT PAUSE, UNPAUSE and NO-EVICT are in pause.go,
// CLIENT UNBLOCK's in client.go).
func connectionCommands() []*command {
	return []*command{
		cmd("ping", -1, "fast", cmdPing),
		cmd("echo", 2, "loading stale fast", cmdEcho),
		cmd("hello", -1, "noscript loading stale fast no_auth allow_busy", cmdHello),
		cmd("auth", -2, "noscript loading stale fast no_auth allow_busy", cmdAuth),
		cmd("quit", -1, "noscript loading stale fast no_auth allow_busy", cmdQuit),
		cmd("reset", 1, "noscript loading stale fast no_auth allow_busy", cmdReset),
		cmd("client", -2, "", nil).withSub(
			cmd("getname", 2, "noscript loading stale", cmdClientGetName),
			cmd("help", 2, "loading stale", cmdHelp),
			cmd("id", 2, "noscript loading stale", cmdClientID),
			cmd("info", 2, "noscript loading stale", cmdClientInfo),
			cmd("kill", -3, "admin noscript loading stale", cmdClientKill),
			cmd("list", -2, "admin noscript loading stale", cmdClientList),
			cmd("no-evict", 3, "admin noscript loading stale", cmdClientNoEvict),
			cmd("tracking", -3, "noscript loading stale", cmdClientTracking),
			cmd("caching", 3, "noscript loading stale", cmdClientCaching),
			cmd("getredir", 2, "noscript loading stale", cmdClientGetRedir),
			cmd("trackinginfo", 2, "noscript loading stale", cmdClientTrackingInfo),
			cmd("pause", -3, "admin noscript loading stale", cmdClientPause),
			cmd("reply", 3, "noscript loading stale", cmdClientReply),
			cmd("setname", 3, "noscript loading stale", cmdClientSetName),
			cmd("setinfo", 4, "noscript loading stale", cmdClientSetInfo),
			cmd("unblock", -3, "admin noscript loading stale", cmdClientUnblock),
			cmd("unpause", 2, "admin noscript loading stale", cmdClientUnpause),
		),
	}
}

func cmdPing(c *Ctx) {
	if len(c.Args) <= 2 && c.W.Proto() == 2 && c.Client.subscribed() {
		// In pub/sub mode a RESP2 client gets an array, as a message.
		c.W.Array(2)
		c.W.BulkString("pong")
		if len(c.Args) == 1 {
			c.W.BulkString("")
		} else {
			c.W.Bulk(c.Args[1])
		}
		return
	}
	switch len(c.Args) {
	case 1:
		c.W.Simple("PONG")
	case 2:
		c.W.Bulk(c.Args[1])
	default:
		c.W.Error("wrong number of arguments for 'ping' command")
	}
}

func cmdEcho(c *Ctx) { c.W.Bulk(c.Args[1]) }

// cmdClientReply: CLIENT REPLY ON|OFF|SKIP. OFF and SKIP answer nothing;
// the request's end applies them (Server.request).
func cmdClientReply(c *Ctx) {
	cl := c.Client
	switch a := c.Args[2]; {
	case is(a, "ON"):
		cl.replyOff, cl.replySkip = false, false
		c.W.OK()
	case is(a, "OFF"):
		cl.replyOff = true
	case is(a, "SKIP"):
		if !cl.replyOff {
			cl.replySkipNext = true
		}
	default:
		c.W.Error("syntax error")
	}
}

func cmdQuit(c *Ctx) {
	c.W.OK()
	c.Client.conn.CloseAfterReply()
}

func cmdReset(c *Ctx) {
	cl := c.Client
	cl.discardTx()
	cl.unwatchAll()
	c.Srv.dropSubscriptions(cl)
	c.Srv.stopMonitoring(cl)
	c.Srv.disableTracking(cl)
	cl.replyOff, cl.replySkipNext = false, false
	cl.db.Store(0)
	cl.name.Store(nil)
	cl.readOnly, cl.asking = false, false
	c.W.SetProto(2)
	cl.setDefaultUser()
	c.W.Simple("RESET")
}

// authenticate checks a user name and password (the default user's when
// user is nil) and, if they match, makes the client that user's. A failure
// is logged in ACL LOG and answered with WRONGPASS after a delay
// (authGuard).
func (c *Ctx) authenticate(user, pass []byte) bool {
	if user == nil {
		user = []byte("default")
	}
	u := c.Srv.authenticateUser(user, pass)
	if u == nil {
		ctx := acl.CtxToplevel
		if c.Client.multi {
			ctx = acl.CtxMulti
		}
		c.Srv.aclLogAdd(c.Client, acl.DeniedAuth, ctx, string(c.Args[0]), string(user))
		c.Client.penalty = c.Srv.auth.failed(c.Srv, c.Client)
		c.W.Error("WRONGPASS invalid username-password pair or user is disabled.")
		return false
	}
	c.Client.user.Store(u)
	c.Client.authed = true
	c.Client.conn.SetAuthenticated(true)
	c.Srv.auth.succeeded(c.Client)
	return true
}

func cmdAuth(c *Ctx) {
	var user, pass []byte
	switch len(c.Args) {
	case 2:
		pass = c.Args[1]
		if c.Srv.acl.def.rules.Load().NoPass() {
			c.W.Error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
			return
		}
	case 3:
		user, pass = c.Args[1], c.Args[2]
	default:
		c.W.Error(msgSyntax)
		return
	}
	if c.authenticate(user, pass) {
		c.W.OK()
	}
}

func cmdHello(c *Ctx) {
	proto := c.W.Proto()
	args := c.Args
	if len(args) >= 2 {
		v, ok := engine.ParseInt(args[1])
		if !ok {
			c.W.Error("Protocol version is not an integer or out of range")
			return
		}
		if v != 2 && v != 3 {
			c.W.Error("NOPROTO unsupported protocol version")
			return
		}
		proto = int(v)
	}
	var name []byte
	setName := false
	for j := 2; j < len(args); j++ {
		more := len(args) - j - 1
		switch {
		case is(args[j], "AUTH") && more >= 2:
			if !c.authenticate(args[j+1], args[j+2]) {
				return
			}
			j += 2
		case is(args[j], "SETNAME") && more >= 1:
			name, setName = args[j+1], true
			j++
		default:
			c.W.Error("Syntax error in HELLO option '" + string(args[j]) + "'")
			return
		}
	}
	if !c.Client.authed {
		c.W.Error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
		return
	}
	if setName {
		if !validClientName(name) {
			c.W.Error(msgClientName)
			return
		}
		c.Client.setName(name)
	}
	c.W.SetProto(proto)
	c.W.Map(7)
	c.W.BulkString("server")
	c.W.BulkString("redis")
	c.W.BulkString("version")
	c.W.BulkString(RedisVersion)
	c.W.BulkString("proto")
	c.W.Int(int64(proto))
	c.W.BulkString("id")
	c.W.Int(c.Client.ID)
	c.W.BulkString("mode")
	c.W.BulkString("standalone")
	c.W.BulkString("role")
	c.W.BulkString("master")
	c.W.BulkString("modules")
	c.W.Array(0)
}

const msgClientName = "Client names cannot contain spaces, newlines or special characters."

// validClientName allows printable ASCII without spaces, as Redis does.
func validClientName(b []byte) bool {
	for _, ch := range b {
		if ch < '!' || ch > '~' {
			return false
		}
	}
	return true
}

func (cl *Client) setName(b []byte) {
	if len(b) == 0 {
		cl.name.Store(nil)
		return
	}
	s := string(b)
	cl.name.Store(&s)
}

func cmdClientID(c *Ctx) { c.W.Int(c.Client.ID) }

func cmdClientSetName(c *Ctx) {
	if !validClientName(c.Args[2]) {
		c.W.Error(msgClientName)
		return
	}
	c.Client.setName(c.Args[2])
	c.W.OK()
}

func cmdClientGetName(c *Ctx) {
	if n := c.Client.Name(); n != "" {
		c.W.BulkString(n)
	} else {
		c.W.Null()
	}
}

func cmdClientSetInfo(c *Ctx) {
	v := string(c.Args[3])
	for _, ch := range c.Args[3] {
		if ch < '!' || ch > '~' {
			c.W.Error("ERR " + strings.ToUpper(string(c.Args[2])) + " cannot contain spaces, newlines or special characters.")
			return
		}
	}
	switch {
	case is(c.Args[2], "LIB-NAME"):
		c.Client.libName.Store(&v)
	case is(c.Args[2], "LIB-VER"):
		c.Client.libVer.Store(&v)
	default:
		c.W.Error("Unrecognized option '" + string(c.Args[2]) + "'")
		return
	}
	c.W.OK()
}

func cmdClientInfo(c *Ctx) {
	c.W.Verbatim("txt", c.Client.info(time.Now(), true)+"\n")
}

func cmdClientList(c *Ctx) {
	clients := c.Srv.clients.all()
	args := c.Args[2:]
	if len(args) > 0 {
		switch {
		case is(args[0], "TYPE") && len(args) == 2:
			t := strings.ToLower(string(args[1]))
			switch t {
			case "normal", "pubsub", "replica", "slave":
				if t == "replica" {
					t = "slave"
				}
				var sel []*Client
				for _, cl := range clients {
					if cl.typeName() == t {
						sel = append(sel, cl)
					}
				}
				clients = sel
			case "master":
				clients = nil // the link to a master is not a client here
			default:
				c.W.Error("Unknown client type '" + string(args[1]) + "'")
				return
			}
		case is(args[0], "ID") && len(args) >= 2:
			want := map[int64]bool{}
			for _, a := range args[1:] {
				id, ok := engine.ParseInt(a)
				if !ok {
					c.W.Error("Invalid client ID")
					return
				}
				want[id] = true
			}
			var sel []*Client
			for _, cl := range clients {
				if want[cl.ID] {
					sel = append(sel, cl)
				}
			}
			clients = sel
		default:
			c.W.Error(msgSyntax)
			return
		}
	}
	var b strings.Builder
	now := time.Now()
	for _, cl := range clients {
		b.WriteString(cl.info(now, cl == c.Client))
		b.WriteByte('\n')
	}
	c.W.Verbatim("txt", b.String())
}

// cmdClientKill supports the old form (CLIENT KILL addr) and the filter
// form (ID, ADDR, LADDR, SKIPME, TYPE, USER).
func cmdClientKill(c *Ctx) {
	args := c.Args[2:]
	if len(args) == 1 {
		for _, cl := range c.Srv.clients.all() {
			if cl.conn.RemoteAddr() == string(args[0]) {
				c.killClient(cl)
				c.W.OK()
				return
			}
		}
		c.W.Error("No such client")
		return
	}
	if len(args)%2 != 0 {
		c.W.Error(msgSyntax)
		return
	}
	var id int64
	var addr, laddr, user, typ string
	skipMe := true
	for j := 0; j < len(args); j += 2 {
		v := args[j+1]
		switch {
		case is(args[j], "ID"):
			n, ok := engine.ParseInt(v)
			if !ok || n <= 0 {
				c.W.Error("client-id should be greater than 0")
				return
			}
			id = n
		case is(args[j], "ADDR"):
			addr = string(v)
		case is(args[j], "LADDR"):
			laddr = string(v)
		case is(args[j], "USER"):
			user = string(v)
		case is(args[j], "TYPE"):
			typ = strings.ToLower(string(v))
			if typ != "normal" && typ != "master" && typ != "replica" && typ != "slave" && typ != "pubsub" {
				c.W.Error("Unknown client type '" + string(v) + "'")
				return
			}
			if typ == "replica" {
				typ = "slave"
			}
		case is(args[j], "SKIPME"):
			switch {
			case is(v, "YES"):
				skipMe = true
			case is(v, "NO"):
				skipMe = false
			default:
				c.W.Error(msgSyntax)
				return
			}
		default:
			c.W.Error(msgSyntax)
			return
		}
	}
	var byUser *aclUser
	if user != "" {
		if byUser = c.Srv.acl.user(user); byUser == nil {
			c.W.Error("No such user '" + user + "'")
			return
		}
	}
	var n int64
	for _, cl := range c.Srv.clients.all() {
		switch {
		case id != 0 && cl.ID != id,
			addr != "" && cl.conn.RemoteAddr() != addr,
			laddr != "" && cl.conn.LocalAddr() != laddr,
			typ != "" && typ != cl.typeName(),
			byUser != nil && cl.user.Load() != byUser,
			skipMe && cl == c.Client:
			continue
		}
		c.killClient(cl)
		n++
	}
	c.W.Int(n)
}

// killClient closes a client's connection; the caller's own is closed after
// this reply.
func (c *Ctx) killClient(cl *Client) {
	if cl == c.Client {
		cl.conn.CloseAfterReply()
		return
	}
	cl.conn.Kill()
}

// cmdHelp answers a container's HELP (CLIENT HELP, SLOWLOG HELP ...)
// with the text of its entry in the data files (cmddocs), which is
// documentation like the rest of the entry.
func cmdHelp(c *Ctx) {
	help(c, strings.ToUpper(c.Spec.Parent().Name), cmddocs.Load()[c.Spec.FullName()].Help)
}

// help writes a HELP reply in Redis's layout.
func help(c *Ctx, cmd string, lines []string) {
	c.W.Array(len(lines) + 3)
	c.W.Simple(cmd + " <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
	for _, l := range lines {
		c.W.Simple(l)
	}
	c.W.Simple("HELP")
	c.W.Simple("    Prints this help.")
}
