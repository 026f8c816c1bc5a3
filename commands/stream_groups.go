package commands

import (
	"math"
	"strconv"

	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/resp"
)

// streamGroupCommands: the consumer groups' commands (XGROUP, XACK,
// XPENDING, XCLAIM, XAUTOCLAIM) and XINFO.
//
// XGROUP and XACK replicate as they are, as Redis propagates them. XCLAIM
// and XAUTOCLAIM depend on the clock (idle times, delivery times): as in
// Redis 7.0 they replicate as what they did, an idempotent XCLAIM ... TIME
// RETRYCOUNT FORCE JUSTID LASTID per pending entry they claimed or
// dropped, and XGROUP SETID when XCLAIM's LASTID moved the group and no
// claim carried it; never as themselves.
func streamGroupCommands() []*command {
	return []*command{
		cmd("xgroup", -2, "", nil).withSub(
			cmd("create", -5, "write denyoom as_is", cmdXGroup),
			cmd("createconsumer", 5, "write denyoom as_is", cmdXGroup),
			cmd("delconsumer", 5, "write as_is", cmdXGroup),
			cmd("destroy", 4, "write as_is", cmdXGroup),
			cmd("help", 2, "loading stale", cmdHelp),
			cmd("setid", -5, "write as_is", cmdXGroup),
		),
		cmd("xack", -4, "write fast as_is", cmdXAck),
		cmd("xpending", -3, "readonly", cmdXPending),
		cmd("xclaim", -6, "write fast", cmdXClaim),
		cmd("xautoclaim", -6, "write fast", cmdXAutoClaim),
		cmd("xinfo", -2, "", nil).withSub(
			cmd("consumers", 4, "readonly", cmdXInfoConsumers),
			cmd("groups", 3, "readonly", cmdXInfoGroups),
			cmd("help", 2, "loading stale", cmdHelp),
			cmd("stream", -3, "readonly", cmdXInfoStream),
		),
	}
}

const (
	msgXGroupNoKey = "The XGROUP subcommand requires the key to exist. " +
		"Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically."
	msgXGroupEntriesRead = "value for ENTRIESREAD must be positive or -1"
	// "COUNT" would pass for an error code: the text spells its ERR.
	msgXAutoClaimCount   = "ERR COUNT must be > 0"
	msgXAutoClaimTooMany = "Insufficient memory, failed allocating transient memory, COUNT too high."
)

// xgNoGroup is the NOGROUP error of XPENDING, XCLAIM and XAUTOCLAIM.
func xgNoGroup(c *Ctx) {
	c.W.Error("NOGROUP No such key '" + string(cstr(c.Args[1])) + "' or consumer group '" + string(cstr(c.Args[2])) + "'")
}

// xgNoGroupOfKey is the NOGROUP error of XGROUP and XINFO CONSUMERS.
func xgNoGroupOfKey(c *Ctx, group, key []byte) {
	c.W.Error("NOGROUP No such consumer group '" + string(cstr(group)) + "' for key name '" + string(cstr(key)) + "'")
}

// xgNow is the clock deliveries and seen-times are stamped with. A command
// of the master's stream runs with Now 0, so that its lookups expire
// nothing; a Redis replica stamps the XCLAIMs and XGROUP CREATECONSUMERs
// it applies with its own clock, and so does this.
func xgNow(c *Ctx) int64 {
	if c.Client.master {
		return c.Srv.Eng.Now()
	}
	return c.Now
}

// xgStreamFor finds the stream at key (nil when there is none), replying
// WRONGTYPE and returning false for another type.
func xgStreamFor(c *Ctx, key []byte, a engine.Access) (*engine.Shard, engine.Entry, *engine.Stream, bool) {
	sh := c.Shard(key)
	e, st, err := engine.Get[*engine.Stream](sh, c.DB, key, c.Now, a)
	if err != nil {
		c.Err(err)
		return sh, e, nil, false
	}
	return sh, e, st, true
}

// xgGroupFor finds the stream at key and the group named by the third
// argument, replying (missing(c), or the lookup's error) and reporting
// false when either is not there.
func xgGroupFor(c *Ctx, key []byte, missing func(*Ctx)) (*engine.Shard, engine.Entry, *engine.Stream, *engine.StreamGroup, bool) {
	sh, e, st, ok := xgStreamFor(c, key, engine.ForRead)
	if !ok {
		return sh, e, st, nil, false
	}
	var g *engine.StreamGroup
	if st != nil {
		g = st.Group(c.Args[2])
	}
	if g == nil {
		missing(c)
		return sh, e, st, nil, false
	}
	return sh, e, st, g, true
}

func xgBulkID(w *resp.Writer, id engine.StreamID) {
	var buf [48]byte
	w.Bulk(id.Append(buf[:0]))
}

// cmdXGroup runs every XGROUP subcommand but HELP, checking as Redis's
// xgroupCommand does, in its order: the options (CREATE's and SETID's),
// the key and its type, the key's existence (unless MKSTREAM) and the
// group's (for the subcommands that need one), and only then the
// subcommand's argument count and its ID.
func cmdXGroup(c *Ctx) {
	sub := c.Spec.Name
	create, setid := sub == "create", sub == "setid"
	key, name := c.Args[2], c.Args[3]
	mkstream := false
	entriesRead := int64(-1)
	for i := 5; i < len(c.Args); {
		switch opt := c.Args[i]; {
		case create && is(opt, "MKSTREAM"):
			mkstream = true
			i++
		case (create || setid) && is(opt, "ENTRIESREAD") && i+1 < len(c.Args):
			n, ok := c.Int(i + 1)
			if !ok {
				return
			}
			if n < 0 && n != -1 {
				c.W.Error(msgXGroupEntriesRead)
				return
			}
			entriesRead = n
			i += 2
		default:
			subcommandSyntaxError(c)
			return
		}
	}
	sh, e, st, ok := xgStreamFor(c, key, engine.ForWrite)
	if !ok {
		return
	}
	var g *engine.StreamGroup
	if !mkstream {
		if st == nil {
			c.W.Error(msgXGroupNoKey)
			return
		}
		if g = st.Group(name); g == nil && sub != "create" && sub != "destroy" {
			xgNoGroupOfKey(c, name, key)
			return
		}
	}
	switch {
	case create && len(c.Args) <= 8:
		xgroupCreate(c, sh, e, st, entriesRead)
	case setid && (len(c.Args) == 5 || len(c.Args) == 7):
		id := st.LastID()
		if string(cstr(c.Args[4])) != "$" {
			var err error
			if id, err = engine.ParseStreamRangeID(c.Args[4], 0); err != nil {
				c.W.Error(err.Error())
				return
			}
		}
		g.SetLastID(id, entriesRead)
		sh.TouchQuiet(e)
		c.W.OK()
		c.notify(notifyStream, "xgroup-setid", key)
	case sub == "destroy":
		if g == nil {
			c.W.Int(0)
			return
		}
		st.DestroyGroup(name)
		sh.TouchQuiet(e)
		c.W.Int(1)
		c.notify(notifyStream, "xgroup-destroy", key)
	case sub == "createconsumer":
		created := g.CreateConsumer(c.Args[4], xgNow(c))
		if created {
			sh.TouchQuiet(e)
			c.notify(notifyStream, "xgroup-createconsumer", key)
		}
		c.W.Int(b2i(created))
	case sub == "delconsumer":
		pending, found := g.DeleteConsumer(c.Args[4])
		if found {
			sh.TouchQuiet(e)
			c.notify(notifyStream, "xgroup-delconsumer", key)
		}
		c.W.Int(int64(pending))
	default:
		subcommandSyntaxError(c)
	}
}

// xgroupCreate is XGROUP CREATE once its arguments passed: "$" is the
// stream's last ID (0-0 for the stream MKSTREAM makes).
func xgroupCreate(c *Ctx, sh *engine.Shard, e engine.Entry, st *engine.Stream, entriesRead int64) {
	key := c.Args[2]
	var id engine.StreamID
	if string(cstr(c.Args[4])) == "$" {
		if st != nil {
			id = st.LastID()
		}
	} else {
		var err error
		if id, err = engine.ParseStreamID(c.Args[4], 0); err != nil {
			c.W.Error(err.Error())
			return
		}
	}
	created := st == nil
	if created {
		st = engine.NewStream()
	}
	if _, err := st.CreateGroup(c.Args[3], id, entriesRead); err != nil {
		c.W.Error(err.Error())
		return
	}
	// The new stream goes in with its group, so that its size is counted
	// once, whole.
	if created {
		sh.SetObject(c.DB, key, engine.KindStream, st, 0)
	} else {
		sh.TouchQuiet(e)
	}
	c.W.OK()
	c.notify(notifyStream, "xgroup-create", key)
}

// cmdXAck: XACK key group id..., all IDs checked before any is acked.
func cmdXAck(c *Ctx) {
	sh, e, _, g, ok := xgGroupFor(c, c.Args[1], func(c *Ctx) { c.W.Int(0) })
	if !ok {
		return
	}
	ids := make([]engine.StreamID, 0, len(c.Args)-3)
	for _, a := range c.Args[3:] {
		id, err := engine.ParseStreamID(a, 0)
		if err != nil {
			c.W.Error(err.Error())
			return
		}
		ids = append(ids, id)
	}
	n := g.Ack(ids)
	if n > 0 {
		sh.TouchQuiet(e)
	}
	c.W.Int(int64(n))
}

// cmdXPending: XPENDING key group [[IDLE min-idle] start end count
// [consumer]]. The range is parsed before the key is looked up, so that
// its errors come first, as in Redis.
func cmdXPending(c *Ctx) {
	argc := len(c.Args)
	if argc != 3 && (argc < 6 || argc > 9) {
		c.W.Error(msgSyntax)
		return
	}
	var (
		start, end engine.StreamID
		count      int64
		minIdle    int64
		consumer   []byte
	)
	if argc >= 6 {
		at := 3
		if is(c.Args[3], "IDLE") {
			var ok bool
			if minIdle, ok = c.Int(4); !ok {
				return
			}
			if argc < 8 {
				c.W.Error(msgSyntax)
				return
			}
			at += 2
		}
		var ok bool
		if count, ok = c.Int(at + 2); !ok {
			return
		}
		count = max(count, 0)
		if start, ok = streamInterval(c, c.Args[at], true); !ok {
			return
		}
		if end, ok = streamInterval(c, c.Args[at+1], false); !ok {
			return
		}
		// Arguments after the consumer are ignored, as Redis does.
		if at+3 < argc {
			consumer = c.Args[at+3]
		}
	}
	_, _, _, g, ok := xgGroupFor(c, c.Args[1], xgNoGroup)
	if !ok {
		return
	}
	if argc == 3 {
		xpendingSummary(c, g)
		return
	}
	var owner *engine.StreamConsumer
	if consumer != nil {
		if owner = g.Consumer(consumer); owner == nil {
			c.W.Array(0)
			return
		}
	}
	now := xgNow(c)
	var found []engine.StreamPending
	g.PendingRange(start, end, int(count), owner, minIdle, now, func(p engine.StreamPending) {
		found = append(found, p)
	})
	c.W.Array(len(found))
	for _, p := range found {
		c.W.Array(4)
		xgBulkID(c.W, p.ID)
		c.W.BulkString(p.Consumer)
		c.W.Int(max(now-p.DeliveryTime, 0))
		c.W.Int(int64(p.DeliveryCount))
	}
}

// xpendingSummary: the count, the smallest and largest pending IDs, and
// each consumer with entries pending and how many.
func xpendingSummary(c *Ctx, g *engine.StreamGroup) {
	c.W.Array(4)
	c.W.Int(int64(g.PendingCount()))
	first, last, ok := g.PendingBounds()
	if !ok {
		c.W.Null()
		c.W.Null()
		c.W.NullArray()
		return
	}
	xgBulkID(c.W, first)
	xgBulkID(c.W, last)
	n := 0
	g.Consumers(func(cs *engine.StreamConsumer) bool {
		if cs.PendingCount() > 0 {
			n++
		}
		return true
	})
	c.W.Array(n)
	g.Consumers(func(cs *engine.StreamConsumer) bool {
		if k := cs.PendingCount(); k > 0 {
			c.W.Array(2)
			c.W.BulkString(cs.Name())
			c.W.BulkInt(int64(k))
		}
		return true
	})
}

// cmdXClaim: XCLAIM key group consumer min-idle-time id... [IDLE ms]
// [TIME ms] [RETRYCOUNT n] [FORCE] [JUSTID] [LASTID id]. The IDs run up to
// the first argument that is not one; the options follow.
func cmdXClaim(c *Ctx) {
	key := c.Args[1]
	sh, e, st, g, ok := xgGroupFor(c, key, xgNoGroup)
	if !ok {
		return
	}
	minIdle, ok := engine.ParseInt(c.Args[4])
	if !ok {
		c.W.Error("Invalid min-idle-time argument for XCLAIM")
		return
	}
	argc := len(c.Args)
	j := 5
	ids := make([]engine.StreamID, 0, argc-5)
	for ; j < argc; j++ {
		id, err := engine.ParseStreamID(c.Args[j], 0)
		if err != nil {
			break
		}
		ids = append(ids, id)
	}
	now := xgNow(c)
	a := engine.StreamClaimArgs{MinIdle: max(minIdle, 0), DeliveryTime: -1, RetryCount: -1}
	for ; j < argc; j++ {
		opt, more := c.Args[j], j < argc-1
		var bad string
		switch {
		case is(opt, "FORCE"):
			a.Force = true
		case is(opt, "JUSTID"):
			a.JustID = true
		case is(opt, "IDLE") && more:
			j++
			idle, ok := engine.ParseInt(c.Args[j])
			// Overflow wraps as in Redis, and the time lands out of range,
			// which makes it now.
			a.DeliveryTime, bad = now-idle, xgIf(!ok, "Invalid IDLE option argument for XCLAIM")
		case is(opt, "TIME") && more:
			j++
			t, ok := engine.ParseInt(c.Args[j])
			a.DeliveryTime, bad = t, xgIf(!ok, "Invalid TIME option argument for XCLAIM")
		case is(opt, "RETRYCOUNT") && more:
			j++
			n, ok := engine.ParseInt(c.Args[j])
			a.RetryCount, bad = n, xgIf(!ok, "Invalid RETRYCOUNT option argument for XCLAIM")
		case is(opt, "LASTID") && more:
			j++
			id, err := engine.ParseStreamID(c.Args[j], 0)
			if err != nil {
				c.W.Error(err.Error())
				return
			}
			a.LastID = id
		default:
			bad = "Unrecognized XCLAIM option '" + string(cstr(opt)) + "'"
		}
		if bad != "" {
			c.W.Error(bad)
			return
		}
	}
	var fx engine.StreamGroupEffects
	out := resp.NewWriter(c.W.Proto())
	n := st.Claim(g, c.Args[3], ids, a, now, &fx, func(id engine.StreamID, fv [][]byte) {
		if a.JustID {
			xgBulkID(out, id)
		} else {
			streamEntry(out, id, fv)
		}
	})
	c.W.Array(n)
	c.W.Raw(out.Bytes())
	xgApplied(c, sh, e, g, &fx)
}

func xgIf(cond bool, msg string) string {
	if cond {
		return msg
	}
	return ""
}

// xgApplied records what XCLAIM or XAUTOCLAIM changed: the key is touched,
// the consumer's creation reported, and the effects replicated in place
// of the command, in the order they happened.
func xgApplied(c *Ctx, sh *engine.Shard, e engine.Entry, g *engine.StreamGroup, fx *engine.StreamGroupEffects) {
	if len(fx.Claims) == 0 && !fx.SetID {
		return
	}
	key, group := c.Args[1], c.Args[2]
	sh.TouchQuiet(e)
	if fx.ConsumerCreated {
		c.notify(notifyStream, "xgroup-createconsumer", key)
	}
	// Each command's arguments are copied into the batch as it is added,
	// so one buffer serves them all.
	buf := make([]byte, 0, 128)
	num := func(n int64) []byte {
		start := len(buf)
		buf = strconv.AppendInt(buf, n, 10)
		return buf[start:len(buf):len(buf)]
	}
	sid := func(id engine.StreamID) []byte {
		start := len(buf)
		buf = id.Append(buf)
		return buf[start:len(buf):len(buf)]
	}
	for _, cl := range fx.Claims {
		buf = buf[:0]
		c.replicateAs([]byte("XCLAIM"), key, group, []byte(cl.Consumer), []byte("0"), sid(cl.ID),
			[]byte("TIME"), num(cl.DeliveryTime), []byte("RETRYCOUNT"), num(int64(cl.DeliveryCount)),
			[]byte("FORCE"), []byte("JUSTID"), []byte("LASTID"), sid(cl.LastID))
	}
	if fx.SetID {
		buf = buf[:0]
		c.replicateAs([]byte("XGROUP"), []byte("SETID"), key, group, sid(g.LastID()),
			[]byte("ENTRIESREAD"), num(g.EntriesRead()))
	}
}

// xautoclaimMaxCount bounds COUNT: Redis takes COUNT*16 bytes up front for
// the IDs it may drop, and answers "Insufficient memory" when that cannot
// be had. Past 2^47 bytes no 64-bit Linux process can map it (below, it
// depends on the machine's memory and overcommit).
const xautoclaimMaxCount = (1 << 47) / 16

// cmdXAutoClaim: XAUTOCLAIM key group consumer min-idle-time start [COUNT
// n] [JUSTID]. The arguments are checked before the key, as in Redis.
func cmdXAutoClaim(c *Ctx) {
	minIdle, ok := engine.ParseInt(c.Args[4])
	if !ok {
		c.W.Error("Invalid min-idle-time argument for XAUTOCLAIM")
		return
	}
	start, ok := streamInterval(c, c.Args[5], true)
	if !ok {
		return
	}
	count, justID := int64(100), false
	for j := 6; j < len(c.Args); j++ {
		switch opt := c.Args[j]; {
		case is(opt, "COUNT") && j < len(c.Args)-1:
			n, ok := engine.ParseInt(c.Args[j+1])
			if !ok || n < 1 || n > math.MaxInt64/16 {
				c.W.Error(msgXAutoClaimCount)
				return
			}
			count = n
			j++
		case is(opt, "JUSTID"):
			justID = true
		default:
			c.W.Error(msgSyntax)
			return
		}
	}
	sh, e, st, g, ok := xgGroupFor(c, c.Args[1], xgNoGroup)
	if !ok {
		return
	}
	if count > xautoclaimMaxCount {
		c.W.Error(msgXAutoClaimTooMany)
		return
	}
	var fx engine.StreamGroupEffects
	out := resp.NewWriter(c.W.Proto())
	next, deleted, n := st.AutoClaim(g, c.Args[3], max(minIdle, 0), start, int(count), justID, xgNow(c), &fx,
		func(id engine.StreamID, fv [][]byte) {
			if justID {
				xgBulkID(out, id)
			} else {
				streamEntry(out, id, fv)
			}
		})
	c.W.Array(3)
	xgBulkID(c.W, next)
	c.W.Array(n)
	c.W.Raw(out.Bytes())
	c.W.Array(len(deleted))
	for _, id := range deleted {
		xgBulkID(c.W, id)
	}
	xgApplied(c, sh, e, g, &fx)
}

// xinfoStream reads the stream of XINFO's key, which must exist.
func xinfoStream(c *Ctx) (*engine.Stream, bool) {
	_, _, st, ok := xgStreamFor(c, c.Args[2], engine.ForRead)
	if ok && st == nil {
		c.W.Error(msgNoSuchKey)
		return nil, false
	}
	return st, ok
}

// xinfoLag writes a group's lag, nil when it cannot be known.
func xinfoLag(c *Ctx, st *engine.Stream, g *engine.StreamGroup) {
	if lag, ok := st.GroupLag(g); ok {
		c.W.Int(lag)
	} else {
		c.W.Null()
	}
}

func xinfoEntriesRead(c *Ctx, g *engine.StreamGroup) {
	if n := g.EntriesRead(); n != -1 {
		c.W.Int(n)
	} else {
		c.W.Null()
	}
}

// cmdXInfoStream: XINFO STREAM key [FULL [COUNT n]]. The key is looked up
// before the options are read, as in Redis.
func cmdXInfoStream(c *Ctx) {
	st, ok := xinfoStream(c)
	if !ok {
		return
	}
	opts := c.Args[3:]
	full, count := len(opts) > 0, int64(10)
	if full {
		if len(opts) != 1 && len(opts) != 3 || !is(opts[0], "FULL") || len(opts) == 3 && !is(opts[1], "COUNT") {
			subcommandSyntaxError(c)
			return
		}
		if len(opts) == 3 {
			if count, ok = c.Int(5); !ok {
				return
			}
			if count < 0 {
				count = 10
			}
		}
	}
	w := c.W
	w.Map(10 - int(b2i(full)))
	w.BulkString("length")
	w.Int(int64(st.Len()))
	w.BulkString("radix-tree-keys")
	w.Int(int64(st.NodeCount()))
	w.BulkString("radix-tree-nodes")
	w.Int(int64(streamRaxNodes(st)))
	w.BulkString("last-generated-id")
	xgBulkID(w, st.LastID())
	w.BulkString("max-deleted-entry-id")
	xgBulkID(w, st.MaxDeletedID())
	w.BulkString("entries-added")
	w.Int(int64(st.EntriesAdded()))
	w.BulkString("recorded-first-entry-id")
	xgBulkID(w, st.FirstID())
	if !full {
		w.BulkString("groups")
		w.Int(int64(st.GroupCount()))
		w.BulkString("first-entry")
		if !st.FirstEntry(func(id engine.StreamID, fv [][]byte) { streamEntry(w, id, fv) }) {
			w.Null()
		}
		w.BulkString("last-entry")
		if !st.LastEntry(func(id engine.StreamID, fv [][]byte) { streamEntry(w, id, fv) }) {
			w.Null()
		}
		return
	}
	// COUNT 0 shows everything.
	limit := func(n int) int {
		if count == 0 || int64(n) < count {
			return n
		}
		return int(count)
	}
	w.BulkString("entries")
	w.Array(limit(int(st.Len())))
	st.Range(engine.StreamID{}, engine.MaxStreamID, int(count), false, func(id engine.StreamID, fv [][]byte) bool {
		streamEntry(w, id, fv)
		return true
	})
	w.BulkString("groups")
	w.Array(st.GroupCount())
	st.Groups(func(g *engine.StreamGroup) bool {
		xinfoFullGroup(c, st, g, limit)
		return true
	})
}

// xinfoFullGroup is a group in XINFO STREAM FULL: its PEL and its
// consumers' each shown up to the COUNT limit, with delivery and seen
// times as they are (not as idle times).
func xinfoFullGroup(c *Ctx, st *engine.Stream, g *engine.StreamGroup, limit func(int) int) {
	w := c.W
	w.Map(7)
	w.BulkString("name")
	w.BulkString(g.Name())
	w.BulkString("last-delivered-id")
	xgBulkID(w, g.LastID())
	w.BulkString("entries-read")
	xinfoEntriesRead(c, g)
	w.BulkString("lag")
	xinfoLag(c, st, g)
	w.BulkString("pel-count")
	w.Int(int64(g.PendingCount()))
	w.BulkString("pending")
	n := limit(g.PendingCount())
	w.Array(n)
	g.PendingRange(engine.StreamID{}, engine.MaxStreamID, n, nil, 0, 0, func(p engine.StreamPending) {
		w.Array(4)
		xgBulkID(w, p.ID)
		w.BulkString(p.Consumer)
		w.Int(p.DeliveryTime)
		w.Int(int64(p.DeliveryCount))
	})
	w.BulkString("consumers")
	w.Array(g.ConsumerCount())
	g.Consumers(func(cs *engine.StreamConsumer) bool {
		w.Map(4)
		w.BulkString("name")
		w.BulkString(cs.Name())
		w.BulkString("seen-time")
		w.Int(cs.SeenTime())
		w.BulkString("pel-count")
		w.Int(int64(cs.PendingCount()))
		w.BulkString("pending")
		left := limit(cs.PendingCount())
		w.Array(left)
		g.ConsumerPending(cs, func(p engine.StreamPending) bool {
			if left == 0 {
				return false
			}
			left--
			w.Array(3)
			xgBulkID(w, p.ID)
			w.Int(p.DeliveryTime)
			w.Int(int64(p.DeliveryCount))
			return true
		})
		return true
	})
}

// cmdXInfoGroups: XINFO GROUPS key.
func cmdXInfoGroups(c *Ctx) {
	st, ok := xinfoStream(c)
	if !ok {
		return
	}
	c.W.Array(st.GroupCount())
	st.Groups(func(g *engine.StreamGroup) bool {
		c.W.Map(6)
		c.W.BulkString("name")
		c.W.BulkString(g.Name())
		c.W.BulkString("consumers")
		c.W.Int(int64(g.ConsumerCount()))
		c.W.BulkString("pending")
		c.W.Int(int64(g.PendingCount()))
		c.W.BulkString("last-delivered-id")
		xgBulkID(c.W, g.LastID())
		c.W.BulkString("entries-read")
		xinfoEntriesRead(c, g)
		c.W.BulkString("lag")
		xinfoLag(c, st, g)
		return true
	})
}

// cmdXInfoConsumers: XINFO CONSUMERS key group.
func cmdXInfoConsumers(c *Ctx) {
	st, ok := xinfoStream(c)
	if !ok {
		return
	}
	g := st.Group(c.Args[3])
	if g == nil {
		xgNoGroupOfKey(c, c.Args[3], c.Args[2])
		return
	}
	now := xgNow(c)
	c.W.Array(g.ConsumerCount())
	g.Consumers(func(cs *engine.StreamConsumer) bool {
		c.W.Map(3)
		c.W.BulkString("name")
		c.W.BulkString(cs.Name())
		c.W.BulkString("pending")
		c.W.Int(int64(cs.PendingCount()))
		c.W.BulkString("idle")
		c.W.Int(max(now-cs.SeenTime(), 0))
		return true
	})
}

// streamRaxNodes is XINFO STREAM's radix-tree-nodes: the number of nodes
// of the rax Redis keeps the stream's nodes in, keyed by master ID as 16
// bytes big endian. Over keys of one length (none a prefix of another),
// rax keeps its tree in one shape whatever the order of insertions and
// deletions (it recompresses after a deletion): a root, then per edge of
// the compacted trie (the trie whose inner nodes are where keys diverge)
// the node it leads to, plus one more node when the edge leaves a
// branching node with more than one byte, whose first byte is a child of
// the branching node and the rest a compressed node. A root that does not
// branch is itself compressed into the edge below it.
func streamRaxNodes(st *engine.Stream) int {
	keys := make([][16]byte, 0, st.NodeCount())
	st.ForEachNode(func(m engine.StreamID, _ []byte) bool {
		var k [16]byte
		for i := range 8 {
			k[i] = byte(m.Ms >> (56 - 8*i))
			k[8+i] = byte(m.Seq >> (56 - 8*i))
		}
		keys = append(keys, k)
		return true
	})
	if len(keys) == 0 {
		return 1
	}
	if len(keys) > 1 && raxCommonPrefix(keys) == 0 {
		return 1 + raxChildren(keys, 0)
	}
	return 1 + raxSubtree(keys, 0, false)
}

// raxCommonPrefix is the length of the prefix sorted keys share.
func raxCommonPrefix(keys [][16]byte) int {
	a, b := &keys[0], &keys[len(keys)-1]
	n := 0
	for n < 16 && a[n] == b[n] {
		n++
	}
	return n
}

// raxSubtree counts the nodes of the compacted-trie node that holds the
// sorted keys (a leaf for one key), reached from a parent at depth
// parentDepth: one node when the parent's child is that node (the parent
// does not branch, or the edge is one byte), two otherwise.
func raxSubtree(keys [][16]byte, parentDepth int, parentBranches bool) int {
	depth := 16
	if len(keys) > 1 {
		depth = raxCommonPrefix(keys)
	}
	n := 1
	if parentBranches && depth > parentDepth+1 {
		n = 2
	}
	if len(keys) == 1 {
		return n
	}
	return n + raxChildren(keys, depth)
}

// raxChildren counts the nodes under a branching node at depth.
func raxChildren(keys [][16]byte, depth int) int {
	n := 0
	for lo := 0; lo < len(keys); {
		hi := lo + 1
		for hi < len(keys) && keys[hi][depth] == keys[lo][depth] {
			hi++
		}
		n += raxSubtree(keys[lo:hi], depth, true)
		lo = hi
	}
	return n
}
