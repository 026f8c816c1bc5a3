package commands

import (
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/limitkv/limitkv/engine"
)

// hashCommands: the hash commands.
func hashCommands() []*command {
	return []*command{
		cmd("hset", -4, "write denyoom fast as_is", cmdHSet),
		cmd("hsetnx", 4, "write denyoom fast as_is", cmdHSetNX),
		cmd("hget", 3, "readonly fast", cmdHGet),
		cmd("hmget", -3, "readonly fast", cmdHMGet),
		cmd("hmset", -4, "write denyoom fast as_is", cmdHMSet),
		cmd("hdel", -3, "write fast as_is", cmdHDel),
		cmd("hexists", 3, "readonly fast", cmdHExists),
		cmd("hlen", 2, "readonly fast", cmdHLen),
		cmd("hstrlen", 3, "readonly fast", cmdHStrLen),
		cmd("hgetall", 2, "readonly", cmdHGetAll),
		cmd("hkeys", 2, "readonly", cmdHKeys),
		cmd("hvals", 2, "readonly", cmdHVals),
		cmd("hincrby", 4, "write denyoom fast as_is", cmdHIncrBy),
		cmd("hincrbyfloat", 4, "write denyoom fast as_is", cmdHIncrByFloat),
		cmd("hscan", -3, "readonly", cmdHScan),
		cmd("hrandfield", -2, "readonly", cmdHRandField),
	}
}

// HRANDFIELD's count follows ZRANDMEMBER's rules (zalgebra.go).

const (
	msgHashNotInteger = "hash value is not an integer"
	msgHashNotFloat   = "hash value is not a float"
	msgNaNOrInfArg    = "value is NaN or Infinity"
)

// hashLimits returns the compact encoding's bounds as configured now.
func (c *Ctx) hashLimits() engine.HashLimits {
	entries, value, _, _ := c.Srv.Cfg.ListpackLimits()
	return engine.HashLimits{Entries: entries, Value: value}
}

// writableHash finds the hash at key for a write. When the key does not
// exist it returns a new empty hash that storeHash will add to the keyspace.
// On a key of another type it replies WRONGTYPE and returns nil.
func (c *Ctx) writableHash(s *engine.Shard, key []byte) (engine.Entry, *engine.Hash, bool) {
	e, h, err := engine.Get[*engine.Hash](s, c.DB, key, c.Now, engine.ForWrite)
	if err != nil {
		c.Err(err)
		return e, nil, false
	}
	if h == nil {
		return e, engine.NewHash(), true
	}
	return e, h, false
}

// storeHash records a change to a hash from writableHash, and reports
// event on it: a new one is added to the keyspace, an existing one marked
// as changed for WATCH.
func (c *Ctx) storeHash(s *engine.Shard, key []byte, e engine.Entry, h *engine.Hash, created bool, event string) {
	if created {
		s.SetObject(c.DB, key, engine.KindHash, h, 0)
	} else {
		s.Touch(e)
	}
	c.notify(notifyHash, event, key)
}

// readHash looks up the hash at key for a read; the hash is nil when the key
// does not exist. On a key of another type it replies WRONGTYPE.
func (c *Ctx) readHash(key []byte) (*engine.Hash, bool) {
	_, h, err := engine.Get[*engine.Hash](c.Shard(key), c.DB, key, c.Now, engine.ForRead)
	if err != nil {
		c.Err(err)
		return nil, false
	}
	return h, true
}

func cmdHSet(c *Ctx) {
	if added, ok := hashSetPairs(c); ok {
		c.W.Int(added)
	}
}

func cmdHMSet(c *Ctx) {
	if _, ok := hashSetPairs(c); ok {
		c.W.OK()
	}
}

// hashSetPairs runs HSET and HMSET: it stores every field/value pair and
// returns how many fields were new.
func hashSetPairs(c *Ctx) (int64, bool) {
	if len(c.Args)%2 != 0 {
		c.W.Error("wrong number of arguments for '" + c.Spec.FullName() + "' command")
		return 0, false
	}
	key := c.Args[1]
	s := c.Shard(key)
	e, h, created := c.writableHash(s, key)
	if h == nil {
		return 0, false
	}
	lim := c.hashLimits()
	var added int64
	for i := 2; i < len(c.Args); i += 2 {
		if h.Set(c.Args[i], c.Args[i+1], lim) {
			added++
		}
	}
	// Redis reports "hset" even when no field changed.
	c.storeHash(s, key, e, h, created, "hset")
	return added, true
}

func cmdHSetNX(c *Ctx) {
	key := c.Args[1]
	s := c.Shard(key)
	e, h, created := c.writableHash(s, key)
	if h == nil {
		return
	}
	if h.Has(c.Args[2]) {
		c.W.Int(0)
		return
	}
	h.Set(c.Args[2], c.Args[3], c.hashLimits())
	c.storeHash(s, key, e, h, created, "hset")
	c.W.Int(1)
}

func cmdHGet(c *Ctx) {
	h, ok := c.readHash(c.Args[1])
	if !ok {
		return
	}
	if h == nil {
		c.W.Null()
		return
	}
	if v, found := h.Get(c.Args[2]); found {
		c.W.Bulk(v)
	} else {
		c.W.Null()
	}
}

func cmdHMGet(c *Ctx) {
	h, ok := c.readHash(c.Args[1])
	if !ok {
		return
	}
	fields := c.Args[2:]
	c.W.Array(len(fields))
	for _, f := range fields {
		if h == nil {
			c.W.Null()
		} else if v, found := h.Get(f); found {
			c.W.Bulk(v)
		} else {
			c.W.Null()
		}
	}
}

func cmdHDel(c *Ctx) {
	key := c.Args[1]
	s := c.Shard(key)
	e, h, err := engine.Get[*engine.Hash](s, c.DB, key, c.Now, engine.ForWrite)
	if err != nil {
		c.Err(err)
		return
	}
	if h == nil {
		c.W.Int(0)
		return
	}
	var deleted int64
	for _, f := range c.Args[2:] {
		if h.Delete(f) {
			deleted++
			if h.Len() == 0 {
				break
			}
		}
	}
	if deleted > 0 {
		c.notify(notifyHash, "hdel", key)
	}
	switch {
	case h.Len() == 0:
		s.DeleteEntry(e)
		c.notify(notifyGeneric, "del", key)
	case deleted > 0:
		s.Touch(e)
	}
	c.W.Int(deleted)
}

func cmdHExists(c *Ctx) {
	h, ok := c.readHash(c.Args[1])
	if ok {
		c.W.Int(b2i(h != nil && h.Has(c.Args[2])))
	}
}

func cmdHLen(c *Ctx) {
	h, ok := c.readHash(c.Args[1])
	if !ok {
		return
	}
	if h == nil {
		c.W.Int(0)
		return
	}
	c.W.Int(int64(h.Len()))
}

func cmdHStrLen(c *Ctx) {
	h, ok := c.readHash(c.Args[1])
	if !ok {
		return
	}
	var n int
	if h != nil {
		v, _ := h.Get(c.Args[2])
		n = len(v)
	}
	c.W.Int(int64(n))
}

func cmdHGetAll(c *Ctx) {
	h, ok := c.readHash(c.Args[1])
	if !ok {
		return
	}
	if h == nil {
		c.W.Map(0)
		return
	}
	c.W.Map(h.Len())
	for f, v := range h.All() {
		c.W.Bulk(f)
		c.W.Bulk(v)
	}
}

func cmdHKeys(c *Ctx) { hashColumn(c, true) }
func cmdHVals(c *Ctx) { hashColumn(c, false) }

// hashColumn replies with every field (HKEYS) or every value (HVALS).
func hashColumn(c *Ctx, fields bool) {
	h, ok := c.readHash(c.Args[1])
	if !ok {
		return
	}
	if h == nil {
		c.W.Array(0)
		return
	}
	c.W.Array(h.Len())
	for f, v := range h.All() {
		if fields {
			c.W.Bulk(f)
		} else {
			c.W.Bulk(v)
		}
	}
}

func cmdHIncrBy(c *Ctx) {
	delta, ok := c.Int(3)
	if !ok {
		return
	}
	var n int64
	if c.incrHashField("hincrby", engine.ErrNotInteger, msgHashNotInteger, func(h *engine.Hash) (err error) {
		n, err = h.IncrBy(c.Args[2], delta, c.hashLimits())
		return err
	}) {
		c.W.Int(n)
	}
}

func cmdHIncrByFloat(c *Ctx) {
	incr, ok := engine.ParseLongDouble(c.Args[3])
	if !ok {
		c.W.Error(msgNotFloat)
		return
	}
	if incr.IsInf() {
		c.W.Error(msgNaNOrInfArg)
		return
	}
	var out string
	if c.incrHashField("hincrbyfloat", engine.ErrNotFloat, msgHashNotFloat, func(h *engine.Hash) (err error) {
		out, err = h.IncrByFloat(c.Args[2], incr, c.hashLimits())
		return err
	}) {
		c.W.BulkString(out)
	}
}

// incrHashField runs incr on the hash at Args[1], created if missing, and
// stores the hash, reporting event, if incr succeeds. A field that holds
// no number (notNum) answers msg; false means an error was replied.
func (c *Ctx) incrHashField(event string, notNum error, msg string, incr func(h *engine.Hash) error) bool {
	key := c.Args[1]
	s := c.Shard(key)
	e, h, created := c.writableHash(s, key)
	if h == nil {
		return false
	}
	switch err := incr(h); err {
	case nil:
	case notNum:
		c.W.Error(msg)
		return false
	default:
		c.Err(err)
		return false
	}
	c.storeHash(s, key, e, h, created, event)
	return true
}

func cmdHScan(c *Ctx) {
	// Redis checks the cursor, then the key, and only then the options: a
	// missing key answers an empty scan whatever the options say.
	cursor, ok := c.cursorAt(2)
	if !ok {
		return
	}
	h, ok := c.readHash(c.Args[1])
	if !ok {
		return
	}
	if h == nil {
		c.emptyScan()
		return
	}
	_, o, ok := c.parseScan(2, false)
	if !ok {
		return
	}
	// The pairs point into the hash, which nothing changes before the reply
	// is written. A default COUNT's worth fits on the stack.
	var stack [2 * 16][]byte
	pairs := stack[:0]
	next := h.Scan(cursor, o.count, func(f, v []byte) {
		if o.matchAll || engine.Match(o.match, f, false) {
			pairs = append(pairs, f, v)
		}
	})
	var buf [20]byte
	c.W.Array(2)
	c.W.Bulk(strconv.AppendUint(buf[:0], next, 10))
	c.W.Array(len(pairs))
	for _, p := range pairs {
		c.W.Bulk(p)
	}
}

func cmdHRandField(c *Ctx) {
	if len(c.Args) == 2 {
		h, ok := c.readHash(c.Args[1])
		switch {
		case !ok:
		case h == nil:
			c.W.Null()
		default:
			f, _ := h.Random()
			c.W.Bulk(f)
		}
		return
	}
	with, ok := c.randOptions("WITHVALUES")
	if !ok {
		return
	}
	count, ok := c.randCount(with)
	if !ok {
		return
	}
	h, ok := c.readHash(c.Args[1])
	if !ok {
		return
	}
	if h == nil || count == 0 {
		c.W.Array(0)
		return
	}
	pairs := with && c.W.Proto() == 3
	emit := func(f, v []byte) {
		if pairs {
			c.W.Array(2)
		}
		c.W.Bulk(f)
		if with {
			c.W.Bulk(v)
		}
	}
	header := func(k int) {
		if with && !pairs {
			c.W.Array(2 * k)
		} else {
			c.W.Array(k)
		}
	}
	size := h.Len()
	if count < 0 || count == 1 {
		k := int(max(count, -count))
		start := c.W.Len()
		header(k)
		pick := func() { emit(h.Random()) }
		if k > 1 && h.Encoding() == "listpack" {
			fs, vs := engine.CompactPairs(h.All())
			pick = func() { r := rand.IntN(len(fs)); emit(fs[r], vs[r]) }
		}
		for i := 0; i < k; i++ {
			pick()
			if i%1024 == 1023 && c.randReplyTooLong(start) {
				return
			}
		}
		c.randReplyTooLong(start)
		return
	}
	if count >= int64(size) {
		header(size)
		for f, v := range h.All() {
			emit(f, v)
		}
		return
	}
	ranks := engine.RandRanks(size, int(count))
	slices.Sort(ranks)
	header(len(ranks))
	// The distinct fields come in the hash's order, as Redis's sampling
	// returns them: picking them in order costs one pass.
	k, i := 0, 0
	for f, v := range h.All() {
		if k < len(ranks) && ranks[k] == i {
			emit(f, v)
			k++
		}
		i++
	}
}
