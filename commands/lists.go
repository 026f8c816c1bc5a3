package commands

import (
	"strconv"
	"time"

	"github.com/limitkv/limitkv/engine"
)

// listCommands: the list commands, the blocking pops included.
func listCommands() []*command {
	return []*command{
		cmd("lpush", -3, "write denyoom fast as_is", cmdLPush),
		cmd("rpush", -3, "write denyoom fast as_is", cmdRPush),
		cmd("lpushx", -3, "write denyoom fast as_is", cmdLPushX),
		cmd("rpushx", -3, "write denyoom fast as_is", cmdRPushX),
		cmd("lpop", -2, "write fast as_is", cmdLPop),
		cmd("rpop", -2, "write fast as_is", cmdRPop),
		cmd("lindex", 3, "readonly", cmdLIndex),
		cmd("llen", 2, "readonly fast", cmdLLen),
		cmd("lrange", 4, "readonly", cmdLRange),
		cmd("ltrim", 4, "write as_is", cmdLTrim),
		cmd("lset", 4, "write denyoom as_is", cmdLSet),
		cmd("lrem", 4, "write as_is", cmdLRem),
		cmd("linsert", 5, "write denyoom as_is", cmdLInsert),
		cmd("lpos", -3, "readonly", cmdLPos),
		cmd("lmove", 5, "write denyoom as_is", cmdLMove),
		cmd("rpoplpush", 3, "write denyoom as_is", cmdRPopLPush),
		cmd("blpop", -3, "write noscript blocking", cmdBLPop),
		cmd("brpop", -3, "write noscript blocking", cmdBRPop),
		cmd("brpoplpush", 4, "write denyoom noscript blocking", cmdBRPopLPush),
		cmd("blmove", 6, "write denyoom noscript blocking", cmdBLMove),
		cmd("blmpop", -5, "write blocking", cmdBLMPop),
		cmd("lmpop", -4, "write", cmdLMPop),
	}
}

// The blocking pops wait in blocking.go.
//
// Redis's order of checks is kept: arguments that need no key are parsed
// first (LRANGE's indexes, LPOP's count, LPOS's options...), except where
// Redis looks the key up first (LINDEX and LSET parse the index after the
// type check). Reads look keys up with Lookup, which counts keyspace hits
// and misses; writes with Find, which does not, as in Redis.

const msgMustBePositive = "value is out of range, must be positive"

// listChanged records a change to the list under e, deleting the key when
// the list is left empty, as Redis never keeps an empty list: event, then
// "del" if it went.
func listChanged(c *Ctx, s *engine.Shard, e engine.Entry, key []byte, l *engine.List, event string) {
	c.notify(notifyList, event, key)
	if l.Len() == 0 {
		s.DeleteEntry(e)
		c.notify(notifyGeneric, "del", key)
	} else {
		s.Touch(e)
	}
}

func pushEvent(head bool) string {
	if head {
		return "lpush"
	}
	return "rpush"
}

func popEvent(head bool) string {
	if head {
		return "lpop"
	}
	return "rpop"
}

func cmdLPush(c *Ctx)  { push(c, true, false) }
func cmdRPush(c *Ctx)  { push(c, false, false) }
func cmdLPushX(c *Ctx) { push(c, true, true) }
func cmdRPushX(c *Ctx) { push(c, false, true) }

// push adds the elements one by one at the head or the tail, creating the
// list unless onlyExisting (the X variants), and replies with the length.
func push(c *Ctx, head, onlyExisting bool) {
	key := c.Args[1]
	s := c.Shard(key)
	e, l, ok := typed[*engine.List](c, s, key, engine.ForWrite)
	if !ok {
		return
	}
	found := l != nil
	if !found {
		if onlyExisting {
			c.W.Int(0)
			return
		}
		l = engine.NewList()
	}
	for _, v := range c.Args[2:] {
		if head {
			l.PushHead(v)
		} else {
			l.PushTail(v)
		}
	}
	if found {
		s.Touch(e)
	} else {
		s.SetObject(c.DB, key, engine.KindList, l, 0)
	}
	c.notify(notifyList, pushEvent(head), key)
	c.W.Int(int64(l.Len()))
}

func cmdLPop(c *Ctx) { pop(c, true) }
func cmdRPop(c *Ctx) { pop(c, false) }

// pop implements LPOP and RPOP: one element as a bulk string, or with a
// count an array of up to count elements.
func pop(c *Ctx, head bool) {
	// The table's arity (-2) admits any number of arguments; like Redis,
	// the handler refuses more than a count with the arity error.
	if len(c.Args) > 3 {
		c.W.Error("wrong number of arguments for '" + c.Spec.FullName() + "' command")
		return
	}
	hasCount := len(c.Args) == 3
	count := 1
	if hasCount {
		n, ok := engine.ParseInt(c.Args[2])
		if !ok || n < 0 {
			c.W.Error(msgMustBePositive)
			return
		}
		count = int(n)
	}
	key := c.Args[1]
	s := c.Shard(key)
	e, l, ok := typed[*engine.List](c, s, key, engine.ForWrite)
	switch {
	case !ok:
		return
	case l == nil && hasCount:
		c.W.NullArray()
		return
	case l == nil:
		c.W.Null()
		return
	case count == 0:
		c.W.Array(0)
		return
	}
	n := l.Len()
	count = min(count, n)
	if hasCount {
		c.W.Array(count)
	}
	replyAndCut(c, l, head, count)
	listChanged(c, s, e, key, l, popEvent(head))
}

// replyAndCut writes count elements from one end of l straight from the
// list, then cuts them in one go.
func replyAndCut(c *Ctx, l *engine.List, head bool, count int) {
	n := l.Len()
	if head {
		for i, v := range l.Ascend(0, c.buf[:0]) {
			if i == count {
				break
			}
			c.W.Bulk(v)
		}
		l.RemoveRange(0, count)
		return
	}
	for i, v := range l.Descend(n-1, c.buf[:0]) {
		if i < n-count {
			break
		}
		c.W.Bulk(v)
	}
	l.RemoveRange(n-count, count)
}

// listIndex turns a Redis index (negative counts from the tail) into a
// position, reporting whether it falls inside a list of n elements.
func listIndex(i int64, n int) (int, bool) {
	if i < 0 {
		i += int64(n)
	}
	return int(i), i >= 0 && i < int64(n)
}

func cmdLIndex(c *Ctx) {
	key := c.Args[1]
	s := c.Shard(key)
	_, l, ok := typed[*engine.List](c, s, key, engine.ForRead)
	if !ok {
		return
	}
	if l == nil {
		c.W.Null()
		return
	}
	idx, ok := c.Int(2)
	if !ok {
		return
	}
	i, in := listIndex(idx, l.Len())
	if !in {
		c.W.Null()
		return
	}
	v, _ := l.Index(i, c.buf[:0])
	c.W.Bulk(v)
}

func cmdLLen(c *Ctx) {
	key := c.Args[1]
	_, l, ok := typed[*engine.List](c, c.Shard(key), key, engine.ForRead)
	switch {
	case !ok:
	case l == nil:
		c.W.Int(0)
	default:
		c.W.Int(int64(l.Len()))
	}
}

// listRange clips Redis's start and stop indexes to a list of n elements,
// as LRANGE and LTRIM do, and reports whether anything is left.
func listRange(start, stop int64, n int) (int, int, bool) {
	ln := int64(n)
	if start < 0 {
		start += ln
	}
	if stop < 0 {
		stop += ln
	}
	start = max(start, 0)
	if start > stop || start >= ln {
		return 0, -1, false
	}
	stop = min(stop, ln-1)
	return int(start), int(stop), true
}

func cmdLRange(c *Ctx) {
	start, ok := c.Int(2)
	if !ok {
		return
	}
	stop, ok := c.Int(3)
	if !ok {
		return
	}
	key := c.Args[1]
	_, l, ok := typed[*engine.List](c, c.Shard(key), key, engine.ForRead)
	if !ok {
		return
	}
	if l == nil {
		c.W.Array(0)
		return
	}
	from, to, nonEmpty := listRange(start, stop, l.Len())
	if !nonEmpty {
		c.W.Array(0)
		return
	}
	c.W.Array(to - from + 1)
	for i, v := range l.Ascend(from, c.buf[:0]) {
		if i > to {
			break
		}
		c.W.Bulk(v)
	}
}

func cmdLTrim(c *Ctx) {
	start, ok := c.Int(2)
	if !ok {
		return
	}
	stop, ok := c.Int(3)
	if !ok {
		return
	}
	key := c.Args[1]
	s := c.Shard(key)
	e, l, ok := typed[*engine.List](c, s, key, engine.ForWrite)
	if !ok {
		return
	}
	if l != nil {
		n := l.Len()
		from, to, nonEmpty := listRange(start, stop, n)
		if nonEmpty {
			l.RemoveRange(to+1, n-to-1)
			l.RemoveRange(0, from)
		} else {
			l.RemoveRange(0, n)
		}
		// Redis signals the key as modified, and reports "ltrim", even
		// when nothing was trimmed.
		listChanged(c, s, e, key, l, "ltrim")
	}
	c.W.OK()
}

func cmdLSet(c *Ctx) {
	key := c.Args[1]
	s := c.Shard(key)
	e, l, ok := typed[*engine.List](c, s, key, engine.ForWrite)
	if !ok {
		return
	}
	if l == nil {
		c.W.Error(msgNoSuchKey)
		return
	}
	idx, ok := c.Int(2)
	if !ok {
		return
	}
	i, in := listIndex(idx, l.Len())
	if !in {
		c.W.Error(msgOutOfRange)
		return
	}
	l.Set(i, c.Args[3])
	s.Touch(e)
	c.notify(notifyList, "lset", key)
	c.W.OK()
}

func cmdLRem(c *Ctx) {
	count, ok := c.Int(2)
	if !ok {
		return
	}
	key := c.Args[1]
	s := c.Shard(key)
	e, l, ok := typed[*engine.List](c, s, key, engine.ForWrite)
	if !ok {
		return
	}
	removed := 0
	if l != nil {
		if removed = l.Remove(c.Args[3], int(count)); removed > 0 {
			listChanged(c, s, e, key, l, "lrem")
		}
	}
	c.W.Int(int64(removed))
}

func cmdLInsert(c *Ctx) {
	var after bool
	switch w := c.Args[2]; {
	case is(w, "BEFORE"):
	case is(w, "AFTER"):
		after = true
	default:
		c.W.Error(msgSyntax)
		return
	}
	key := c.Args[1]
	s := c.Shard(key)
	e, l, ok := typed[*engine.List](c, s, key, engine.ForWrite)
	switch {
	case !ok:
	case l == nil:
		c.W.Int(0)
	case !l.Insert(c.Args[3], c.Args[4], after):
		c.W.Int(-1)
	default:
		s.Touch(e)
		c.notify(notifyList, "linsert", key)
		c.W.Int(int64(l.Len()))
	}
}

// lposOptions are LPOS's RANK, COUNT and MAXLEN; count is -1 when COUNT was
// not given.
type lposOptions struct {
	rank, count, maxlen int64
}

func parseLPos(c *Ctx) (lposOptions, bool) {
	o := lposOptions{rank: 1, count: -1}
	var ok bool
	for j := 3; j < len(c.Args); j++ {
		a := c.Args[j]
		hasNext := j+1 < len(c.Args)
		switch {
		case is(a, "RANK") && hasNext:
			j++
			n, ok := c.Int(j)
			if !ok {
				return o, false
			}
			if n == 0 {
				c.W.Error("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list")
				return o, false
			}
			o.rank = n
		case is(a, "COUNT") && hasNext:
			j++
			if o.count, ok = nonNegative(c, j, "ERR COUNT can't be negative"); !ok {
				return o, false
			}
		case is(a, "MAXLEN") && hasNext:
			j++
			if o.maxlen, ok = nonNegative(c, j, "ERR MAXLEN can't be negative"); !ok {
				return o, false
			}
		default:
			c.W.Error(msgSyntax)
			return o, false
		}
	}
	return o, true
}

// nonNegative reads argument j as an integer of at least 0; anything else,
// a non-number included, answers msg (Redis's getPositiveLong...OrReply).
func nonNegative(c *Ctx, j int, msg string) (int64, bool) {
	n, ok := engine.ParseInt(c.Args[j])
	if !ok || n < 0 {
		c.W.Error(msg)
		return 0, false
	}
	return n, true
}

func cmdLPos(c *Ctx) {
	o, ok := parseLPos(c)
	if !ok {
		return
	}
	key := c.Args[1]
	_, l, ok := typed[*engine.List](c, c.Shard(key), key, engine.ForRead)
	switch {
	case !ok:
		return
	case l == nil && o.count >= 0:
		c.W.Array(0)
		return
	case l == nil:
		c.W.Null()
		return
	}
	// A negative rank searches from the tail. Redis negates it in a C long,
	// so RANK -9223372036854775808 stays negative and matches from the
	// first hit on; int64 arithmetic wraps the same way.
	rank, fromTail := o.rank, false
	if rank < 0 {
		rank, fromTail = -rank, true
	}
	maxlen := int(min(o.maxlen, int64(l.Len())))
	var found [16]int64
	matches := found[:0]
	var seen int64
	for i := range l.Positions(c.Args[2], fromTail, maxlen) {
		seen++
		if seen < rank {
			continue
		}
		matches = append(matches, int64(i))
		if o.count < 0 || (o.count > 0 && seen-rank+1 >= o.count) {
			break
		}
	}
	switch {
	case o.count >= 0:
		c.W.Array(len(matches))
		for _, i := range matches {
			c.W.Int(i)
		}
	case len(matches) > 0:
		c.W.Int(matches[0])
	default:
		c.W.Null()
	}
}

// listEnd parses LMOVE's LEFT or RIGHT; LEFT is the head.
func listEnd(b []byte) (head, ok bool) {
	switch {
	case is(b, "LEFT"):
		return true, true
	case is(b, "RIGHT"):
		return false, true
	}
	return false, false
}

func cmdLMove(c *Ctx) {
	from, ok1 := listEnd(c.Args[3])
	to, ok2 := listEnd(c.Args[4])
	if !ok1 || !ok2 {
		c.W.Error(msgSyntax)
		return
	}
	move(c, from, to)
}

func cmdRPopLPush(c *Ctx) { move(c, false, true) }

// move pops an element from one end of the source list and pushes it at an
// end of the destination, which may be the same list (a rotation) or a key
// in another shard (dispatch holds both locks).
func move(c *Ctx, fromHead, toHead bool) {
	src, dst := c.Args[1], c.Args[2]
	ss, ds := c.Shard(src), c.Shard(dst)
	_, sl, ok := typed[*engine.List](c, ss, src, engine.ForWrite)
	if !ok {
		return
	}
	if sl == nil {
		c.W.Null()
		return
	}
	de, dl, ok := typed[*engine.List](c, ds, dst, engine.ForWrite)
	if !ok {
		return
	}
	var v []byte
	if fromHead {
		v, _ = sl.PopHead(c.buf[:0])
	} else {
		v, _ = sl.PopTail(c.buf[:0])
	}
	created := dl == nil
	if created {
		dl = engine.NewList()
	}
	if toHead {
		dl.PushHead(v)
	} else {
		dl.PushTail(v)
	}
	if created {
		ds.SetObject(c.DB, dst, engine.KindList, dl, 0)
	} else {
		ds.Touch(de)
	}
	// Redis reports the push before the pop.
	c.notify(notifyList, pushEvent(toHead), dst)
	// Looking up or creating the destination may have changed the source's
	// shard, which invalidates its entry: find it again.
	se, _ := ss.Find(c.DB, src, c.Now)
	listChanged(c, ss, se, src, sl, popEvent(fromHead))
	c.W.Bulk(v)
}

func cmdBLPop(c *Ctx) { blockingListPop(c, true) }

func cmdBRPop(c *Ctx) { blockingListPop(c, false) }

func blockingListPop(c *Ctx, head bool) {
	n := len(c.Args)
	timeout, ok := c.blockTimeout(c.Args[n-1])
	if !ok {
		return
	}
	listPopOrBlock(c, c.Args[1:n-1], head, -1, opPop, timeout)
}

// listPopOrBlock pops from the first of keys that holds a list, or blocks
// on them all.
func listPopOrBlock(c *Ctx, keys [][]byte, head bool, count int64, op blockOp, timeout time.Duration) {
	for _, key := range keys {
		s := c.Shard(key)
		e, l, ok := typed[*engine.List](c, s, key, engine.ForWrite)
		if !ok {
			return
		}
		if l == nil || l.Len() == 0 {
			continue
		}
		c.replicateAs(listPop(c, s, e, key, head, count)...)
		return
	}
	if !c.mayBlock() {
		c.W.NullArray()
		return
	}
	c.block(&waiter{op: op, head: head, count: count}, engine.KindList, keys, timeout)
}

func cmdBLMove(c *Ctx) {
	from, ok1 := listEnd(c.Args[3])
	if !ok1 {
		c.W.Error(msgSyntax)
		return
	}
	to, ok2 := listEnd(c.Args[4])
	if !ok2 {
		c.W.Error(msgSyntax)
		return
	}
	timeout, ok := c.blockTimeout(c.Args[5])
	if !ok {
		return
	}
	blockingMove(c, from, to, timeout)
}

func cmdBRPopLPush(c *Ctx) {
	timeout, ok := c.blockTimeout(c.Args[3])
	if !ok {
		return
	}
	blockingMove(c, false, true, timeout)
}

func blockingMove(c *Ctx, from, to bool, timeout time.Duration) {
	src := c.Args[1]
	_, l, ok := typed[*engine.List](c, c.Shard(src), src, engine.ForWrite)
	if !ok {
		return
	}
	if l == nil {
		if !c.mayBlock() {
			c.W.Null()
			return
		}
		c.block(&waiter{op: opMove, head: from, to: to}, engine.KindList, c.Args[1:2], timeout)
		return
	}
	n := c.W.Len()
	move(c, from, to)
	if c.W.Bytes()[n] != '-' {
		w := waiter{spec: c.Spec, args: c.Args, head: from, to: to}
		c.replicateAs(moveCommand(&w)...)
	}
}

// mpopArgs parses LMPOP's and ZMPOP's arguments from numkeys at index i:
// the keys, the end (LEFT/MIN true) and the count, as Redis checks them.
func mpopArgs(c *Ctx, i int, ends [2]string) (keys [][]byte, first bool, count int64, ok bool) {
	numkeys, isInt := engine.ParseInt(c.Args[i])
	if !isInt || numkeys <= 0 {
		c.W.Error("numkeys should be greater than 0")
		return nil, false, 0, false
	}
	where := i + 1 + int(min(numkeys, int64(len(c.Args))))
	if numkeys >= int64(len(c.Args)) || where >= len(c.Args) {
		c.W.Error(msgSyntax)
		return nil, false, 0, false
	}
	switch a := c.Args[where]; {
	case is(a, ends[0]):
		first = true
	case is(a, ends[1]):
	default:
		c.W.Error(msgSyntax)
		return nil, false, 0, false
	}
	count = -1
	for j := where + 1; j < len(c.Args); j++ {
		if count == -1 && is(c.Args[j], "COUNT") && j+1 < len(c.Args) {
			j++
			n, isInt := engine.ParseInt(c.Args[j])
			if !isInt || n <= 0 {
				c.W.Error("count should be greater than 0")
				return nil, false, 0, false
			}
			count = n
			continue
		}
		c.W.Error(msgSyntax)
		return nil, false, 0, false
	}
	if count == -1 {
		count = 1
	}
	return c.Args[i+1 : where], first, count, true
}

func cmdLMPop(c *Ctx) {
	keys, head, count, ok := mpopArgs(c, 1, [2]string{"LEFT", "RIGHT"})
	if !ok {
		return
	}
	for _, key := range keys {
		s := c.Shard(key)
		e, l, ok := typed[*engine.List](c, s, key, engine.ForWrite)
		if !ok {
			return
		}
		if l == nil || l.Len() == 0 {
			continue
		}
		c.replicateAs(listPop(c, s, e, key, head, count)...)
		return
	}
	c.W.NullArray()
}

func cmdBLMPop(c *Ctx) {
	keys, head, count, ok := mpopArgs(c, 2, [2]string{"LEFT", "RIGHT"})
	if !ok {
		return
	}
	timeout, ok := c.blockTimeout(c.Args[1])
	if !ok {
		return
	}
	listPopOrBlock(c, keys, head, count, opMPop, timeout)
}

// listPop pops from the list under e, found non-empty: one element, replied
// as [key, element] (count -1), or up to count, as [key, [elements]]. It
// returns the command that does the same, for replication.
func listPop(c *Ctx, s *engine.Shard, e engine.Entry, key []byte, head bool, count int64) [][]byte {
	l := s.Object(e).(*engine.List)
	name := []byte("RPOP")
	if head {
		name = []byte("LPOP")
	}
	c.W.Array(2)
	c.W.Bulk(key)
	if count < 0 {
		var v []byte
		if head {
			v, _ = l.PopHead(c.buf[:0])
		} else {
			v, _ = l.PopTail(c.buf[:0])
		}
		c.W.Bulk(v)
		listChanged(c, s, e, key, l, popEvent(head))
		return [][]byte{name, key}
	}
	n := l.Len()
	k := int(min(count, int64(n)))
	c.W.Array(k)
	replyAndCut(c, l, head, k)
	listChanged(c, s, e, key, l, popEvent(head))
	return [][]byte{name, key, strconv.AppendInt(nil, int64(k), 10)}
}
