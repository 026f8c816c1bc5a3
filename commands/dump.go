package commands

import (
	"context"
	"encoding/binary"
	"math"
	"slices"
	"time"

	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/rdb"
)

// dumpCommands: keys as values: DUMP and RESTORE in Redis's RDB
// format, COPY, MOVE.
func dumpCommands() []*command {
	return []*command{
		cmd("dump", 2, "readonly", cmdDump),
		cmd("restore", -4, "write denyoom selflock", cmdRestore),
		cmd("restore-asking", -4, "write denyoom asking selflock", cmdRestore),
		cmd("copy", -3, "write denyoom", cmdCopy),
		cmd("move", 3, "write fast", cmdMove),
	}
}

// DUMP, RESTORE, MIGRATE, COPY and MOVE: keys leaving and entering as
// values. DUMP and RESTORE speak Redis 7.0's RDB value format (package
// rdb), so that payloads move between limitkv and redis-server either way.

// Values Redis has no type for (rate-limit states, a login list with its
// ban) travel in limitkv's own payloads (rdb.SealLimitkv), whose body is
// the value's encoding in the engine's codec, as snapshots and replicas
// have it, without its expiry: RESTORE's TTL sets that. redis-server
// refuses these payloads as a version above its own.

const (
	msgBadPayload = "ERR DUMP payload version or checksum are wrong"
	msgBadData    = "Bad data format"
	msgBusyKey    = "BUSYKEY Target key name already exists."
	msgSameObject = "source and destination objects are the same"
)

// dumpPayload appends the DUMP payload of e, envelope included. The shard
// is locked. It fails with a reply text for a value that has no payload.
func dumpPayload(dst []byte, sh *engine.Shard, e engine.Entry) ([]byte, string) {
	if body, ok := engine.AppendLimitValue(dst, sh, e); ok {
		return rdb.SealLimitkv(body), ""
	}
	v, msg := dumpValue(dst, sh, e)
	if msg != "" {
		return v, msg
	}
	return rdb.Seal(v), ""
}

// dumpValue appends the RDB value of e (type byte and value, no
// envelope) for a type Redis has. The shard is locked. It fails with a
// reply text for a value that has no RDB form.
func dumpValue(dst []byte, sh *engine.Shard, e engine.Entry) ([]byte, string) {
	switch e.Kind() {
	case engine.KindString:
		var scratch [24]byte
		v, err := e.StringOf(scratch[:0])
		if err != nil {
			return dst, err.Error()
		}
		return rdb.AppendStringValue(dst, v), ""
	case engine.KindList:
		return rdb.AppendList(dst, sh.Object(e).(*engine.List).All()), ""
	case engine.KindHash:
		h := sh.Object(e).(*engine.Hash)
		if h.Encoding() == "listpack" {
			return rdb.AppendHashListpack(dst, h.All()), ""
		}
		return rdb.AppendHash(dst, h.Len(), h.All()), ""
	case engine.KindZSet:
		z := sh.Object(e).(*engine.ZSet)
		if z.Encoding() == "listpack" {
			return rdb.AppendZSetListpack(dst, z.All()), ""
		}
		desc := func(yield func([]byte, float64) bool) { z.Range(0, z.Len(), true, nil, yield) }
		return rdb.AppendZSet2(dst, z.Len(), desc), ""
	case engine.KindSet:
		st := sh.Object(e).(*engine.Set)
		if st.IsIntset() {
			// All formats an intset's members in one buffer: each is
			// read back at once.
			ints := make([]int64, 0, st.Len())
			for m := range st.All() {
				v, _ := rdb.ParseInt(m)
				ints = append(ints, v)
			}
			return rdb.AppendSetIntset(dst, ints), ""
		}
		members := make([][]byte, 0, st.Len())
		for m := range st.All() {
			members = append(members, m)
		}
		return rdb.AppendSet(dst, members), ""
	case engine.KindStream:
		return rdb.AppendStream(dst, rdbStream(sh.Object(e).(*engine.Stream))), ""
	}
	return dst, "cannot dump a value of type " + e.Kind().String()
}

// rdbStream lends st's parts to package rdb: the node listpacks are the
// engine's own bytes, so the shard stays locked while the result is used.
func rdbStream(st *engine.Stream) *rdb.Stream {
	rs := &rdb.Stream{
		Nodes:        make([]rdb.StreamNode, 0, st.NodeCount()),
		Length:       st.Len(),
		LastID:       rdb.StreamID(st.LastID()),
		FirstID:      rdb.StreamID(st.FirstID()),
		MaxDeletedID: rdb.StreamID(st.MaxDeletedID()),
		EntriesAdded: st.EntriesAdded(),
		Groups:       make([]rdb.StreamGroup, 0, st.GroupCount()),
	}
	st.ForEachNode(func(master engine.StreamID, lp []byte) bool {
		rs.Nodes = append(rs.Nodes, rdb.StreamNode{Master: rdb.StreamID(master), LP: lp})
		return true
	})
	st.Groups(func(g *engine.StreamGroup) bool {
		rg := rdb.StreamGroup{
			Name:        []byte(g.Name()),
			LastID:      rdb.StreamID(g.LastID()),
			EntriesRead: g.EntriesRead(),
			PEL:         make([]rdb.StreamNACK, 0, g.PendingCount()),
			Consumers:   make([]rdb.StreamConsumer, 0, g.ConsumerCount()),
		}
		g.PendingRange(engine.StreamID{}, engine.MaxStreamID, math.MaxInt, nil, 0, 0, func(p engine.StreamPending) {
			rg.PEL = append(rg.PEL, rdb.StreamNACK{ID: rdb.StreamID(p.ID), DeliveryTime: p.DeliveryTime, DeliveryCount: p.DeliveryCount})
		})
		g.Consumers(func(c *engine.StreamConsumer) bool {
			rc := rdb.StreamConsumer{Name: []byte(c.Name()), SeenTime: c.SeenTime(), Pending: make([]rdb.StreamID, 0, c.PendingCount())}
			g.ConsumerPending(c, func(p engine.StreamPending) bool {
				rc.Pending = append(rc.Pending, rdb.StreamID(p.ID))
				return true
			})
			rg.Consumers = append(rg.Consumers, rc)
			return true
		})
		rs.Groups = append(rs.Groups, rg)
		return true
	})
	return rs
}

func cmdDump(c *Ctx) {
	key := c.Args[1]
	sh := c.Shard(key)
	e, ok := sh.Lookup(c.DB, key, c.Now)
	if !ok {
		c.W.Null()
		return
	}
	payload, msg := dumpPayload(nil, sh, e)
	if msg != "" {
		c.W.Error(msg)
		return
	}
	c.W.Bulk(payload)
}

// restoreOpts are RESTORE's options after its payload.
type restoreOpts struct {
	replace, absTTL bool
	idle            int64 // -1: not given
	freq            int64 // -1: not given
}

// parseRestoreOpts reads the options from argument i on as restoreCommand
// does: IDLETIME and FREQ exclude each other (the second is a syntax
// error), and each value is checked as it is read.
func parseRestoreOpts(c *Ctx, i int) (restoreOpts, bool) {
	o := restoreOpts{idle: -1, freq: -1}
	for ; i < len(c.Args); i++ {
		more := len(c.Args) - i - 1
		switch {
		case is(c.Args[i], "REPLACE"):
			o.replace = true
		case is(c.Args[i], "ABSTTL"):
			o.absTTL = true
		case is(c.Args[i], "IDLETIME") && more >= 1 && o.freq == -1:
			n, ok := c.Int(i + 1)
			if !ok {
				return o, false
			}
			if n < 0 {
				c.W.Error("Invalid IDLETIME value, must be >= 0")
				return o, false
			}
			o.idle = n
			i++
		case is(c.Args[i], "FREQ") && more >= 1 && o.idle == -1:
			n, ok := c.Int(i + 1)
			if !ok {
				return o, false
			}
			if n < 0 || n > 255 {
				c.W.Error("Invalid FREQ value, must be >= 0 and <= 255")
				return o, false
			}
			o.freq = n
			i++
		default:
			c.W.Error(msgSyntax)
			return o, false
		}
	}
	return o, true
}

// cmdRestore reads and checks the payload, and builds the value in the
// engine's encoding, before it takes the key's lock: that work grows with
// the payload, which the client chose. Under the lock it only checks the
// key, and stores. Its errors come in Redis's order all the same: options,
// BUSYKEY, the TTL, the payload.
func cmdRestore(c *Ctx) {
	key := c.Args[1]
	o, ok := parseRestoreOpts(c, 4)
	if !ok {
		return
	}
	ttl, ttlOK := engine.ParseInt(c.Args[2])
	var enc []byte
	payloadErr := ""
	if rdb.IsLimitkv(c.Args[3]) {
		enc, payloadErr = limitValue(c.Args[3], &ttl, ttlOK, o.absTTL, c.Now)
	} else if _, err := rdb.Open(c.Args[3]); err != nil {
		payloadErr = msgBadPayload
	} else if v, err := rdb.Decode(c.Args[3]); err != nil {
		// Redis reads the value from the whole argument, footer
		// included: a value that runs into the footer is read as far as
		// it goes.
		payloadErr = msgBadData
	} else {
		ttl = absoluteTTL(ttl, ttlOK, o.absTTL, c.Now)
		enc, payloadErr = c.engineValue(&v, ttl)
	}
	lim := c.limits()
	c.withShards(c.Srv.Eng.MaskOf(key), func() {
		if !c.stillHere() {
			return
		}
		sh := c.Shard(key)
		switch {
		case !o.replace && sh.Exists(c.DB, key, c.Now):
			c.W.Error(msgBusyKey)
		case !ttlOK:
			c.W.Error(msgNotInteger)
		case ttl < 0:
			c.W.Error("Invalid TTL value, must be >= 0")
		case payloadErr != "":
			c.W.Error(payloadErr)
		case ttl != 0 && ttl <= c.Now && !c.Client.master:
			// Already expired: the key is gone (REPLACE deletes the
			// old one).
			if o.replace && sh.Delete(c.DB, key, c.Now) {
				c.notify(notifyGeneric, "del", key)
			}
			c.W.OK()
		default:
			replaced := o.replace && sh.Exists(c.DB, key, c.Now)
			if err := sh.StoreValue(c.DB, key, enc, lim); err != nil {
				c.W.Error(msgBadData)
				return
			}
			c.notifyMoved(key, c.DB, replaced)
			c.notify(notifyGeneric, "restore", key)
			if e, ok := sh.Raw(c.DB, key); ok {
				sh.SetAccess(e, o.idle, int(o.freq), c.Now)
			}
			c.W.OK()
			c.durableImport()
		}
	})
}

// importSyncTimeout bounds how long an imported key's reply waits for
// the disk: past it the reply is dropped with the connection, and the
// source, which then has no acknowledgement, keeps its key.
const importSyncTimeout = 10 * time.Second

// durableImport holds the reply of a key restored into a slot being
// resharded here (RESTORE-ASKING, or RESTORE after ASKING) until the key
// is on disk. The source deletes its copy once it has the reply, so
// without this a node killed before its next snapshot loses the key for
// good. The keys of one MIGRATE arrive in one pipeline and share one
// snapshot.
func (c *Ctx) durableImport() {
	s := c.Srv
	if s.Cluster == nil || s.Hooks.Sync == nil || c.Client.conn == nil ||
		(c.Spec.Flags&cmdspec.Asking == 0 && !c.Client.asking) {
		return
	}
	c.Client.conn.HoldReplies(func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), importSyncTimeout)
		defer cancel()
		if err := s.Hooks.Sync(ctx); err != nil {
			s.Log.Error("cluster: an imported key could not be saved; its source keeps it", "err", err)
			return false
		}
		return true
	})
}

// absoluteTTL turns RESTORE's TTL argument into the key's expiry in ms
// (0: none), unless ABSTTL says it is one already.
func absoluteTTL(ttl int64, ok, abs bool, now int64) int64 {
	if ttl <= 0 || abs || !ok {
		return ttl
	}
	if ttl > math.MaxInt64-now {
		return math.MaxInt64 // as far as it goes; Redis's sum would wrap
	}
	return ttl + now
}

// limitValue opens a limitkv payload and checks its value, which it
// returns in the engine's encoding with the expiry RESTORE's TTL names, as
// engineValue does for Redis's types.
func limitValue(payload []byte, ttl *int64, ttlOK, abs bool, now int64) ([]byte, string) {
	body, err := rdb.OpenLimitkv(payload)
	if err == rdb.ErrPayload {
		return nil, msgBadPayload
	}
	if err != nil {
		return nil, msgBadData
	}
	*ttl = absoluteTTL(*ttl, ttlOK, abs, now)
	v, err := engine.LimitValue(body, max(*ttl, 0))
	if err != nil {
		return nil, msgBadData
	}
	return v, ""
}

// limits are the compact encodings' bounds as configured now.
func (c *Ctx) limits() engine.Limits {
	return engine.Limits{Hash: c.hashLimits(), ZSet: c.zsetLimits(), Set: c.Srv.Cfg.SetLimits()}
}

// engineValue turns a decoded payload into the engine's value encoding
// (engine/codec.go) with expiry exp, for StoreValue, which then builds the
// value in the form its size calls for, as Redis's loader does.
func (c *Ctx) engineValue(v *rdb.Value, exp int64) ([]byte, string) {
	// One allocation of the right size: a big value's encoding would
	// otherwise be copied at each growth, under the shard's lock.
	size := 1 + 2*binary.MaxVarintLen64 + 1 + len(v.Str)
	for _, x := range v.Elems {
		size += binary.MaxVarintLen64 + len(x) + 8
	}
	if v.Stream != nil {
		size += streamValueSize(v.Stream)
	}
	b := make([]byte, 0, size)
	head := func(t byte) {
		b = append(b, t)
		b = binary.AppendUvarint(b, uint64(max(exp, 0)))
	}
	addAll := func(xs [][]byte) {
		for _, x := range xs {
			b = binary.AppendUvarint(b, uint64(len(x)))
			b = append(b, x...)
		}
	}
	switch v.Kind {
	case rdb.KindString:
		head('s')
		b = append(b, v.Str...)
	case rdb.KindList:
		head('l')
		b = binary.AppendUvarint(b, uint64(len(v.Elems)))
		addAll(v.Elems)
	case rdb.KindHash:
		head('h')
		b = binary.AppendUvarint(b, uint64(v.Len()))
		addAll(v.Elems)
	case rdb.KindZSet:
		// Members in rank order: a ZSET_2 payload lists them from the
		// top down.
		ms, ss := v.Elems, v.Scores
		if v.Type == rdb.TypeZSet2 || v.Type == rdb.TypeZSet {
			ms, ss = slices.Clone(ms), slices.Clone(ss)
			slices.Reverse(ms)
			slices.Reverse(ss)
		}
		lim := c.zsetLimits()
		head('z')
		large := byte(0)
		if len(ms) > lim.Entries || v.MaxLen > lim.Value {
			large = 1
		}
		b = append(b, large)
		b = binary.AppendUvarint(b, uint64(len(ms)))
		for i, m := range ms {
			b = binary.AppendUvarint(b, uint64(len(m)))
			b = append(b, m...)
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(ss[i]))
		}
	case rdb.KindSet:
		// As Redis's loader: a set longer than set-max-intset-entries
		// starts as a hashtable; a shorter one starts as an intset and
		// becomes a hashtable at its first member that is not an integer
		// (Shard.Restore adds them with the limits).
		head('S')
		hashtable := byte(0)
		if len(v.Elems) > c.Srv.Cfg.SetLimits().IntsetEntries {
			hashtable = 1
		}
		b = append(b, hashtable)
		b = binary.AppendUvarint(b, uint64(len(v.Elems)))
		addAll(v.Elems)
	case rdb.KindStream:
		head('x')
		b = appendStreamValue(b, v.Stream)
	default:
		return nil, msgBadData
	}
	return b, ""
}

// streamValueSize bounds what appendStreamValue appends.
func streamValueSize(s *rdb.Stream) int {
	const n = binary.MaxVarintLen64
	size := (len(s.Nodes)+3)*3*n + 8*n
	for _, nd := range s.Nodes {
		size += len(nd.LP)
	}
	for _, g := range s.Groups {
		size += len(g.Name) + 6*n + len(g.PEL)*4*n
		for _, c := range g.Consumers {
			size += len(c.Name) + 3*n + len(c.Pending)*2*n
		}
	}
	return size
}

// appendStreamValue appends s in the engine's stream encoding after the
// type and expiry (engine/stream_codec.go), whose decoder checks the nodes
// and groups again as it builds the stream.
func appendStreamValue(b []byte, s *rdb.Stream) []byte {
	id := func(x rdb.StreamID) {
		b = binary.AppendUvarint(b, x.Ms)
		b = binary.AppendUvarint(b, x.Seq)
	}
	lenBytes := func(x []byte) {
		b = binary.AppendUvarint(b, uint64(len(x)))
		b = append(b, x...)
	}
	b = binary.AppendUvarint(b, uint64(len(s.Nodes)))
	for _, n := range s.Nodes {
		id(n.Master)
		lenBytes(n.LP)
	}
	b = binary.AppendUvarint(b, s.Length)
	id(s.LastID)
	id(s.FirstID)
	id(s.MaxDeletedID)
	b = binary.AppendUvarint(b, s.EntriesAdded)
	b = binary.AppendUvarint(b, uint64(len(s.Groups)))
	for _, g := range s.Groups {
		lenBytes(g.Name)
		id(g.LastID)
		b = binary.AppendVarint(b, g.EntriesRead)
		b = binary.AppendUvarint(b, uint64(len(g.PEL)))
		for _, p := range g.PEL {
			id(p.ID)
			b = binary.AppendVarint(b, p.DeliveryTime)
			b = binary.AppendUvarint(b, p.DeliveryCount)
		}
		b = binary.AppendUvarint(b, uint64(len(g.Consumers)))
		for _, c := range g.Consumers {
			lenBytes(c.Name)
			b = binary.AppendVarint(b, c.SeenTime)
			b = binary.AppendUvarint(b, uint64(len(c.Pending)))
			for _, p := range c.Pending {
				id(p)
			}
		}
	}
	return b
}

func cmdCopy(c *Ctx) {
	src, dst := c.Args[1], c.Args[2]
	db, replace := c.DB, false
	for i := 3; i < len(c.Args); i++ {
		switch {
		case is(c.Args[i], "REPLACE"):
			replace = true
		case is(c.Args[i], "DB") && i+1 < len(c.Args):
			n, ok := c.dbIndex(i+1, msgNotInteger)
			if !ok {
				return
			}
			db = n
			i++
		default:
			c.W.Error(msgSyntax)
			return
		}
	}
	if c.Srv.Cluster != nil && (db != 0 || c.DB != 0) {
		c.W.Error("ERR Copying to another database is not allowed in cluster mode")
		return
	}
	if db == c.DB && string(src) == string(dst) {
		c.W.Error(msgSameObject)
		return
	}
	from, to := c.Shard(src), c.Shard(dst)
	if _, ok := from.Lookup(c.DB, src, c.Now); !ok {
		c.W.Int(0)
		return
	}
	replaced := to.Exists(db, dst, c.Now)
	if !replace && replaced {
		c.W.Int(0)
		return
	}
	// Looking dst up may have expired it and moved src's slot: find again.
	e, ok := from.Peek(c.DB, src, c.Now)
	if !ok {
		c.W.Int(0)
		return
	}
	v, err := engine.AppendValue(nil, from, e)
	if err == nil {
		err = to.StoreValue(db, dst, v, c.limits())
	}
	if err != nil {
		c.Err(err)
		return
	}
	c.notifyMoved(dst, db, replaced)
	c.notifyDB(notifyGeneric, "copy_to", dst, db)
	c.W.Int(1)
}

func cmdMove(c *Ctx) {
	if c.Srv.Cluster != nil {
		c.W.Error("ERR MOVE is not allowed in cluster mode")
		return
	}
	key := c.Args[1]
	db, ok := c.dbIndex(2, msgNotInteger)
	if !ok {
		return
	}
	if db == c.DB {
		c.W.Error(msgSameObject)
		return
	}
	sh := c.Shard(key)
	if _, ok := sh.Find(c.DB, key, c.Now); !ok {
		c.W.Int(0)
		return
	}
	if sh.Exists(db, key, c.Now) {
		c.W.Int(0)
		return
	}
	e, ok := sh.Find(c.DB, key, c.Now)
	if !ok {
		c.W.Int(0)
		return
	}
	engine.Move(sh, e, sh, db, key)
	c.notifyMoved(key, db, false)
	c.notify(notifyGeneric, "move_from", key)
	c.notifyDB(notifyGeneric, "move_to", key, db)
	c.W.Int(1)
}
