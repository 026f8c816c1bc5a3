package commands

import (
	"math"
	"strconv"

	"github.com/limitkv/limitkv/engine"
)

// keyspaceCommands: commands on keys whatever their type.
func keyspaceCommands() []*command {
	return []*command{
		cmd("del", -2, "write", cmdDel),
		cmd("unlink", -2, "write fast", cmdDel),
		cmd("exists", -2, "readonly fast", cmdExists),
		cmd("touch", -2, "readonly fast", cmdExists),
		cmd("expire", -3, "write fast ttl_only", cmdExpire),
		cmd("pexpire", -3, "write fast ttl_only", cmdPExpire),
		cmd("expireat", -3, "write fast ttl_only", cmdExpireAt),
		cmd("pexpireat", -3, "write fast ttl_only", cmdPExpireAt),
		cmd("ttl", 2, "readonly fast", cmdTTL),
		cmd("pttl", 2, "readonly fast", cmdPTTL),
		cmd("expiretime", 2, "readonly fast", cmdExpireTime),
		cmd("pexpiretime", 2, "readonly fast", cmdPExpireTime),
		cmd("persist", 2, "write fast ttl_only", cmdPersist),
		cmd("type", 2, "readonly fast", cmdType),
		cmd("keys", 2, "readonly", cmdKeys),
		cmd("scan", -2, "readonly", cmdScan),
		cmd("randomkey", 1, "readonly", cmdRandomKey),
		cmd("rename", 3, "write as_is", cmdRename),
		cmd("renamenx", 3, "write fast as_is", cmdRenameNX),
		cmd("dbsize", 1, "readonly fast", cmdDBSize),
		cmd("flushdb", -1, "write", cmdFlushDB),
		cmd("flushall", -1, "write", cmdFlushAll),
		cmd("select", 2, "loading stale fast", cmdSelect),
		cmd("swapdb", 3, "write fast", cmdSwapDB),
	}
}

func cmdDel(c *Ctx) {
	var n int64
	for _, k := range c.Args[1:] {
		if c.Shard(k).Delete(c.DB, k, c.Now) {
			c.notify(notifyGeneric, "del", k)
			n++
		}
	}
	c.W.Int(n)
}

func cmdExists(c *Ctx) {
	var n int64
	for _, k := range c.Args[1:] {
		if _, ok := c.Shard(k).Inspect(c.DB, k, c.Now); ok {
			n++
		}
	}
	c.W.Int(n)
}

func cmdExpire(c *Ctx)    { expireGeneric(c, 1000, c.Now) }
func cmdPExpire(c *Ctx)   { expireGeneric(c, 1, c.Now) }
func cmdExpireAt(c *Ctx)  { expireGeneric(c, 1000, 0) }
func cmdPExpireAt(c *Ctx) { expireGeneric(c, 1, 0) }

// expireGeneric implements the EXPIRE family: unit is 1000 for seconds, base
// the time the argument is relative to (0 for the *AT forms).
func expireGeneric(c *Ctx, unit, base int64) {
	var nx, xx, gt, lt bool
	for _, a := range c.Args[3:] {
		switch {
		case is(a, "NX"):
			nx = true
		case is(a, "XX"):
			xx = true
		case is(a, "GT"):
			gt = true
		case is(a, "LT"):
			lt = true
		default:
			c.W.Error("Unsupported option " + string(a))
			return
		}
	}
	if nx && (xx || gt || lt) {
		c.W.Error("ERR NX and XX, GT or LT options at the same time are not compatible")
		return
	}
	if gt && lt {
		c.W.Error("ERR GT and LT options at the same time are not compatible")
		return
	}
	when, ok := c.Int(2)
	if !ok {
		return
	}
	invalid := "invalid expire time in '" + c.Spec.FullName() + "' command"
	if unit == 1000 {
		if when > math.MaxInt64/1000 || when < math.MinInt64/1000 {
			c.W.Error(invalid)
			return
		}
		when *= 1000
	}
	if when > math.MaxInt64-base {
		c.W.Error(invalid)
		return
	}
	when += base
	s := c.Shard(c.Args[1])
	e, found := s.Find(c.DB, c.Args[1], c.Now)
	if !found {
		c.W.Int(0)
		return
	}
	cur := e.ExpireAt()
	switch {
	case nx && cur != 0,
		xx && cur == 0,
		gt && (cur == 0 || when <= cur),
		lt && cur != 0 && when >= cur:
		c.W.Int(0)
		return
	}
	if when <= c.Now {
		s.DeleteEntry(e)
		c.notify(notifyGeneric, "del", c.Args[1])
	} else {
		s.SetExpire(e, when)
		c.notify(notifyGeneric, "expire", c.Args[1])
	}
	c.W.Int(1)
}

// ttl replies with the key's TTL in ms or s (rounded), -1 without one and
// -2 without the key.
func ttl(c *Ctx, ms bool) {
	e, ok := c.Shard(c.Args[1]).Inspect(c.DB, c.Args[1], c.Now)
	if !ok {
		c.W.Int(-2)
		return
	}
	at := e.ExpireAt()
	if at == 0 {
		c.W.Int(-1)
		return
	}
	left := max(at-c.Now, 0)
	if !ms {
		left = (left + 500) / 1000
	}
	c.W.Int(left)
}

func cmdTTL(c *Ctx)  { ttl(c, false) }
func cmdPTTL(c *Ctx) { ttl(c, true) }

func expireTime(c *Ctx, ms bool) {
	e, ok := c.Shard(c.Args[1]).Inspect(c.DB, c.Args[1], c.Now)
	if !ok {
		c.W.Int(-2)
		return
	}
	at := e.ExpireAt()
	switch {
	case at == 0:
		c.W.Int(-1)
	case ms:
		c.W.Int(at)
	default:
		c.W.Int((at + 500) / 1000)
	}
}

func cmdExpireTime(c *Ctx)  { expireTime(c, false) }
func cmdPExpireTime(c *Ctx) { expireTime(c, true) }

func cmdPersist(c *Ctx) {
	s := c.Shard(c.Args[1])
	e, ok := s.Find(c.DB, c.Args[1], c.Now)
	if !ok || e.ExpireAt() == 0 {
		c.W.Int(0)
		return
	}
	s.SetExpire(e, 0)
	c.notify(notifyGeneric, "persist", c.Args[1])
	c.W.Int(1)
}

func cmdType(c *Ctx) {
	e, ok := c.Shard(c.Args[1]).Inspect(c.DB, c.Args[1], c.Now)
	if !ok {
		c.W.Simple("none")
		return
	}
	c.W.Simple(e.Kind().String())
}

func cmdKeys(c *Ctx) {
	var keys [][]byte
	pat := c.Args[1]
	all := len(pat) == 1 && pat[0] == '*'
	c.Srv.Eng.ForEachKey(c.DB, c.Now, c.held, func(k []byte, _ engine.Kind) {
		if all || engine.Match(pat, k, false) {
			keys = append(keys, append([]byte(nil), k...))
		}
	})
	c.W.Array(len(keys))
	for _, k := range keys {
		c.W.Bulk(k)
	}
}

// parseCursor reads a SCAN cursor as Redis does with strtoull: an optional
// sign (a minus wraps around), digits, nothing else; "" is 0.
func parseCursor(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, true
	}
	neg := false
	switch b[0] {
	case '-':
		neg, b = true, b[1:]
	case '+':
		b = b[1:]
	}
	v, ok := parseUint64(b)
	if !ok {
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}

// scanOptions are SCAN's, HSCAN's and ZSCAN's MATCH, COUNT and TYPE.
type scanOptions struct {
	match    []byte
	count    int
	typ      []byte
	hasType  bool
	matchAll bool
}

// cursorAt reads the SCAN cursor at index i, replying Redis's error if it
// is malformed.
func (c *Ctx) cursorAt(i int) (uint64, bool) {
	cursor, ok := parseCursor(c.Args[i])
	if !ok {
		c.W.Error("invalid cursor")
	}
	return cursor, ok
}

// emptyScan replies a finished scan with nothing in it.
func (c *Ctx) emptyScan() {
	c.W.Array(2)
	c.W.BulkString("0")
	c.W.Array(0)
}

// parseScan reads the cursor at index i and the options after it.
func (c *Ctx) parseScan(i int, allowType bool) (uint64, scanOptions, bool) {
	var o scanOptions
	o.count = 10
	cursor, ok := c.cursorAt(i)
	if !ok {
		return 0, o, false
	}
	for j := i + 1; j < len(c.Args); j += 2 {
		a := c.Args[j]
		if j+1 >= len(c.Args) {
			c.W.Error(msgSyntax)
			return 0, o, false
		}
		switch {
		case is(a, "COUNT"):
			n, ok := c.Int(j + 1)
			if !ok {
				return 0, o, false
			}
			if n < 1 {
				c.W.Error(msgSyntax)
				return 0, o, false
			}
			o.count = int(min(n, 1<<30))
		case is(a, "MATCH"):
			o.match = c.Args[j+1]
		case is(a, "TYPE") && allowType:
			o.typ, o.hasType = c.Args[j+1], true
		default:
			c.W.Error(msgSyntax)
			return 0, o, false
		}
	}
	o.matchAll = o.match == nil || (len(o.match) == 1 && o.match[0] == '*')
	return cursor, o, true
}

func cmdScan(c *Ctx) {
	cursor, o, ok := c.parseScan(1, true)
	if !ok {
		return
	}
	kind, known := engine.KindByName(o.typ)
	var keys [][]byte
	next := c.Srv.Eng.Scan(c.DB, cursor, o.count, c.Now, c.held, func(k []byte, kd engine.Kind) {
		if o.hasType && (!known || kd != kind) {
			return
		}
		if o.matchAll || engine.Match(o.match, k, false) {
			keys = append(keys, append([]byte(nil), k...))
		}
	})
	c.W.Array(2)
	c.W.BulkString(strconv.FormatUint(next, 10))
	c.W.Array(len(keys))
	for _, k := range keys {
		c.W.Bulk(k)
	}
}

func cmdRandomKey(c *Ctx) {
	k := c.Srv.Eng.RandomKey(c.DB, c.Now, c.held)
	if k == nil {
		c.W.Null()
		return
	}
	c.W.Bulk(k)
}

func cmdRename(c *Ctx)   { rename(c, false) }
func cmdRenameNX(c *Ctx) { rename(c, true) }

func rename(c *Ctx, nx bool) {
	src, dst := c.Args[1], c.Args[2]
	from := c.Shard(src)
	if _, ok := from.Find(c.DB, src, c.Now); !ok {
		c.W.Error(msgNoSuchKey)
		return
	}
	if string(src) == string(dst) {
		if nx {
			c.W.Int(0)
		} else {
			c.W.OK()
		}
		return
	}
	to := c.Shard(dst)
	replaced := to.Exists(c.DB, dst, c.Now)
	if nx && replaced {
		c.W.Int(0)
		return
	}
	// Looking up dst may have expired it and moved src's slot: find again.
	e, ok := from.Find(c.DB, src, c.Now)
	if !ok {
		c.W.Error(msgNoSuchKey)
		return
	}
	engine.Move(from, e, to, c.DB, dst)
	c.notifyMoved(dst, c.DB, replaced)
	c.notify(notifyGeneric, "rename_from", src)
	c.notify(notifyGeneric, "rename_to", dst)
	if nx {
		c.W.Int(1)
	} else {
		c.W.OK()
	}
}

// notifyMoved reports the events of a key added at dst of database db
// by a command that reports its own events on another key first (RENAME,
// MOVE, COPY): the engine's, on dst's shard, go first, and a key that
// replaced another is new all the same, as Redis deletes the old key
// before it adds the new one.
func (c *Ctx) notifyMoved(dst []byte, db int, replaced bool) {
	if c.Srv.Eng.Notes() == 0 {
		return
	}
	c.Srv.drainNotes(c, c.Srv.Eng.MaskOf(dst))
	if replaced {
		c.notifyDB(notifyNew, "new", dst, db)
	}
}

func cmdDBSize(c *Ctx) {
	c.W.Int(int64(c.Srv.Eng.DBSize(c.DB, c.held)))
}

// flushMode checks FLUSHDB's and FLUSHALL's optional ASYNC|SYNC.
func flushMode(c *Ctx) bool {
	if len(c.Args) > 2 || (len(c.Args) == 2 && !is(c.Args[1], "ASYNC") && !is(c.Args[1], "SYNC")) {
		c.W.Error(msgSyntax)
		return false
	}
	return true
}

func cmdFlushDB(c *Ctx) {
	if flushMode(c) {
		c.wholeKeyspace(func() { c.Srv.Eng.FlushDB(c.DB, true) }, c.DB, c.Args[0])
		c.Srv.trackFlush(c)
		c.W.OK()
	}
}

func cmdFlushAll(c *Ctx) {
	if flushMode(c) {
		c.wholeKeyspace(func() { c.Srv.Eng.FlushDB(-1, true) }, -1, c.Args[0])
		c.Srv.trackFlush(c)
		c.W.OK()
	}
}

// dbIndex parses a database number, with errors for a bad integer (msg)
// and for an index out of range.
func (c *Ctx) dbIndex(i int, notInt string) (int, bool) {
	n, ok := engine.ParseInt(c.Args[i])
	if !ok {
		c.W.Error(notInt)
		return 0, false
	}
	if n < math.MinInt32 || n > math.MaxInt32 {
		// Redis reads the index as a C int.
		if notInt == msgNotInteger {
			notInt = "value is out of range, value must between -2147483648 and 2147483647"
		}
		c.W.Error(notInt)
		return 0, false
	}
	if n < 0 || n >= int64(c.Srv.Eng.Databases()) {
		c.W.Error(msgDBIndex)
		return 0, false
	}
	return int(n), true
}

func cmdSelect(c *Ctx) {
	if n, ok := engine.ParseInt(c.Args[1]); ok && n != 0 && n == int64(int32(n)) && c.Srv.Cluster != nil {
		c.W.Error("ERR SELECT is not allowed in cluster mode") // a cluster node has DB 0 only
		return
	}
	db, ok := c.dbIndex(1, msgNotInteger)
	if !ok {
		return
	}
	c.Client.db.Store(int32(db))
	c.DB = db
	c.W.OK()
}

func cmdSwapDB(c *Ctx) {
	if c.Srv.Cluster != nil {
		c.W.Error("ERR SWAPDB is not allowed in cluster mode") // a cluster node has DB 0 only
		return
	}
	a, ok := c.dbIndex(1, "invalid first DB index")
	if !ok {
		return
	}
	b, ok := c.dbIndex(2, "invalid second DB index")
	if !ok {
		return
	}
	if !c.held && !c.Client.master {
		// A full sync under way must finish capturing first (HoldSwaps).
		// A replica's own full syncs hold its master's stream still
		// instead.
		defer c.Srv.Repl.HoldSwaps()()
	}
	c.wholeKeyspace(func() { c.Srv.Eng.SwapDB(a, b, true) }, -1, c.Args...)
	c.W.OK()
}
