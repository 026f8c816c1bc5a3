package commands

import (
	"math"
	"os"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/engine"
)

// maxmemory: the memory figure, eviction and the OOM refusals, as Redis
// 7.0's processCommand, performEvictions and scriptVerifyOOM have them.
//
// used_memory is what the server holds for its users, counted as it
// changes rather than read from the Go heap: the heap at start-up (the
// server's own tables), the engine's exact count of the keyspace (see
// engine/memory.go), the clients' buffers (summed by the 100 ms tick) and
// the Lua state and script cache. The Go heap in use lags it by the
// garbage not yet collected, which is no basis for evicting: right after a
// burst of writes it overstates, and evicting frees nothing there until the
// next collection. Reading the figure is four atomic loads, so it is
// checked before every command while maxmemory is set, as Redis does.
//
// The Go heap is kept in line with it by a soft memory limit (see
// setMemoryLimit), so that garbage does not take RSS far past maxmemory.

const msgOOM = "OOM command not allowed when used memory > 'maxmemory'."

// memoryLimits holds what the maxmemory check reads besides the engine.
type memoryLimits struct {
	clients  atomic.Int64 // client buffers, refreshed by the tick
	reserved atomic.Int64 // growth that commands admitted but have not made yet
	// clientsMax is maxmemory-clients: bytes, or a percentage of
	// maxmemory when negative (-10: 10%); 0: no client eviction.
	clientsMax     atomic.Int64
	evictedClients atomic.Int64 // INFO's evicted_clients
	// goLimit is the Go memory limit in force before maxmemory set one,
	// restored when maxmemory goes back to 0.
	goLimit   int64
	goLimitOK bool
}

// usedMemory is INFO's used_memory.
func (s *Server) usedMemory() int64 {
	return s.mem.Startup() + s.Eng.MemoryUsed() + s.limits.clients.Load() +
		s.scripts.VMBytes() + s.scripts.Scripts.Bytes()
}

// outOfMemory is Redis's performEvictions: when used memory is over
// maxmemory it evicts by the policy, for up to the time the tenacity
// allows, and reports whether memory is still over (nothing could be
// evicted, or the policy is noeviction). Running out of time is not
// failure: the tick carries on, and the command may run, as in Redis.
func (s *Server) outOfMemory(max int64, now int64) bool {
	if s.usedMemory() <= max {
		return false
	}
	if s.Repl.Replica() && s.Repl.Set.IgnoreMaxmemory.Load() {
		// A replica holds what its master holds: the master's
		// evictions reach it as deletions (replica-ignore-maxmemory).
		return false
	}
	// Timed for LATENCY only when the monitor is on: the clock reads
	// would be most of the cost of evicting one key.
	var start time.Time
	if s.Cfg.latencyThreshold.Load() > 0 {
		start = time.Now()
	}
	_, res := s.Eng.Evict(func() int64 { return s.usedMemory() - max }, now, s.evictionBudget())
	if !start.IsZero() && res != engine.EvictFailed {
		s.LatencyEvent("eviction-cycle", time.Since(start))
	}
	return res == engine.EvictFailed
}

// evictionBudget is Redis's evictionTimeLimitUs: 50 µs per step of
// maxmemory-eviction-tenacity up to 10, then 15% more per step, without
// limit at 100.
func (s *Server) evictionBudget() time.Duration {
	t := s.Cfg.evictTenacity.Load()
	switch {
	case t <= 10:
		return time.Duration(50*t) * time.Microsecond
	case t < 100:
		return time.Duration(500*math.Pow(1.15, float64(t)-10)) * time.Microsecond
	}
	return time.Duration(math.MaxInt64)
}

// memoryTick refreshes the client buffers' sum, evicts clients over
// maxmemory-clients and, while memory is over the limit, goes on evicting
// keys (Redis's eviction time proc), so that memory comes back under
// maxmemory even when no write arrives to trigger it.
func (s *Server) memoryTick() {
	replicas, normal := s.Net.ClientMemory()
	_ = replicas // as Redis: replica buffers are not counted against maxmemory
	s.limits.clients.Store(normal)
	s.evictClients(normal)
	if max := s.Cfg.maxMemory.Load(); max > 0 && !s.scripts.Running() {
		s.outOfMemory(max, s.Eng.Now())
	}
}

// clientEvictionLimit is Redis's getClientEvictionLimit: the bytes that
// maxmemory-clients allows all clients together (a percentage of
// maxmemory, none if maxmemory is 0), at least 128 KiB so that a client
// can still get in to change it; 0: clients are not evicted.
func (s *Server) clientEvictionLimit() int64 {
	v := s.limits.clientsMax.Load()
	var limit int64
	switch max := s.Cfg.maxMemory.Load(); {
	case v < 0 && max > 0:
		limit = int64(float64(max) * float64(-v) / 100)
	case v > 0:
		limit = v
	default:
		return 0
	}
	return limit
}

// evictClients closes clients, those using the most memory first, while
// the clients together (total: what the tick measured) use at least
// maxmemory-clients, as Redis's evictClients does. Replicas, the master's
// link and clients that said CLIENT NO-EVICT ON are spared, though they
// count in the total.
func (s *Server) evictClients(total int64) {
	limit := s.clientEvictionLimit()
	if limit == 0 {
		return
	}
	limit = max(limit, 128<<10)
	if total < limit {
		return
	}
	type candidate struct {
		cl  *Client
		mem int64
	}
	var cands []candidate
	for _, cl := range s.clients.all() {
		if cl.noEvict.Load() || cl.replica.Load() || cl.master || cl.conn == nil {
			continue
		}
		cands = append(cands, candidate{cl, cl.conn.Stats().TotalMem})
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].mem > cands[j].mem })
	now := time.Now()
	for _, c := range cands {
		if total < limit {
			return
		}
		s.Log.Info("Evicting client: " + c.cl.info(now, false))
		s.limits.evictedClients.Add(1) // counted before the client can see it closed
		c.cl.conn.Kill()
		total -= c.mem
	}
	if total >= limit {
		s.Log.Warn("Over client maxmemory after evicting all evictable clients")
	}
}

// setMaxMemoryClients applies maxmemory-clients, as CONFIG GET shows it:
// bytes, or a percentage of maxmemory.
func (c *Config) setMaxMemoryClients(v string) {
	if c.srv == nil {
		return
	}
	var n int64
	if p, ok := strings.CutSuffix(v, "%"); ok {
		pct, _ := strconv.ParseInt(p, 10, 64)
		n = -pct
	} else {
		n, _ = strconv.ParseInt(v, 10, 64)
	}
	c.srv.limits.clientsMax.Store(n)
}

// rejectOOM decides, before a command runs, whether it is refused for
// memory, as Redis's processCommand does: with maxmemory set, eviction
// runs first; a deny-oom command (a write that may grow memory; EXEC of a
// transaction holding one; a script that does not declare no-writes or
// allow-oom) is then refused if memory is still over, and so is any
// command but EXEC, DISCARD, QUIT and RESET while queueing a transaction.
// The state is kept for the scripts' own check. Nothing is evicted while
// a script runs (it holds every shard): Redis skips this check then too.
func (s *Server) rejectOOM(cl *Client, spec *cmdspec.Spec, flags cmdspec.Flag, now int64) bool {
	max := s.Cfg.maxMemory.Load()
	// While clients are paused nothing is evicted, and nothing refused
	// for it, as Redis's performEvictions: the dataset stays still.
	if max == 0 || s.scripts.Running() || s.pause.kind.Load() != pauseOff {
		cl.oomAtStart = false
		return false
	}
	oom := s.outOfMemory(max, now)
	cl.oomAtStart = oom
	if !oom {
		return false
	}
	if cl.multi {
		switch spec.FullName() {
		case "exec":
			return cl.txDenyOOM
		case "discard", "quit", "reset":
			return false
		}
		return true
	}
	return flags&cmdspec.DenyOOM != 0
}

// admitGrowth is asked by a command about to grow a value by n bytes
// (SETRANGE, APPEND, SETBIT and BITFIELD at a far offset) before it
// allocates. Redis checks memory only before a command, so its first
// SETRANGE at offset 512 MB allocates 512 MB past a 50 MB maxmemory; here
// a growth of 1 MiB or more that would take memory over maxmemory is
// refused first. Admitted growth counts as reserved until the command is
// done, so concurrent clients cannot each pass the check with the same
// headroom. Smaller growth goes through as in Redis (the next command
// evicts or is refused). The caller must call releaseGrowth(n) if it got
// true.
func (s *Server) admitGrowth(n int64) bool {
	max := s.Cfg.maxMemory.Load()
	if max == 0 || n < 1<<20 {
		return true
	}
	if s.limits.reserved.Add(n)+s.usedMemory() > max {
		s.limits.reserved.Add(-n)
		return false
	}
	return true
}

func (s *Server) releaseGrowth(n int64) {
	if s.Cfg.maxMemory.Load() != 0 && n >= 1<<20 {
		s.limits.reserved.Add(-n)
	}
}

// setMemoryLimit ties the Go runtime's soft memory limit to maxmemory, so
// that the collector runs before garbage takes the process far past it:
// by default Go lets the heap double between collections, which would
// allow twice maxmemory. The limit is maxmemory plus an eighth plus 4 MiB
// (12 MiB at least, which the runtime needs for itself), room for the keyspace's slack over its count (free arena space: 5% under
// a flood of rate-limit keys), garbage, goroutine stacks and the runtime's
// own memory; with the binary's 20 MB of code that keeps RSS under 1.5
// times a 64 MB maxmemory. Near the limit the collector runs more often,
// never failing an allocation; that is cheap here because the keyspace
// lives in pointer-free arena chunks the collector does not scan (well
// under 1% of the CPU at 64 MB under a flood of new keys, 3% at 16 MB,
// where the runtime's own few MB weigh more). An
// operator's GOMEMLIMIT is left alone: it says what the machine allows.
// maxmemory 0 restores the limit in force before.
func (l *memoryLimits) setMemoryLimit(maxmemory int64) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	if !l.goLimitOK {
		l.goLimit, l.goLimitOK = debug.SetMemoryLimit(-1), true
	}
	if maxmemory == 0 {
		debug.SetMemoryLimit(l.goLimit)
		return
	}
	limit := maxmemory + max(maxmemory/8+4<<20, 12<<20)
	if limit < 0 {
		limit = l.goLimit // overflow: maxmemory near 2^63
	}
	debug.SetMemoryLimit(limit)
}

// reserveGrowth asks admitGrowth for a string key about to be extended to
// newLen bytes, replying OOM when refused. The caller releases the
// reservation (releaseGrowth) when it got true.
func (c *Ctx) reserveGrowth(key []byte, newLen int64) (int64, bool) {
	var cur int64
	if e, ok := c.Shard(key).Peek(c.DB, key, c.Now); ok {
		n, err := e.StrLen()
		if err != nil {
			return 0, true // the command answers WRONGTYPE
		}
		cur = int64(n)
	}
	n := max(newLen-cur, 0)
	if !c.Srv.admitGrowth(n) {
		c.W.Error(msgOOM)
		return 0, false
	}
	return n, true
}
