package replication

import (
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/limitkv/limitkv/engine"
)

// ReplicaConn is a replica's connection to its master, as the master's
// network server gives it: output is pushed, in order, and bounded by the
// connection's output limits (client-output-buffer-limit replica).
type ReplicaConn interface {
	Push(b []byte) bool
	Done() <-chan struct{}
	Kill()
	Pending() int64 // output not yet sent
	RemoteAddr() string
}

// Session is one replica attached to this node.
type Session struct {
	n       *Node
	id      int64
	conn    ReplicaConn
	ip      string
	port    int
	state   atomic.Int32
	ackOff  atomic.Int64
	ackTime atomic.Int64 // Unix ns of the last acknowledgement
}

const (
	stateSync   = iota // the keyspace is being captured and sent
	stateOnline        // streaming
)

func (s *Session) online() bool { return s.state.Load() == stateOnline }

func (s *Session) stateName() string {
	if s.online() {
		return "online"
	}
	return "send_bulk"
}

// Name describes the replica for the log, as Redis does.
func (s *Session) Name() string {
	return net.JoinHostPort(s.ip, strconv.Itoa(s.port))
}

// Ack records a replica's REPLCONF ACK.
func (s *Session) Ack(off int64) {
	if off > s.ackOff.Load() {
		s.ackOff.Store(off)
	}
	s.ackTime.Store(time.Now().UnixNano())
	s.n.acked()
}

// Handshake is what a replica said before PSYNC (REPLCONF).
type Handshake struct {
	ListeningPort int
	IPAddress     string // REPLCONF ip-address (replica-announce-ip)
	Psync2        bool   // REPLCONF capa psync2
}

// Psync answers a replica's PSYNC replid offset: +CONTINUE when the
// backlog holds what it lacks, else +FULLRESYNC with the offset its copy of
// the keyspace stands for. The caller writes the reply, makes sure it
// leaves before anything pushed after it, then calls start, which streams
// from a goroutine of its own. An error reply (a replica whose link to its
// own master is down) comes back with start nil.
func (n *Node) Psync(conn ReplicaConn, hs Handshake, replid string, offset int64) (reply string, start func()) {
	// A full sync holds swaps off while it captures (see HoldSwaps); the
	// hold is taken before n.mu, as a capture that ends takes n.mu.
	n.swapGate.RLock()
	held := true
	defer func() {
		if held {
			n.swapGate.RUnlock()
		}
	}()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.master != nil && !n.master.up() {
		return "NOMASTERLINK Can't SYNC while not connected with my master", nil
	}
	n.nextID++
	s := &Session{n: n, id: n.nextID, conn: conn, ip: hs.IPAddress, port: hs.ListeningPort}
	if s.ip == "" {
		s.ip, _, _ = net.SplitHostPort(conn.RemoteAddr())
	}
	s.ackTime.Store(time.Now().UnixNano())
	n.log.Info("Replica " + s.Name() + " asks for synchronization")
	if n.master == nil {
		n.startRecording()
	}
	// PSYNC's offset is the first byte the replica lacks, counted from 1.
	if r, ok := n.partial(replid, offset-1); ok {
		s.state.Store(stateOnline)
		n.sessions = append(n.sessions, s)
		n.stats.PartialOK.Add(1)
		first, end := n.backlog.Range()
		_ = first
		n.log.Info("Partial resynchronization request from " + s.Name() + " accepted. Sending " +
			strconv.FormatInt(end-(offset-1), 10) + " bytes of backlog starting from offset " + strconv.FormatInt(offset, 10) + ".")
		reply = "CONTINUE"
		if hs.Psync2 {
			reply += " " + n.replid
		}
		return reply, func() { go s.stream(r) }
	}
	if replid != "?" {
		n.stats.PartialErr.Add(1)
	}
	n.stats.FullSyncs.Add(1)
	// Every shard is marked as yet to be captured before the offset the
	// copy stands for is read: a command that ran before its shard was
	// marked is in the copy and before that offset; one that runs after
	// sends its keys' states, not itself, until the copy has its shard.
	// The reader, from that offset, keeps the stream that follows.
	held = false // fullSync lets the hold go
	for i := 0; i < engine.Shards; i++ {
		sh := n.eng.Shard(i)
		sh.Lock()
		n.pending[i].Add(1)
		sh.Unlock()
	}
	var funcs []byte
	if f := n.hooks.Functions; f != nil {
		entry, release := f()
		funcs = appendEntry(nil, entry)
		defer release()
	}
	if f := n.hooks.Policies; f != nil {
		payload, release := f()
		if len(payload) > 0 {
			funcs = appendEntry(funcs, [][]byte{policiesCmd, payload})
		}
		defer release()
	}
	n.streamMu.Lock()
	pos := n.backlog.End()
	r, _ := n.backlog.NewReader(pos)
	n.streamMu.Unlock()
	s.state.Store(stateSync)
	n.sessions = append(n.sessions, s)
	reply = "FULLRESYNC " + n.replid + " " + strconv.FormatInt(pos, 10)
	n.log.Info("Starting a full synchronization for replica " + s.Name() + " from offset " + strconv.FormatInt(pos, 10))
	return reply, func() { go s.fullSync(r, funcs) }
}

// partial returns a reader from off (0-based: the replica has every byte
// before it) when replid's history is this node's up to there and the
// backlog still holds it. The caller holds n.mu.
func (n *Node) partial(replid string, off int64) (*Reader, bool) {
	if n.backlog == nil || replid == "?" {
		return nil, false
	}
	if !strings.EqualFold(replid, n.replid) && (!strings.EqualFold(replid, n.replid2) || off+1 > n.secondOff) {
		n.log.Info("Partial resynchronization not accepted: replication ID mismatch (replica asked for '" + replid +
			"', my replication IDs are '" + n.replid + "' and '" + n.replid2 + "')")
		return nil, false
	}
	n.streamMu.Lock()
	defer n.streamMu.Unlock()
	r, ok := n.backlog.NewReader(off)
	if !ok {
		n.log.Info("Unable to partial resync with replica for lack of backlog (replica request was: " + strconv.FormatInt(off+1, 10) + ").")
	}
	return r, ok
}

// remove forgets a session whose connection closed.
func (n *Node) remove(s *Session) {
	n.mu.Lock()
	for i, x := range n.sessions {
		if x == s {
			n.sessions = append(n.sessions[:i], n.sessions[i+1:]...)
			break
		}
	}
	if len(n.sessions) == 0 {
		n.noneSince = time.Now()
	}
	n.mu.Unlock()
	n.acked() // a WAIT may count one fewer now
}

// syncWindow is how much captured keyspace may wait in a replica's output
// before the capture goes on: a full sync's memory on the master is a
// shard's encoding plus this, however large the keyspace.
const syncWindow = 4 << 20

// fullSync sends the function libraries and the rate-limit policies
// (funcs, entries), the keyspace,
// shard by shard, then the stream from the offset the copy stands for. Each shard is captured whole under its lock,
// so that keys moving inside its table cannot be missed; the shards are
// captured at different moments, and the stream that follows makes the
// copy exact, since each of its entries sets a key's whole state.
func (s *Session) fullSync(r *Reader, funcs []byte) {
	n := s.n
	start := time.Now()
	ok := s.conn.Push(syncBegin)
	if ok && len(funcs) > 0 {
		ok = s.conn.Push(funcs)
	}
	var buf []byte
	keys := 0
	var longest time.Duration
	// A replica's stream holds its master's entries as they came, some of
	// them commands: it stops applying while it captures, so that the copy
	// stands exactly at the offset it announced.
	exact := n.replica.Load()
	if exact {
		n.applyMu.Lock()
	}
	captured := 0
	for i := 0; i < engine.Shards && ok; i++ {
		sh := n.eng.Shard(i)
		sh.Lock()
		t0 := time.Now()
		var k int
		buf, k = appendShard(buf[:0], sh, n.eng)
		n.pending[i].Add(-1)
		captured++
		longest = max(longest, time.Since(t0))
		sh.Unlock()
		keys += k
		if len(buf) > 0 {
			ok = s.conn.Push(buf)
		}
		if cap(buf) > 8<<20 {
			buf = nil
		}
		ok = ok && s.waitOutput(syncWindow) && s.withinLimits(r)
	}
	for i := captured; i < engine.Shards; i++ {
		n.pending[i].Add(-1) // a sync that failed halfway
	}
	if exact {
		n.applyMu.Unlock()
	}
	n.swapGate.RUnlock()
	if ok {
		ok = s.conn.Push(syncEnd)
	}
	if !ok {
		r.Close()
		n.remove(s)
		s.conn.Kill()
		n.log.Warn("Full synchronization of replica " + s.Name() + " failed: the connection closed")
		return
	}
	d := time.Since(start)
	n.stats.LastFullSync.Store(int64(d))
	n.stats.LastFullKeys.Store(int64(keys))
	n.stats.LastSyncPause.Store(int64(longest))
	n.log.Info("Synchronization with replica "+s.Name()+" succeeded", "keys", keys, "took", d.Round(time.Millisecond))
	s.state.Store(stateOnline)
	s.ackTime.Store(time.Now().UnixNano())
	s.stream(r)
}

// appendEntry appends a command as an entry of the stream.
func appendEntry(dst []byte, args [][]byte) []byte {
	if len(args) == 0 {
		return dst
	}
	dst = appendArrayHeader(dst, len(args))
	for _, a := range args {
		dst = appendBulk(dst, a)
	}
	return dst
}

// appendShard appends every live key of a shard, in every database, as
// SELECT and LKV.SET entries, and counts them. The shard is locked.
func appendShard(dst []byte, sh *engine.Shard, eng *engine.Engine) ([]byte, int) {
	now := eng.Now()
	keys := 0
	var val []byte
	for db := 0; db < eng.Databases(); db++ {
		if sh.Len(db) == 0 {
			continue
		}
		selected := false
		sh.Keys(db, 0, int(^uint(0)>>1), now, func(e engine.Entry) {
			v, err := engine.AppendValue(val[:0], sh, e)
			if err != nil {
				return
			}
			val = v
			if !selected {
				dst = appendSelect(dst, db)
				selected = true
			}
			dst = append(dst, "*3\r\n$7\r\nLKV.SET\r\n"...)
			dst = appendBulk(dst, e.Key())
			dst = appendBulk(dst, val)
			keys++
		})
	}
	return dst, keys
}

// waitOutput waits until the replica's unsent output is under max. A
// replica that reads nothing for repl-timeout is given up, as Redis gives
// up a transfer that makes no progress: the capture must not wait for it
// for ever (SWAPDB waits for the capture).
func (s *Session) waitOutput(max int64) bool {
	timeout := time.Duration(s.n.Set.Timeout.Load()) * time.Second
	last, since := s.conn.Pending(), time.Now()
	for {
		p := s.conn.Pending()
		if p <= max {
			return true
		}
		if p < last {
			last, since = p, time.Now()
		} else if time.Since(since) > timeout {
			s.n.log.Warn("Disconnecting timedout replica (full sync): " + s.Name())
			return false
		}
		select {
		case <-s.conn.Done():
			return false
		case <-time.After(time.Millisecond):
		}
	}
}

// withinLimits drops a replica whose stream piled up past its output
// limits while its copy was being sent, as Redis does.
func (s *Session) withinLimits(r *Reader) bool {
	var hard int64
	if f := s.n.hooks.OutputLimit; f != nil {
		hard = f()
	}
	if hard > 0 && s.n.Offset()-r.Pos() > hard {
		s.n.log.Warn("Client " + s.Name() + " scheduled to be closed ASAP for overcoming of output buffer limits.")
		return false
	}
	return true
}

// streamChunk bounds what a sender pushes at once.
const streamChunk = 256 << 10

// gather is how long a sender lets the stream gather after it is woken,
// before it hands the bytes to the connection: one write then carries the
// entries of every command of that moment, where a write per command costs
// the master a goroutine wake-up and a system call per replica, and the
// replica as many reads. Redis gets the same from its event loop, which
// writes to replicas once per round. A replication delay of this much is
// the price.
const gather = 200 * time.Microsecond

// stream sends the stream from the reader's position until the
// connection closes. The connection's output limits close a replica that
// does not keep up.
func (s *Session) stream(r *Reader) {
	defer func() {
		r.Close()
		s.n.remove(s)
		s.n.log.Info("Connection with replica " + s.Name() + " lost.")
	}()
	push := func(b []byte) {
		if !s.conn.Push(b) {
			s.conn.Kill()
		}
	}
	for {
		for {
			n, lag := r.Next(streamChunk, push)
			if n == 0 || lag == 0 {
				break
			}
		}
		select {
		case <-s.conn.Done():
			return
		case <-r.Wake():
		}
		time.Sleep(gather)
	}
}

// Session returns the session of a replica connection, for REPLCONF ACK.
func (n *Node) Session(conn ReplicaConn) *Session {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, s := range n.sessions {
		if s.conn == conn {
			return s
		}
	}
	return nil
}
