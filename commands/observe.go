package commands

import (
	"time"

	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/observe"
)

// What the server observes about itself: each command's accounting after
// it ran (INFO commandstats, errorstats and latencystats, SLOWLOG, the
// latency monitor), and the snapshots of the server's counters that the
// metrics endpoint (package metrics) reads at scrape time. Nothing here
// runs on the request path except account.

// account records a command that ran for d nanoseconds and replied from
// byte n of its writer: INFO commandstats, errorstats and latencystats,
// the slow log and the latency monitor. Shard locks are released by now,
// unless EXEC or a script holds them all.
func (s *Server) account(c *Ctx, n int, d int64) {
	spec := c.Spec
	st := s.cmd(spec)
	st.calls.Add(c.Client.ID, d)
	b := c.W.Bytes()
	failed := len(b) > n && b[n] == '-'
	if c.errorsCounted {
		failed = c.failedReply
	} else if failed {
		s.countError(b[n:])
	}
	if failed {
		st.failed.Add(1)
	}
	cfg := s.Cfg
	if cfg.latencyTracking.Load() {
		st.hist.Record(c.Client.ID, d)
	}
	if t := cfg.slowlogSlower.Load(); t >= 0 && d/1000 >= t && spec.Flags&cmdspec.SkipSlowlog == 0 {
		s.logSlow(c, d/1000, int(cfg.slowlogMaxLen.Load()))
	}
	if t := cfg.latencyThreshold.Load(); t > 0 && d/1e6 >= t {
		event := "command"
		if spec.Flags&cmdspec.Fast != 0 {
			event = "fast-command"
		}
		s.latency.Add(event, d/1e6)
	}
}

// CommandStat is one command's counters, as INFO commandstats and
// latencystats show them.
type CommandStat struct {
	Name             string // full name: "get", "config|set"
	Calls            int64
	Rejected, Failed int64
	Duration         time.Duration // the calls' total time
	// Timed is the number of calls in the latency histogram (those made
	// while latency-tracking is on), TimedSum their total time, and
	// Below[i] how many of them took less than the bounds[i] given to
	// CommandStats.
	Timed    uint64
	TimedSum time.Duration
	Below    []uint64
}

// CommandStats returns the counters of every command that has any,
// sorted by name, with its latency histogram read at bounds (ascending).
func (s *Server) CommandStats(bounds []time.Duration) []CommandStat {
	var out []CommandStat
	snap := new(observe.HistogramSnapshot)
	for _, spec := range s.sortedSpecs() {
		x := s.cmd(spec)
		calls, nanos := x.calls.Load()
		st := CommandStat{
			Name: spec.FullName(), Calls: calls, Duration: time.Duration(nanos),
			Rejected: x.reject.Load(), Failed: x.failed.Load(),
		}
		if x.hist.Snapshot(snap) {
			st.Timed, st.TimedSum = snap.Total, time.Duration(snap.Sum)
			st.Below = make([]uint64, len(bounds))
			for i, b := range bounds {
				st.Below[i] = snap.Below(b)
			}
		}
		if st.Calls == 0 && st.Rejected == 0 && st.Failed == 0 && st.Timed == 0 {
			continue
		}
		out = append(out, st)
	}
	return out
}

// UnknownCommands returns the number of requests that named no command
// (or no subcommand of a container), which no CommandStat counts.
func (s *Server) UnknownCommands() int64 { return s.unknownCalls.Load() }

// ErrorStats returns the number of error replies sent, and their counts
// by code as INFO errorstats lists them (at most 128 codes).
func (s *Server) ErrorStats() (total int64, byCode []observe.ErrorCount) {
	return s.errors.Total(), s.errors.Snapshot()
}

// RateLimitStat counts the decisions of one rate-limit command.
type RateLimitStat struct {
	Command         string // "rl.fixed", "rl.slide", "rl.login", "cl.throttle", "rl.acquire"
	Allowed, Denied int64
	ShadowDenied    int64 // SHADOW requests the limit would have refused
	Shadows         bool  // the command takes SHADOW, and so has a ShadowDenied
}

// rlCommandNames are the rate-limit commands' names, by rlCommand.
var rlCommandNames = [rlCommands]string{"rl.fixed", "rl.slide", "rl.login", "cl.throttle", "rl.acquire", "rl.check"}

// RateLimitStats returns the decisions of each rate-limit command.
func (s *Server) RateLimitStats() []RateLimitStat {
	out := make([]RateLimitStat, rlCommands)
	for i := range out {
		out[i] = RateLimitStat{rlCommandNames[i], s.rl[i].Allowed.Load(), s.rl[i].Denied.Load(), s.rl[i].ShadowDenied.Load(), rlCommand(i).shadows()}
	}
	return out
}

// DBKeys counts the keys of one database.
type DBKeys struct {
	DB            int
	Keys, Expires int
}

// ServerStats is a snapshot of the server's gauges and counters, as INFO
// shows them.
type ServerStats struct {
	Uptime                     time.Duration
	ConnectedClients           int
	MaxClients                 int64
	ConnectionsReceived        int64
	RejectedConnections        int64
	CommandsProcessed          int64
	NetInputBytes, NetOutBytes int64
	UsedMemory, PeakMemory     int64
	RSS, DatasetBytes          int64
	MaxMemory                  int64
	Keys                       []DBKeys // databases holding keys
	ExpiredKeys, EvictedKeys   int64
	KeyspaceHits, Misses       int64
	SlowlogLen                 int
}

// Stats returns a snapshot of the server's gauges and counters.
func (s *Server) Stats() ServerStats {
	m := readMemory(s)
	st := ServerStats{
		Uptime:              time.Since(s.startTime),
		ConnectedClients:    s.clients.count(),
		MaxClients:          s.Cfg.maxClients.Load(),
		ConnectionsReceived: s.stats.Connections.Load(),
		RejectedConnections: s.stats.Rejected.Load(),
		CommandsProcessed:   s.commandsProcessed(),
		UsedMemory:          m.used, PeakMemory: m.peak, RSS: m.rss, DatasetBytes: m.dataset,
		MaxMemory:  s.Cfg.maxMemory.Load(),
		SlowlogLen: s.slowlog.Len(),
	}
	st.NetInputBytes, st.NetOutBytes = s.Net.NetBytes()
	st.EvictedKeys = s.Eng.EvictedKeys()
	st.KeyspaceHits, st.Misses, st.ExpiredKeys = s.Eng.Counters(false)
	now := s.Eng.Now()
	for db := 0; db < s.Eng.Databases(); db++ {
		if keys, expires, _ := s.Eng.DBStats(db, now, false); keys > 0 {
			st.Keys = append(st.Keys, DBKeys{db, keys, expires})
		}
	}
	return st
}

// Persistence returns what INFO persistence shows, and the keys the next
// snapshot writes, and false when persistence is off. It takes the shard
// locks one at a time: not for a caller that holds them.
func (s *Server) Persistence() (PersistenceInfo, bool) {
	if s.Hooks.Persistence == nil {
		return PersistenceInfo{}, false
	}
	p := s.Hooks.Persistence()
	p.PendingChanges = s.Eng.PendingChanges(false)
	return p, true
}

// ReplicationInfo describes the server's place in replication, for the
// metrics endpoint.
type ReplicationInfo struct {
	Role              string // "master" or "replica"
	ConnectedReplicas int
	// Lag is, on a replica, the time since its master was last heard
	// from; on a master, the largest lag of its replicas.
	Lag    time.Duration
	Offset int64 // the replication offset
}

// Replication returns the server's replication state.
func (s *Server) Replication() ReplicationInfo {
	in := s.Repl.Info()
	ri := ReplicationInfo{Role: "master", ConnectedReplicas: len(in.Replicas), Offset: in.MasterOffset}
	if in.Replica {
		ri.Role = "replica"
		ri.Offset = in.Offset
		if in.LastIOSecondsAgo >= 0 {
			ri.Lag = time.Duration(in.LastIOSecondsAgo) * time.Second
		}
		return ri
	}
	for _, r := range in.Replicas {
		ri.Lag = max(ri.Lag, time.Duration(r.Lag)*time.Second)
	}
	return ri
}
