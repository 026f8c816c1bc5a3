package commands

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limitkv/limitkv/acl"
	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/pubsub"
)

// aclCommands: users and permissions.
func aclCommands() []*command {
	return []*command{
		cmd("acl", -2, "", nil).withSub(
			cmd("cat", -2, "noscript loading stale", cmdACLCat),
			cmd("deluser", -3, "admin noscript loading stale", cmdACLDelUser),
			cmd("dryrun", -4, "admin noscript loading stale", cmdACLDryRun),
			cmd("genpass", -2, "noscript loading stale", cmdACLGenPass),
			cmd("getuser", 3, "admin noscript loading stale", cmdACLGetUser),
			cmd("help", 2, "loading stale", cmdHelp),
			cmd("list", 2, "admin noscript loading stale", cmdACLList),
			cmd("load", 2, "admin noscript loading stale may_wait", cmdACLLoad),
			cmd("log", -2, "admin noscript loading stale", cmdACLLog),
			cmd("save", 2, "admin noscript loading stale may_wait may_wait", cmdACLSave),
			cmd("setuser", -3, "admin noscript loading stale", cmdACLSetUser),
			cmd("users", 2, "admin noscript loading stale", cmdACLUsers),
			cmd("whoami", 2, "noscript loading stale", cmdACLWhoami),
		),
	}
}

// ACL: users and the ACL command, as Redis 7.0 has them (package acl
// holds the rules, the ACL LOG and the users files' format). Users live in the aclfile, or in the
// config file's "user" lines, never in snapshots. Every request is checked
// against its client's user in dispatch (execute), again at EXEC for the
// commands a transaction queued, and for each call a script makes.

// aclState is the server's users and ACL LOG.
type aclState struct {
	// cat is the commands the rules of every user name.
	cat *acl.Catalog
	// mu serializes changes to the users (SETUSER, DELUSER, LOAD,
	// requirepass); checks read a user's published rules without it.
	mu    sync.Mutex
	users map[string]*aclUser
	def   *aclUser
	// defaultOpen: the default user is on and needs no password, so new
	// clients are authenticated at once and none needs AUTH.
	defaultOpen atomic.Bool
	// pubsubAll mirrors acl-pubsub-default: new users may use every
	// channel.
	pubsubAll atomic.Bool

	log acl.Log
}

func (a *aclState) init(t *cmdspec.Table) {
	a.cat = acl.NewCatalog(t)
	a.def = &aclUser{name: "default"}
	a.users = map[string]*aclUser{"default": a.def}
	a.publish(a.def, acl.DefaultRules(a.cat))
}

// aclUser is a user: a name and its current rules.
type aclUser struct {
	name  string
	rules atomic.Pointer[acl.Rules]
}

// publish makes r the user's rules.
func (a *aclState) publish(u *aclUser, r *acl.Rules) {
	u.rules.Store(r.Seal())
	if u == a.def {
		a.defaultOpen.Store(r.NoPass() && !r.Off())
	}
}

// user returns the named user, or nil.
func (a *aclState) user(name string) *aclUser {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.users[name]
}

// DefaultUserNoPass reports whether the default user needs no password,
// so that anyone who can connect can run commands as that user.
func (s *Server) DefaultUserNoPass() bool {
	return s.acl.def.rules.Load().NoPass()
}

// authRequired is Redis's authRequired for a client that has not
// authenticated.
func (a *aclState) authRequired() bool { return !a.defaultOpen.Load() }

// setDefaultPassword is requirepass: the default user's only password,
// or nopass when empty.
func (s *Server) setDefaultPassword(pass string) {
	a := &s.acl
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.def.rules.Load().Clone()
	r.Set("resetpass", false)
	if pass != "" {
		r.Set(">"+pass, false)
	} else {
		r.Set("nopass", false)
	}
	a.publish(a.def, r)
}

// authenticate checks a user name and password as Redis's
// ACLCheckUserCredentials does and returns the user, or nil.
func (s *Server) authenticateUser(name, pass []byte) *aclUser {
	u := s.acl.user(string(name))
	if u == nil {
		// Spend the time a real check would, so that timing does not
		// tell which user names exist.
		acl.HashPassword(string(pass))
		return nil
	}
	if !u.rules.Load().CheckPassword(pass) {
		return nil
	}
	return u
}

// killUserClients disconnects the clients authenticated as u, the caller's
// own after this reply.
func (s *Server) killUserClients(u *aclUser, caller *Client) {
	for _, cl := range s.clients.all() {
		if cl.user.Load() != u {
			continue
		}
		if cl == caller {
			cl.conn.CloseAfterReply()
		} else {
			cl.conn.Kill()
		}
	}
}

// dropRevokedSubscribers disconnects the clients of u subscribed to a
// channel or pattern its new rules deny, as Redis does when ACL SETUSER
// takes channels away: the rules' channel patterns match a subscribed
// channel as a glob, a subscribed pattern only literally. The caller's own
// connection closes after this reply. It is called only when
// acl.ChannelsShrunk, so no selector of rules allows every channel and a
// channel is allowed exactly when a pattern of some selector matches it,
// as Redis's check against the union of the selectors' patterns says.
func (s *Server) dropRevokedSubscribers(c *Ctx, u *aclUser, rules *acl.Rules) {
	r := &s.pubsub
	locked := r.RLock(c.held)
	doomed := map[*Client]bool{}
	r.Each(func(k pubsub.Kind, name []byte, cl *Client) {
		if !doomed[cl] && cl.user.Load() == u && !rules.ChannelAllowed(name, k == pubsub.Pattern) {
			doomed[cl] = true
		}
	})
	if locked {
		r.RUnlock()
	}
	for cl := range doomed {
		if cl == c.Client {
			cl.conn.CloseAfterReply()
		} else {
			cl.conn.Kill()
		}
	}
}

// setUser is ACL SETUSER: apply ops to a copy of the user (a new one if
// name is unknown) and publish it only if every op is valid. Subscribers
// of the user to channels it may no longer use are disconnected.
func (s *Server) setUser(c *Ctx, name string, ops []string) error {
	merged, open := acl.MergeSelectorArgs(ops)
	if open >= 0 {
		return errors.New("Unmatched parenthesis in acl selector starting at '" + ops[open] + "'.")
	}
	a := &s.acl
	a.mu.Lock()
	u := a.users[name]
	var r *acl.Rules
	if u != nil {
		r = u.rules.Load().Clone()
	} else {
		r = acl.NewRules(a.cat, a.pubsubAll.Load())
	}
	for _, op := range merged {
		if err := r.Set(op, a.pubsubAll.Load()); err != nil {
			a.mu.Unlock()
			return errors.New("Error in ACL SETUSER modifier '" + op + "': " + err.Error())
		}
	}
	shrunk := false
	if u == nil {
		u = &aclUser{name: name}
		a.users[name] = u
	} else {
		shrunk = acl.ChannelsShrunk(u.rules.Load(), r)
	}
	a.publish(u, r)
	a.mu.Unlock()
	if shrunk {
		s.dropRevokedSubscribers(c, u, r)
	}
	return nil
}

// sortedUsers returns the users by name, as Redis's radix tree lists them.
func (a *aclState) sortedUsers() []*aclUser {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]*aclUser, 0, len(a.users))
	for _, u := range a.users {
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// aclLines returns "user <name> <rules>" for every user, as ACL LIST and
// ACL SAVE give them.
func (s *Server) aclLines() []string {
	var out []string
	for _, u := range s.acl.sortedUsers() {
		out = append(out, acl.UserLine(u.name, u.rules.Load()))
	}
	return out
}

// aclLogAdd records a denial as Redis's addACLLogEntry: the object is the
// command, key, channel or (for auth) the command name as typed; user is
// the user name tried for auth, else the client's user.
func (s *Server) aclLogAdd(cl *Client, reason acl.Result, context acl.Context, object, user string) {
	if user == "" {
		user = cl.userName()
	}
	s.acl.log.Add(acl.LogEntry{Reason: reason, Context: context, Object: object,
		Username: user, Ctime: s.Eng.Now(), ClientInfo: cl.info(time.Now(), true)}, int(s.Cfg.aclLogMax.Load()))
}

// aclDenied refuses a request its user may not run, with Redis's text,
// and logs it.
func (s *Server) aclDenied(cl *Client, spec *cmdspec.Spec, args [][]byte, res acl.Result, pos int) string {
	ctx := acl.CtxToplevel
	if cl.multi {
		ctx = acl.CtxMulti
	}
	switch res {
	case acl.DeniedCmd:
		s.aclLogAdd(cl, res, ctx, spec.FullName(), "")
		return "NOPERM this user has no permissions to run the '" + spec.FullName() + "' command"
	case acl.DeniedKey:
		s.aclLogAdd(cl, res, ctx, string(args[pos]), "")
		return "NOPERM this user has no permissions to access one of the keys used as arguments"
	default:
		s.aclLogAdd(cl, res, ctx, string(args[pos]), "")
		return "NOPERM this user has no permissions to access one of the channels used as arguments"
	}
}

// aclExecDenied is the reply to a queued command that its user may no
// longer run when EXEC runs it.
func aclExecDenied(res acl.Result) string {
	reason := "no permission to access one of the channels used as arguments"
	switch res {
	case acl.DeniedCmd:
		reason = "no permission to execute the command or subcommand"
	case acl.DeniedKey:
		reason = "no permission to touch the specified keys"
	}
	return "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: " + reason
}

// aclScriptDenied is the error of a script's call that its user may not
// make (Redis's getAclErrorMessage).
func aclScriptDenied(res acl.Result) string {
	msg := "can't publish to the channel mentioned in the command"
	switch res {
	case acl.DeniedCmd:
		msg = "can't run this command or subcommand"
	case acl.DeniedKey:
		msg = "can't access at least one of the keys mentioned in the command arguments"
	}
	return "The user executing the script " + msg
}

// checkScriptCall checks a command a script calls against the user of the
// client that runs the script, logging a denial with context lua.
func (s *Server) checkScriptCall(caller *Client, spec *cmdspec.Spec, args [][]byte) string {
	r := caller.aclRules()
	if r == nil {
		return ""
	}
	res, pos := r.Check(spec, args)
	if res == acl.OK {
		return ""
	}
	object := spec.FullName()
	if res != acl.DeniedCmd {
		object = string(args[pos])
	}
	s.aclLogAdd(caller, res, acl.CtxLua, object, "")
	return aclScriptDenied(res)
}

// The ACL command.

// msgACLSubSyntax is Redis's reply when a subcommand's own checks refuse
// its arguments (ACL CAT a b): the subcommand as typed.
func msgACLSubSyntax(c *Ctx) string {
	return "unknown subcommand or wrong number of arguments for '" + trunc(string(c.Args[1]), 128) + "'. Try ACL HELP."
}

func cmdACLSetUser(c *Ctx) {
	name := string(c.Args[2])
	if acl.HasSpaces(name) {
		c.W.Error("Usernames can't contain spaces or null characters")
		return
	}
	ops := make([]string, 0, len(c.Args)-3)
	for _, a := range c.Args[3:] {
		ops = append(ops, string(a))
	}
	if err := c.Srv.setUser(c, name, ops); err != nil {
		c.W.Error("ERR " + err.Error())
		return
	}
	c.W.OK()
}

func cmdACLDelUser(c *Ctx) {
	for _, a := range c.Args[2:] {
		if string(a) == "default" {
			c.W.Error("The 'default' user cannot be removed")
			return
		}
	}
	a := &c.Srv.acl
	var gone []*aclUser
	a.mu.Lock()
	for _, name := range c.Args[2:] {
		if u := a.users[string(name)]; u != nil {
			delete(a.users, u.name)
			u.rules.Store(acl.DeniedRules(a.cat))
			gone = append(gone, u)
		}
	}
	a.mu.Unlock()
	for _, u := range gone {
		c.Srv.killUserClients(u, c.Client)
	}
	c.W.Int(int64(len(gone)))
}

func cmdACLGetUser(c *Ctx) {
	u := c.Srv.acl.user(string(c.Args[2]))
	if u == nil {
		c.W.Null()
		return
	}
	r := u.rules.Load()
	c.W.Map(6)
	c.W.BulkString("flags")
	flags := r.FlagNames()
	c.W.Set(len(flags))
	for _, f := range flags {
		c.W.BulkString(f)
	}
	c.W.BulkString("passwords")
	passwords := r.Passwords()
	c.W.Array(len(passwords))
	for _, p := range passwords {
		c.W.BulkString(p)
	}
	writeSelector := func(i int) {
		commands, keys, channels := r.DescribeSelector(i)
		c.W.BulkString("commands")
		c.W.BulkString(commands)
		c.W.BulkString("keys")
		c.W.BulkString(keys)
		c.W.BulkString("channels")
		c.W.BulkString(channels)
	}
	writeSelector(0)
	c.W.BulkString("selectors")
	c.W.Array(r.Selectors() - 1)
	for i := 1; i < r.Selectors(); i++ {
		c.W.Map(3)
		writeSelector(i)
	}
}

func cmdACLList(c *Ctx) {
	lines := c.Srv.aclLines()
	c.W.Array(len(lines))
	for _, l := range lines {
		c.W.BulkString(l)
	}
}

func cmdACLUsers(c *Ctx) {
	users := c.Srv.acl.sortedUsers()
	c.W.Array(len(users))
	for _, u := range users {
		c.W.BulkString(u.name)
	}
}

func cmdACLWhoami(c *Ctx) {
	if u := c.Client.user.Load(); u != nil {
		c.W.BulkString(u.name)
	} else {
		c.W.Null()
	}
}

const msgNoACLFile = "This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration."

func cmdACLLoad(c *Ctx) {
	path := c.Srv.Cfg.Get("aclfile")
	if path == "" {
		c.W.Error(msgNoACLFile)
		return
	}
	if err := c.Srv.loadACLFile(path, c.Client); err != nil {
		c.W.Error("ERR " + err.Error())
		return
	}
	c.W.OK()
}

func cmdACLSave(c *Ctx) {
	path := c.Srv.Cfg.Get("aclfile")
	if path == "" {
		c.W.Error(msgNoACLFile)
		return
	}
	if err := c.Srv.saveACLFile(path); err != nil {
		c.Srv.Log.Warn("ACL SAVE failed", "file", path, "err", err)
		c.W.Error("There was an error trying to save the ACLs. Please check the server logs for more information")
		return
	}
	c.W.OK()
}

func cmdACLCat(c *Ctx) {
	if len(c.Args) == 2 {
		c.W.Array(len(acl.CategoryOrder))
		for _, cat := range acl.CategoryOrder {
			c.W.BulkString(cat.Names()[0])
		}
		return
	}
	if len(c.Args) != 3 {
		c.W.Error(msgACLSubSyntax(c))
		return
	}
	cat := cmdspec.CategoryByName(strings.ToLower(string(c.Args[2])))
	if cat == 0 {
		c.W.Error("Unknown category '" + trunc(string(c.Args[2]), 128) + "'")
		return
	}
	names := c.Srv.acl.cat.InCategory(cat)
	c.W.Array(len(names))
	for _, n := range names {
		c.W.BulkString(n)
	}
}

func cmdACLGenPass(c *Ctx) {
	bits := int64(256)
	switch len(c.Args) {
	case 2:
	case 3:
		n, ok := engine.ParseInt(c.Args[2])
		if !ok {
			c.W.Error(msgNotInteger)
			return
		}
		bits = n
	default:
		c.W.Error(msgACLSubSyntax(c))
		return
	}
	if bits <= 0 || bits > 4096 {
		c.W.Error("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096")
		return
	}
	chars := (bits + 3) / 4
	raw := make([]byte, (chars+1)/2)
	rand.Read(raw)
	c.W.BulkString(hex.EncodeToString(raw)[:chars])
}

func cmdACLLog(c *Ctx) {
	count := int64(10)
	switch len(c.Args) {
	case 2:
	case 3:
		if is(c.Args[2], "RESET") {
			c.Srv.acl.log.Reset()
			c.W.OK()
			return
		}
		n, ok := engine.ParseInt(c.Args[2])
		if !ok {
			c.W.Error(msgNotInteger)
			return
		}
		count = max(n, 0)
	default:
		c.W.Error(msgACLSubSyntax(c))
		return
	}
	entries := c.Srv.acl.log.Newest(count)
	now := c.Srv.Eng.Now()
	c.W.Array(len(entries))
	for _, e := range entries {
		c.W.Map(7)
		c.W.BulkString("count")
		c.W.Int(e.Count)
		c.W.BulkString("reason")
		c.W.BulkString(acl.ReasonName(e.Reason))
		c.W.BulkString("context")
		c.W.BulkString(e.Context.String())
		c.W.BulkString("object")
		c.W.BulkString(e.Object)
		c.W.BulkString("username")
		c.W.BulkString(e.Username)
		c.W.BulkString("age-seconds")
		c.W.Double(float64(now-e.Ctime) / 1000)
		c.W.BulkString("client-info")
		c.W.BulkString(e.ClientInfo)
	}
}

func cmdACLDryRun(c *Ctx) {
	u := c.Srv.acl.user(string(c.Args[2]))
	if u == nil {
		c.W.Error("User '" + string(c.Args[2]) + "' not found")
		return
	}
	args := c.Args[3:]
	cmd := c.Srv.Table.Lookup(args[0])
	if cmd != nil && len(cmd.Sub) > 0 && len(args) >= 2 {
		cmd = cmd.LookupSub(args[1])
	}
	if cmd == nil {
		c.W.Error("Command '" + string(args[0]) + "' not found")
		return
	}
	if !cmd.ArityOK(len(args)) {
		c.W.Error("wrong number of arguments for '" + cmd.FullName() + "' command")
		return
	}
	switch res, pos := u.rules.Load().Check(cmd, args); res {
	case acl.OK:
		c.W.OK()
	case acl.DeniedCmd:
		c.W.BulkString("This user has no permissions to run the '" + cmd.FullName() + "' command")
	case acl.DeniedKey:
		c.W.BulkString("This user has no permissions to access the '" + string(args[pos]) + "' key")
	default:
		c.W.BulkString("This user has no permissions to access the '" + string(args[pos]) + "' channel")
	}
}

// The aclfile and the config file's user lines.

// LoadUsers sets up the users at start-up, as Redis's
// ACLLoadUsersAtStartup: from the config file's user lines, or from the
// aclfile, not both.
func (s *Server) LoadUsers() error {
	lines := s.Cfg.userLines()
	path := s.Cfg.Get("aclfile")
	if path != "" && len(lines) > 0 {
		return errors.New("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. " +
			"This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.")
	}
	for _, l := range lines {
		if err := s.loadConfigUser(l); err != nil {
			return err
		}
	}
	if path != "" {
		if err := s.loadACLFile(path, nil); err != nil {
			return errors.New("Aborting Redis startup because of ACL errors: " + err.Error())
		}
	}
	return nil
}

// loadConfigUser applies one user line of the config file.
func (s *Server) loadConfigUser(l acl.ConfigUser) error {
	name, ops, err := l.Ops()
	if err != nil {
		return err
	}
	a := &s.acl
	a.mu.Lock()
	defer a.mu.Unlock()
	u := a.users[name]
	var r *acl.Rules
	if u == nil {
		u = &aclUser{name: name}
		r = acl.NewRules(a.cat, a.pubsubAll.Load())
	} else {
		r = u.rules.Load().Clone()
		r.Set("reset", a.pubsubAll.Load())
	}
	if err := l.Apply(r, ops, a.pubsubAll.Load()); err != nil {
		return err
	}
	if r.Off() {
		s.Log.Info("The user '" + name + "' is disabled (there is no 'on' modifier in the user description). Make sure this is not a configuration error.")
	}
	a.users[name] = u
	a.publish(u, r)
	return nil
}

// loadACLFile replaces the users with those of the aclfile, all or
// nothing, as Redis's ACLLoadFromFile: the errors of every line are
// collected, and any error leaves the users as they were. The default
// user keeps its identity (its clients stay); the clients of the other
// old users are disconnected (caller's own after this reply).
func (s *Server) loadACLFile(path string, caller *Client) error {
	a := &s.acl
	users, err := acl.LoadFile(path, a.cat, a.pubsubAll.Load())
	if err != nil {
		return err
	}
	a.mu.Lock()
	old := a.users
	a.users = map[string]*aclUser{"default": a.def}
	defRules := acl.DefaultRules(a.cat)
	for _, l := range users {
		if l.Name == "default" {
			defRules = l.Rules
			continue
		}
		u := &aclUser{name: l.Name}
		a.publish(u, l.Rules)
		a.users[l.Name] = u
	}
	a.publish(a.def, defRules)
	a.mu.Unlock()
	for name, u := range old {
		if name != "default" {
			u.rules.Store(acl.DeniedRules(a.cat))
			s.killUserClients(u, caller)
		}
	}
	return nil
}

// saveACLFile writes every user to the aclfile.
func (s *Server) saveACLFile(path string) error {
	var users []acl.FileUser
	for _, u := range s.acl.sortedUsers() {
		users = append(users, acl.FileUser{Name: u.name, Rules: u.rules.Load()})
	}
	return acl.SaveFile(path, users)
}
