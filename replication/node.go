// Package replication keeps replicas in step with their master, as Redis's
// replication does and as Redis Sentinel expects: a replica connects to its
// master, asks to continue where it was (PSYNC) or receives a copy of the
// keyspace, then applies the master's stream. The stream carries effects,
// the states of the keys each command changed (effects.go), so that
// decisions made on the master's clock, scripts and expiries give the same
// keyspace everywhere. The package owns the stream's bytes, the backlog
// and both ends of the link; the commands package calls it from REPLICAOF,
// PSYNC, REPLCONF, WAIT, ROLE and INFO, and runs what it cannot apply
// itself (FLUSHDB, SWAPDB, PUBLISH).
package replication

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limitkv/limitkv/engine"
)

// Settings are the replication parameters, changed at run time by CONFIG
// SET; every field is read where it is used.
type Settings struct {
	BacklogSize     atomic.Int64           // repl-backlog-size
	BacklogTTL      atomic.Int64           // repl-backlog-ttl, seconds
	Timeout         atomic.Int64           // repl-timeout, seconds
	PingPeriod      atomic.Int64           // repl-ping-replica-period, seconds
	MinReplicas     atomic.Int64           // min-replicas-to-write
	MinReplicasLag  atomic.Int64           // min-replicas-max-lag, seconds
	ServeStale      atomic.Bool            // replica-serve-stale-data
	ReadOnly        atomic.Bool            // replica-read-only
	Priority        atomic.Int64           // replica-priority
	Announced       atomic.Bool            // replica-announced
	IgnoreMaxmemory atomic.Bool            // replica-ignore-maxmemory
	AnnounceIP      atomic.Pointer[string] // replica-announce-ip
	AnnouncePort    atomic.Int64           // replica-announce-port (0: the listening port)
	MasterUser      atomic.Pointer[string] // masteruser
	MasterAuth      atomic.Pointer[string] // masterauth
	DisklessLoad    atomic.Int32           // repl-diskless-load, a LoadMode
}

// LoadMode is repl-diskless-load: where a replica puts its master's copy
// while it arrives. In every mode the copy replaces the keyspace whole or
// not at all (fullsync.go).
type LoadMode int32

const (
	// LoadDisk (disabled): to a file in the data directory; the
	// keyspace serves its old dataset until the file is whole, then is
	// flushed and loaded from it (LOADING meanwhile).
	LoadDisk LoadMode = iota
	// LoadOnEmpty (on-empty-db): straight into the keyspace when it holds
	// no key (LOADING meanwhile), else as LoadDisk.
	LoadOnEmpty
	// LoadSwap (swapdb): into a second dataset in memory, swapped in once
	// whole; the old one is served meanwhile when it is of the same
	// history, else LOADING.
	LoadSwap
)

// LoadState is what commands may do while a full sync loads.
type LoadState int32

const (
	LoadNone  LoadState = iota // serve as usual
	LoadFull                   // the keyspace is not to be read: LOADING (INFO loading:1)
	LoadAsync                  // reads of the old dataset go on (INFO async_loading:1)
)

// NewSettings returns Redis 7.0's defaults.
func NewSettings() *Settings {
	s := &Settings{}
	s.BacklogSize.Store(1 << 20)
	s.BacklogTTL.Store(3600)
	s.Timeout.Store(60)
	s.PingPeriod.Store(10)
	s.MinReplicasLag.Store(10)
	s.ServeStale.Store(true)
	s.ReadOnly.Store(true)
	s.Priority.Store(100)
	s.Announced.Store(true)
	s.IgnoreMaxmemory.Store(true)
	empty := ""
	s.AnnounceIP.Store(&empty)
	s.MasterUser.Store(&empty)
	s.MasterAuth.Store(&empty)
	return s
}

// Hooks connect the node to the server around it.
type Hooks struct {
	// Exec runs a command of the master's stream that is not a key's
	// state (FLUSHDB, SWAPDB, PUBLISH) in database db; held says every
	// shard is already locked (inside MULTI/EXEC).
	Exec func(db int, args [][]byte, held bool) error
	// Loading is told what commands may do while a full sync loads. Told
	// LoadFull, it returns once no command that was let through before
	// is still running: the keyspace may then be replaced under them.
	Loading func(state LoadState)
	// Dir is the data directory, where LoadDisk receives the copy.
	Dir func() string
	// Dial connects to a master (TLS when tls-replication says so).
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// Port is the port replicas tell their master they listen on.
	Port func() int
	// Limits are the encoding limits of keys a replica stores.
	Limits func() engine.Limits
	// RoleChanged is told when the node becomes a master or a replica
	// (clients blocked in WAIT are released).
	RoleChanged func()
	// OutputLimit is client-output-buffer-limit's hard limit for
	// replicas (0: none): a replica whose stream piles up past it while
	// its copy is sent is dropped, as its connection would be.
	OutputLimit func() int64
	// Functions gives the function libraries a full sync carries, as the
	// command that restores them on the replica (FUNCTION RESTORE payload
	// FLUSH), read under a hold that release lets go once the sync has
	// read the offset its copy stands for: a change of the libraries is
	// in the copy or in the stream after that offset.
	Functions func() (entry [][]byte, release func())
	// Policies gives the named rate-limit policies a full sync carries, as
	// an encoding the node does not read (nil: none), under a hold as
	// Functions does; SetPolicies replaces a replica's with its master's
	// (nil: none) when a full sync starts and when it carries them.
	Policies    func() (payload []byte, release func())
	SetPolicies func(payload []byte) error
}

// Node is one server's place in replication: a master with its replicas,
// or a replica with its link to a master (and replicas of its own).
type Node struct {
	eng   *engine.Engine
	Set   *Settings
	hooks Hooks
	log   *slog.Logger

	mu        sync.Mutex
	replid    string
	replid2   string
	secondOff int64 // second_replid_offset: replid2 is valid up to here
	offset    int64 // master_repl_offset while there is no backlog
	master    *link // nil on a master
	sessions  []*Session
	noneSince time.Time // since when there has been no replica (backlog TTL)
	nextID    int64

	// The stream: entries are appended under streamMu, in the order in
	// which the keyspace changed.
	streamMu  sync.Mutex
	backlog   *Backlog
	streamDB  int // the database of the last SELECT written, -1: none
	scratch   []byte
	recording atomic.Bool

	// swapGate holds SWAPDB off while full syncs capture (HoldSwaps).
	swapGate sync.RWMutex
	// pending counts, per shard, the full syncs that have yet to capture
	// it; changed under the shard's lock (see AsIs).
	pending [engine.Shards]atomic.Int32
	// applyMu is held by a replica's link while it applies an entry, and
	// by whoever needs the keyspace to stand exactly at an offset: a full
	// sync served by a replica, a replica's snapshot (Position).
	applyMu sync.Mutex

	// acks is closed and replaced whenever a replica acknowledges, for
	// WAIT.
	ackMu sync.Mutex
	acks  chan struct{}

	stats Stats
	// replica mirrors master != nil for the checks every command makes.
	replica atomic.Bool
	// rebuilding: a full sync is replacing the keyspace in place, so that
	// it stands at no position: snapshots capture nothing (Position) and
	// the role cannot change until it ends. Written under applyMu and mu.
	rebuilding bool
	// load is the progress of the full sync under way and the outcome
	// of the last (fullsync.go).
	load loadProgress
	// sweepBatch holds the batches of the engine's own changes.
	sweepBatch sync.Pool
}

// Stats count synchronizations, for INFO stats.
type Stats struct {
	FullSyncs      atomic.Int64 // sync_full
	PartialOK      atomic.Int64 // sync_partial_ok
	PartialErr     atomic.Int64 // sync_partial_err
	LastFullSync   atomic.Int64 // ns, the last full sync's duration (as a master)
	LastFullKeys   atomic.Int64
	LastSyncPause  atomic.Int64 // ns, the longest a full sync held one shard
	ReplicaFullEnd atomic.Int64 // ns, the last full sync's load as a replica
}

// New returns a master without replicas.
func New(eng *engine.Engine, set *Settings, hooks Hooks, log *slog.Logger) *Node {
	n := &Node{eng: eng, Set: set, hooks: hooks, log: log, streamDB: -1, acks: make(chan struct{})}
	n.replid = newReplID()
	n.replid2, n.secondOff = zeroID, -1
	n.noneSince = time.Now()
	n.sweepBatch.New = func() any { return n.NewBatch() }
	return n
}

const zeroID = "0000000000000000000000000000000000000000"

func newReplID() string {
	var b [20]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Stats returns the synchronization counters.
func (n *Node) Stats() *Stats { return &n.stats }

// Replica reports whether the node follows a master.
func (n *Node) Replica() bool { return n.replica.Load() }

// SetBacklogSize changes the bytes of stream kept for PSYNC.
func (n *Node) SetBacklogSize(size int64) {
	n.streamMu.Lock()
	defer n.streamMu.Unlock()
	if n.backlog != nil {
		n.backlog.SetSize(size)
	}
}

// Offset returns master_repl_offset: the stream's length so far.
func (n *Node) Offset() int64 {
	n.streamMu.Lock()
	defer n.streamMu.Unlock()
	return n.offsetLocked()
}

func (n *Node) offsetLocked() int64 {
	if n.backlog != nil {
		return n.backlog.End()
	}
	return n.offset
}

// Position returns, on a replica, the replication id and offset the
// keyspace stands at for a snapshot to record (restarted from it, the
// replica asks to continue from there), and stops applying the stream and
// replacing the keyspace until release is called, so that the snapshot's
// capture has every entry up to there and none after. ok is false on a
// master: what its snapshot captures changes as it goes, and its replicas
// may be ahead of it after a restart, so it would not be safe to continue
// from there. rebuilding says that a full sync is replacing the keyspace
// in place: it is neither the old dataset nor the new one, and no snapshot
// may capture it (release is nil).
func (n *Node) Position() (id string, off int64, release func(), ok, rebuilding bool) {
	n.applyMu.Lock()
	n.mu.Lock()
	if n.rebuilding {
		n.mu.Unlock()
		n.applyMu.Unlock()
		return "", 0, nil, true, true
	}
	id = n.replid
	n.mu.Unlock()
	if !n.replica.Load() {
		n.applyMu.Unlock()
		return "", 0, nil, false, false
	}
	return id, n.Offset(), n.applyMu.Unlock, true, false
}

// Restore sets the replication id and offset a snapshot recorded, before
// the node starts: a replica then asks its master to continue from there.
func (n *Node) Restore(replid string, offset int64) {
	if len(replid) != 40 {
		return
	}
	n.mu.Lock()
	n.replid = replid
	n.mu.Unlock()
	n.streamMu.Lock()
	n.offset = offset
	n.streamMu.Unlock()
}

// startRecording makes the node keep a stream, if it does not yet: the
// effect log is switched on before the backlog exists, so that no change
// made from then on is missed by the stream or by a capture that starts
// after. As in Redis, a master that starts a backlog takes a new
// replication id: it has no history to share. The caller holds n.mu.
func (n *Node) startRecording() {
	if n.recording.Load() {
		return
	}
	n.eng.SetEffectSink(n.sinkShard)
	n.streamMu.Lock()
	if n.backlog == nil {
		n.replid = newReplID()
		n.replid2, n.secondOff = zeroID, -1
		n.backlog = NewBacklog(n.offset, n.Set.BacklogSize.Load())
		n.streamDB = -1
	}
	n.streamMu.Unlock()
	n.recording.Store(true)
}

// stopRecording drops the stream (a master without replicas for
// repl-backlog-ttl, or a node that became a replica). The caller holds
// n.mu.
func (n *Node) stopRecording(keepBacklog bool) {
	n.recording.Store(false)
	n.eng.SetEffectSink(nil)
	if keepBacklog {
		return
	}
	n.streamMu.Lock()
	if n.backlog != nil {
		n.offset = n.backlog.End()
		n.backlog = nil
	}
	n.streamMu.Unlock()
}

// sinkShard sends the engine's own changes to a shard (the expiry
// sweeper's deletions) to the stream; the shard is locked.
func (n *Node) sinkShard(sh *engine.Shard) {
	b := n.sweepBatch.Get().(*Batch)
	if n.recording.Load() {
		b.Drain(sh)
		b.Commit(false)
	} else {
		b.Skip(sh)
	}
	n.sweepBatch.Put(b)
}

// HoldSwaps keeps full syncs from capturing while the caller (SWAPDB)
// runs, and waits for those under way. A capture taken while keys change
// is made whole by the stream that follows it, since every entry gives a
// key its whole state; a SWAPDB in that stream would not be.
func (n *Node) HoldSwaps() func() {
	n.swapGate.Lock()
	return n.swapGate.Unlock
}

// PingReplicas appends the master's heartbeat when it has replicas.
func (n *Node) pingReplicas() {
	n.mu.Lock()
	has := len(n.sessions) > 0 && n.master == nil
	n.mu.Unlock()
	if has {
		n.appendRaw(entryPing)
	}
}

// Run does the node's periodic work until ctx ends: heartbeats, replica
// timeouts, the backlog's time to live.
func (n *Node) Run(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var lastPing time.Time
	for {
		select {
		case <-ctx.Done():
			n.Stop()
			return
		case now := <-tick.C:
			if p := time.Duration(n.Set.PingPeriod.Load()) * time.Second; p > 0 && now.Sub(lastPing) >= p {
				lastPing = now
				n.pingReplicas()
			}
			n.cron(now)
		}
	}
}

// cron drops replicas that stopped acknowledging and the backlog that no
// replica used for repl-backlog-ttl.
func (n *Node) cron(now time.Time) {
	timeout := time.Duration(n.Set.Timeout.Load()) * time.Second
	n.mu.Lock()
	var late []*Session
	for _, s := range n.sessions {
		if s.online() && now.Sub(time.Unix(0, s.ackTime.Load())) > timeout {
			late = append(late, s)
		}
	}
	if len(n.sessions) > 0 {
		n.noneSince = now
	} else if ttl := n.Set.BacklogTTL.Load(); ttl > 0 && n.master == nil && n.recording.Load() &&
		now.Sub(n.noneSince) > time.Duration(ttl)*time.Second {
		n.log.Info("replication backlog freed after its time to live without replicas")
		n.stopRecording(false)
	}
	n.mu.Unlock()
	for _, s := range late {
		n.log.Warn("Disconnecting timedout replica (streaming sync): " + s.Name())
		s.conn.Kill()
	}
}

// Stop ends the master link and every replica's session.
func (n *Node) Stop() {
	n.mu.Lock()
	l := n.master
	sessions := append([]*Session(nil), n.sessions...)
	n.mu.Unlock()
	if l != nil {
		l.stop()
	}
	for _, s := range sessions {
		s.conn.Kill()
	}
}

// GoodReplicas counts the replicas online whose last acknowledgement is at
// most min-replicas-max-lag seconds old.
func (n *Node) GoodReplicas() int {
	maxLag := time.Duration(n.Set.MinReplicasLag.Load()) * time.Second
	now := time.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	good := 0
	for _, s := range n.sessions {
		if s.online() && now.Sub(time.Unix(0, s.ackTime.Load())) <= maxLag {
			good++
		}
	}
	return good
}

// WriteAllowed reports whether min-replicas-to-write lets a write run:
// Redis's NOREPLICAS check.
func (n *Node) WriteAllowed() bool {
	want := n.Set.MinReplicas.Load()
	if want == 0 || n.Set.MinReplicasLag.Load() == 0 {
		return true
	}
	if n.Replica() {
		return true
	}
	return int64(n.GoodReplicas()) >= want
}

// ReplicaInfo describes one replica for INFO and ROLE.
type ReplicaInfo struct {
	IP     string
	Port   int
	State  string // wait_bgsave, send_bulk, online
	Offset int64  // acknowledged
	Lag    int64  // seconds since the last acknowledgement
}

// Replicas describes the replicas attached to this node.
func (n *Node) Replicas() []ReplicaInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := time.Now()
	out := make([]ReplicaInfo, 0, len(n.sessions))
	for _, s := range n.sessions {
		ri := ReplicaInfo{IP: s.ip, Port: s.port, State: s.stateName(), Offset: s.ackOff.Load()}
		if s.online() {
			ri.Lag = int64(now.Sub(time.Unix(0, s.ackTime.Load())) / time.Second)
		}
		out = append(out, ri)
	}
	return out
}

// Info is INFO replication's content.
type Info struct {
	Replica bool
	// On a replica:
	MasterHost           string
	MasterPort           int
	LinkUp               bool
	LastIOSecondsAgo     int
	SyncInProgress       bool
	SyncReadBytes        int64 // master_sync_read_bytes, while in progress
	SyncLastIOSecondsAgo int   // master_sync_last_io_seconds_ago
	ReadOffset, Offset   int64 // slave_read_repl_offset, slave_repl_offset
	LinkDownSinceSeconds int64 // -1: never up
	State                string
	// The full syncs this replica loaded (limitkv's own fields).
	Load LoadInfo
	// On both:
	Replicas        []ReplicaInfo
	ReplID, ReplID2 string
	MasterOffset    int64
	SecondOffset    int64
	BacklogActive   bool
	BacklogSize     int64
	BacklogFirst    int64 // repl_backlog_first_byte_offset
	BacklogHistLen  int64
	GoodReplicas    int
	MinReplicas     int64
}

// Info returns the state INFO replication shows.
func (n *Node) Info() Info {
	in := Info{Replicas: n.Replicas(), GoodReplicas: -1}
	n.mu.Lock()
	in.ReplID, in.ReplID2, in.SecondOffset = n.replid, n.replid2, n.secondOff
	l := n.master
	n.mu.Unlock()
	n.streamMu.Lock()
	in.MasterOffset = n.offsetLocked()
	in.BacklogSize = n.Set.BacklogSize.Load()
	if n.backlog != nil {
		first, end := n.backlog.Range()
		in.BacklogActive = true
		in.BacklogFirst = first + 1
		in.BacklogHistLen = end - first
	}
	n.streamMu.Unlock()
	if l != nil {
		in.Replica = true
		l.info(&in)
	}
	in.Load = n.LoadInfo()
	if m := n.Set.MinReplicas.Load(); m > 0 && n.Set.MinReplicasLag.Load() > 0 {
		in.MinReplicas = m
		in.GoodReplicas = n.GoodReplicas()
	}
	return in
}

// Role is ROLE's reply.
type Role struct {
	Master   bool
	Offset   int64
	Replicas []ReplicaInfo // online ones, on a master
	Host     string
	Port     int
	State    string // on a replica: connect, connecting, handshake, sync, connected
}

// Role returns what ROLE answers.
func (n *Node) Role() Role {
	n.mu.Lock()
	l := n.master
	n.mu.Unlock()
	if l == nil {
		r := Role{Master: true, Offset: n.Offset()}
		for _, ri := range n.Replicas() {
			if ri.State == "online" {
				r.Replicas = append(r.Replicas, ri)
			}
		}
		return r
	}
	var in Info
	l.info(&in)
	off := int64(-1)
	if in.LinkUp {
		off = in.Offset
	}
	return Role{Host: l.host, Port: l.port, State: l.roleState(), Offset: off}
}

// Master returns the master's address, or "" on a master.
func (n *Node) Master() (string, int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.master == nil {
		return "", 0
	}
	return n.master.host, n.master.port
}

// LinkUp reports whether a replica's link to its master is up (always true
// on a master), for replica-serve-stale-data.
func (n *Node) LinkUp() bool {
	n.mu.Lock()
	l := n.master
	n.mu.Unlock()
	return l == nil || l.up()
}

// ErrLoading refuses a change of role while a full sync replaces the
// keyspace in place: the node would serve, or offer its replicas, a
// keyspace that stands at no position.
var ErrLoading = errors.New("LOADING Redis is loading the dataset in memory")

// ReplicaOf makes the node a replica of host:port, keeping its data and
// asking to continue from its own position. It reports false when it
// already follows that master.
func (n *Node) ReplicaOf(host string, port int) (bool, error) {
	n.mu.Lock()
	if n.rebuilding {
		n.mu.Unlock()
		return false, ErrLoading
	}
	old := n.master
	if old != nil && old.host == host && old.port == port {
		n.mu.Unlock()
		return false, nil
	}
	if old == nil {
		// A master becoming a replica: its own changes are no longer
		// the stream; the master's will be. Its replicas stay, to
		// continue from it once it has synchronized.
		n.stopRecording(true)
	}
	l := newLink(n, host, port, old)
	n.master = l
	n.replica.Store(true)
	n.eng.SetReplica(true)
	n.mu.Unlock()
	if old != nil {
		old.halt()
	}
	if n.hooks.RoleChanged != nil {
		n.hooks.RoleChanged()
	}
	n.log.Info("Connecting to MASTER " + net.JoinHostPort(host, strconv.Itoa(port)))
	go l.run()
	return true, nil
}

// ReplicaOfNoOne makes a replica a master. Its replication id becomes the
// secondary one, valid up to its offset, so that the other replicas of its
// former master can continue from it without a full sync; its own
// replicas are disconnected so that they learn the new id.
func (n *Node) ReplicaOfNoOne() (bool, error) {
	n.mu.Lock()
	if n.rebuilding {
		n.mu.Unlock()
		return false, ErrLoading
	}
	l := n.master
	if l == nil {
		n.mu.Unlock()
		return false, nil
	}
	n.master = nil
	n.replica.Store(false)
	n.eng.SetReplica(false)
	n.streamMu.Lock()
	off := n.offsetLocked()
	n.replid2 = n.replid
	n.secondOff = off + 1
	n.replid = newReplID()
	n.streamDB = -1
	n.streamMu.Unlock()
	n.log.Warn("Setting secondary replication ID to " + n.replid2 + ", valid up to offset: " +
		strconv.FormatInt(n.secondOff, 10) + ". New replication ID is " + n.replid)
	n.recording.Store(false)
	n.startRecording()
	sessions := append([]*Session(nil), n.sessions...)
	n.noneSince = time.Now()
	n.mu.Unlock()
	l.halt()
	for _, s := range sessions {
		s.conn.Kill()
	}
	if n.hooks.RoleChanged != nil {
		n.hooks.RoleChanged()
	}
	n.log.Info("MASTER MODE enabled")
	return true, nil
}

// WaitAcks returns a channel closed at the next acknowledgement.
func (n *Node) WaitAcks() <-chan struct{} {
	n.ackMu.Lock()
	defer n.ackMu.Unlock()
	return n.acks
}

func (n *Node) acked() {
	n.ackMu.Lock()
	close(n.acks)
	n.acks = make(chan struct{})
	n.ackMu.Unlock()
}

// CountAcked counts the replicas that acknowledged offset off.
func (n *Node) CountAcked(off int64) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, s := range n.sessions {
		if s.online() && s.ackOff.Load() >= off {
			c++
		}
	}
	return c
}

// RequestAcks asks every replica to acknowledge now (WAIT).
func (n *Node) RequestAcks() {
	n.mu.Lock()
	has := len(n.sessions) > 0
	n.mu.Unlock()
	if has {
		n.appendRaw(entryAck)
	}
}
