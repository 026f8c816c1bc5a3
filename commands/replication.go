package commands

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/config"
	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/replication"
	"github.com/limitkv/limitkv/resp"
)

// replicationCommands: REPLICAOF and what replicas and masters say to
// each other.
func replicationCommands() []*command {
	return []*command{
		cmd("replicaof", 3, "admin noscript stale no_async_loading may_wait", cmdReplicaOf),
		cmd("slaveof", 3, "admin noscript stale no_async_loading may_wait", cmdReplicaOf),
		cmd("role", 1, "noscript loading stale fast", cmdRole),
		cmd("replconf", -1, "admin noscript loading stale allow_busy", cmdReplConf),
		cmd("psync", -3, "admin noscript no_async_loading no_multi may_wait", cmdSync),
		cmd("sync", 1, "admin noscript no_async_loading no_multi may_wait", cmdSync),
		cmd("wait", 3, "noscript may_wait", cmdWait),
	}
}

// Replication: REPLICAOF, ROLE, REPLCONF, PSYNC, WAIT and INFO
// replication, the checks replicas make (READONLY, MASTERDOWN, LOADING,
// NOREPLICAS), and what each command leaves for replicas. The replication
// package runs the links and owns the stream; here the server feeds it
// the effects of commands and runs for it the commands of a master's
// stream that are not a key's state.

// Redis 7.0's refusals.
const (
	msgReadOnlyReplica = "READONLY You can't write against a read only replica."
	msgNoReplicas      = "NOREPLICAS Not enough good replicas to write."
	msgMasterDown      = "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."
	msgLoading         = "LOADING Redis is loading the dataset in memory"
)

// initReplication creates the server's replication node.
func (s *Server) initReplication() {
	s.Repl = replication.New(s.Eng, s.Cfg.repl, replication.Hooks{
		Exec:    s.execFromMaster,
		Loading: s.setLoadState,
		Dir:     func() string { return s.Cfg.Get("dir") },
		Dial:    s.Cfg.DialReplication,
		Port:    func() int { return s.listeningPort() },
		Limits: func() engine.Limits {
			he, hv, ze, zv := s.Cfg.ListpackLimits()
			return engine.Limits{Hash: engine.HashLimits{Entries: he, Value: hv}, ZSet: engine.ZSetLimits{Entries: ze, Value: zv}, Set: s.Cfg.SetLimits()}
		},
		RoleChanged: func() { s.roleChanged() },
		OutputLimit: func() int64 { return s.Net.Limits.Output(resp.ClassReplica).Hard },
		Functions:   s.functionsForSync,
		Policies:    s.policiesForSync,
		SetPolicies: s.RestorePolicies,
	}, s.Log)
}

// listeningPort is the port a replica announces: the plain one, or the
// TLS one when only TLS listens (or tls-replication says so).
func (s *Server) listeningPort() int {
	port := int(s.Cfg.Int("port"))
	if tp := int(s.Cfg.Int("tls-port")); tp != 0 && (port == 0 || s.Cfg.Get("tls-replication") == "yes") {
		return tp
	}
	return port
}

// roleChanged releases the clients blocked in WAIT: on a replica they
// have nothing to wait for.
func (s *Server) roleChanged() {
	if s.Repl.Replica() {
		s.unblockForReplica()
	}
	s.Repl.RequestAcks()
}

// replicationRefusal returns the error Redis gives a command that a
// replica, min-replicas-to-write or a full sync under way refuses, or "",
// in the order of Redis's processCommand; flags are the request's
// (commandFlags).
func (s *Server) replicationRefusal(cl *Client, spec *cmdspec.Spec, flags cmdspec.Flag) string {
	write := flags&cmdspec.Write != 0
	stale := flags&cmdspec.Stale != 0
	if spec.Name == "exec" {
		write, stale, _, _ = cl.queuedFlags()
	}
	set := s.Repl.Set
	if write && set.MinReplicas.Load() > 0 && !s.Repl.WriteAllowed() {
		return msgNoReplicas
	}
	if s.Repl.Replica() {
		if write && set.ReadOnly.Load() && !cl.master {
			return msgReadOnlyReplica
		}
		if !stale && !set.ServeStale.Load() && !s.Repl.LinkUp() {
			return msgMasterDown
		}
	}
	return s.loadingRefusal(cl, spec)
}

// loadingRefusal returns LOADING for a command that may not run while a
// full sync loads, or "". Checked before a command runs, and again once
// it counts itself in flight (dispatch.go): a load that replaces the
// keyspace waits for the commands in flight (setLoadState), so none reads
// it half replaced.
func (s *Server) loadingRefusal(cl *Client, spec *cmdspec.Spec) string {
	switch replication.LoadState(s.loadState.Load()) {
	case replication.LoadFull:
		allowed := spec.Flags&(cmdspec.Loading|cmdspec.NoKeyspace) != 0
		if spec.Name == "exec" {
			_, _, allowed, _ = cl.queuedFlags()
		}
		if !allowed {
			return msgLoading
		}
	case replication.LoadAsync:
		denied := spec.Flags&cmdspec.NoAsyncLoading != 0
		if spec.Name == "exec" {
			_, _, _, denied = cl.queuedFlags()
		}
		if denied {
			return msgLoading
		}
	}
	return ""
}

// setLoadState is the replication's Loading hook. Told LoadFull, it
// returns once every command let through before has ended: those that
// count themselves in flight (they check again once counted), and, under
// every shard lock, scripts (which check under those locks).
func (s *Server) setLoadState(st replication.LoadState) {
	s.loadState.Store(int32(st))
	if st != replication.LoadFull {
		return
	}
	for !s.scripts.InFlight.Idle() {
		time.Sleep(20 * time.Microsecond)
	}
}

// queuedFlags says whether a transaction writes, whether every command in
// it may run on a stale replica or while the keyspace loads, and whether
// one may not run while a full sync loads beside it (Redis's mstate
// flags), by the flags each command was queued with.
func (cl *Client) queuedFlags() (write, stale, loading, noAsync bool) {
	stale, loading = true, true
	for _, q := range cl.queued {
		write = write || q.flags&cmdspec.Write != 0
		stale = stale && q.flags&cmdspec.Stale != 0
		loading = loading && q.flags&cmdspec.Loading != 0
		noAsync = noAsync || q.flags&cmdspec.NoAsyncLoading != 0
	}
	return write, stale, loading, noAsync
}

// batch returns the client's replication batch.
func (cl *Client) batch() *replication.Batch {
	if cl.fx == nil {
		cl.fx = cl.srv.Repl.NewBatch()
	}
	return cl.fx
}

// propagate sends what a command changed in the shards of m (locked) to
// the stream: the states of the keys it changed, or, asIs, the command
// itself, after the deletions of the keys that expired as it ran. Inside a
// transaction or a script the entries join their batch, committed at
// their end.
func (s *Server) propagate(c *Ctx, m engine.Mask, asIs bool) {
	b := c.Client.batch()
	if c.Spec.Flags&cmdspec.TTLOnly != 0 {
		for i, mm := 0, m; mm != 0; i, mm = i+1, mm>>1 {
			if mm&1 != 0 {
				b.Expiries(s.Eng.Shard(i))
			}
		}
	} else if asIs && s.Repl.AsIs(m) {
		changed := false
		for i, mm := 0, m; mm != 0; i, mm = i+1, mm>>1 {
			if mm&1 != 0 && b.Expired(s.Eng.Shard(i)) {
				changed = true
			}
		}
		if changed {
			b.Command(c.DB, c.Args...)
		}
	} else {
		for i, mm := 0, m; mm != 0; i, mm = i+1, mm>>1 {
			if mm&1 != 0 {
				b.Drain(s.Eng.Shard(i))
			}
		}
	}
	if c.held {
		return
	}
	if off := b.Commit(true); off != 0 {
		c.Client.woff = off
	}
}

// propagateHeld sends what a transaction or a script changed to the
// stream as one; every shard is locked. It returns the stream's offset
// after it (0: nothing changed).
func (s *Server) propagateHeld(cl *Client) int64 {
	if !s.Repl.Recording() {
		if cl.fx != nil {
			cl.fx.Reset()
		}
		return 0
	}
	b := cl.batch()
	for i := 0; i < engine.Shards; i++ {
		b.Drain(s.Eng.Shard(i))
	}
	return b.Commit(true)
}

// joinEffects moves what a script run inside a transaction replicates into
// the transaction's batch.
func (s *Server) joinEffects(tx, script *Client) {
	if script.fx != nil && !script.fx.Empty() {
		tx.batch().Join(script.fx)
	}
}

// dropEffects forgets what a script stopped halfway changed; every shard
// is locked.
func (s *Server) dropEffects(cl *Client) {
	if cl.fx != nil {
		cl.fx.Reset()
	}
	if !s.Repl.Recording() {
		return
	}
	b := cl.batch()
	for i := 0; i < engine.Shards; i++ {
		b.Skip(s.Eng.Shard(i))
	}
}

// replicate sends a command as it is to the replicas (FLUSHDB, SWAPDB,
// PUBLISH), in the order of the changes around it: the caller holds the
// locks that order it. Inside a transaction or a script it joins their
// batch.
func (c *Ctx) replicate(db int, args ...[]byte) {
	if !c.Srv.Repl.Recording() {
		return
	}
	b := c.Client.batch()
	b.Command(db, args...)
	if !c.held {
		if off := b.Commit(true); off != 0 {
			c.Client.woff = off
		}
	}
}

// wholeKeyspace runs fn with every shard locked (already, inside EXEC or a
// script) and sends entry, a command that repeats fn, to the replicas
// before letting the locks go.
func (c *Ctx) wholeKeyspace(fn func(), db int, entry ...[]byte) {
	eng := c.Srv.Eng
	if !c.held {
		eng.Lock(engine.AllShards)
		defer eng.Unlock(engine.AllShards)
	}
	fn()
	c.replicate(db, entry...)
}

// execFromMaster runs a command of the master's stream that is not a
// key's state (FLUSHALL, FLUSHDB, SWAPDB, PUBLISH), as the master ran it.
func (s *Server) execFromMaster(db int, args [][]byte, held bool) error {
	spec, msg := s.lookup(args)
	if msg != "" {
		return errors.New(msg)
	}
	cl := s.masterClient
	cl.db.Store(int32(db))
	w := resp.NewWriter(2)
	// Now is 0, before every expiry: a replica expires nothing by itself.
	// The master sent the deletions of the keys that expired there; the
	// commands it sends as they are do not depend on the time.
	c := &Ctx{Srv: s, Client: cl, W: w, Args: args, Now: 0, DB: db, Spec: spec, held: held}
	s.runLocked(c)
	if b := w.Bytes(); len(b) > 0 && b[0] == '-' {
		return errors.New(strings.TrimSpace(string(b[1:])))
	}
	return nil
}

func cmdReplicaOf(c *Ctx) {
	host, port := c.Args[1], c.Args[2]
	n := c.Srv.Repl
	if is(host, "NO") && is(port, "ONE") {
		changed, err := n.ReplicaOfNoOne()
		if err != nil {
			c.W.Error(err.Error())
			return
		}
		if changed {
			c.Srv.Cfg.noteMaster("", 0)
			c.Srv.Log.Info("MASTER MODE enabled (user request from '" + clientInfo(c.Client.conn) + "')")
		}
		c.W.OK()
		return
	}
	if c.Client.replica.Load() {
		c.W.Error("Command is not valid when client is a replica.")
		return
	}
	p, ok := engine.ParseInt(port)
	if !ok || p < 0 || p > 65535 {
		c.W.Error("Invalid master port")
		return
	}
	changed, err := n.ReplicaOf(string(host), int(p))
	if err != nil {
		c.W.Error(err.Error())
		return
	}
	if !changed {
		c.W.Simple("OK Already connected to specified master")
		return
	}
	c.Srv.Cfg.noteMaster(string(host), int(p))
	c.Srv.Log.Info("REPLICAOF " + string(host) + ":" + strconv.FormatInt(p, 10) + " enabled (user request from '" + clientInfo(c.Client.conn) + "')")
	c.W.OK()
}

func cmdRole(c *Ctx) {
	r := c.Srv.Repl.Role()
	if r.Master {
		c.W.Array(3)
		c.W.BulkString("master")
		c.W.Int(r.Offset)
		c.W.Array(len(r.Replicas))
		for _, ri := range r.Replicas {
			c.W.Array(3)
			c.W.BulkString(ri.IP)
			c.W.BulkInt(int64(ri.Port))
			c.W.BulkInt(ri.Offset)
		}
		return
	}
	c.W.Array(5)
	c.W.BulkString("slave")
	c.W.BulkString(r.Host)
	c.W.Int(int64(r.Port))
	c.W.BulkString(r.State)
	c.W.Int(r.Offset)
}

func cmdReplConf(c *Ctx) {
	args := c.Args
	if len(args)%2 == 0 {
		c.W.Error(msgSyntax)
		return
	}
	cl := c.Client
	for j := 1; j < len(args); j += 2 {
		v := args[j+1]
		switch {
		case is(args[j], "LISTENING-PORT"):
			p, ok := engine.ParseInt(v)
			if !ok {
				c.W.Error(msgNotInteger)
				return
			}
			cl.hs.ListeningPort = int(p)
		case is(args[j], "IP-ADDRESS"):
			if len(v) >= 46 {
				c.W.Error("REPLCONF ip-address provided by replica instance is too long: " + strconv.Itoa(len(v)) + " bytes")
				return
			}
			cl.hs.IPAddress = string(v)
		case is(args[j], "CAPA"):
			if is(v, "PSYNC2") {
				cl.hs.Psync2 = true
			}
		case is(args[j], "ACK"):
			// A replica's acknowledgement: no reply.
			if sess := cl.session; sess != nil {
				if off, ok := engine.ParseInt(v); ok {
					sess.Ack(off)
				}
			}
			return
		case is(args[j], "GETACK"):
			return // only a master asks, through the stream
		case is(args[j], "RDB-ONLY"):
			n, ok := engine.ParseInt(v)
			if !ok || n < 0 || n > 1 {
				c.W.Error("value is out of range, must be positive")
				return
			}
		case is(args[j], "RDB-FILTER-ONLY"):
			c.W.Error("Unsupported rdb-filter-only option: " + string(v))
			return
		default:
			c.W.Error("Unrecognized REPLCONF option: " + string(args[j]))
			return
		}
	}
	c.W.OK()
}

// replicaConn is a replica's connection as the replication package sees
// it.
type replicaConn struct{ *resp.Conn }

func (r replicaConn) Pending() int64 { return r.Stats().OutMem }

func cmdSync(c *Ctx) {
	cl := c.Client
	if cl.replica.Load() {
		return // as Redis: a replica's repeated SYNC is ignored
	}
	if c.Spec.Name == "sync" {
		// SYNC asks for an RDB file, which limitkv does not produce: its
		// replicas use PSYNC and receive limitkv's own copy.
		c.W.Error("SYNC is not supported: limitkv replicas synchronize with PSYNC")
		return
	}
	off, ok := engine.ParseInt(c.Args[2])
	if !ok {
		c.W.Error(msgNotInteger)
		return
	}
	rc := replicaConn{cl.conn}
	reply, start := c.Srv.Repl.Psync(rc, cl.hs, string(c.Args[1]), off)
	if start == nil {
		c.W.Error(reply)
		return
	}
	cl.session = c.Srv.Repl.Session(rc)
	cl.replica.Store(true)
	cl.conn.SetClass(resp.ClassReplica)
	c.W.Simple(reply)
	// The reply leaves before anything the session pushes.
	cl.conn.Commit()
	start()
}

func cmdWait(c *Ctx) {
	n := c.Srv.Repl
	if n.Replica() {
		c.W.Error("WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.")
		return
	}
	want, ok := engine.ParseInt(c.Args[1])
	if !ok {
		c.W.Error(msgNotInteger)
		return
	}
	timeout, ok := c.timeoutArg(c.Args[2])
	if !ok {
		return
	}
	cl := c.Client
	acked := n.CountAcked(cl.woff)
	if int64(acked) >= want || c.held {
		c.W.Int(int64(acked))
		return
	}
	// Blocked: the replies before this one leave now; no lock is held.
	// The client counts as blocked, which CLIENT UNBLOCK may end.
	cl.conn.Flush()
	bw := c.blockOnNothing()
	var deadline <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		deadline = t.C
	}
	for {
		wake := n.WaitAcks()
		n.RequestAcks()
		if acked = n.CountAcked(cl.woff); int64(acked) >= want {
			break
		}
		select {
		case <-wake:
			continue
		case <-bw.Woken():
		case <-deadline:
		case <-cl.conn.Done():
		}
		acked = n.CountAcked(cl.woff)
		break
	}
	if !c.Srv.blocks.Claim(&bw.Waiter) {
		<-bw.Woken() // CLIENT UNBLOCK answered for it
		c.W.Raw(bw.out.Bytes())
		return
	}
	c.W.Int(int64(acked))
}

// timeoutArg parses a blocking command's timeout in milliseconds, as
// Redis's getTimeoutFromObjectOrReply does.
func (c *Ctx) timeoutArg(a []byte) (time.Duration, bool) {
	ms, ok := engine.ParseInt(a)
	if !ok {
		c.W.Error("timeout is not an integer or out of range")
		return 0, false
	}
	if ms < 0 {
		c.W.Error("timeout is negative")
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

func infoReplication(s *Server, b *strings.Builder) {
	in := s.Repl.Info()
	if !in.Replica {
		kv(b, "role", "master")
	} else {
		kv(b, "role", "slave")
		kv(b, "master_host", in.MasterHost)
		kv(b, "master_port", in.MasterPort)
		link := "down"
		if in.LinkUp {
			link = "up"
		}
		kv(b, "master_link_status", link)
		kv(b, "master_last_io_seconds_ago", in.LastIOSecondsAgo)
		kv(b, "master_sync_in_progress", b2i(in.SyncInProgress))
		kv(b, "slave_read_repl_offset", in.ReadOffset)
		kv(b, "slave_repl_offset", in.Offset)
		if in.SyncInProgress {
			// As Redis shows a copy whose size was not announced (an
			// EOF-marked diskless transfer): a total of 0.
			kv(b, "master_sync_total_bytes", 0)
			kv(b, "master_sync_read_bytes", in.SyncReadBytes)
			kv(b, "master_sync_left_bytes", -in.SyncReadBytes)
			kv(b, "master_sync_perc", "0.00")
			kv(b, "master_sync_last_io_seconds_ago", in.SyncLastIOSecondsAgo)
		}
		if !in.LinkUp {
			kv(b, "master_link_down_since_seconds", in.LinkDownSinceSeconds)
		}
		kv(b, "slave_priority", s.Repl.Set.Priority.Load())
		kv(b, "slave_read_only", b2i(s.Repl.Set.ReadOnly.Load()))
		kv(b, "replica_announced", b2i(s.Repl.Set.Announced.Load()))
	}
	kv(b, "connected_slaves", len(in.Replicas))
	if in.MinReplicas > 0 {
		kv(b, "min_slaves_good_slaves", in.GoodReplicas)
	}
	for i, r := range in.Replicas {
		b.WriteString("slave" + strconv.Itoa(i) + ":ip=" + r.IP + ",port=" + strconv.Itoa(r.Port) +
			",state=" + r.State + ",offset=" + strconv.FormatInt(r.Offset, 10) + ",lag=" + strconv.FormatInt(r.Lag, 10) + "\r\n")
	}
	kv(b, "master_failover_state", "no-failover")
	kv(b, "master_replid", in.ReplID)
	kv(b, "master_replid2", in.ReplID2)
	kv(b, "master_repl_offset", in.MasterOffset)
	kv(b, "second_repl_offset", in.SecondOffset)
	kv(b, "repl_backlog_active", b2i(in.BacklogActive))
	kv(b, "repl_backlog_size", in.BacklogSize)
	kv(b, "repl_backlog_first_byte_offset", in.BacklogFirst)
	kv(b, "repl_backlog_histlen", in.BacklogHistLen)
	// limitkv's own: the last full sync this server sent, and the longest
	// it held one shard's lock (the commands on that shard waited as long).
	st := s.Repl.Stats()
	kv(b, "last_full_sync_seconds", strconv.FormatFloat(time.Duration(st.LastFullSync.Load()).Seconds(), 'f', 3, 64))
	kv(b, "last_full_sync_keys", st.LastFullKeys.Load())
	kv(b, "last_full_sync_longest_lock_seconds", strconv.FormatFloat(time.Duration(st.LastSyncPause.Load()).Seconds(), 'f', 6, 64))
	// And the full syncs it loaded as a replica: the repl-diskless-load
	// path the last one took, how it ended, and swapdb's memory (the
	// dataset being built, and the most both held at once).
	if ld := in.Load; ld.Mode != "" {
		kv(b, "replica_full_sync_load", ld.Mode)
		kv(b, "replica_full_sync_status", ld.Status)
		kv(b, "replica_full_sync_failures", ld.Failures)
		kv(b, "replica_swapdb_used_memory", ld.SwapMemory)
		kv(b, "replica_swapdb_peak_memory", ld.SwapPeak)
	}
}

// replicationEffects hand the replication settings to the replication
// node, which reads them as it runs.
func (c *Config) replicationEffects() map[string]config.Effect {
	set := func(f func(s *replication.Settings, n int64)) config.Effect {
		return config.Effect{Apply: func(_ string, n int64) { f(c.repl, n) }}
	}
	str := func(f func(s *replication.Settings, v *string)) config.Effect {
		return config.Effect{Apply: func(v string, _ int64) { f(c.repl, &v) }}
	}
	return map[string]config.Effect{
		"masterauth":               str(func(s *replication.Settings, v *string) { s.MasterAuth.Store(v) }),
		"masteruser":               str(func(s *replication.Settings, v *string) { s.MasterUser.Store(v) }),
		"replica-read-only":        set(func(s *replication.Settings, n int64) { s.ReadOnly.Store(n != 0) }),
		"replica-serve-stale-data": set(func(s *replication.Settings, n int64) { s.ServeStale.Store(n != 0) }),
		"replica-priority":         set(func(s *replication.Settings, n int64) { s.Priority.Store(n) }),
		"replica-announce-ip":      str(func(s *replication.Settings, v *string) { s.AnnounceIP.Store(v) }),
		"replica-announce-port":    set(func(s *replication.Settings, n int64) { s.AnnouncePort.Store(n) }),
		"replica-announced":        set(func(s *replication.Settings, n int64) { s.Announced.Store(n != 0) }),
		"repl-backlog-size": {Apply: func(_ string, n int64) {
			c.repl.BacklogSize.Store(n)
			if c.srv != nil {
				c.srv.Repl.SetBacklogSize(n)
			}
		}},
		"repl-backlog-ttl":         set(func(s *replication.Settings, n int64) { s.BacklogTTL.Store(n) }),
		"repl-timeout":             set(func(s *replication.Settings, n int64) { s.Timeout.Store(n) }),
		"repl-ping-replica-period": set(func(s *replication.Settings, n int64) { s.PingPeriod.Store(n) }),
		"min-replicas-to-write":    set(func(s *replication.Settings, n int64) { s.MinReplicas.Store(n) }),
		"min-replicas-max-lag":     set(func(s *replication.Settings, n int64) { s.MinReplicasLag.Store(n) }),
		"repl-diskless-load": {Apply: func(v string, _ int64) {
			mode := replication.LoadDisk
			switch v {
			case "on-empty-db":
				mode = replication.LoadOnEmpty
			case "swapdb":
				mode = replication.LoadSwap
			}
			c.repl.DisklessLoad.Store(int32(mode))
		}},
		"replica-ignore-maxmemory": set(func(s *replication.Settings, n int64) { s.IgnoreMaxmemory.Store(n != 0) }),
	}
}

// noteMaster records the master in the replicaof setting, for CONFIG GET
// and CONFIG REWRITE, as Redis reads its current master there.
func (c *Config) noteMaster(host string, port int) {
	v := ""
	if host != "" {
		v = host + " " + strconv.Itoa(port)
	}
	c.Record("replicaof", v)
}
