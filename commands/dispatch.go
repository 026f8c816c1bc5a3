package commands

import (
	"context"
	"log/slog"
	"net"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limitkv/limitkv/acl"
	"github.com/limitkv/limitkv/blocking"
	"github.com/limitkv/limitkv/cluster"
	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/migrate"
	"github.com/limitkv/limitkv/observe"
	"github.com/limitkv/limitkv/pubsub"
	"github.com/limitkv/limitkv/ratelimit"
	"github.com/limitkv/limitkv/replication"
	"github.com/limitkv/limitkv/resp"
	"github.com/limitkv/limitkv/scripting"
	"github.com/limitkv/limitkv/tracking"
)

// Server executes requests: it is the resp.Handler of the network server
// and owns everything commands share (engine, config, clients, stats).
type Server struct {
	Eng   *engine.Engine
	Cfg   *Config
	Log   *slog.Logger
	Net   *resp.Server
	Table *cmdspec.Table
	// Repl is the server's place in replication.
	Repl *replication.Node
	// Cluster is the node's cluster bus, nil unless cluster-enabled;
	// clusterOut and clusterIn run what goes to it and comes from it
	// (clusternode.go).
	Cluster    *cluster.Bus
	clusterOut clusterQueue
	clusterIn  clusterQueue
	nodesConf  nodesConfSaver
	// keyExists and keyExistsHeld are existsInDB0 and existsInDB0Held,
	// the routing's key lookups.
	keyExists, keyExistsHeld func(key []byte) bool
	// Hooks wired by main and by persistence.
	Hooks Hooks

	clients  clientRegistry
	pubsub   pubsub.Registry[*Client]
	monitors monitorList   // clients in MONITOR mode (monitor.go)
	notifyOn atomic.Uint32 // keyspace notification classes on (notify.go)
	// Client-side caching (tracking.go): the table, the clients with
	// tracking on, and the effort the table's limit takes (cron's).
	tracking        tracking.Table
	trackingClients atomic.Int64
	trackingEffort  int
	// notifyKinds are the engine events keyspace notifications need;
	// applyNotes adds client-side caching's under notesMu.
	notesMu     sync.Mutex
	notifyKinds engine.NoteKind
	stats       Stats
	auth        authGuard
	acl         aclState
	rl          rlStats            // rate-limit decisions per command, for INFO
	wall        wallClock          // requests' Unix time, from the monotonic clock
	policies    ratelimit.Registry // named rate-limit policies (policy.go)
	ops         opsMeter
	startTime   time.Time
	mem         observe.MemoryMarks
	limits      memoryLimits
	release     memRelease
	scripts     scripting.Runtime
	migrate     migrate.Pool      // MIGRATE's cached connections
	blocks      blocking.Registry // clients blocked on keys (blocking.go)
	pause       pauseState        // CLIENT PAUSE (pause.go)
	// shutdownSpec is SHUTDOWN, which may stop a busy script.
	shutdownSpec *cmdspec.Spec
	// cmds holds, by spec id, the handler and statistics of each command
	// of Table.
	cmds []cmdState

	// Observability: error replies by code (INFO errorstats), SLOWLOG,
	// LATENCY, and requests naming no command (for the metrics).
	errors       observe.ErrorStats
	slowlog      observe.SlowLog
	latency      observe.LatencyMonitor
	unknownCalls atomic.Int64

	// loadState: what a full sync under way lets commands do, a
	// replication.LoadState (replication.go's loadingRefusal).
	loadState atomic.Int32
	// masterClient runs the commands of a master's stream on a replica.
	masterClient *Client
	// noActiveExpire: DEBUG SET-ACTIVE-EXPIRE 0 stopped the sweeper.
	noActiveExpire atomic.Bool
	// beforeLock, if set, sees each request that dispatch or a script
	// is about to lock the shards of, its spec's Prepare done (tests).
	beforeLock func(*Ctx)
}

// Hooks connect commands to parts that live outside this package.
type Hooks struct {
	// Shutdown stops the server; save says whether to take a final
	// snapshot (nil: as configured), force whether to stop even if it
	// fails.
	Shutdown func(save *bool, force bool) error
	// Seal stops snapshots for good: SHUTDOWN NOSAVE is under way, and
	// may have stopped a script halfway (see persist.Store.Seal).
	Seal func()
	// Save takes a snapshot now (SAVE); BgSave starts one in the background
	// and returns BGSAVE's reply (schedule: wait for a running one).
	Save   func() error
	BgSave func(schedule bool) (string, error)
	// Sync returns once every change made before it is on disk, sharing
	// one snapshot with the callers that came meanwhile.
	Sync func(ctx context.Context) error
	// LastSave returns the Unix time of the last successful snapshot.
	LastSave func() int64
	// Persistence describes the snapshots for INFO; nil when persistence
	// is off.
	Persistence func() PersistenceInfo
	// ListenTLS serves TLS on port from now on, instead of the TLS port
	// it served (0: none), for CONFIG SET tls-port.
	ListenTLS func(port int) error
	// Listen serves plain TCP on port from now on, instead of the port
	// it served (0: none), for CONFIG SET port; Bind moves the plain and
	// the TLS listeners to the addresses of bind, for CONFIG SET bind.
	// Each leaves the listeners as they were when it fails.
	Listen func(port int) error
	Bind   func(bind string) error
}

// PersistenceInfo is what INFO's persistence section shows.
type PersistenceInfo struct {
	LastSave       int64 // Unix seconds of the last successful snapshot
	LastOK         bool
	InProgress     bool
	LastDuration   float64 // seconds
	LastKeys       int
	LastBytes      int64
	Errors         int64
	LastError      string
	Snapshots      int64
	Loaded         int
	LoadSeconds    float64
	Interval       string
	PendingChanges int     // keys the next snapshot writes (Server.Persistence fills it in)
	SavedChanges   int64   // the engine's change count on disk (engine.Changes)
	LastPause      float64 // seconds: the longest the last snapshot held a shard
}

// Stats are server-wide counters for INFO.
type Stats struct {
	Connections     atomic.Int64
	Rejected        atomic.Int64
	Commands        atomic.Int64 // of closed connections; live ones count their own
	ProtocolErrors  atomic.Int64
	KeyspaceExpired atomic.Int64
}

// New returns a Server over eng with configuration cfg.
func New(eng *engine.Engine, cfg *Config, log *slog.Logger) *Server {
	s := &Server{Eng: eng, Cfg: cfg, Log: log, startTime: time.Now()}
	s.Table, s.cmds = newTable(commandTable())
	// Bound once: a method value made per request would be allocated.
	s.keyExists, s.keyExistsHeld = s.existsInDB0, s.existsInDB0Held
	s.shutdownSpec = s.Table.Lookup([]byte("shutdown"))
	s.acl.init(s.Table)
	s.scripts.Init(scriptHost{s}, RedisVersion)
	s.clients.init()
	s.pubsub.Init()
	s.tracking.Init()
	s.mem.SetStartup(observe.HeapInUse())
	s.Net = resp.NewServer(s)
	s.Net.OnPanic = func(r any) {
		s.Log.Error("command panicked", "panic", r, "stack", string(debug.Stack()))
	}
	s.Net.OnProtocolError = func(conn *resp.Conn, err *resp.ProtocolError) {
		s.stats.ProtocolErrors.Add(1)
		if err.Msg != "" {
			w := resp.NewWriter(2)
			w.Error(err.Msg)
			s.countError(w.Bytes())
		}
		if err.Msg == "" {
			s.Log.Warn("Closing client that reached max query buffer length: " + clientInfo(conn) +
				" (qbuf initial bytes: " + strconv.Quote(err.Head) + ")")
			return
		}
		s.Log.Debug("protocol error", "err", err.Error(), "client", clientInfo(conn))
	}
	s.Net.BeforeBigArg = func(n int) {
		s.release.beforeBig(int64(n), s.Net.ReleasedBytes()+s.Eng.FreedBytes())
	}
	s.Net.OnOutputLimit = func(conn *resp.Conn) {
		s.Log.Warn("Client " + clientInfo(conn) + " scheduled to be closed ASAP for overcoming of output buffer limits.")
	}
	s.masterClient = &Client{srv: s, authed: true, master: true}
	s.masterClient.multiLen.Store(-1)
	s.initReplication()
	cfg.bind(s)
	if cfg.Get("event-loops") == "yes" {
		n, _ := strconv.Atoi(cfg.Get("io-threads"))
		if err := s.Net.EnableLoops(n); err != nil {
			log.Warn("event loops unavailable: every client gets a goroutine", "err", err)
		}
	}
	return s
}

// Ctx is one request being executed.
type Ctx struct {
	Srv    *Server
	Client *Client
	W      *resp.Writer
	Args   [][]byte
	Now    int64 // ms, read once per request (once per EXEC or script)
	DB     int
	Spec   *cmdspec.Spec
	// held: every shard is already locked (EXEC, scripts), take none.
	held bool
	// script: the request is a script's redis.call (SORT orders a set
	// for it, as Redis does, so that its effects replicate).
	script bool
	buf    [64]byte // scratch for formatting
	// sent is the request as the client sent it when the handler put
	// another command in Args to replicate (GEOADD runs and replicates
	// ZADD): SLOWLOG shows what was sent, as Redis's original_argv.
	sent [][]byte

	// errorsCounted: the handler counted the error replies it wrote
	// itself (a script's reply, with errors at any depth), and
	// failedReply says whether there were any.
	errorsCounted, failedReply bool
	// start is when the request began (monoNow), read with the request's
	// clock; 0 for a command inside EXEC or a script, timed on its own.
	start int64
	// routed is the cluster's routing snapshot that sent the request
	// here by its keys (nil: not routed by keys, or no cluster); refused
	// says that routing it again under its locks sent it elsewhere
	// (rerouted), and that its reply is that redirection.
	routed  *cluster.Routing
	refused bool
	// origin is the client whose request a script's command runs for:
	// client-side caching tracks its reads for it.
	origin *Client
}

// Shard returns the shard that owns key. Dispatch has already locked it.
func (c *Ctx) Shard(key []byte) *engine.Shard { return c.Srv.Eng.ShardFor(key) }

// Held reports whether the request runs with every shard locked.
func (c *Ctx) Held() bool { return c.held }

// Open is called for every new connection.
func (s *Server) Open(conn *resp.Conn) string {
	if s.clients.count() >= int(s.Cfg.maxClients.Load()) {
		s.stats.Rejected.Add(1)
		return "max number of clients reached" // over TLS: dropped unsent, as in Redis
	}
	// As Redis does: a TLS client counts against maxclients from here, its
	// handshake done; protected mode is checked after it, so that the
	// refusal reaches the client.
	cl := s.clients.add(s, conn)
	cl.setDefaultUser() // as createClient does: CLIENT LIST shows its user
	if err := conn.Handshake(); err != nil {
		s.clients.remove(cl)
		s.logHandshakeError(conn, err)
		return "handshake failed" // nothing can be sent
	}
	if s.Cfg.protectedMode.Load() && s.acl.def.rules.Load().NoPass() && !isLoopback(conn.RemoteAddr()) {
		s.clients.remove(cl)
		s.stats.Rejected.Add(1)
		return msgProtectedMode
	}
	s.stats.Connections.Add(1)
	conn.Ctx = cl
	return ""
}

// msgProtectedMode is Redis 7.0's refusal of a client from another
// machine while the default user has no password.
const msgProtectedMode = "DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. " +
	"In this mode connections are only accepted from the loopback interface. " +
	"If you want to connect from external computers to Redis you may adopt one of the following solutions: " +
	"1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. " +
	"2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. " +
	"3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. " +
	"4) Setup a an authentication password for the default user. " +
	"NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside."

// isLoopback reports whether a client's address is local in Redis's sense:
// exactly 127.0.0.1 or ::1 (so 127.0.0.2, though on the loopback
// interface, is not).
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.Equal(net.IPv4(127, 0, 0, 1)) || ip.Equal(net.IPv6loopback))
}

// Closed is called when a connection has gone.
func (s *Server) Closed(conn *resp.Conn) {
	cl, ok := conn.Ctx.(*Client)
	if !ok {
		return
	}
	cl.unwatchAll()
	s.dropSubscriptions(cl)
	s.stopMonitoring(cl)
	s.disableTracking(cl)
	s.stats.Commands.Add(cl.commands.Load())
	s.clients.remove(cl)
}

// Inline reports whether a request may run on an event loop (see
// resp.Inliner): it never waits but for a shard's lock, which nothing
// holds long while no script runs.
func (s *Server) Inline(conn *resp.Conn, args [][]byte) bool {
	if len(args) == 0 {
		return true
	}
	spec := s.Table.Lookup(args[0])
	if spec == nil {
		return true // an unknown command's error
	}
	// The request runs next, on the loop or on the connection's
	// goroutine: execute takes the spec from here instead of looking the
	// name up again.
	conn.Ctx.(*Client).inlined = spec
	flags := spec.Flags
	if len(spec.Sub) > 0 && len(args) >= 2 {
		if sub := spec.LookupSub(args[1]); sub != nil {
			flags = sub.Flags // CLUSTER's subcommands wait for the bus, CLIENT's not
		}
	}
	if flags&(cmdspec.MayWait|cmdspec.Blocking|cmdspec.RunsScript|cmdspec.PubSub|cmdspec.NoAuth) != 0 {
		return false
	}
	// A pause under way: the command may have to wait for its end.
	if s.pause.kind.Load() != pauseOff {
		return false
	}
	// A script under way: the command waits for it, or answers BUSY.
	return !s.scripts.Running()
}

// Serve executes one request from a connection.
func (s *Server) Serve(conn *resp.Conn, args [][]byte) {
	cl := conn.Ctx.(*Client)
	if len(args) == 0 {
		return
	}
	s.request(cl, &conn.W, args)
}

// request executes one request for a client, replying into w.
func (s *Server) request(cl *Client, w *resp.Writer, args [][]byte) {
	// One clock read serves the request, the client's idle time and the
	// start of the command's timing.
	mono := monoNow()
	now := s.clockAtMono(mono)
	cl.lastInteraction.Store(now)
	cl.start = mono
	n := w.Len()
	cl.dispatched = false
	s.execute(cl, w, args, now)
	if cl.asking && !cl.multi && !named(args[0], "asking") {
		cl.asking = false // ASKING admits the next command only
	}
	if b := cl.blocked; b != nil {
		// Outside every lock and the script gate, as the penalty below.
		cl.blocked = nil
		s.awaitBlocked(cl, w, b)
	}
	if !cl.dispatched {
		// Refused before it ran (unknown, arity, NOAUTH, BUSY, ...): its
		// error counts here; run counts those of commands that ran.
		if b := w.Bytes(); len(b) > n && b[n] == '-' {
			s.countError(b[n:])
		}
	}
	if d := cl.penalty; d > 0 {
		// Outside every lock and the script gate: only this connection waits.
		cl.penalty = 0
		s.auth.serve(cl, d)
	}
	// CLIENT REPLY OFF or SKIP: the request's replies are dropped, errors
	// and refusals too, as Redis drops them (its reply to an earlier
	// request that went to the output queue meanwhile stays). SKIP's
	// request is followed by the one whose reply it skips, whatever that
	// one is.
	if (cl.replyOff || cl.replySkip) && w.Len() >= n {
		w.Truncate(n)
	}
	cl.replySkip, cl.replySkipNext = cl.replySkipNext, false
	if cl.trackCaching && !cl.multi && !named(args[0], "client") {
		cl.trackCaching = false // CLIENT CACHING's word is for one command, or one transaction
	}
	s.flushTracking(cl)
}

// execute runs one request for a client, queueing it inside MULTI.
func (s *Server) execute(cl *Client, w *resp.Writer, args [][]byte, now int64) {
	var spec *cmdspec.Spec
	var errMsg string
	if in := cl.inlined; in != nil && len(in.Sub) == 0 && named(args[0], in.Name) && in.ArityOK(len(args)) {
		// Inline found it for this request (a name is one command's only).
		spec = in
	} else {
		spec, errMsg = s.lookup(args)
	}
	cl.inlined = nil
	if errMsg != "" {
		if spec != nil {
			s.cmd(spec).reject.Add(1) // a known command with the wrong arity
		} else {
			s.unknownCalls.Add(1)
		}
		w.Error(errMsg)
		cl.flagTx()
		return
	}
	cl.lastCmd.Store(spec)
	if !cl.authed && spec.Flags&cmdspec.NoAuth == 0 && s.acl.authRequired() {
		s.cmd(spec).reject.Add(1)
		w.Error("NOAUTH Authentication required.")
		cl.flagTx()
		return
	}
	if spec.Flags&cmdspec.Protected != 0 && !s.Cfg.debugEnabled() {
		s.cmd(spec).reject.Add(1)
		w.Error("ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.")
		cl.flagTx()
		return
	}
	if cl.multi && spec.Flags&cmdspec.NoMulti != 0 {
		s.cmd(spec).reject.Add(1)
		w.Error("Command not allowed inside a transaction")
		cl.flagTx()
		return
	}
	// ACL: nothing to check for a user allowed everything (the default
	// user's usual rules); the command, its keys and channels for others.
	if r := cl.aclRules(); r != nil {
		if res, pos := r.Check(spec, args); res != acl.OK {
			s.reject(cl, w, spec, s.aclDenied(cl, spec, args, res, pos))
			return
		}
	}
	// What a script or function declared stands for EVAL's or FCALL's
	// own flags in the checks that follow.
	flags := spec.Flags
	if flags&cmdspec.RunsScript != 0 {
		flags = s.commandFlags(spec, args)
	}
	// Cluster mode: a request for keys another node serves is redirected
	// there, before anything else refuses it, as in Redis.
	var routedBy *cluster.Routing
	if s.Cluster != nil {
		var msg string
		if msg, routedBy = s.clusterRedirect(cl, spec, flags, args); msg != "" {
			s.clusterRefuse(cl, w, spec, msg)
			return
		}
	}
	// maxmemory: evict, then refuse what may grow memory (maxmemory.go).
	if s.rejectOOM(cl, spec, flags, now) {
		s.reject(cl, w, spec, msgOOM)
		return
	}
	if msg := s.replicationRefusal(cl, spec, flags); msg != "" {
		s.reject(cl, w, spec, msg)
		return
	}
	// A RESP2 client in pub/sub mode may only (un)subscribe, PING, QUIT and
	// RESET; in RESP3 any command goes.
	if w.Proto() == 2 && cl.subscribed() && !allowedWhileSubscribed(spec) {
		s.reject(cl, w, spec, msgSubscribedMode(spec))
		return
	}
	// A monitor is a replica to Redis, which may not touch the keyspace.
	if flags&(cmdspec.Write|cmdspec.ReadOnly|cmdspec.MayReplicate) != 0 && cl.monitor.Load() {
		s.reject(cl, w, spec, "ERR Replica can't interact with the keyspace")
		return
	}
	// gated: the command counts itself in flight (see
	// scripting.FlightCounter); not for scripts themselves, nor for the
	// commands allowed while one runs.
	gated := spec.Flags&cmdspec.AllowBusy == 0 && spec.Flags&cmdspec.RunsScript == 0
	counted := false
	defer func() {
		if counted {
			s.scripts.InFlight.Exit(cl.ID)
		}
	}()
admit:
	// A CLIENT PAUSE holds the command back, before it is queued inside
	// MULTI too, as Redis does; the wait is outside the script gate.
	if s.pause.kind.Load() != pauseOff && !s.awaitPause(cl, spec, flags) {
		return
	}
	// While a script runs, commands wait for it and get BUSY once it runs
	// too long (inside MULTI too, before anything is queued, as in Redis);
	// SHUTDOWN NOSAVE then stops it.
	for spec.Flags&cmdspec.AllowBusy == 0 || spec == s.shutdownSpec {
		waited, ok := s.scripts.Await()
		if !ok && (spec != s.shutdownSpec || !s.stopForShutdown(args)) {
			s.reject(cl, w, spec, s.scripts.BusyMsg())
			return
		}
		if waited {
			now = s.Eng.Now() // the script's run took time
			cl.start = monoNow()
		}
		if !gated {
			break
		}
		s.scripts.InFlight.Enter(cl.ID)
		if !s.scripts.Running() {
			counted = true
			break
		}
		s.scripts.InFlight.Exit(cl.ID) // a script started meanwhile: wait for it
	}
	// A pause that waits for the writes in flight to end (a manual
	// failover's, which must know the final offset) began after the
	// check above: this command is counted, so it either ran past this
	// point first or sees the pause now, and waits for it.
	if counted && s.pause.kind.Load() != pauseOff && pausedFor(s.pause.kind.Load(), cl, spec, flags) {
		s.scripts.InFlight.Exit(cl.ID)
		counted = false
		goto admit
	}
	// A full sync that began to replace the keyspace after the check
	// above waits for the commands counted in flight: this one is, so it
	// either ran past this point first or sees the load now.
	if counted && s.loadState.Load() != 0 {
		if msg := s.loadingRefusal(cl, spec); msg != "" {
			s.reject(cl, w, spec, msg)
			return
		}
	}
	if cl.multi && !isTxControl(spec) {
		if flags&cmdspec.DenyOOM != 0 {
			cl.txDenyOOM = true // EXEC is deny-oom now, as Redis's mstate.cmd_flags
		}
		cl.queue(spec, flags, args)
		w.Simple("QUEUED")
		return
	}
	c := &cl.ctx
	*c = Ctx{Srv: s, Client: cl, W: w, Args: args, Now: now, DB: cl.DB(), Spec: spec, start: cl.start, routed: routedBy}
	s.run(c)
	c.Args = nil
}

// reject refuses a request as Redis's rejectCommand does: inside MULTI the
// transaction is flagged, and an EXEC refused this way discards it (if
// any), giving the reason.
func (s *Server) reject(cl *Client, w *resp.Writer, spec *cmdspec.Spec, msg string) {
	s.cmd(spec).reject.Add(1)
	if spec.Name == "exec" {
		cl.discardTx()
		cl.unwatchAll()
		w.Error("EXECABORT Transaction discarded because of: " + msg)
		return
	}
	cl.flagTx()
	w.Error(msg)
}

// run executes a resolved, admitted request: it locks the shards of the
// request's keys (unless they are all held already), runs the handler,
// times it and counts it. The time is the command's own, from dispatch to
// its reply written, waits for shard locks included; network and parsing
// are not. Commands inside EXEC and scripts are run, timed and logged one
// by one, as Redis does.
func (s *Server) run(c *Ctx) {
	c.Client.dispatched = true
	c.Client.commands.Add(1)
	n := c.W.Len()
	start := c.start
	if start == 0 {
		start = monoNow()
	}
	// MONITOR shows a command once it has run; EVAL and FCALL before
	// they run, so that their script's commands come after them.
	scriptFirst := c.Spec.Flags&cmdspec.RunsScript != 0
	if scriptFirst {
		s.feedMonitors(c)
	}
	s.runLocked(c)
	if c.refused {
		// Routed elsewhere once its shards were locked: refused, as if
		// the first routing had sent it there, not a call.
		c.Client.commands.Add(-1)
		c.Client.dispatched = false
		s.cmd(c.Spec).reject.Add(1)
		return
	}
	s.account(c, n, monoNow()-start)
	if !scriptFirst && c.Spec.Flags&(cmdspec.Admin|cmdspec.SkipMonitor) == 0 {
		s.feedMonitors(c)
	}
}

func (s *Server) runLocked(c *Ctx) {
	spec := c.Spec
	if spec.Flags&cmdspec.SelfLock != 0 {
		s.cmd(spec).run(c) // EXEC, scripts, WATCH: they lock and replicate
		// Clients blocked on keys such a command made (SWAPDB) are served
		// now; EXEC and scripts serve theirs before they unlock.
		s.noteWritten(c, nil)
		if !c.held && len(c.Client.ready) > 0 {
			s.Eng.Unlock(s.serveReady(c, 0))
		}
		return
	}
	cmd := s.cmd(spec)
	if cmd.prepare != nil {
		cmd.prepare(c)
	}
	var m engine.Mask
	var pos [8]int
	keys := spec.KeyPositions(c.Args, pos[:0])
	for _, i := range keys {
		m = s.Eng.Add(m, c.Args[i])
	}
	if spec.LockAll != nil && spec.LockAll(c.Args) {
		m = engine.AllShards
	}
	if !c.held {
		if s.beforeLock != nil {
			s.beforeLock(c)
		}
		s.Eng.Lock(m)
		// Serving blocked clients may lock more shards: m is read at the end.
		defer func() { s.Eng.Unlock(m) }()
		// EXEC, routed by the keys it queued, has none of its own: it
		// locks them, and routes them again, itself.
		if c.routed != nil && m != 0 && !c.stillHere() {
			return
		}
	}
	run := cmd.run
	if !s.Repl.Recording() {
		run(c)
	} else {
		if spec.Flags&cmdspec.AsIs != 0 {
			// What others left in these shards (a lazy expiry) goes first:
			// the command that follows stands for its own changes only.
			s.propagate(c, m, false)
		}
		run(c)
		s.propagate(c, m, spec.Flags&cmdspec.AsIs != 0)
	}
	if s.Eng.Notes() != 0 {
		dm := m
		if c.held {
			dm = engine.AllShards
		}
		s.drainNotes(c, dm)
	}
	if spec.Flags&cmdspec.ReadOnly != 0 && s.trackingClients.Load() > 0 {
		s.trackRead(c, keys)
	}
	// Clients blocked on the keys it wrote are served before the locks
	// go (blocking.go); inside EXEC or a script, at their end.
	s.noteWritten(c, keys)
	if !c.held && len(c.Client.ready) > 0 {
		m = s.serveReady(c, m)
	}
}

// clockAtMono returns the server's time, in ms, at a monoNow reading: the
// system's unless DEBUG CLOCK gave the engine a clock of its own.
func (s *Server) clockAtMono(mono int64) int64 {
	if _, system := s.Eng.Clock().(engine.SystemClock); system {
		return s.wall.unixMilli(mono)
	}
	return s.Eng.Now()
}

// wallClock turns monotonic readings into Unix time. time.Now reads two
// clocks, the wall clock and the monotonic one, and a request already
// reads the monotonic one twice to time its command: reading the wall
// clock once a millisecond at most, and adding the monotonic time since,
// leaves one read per request in place of three (perf counted 56 ns per
// INCR in clock_gettime, 5% of its CPU at depth 16). A step of the wall
// clock (NTP, an operator) shows within the millisecond, when the next
// request refreshes the base.
type wallClock struct {
	base atomic.Pointer[wallBase]
}

type wallBase struct {
	mono   int64 // monoNow at the reading
	unixNs int64 // the wall clock then
}

// wallRefresh is how long a base serves.
const wallRefresh = int64(time.Millisecond)

// unixMilli returns the Unix time in ms at mono. A reading from before the
// base (another loop refreshed it meanwhile) is answered from the same
// base, backwards: both clocks ran alike in between.
func (w *wallClock) unixMilli(mono int64) int64 {
	b := w.base.Load()
	if b == nil || mono-b.mono >= wallRefresh {
		t := time.Now()
		b = &wallBase{mono: int64(t.Sub(monoBase)), unixNs: t.UnixNano()}
		w.base.Store(b)
	}
	return (b.unixNs + mono - b.mono) / int64(time.Millisecond)
}

// lookup finds the spec for a request and checks its arity, returning
// Redis's error text when it cannot. The spec of a known command that has
// the wrong arity comes back along with the error, so that the refusal
// counts as that command's rejected call, as in Redis.
func (s *Server) lookup(args [][]byte) (*cmdspec.Spec, string) {
	spec := s.findSpec(args)
	switch {
	case spec == nil && s.Table.Lookup(args[0]) == nil:
		return nil, unknownCommand(args)
	case spec == nil:
		return nil, "unknown subcommand '" + trunc(string(args[1]), 128) + "'. Try " + strings.ToUpper(string(args[0])) + " HELP."
	case !spec.ArityOK(len(args)):
		return spec, "wrong number of arguments for '" + spec.FullName() + "' command"
	}
	return spec, ""
}

// named reports whether b is the command name (lower case) in any case.
func named(b []byte, name string) bool {
	if len(b) != len(name) {
		return false
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != name[i] {
			return false
		}
	}
	return true
}

// findSpec finds the command args name, as Redis's lookupCommand does: a
// container with a second argument is looked into for the subcommand
// (nil if it has none of that name); the arity is not checked.
func (s *Server) findSpec(args [][]byte) *cmdspec.Spec {
	spec := s.Table.Lookup(args[0])
	if spec != nil && len(spec.Sub) > 0 && len(args) >= 2 {
		return spec.LookupSub(args[1])
	}
	return spec
}

// unknownCommand builds Redis's reply to an unknown command: the first
// arguments quoted, 128 characters of them at most.
func unknownCommand(args [][]byte) string {
	var quoted []byte
	for i := 1; i < len(args) && len(quoted) < 128; i++ {
		a := args[i]
		if lim := 128 - len(quoted); len(a) > lim {
			a = a[:lim]
		}
		quoted = append(quoted, '\'')
		quoted = append(quoted, a...)
		quoted = append(quoted, '\'', ' ')
	}
	return "unknown command '" + trunc(string(args[0]), 128) + "', with args beginning with: " + string(quoted)
}

func trunc(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func isTxControl(s *cmdspec.Spec) bool {
	switch s.FullName() {
	case "exec", "discard", "multi", "watch", "quit", "reset":
		return true
	}
	return false
}
