package commands

import (
	"bytes"
	"math"
	"math/big"
	"math/bits"
	"time"

	"github.com/limitkv/limitkv/blocking"
	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/resp"
)

// How the blocking pops (BLPOP BRPOP BRPOPLPUSH BLMOVE BLMPOP in lists.go,
// BZPOPMIN BZPOPMAX BZMPOP in zsets.go) and the blocking stream reads
// (XREAD and XREADGROUP with BLOCK, streams.go) wait and are served, and
// how CLIENT UNBLOCK (client.go) and WAIT end a wait.
//
// A blocking command that finds something pops it as its non-blocking
// form would, and is replicated as that form (LPOP, LMOVE, ZPOPMIN ...).
// One that finds nothing registers a waiter on each of its keys in the
// registry of package blocking, in the order clients blocked (FIFO per
// key, as Redis's db->blocking_keys), while dispatch still holds the keys'
// shard locks, and returns: the locks go, and the connection's goroutine
// waits in request (awaitBlocked), holding nothing, for one of: a pop made
// for it, its timeout, CLIENT UNBLOCK, or its connection closing (Done, or
// the peer hanging up, which resp.Conn.WatchHangup notices as nobody reads
// the socket meanwhile). Whoever claims the waiter first
// (blocking.Registry.Claim) writes its reply; the others leave it alone.
//
// A write command that touches a key some client waits for marks the key
// ready (noteReady) on its client; once the command, the transaction or
// the script is done, and before its shard locks go, the server serves
// the ready keys (serveReady): for each key, the waiters in the order they
// blocked, each popping for itself into its own reply, until the key is
// gone, as Redis's handleClientsBlockedOnKeys. So a push is seen by the
// clients blocked on the key before any command that comes after it, and
// each element goes to exactly one of them. A BLMOVE served this way
// pushes in turn, which makes its destination ready. A served pop reports
// the keyspace events its non-blocking form would, after those of the
// command that served it.
//
// Inside MULTI/EXEC and scripts (every shard held), and on the client
// that runs a master's stream, a blocking command does not block: it
// answers as if it had timed out at once, as Redis's CLIENT_DENY_BLOCKING.
//
// A stream is served otherwise, as blocked.c serves it: reading takes
// nothing away, so every stream waiter on a ready key is looked at, in
// the order they blocked, and each whose ID the stream's last ID has
// passed is served the entries after it (XREAD: the ID it gave, "$" read
// when it blocked; XREADGROUP: its group's last delivered ID, which the
// readers served before it moved). An XREADGROUP whose group went ends
// with NOGROUP, and one whose key went, or holds another type now, with
// UNBLOCKED. Redis marks a stream ready only when entries come (XADD),
// when its key is created, replaced or deleted and when a group is
// destroyed; the stream commands that do none of these (XSETID, XGROUP
// SETID ...) mark nothing here either, so that they serve nobody early.

// blockOp is what a waiter does once its key has something.
type blockOp uint8

const (
	opPop    blockOp = iota // BLPOP, BRPOP: [key, element]
	opMove                  // BLMOVE, BRPOPLPUSH: the element, pushed on
	opMPop                  // BLMPOP: [key, [elements]]
	opZPop                  // BZPOPMIN, BZPOPMAX: [key, member, score]
	opZMPop                 // BZMPOP: [key, [[member, score] ...]]
	opStream                // XREAD, XREADGROUP: [[key, [entries]]], or a map
	opWait                  // WAIT: on no key, for CLIENT UNBLOCK only
)

// waiter is a blocked request: the registry's entry, and what the
// request does once served (its Req is itself).
type waiter struct {
	blocking.Waiter
	op   blockOp
	spec *cmdspec.Spec
	args [][]byte // the request: valid while its client waits
	head bool     // lists: pop the head (LEFT); zsets: the lowest score
	to   bool     // BLMOVE: push at the head
	// count: BLMPOP, BZMPOP: at most count elements; XREAD: entries.
	count int64
	// Streams: ids[i] is the ID the key args[streams+i] waits past (the
	// first one counts for a key named twice); group and consumer are
	// XREADGROUP's (group nil for XREAD), noack its NOACK.
	streams         int
	ids             []engine.StreamID
	group, consumer []byte
	noack           bool
	// closeAfter: the connection closes once the reply is sent.
	closeAfter bool
	woff       int64        // WAIT: the offset its client waits for
	out        *resp.Writer // the reply, written by whoever claims the waiter
}

func waiterOf(bw *blocking.Waiter) *waiter { return bw.Req.(*waiter) }

// streamAfter returns the ID a stream waiter waits past on key.
func (w *waiter) streamAfter(key []byte) engine.StreamID {
	for i, id := range w.ids {
		if bytes.Equal(w.args[w.streams+i], key) {
			return id
		}
	}
	return engine.MaxStreamID
}

func (w *waiter) client() *Client { return w.Client.(*Client) }

// SetBlocked records the waiter the client is blocked on, for the
// blocking registry (blocking.Client).
func (cl *Client) SetBlocked(w *blocking.Waiter) { cl.blocking.Store(w) }

// noteReady marks key ready on cl, once, if a client waits on it.
func (s *Server) noteReady(cl *Client, db int, key []byte) {
	cl.ready = s.blocks.NoteReady(cl.ready, db, key)
}

// noteWritten marks ready the keys a write command touched, after it ran.
func (s *Server) noteWritten(c *Ctx, pos []int) {
	spec := c.Spec
	if spec.Flags&cmdspec.Write == 0 || !s.blocks.Waiting() || quietForStreams(spec) {
		return
	}
	// A command that creates keys its key specs do not name (SWAPDB, MOVE,
	// COPY ... DB, FLUSHALL and other whole-keyspace commands) readies
	// every key a client waits on; serving checks each. FLUSHALL and
	// FLUSHDB only delete, which ends the XREADGROUPs on streams they took.
	if spec.Flags&cmdspec.SelfLock != 0 || spec.Name == "swapdb" || spec.Name == "move" || spec.Name == "copy" ||
		spec.Name == "flushall" || spec.Name == "flushdb" {
		c.Client.ready = s.blocks.NoteAllReady(c.Client.ready)
		return
	}
	for _, i := range pos {
		s.noteReady(c.Client, c.DB, c.Args[i])
	}
}

// quietForStreams reports whether a command is one of the stream
// commands Redis does not signal a key ready for: none adds entries,
// creates, replaces or deletes a key, or destroys a group, so none could
// serve a stream waiter but one a skipped signal left waiting.
func quietForStreams(spec *cmdspec.Spec) bool {
	if p := spec.Parent(); p != nil && p.Name != "xgroup" || p == nil && spec.Name[0] != 'x' {
		return false
	}
	switch spec.FullName() {
	case "xsetid", "xtrim", "xdel", "xack", "xclaim", "xautoclaim", "xreadgroup",
		"xgroup|setid", "xgroup|createconsumer", "xgroup|delconsumer":
		return true
	}
	return false
}

// lockMore makes sure the shards of want are locked besides those of m,
// and returns what is locked now. Shards are locked in ascending order
// everywhere: extra shards above every held one are simply locked;
// otherwise everything is let go and taken again, in order.
func (s *Server) lockMore(m, want engine.Mask) engine.Mask {
	extra := want &^ m
	if extra == 0 {
		return m
	}
	if m == 0 || bits.TrailingZeros64(uint64(extra)) > 63-bits.LeadingZeros64(uint64(m)) {
		s.Eng.Lock(extra)
		return m | extra
	}
	s.Eng.Unlock(m)
	s.Eng.Lock(m | extra)
	return m | extra
}

// serveReady serves the clients blocked on the keys c's client marked
// ready, holding the shards of m (every shard when c is held), and
// returns the shards it holds now, which the caller unlocks.
func (s *Server) serveReady(c *Ctx, m engine.Mask) engine.Mask {
	cl := c.Client
	for i := 0; i < len(cl.ready); i++ {
		m = s.serveKey(c, cl.ready[i], m)
	}
	if s.Eng.Notes() != 0 {
		s.drainNotes(c, m) // a ready key found expired
	}
	clear(cl.ready)
	cl.ready = cl.ready[:0]
	if !c.held && s.Repl.Recording() {
		if off := cl.batch().Commit(true); off != 0 {
			cl.woff = off
		}
	}
	return m
}

// serveKey serves the clients blocked on one ready key, in the order they
// blocked, while it has something for them.
func (s *Server) serveKey(c *Ctx, rk blocking.ReadyKey, m engine.Mask) engine.Mask {
	key := []byte(rk.Key)
	own := s.Eng.Add(0, key)
	for {
		if !c.held {
			m = s.lockMore(m, own)
		}
		sh := s.Eng.ShardFor(key)
		e, found := sh.Find(rk.DB, key, c.Now)
		if !found {
			s.endGroupReads(rk.DB, key)
			return m
		}
		kind := e.Kind()
		if kind == engine.KindStream {
			s.serveStream(c, rk.DB, key, own)
			return m
		}
		if kind != engine.KindList && kind != engine.KindZSet {
			s.endGroupReads(rk.DB, key)
			return m
		}
		bw := s.blocks.First(rk.DB, key, uint8(kind))
		if bw == nil {
			s.endGroupReads(rk.DB, key)
			return m
		}
		w := waiterOf(bw)
		want := own
		if w.op == opMove {
			want = s.Eng.Add(want, w.args[2])
		}
		if want&^m != 0 && !c.held {
			m = s.lockMore(m, want)
			continue // the locks may have been let go: look again
		}
		if !s.blocks.Claim(bw) {
			continue // timed out or unblocked meanwhile
		}
		s.serveWaiter(c, w, key, want)
	}
}

// serveWaiter pops for a claimed waiter from its ready key, which holds
// something of the waiter's kind, writes its reply and wakes it. The
// shards of mask are locked. The pop is replicated as its non-blocking
// command, after whatever the shards logged before it.
func (s *Server) serveWaiter(c *Ctx, w *waiter, key []byte, mask engine.Mask) {
	rec := s.Repl.Recording()
	b := c.Client.batch()
	if rec {
		forShards(mask, func(i int) { b.Drain(s.Eng.Shard(i)) })
	}
	// The pop runs for the waiter, into its reply, but its keyspace events
	// are published as the serving client's: a message to the client it
	// comes from is written into that client's connection, and the
	// waiter's belongs to the waiter's own goroutine.
	rc := &Ctx{Srv: s, Client: c.Client, W: w.out, Args: w.args, Now: c.Now, DB: w.DB, Spec: w.spec, held: true}
	sh := s.Eng.ShardFor(key)
	e, _ := sh.Find(w.DB, key, c.Now)
	var rep [][]byte
	switch w.op {
	case opPop, opMPop:
		count := int64(-1)
		if w.op == opMPop {
			count = w.count
		}
		rep = listPop(rc, sh, e, key, w.head, count)
	case opMove:
		n := rc.W.Len()
		move(rc, w.head, w.to)
		if rc.W.Bytes()[n] != '-' {
			rep = moveCommand(w)
			s.noteReady(c.Client, w.DB, w.args[2])
		}
	case opZPop, opZMPop:
		count := int64(-1)
		if w.op == opZMPop {
			count = w.count
		}
		rep = zsetPop(rc, sh, e, key, !w.head, count, w.op == opZMPop)
	}
	// What the engine logged meanwhile (a destination created while the
	// list class is off) is reported before the next waiter's events.
	if s.Eng.Notes() != 0 {
		s.drainNotes(c, mask)
	}
	if rec {
		if rep != nil && s.Repl.AsIs(mask) {
			forShards(mask, func(i int) { b.Expired(s.Eng.Shard(i)) })
			b.Command(w.DB, rep...)
		} else {
			forShards(mask, func(i int) { b.Drain(s.Eng.Shard(i)) })
		}
	}
	w.Wake()
}

// serveStream serves the stream waiters of the stream at key, whose shard
// (mask) is locked, in the order they blocked: each whose ID the stream's
// last ID passed, and with an error each whose group went.
func (s *Server) serveStream(c *Ctx, db int, key []byte, mask engine.Mask) {
	var buf [8]*blocking.Waiter
	ws := s.blocks.AppendWaiters(buf[:0], db, key, uint8(engine.KindStream))
	sh := s.Eng.ShardFor(key)
	for _, bw := range ws {
		e, found := sh.Find(db, key, c.Now)
		if !found || e.Kind() != engine.KindStream {
			return
		}
		st := sh.Object(e).(*engine.Stream)
		w := waiterOf(bw)
		after := w.streamAfter(key)
		var g *engine.StreamGroup
		if w.group != nil {
			if g = st.Group(w.group); g == nil {
				if s.blocks.Claim(bw) {
					w.out.Error(msgXGroupGone)
					bw.Wake()
				}
				continue
			}
			after = g.LastID()
		}
		if !after.Less(st.LastID()) || !s.blocks.Claim(bw) {
			continue
		}
		s.serveStreamWaiter(c, w, sh, e, st, g, key, after, mask)
	}
}

// serveStreamWaiter writes a claimed stream waiter's reply, the entries
// of key after after (for a group, read for its consumer), and wakes it.
// An XREADGROUP's reads are replicated as the command's would be, after
// whatever the shard logged before.
func (s *Server) serveStreamWaiter(c *Ctx, w *waiter, sh *engine.Shard, e engine.Entry, st *engine.Stream,
	g *engine.StreamGroup, key []byte, after engine.StreamID, mask engine.Mask) {
	out := w.out
	if out.Proto() == 2 {
		out.Array(1)
		out.Array(2)
	} else {
		out.Map(1)
	}
	out.Bulk(key)
	if g == nil {
		from, _ := after.Incr()
		streamRange(out, st, from, engine.MaxStreamID, int(w.count), false)
		w.Wake()
		return
	}
	rec := s.Repl.Recording()
	b := c.Client.batch()
	var rep *xreadRepl
	if rec {
		forShards(mask, func(i int) { b.Drain(s.Eng.Shard(i)) })
		rep = xreadRepls.Get().(*xreadRepl)
		defer rep.release()
	}
	// Events are the serving client's to publish, as for the pops.
	rc := &Ctx{Srv: s, Client: c.Client, W: out, Args: w.args, Now: c.Now, DB: w.DB, Spec: w.spec, held: true}
	readGroup(rc, sh, e, st, g, key, after, false, int(w.count), w.consumer, w.noack, rep)
	if s.Eng.Notes() != 0 {
		s.drainNotes(c, mask)
	}
	if rec {
		if s.Repl.AsIs(mask) {
			forShards(mask, func(i int) { b.Expired(s.Eng.Shard(i)) })
			rep.commands(w.group, w.consumer, w.noack, func(args ...[]byte) { b.Command(w.DB, args...) })
		} else {
			forShards(mask, func(i int) { b.Drain(s.Eng.Shard(i)) })
		}
	}
	w.Wake()
}

// endGroupReads ends with an error the waits of the XREADGROUPs blocked on
// key, which holds no stream now: their group went with it.
func (s *Server) endGroupReads(db int, key []byte) {
	var buf [8]*blocking.Waiter
	for _, bw := range s.blocks.AppendWaiters(buf[:0], db, key, uint8(engine.KindStream)) {
		if w := waiterOf(bw); w.group != nil && s.blocks.Claim(bw) {
			w.out.Error(msgXKeyGone)
			bw.Wake()
		}
	}
}

func forShards(m engine.Mask, fn func(int)) {
	for m != 0 {
		i := bits.TrailingZeros64(uint64(m))
		fn(i)
		m &= m - 1
	}
}

// moveCommand is what a served BLMOVE or BRPOPLPUSH replicates as.
func moveCommand(w *waiter) [][]byte {
	if w.spec.Name == "brpoplpush" {
		return [][]byte{[]byte("RPOPLPUSH"), w.args[1], w.args[2]}
	}
	return [][]byte{[]byte("LMOVE"), w.args[1], w.args[2], endName(w.head), endName(w.to)}
}

func endName(head bool) []byte {
	if head {
		return []byte("LEFT")
	}
	return []byte("RIGHT")
}

// replicateAs replicates the command as args, Redis's
// rewriteClientCommandVector: the shards of its keys drop what they
// logged, but for the keys that expired as it looked, which go first.
// While a full sync has yet to capture one of those shards the logged
// states go instead, as for any command (Server.propagate).
func (c *Ctx) replicateAs(args ...[]byte) {
	s := c.Srv
	if !s.Repl.Recording() {
		return
	}
	var m engine.Mask
	var pos [8]int
	for _, i := range c.Spec.KeyPositions(c.Args, pos[:0]) {
		m = s.Eng.Add(m, c.Args[i])
	}
	if !s.Repl.AsIs(m) {
		return
	}
	b := c.Client.batch()
	forShards(m, func(i int) { b.Expired(s.Eng.Shard(i)) })
	b.Command(c.DB, args...)
}

// mayBlock reports whether the request may block: not inside EXEC or a
// script, nor on the client of a master's stream.
func (c *Ctx) mayBlock() bool { return !c.held && !c.Client.master && c.Client.conn != nil }

// block registers the client as waiting on keys for a value of kind; the
// request waits once its locks are let go (Server.awaitBlocked).
func (c *Ctx) block(w *waiter, kind engine.Kind, keys [][]byte, timeout time.Duration) {
	w.Client, w.DB, w.Kind, w.Timeout, w.Req = c.Client, c.DB, uint8(kind), timeout, w
	w.spec, w.args = c.Spec, c.Args
	w.out = resp.NewWriter(c.W.Proto())
	c.Srv.blocks.Add(&w.Waiter, keys)
	c.Client.blocked = w
}

// unblockForReplica ends, with an error, the blocks of the clients
// waiting on keys of a master that became a replica, and closes their
// connections, as Redis's disconnectAllBlockedClients: the pops they
// wait for would not be theirs to make.
func (s *Server) unblockForReplica() {
	for _, bw := range s.blocks.Waiters() {
		if s.blocks.Claim(bw) {
			w := waiterOf(bw)
			w.out.Error("UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)")
			w.closeAfter = true
			bw.Wake()
		}
	}
}

// blockOnNothing registers a client blocked in WAIT, on no key: for
// INFO, CLIENT LIST and CLIENT UNBLOCK. The handler claims it back when
// its wait ends.
func (c *Ctx) blockOnNothing() *waiter {
	w := &waiter{op: opWait, spec: c.Spec, woff: c.Client.woff, out: resp.NewWriter(c.W.Proto())}
	w.Client, w.DB, w.Req = c.Client, c.DB, w
	c.Srv.blocks.Add(&w.Waiter, nil)
	return w
}

// awaitBlocked waits, holding nothing, for the end of the client's block,
// and writes the reply it got into w.
func (s *Server) awaitBlocked(cl *Client, w *resp.Writer, wt *waiter) {
	conn := cl.conn
	conn.Flush() // the replies before this one do not wait with it
	hung, stop := conn.WatchHangup()
	why, own := s.blocks.Await(&wt.Waiter, conn.Done(), hung)
	if why == blocking.TimedOut && own {
		wt.out.NullArray()
	}
	if why == blocking.HungUp {
		conn.Kill()
	}
	stop()
	if wt.closeAfter {
		conn.CloseAfterReply()
	}
	b := wt.out.Bytes()
	if len(b) > 0 && b[0] == '-' {
		s.countError(b)
		s.cmd(wt.spec).failed.Add(1)
	}
	w.Raw(b)
}

// blockTimeout parses a blocking command's timeout, in seconds with
// decimals, as Redis's getTimeoutFromObjectOrReply: the milliseconds are
// rounded up, and a value out of a long long's range reads as negative,
// as C's conversion makes it on x86-64.
func (c *Ctx) blockTimeout(a []byte) (time.Duration, bool) {
	var ms int64
	if n, ok := engine.ParseInt(a); ok && n >= -math.MaxInt64/1000 && n <= math.MaxInt64/1000 {
		ms = n * 1000
	} else {
		f, ok := engine.ParseLongDouble(a)
		if !ok {
			c.W.Error("timeout is not a float or out of range")
			return 0, false
		}
		p := new(big.Float).SetPrec(64).SetMode(big.ToNearestEven).Mul(f, big.NewFloat(1000))
		if p.IsInf() {
			ms = math.MinInt64
		} else {
			i, acc := p.Int64()
			switch {
			case (i == math.MaxInt64 || i == math.MinInt64) && acc != big.Exact:
				ms = math.MinInt64
			case acc == big.Below && i < math.MaxInt64:
				ms = i + 1
			default:
				ms = i
			}
		}
	}
	if ms < 0 {
		c.W.Error("timeout is negative")
		return 0, false
	}
	if ms > math.MaxInt64/int64(time.Millisecond) {
		ms = math.MaxInt64 / int64(time.Millisecond) // 292 years: for ever
	}
	return time.Duration(ms) * time.Millisecond, true
}
