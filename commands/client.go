package commands

import (
	"github.com/limitkv/limitkv/cluster"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limitkv/limitkv/acl"
	"github.com/limitkv/limitkv/blocking"
	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/pubsub"
	"github.com/limitkv/limitkv/replication"
	"github.com/limitkv/limitkv/resp"
	"github.com/limitkv/limitkv/scripting"
)

// Client is the server's state for one connection. Fields read by other
// connections (CLIENT LIST, INFO) are atomic; the rest belong to the
// connection's own goroutine.
type Client struct {
	ID      int64
	conn    *resp.Conn
	srv     *Server
	created time.Time

	db              atomic.Int32
	name            atomic.Pointer[string]
	libName, libVer atomic.Pointer[string]
	lastInteraction atomic.Int64 // Unix ms
	lastCmd         atomic.Pointer[cmdspec.Spec]
	commands        atomic.Int64
	multiLen        atomic.Int32 // queued commands, -1 outside MULTI

	// Client-side caching (tracking.go): the mode (nil: off), whether
	// its redirect client is gone, CLIENT CACHING's word for the next
	// command, and the invalidations its own request made, sent after
	// the reply.
	track        atomic.Pointer[trackMode]
	trackBroken  atomic.Bool
	trackCaching bool
	trackPending []pendingInvalidation
	multiMem     atomic.Int64 // bytes of the queued commands' arguments

	// user is the ACL user the client runs as; authed is Redis's
	// c->authenticated (set at connect when the default user needs no
	// password, or by AUTH and HELLO AUTH).
	user   atomic.Pointer[aclUser]
	authed bool
	// dispatched: the current request ran (Server.run), rather than being
	// refused or queued.
	dispatched bool
	// inlined is the spec Inline found for the request about to run,
	// taken (and cleared) by execute.
	inlined *cmdspec.Spec
	start   int64 // when the current request began (monoNow)
	// authFails counts consecutive failed AUTHs; penalty is the delay the
	// last one earned, served by Serve after the command (authGuard).
	authFails int
	penalty   time.Duration

	// Cluster mode (cluster.go): asking is ASKING's one-request pass
	// into an importing slot, readOnly READONLY's leave to read from a
	// replica; route is the routing of the current request, kept for its
	// room.
	asking, readOnly bool
	route            cluster.Query

	// Transaction state.
	multi    bool
	txFailed bool // a command failed to queue: EXEC answers EXECABORT
	// txDenyOOM: a queued command may grow memory, so EXEC may not run
	// over maxmemory. oomAtStart: memory was over maxmemory when the
	// current request began (Redis's pre_command_oom_state, for scripts).
	txDenyOOM  bool
	oomAtStart bool
	queued     []queuedCmd
	watch      engine.Watch
	watching   []watchedKey

	// Replication (replication.go): the client's batch of effects, the
	// stream's offset after its last write (WAIT), what it said in
	// REPLCONF, and, once it is a replica, its session; master marks the
	// internal client that runs a master's stream.
	fx      *replication.Batch
	woff    int64
	hs      replication.Handshake
	session *replication.Session
	replica atomic.Bool
	master  bool

	// Blocking pops (blocking.go): blocked is the waiter the current
	// request registered, for request to wait on; blocking the same for
	// other goroutines (CLIENT UNBLOCK, CLIENT LIST) while it waits;
	// ready the keys its commands made ready, to serve at their end.
	// paused: waiting for a CLIENT PAUSE to end; noEvict: CLIENT NO-EVICT.
	blocked  *waiter
	blocking atomic.Pointer[blocking.Waiter]
	ready    []blocking.ReadyKey
	paused   atomic.Bool
	noEvict  atomic.Bool

	// monitor: in MONITOR mode (monitor.go). replyOff, replySkip and
	// replySkipNext: CLIENT REPLY OFF, and SKIP's skip of the request
	// being served and of the next one (own goroutine only).
	monitor                            atomic.Bool
	replyOff, replySkip, replySkipNext bool

	ps   pubsub.Subs    // pub/sub subscriptions (pubsub.go)
	ctx  Ctx            // reused for every request
	rl   rlScratch      // rate-limit decisions' buffers
	eval scripting.Call // this client's EVAL while it waits for the combiner
}

type queuedCmd struct {
	spec *cmdspec.Spec
	args [][]byte
	// flags are those it was admitted by (commandFlags), which EXEC is
	// admitted by in turn.
	flags cmdspec.Flag
}

type watchedKey struct {
	db  int
	key string
}

// aclRules returns the rules the client's requests are checked against,
// or nil when they need no check: its user may do everything (the
// default user's usual rules), or it has no user, as an internal client
// (Redis's NULL user).
func (cl *Client) aclRules() *acl.Rules {
	u := cl.user.Load()
	if u == nil {
		return nil
	}
	if r := u.rules.Load(); !r.Open() {
		return r
	}
	return nil
}

// userName is the client's user name, as CLIENT LIST shows it.
func (cl *Client) userName() string {
	if u := cl.user.Load(); u != nil {
		return u.name
	}
	return "(superuser)"
}

// setDefaultUser makes the client the default user's, authenticated if
// that user needs no password (at connect and RESET).
func (cl *Client) setDefaultUser() {
	a := &cl.srv.acl
	cl.user.Store(a.def)
	cl.authed = a.defaultOpen.Load()
	cl.conn.SetAuthenticated(cl.authed)
}

// DB returns the selected database.
func (cl *Client) DB() int { return int(cl.db.Load()) }

// Name returns the name set with CLIENT SETNAME, or "".
func (cl *Client) Name() string {
	if p := cl.name.Load(); p != nil {
		return *p
	}
	return ""
}

func loadString(p *atomic.Pointer[string]) string {
	if v := p.Load(); v != nil {
		return *v
	}
	return ""
}

// flagTx marks the open transaction as failed, as Redis does for a command
// refused while queueing.
func (cl *Client) flagTx() {
	if cl.multi {
		cl.txFailed = true
	}
}

// queue adds a command to the open transaction. The request's arguments
// point into the connection's read buffer, so it keeps a copy.
func (cl *Client) queue(spec *cmdspec.Spec, flags cmdspec.Flag, args [][]byte) {
	cl.queued = append(cl.queued, queuedCmd{spec: spec, args: cl.conn.KeepArgs(args), flags: flags})
	cl.multiLen.Store(int32(len(cl.queued)))
	n := int64(len(args)) * 24
	for _, a := range args {
		n += int64(len(a))
	}
	cl.multiMem.Add(n)
}

// discardTx leaves MULTI state.
func (cl *Client) discardTx() {
	cl.multi = false
	cl.txFailed = false
	cl.txDenyOOM = false
	clear(cl.queued)
	cl.queued = cl.queued[:0]
	cl.multiLen.Store(-1)
	cl.multiMem.Store(0)
}

// unwatchAll drops every WATCH of the client.
func (cl *Client) unwatchAll() { cl.unwatch(false) }

// unwatch drops every WATCH of the client; held says the caller holds
// every shard lock (UNWATCH queued in a transaction runs inside EXEC).
func (cl *Client) unwatch(held bool) {
	if len(cl.watching) == 0 {
		return
	}
	eng := cl.srv.Eng
	for _, wk := range cl.watching {
		k := []byte(wk.key)
		s := eng.ShardFor(k)
		if !held {
			s.Lock()
		}
		s.RemoveWatch(wk.db, k, &cl.watch)
		if !held {
			s.Unlock()
		}
	}
	cl.watching = cl.watching[:0]
	cl.watch.Reset()
}

// flags returns CLIENT LIST's flags field.
func (cl *Client) flags() string {
	var f string
	if cl.monitor.Load() {
		f += "O"
	}
	if cl.replica.Load() {
		f += "S"
	}
	if cl.inPubsubMode() {
		f += "P"
	}
	if cl.multiLen.Load() >= 0 {
		f += "x"
	}
	if cl.blocking.Load() != nil || cl.paused.Load() {
		f += "b"
	}
	if m := cl.track.Load(); m != nil {
		f += "t"
		if cl.trackBroken.Load() {
			f += "R"
		}
		if m.bcast {
			f += "B"
		}
	}
	if cl.noEvict.Load() {
		f += "e"
	}
	if f == "" {
		f = "N"
	}
	return f
}

// typeName is the client's type for CLIENT LIST and CLIENT KILL's TYPE
// filter.
func (cl *Client) typeName() string {
	if cl.replica.Load() {
		return "slave"
	}
	if cl.inPubsubMode() {
		return "pubsub"
	}
	return "normal"
}

// info formats the client as one CLIENT LIST line; serving says that
// the caller is serving cl's request, whose buffers it reads as they are
// while it runs (resp.Conn.ServingStats).
func (cl *Client) info(now time.Time, serving bool) string {
	var b strings.Builder
	cmd := "NULL"
	if s := cl.lastCmd.Load(); s != nil {
		cmd = s.FullName()
	}
	last := cl.lastInteraction.Load()
	idle := (now.UnixMilli() - last) / 1000
	if idle < 0 {
		idle = 0
	}
	w := func(k, v string) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(v)
	}
	i := func(n int64) string { return strconv.FormatInt(n, 10) }
	w("id", i(cl.ID))
	w("addr", cl.conn.RemoteAddr())
	w("laddr", cl.conn.LocalAddr())
	w("fd", i(int64(cl.conn.FD())))
	w("name", cl.Name())
	w("age", i(int64(now.Sub(cl.created)/time.Second)))
	w("idle", i(idle))
	w("flags", cl.flags())
	w("db", i(int64(cl.DB())))
	sub, psub, ssub := cl.pubsubCounts()
	w("sub", i(int64(sub)))
	w("psub", i(int64(psub)))
	w("ssub", i(int64(ssub)))
	w("multi", i(int64(cl.multiLen.Load())))
	// The connection's buffers, as resp.ConnStats describes them; omem is
	// all unsent output, the figure client-output-buffer-limit checks.
	st := cl.conn.Stats()
	if serving {
		st = cl.conn.ServingStats()
	}
	w("qbuf", i(st.QueryBuf))
	w("qbuf-free", i(st.QueryBufFree))
	w("argv-mem", i(st.ArgvMem))
	w("multi-mem", i(cl.multiMem.Load()))
	w("rbs", i(st.ReadBuf))
	w("rbp", i(st.ReadBufPeak))
	w("obl", i(st.OutBuf))
	w("oll", i(st.OutBlocks))
	w("omem", i(st.OutMem))
	w("tot-mem", i(st.TotalMem+cl.multiMem.Load()))
	w("events", "r")
	w("cmd", cmd)
	w("user", cl.userName())
	redir := int64(-1)
	if m := cl.track.Load(); m != nil {
		redir = m.redirect
	}
	w("redir", strconv.FormatInt(redir, 10))
	w("resp", i(int64(cl.conn.Proto())))
	w("lib-name", loadString(&cl.libName))
	w("lib-ver", loadString(&cl.libVer))
	return b.String()
}

// clientInfo is a connection's CLIENT LIST line, for the log.
func clientInfo(conn *resp.Conn) string {
	if cl, ok := conn.Ctx.(*Client); ok {
		return cl.info(time.Now(), false)
	}
	return "addr=" + conn.RemoteAddr() + " laddr=" + conn.LocalAddr()
}

// clientRegistry holds the connected clients.
type clientRegistry struct {
	mu     sync.Mutex
	byID   map[int64]*Client
	nextID atomic.Int64
	n      atomic.Int64
}

func (r *clientRegistry) init() { r.byID = make(map[int64]*Client) }

func (r *clientRegistry) count() int { return int(r.n.Load()) }

// get returns the connected client with id, nil if there is none.
func (r *clientRegistry) get(id int64) *Client {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byID[id]
}

func (r *clientRegistry) add(s *Server, conn *resp.Conn) *Client {
	cl := &Client{ID: r.nextID.Add(1), conn: conn, srv: s, created: time.Now()}
	cl.lastInteraction.Store(cl.created.UnixMilli())
	cl.multiLen.Store(-1)
	r.mu.Lock()
	r.byID[cl.ID] = cl
	r.mu.Unlock()
	r.n.Add(1)
	return cl
}

func (r *clientRegistry) remove(cl *Client) {
	r.mu.Lock()
	if _, ok := r.byID[cl.ID]; ok {
		delete(r.byID, cl.ID)
		r.n.Add(-1)
	}
	r.mu.Unlock()
}

// all returns the clients ordered by ID.
func (r *clientRegistry) all() []*Client {
	r.mu.Lock()
	out := make([]*Client, 0, len(r.byID))
	for _, cl := range r.byID {
		out = append(out, cl)
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// cmdClientUnblock ends another client's block: as a timeout (its null
// reply), or with an error.
func cmdClientUnblock(c *Ctx) {
	if len(c.Args) > 4 {
		c.W.Error(subcommandSyntax(c))
		return
	}
	withError := false
	if len(c.Args) == 4 {
		switch a := c.Args[3]; {
		case is(a, "TIMEOUT"):
		case is(a, "ERROR"):
			withError = true
		default:
			c.W.Error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
			return
		}
	}
	id, ok := engine.ParseInt(c.Args[2])
	if !ok {
		c.W.Error(msgNotInteger)
		return
	}
	s := c.Srv
	s.clients.mu.Lock()
	target := s.clients.byID[id]
	s.clients.mu.Unlock()
	if target == nil {
		c.W.Int(0)
		return
	}
	bw := target.blocking.Load()
	if bw == nil || !s.blocks.Claim(bw) {
		c.W.Int(0)
		return
	}
	w := waiterOf(bw)
	switch {
	case withError:
		w.out.Error("UNBLOCKED client unblocked via CLIENT UNBLOCK")
	case w.op == opWait:
		w.out.Int(int64(s.Repl.CountAcked(w.woff)))
		s.cmd(w.spec).failed.Add(1)
	default:
		w.out.NullArray()
		s.cmd(w.spec).failed.Add(1) // as Redis's updateStatsOnUnblock(..., had_errors=1)
	}
	bw.Wake()
	c.W.Int(1)
}

// subcommandSyntax is Redis's error for a CLIENT subcommand given a
// number of arguments its table arity allows but it does not take.
func subcommandSyntax(c *Ctx) string {
	return "unknown subcommand or wrong number of arguments for '" + trunc(string(c.Args[1]), 128) + "'. Try CLIENT HELP."
}
