package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limitkv/limitkv/engine"
)

// link is a replica's connection to its master: it connects, asks to
// continue from where the replica is (or takes a full copy), applies the
// stream and acknowledges it every second, and reconnects by itself until
// it is stopped.
type link struct {
	n    *Node
	host string
	port int

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	prev   *link // the link this one replaces: it runs once that one ended

	state     atomic.Int32 // linkConnect...
	lastIO    atomic.Int64 // Unix ns of the last byte from the master
	downSince atomic.Int64 // Unix s since the link is down, 0: never up
	readOff   atomic.Int64 // slave_read_repl_offset
	applied   atomic.Int64 // slave_repl_offset
	// positioned: readOff and applied stand in the master's history
	// (after +CONTINUE or a full sync), not yet the node's own.
	positioned atomic.Bool

	wmu  sync.Mutex // writes to conn: acknowledgements
	conn net.Conn

	// What +FULLRESYNC announced, for load.
	fullID  string
	fullOff int64
}

const (
	linkConnect = iota
	linkConnecting
	linkHandshake
	linkSync
	linkConnected
)

func newLink(n *Node, host string, port int, prev *link) *link {
	ctx, cancel := context.WithCancel(context.Background())
	l := &link{n: n, host: host, port: port, ctx: ctx, cancel: cancel, done: make(chan struct{}), prev: prev}
	return l
}

func (l *link) addr() string { return net.JoinHostPort(l.host, strconv.Itoa(l.port)) }

func (l *link) up() bool { return l.state.Load() == linkConnected }

// stop ends the link and waits for its goroutine.
func (l *link) stop() {
	l.halt()
	<-l.done
}

// halt ends the link without waiting: REPLICAOF may run inside MULTI with
// every shard locked, which the link may be waiting for to apply an entry.
// The link applies nothing more once halted.
func (l *link) halt() {
	l.cancel()
	l.wmu.Lock()
	if l.conn != nil {
		l.conn.Close()
	}
	l.wmu.Unlock()
}

func (l *link) roleState() string {
	switch l.state.Load() {
	case linkConnect:
		return "connect"
	case linkConnecting:
		return "connecting"
	case linkHandshake:
		return "handshake"
	case linkSync:
		return "sync"
	}
	return "connected"
}

func (l *link) info(in *Info) {
	in.MasterHost, in.MasterPort = l.host, l.port
	in.LinkUp = l.up()
	in.State = l.roleState()
	in.LastIOSecondsAgo = -1
	if in.LinkUp {
		in.LastIOSecondsAgo = int(time.Since(time.Unix(0, l.lastIO.Load())) / time.Second)
	}
	in.SyncInProgress = l.state.Load() == linkSync
	if in.SyncInProgress {
		in.SyncReadBytes = l.n.load.read.Load()
		in.SyncLastIOSecondsAgo = int(time.Since(time.Unix(0, l.lastIO.Load())) / time.Second)
	}
	in.ReadOffset, in.Offset = l.offsets()
	if !in.LinkUp {
		in.LinkDownSinceSeconds = -1
		if d := l.downSince.Load(); d != 0 {
			in.LinkDownSinceSeconds = time.Now().Unix() - d
		}
	}
}

// offsets returns slave_read_repl_offset and slave_repl_offset: where the
// link stands in its master's stream, or before it has one, where the
// dataset the node holds stands (a full sync that failed keeps it whole,
// at its position), as Redis shows its cached master's.
func (l *link) offsets() (read, applied int64) {
	if l.positioned.Load() {
		return l.readOff.Load(), l.applied.Load()
	}
	off := l.n.Offset()
	return off, off
}

// run keeps the link up until it is stopped.
func (l *link) run() {
	defer close(l.done)
	if l.prev != nil {
		<-l.prev.done
		l.prev = nil
	}
	n := l.n
	for l.ctx.Err() == nil {
		l.state.Store(linkConnecting)
		err := l.session()
		// Down since now if it was up; a link never up is down since
		// ever (-1), as in Redis, however many syncs failed.
		if l.state.Load() == linkConnected {
			l.downSince.Store(time.Now().Unix())
		}
		l.state.Store(linkConnect)
		if l.ctx.Err() != nil {
			return
		}
		if err != nil {
			n.log.Warn("Replication with MASTER "+l.addr()+" interrupted", "err", err)
		}
		select {
		case <-l.ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// errStopped ends a session that was asked to stop.
var errStopped = errors.New("replication link stopped")

// session runs one connection to the master: handshake, synchronization,
// then the stream until the connection fails.
func (l *link) session() error {
	n := l.n
	timeout := time.Duration(n.Set.Timeout.Load()) * time.Second
	dctx, cancel := context.WithTimeout(l.ctx, timeout)
	conn, err := n.hooks.Dial(dctx, l.addr())
	cancel()
	if err != nil {
		return fmt.Errorf("Error condition on socket for SYNC: %w", err)
	}
	l.wmu.Lock()
	if l.ctx.Err() != nil {
		l.wmu.Unlock()
		conn.Close()
		return errStopped
	}
	l.conn = conn
	l.wmu.Unlock()
	defer func() {
		l.wmu.Lock()
		l.conn = nil
		l.wmu.Unlock()
		conn.Close()
	}()
	n.log.Info("MASTER <-> REPLICA sync started", "master", l.addr())
	l.state.Store(linkHandshake)
	rd := newEntryReader(deadlineReader{conn, timeout})
	full, err := l.handshake(conn, rd)
	if err != nil {
		return err
	}
	if full {
		if err := l.fullSync(rd); err != nil {
			return err
		}
	}
	l.state.Store(linkConnected)
	l.lastIO.Store(time.Now().UnixNano())
	n.log.Info("MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization or finished a full one", "master", l.addr())
	stopAcks := l.ackLoop()
	defer stopAcks()
	return l.apply(rd)
}

// deadlineReader fails a read that waits longer than repl-timeout.
type deadlineReader struct {
	c net.Conn
	d time.Duration
}

func (r deadlineReader) Read(b []byte) (int, error) {
	r.c.SetReadDeadline(time.Now().Add(r.d))
	return r.c.Read(b)
}

// send writes a command to the master.
func (l *link) send(conn net.Conn, args ...string) error {
	var b []byte
	b = appendArrayHeader(b, len(args))
	for _, a := range args {
		b = appendBulkString(b, a)
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	conn.SetWriteDeadline(time.Now().Add(time.Duration(l.n.Set.Timeout.Load()) * time.Second))
	_, err := conn.Write(b)
	return err
}

// handshake does what Redis's replicas do before PSYNC, then PSYNC. It
// reports whether the master starts a full synchronization.
func (l *link) handshake(conn net.Conn, rd *entryReader) (full bool, err error) {
	n := l.n
	ask := func(args ...string) (string, error) {
		if err := l.send(conn, args...); err != nil {
			return "", err
		}
		return rd.reply()
	}
	rep, err := ask("PING")
	if err != nil {
		return false, err
	}
	// A master that wants a password answers NOAUTH: fine, AUTH follows.
	if strings.HasPrefix(rep, "-") && !strings.HasPrefix(rep, "-NOAUTH") && !strings.HasPrefix(rep, "-NOPERM") &&
		!strings.HasPrefix(rep, "-ERR operation not permitted") {
		return false, fmt.Errorf("Error reply to PING from master: '%s'", rep)
	}
	if pass := *n.Set.MasterAuth.Load(); pass != "" {
		args := []string{"AUTH", pass}
		if user := *n.Set.MasterUser.Load(); user != "" {
			args = []string{"AUTH", user, pass}
		}
		if rep, err = ask(args...); err != nil {
			return false, err
		}
		if strings.HasPrefix(rep, "-") {
			return false, fmt.Errorf("Unable to AUTH to MASTER: %s", rep)
		}
	}
	port := 0
	if n.hooks.Port != nil {
		port = n.hooks.Port()
	}
	if p := n.Set.AnnouncePort.Load(); p != 0 {
		port = int(p)
	}
	if rep, err = ask("REPLCONF", "listening-port", strconv.Itoa(port)); err != nil {
		return false, err
	}
	if strings.HasPrefix(rep, "-") {
		n.log.Info("(Non critical) Master does not understand REPLCONF listening-port: " + rep)
	}
	if ip := *n.Set.AnnounceIP.Load(); ip != "" {
		if rep, err = ask("REPLCONF", "ip-address", ip); err != nil {
			return false, err
		}
		if strings.HasPrefix(rep, "-") {
			n.log.Info("(Non critical) Master does not understand REPLCONF ip-address: " + rep)
		}
	}
	if rep, err = ask("REPLCONF", "capa", "eof", "capa", "psync2"); err != nil {
		return false, err
	}
	if strings.HasPrefix(rep, "-") {
		n.log.Info("(Non critical) Master does not understand REPLCONF capa: " + rep)
	}
	replid, off := l.psyncFrom()
	if rep, err = ask("PSYNC", replid, strconv.FormatInt(off, 10)); err != nil {
		return false, err
	}
	switch {
	case strings.HasPrefix(rep, "+FULLRESYNC "):
		f := strings.Fields(rep)
		if len(f) != 3 || len(f[1]) != 40 {
			return false, fmt.Errorf("master replied with wrong +FULLRESYNC syntax: %q", rep)
		}
		pos, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil || pos < 0 {
			return false, fmt.Errorf("master replied with wrong +FULLRESYNC syntax: %q", rep)
		}
		n.log.Info("Full resync from master: " + f[1] + ":" + f[2])
		l.fullID, l.fullOff = f[1], pos
		return true, nil
	case strings.HasPrefix(rep, "+CONTINUE"):
		n.log.Info("Successful partial resynchronization with master.")
		l.continued(strings.TrimSpace(strings.TrimPrefix(rep, "+CONTINUE")))
		return false, nil
	}
	return false, fmt.Errorf("Unexpected reply to PSYNC from master: %s", rep)
}

// psyncFrom returns what PSYNC asks for: the replica's id and the first
// byte it lacks, or "?" and -1 when it has no history to continue.
func (l *link) psyncFrom() (string, int64) {
	n := l.n
	n.mu.Lock()
	id := n.replid
	n.mu.Unlock()
	off := n.Offset()
	if l.fresh() {
		return "?", -1
	}
	return id, off + 1
}

// fresh reports whether the replica has nothing to continue from: it never
// had a stream (a master that never had replicas has nothing a master
// could share).
func (l *link) fresh() bool {
	n := l.n
	n.streamMu.Lock()
	defer n.streamMu.Unlock()
	return n.backlog == nil && n.offset == 0
}

// continued takes the master's id after +CONTINUE. A new id means the
// master was promoted: the old one stays valid up to here, and this
// replica's own replicas must reconnect to learn the new one.
func (l *link) continued(newID string) {
	n := l.n
	n.mu.Lock()
	var drop []*Session
	if len(newID) == 40 && newID != n.replid {
		n.streamMu.Lock()
		off := n.offsetLocked()
		n.streamMu.Unlock()
		n.replid2, n.secondOff = n.replid, off+1
		n.replid = newID
		drop = append(drop, n.sessions...)
	}
	n.streamMu.Lock()
	if n.backlog == nil {
		n.backlog = NewBacklog(n.offset, n.Set.BacklogSize.Load())
	}
	off := n.backlog.End()
	n.streamMu.Unlock()
	n.mu.Unlock()
	l.readOff.Store(off)
	l.applied.Store(off)
	l.positioned.Store(true)
	for _, s := range drop {
		s.conn.Kill()
	}
}

func (n *Node) limits() engine.Limits {
	if n.hooks.Limits != nil {
		return n.hooks.Limits()
	}
	return engine.DefaultLimits
}

// ackLoop acknowledges the applied offset every second until stopped.
func (l *link) ackLoop() func() {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				l.ack()
			}
		}
	}()
	return func() { close(stop); <-done }
}

// ack sends REPLCONF ACK with the applied offset.
func (l *link) ack() {
	l.wmu.Lock()
	c := l.conn
	l.wmu.Unlock()
	if c != nil {
		l.send(c, "REPLCONF", "ACK", strconv.FormatInt(l.applied.Load(), 10))
	}
}

// apply applies the stream until the connection fails. Each entry's bytes
// also go to this replica's own backlog, for its replicas and for a
// partial resynchronization after a failover.
func (l *link) apply(rd *entryReader) error {
	n := l.n
	lim := n.limits()
	db := -1
	var group [][][]byte // a MULTI's entries, copied
	var groupBytes []byte
	inGroup := false
	for {
		args, raw, err := rd.entry()
		if err != nil {
			if l.ctx.Err() != nil {
				return errStopped
			}
			if errors.Is(err, io.EOF) {
				return errors.New("connection closed by master")
			}
			return err
		}
		if l.ctx.Err() != nil {
			return errStopped
		}
		l.lastIO.Store(time.Now().UnixNano())
		l.readOff.Add(int64(len(raw)))
		if len(args) == 0 {
			l.forward(raw)
			continue
		}
		if inGroup {
			groupBytes = append(groupBytes, raw...)
			if isCmd(args[0], "EXEC") {
				inGroup = false
				n.applyMu.Lock()
				if err := l.applyGroup(&db, group, lim); err != nil {
					n.log.Warn("applying the master's transaction", "err", err)
				}
				l.forward(groupBytes)
				n.applyMu.Unlock()
				group, groupBytes = group[:0], groupBytes[:0]
				continue
			}
			group = append(group, copyArgs(args))
			continue
		}
		switch {
		case isCmd(args[0], "MULTI"):
			inGroup = true
			groupBytes = append(groupBytes[:0], raw...)
			continue
		case isCmd(args[0], "PING"):
		case isCmd(args[0], "REPLCONF"):
			if len(args) >= 2 && isCmd(args[1], "GETACK") {
				l.forward(raw)
				l.ack()
				continue
			}
		default:
			n.applyMu.Lock()
			if err := l.applyOne(&db, args, lim, false); err != nil {
				n.log.Warn("applying the master's stream", "command", string(args[0]), "err", err)
			}
			l.forward(raw)
			n.applyMu.Unlock()
			continue
		}
		l.forward(raw)
	}
}

// forward adds applied bytes to this replica's backlog and offset.
func (l *link) forward(raw []byte) {
	n := l.n
	n.streamMu.Lock()
	off := n.backlog.Append(raw)
	n.streamMu.Unlock()
	l.applied.Store(off)
}

// applyOne applies one entry in database *db. held: every shard is locked.
func (l *link) applyOne(db *int, args [][]byte, lim engine.Limits, held bool) error {
	n := l.n
	switch {
	case isCmd(args[0], "SELECT"):
		if len(args) != 2 {
			return errArity(args)
		}
		d, err := strconv.Atoi(string(args[1]))
		if err != nil || d < 0 || d >= n.eng.Databases() {
			return fmt.Errorf("SELECT %q: no such database", args[1])
		}
		*db = d
		return nil
	case isCmd(args[0], "LKV.SET"), isCmd(args[0], "LKV.DEL"):
		if *db < 0 {
			*db = 0
		}
		if held {
			return loadEntry(n.eng, lim, *db, args)
		}
		if len(args) < 2 {
			return errArity(args)
		}
		keys := args[1:]
		if isCmd(args[0], "LKV.SET") {
			keys = args[1:2]
		}
		m := n.eng.MaskOf(keys...)
		n.eng.Lock(m)
		err := loadEntry(n.eng, lim, *db, args)
		n.eng.FlushNotes(m)
		n.eng.Unlock(m)
		return err
	}
	d := *db
	if d < 0 {
		d = 0
	}
	return n.hooks.Exec(d, args, held)
}

// applyGroup applies a MULTI's entries as one, every shard locked.
func (l *link) applyGroup(db *int, group [][][]byte, lim engine.Limits) error {
	n := l.n
	n.eng.Lock(engine.AllShards)
	defer n.eng.Unlock(engine.AllShards)
	var first error
	for _, args := range group {
		if len(args) == 0 {
			continue
		}
		if err := l.applyOne(db, args, lim, true); err != nil && first == nil {
			first = err
		}
	}
	n.eng.FlushNotes(engine.AllShards)
	return first
}

func copyArgs(args [][]byte) [][]byte {
	total := 0
	for _, a := range args {
		total += len(a)
	}
	buf := make([]byte, 0, total)
	out := make([][]byte, len(args))
	for i, a := range args {
		start := len(buf)
		buf = append(buf, a...)
		out[i] = buf[start:len(buf):len(buf)]
	}
	return out
}
