package commands

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/limitkv/limitkv/engine"
)

// setCommands: the set commands. SPOP is as_is but replicates the SREM
// (or DEL) of what it chose, not itself (Ctx.replicateAs).
func setCommands() []*command {
	return []*command{
		cmd("sadd", -3, "write denyoom fast as_is", cmdSAdd),
		cmd("srem", -3, "write fast as_is", cmdSRem),
		cmd("scard", 2, "readonly fast", cmdSCard),
		cmd("sismember", 3, "readonly fast", cmdSIsMember),
		cmd("smismember", -3, "readonly fast", cmdSMIsMember),
		cmd("smembers", 2, "readonly", cmdSMembers),
		cmd("srandmember", -2, "readonly", cmdSRandMember),
		cmd("spop", -2, "write fast as_is", cmdSPop),
		cmd("smove", 4, "write fast as_is", cmdSMove),
		cmd("sscan", -3, "readonly", cmdSScan),
		cmd("sdiff", -2, "readonly", cmdSDiff),
		cmd("sinter", -2, "readonly", cmdSInter),
		cmd("sunion", -2, "readonly", cmdSUnion),
		cmd("sdiffstore", -3, "write denyoom as_is", cmdSDiffStore),
		cmd("sinterstore", -3, "write denyoom as_is", cmdSInterStore),
		cmd("sunionstore", -3, "write denyoom as_is", cmdSUnionStore),
		cmd("sintercard", -3, "readonly", cmdSInterCard),
	}
}

// The algebra (SINTER, SUNION, SDIFF, their STORE forms, SINTERCARD) runs
// as Redis runs it, in one pass over its inputs under the locks of their
// shards only: its time is linear in the sizes of the sets named, as
// Redis's is, while every other shard keeps serving (Redis stops the whole
// server for it). Its memory is the result's, which the inputs bound.

const (
	msgSpopCount       = "value is out of range, must be positive"
	msgSrandCountRange = "value is out of range, value must between -9223372036854775807 and 9223372036854775807"
	msgNumkeys         = "numkeys should be greater than 0"
	msgNumkeysArgs     = "Number of keys can't be greater than number of args"
	msgLimitNegative   = "ERR LIMIT can't be negative"
	msgReplyTooBig     = "reply would exceed the client output buffer limit"
)

// setAt looks key up for reading (counting a hit or miss) or writing. It
// replies WRONGTYPE and returns ok false on a key of another type; a
// missing key gives a nil set.
func (c *Ctx) setAt(key []byte, write bool) (*engine.Set, bool) {
	s := c.Shard(key)
	var st *engine.Set
	var err error
	if write {
		_, st, err = engine.Get[*engine.Set](s, c.DB, key, c.Now, engine.ForWrite)
	} else {
		_, st, err = engine.Get[*engine.Set](s, c.DB, key, c.Now, engine.ForRead)
	}
	if err != nil {
		c.Err(err)
		return nil, false
	}
	return st, true
}

// setChanged reports event on the set at key, found live earlier in this
// command, and records the change (setStored).
func (c *Ctx) setChanged(key []byte, st *engine.Set, event string) {
	c.notify(notifySet, event, key)
	c.setStored(key, st)
}

// setStored records a change to the set at key: the key goes when the set
// is empty, as in Redis, with "del". It finds the key again, since changes
// to other keys of its shard since then (another key of the command
// deleted) may have moved its entry.
func (c *Ctx) setStored(key []byte, st *engine.Set) {
	s := c.Shard(key)
	e, ok := s.Raw(c.DB, key)
	if !ok {
		return
	}
	if st.Len() == 0 {
		s.DeleteEntry(e)
		c.notify(notifyGeneric, "del", key)
	} else {
		st.Fit()
		s.Touch(e)
	}
}

// storeSet makes st the value of key (no TTL), or deletes key when st is
// empty, as the STORE commands do, reports event or "del", and replies
// with st's size.
func (c *Ctx) storeSet(key []byte, st *engine.Set, event string) {
	if st.Len() == 0 {
		c.W.Int(0)
		c.deleteStored(key)
		return
	}
	st.Fit()
	c.storeObject(key, engine.KindSet, st)
	c.W.Int(int64(st.Len()))
	c.notify(notifySet, event, key)
}

// storeObject makes obj the value of key, with no TTL, as Redis's setKey:
// a key past its TTL expires first, so that the value stored is new.
func (c *Ctx) storeObject(key []byte, kind engine.Kind, obj any) {
	s := c.Shard(key)
	s.Find(c.DB, key, c.Now)
	s.SetObject(c.DB, key, kind, obj, 0)
}

// deleteStored deletes the destination of a STORE whose result is empty,
// reporting "del" if there was one. Redis deletes it without a look at its
// TTL: a key past it, not yet expired, goes with "del" too.
func (c *Ctx) deleteStored(key []byte) {
	s := c.Shard(key)
	if e, ok := s.Raw(c.DB, key); ok {
		s.DeleteEntry(e)
		c.notify(notifyGeneric, "del", key)
	}
}

func cmdSAdd(c *Ctx) {
	key := c.Args[1]
	st, ok := c.setAt(key, true)
	if !ok {
		return
	}
	created := st == nil
	if created {
		st = engine.NewSet()
	}
	lim := c.Srv.Cfg.SetLimits()
	var added int64
	for _, m := range c.Args[2:] {
		if st.Add(m, lim) {
			added++
		}
	}
	switch {
	case created:
		st.Fit()
		c.Shard(key).SetObject(c.DB, key, engine.KindSet, st, 0)
		c.notify(notifySet, "sadd", key)
	case added > 0:
		c.setChanged(key, st, "sadd")
	}
	c.W.Int(added)
}

func cmdSRem(c *Ctx) {
	key := c.Args[1]
	st, ok := c.setAt(key, true)
	if !ok {
		return
	}
	var removed int64
	if st != nil {
		for _, m := range c.Args[2:] {
			if st.Remove(m) {
				removed++
				if st.Len() == 0 {
					break
				}
			}
		}
		if removed > 0 {
			c.setChanged(key, st, "srem")
		}
	}
	c.W.Int(removed)
}

func cmdSCard(c *Ctx) {
	st, ok := c.setAt(c.Args[1], false)
	if !ok {
		return
	}
	var n int
	if st != nil {
		n = st.Len()
	}
	c.W.Int(int64(n))
}

func cmdSIsMember(c *Ctx) {
	st, ok := c.setAt(c.Args[1], false)
	if ok {
		c.W.Int(b2i(st != nil && st.Has(c.Args[2])))
	}
}

func cmdSMIsMember(c *Ctx) {
	st, ok := c.setAt(c.Args[1], false)
	if !ok {
		return
	}
	c.W.Array(len(c.Args) - 2)
	for _, m := range c.Args[2:] {
		c.W.Int(b2i(st != nil && st.Has(m)))
	}
}

func cmdSMembers(c *Ctx) {
	st, ok := c.setAt(c.Args[1], false)
	if !ok {
		return
	}
	if st == nil {
		c.W.Set(0)
		return
	}
	replyMembers(c, st)
}

// replyMembers replies with every member of st, as a set.
func replyMembers(c *Ctx, st *engine.Set) {
	c.W.Set(st.Len())
	for m := range st.All() {
		c.W.Bulk(m)
	}
}

func cmdSMove(c *Ctx) {
	src, dst, m := c.Args[1], c.Args[2], c.Args[3]
	// Redis looks both up, answers 0 for a missing source before it checks
	// either type, and then checks the source's first.
	ss, serr := c.findSet(src)
	c.flushNotes(c.Shard(src))
	ds, derr := c.findSet(dst)
	c.flushNotes(c.Shard(dst))
	switch {
	case ss == nil && serr == nil:
		c.W.Int(0)
		return
	case serr != nil:
		c.Err(serr)
		return
	case derr != nil:
		c.Err(derr)
		return
	}
	if string(src) == string(dst) {
		c.W.Int(b2i(ss.Has(m)))
		return
	}
	if !ss.Remove(m) {
		c.W.Int(0)
		return
	}
	c.setChanged(src, ss, "srem")
	if ds == nil {
		ds = engine.NewSet()
		ds.Add(m, c.Srv.Cfg.SetLimits())
		c.Shard(dst).SetObject(c.DB, dst, engine.KindSet, ds, 0)
		c.notify(notifySet, "sadd", dst)
	} else if ds.Add(m, c.Srv.Cfg.SetLimits()) {
		c.setChanged(dst, ds, "sadd")
	}
	c.W.Int(1)
}

// findSet finds the set at key for a write, without replying.
func (c *Ctx) findSet(key []byte) (*engine.Set, error) {
	_, st, err := engine.Get[*engine.Set](c.Shard(key), c.DB, key, c.Now, engine.ForWrite)
	return st, err
}

func cmdSRandMember(c *Ctx) {
	if len(c.Args) > 3 {
		c.W.Error(msgSyntax)
		return
	}
	if len(c.Args) == 2 {
		st, ok := c.setAt(c.Args[1], false)
		if !ok {
			return
		}
		if st == nil {
			c.W.Null()
			return
		}
		c.W.Bulk(st.Random(c.buf[:0]))
		return
	}
	n, ok := c.Int(2)
	if !ok {
		return
	}
	if n == math.MinInt64 {
		c.W.Error(msgSrandCountRange)
		return
	}
	st, ok := c.setAt(c.Args[1], false)
	if !ok {
		return
	}
	if st == nil || n == 0 {
		c.W.Array(0)
		return
	}
	if n < 0 || n == 1 {
		// Repeats allowed: as many as asked, so the reply's size is the
		// client's to choose; it is bounded as Redis bounds it, by the
		// client's output buffer limit (and proto-max-bulk-len when its
		// class has none), refused at once when even the smallest members
		// could not fit.
		count := uint64(n)
		if n < 0 {
			count = uint64(-n)
		}
		budget := c.replyBudget()
		if count > uint64(budget)/6 {
			c.replyTooBig()
			return
		}
		start := c.W.Len()
		c.W.Array(int(count))
		for i := uint64(0); i < count; i++ {
			c.W.Bulk(st.Random(c.buf[:0]))
			if i%1024 == 1023 && c.W.Len()-start > budget {
				c.W.Truncate(start)
				c.replyTooBig()
				return
			}
		}
		return
	}
	if n >= int64(st.Len()) {
		c.W.Array(st.Len())
		for m := range st.All() {
			c.W.Bulk(m)
		}
		return
	}
	// Sample may give the members in the set's order: the reply shuffles
	// them, as Redis's comes in the order of a new hash table.
	var flat []byte
	ends := make([]int, 0, n)
	st.Sample(int(n), func(m []byte) {
		flat = append(flat, m...)
		ends = append(ends, len(flat))
	})
	c.W.Array(len(ends))
	for _, i := range rand.Perm(len(ends)) {
		start := 0
		if i > 0 {
			start = ends[i-1]
		}
		c.W.Bulk(flat[start:ends[i]])
	}
}

// replyBudget is the most bytes a reply whose size the client chooses may
// take: its class's hard output limit, at most proto-max-bulk-len.
func (c *Ctx) replyBudget() int {
	budget := c.maxStringLen()
	if cl := c.Client; cl != nil && cl.conn != nil {
		if h := c.Srv.Net.Limits.Output(cl.conn.Class()).Hard; h > 0 && h < budget {
			budget = h
		}
	}
	return int(min(budget, math.MaxInt32*8))
}

// replyTooBig answers a reply past replyBudget with an error and closes
// the connection after it, as Redis closes a client whose output passes
// its limit.
func (c *Ctx) replyTooBig() {
	c.W.Error(msgReplyTooBig)
	if cl := c.Client; cl != nil && cl.conn != nil && !c.held {
		cl.conn.CloseAfterReply()
	}
}

func cmdSPop(c *Ctx) {
	key := c.Args[1]
	if len(c.Args) > 3 {
		c.W.Error(msgSyntax)
		return
	}
	if len(c.Args) == 2 {
		st, ok := c.setAt(key, true)
		if !ok {
			return
		}
		if st == nil {
			c.W.Null()
			return
		}
		m := st.Pop(nil)
		c.setChanged(key, st, "spop")
		c.replicateAs([]byte("SREM"), key, m)
		c.W.Bulk(m)
		return
	}
	n, ok := engine.ParseInt(c.Args[2])
	if !ok || n < 0 {
		c.W.Error(msgSpopCount)
		return
	}
	st, ok := c.setAt(key, true)
	if !ok {
		return
	}
	if st == nil || n == 0 {
		c.W.Set(0)
		return
	}
	c.notify(notifySet, "spop", key)
	if n >= int64(st.Len()) {
		// The whole set: replicas delete the key.
		replyMembers(c, st)
		c.Shard(key).Delete(c.DB, key, c.Now)
		c.notify(notifyGeneric, "del", key)
		c.replicateAs([]byte("DEL"), key)
		return
	}
	size := int64(st.Len())
	c.W.Set(int(n))
	repl := make([][]byte, 2, 2+n)
	repl[0], repl[1] = []byte("SREM"), key
	st.PopN(int(n), func(m []byte) { repl = append(repl, m) })
	// PopN may give the members in the set's order: the reply shuffles them.
	popped := repl[2:]
	rand.Shuffle(len(popped), func(i, j int) { popped[i], popped[j] = popped[j], popped[i] })
	for _, m := range popped {
		c.W.Bulk(m)
	}
	// The pop replicates as its effect, once the change is logged (which
	// replicateAs then takes, so that SPOP itself is not sent as well).
	defer c.replicateAs(repl...)
	if !st.IsIntset() && (size-n)*5 <= n {
		// Redis pops most of a set by building a new one from the
		// members it keeps, which is an intset again if they allow it.
		rebuilt := engine.NewSet()
		lim := c.Srv.Cfg.SetLimits()
		for m := range st.All() {
			rebuilt.Add(m, lim)
		}
		if rebuilt.IsIntset() {
			s := c.Shard(key)
			e, _ := s.Raw(c.DB, key)
			rebuilt.Fit()
			s.SetObject(c.DB, key, engine.KindSet, rebuilt, e.ExpireAt())
			return
		}
	}
	c.setStored(key, st) // "spop" went first, as in Redis
}

func cmdSScan(c *Ctx) {
	cursor, ok := c.cursorAt(2)
	if !ok {
		return
	}
	st, ok := c.setAt(c.Args[1], false)
	if !ok {
		return
	}
	if st == nil {
		c.emptyScan()
		return
	}
	_, o, ok := c.parseScan(2, false)
	if !ok {
		return
	}
	// The members point into the set, which nothing changes before the
	// reply is written, except an intset's, formatted into one buffer.
	var stack [16][]byte
	var ints []byte
	members := stack[:0]
	next := st.Scan(cursor, o.count, func(m []byte) {
		if o.matchAll || engine.Match(o.match, m, false) {
			if st.IsIntset() {
				n := len(ints)
				ints = append(ints, m...)
				m = ints[n:len(ints):len(ints)]
			}
			members = append(members, m)
		}
	})
	if st.IsIntset() {
		// ints may have moved as it grew: cut the members out again.
		off := 0
		for i, m := range members {
			members[i] = ints[off : off+len(m)]
			off += len(m)
		}
	}
	var buf [20]byte
	c.W.Array(2)
	c.W.Bulk(strconv.AppendUint(buf[:0], next, 10))
	c.W.Array(len(members))
	for _, m := range members {
		c.W.Bulk(m)
	}
}

// setsAt looks up the sets at keys for reading, in order; a missing key
// gives nil. It replies WRONGTYPE at the first key of another type, as
// Redis checks every key before it computes.
func (c *Ctx) setsAt(keys [][]byte) ([]*engine.Set, bool) {
	sets := make([]*engine.Set, len(keys))
	for i, k := range keys {
		st, ok := c.setAt(k, false)
		c.flushNotes(c.Shard(k))
		if !ok {
			return nil, false
		}
		sets[i] = st
	}
	return sets, true
}

func cmdSInter(c *Ctx) {
	sets, ok := c.setsAt(c.Args[1:])
	if !ok {
		return
	}
	if slices.Contains(sets, nil) {
		c.W.Set(0)
		return
	}
	// The size comes first: gather the members (they point into the sets,
	// an intset's are copied into one buffer), then reply.
	var flat []byte
	var ends []int
	engine.InterSets(sets, func(m []byte) bool {
		flat = append(flat, m...)
		ends = append(ends, len(flat))
		return true
	})
	c.W.Set(len(ends))
	start := 0
	for _, e := range ends {
		c.W.Bulk(flat[start:e])
		start = e
	}
}

func cmdSInterStore(c *Ctx) {
	sets, ok := c.setsAt(c.Args[2:])
	if !ok {
		return
	}
	res := engine.NewSet()
	if !slices.Contains(sets, nil) {
		lim := c.Srv.Cfg.SetLimits()
		engine.InterSets(sets, func(m []byte) bool {
			res.Add(m, lim)
			return true
		})
	}
	c.storeSet(c.Args[1], res, "sinterstore")
}

func cmdSInterCard(c *Ctx) {
	numkeys, ok := engine.ParseInt(c.Args[1])
	if !ok || numkeys < 1 {
		c.W.Error(msgNumkeys)
		return
	}
	if numkeys > int64(len(c.Args)-2) {
		c.W.Error(msgNumkeysArgs)
		return
	}
	var limit int64
	for j := 2 + int(numkeys); j < len(c.Args); j++ {
		if is(c.Args[j], "LIMIT") && j+1 < len(c.Args) {
			j++
			n, ok := engine.ParseInt(c.Args[j])
			if !ok || n < 0 {
				c.W.Error(msgLimitNegative)
				return
			}
			limit = n
			continue
		}
		c.W.Error(msgSyntax)
		return
	}
	sets, ok := c.setsAt(c.Args[2 : 2+numkeys])
	if !ok {
		return
	}
	var n int64
	if !slices.Contains(sets, nil) {
		engine.InterSets(sets, func([]byte) bool {
			n++
			return limit == 0 || n < limit
		})
	}
	c.W.Int(n)
}

func cmdSUnion(c *Ctx)      { setAlgebra(c, "", engine.UnionSets) }
func cmdSUnionStore(c *Ctx) { setAlgebra(c, "sunionstore", engine.UnionSets) }
func cmdSDiff(c *Ctx)       { setAlgebra(c, "", engine.DiffSets) }
func cmdSDiffStore(c *Ctx)  { setAlgebra(c, "sdiffstore", engine.DiffSets) }

// setAlgebra runs SUNION, SDIFF and their STORE forms (storeEvent names
// one): op computes the result from the sets named, which it replies or
// stores.
func setAlgebra(c *Ctx, storeEvent string, op func([]*engine.Set, engine.SetLimits) *engine.Set) {
	store := storeEvent != ""
	keys := c.Args[1:]
	if store {
		keys = c.Args[2:]
	}
	sets, ok := c.setsAt(keys)
	if !ok {
		return
	}
	res := op(sets, c.Srv.Cfg.SetLimits())
	if store {
		c.storeSet(c.Args[1], res, storeEvent)
		return
	}
	replyMembers(c, res)
}
