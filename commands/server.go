package commands

import (
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/observe"
	"github.com/limitkv/limitkv/pubsub"
	"github.com/limitkv/limitkv/replication"
)

// serverCommands: the server's own commands.
func serverCommands() []*command {
	return []*command{
		cmd("info", -1, "loading stale", cmdInfo),
		cmd("config", -2, "", nil).withSub(
			cmd("get", -3, "admin noscript loading stale", cmdConfigGet),
			cmd("help", 2, "loading stale", cmdHelp),
			cmd("resetstat", 2, "admin noscript loading stale", cmdConfigResetStat),
			cmd("rewrite", 2, "admin noscript loading stale may_wait", cmdConfigRewrite),
			cmd("set", -4, "admin noscript loading stale may_wait", cmdConfigSet),
		),
		cmd("time", 1, "loading stale fast", cmdTime),
		cmd("shutdown", -1, "admin noscript loading stale no_multi allow_busy may_wait", cmdShutdown),
		cmd("debug", -2, "admin noscript loading stale protected may_wait", cmdDebug),
		cmd("memory", -2, "", nil).withSub(
			cmd("doctor", 2, "", cmdMemoryDoctor),
			cmd("help", 2, "loading stale", cmdHelp),
			cmd("malloc-stats", 2, "", cmdMemoryMallocStats),
			cmd("purge", 2, "may_wait", cmdMemoryPurge),
			cmd("stats", 2, "", cmdMemoryStats),
			cmd("usage", -3, "readonly", cmdMemoryUsage),
		),
		cmd("object", -2, "", nil).withSub(
			cmd("encoding", 3, "readonly", cmdObjectEncoding),
			cmd("freq", 3, "readonly", cmdObjectFreq),
			cmd("help", 2, "loading stale", cmdHelp),
			cmd("idletime", 3, "readonly", cmdObjectIdleTime),
			cmd("refcount", 3, "readonly", cmdObjectRefCount),
		),
	}
}

// RedisVersion is the Redis release whose behaviour limitkv reproduces;
// clients read it from INFO and HELLO to decide what they may send.
const RedisVersion = "7.0.15"

// Version is limitkv's own version, set at build time.
var Version = "0.1.0"

func cmdTime(c *Ctx) {
	now := time.Now()
	c.W.Array(2)
	c.W.BulkInt(now.Unix())
	c.W.BulkInt(int64(now.Nanosecond() / 1000))
}

func cmdConfigGet(c *Ctx) {
	var pats []string
	for _, a := range c.Args[2:] {
		pats = append(pats, string(a))
	}
	pairs := c.Srv.Cfg.Matching(pats)
	c.W.Map(len(pairs))
	for _, p := range pairs {
		c.W.BulkString(p[0])
		c.W.BulkString(p[1])
	}
}

func cmdConfigSet(c *Ctx) {
	if len(c.Args)%2 != 0 {
		c.W.Error(msgSyntax)
		return
	}
	var pairs [][2]string
	for i := 2; i < len(c.Args); i += 2 {
		pairs = append(pairs, [2]string{string(c.Args[i]), string(c.Args[i+1])})
	}
	if err := c.Srv.Cfg.Set(pairs, false); err != nil {
		c.W.Error(err.Error())
		return
	}
	c.W.OK()
}

func cmdConfigResetStat(c *Ctx) {
	s := c.Srv
	s.stats.Connections.Store(0)
	s.stats.Rejected.Store(0)
	s.stats.Commands.Store(0)
	s.stats.ProtocolErrors.Store(0)
	s.auth.denied.Store(0)
	s.Eng.ResetEvicted()
	s.rl.reset()
	s.policies.ResetCounts()
	s.errors.Reset()
	s.unknownCalls.Store(0)
	for _, cl := range s.clients.all() {
		cl.commands.Store(0)
	}
	for i := range s.cmds {
		x := &s.cmds[i]
		x.calls.Reset()
		x.failed.Store(0)
		x.reject.Store(0)
		x.hist.Reset()
	}
	s.Eng.ResetCounters(c.held)
	c.W.OK()
}

func cmdConfigRewrite(c *Ctx) {
	if c.Srv.Cfg.File() == "" {
		c.W.Error("The server is running without a config file")
		return
	}
	if err := c.Srv.Cfg.Rewrite(); err != nil {
		c.W.Error("Rewriting config file: " + err.Error())
		return
	}
	c.W.OK()
}

// cmdShutdown: SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]. On success the
// connection simply closes, as with Redis.
func cmdShutdown(c *Ctx) {
	var save *bool
	abort, force := false, false
	for _, a := range c.Args[1:] {
		switch {
		case is(a, "NOSAVE") && save == nil:
			v := false
			save = &v
		case is(a, "SAVE") && save == nil:
			v := true
			save = &v
		case is(a, "FORCE"):
			force = true
		case is(a, "NOW"):
		case is(a, "ABORT"):
			abort = true
		default:
			c.W.Error(msgSyntax)
			return
		}
	}
	if abort {
		if len(c.Args) != 2 {
			c.W.Error(msgSyntax)
			return
		}
		c.W.Error("No shutdown in progress.")
		return
	}
	if c.Srv.Hooks.Shutdown == nil {
		c.W.Error("shutdown is not available")
		return
	}
	if err := c.Srv.Hooks.Shutdown(save, force); err != nil {
		c.W.Error("Errors trying to SHUTDOWN. Check logs.")
		return
	}
	c.Client.conn.CloseAfterReply()
}

// cmdDebug is only available with enable-debug-command. Besides a few of
// Redis's subcommands it drives the server's clock, so black-box tests can
// move time: DEBUG CLOCK SET <ms> | ADVANCE <ms> | REAL.
func cmdDebug(c *Ctx) {
	sub := c.Args[1]
	switch {
	case is(sub, "SLEEP") && len(c.Args) == 3:
		f, ok := c.Float(2)
		if !ok {
			return
		}
		time.Sleep(time.Duration(f * float64(time.Second)))
		c.W.OK()
	case is(sub, "CLOCK") && len(c.Args) >= 3:
		eng := c.Srv.Eng
		switch {
		case is(c.Args[2], "REAL") && len(c.Args) == 3:
			eng.SetClock(engine.SystemClock{})
		case is(c.Args[2], "SET") && len(c.Args) == 4:
			ms, ok := c.Int(3)
			if !ok {
				return
			}
			eng.SetClock(engine.NewManualClock(ms))
		case is(c.Args[2], "ADVANCE") && len(c.Args) == 4:
			ms, ok := c.Int(3)
			if !ok {
				return
			}
			mc, isManual := eng.Clock().(*engine.ManualClock)
			if !isManual {
				mc = engine.NewManualClock(eng.Now())
				eng.SetClock(mc)
			}
			mc.Advance(ms)
		default:
			c.W.Error(msgSyntax)
			return
		}
		c.W.Int(c.Srv.Eng.Now())
	case is(sub, "DIGEST") && len(c.Args) == 2:
		c.W.BulkString(c.Srv.digest(c))
	case is(sub, "DIGEST-VALUE"):
		c.W.Array(len(c.Args) - 2)
		for _, key := range c.Args[2:] {
			c.W.BulkString(c.Srv.digestKey(c, key))
		}
	case is(sub, "ERROR") && len(c.Args) == 3:
		// The text as the error, without a code added, for clients' tests
		// of their error handling. Redis sends it outside its error
		// counters, and so does this.
		c.W.ErrorVerbatim(string(c.Args[2]))
		c.errorsCounted, c.failedReply = true, false
	case is(sub, "LOG") && len(c.Args) == 3:
		c.Srv.Log.Warn("DEBUG LOG: " + string(c.Args[2]))
		c.W.OK()
	case is(sub, "PROTOCOL") && len(c.Args) == 3:
		debugProtocol(c, c.Args[2])
	case is(sub, "SET-ACTIVE-EXPIRE") && len(c.Args) == 3:
		n, ok := c.Int(2)
		if !ok {
			return
		}
		c.Srv.noActiveExpire.Store(n == 0)
		c.W.OK()
	case is(sub, "HELP"):
		help(c, "DEBUG", []string{
			"SLEEP <seconds>", "    Stop the server for <seconds>.",
			"CLOCK SET <ms>|ADVANCE <ms>|REAL", "    Freeze the server's clock at <ms>, move it, or go back to real time.",
			"DIGEST", "    Output a hex signature representing the current DB content.",
			"DIGEST-VALUE <key> [<key> ...]", "    Output a hex signature of the values of all the specified keys.",
			"ERROR <string>", "    Return a Redis protocol error with <string> as message. Useful for clients",
			"    unit tests to simulate Redis errors.",
			"LOG <message>", "    Write <message> to the server log.",
			"PROTOCOL <type>", "    Reply with a test value of the specified type. <type> can be: string,",
			"    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
			"    true, false.",
			"SET-ACTIVE-EXPIRE <0|1>", "    Setting it to 0 disables expiring keys in background when they are not accessed (otherwise the Redis behavior). Setting it to 1 reenables back the default.",
		})
	default:
		c.W.Error("unknown subcommand '" + string(sub) + "'. Try DEBUG HELP.")
	}
}

// debugProtocol is DEBUG PROTOCOL: a sample reply of each RESP type, the
// values Redis sends, for clients' and redis-cli's protocol tests.
func debugProtocol(c *Ctx, name []byte) {
	w := c.W
	switch {
	case is(name, "STRING"):
		w.BulkString("Hello World")
	case is(name, "INTEGER"):
		w.Int(12345)
	case is(name, "DOUBLE"):
		w.Double(3.141)
	case is(name, "BIGNUM"):
		w.BigNumber("1234567999999999999999999999999999999")
	case is(name, "NULL"):
		w.Null()
	case is(name, "ARRAY"):
		w.Array(3)
		w.Int(0)
		w.Int(1)
		w.Int(2)
	case is(name, "SET"):
		w.Set(3)
		w.Int(0)
		w.Int(1)
		w.Int(2)
	case is(name, "MAP"):
		w.Map(3)
		for j := int64(0); j < 3; j++ {
			w.Int(j)
			w.Bool(j == 1)
		}
	case is(name, "ATTRIB"):
		if w.Proto() == 3 {
			w.Attribute(1)
			w.BulkString("key-popularity")
			w.Array(2)
			w.BulkString("key:123")
			w.Int(90)
		}
		// An attribute is not a reply: a real one follows it.
		w.BulkString("Some real reply following the attribute")
	case is(name, "PUSH"):
		if w.Proto() != 3 {
			w.Error("RESP2 is not supported by this command")
			return
		}
		w.Push(2)
		w.BulkString("server-cpu-usage")
		w.Int(42)
		// A push is not a reply either: one follows it for clients that
		// skip pushes.
		w.BulkString("Some real reply following the push reply")
	case is(name, "TRUE"):
		w.Bool(true)
	case is(name, "FALSE"):
		w.Bool(false)
	case is(name, "VERBATIM"):
		w.Verbatim("txt", "This is a verbatim\nstring")
	default:
		w.Error("Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false")
	}
}

// digest is DEBUG DIGEST: a signature of the whole keyspace, every key's
// name, value and expiry, the same whatever order the keys are in, so that
// a master and its replicas can be compared. Forty zeros when it is empty,
// as in Redis (whose values differ: its signature covers its encodings).
func (s *Server) digest(c *Ctx) string {
	var sum [sha1.Size]byte
	var buf []byte
	eng := s.Eng
	if !c.held {
		eng.Lock(engine.AllShards)
		defer eng.Unlock(engine.AllShards)
	}
	for db := 0; db < eng.Databases(); db++ {
		for i := 0; i < engine.Shards; i++ {
			sh := eng.Shard(i)
			sh.Keys(db, 0, math.MaxInt, c.Now, func(e engine.Entry) {
				buf = binary.AppendUvarint(buf[:0], uint64(db))
				buf = binary.AppendUvarint(buf, uint64(len(e.Key())))
				buf = append(buf, e.Key()...)
				buf, _ = engine.AppendValue(buf, sh, e)
				h := sha1.Sum(buf)
				for j := range sum {
					sum[j] ^= h[j]
				}
			})
		}
	}
	return hex.EncodeToString(sum[:])
}

// digestKey is one key's DEBUG DIGEST-VALUE: a signature of its value and
// expiry, forty zeros when it does not exist.
func (s *Server) digestKey(c *Ctx, key []byte) string {
	sh := c.Shard(key)
	if !c.held {
		sh.Lock()
		defer sh.Unlock()
	}
	e, ok := sh.Find(c.DB, key, c.Now)
	if !ok {
		return strings.Repeat("0", 2*sha1.Size)
	}
	v, _ := engine.AppendValue(nil, sh, e)
	h := sha1.Sum(v)
	return hex.EncodeToString(h[:])
}

func cmdMemoryUsage(c *Ctx) {
	if len(c.Args) != 3 && !(len(c.Args) == 5 && is(c.Args[3], "SAMPLES")) {
		c.W.Error(msgSyntax)
		return
	}
	if len(c.Args) == 5 {
		if _, ok := c.Int(4); !ok {
			return
		}
	}
	s := c.Shard(c.Args[2])
	e, ok := s.Find(c.DB, c.Args[2], c.Now)
	if !ok {
		c.W.Null()
		return
	}
	c.W.Int(s.MemoryUsage(e))
}

func cmdMemoryStats(c *Ctx) {
	m := readMemory(c.Srv)
	replicas, normal := c.Srv.Net.ClientMemory()
	pairs := []struct {
		k string
		v int64
	}{
		{"peak.allocated", m.peak}, {"total.allocated", m.used}, {"startup.allocated", m.startup},
		{"clients.slaves", replicas}, {"clients.normal", normal},
		{"dataset.bytes", m.dataset}, {"keys.count", int64(c.Srv.Eng.TotalKeys(c.held))},
	}
	c.W.Map(len(pairs))
	for _, p := range pairs {
		c.W.BulkString(p.k)
		c.W.Int(p.v)
	}
}

func cmdMemoryDoctor(c *Ctx) {
	c.W.Verbatim("txt", "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.")
}

// cmdMemoryPurge collects garbage and hands free pages back to the system at
// once, rather than waiting for Go's background scavenger.
func cmdMemoryPurge(c *Ctx) {
	debug.FreeOSMemory()
	c.W.OK()
}

func cmdMemoryMallocStats(c *Ctx) {
	c.W.Verbatim("txt", "Stats not supported for the current allocator")
}

// OBJECT's subcommands look keys up without counting an access, but
// as a keyspace hit or miss, as Redis's objectCommandLookup does.
func cmdObjectEncoding(c *Ctx) {
	s := c.Shard(c.Args[2])
	e, ok := s.Inspect(c.DB, c.Args[2], c.Now)
	if !ok {
		c.W.Null()
		return
	}
	c.W.BulkString(s.Encoding(e))
}

func cmdObjectFreq(c *Ctx) {
	s := c.Shard(c.Args[2])
	e, ok := s.Inspect(c.DB, c.Args[2], c.Now)
	if !ok {
		c.W.Null()
		return
	}
	if !c.Srv.Eng.Policy().LFU() {
		c.W.Error("An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.")
		return
	}
	c.W.Int(int64(s.Frequency(e, c.Now)))
}

func cmdObjectIdleTime(c *Ctx) {
	s := c.Shard(c.Args[2])
	e, ok := s.Inspect(c.DB, c.Args[2], c.Now)
	if !ok {
		c.W.Null()
		return
	}
	if c.Srv.Eng.Policy().LFU() {
		c.W.Error("An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.")
		return
	}
	c.W.Int(s.IdleTime(e, c.Now) / 1000)
}

func cmdObjectRefCount(c *Ctx) {
	if _, ok := c.Shard(c.Args[2]).Inspect(c.DB, c.Args[2], c.Now); !ok {
		c.W.Null()
		return
	}
	c.W.Int(1)
}

// memInfo gathers memory figures for INFO and MEMORY STATS.
type memInfo struct {
	used, rss, peak, startup, dataset, heapGoal, sys, heap int64
}

func readMemory(s *Server) memInfo {
	rt := observe.ReadRuntimeMemory()
	var m memInfo
	m.used = s.usedMemory()
	m.heap, m.sys, m.heapGoal, m.rss = rt.Heap, rt.Sys, rt.HeapGoal, rt.RSS
	m.dataset = s.Eng.MemoryUsed()
	s.mem.Note(m.used)
	m.peak, m.startup = s.mem.Peak(), s.mem.Startup()
	return m
}

// infoSections lists INFO's sections in order; "default" ones are in the
// reply to a bare INFO.
//
// A section that reads the shards takes held: INFO may run inside EXEC or
// a script, which hold every shard lock already, and must not take one
// again.
var infoSections = []struct {
	name  string
	def   bool
	write func(s *Server, b *strings.Builder, held bool)
}{
	{"server", true, lockless(infoServer)},
	{"clients", true, lockless(infoClients)},
	{"memory", true, lockless(infoMemory)},
	{"persistence", true, infoPersistence},
	{"stats", true, infoStats},
	{"replication", true, lockless(infoReplication)},
	{"cpu", true, lockless(infoCPU)},
	{"modules", true, lockless(func(*Server, *strings.Builder) {})},
	{"commandstats", false, lockless(infoCommandStats)},
	{"errorstats", true, lockless(infoErrorStats)},
	{"latencystats", false, lockless(infoLatencyStats)},
	{"cluster", true, lockless(infoCluster)},
	{"keyspace", true, infoKeyspace},
	{"ratelimit", true, lockless(infoRateLimit)},
}

// lockless adapts a section that takes no shard lock.
func lockless(f func(*Server, *strings.Builder)) func(*Server, *strings.Builder, bool) {
	return func(s *Server, b *strings.Builder, _ bool) { f(s, b) }
}

func cmdInfo(c *Ctx) {
	want := map[string]bool{}
	all, def := false, len(c.Args) == 1
	for _, a := range c.Args[1:] {
		n := strings.ToLower(string(a))
		switch n {
		case "all", "everything":
			all = true
		case "default":
			def = true
		default:
			want[n] = true
		}
	}
	var b strings.Builder
	for _, sec := range infoSections {
		if !(all || want[sec.name] || (def && sec.def)) {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString("# " + strings.ToUpper(sec.name[:1]) + sec.name[1:] + "\r\n")
		sec.write(c.Srv, &b, c.held)
	}
	c.W.Verbatim("txt", b.String())
}

func kv(b *strings.Builder, k string, v any) {
	b.WriteString(k)
	b.WriteByte(':')
	fmt.Fprint(b, v)
	b.WriteString("\r\n")
}

func infoServer(s *Server, b *strings.Builder) {
	up := time.Since(s.startTime)
	kv(b, "redis_version", RedisVersion)
	kv(b, "redis_git_sha1", "00000000")
	kv(b, "redis_git_dirty", 0)
	kv(b, "redis_mode", "standalone")
	kv(b, "limitkv_version", Version)
	kv(b, "os", runtime.GOOS+" "+runtime.GOARCH)
	kv(b, "arch_bits", strconv.IntSize)
	kv(b, "multiplexing_api", "go")
	kv(b, "go_version", runtime.Version())
	kv(b, "process_id", os.Getpid())
	kv(b, "run_id", s.runID())
	tcpPort := s.Cfg.Get("port")
	if tcpPort == "0" { // as Redis: the TLS port when there is no plain one
		tcpPort = s.Cfg.Get("tls-port")
	}
	kv(b, "tcp_port", tcpPort)
	kv(b, "server_time_usec", time.Now().UnixMicro())
	kv(b, "uptime_in_seconds", int64(up/time.Second))
	kv(b, "uptime_in_days", int64(up/(24*time.Hour)))
	kv(b, "hz", s.Cfg.Hz())
	kv(b, "configured_hz", s.Cfg.Get("hz"))
	exe, _ := os.Executable()
	kv(b, "executable", exe)
	kv(b, "config_file", s.Cfg.File())
	kv(b, "io_threads_active", 0)
}

var runIDOnce struct {
	sync.Once
	id string
}

func (s *Server) runID() string {
	runIDOnce.Do(func() {
		runIDOnce.id = fmt.Sprintf("%040x", uint64(s.startTime.UnixNano())^uint64(os.Getpid())<<32)
	})
	return runIDOnce.id
}

func infoClients(s *Server, b *strings.Builder) {
	kv(b, "connected_clients", s.clients.count())
	kv(b, "cluster_connections", 0)
	kv(b, "maxclients", s.Cfg.maxClients.Load())
	kv(b, "blocked_clients", s.blocks.Blocked()+s.pause.waiting.Load())
	kv(b, "tracking_clients", s.trackingClients.Load())
}

func infoMemory(s *Server, b *strings.Builder) {
	m := readMemory(s)
	kv(b, "used_memory", m.used)
	kv(b, "used_memory_human", observe.Human(m.used))
	kv(b, "used_memory_rss", m.rss)
	kv(b, "used_memory_rss_human", observe.Human(m.rss))
	kv(b, "used_memory_peak", m.peak)
	kv(b, "used_memory_peak_human", observe.Human(m.peak))
	kv(b, "used_memory_startup", m.startup)
	kv(b, "used_memory_dataset", m.dataset)
	scripts, scriptBytes := s.scripts.Scripts.Stats()
	vm := s.scripts.VMBytes()
	kv(b, "used_memory_lua", vm)
	kv(b, "used_memory_vm_eval", vm)
	kv(b, "used_memory_lua_human", observe.Human(vm))
	kv(b, "used_memory_scripts_eval", scriptBytes)
	kv(b, "number_of_cached_scripts", scripts)
	funcs, libs, funcBytes := s.scripts.Functions.Stats()
	fvm := s.scripts.Functions.VMBytes()
	kv(b, "number_of_functions", funcs)
	kv(b, "number_of_libraries", libs)
	kv(b, "used_memory_vm_functions", fvm)
	kv(b, "used_memory_vm_total", vm+fvm)
	kv(b, "used_memory_vm_total_human", observe.Human(vm+fvm))
	kv(b, "used_memory_functions", funcBytes)
	kv(b, "used_memory_scripts", scriptBytes+funcBytes)
	kv(b, "used_memory_scripts_human", observe.Human(scriptBytes+funcBytes))
	kv(b, "total_system_memory", observe.TotalSystemMemory())
	kv(b, "go_heap_in_use", m.heap)
	kv(b, "go_heap_goal", m.heapGoal)
	kv(b, "go_memory_sys", m.sys)
	kv(b, "maxmemory", s.Cfg.maxMemory.Load())
	kv(b, "maxmemory_human", observe.Human(s.Cfg.maxMemory.Load()))
	kv(b, "maxmemory_policy", s.Cfg.Get("maxmemory-policy"))
	if m.used > 0 {
		kv(b, "mem_fragmentation_ratio", fmt.Sprintf("%.2f", float64(m.rss)/float64(m.used)))
	}
	// used_memory counts the client buffers too, as of the last tick.
	replicas, normal := s.Net.ClientMemory()
	kv(b, "mem_clients_slaves", replicas)
	kv(b, "mem_clients_normal", normal)
	kv(b, "mem_allocator", "go-"+runtime.Version())
	kv(b, "lazyfree_pending_objects", 0)
}

func infoPersistence(s *Server, b *strings.Builder, held bool) {
	ld := s.Repl.LoadInfo()
	kv(b, "loading", b2i(ld.State == replication.LoadFull))
	kv(b, "async_loading", b2i(ld.State == replication.LoadAsync))
	if ld.State != replication.LoadNone {
		defer infoLoading(b, ld) // last, as in Redis
	}
	if s.Hooks.Persistence == nil {
		kv(b, "persistence_enabled", 0)
		// Nothing is ever saved: every change since the start counts,
		// as in a Redis without save points.
		kv(b, "rdb_changes_since_last_save", s.Eng.Changes(held))
		kv(b, "rdb_bgsave_in_progress", 0)
		kv(b, "aof_enabled", 0)
		return
	}
	p := s.Hooks.Persistence()
	status := "ok"
	if !p.LastOK {
		status = "err"
	}
	kv(b, "persistence_enabled", 1)
	kv(b, "snapshot_interval", p.Interval)
	kv(b, "rdb_changes_since_last_save", max(s.Eng.Changes(held)-p.SavedChanges, 0))
	kv(b, "rdb_bgsave_in_progress", b2i(p.InProgress))
	kv(b, "rdb_last_save_time", p.LastSave)
	kv(b, "rdb_last_bgsave_status", status)
	kv(b, "rdb_last_bgsave_time_sec", int64(p.LastDuration))
	kv(b, "snapshot_last_duration_ms", fmt.Sprintf("%.3f", p.LastDuration*1000))
	kv(b, "snapshot_last_keys", p.LastKeys)
	kv(b, "snapshot_last_bytes", p.LastBytes)
	kv(b, "snapshot_count", p.Snapshots)
	kv(b, "snapshot_errors", p.Errors)
	kv(b, "snapshot_last_error", p.LastError)
	kv(b, "snapshot_loaded_keys", p.Loaded)
	kv(b, "snapshot_load_ms", fmt.Sprintf("%.3f", p.LoadSeconds*1000))
	kv(b, "aof_enabled", 0)
}

// infoLoading shows a full sync's load as Redis shows a load: its
// progress when its size is known (a copy on disk), else as a load of
// unknown size.
func infoLoading(b *strings.Builder, ld replication.LoadInfo) {
	perc, remaining := 0.0, int64(1)
	if ld.TotalBytes > 0 {
		perc = float64(ld.LoadedBytes) / float64(ld.TotalBytes) * 100
		remaining = ld.TotalBytes - ld.LoadedBytes
	}
	elapsed := time.Now().Unix() - ld.StartUnix
	eta := int64(1)
	if elapsed > 0 {
		eta = elapsed * remaining / (ld.LoadedBytes + 1)
	}
	kv(b, "loading_start_time", ld.StartUnix)
	kv(b, "loading_total_bytes", ld.TotalBytes)
	kv(b, "loading_rdb_used_mem", 0)
	kv(b, "loading_loaded_bytes", ld.LoadedBytes)
	kv(b, "loading_loaded_perc", fmt.Sprintf("%.2f", perc))
	kv(b, "loading_eta_seconds", eta)
}

func infoStats(s *Server, b *strings.Builder, held bool) {
	cmds := s.stats.Commands.Load()
	for _, cl := range s.clients.all() {
		cmds += cl.commands.Load()
	}
	hits, misses, expired := s.Eng.Counters(held)
	in, out := s.Net.NetBytes()
	kv(b, "total_connections_received", s.stats.Connections.Load())
	kv(b, "total_commands_processed", cmds)
	kv(b, "instantaneous_ops_per_sec", s.opsPerSec())
	kv(b, "total_net_input_bytes", in)
	kv(b, "total_net_output_bytes", out)
	kv(b, "rejected_connections", s.stats.Rejected.Load())
	rs := s.Repl.Stats()
	kv(b, "sync_full", rs.FullSyncs.Load())
	kv(b, "sync_partial_ok", rs.PartialOK.Load())
	kv(b, "sync_partial_err", rs.PartialErr.Load())
	kv(b, "expired_keys", expired)
	kv(b, "evicted_keys", s.Eng.EvictedKeys())
	kv(b, "evicted_clients", s.limits.evictedClients.Load())
	kv(b, "keyspace_hits", hits)
	kv(b, "keyspace_misses", misses)
	kv(b, "pubsub_channels", s.pubsub.Count(pubsub.Channel))
	kv(b, "pubsub_patterns", s.pubsub.Count(pubsub.Pattern))
	kv(b, "pubsubshard_channels", s.pubsub.Count(pubsub.Shard))
	kv(b, "migrate_cached_sockets", s.migrate.Cached())
	keys, items, prefixes := s.tracking.Stats()
	kv(b, "tracking_total_keys", keys)
	kv(b, "tracking_total_items", items)
	kv(b, "tracking_total_prefixes", prefixes)
	kv(b, "total_protocol_errors", s.stats.ProtocolErrors.Load())
	kv(b, "total_error_replies", s.errors.Total())
	kv(b, "acl_access_denied_auth", s.auth.denied.Load())
}

func infoCPU(s *Server, b *strings.Builder) {
	cpu, ok := observe.ReadCPU()
	if !ok {
		return
	}
	tv := func(t syscall.Timeval) string {
		return fmt.Sprintf("%d.%06d", t.Sec, t.Usec)
	}
	kv(b, "used_cpu_sys", tv(cpu.Sys))
	kv(b, "used_cpu_user", tv(cpu.User))
	kv(b, "used_cpu_gc", fmt.Sprintf("%.6f", cpu.GC))
}

func infoKeyspace(s *Server, b *strings.Builder, held bool) {
	for db := 0; db < s.Eng.Databases(); db++ {
		keys, expires, avg := s.Eng.DBStats(db, s.Eng.Now(), held)
		if keys == 0 {
			continue
		}
		fmt.Fprintf(b, "db%d:keys=%d,expires=%d,avg_ttl=%d\r\n", db, keys, expires, avg)
	}
}

func infoCommandStats(s *Server, b *strings.Builder) {
	for _, spec := range s.sortedSpecs() {
		x := s.cmd(spec)
		calls, nanos := x.calls.Load()
		rejected, failed := x.reject.Load(), x.failed.Load()
		if calls == 0 && rejected == 0 && failed == 0 {
			continue
		}
		usec := nanos / 1000
		perCall := 0.0
		if calls > 0 {
			perCall = float64(nanos) / 1000 / float64(calls)
		}
		fmt.Fprintf(b, "cmdstat_%s:calls=%d,usec=%d,usec_per_call=%.2f,rejected_calls=%d,failed_calls=%d\r\n",
			infoSafe(spec.FullName()), calls, usec, perCall, rejected, failed)
	}
}
