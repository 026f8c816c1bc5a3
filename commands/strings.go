package commands

import (
	"math"

	"github.com/limitkv/limitkv/engine"
)

// stringCommands: the string commands.
func stringCommands() []*command {
	return []*command{
		cmd("get", 2, "readonly fast", cmdGet),
		cmd("set", -3, "write denyoom", cmdSet).withKeyFlags(setKeyFlags),
		cmd("setnx", 3, "write denyoom fast", cmdSetNX),
		cmd("setex", 4, "write denyoom", cmdSetEX),
		cmd("psetex", 4, "write denyoom", cmdPSetEX),
		cmd("getset", 3, "write denyoom fast", cmdGetSet),
		cmd("getdel", 2, "write fast", cmdGetDel),
		cmd("getex", -2, "write fast ttl_only", cmdGetEx),
		cmd("mget", -2, "readonly fast", cmdMGet),
		cmd("mset", -3, "write denyoom", cmdMSet),
		cmd("msetnx", -3, "write denyoom", cmdMSetNX),
		cmd("incr", 2, "write denyoom fast as_is", cmdIncr),
		cmd("decr", 2, "write denyoom fast as_is", cmdDecr),
		cmd("incrby", 3, "write denyoom fast as_is", cmdIncrBy),
		cmd("decrby", 3, "write denyoom fast as_is", cmdDecrBy),
		cmd("incrbyfloat", 3, "write denyoom fast", cmdIncrByFloat),
		cmd("append", 3, "write denyoom fast as_is", cmdAppend),
		cmd("strlen", 2, "readonly fast", cmdStrLen),
		cmd("getrange", 4, "readonly", cmdGetRange),
		cmd("setrange", 4, "write denyoom as_is", cmdSetRange),
	}
}

func cmdGet(c *Ctx) {
	v, ok, err := c.Shard(c.Args[1]).GetString(c.DB, c.Args[1], c.Now, c.buf[:0])
	switch {
	case err != nil:
		c.Err(err)
	case !ok:
		c.W.Null()
	default:
		c.W.Bulk(v)
	}
}

// expiry options shared by SET and GETEX.
type expiryOpt uint8

const (
	expNone expiryOpt = iota
	expEX
	expPX
	expEXAT
	expPXAT
)

// setKeyFlags narrows the variable flags of SET's key (its
// Spec.KeyFlags), as Redis's setGetKeys does: without GET, SET only
// overwrites the key.
func setKeyFlags(args [][]byte) string {
	for _, a := range args[3:] {
		if is(a, "GET") {
			return "RW access update"
		}
	}
	return "OW update"
}

func cmdSet(c *Ctx) {
	var o engine.SetOptions
	var kind expiryOpt
	expIdx := 0
	args := c.Args
	for j := 3; j < len(args); j++ {
		a := args[j]
		hasNext := j+1 < len(args)
		switch {
		case is(a, "NX") && !o.XX:
			o.NX = true
		case is(a, "XX") && !o.NX:
			o.XX = true
		case is(a, "GET"):
			o.Get = true
		case is(a, "KEEPTTL") && kind == expNone:
			o.KeepTTL = true
		case is(a, "EX") && !o.KeepTTL && (kind == expNone || kind == expEX) && hasNext:
			kind, expIdx = expEX, j+1
			j++
		case is(a, "PX") && !o.KeepTTL && (kind == expNone || kind == expPX) && hasNext:
			kind, expIdx = expPX, j+1
			j++
		case is(a, "EXAT") && !o.KeepTTL && (kind == expNone || kind == expEXAT) && hasNext:
			kind, expIdx = expEXAT, j+1
			j++
		case is(a, "PXAT") && !o.KeepTTL && (kind == expNone || kind == expPXAT) && hasNext:
			kind, expIdx = expPXAT, j+1
			j++
		default:
			c.W.Error(msgSyntax)
			return
		}
	}
	if kind != expNone {
		at, ok := c.expireAtArg(kind, expIdx)
		if !ok {
			return
		}
		o.ExpireAt = at
	}
	c.set(c.Args[1], c.Args[2], o)
}

// expireAtArg converts the expiry argument at index i to an absolute time in
// ms, with Redis's checks and its "invalid expire time" error.
func (c *Ctx) expireAtArg(kind expiryOpt, i int) (int64, bool) {
	n, ok := c.Int(i)
	if !ok {
		return 0, false
	}
	if n <= 0 || ((kind == expEX || kind == expEXAT) && n > math.MaxInt64/1000) {
		c.W.Error("invalid expire time in '" + c.Spec.FullName() + "' command")
		return 0, false
	}
	if kind == expEX || kind == expEXAT {
		n *= 1000
	}
	if kind == expEX || kind == expPX {
		if n > math.MaxInt64-c.Now {
			c.W.Error("invalid expire time in '" + c.Spec.FullName() + "' command")
			return 0, false
		}
		n += c.Now
	}
	return n, true
}

// set runs SET's engine operation and replies: OK or null, or with GET the
// old value. A big value read into memory of its own is handed to the
// engine, which keeps it rather than a copy.
func (c *Ctx) set(key, val []byte, o engine.SetOptions) {
	if c.Client != nil && c.Client.conn != nil {
		o.Owned, o.OwnedOff, _ = c.Client.conn.Adopt(val)
	}
	prev, hadPrev, written, err := c.Shard(key).Set(c.DB, key, val, c.Now, o, nil)
	if written {
		c.notifySet(key, o.ExpireAt != 0)
	}
	switch {
	case err != nil:
		c.Err(err)
	case o.Get && hadPrev:
		c.W.Bulk(prev)
	case o.Get:
		c.W.Null()
	case written:
		c.W.OK()
	default:
		c.W.Null()
	}
}

func cmdSetNX(c *Ctx) {
	_, _, written, _ := c.Shard(c.Args[1]).Set(c.DB, c.Args[1], c.Args[2], c.Now, engine.SetOptions{NX: true}, nil)
	if written {
		c.notifySet(c.Args[1], false)
	}
	c.W.Int(b2i(written))
}

// notifySet reports a string set, and its expiry if it got one.
func (c *Ctx) notifySet(key []byte, expiry bool) {
	c.notify(notifyString, "set", key)
	if expiry {
		c.notify(notifyGeneric, "expire", key)
	}
}

func cmdSetEX(c *Ctx) { setWithExpiry(c, expEX) }

func cmdPSetEX(c *Ctx) { setWithExpiry(c, expPX) }

func setWithExpiry(c *Ctx, kind expiryOpt) {
	at, ok := c.expireAtArg(kind, 2)
	if !ok {
		return
	}
	c.Shard(c.Args[1]).SetString(c.DB, c.Args[1], c.Args[3], at)
	c.notifySet(c.Args[1], true)
	c.W.OK()
}

func cmdGetSet(c *Ctx) {
	c.set(c.Args[1], c.Args[2], engine.SetOptions{Get: true})
}

func cmdGetDel(c *Ctx) {
	s := c.Shard(c.Args[1])
	e, ok := s.Lookup(c.DB, c.Args[1], c.Now)
	if !ok {
		c.W.Null()
		return
	}
	v, err := e.StringOf(c.buf[:0])
	if err != nil {
		c.Err(err)
		return
	}
	c.W.Bulk(v)
	s.DeleteEntry(e)
	c.notify(notifyGeneric, "del", c.Args[1])
}

func cmdGetEx(c *Ctx) {
	var kind expiryOpt
	persist := false
	expIdx := 0
	args := c.Args
	for j := 2; j < len(args); j++ {
		a := args[j]
		hasNext := j+1 < len(args)
		switch {
		case is(a, "PERSIST") && kind == expNone:
			persist = true
		case is(a, "EX") && !persist && (kind == expNone || kind == expEX) && hasNext:
			kind, expIdx = expEX, j+1
			j++
		case is(a, "PX") && !persist && (kind == expNone || kind == expPX) && hasNext:
			kind, expIdx = expPX, j+1
			j++
		case is(a, "EXAT") && !persist && (kind == expNone || kind == expEXAT) && hasNext:
			kind, expIdx = expEXAT, j+1
			j++
		case is(a, "PXAT") && !persist && (kind == expNone || kind == expPXAT) && hasNext:
			kind, expIdx = expPXAT, j+1
			j++
		default:
			c.W.Error(msgSyntax)
			return
		}
	}
	s := c.Shard(c.Args[1])
	e, ok := s.Lookup(c.DB, c.Args[1], c.Now)
	if !ok {
		c.W.Null()
		return
	}
	v, err := e.StringOf(c.buf[:0])
	if err != nil {
		c.Err(err)
		return
	}
	var at int64
	if kind != expNone {
		if at, ok = c.expireAtArg(kind, expIdx); !ok {
			return
		}
	}
	c.W.Bulk(v)
	switch {
	case (kind == expEXAT || kind == expPXAT) && at <= c.Now:
		s.DeleteEntry(e)
		c.notify(notifyGeneric, "del", c.Args[1])
	case kind != expNone:
		s.SetExpire(e, at)
		c.notify(notifyGeneric, "expire", c.Args[1])
	case persist && e.ExpireAt() != 0:
		s.SetExpire(e, 0)
		c.notify(notifyGeneric, "persist", c.Args[1])
	}
}

func cmdMGet(c *Ctx) {
	c.W.Array(len(c.Args) - 1)
	for _, k := range c.Args[1:] {
		v, ok, _ := c.Shard(k).GetString(c.DB, k, c.Now, c.buf[:0])
		if ok {
			c.W.Bulk(v)
		} else {
			c.W.Null()
		}
	}
}

func cmdMSet(c *Ctx) {
	if len(c.Args)%2 != 1 {
		c.W.Error("wrong number of arguments for '" + c.Spec.FullName() + "' command")
		return
	}
	for i := 1; i < len(c.Args); i += 2 {
		c.Shard(c.Args[i]).SetString(c.DB, c.Args[i], c.Args[i+1], 0)
		c.notify(notifyString, "set", c.Args[i])
	}
	c.W.OK()
}

func cmdMSetNX(c *Ctx) {
	if len(c.Args)%2 != 1 {
		c.W.Error("wrong number of arguments for '" + c.Spec.FullName() + "' command")
		return
	}
	for i := 1; i < len(c.Args); i += 2 {
		if c.Shard(c.Args[i]).Exists(c.DB, c.Args[i], c.Now) {
			c.W.Int(0)
			return
		}
	}
	for i := 1; i < len(c.Args); i += 2 {
		c.Shard(c.Args[i]).SetString(c.DB, c.Args[i], c.Args[i+1], 0)
		c.notify(notifyString, "set", c.Args[i])
	}
	c.W.Int(1)
}

func cmdIncr(c *Ctx) { incrBy(c, 1) }
func cmdDecr(c *Ctx) { incrBy(c, -1) }

func cmdIncrBy(c *Ctx) {
	if n, ok := c.Int(2); ok {
		incrBy(c, n)
	}
}

func cmdDecrBy(c *Ctx) {
	n, ok := c.Int(2)
	if !ok {
		return
	}
	if n == math.MinInt64 {
		c.W.Error("decrement would overflow")
		return
	}
	incrBy(c, -n)
}

func incrBy(c *Ctx, delta int64) {
	n, err := c.Shard(c.Args[1]).IncrBy(c.DB, c.Args[1], c.Now, delta)
	if err != nil {
		c.Err(err)
		return
	}
	c.notify(notifyString, "incrby", c.Args[1])
	c.W.Int(n)
}

func cmdIncrByFloat(c *Ctx) {
	v, err := c.Shard(c.Args[1]).IncrByFloat(c.DB, c.Args[1], c.Now, c.Args[2])
	if err != nil {
		c.Err(err)
		return
	}
	c.notify(notifyString, "incrbyfloat", c.Args[1])
	c.W.BulkString(v)
}

// maxStringLen is the longest string a command may build.
func (c *Ctx) maxStringLen() int64 { return c.Srv.Net.Limits.MaxBulkLen.Load() }

func cmdAppend(c *Ctx) {
	s := c.Shard(c.Args[1])
	e, ok := s.Find(c.DB, c.Args[1], c.Now)
	cur := 0
	if ok {
		n, err := e.StrLen()
		if err != nil {
			c.Err(err)
			return
		}
		cur = n
	}
	add := c.Args[2]
	if int64(cur)+int64(len(add)) > c.maxStringLen() {
		c.W.Error(msgStringLimit)
		return
	}
	grow, ok := c.reserveGrowth(c.Args[1], int64(cur+len(add)))
	if !ok {
		return
	}
	defer c.Srv.releaseGrowth(grow)
	e, b, err := s.MutableString(c.DB, c.Args[1], c.Now, cur+len(add))
	if err != nil {
		c.Err(err)
		return
	}
	copy(b[cur:], add)
	s.Touch(e)
	c.notify(notifyString, "append", c.Args[1])
	c.W.Int(int64(len(b)))
}

func cmdStrLen(c *Ctx) {
	e, ok := c.Shard(c.Args[1]).Lookup(c.DB, c.Args[1], c.Now)
	if !ok {
		c.W.Int(0)
		return
	}
	n, err := e.StrLen()
	if err != nil {
		c.Err(err)
		return
	}
	c.W.Int(int64(n))
}

func cmdGetRange(c *Ctx) {
	start, ok := c.Int(2)
	if !ok {
		return
	}
	end, ok := c.Int(3)
	if !ok {
		return
	}
	v, found, err := c.Shard(c.Args[1]).GetString(c.DB, c.Args[1], c.Now, c.buf[:0])
	if err != nil {
		c.Err(err)
		return
	}
	if !found {
		c.W.BulkString("")
		return
	}
	n := int64(len(v))
	if start < 0 && end < 0 && start > end {
		c.W.BulkString("")
		return
	}
	if start < 0 {
		start += n
	}
	if end < 0 {
		end += n
	}
	start = max(start, 0)
	end = max(end, 0)
	if end >= n {
		end = n - 1
	}
	if start > end || n == 0 {
		c.W.BulkString("")
		return
	}
	c.W.Bulk(v[start : end+1])
}

func cmdSetRange(c *Ctx) {
	off, ok := c.Int(2)
	if !ok {
		return
	}
	if off < 0 {
		c.W.Error("offset is out of range")
		return
	}
	val := c.Args[3]
	s := c.Shard(c.Args[1])
	e, found := s.Find(c.DB, c.Args[1], c.Now)
	cur := 0
	if found {
		n, err := e.StrLen()
		if err != nil {
			c.Err(err)
			return
		}
		cur = n
	}
	if len(val) == 0 {
		c.W.Int(int64(cur))
		return
	}
	if total := uint64(off) + uint64(len(val)); total > uint64(c.maxStringLen()) {
		c.W.Error(msgStringLimit)
		return
	}
	grow, ok := c.reserveGrowth(c.Args[1], off+int64(len(val)))
	if !ok {
		return
	}
	defer c.Srv.releaseGrowth(grow)
	e, b, err := s.MutableString(c.DB, c.Args[1], c.Now, int(off)+len(val))
	if err != nil {
		c.Err(err)
		return
	}
	copy(b[off:], val)
	s.Touch(e)
	c.notify(notifyString, "setrange", c.Args[1])
	c.W.Int(int64(len(b)))
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
