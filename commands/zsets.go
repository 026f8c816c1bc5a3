package commands

import (
	"strconv"
	"time"

	"github.com/limitkv/limitkv/engine"
)

// zsetCommands: the sorted-set commands, the blocking pops included
// (their wait: blocking.go).
func zsetCommands() []*command {
	return []*command{
		cmd("zadd", -4, "write denyoom fast as_is", cmdZAdd),
		cmd("zrem", -3, "write fast as_is", cmdZRem),
		cmd("zcard", 2, "readonly fast", cmdZCard),
		cmd("zcount", 4, "readonly fast", cmdZCount),
		cmd("zscore", 3, "readonly fast", cmdZScore),
		cmd("zmscore", -3, "readonly fast", cmdZMScore),
		cmd("zincrby", 4, "write denyoom fast as_is", cmdZIncrBy),
		cmd("zrank", 3, "readonly fast", cmdZRank),
		cmd("zrevrank", 3, "readonly fast", cmdZRevRank),
		cmd("zrange", -4, "readonly", cmdZRange),
		cmd("zrangebyscore", -4, "readonly", cmdZRangeByScore),
		cmd("zrevrangebyscore", -4, "readonly", cmdZRevRangeByScore),
		cmd("zrevrange", -4, "readonly", cmdZRevRange),
		cmd("zrangebylex", -4, "readonly", cmdZRangeByLex),
		cmd("zrevrangebylex", -4, "readonly", cmdZRevRangeByLex),
		cmd("zlexcount", 4, "readonly fast", cmdZLexCount),
		cmd("zremrangebyscore", 4, "write as_is", cmdZRemRangeByScore),
		cmd("zremrangebyrank", 4, "write as_is", cmdZRemRangeByRank),
		cmd("zremrangebylex", 4, "write as_is", cmdZRemRangeByLex),
		cmd("zpopmin", -2, "write fast as_is", cmdZPopMin),
		cmd("zpopmax", -2, "write fast as_is", cmdZPopMax),
		cmd("zscan", -3, "readonly", cmdZScan),
		cmd("zrangestore", -5, "write denyoom as_is", cmdZRangeStore),
		cmd("bzpopmin", -3, "write noscript fast blocking", cmdBZPopMin),
		cmd("bzpopmax", -3, "write noscript fast blocking", cmdBZPopMax),
		cmd("bzmpop", -5, "write blocking", cmdBZMPop),
		cmd("zmpop", -4, "write", cmdZMPop),
	}
}

const (
	msgZNaN         = "resulting score is not a number (NaN)"
	msgZScoreRange  = "min or max is not a float"
	msgZLexRange    = "min or max not valid string range item"
	msgZPositive    = "value is out of range, must be positive"
	msgZLimitByRank = "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
	msgZLexScores   = "syntax error, WITHSCORES not supported in combination with BYLEX"
)

// zsetLimits returns the compact encoding's limits, as configured now.
func (c *Ctx) zsetLimits() engine.ZSetLimits {
	_, _, entries, value := c.Srv.Cfg.ListpackLimits()
	return engine.ZSetLimits{Entries: entries, Value: value}
}

// zsetChanged records a change to the set under e: the key goes when the
// set is empty, as in Redis. It reports whether the key went.
func zsetChanged(s *engine.Shard, e engine.Entry, z *engine.ZSet) bool {
	if z.Len() == 0 {
		s.DeleteEntry(e)
		return true
	}
	s.Touch(e)
	return false
}

// zsetNotify reports event on the sorted set at key, and "del" after it
// when the change emptied the set: Redis's order.
func (c *Ctx) zsetNotify(event string, key []byte, removed bool) {
	c.notify(notifyZSet, event, key)
	c.zsetNotifyDel(key, removed)
}

// zsetNotifyDel reports "del" of key if the change emptied the set.
func (c *Ctx) zsetNotifyDel(key []byte, removed bool) {
	if removed {
		c.notify(notifyGeneric, "del", key)
	}
}

func cmdZAdd(c *Ctx)    { zadd(c, 0) }
func cmdZIncrBy(c *Ctx) { zadd(c, engine.ZAddIncr) }

// zadd implements ZADD and ZINCRBY, which Redis parses alike: options are
// taken until the first word that is not one, so "ZINCRBY k nx m" is a
// syntax error rather than a bad float. Every score is parsed before the
// key is touched, so that a bad one changes nothing.
func zadd(c *Ctx, f engine.ZAddFlags) {
	ch := false
	i := 2
options:
	for ; i < len(c.Args); i++ {
		a := c.Args[i]
		switch {
		case is(a, "NX"):
			f |= engine.ZAddNX
		case is(a, "XX"):
			f |= engine.ZAddXX
		case is(a, "GT"):
			f |= engine.ZAddGT
		case is(a, "LT"):
			f |= engine.ZAddLT
		case is(a, "CH"):
			ch = true
		case is(a, "INCR"):
			f |= engine.ZAddIncr
		default:
			break options
		}
	}
	n := len(c.Args) - i
	if n == 0 || n%2 != 0 {
		c.W.Error(msgSyntax)
		return
	}
	has := func(x engine.ZAddFlags) bool { return f&x != 0 }
	switch {
	case has(engine.ZAddNX) && has(engine.ZAddXX):
		c.W.Error("ERR XX and NX options at the same time are not compatible")
		return
	case has(engine.ZAddNX) && (has(engine.ZAddGT) || has(engine.ZAddLT)), has(engine.ZAddGT) && has(engine.ZAddLT):
		c.W.Error("ERR GT, LT, and/or NX options at the same time are not compatible")
		return
	case has(engine.ZAddIncr) && n > 2:
		c.W.Error("ERR INCR option supports a single increment-element pair")
		return
	}
	var stack [16]float64
	scores := stack[:0]
	for j := i; j < len(c.Args); j += 2 {
		sc, ok := c.Float(j)
		if !ok {
			return
		}
		scores = append(scores, sc)
	}
	key := c.Args[1]
	s := c.Shard(key)
	e, z, ok := typed[*engine.ZSet](c, s, key, engine.ForWrite)
	if !ok {
		return
	}
	incr := has(engine.ZAddIncr)
	created := z == nil
	if created {
		if has(engine.ZAddXX) {
			c.flushNotes(s) // an expiry, before the reply
			if incr {
				c.W.Null()
			} else {
				c.W.Int(0)
			}
			return
		}
		z = engine.NewZSet()
	}
	lim := c.zsetLimits()
	var added, updated, processed int64
	var score float64
	nan := false
	for k, sc := range scores {
		res, newScore := z.Add(c.Args[i+2*k+1], sc, f, lim)
		switch res {
		case engine.ZAddNaN:
			nan = true
		case engine.ZAddAdded:
			added++
		case engine.ZAddUpdated:
			updated++
		}
		if nan {
			break
		}
		if res != engine.ZAddSkipped {
			processed++
		}
		score = newScore
	}
	switch {
	case created && z.Len() > 0:
		s.SetObject(c.DB, key, engine.KindZSet, z, 0)
	case !created && added+updated > 0:
		s.Touch(e)
	}
	// Redis replies before it reports the change, even when a later
	// member's NaN makes the reply an error; what its lookup and dbAdd
	// reported (an expiry, "new") comes before the reply.
	c.flushNotes(s)
	switch {
	case nan:
		c.W.Error(msgZNaN)
	case incr && processed > 0:
		c.W.Double(score)
	case incr:
		c.W.Null()
	case ch:
		c.W.Int(added + updated)
	default:
		c.W.Int(added)
	}
	if added+updated > 0 {
		if incr {
			c.notify(notifyZSet, "zincr", key)
		} else {
			c.notify(notifyZSet, "zadd", key)
		}
	}
}

func cmdZRem(c *Ctx) {
	s := c.Shard(c.Args[1])
	e, z, ok := typed[*engine.ZSet](c, s, c.Args[1], engine.ForWrite)
	if !ok {
		return
	}
	var n int64
	if z != nil {
		for _, m := range c.Args[2:] {
			if z.Remove(m) {
				n++
				if z.Len() == 0 {
					break
				}
			}
		}
		if n > 0 {
			c.zsetNotify("zrem", c.Args[1], zsetChanged(s, e, z))
		}
	}
	c.W.Int(n)
}

func cmdZCard(c *Ctx) {
	_, z, ok := typed[*engine.ZSet](c, c.Shard(c.Args[1]), c.Args[1], engine.ForRead)
	switch {
	case !ok:
	case z == nil:
		c.W.Int(0)
	default:
		c.W.Int(int64(z.Len()))
	}
}

func cmdZCount(c *Ctx)    { zcount(c, zrangeScore) }
func cmdZLexCount(c *Ctx) { zcount(c, zrangeLex) }

func zcount(c *Ctx, by zrangeBy) {
	sp, ok := parseZSpan(c, by, c.Args[2], c.Args[3])
	if !ok {
		return
	}
	_, z, ok := typed[*engine.ZSet](c, c.Shard(c.Args[1]), c.Args[1], engine.ForRead)
	switch {
	case !ok:
	case z == nil:
		c.W.Int(0)
	default:
		lo, hi := sp.window(z, false, 0, -1)
		c.W.Int(int64(hi - lo))
	}
}

func cmdZScore(c *Ctx) {
	_, z, ok := typed[*engine.ZSet](c, c.Shard(c.Args[1]), c.Args[1], engine.ForRead)
	if !ok {
		return
	}
	if z != nil {
		if sc, found := z.Score(c.Args[2]); found {
			c.W.Double(sc)
			return
		}
	}
	c.W.Null()
}

func cmdZMScore(c *Ctx) {
	_, z, ok := typed[*engine.ZSet](c, c.Shard(c.Args[1]), c.Args[1], engine.ForRead)
	if !ok {
		return
	}
	c.W.Array(len(c.Args) - 2)
	for _, m := range c.Args[2:] {
		if z != nil {
			if sc, found := z.Score(m); found {
				c.W.Double(sc)
				continue
			}
		}
		c.W.Null()
	}
}

func cmdZRank(c *Ctx)    { zrank(c, false) }
func cmdZRevRank(c *Ctx) { zrank(c, true) }

func zrank(c *Ctx, rev bool) {
	_, z, ok := typed[*engine.ZSet](c, c.Shard(c.Args[1]), c.Args[1], engine.ForRead)
	if !ok {
		return
	}
	if z != nil {
		if r, found := z.Rank(c.Args[2]); found {
			if rev {
				r = z.Len() - 1 - r
			}
			c.W.Int(int64(r))
			return
		}
	}
	c.W.Null()
}

// zrangeBy is what a range selects members by; zrangeAuto lets ZRANGE's
// BYSCORE and BYLEX options decide.
type zrangeBy uint8

const (
	zrangeAuto zrangeBy = iota
	zrangeRank
	zrangeScore
	zrangeLex
)

// zrangeDir is a range's direction; zrangeDirAuto lets ZRANGE's REV decide.
type zrangeDir uint8

const (
	zrangeDirAuto zrangeDir = iota
	zrangeForward
	zrangeReverse
)

func cmdZRange(c *Ctx)           { zrange(c, zrangeAuto, zrangeDirAuto) }
func cmdZRevRange(c *Ctx)        { zrange(c, zrangeRank, zrangeReverse) }
func cmdZRangeByScore(c *Ctx)    { zrange(c, zrangeScore, zrangeForward) }
func cmdZRevRangeByScore(c *Ctx) { zrange(c, zrangeScore, zrangeReverse) }
func cmdZRangeByLex(c *Ctx)      { zrange(c, zrangeLex, zrangeForward) }
func cmdZRevRangeByLex(c *Ctx)   { zrange(c, zrangeLex, zrangeReverse) }

// zrange implements ZRANGE and its older forms, which Redis runs through
// one parser: a form that fixes the kind of range or the direction simply
// does not accept the option that would set it.
func zrange(c *Ctx, by zrangeBy, dir zrangeDir) { zrangeFrom(c, 1, nil, by, dir) }

// zrangeFrom runs a range whose source key is argument src, its ends the
// two arguments after it. With a destination (ZRANGESTORE) the members
// and scores go to dst, replacing its value, instead of into the reply,
// and WITHSCORES is not an option.
func zrangeFrom(c *Ctx, src int, dst []byte, by zrangeBy, dir zrangeDir) {
	store := dst != nil
	withScores := false
	offset, limit := int64(0), int64(-1)
	for j := src + 3; j < len(c.Args); j++ {
		a := c.Args[j]
		switch {
		case !store && is(a, "WITHSCORES"):
			withScores = true
		case is(a, "LIMIT") && j+2 < len(c.Args):
			var ok bool
			if offset, ok = c.Int(j + 1); !ok {
				return
			}
			if limit, ok = c.Int(j + 2); !ok {
				return
			}
			j += 2
		case dir == zrangeDirAuto && is(a, "REV"):
			dir = zrangeReverse
		case by == zrangeAuto && is(a, "BYSCORE"):
			by = zrangeScore
		case by == zrangeAuto && is(a, "BYLEX"):
			by = zrangeLex
		default:
			c.W.Error(msgSyntax)
			return
		}
	}
	if by == zrangeAuto {
		by = zrangeRank
	}
	rev := dir == zrangeReverse
	switch {
	case limit != -1 && by == zrangeRank:
		c.W.Error(msgZLimitByRank)
		return
	case withScores && by == zrangeLex:
		c.W.Error(msgZLexScores)
		return
	}
	minArg, maxArg := c.Args[src+1], c.Args[src+2]
	if rev && by != zrangeRank {
		minArg, maxArg = maxArg, minArg // given as max, min
	}
	sp, ok := parseZSpan(c, by, minArg, maxArg)
	if !ok {
		return
	}
	srcShard := c.Shard(c.Args[src])
	_, z, ok := typed[*engine.ZSet](c, srcShard, c.Args[src], engine.ForRead)
	if !ok {
		return
	}
	if store {
		c.flushNotes(srcShard)
		zrangeStore(c, dst, z, &sp, rev, offset, limit)
		return
	}
	if z == nil {
		c.W.Array(0)
		return
	}
	lo, hi := sp.window(z, rev, offset, limit)
	zreply(c, z, lo, hi, rev, withScores)
}

// ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]
func cmdZRangeStore(c *Ctx) { zrangeFrom(c, 2, c.Args[1], zrangeAuto, zrangeDirAuto) }

// zrangeStore stores the range sp of z (nil: no such key) in dst.
func zrangeStore(c *Ctx, dst []byte, z *engine.ZSet, sp *zspan, rev bool, offset, limit int64) {
	var items []engine.ZItem
	if z != nil {
		lo, hi := sp.window(z, rev, offset, limit)
		if hi > lo {
			items = make([]engine.ZItem, 0, hi-lo)
		}
		z.Range(lo, hi, false, c.buf[:0], func(m []byte, sc float64) bool {
			items = append(items, engine.ZItem{M: string(m), S: sc})
			return true
		})
	}
	c.storeZItems(dst, items, "zrangestore", false)
}

// zspan is a parsed range of ranks, scores or members.
type zspan struct {
	by          zrangeBy
	start, stop int64
	score       engine.ScoreRange
	lex         engine.LexRange
}

// parseZSpan reads a range of kind by from its two ends, replying with
// Redis's error if one is malformed.
func parseZSpan(c *Ctx, by zrangeBy, minArg, maxArg []byte) (zspan, bool) {
	sp := zspan{by: by}
	var ok bool
	switch by {
	case zrangeRank:
		if sp.start, ok = engine.ParseInt(minArg); ok {
			sp.stop, ok = engine.ParseInt(maxArg)
		}
		if !ok {
			c.W.Error(msgNotInteger)
		}
	case zrangeScore:
		if sp.score, ok = engine.ParseScoreRange(minArg, maxArg); !ok {
			c.W.Error(msgZScoreRange)
		}
	case zrangeLex:
		if sp.lex, ok = engine.ParseLexRange(minArg, maxArg); !ok {
			c.W.Error(msgZLexRange)
		}
	}
	return sp, ok
}

// window returns the ranks [lo, hi) the span covers in z, read from the
// highest score with rev, after LIMIT's offset and count (count < 0: all).
func (sp *zspan) window(z *engine.ZSet, rev bool, offset, limit int64) (lo, hi int) {
	switch sp.by {
	case zrangeRank:
		lo, hi = z.RankWindow(sp.start, sp.stop)
		if rev {
			// ZREVRANGE's indexes count from the highest score.
			n := z.Len()
			lo, hi = n-hi, n-lo
		}
	case zrangeScore:
		lo, hi = z.ScoreWindow(sp.score, rev, offset, limit)
	case zrangeLex:
		lo, hi = z.LexWindow(sp.lex, rev, offset, limit)
	}
	return lo, hi
}

// zreply writes the members of ranks [lo, hi), with their scores if asked:
// in RESP2 a flat array, in RESP3 an array of [member, score] pairs.
func zreply(c *Ctx, z *engine.ZSet, lo, hi int, rev, withScores bool) {
	n := max(hi-lo, 0)
	pairs := withScores && c.W.Proto() == 3
	if withScores && !pairs {
		c.W.Array(2 * n)
	} else {
		c.W.Array(n)
	}
	z.Range(lo, hi, rev, c.buf[:0], func(m []byte, sc float64) bool {
		if pairs {
			c.W.Array(2)
		}
		c.W.Bulk(m)
		if withScores {
			c.W.Double(sc)
		}
		return true
	})
}

func cmdZRemRangeByRank(c *Ctx)  { zremrange(c, zrangeRank) }
func cmdZRemRangeByScore(c *Ctx) { zremrange(c, zrangeScore) }
func cmdZRemRangeByLex(c *Ctx)   { zremrange(c, zrangeLex) }

// zremrangeEvents names the event of each ZREMRANGEBY* command.
var zremrangeEvents = [...]string{zrangeRank: "zremrangebyrank", zrangeScore: "zremrangebyscore", zrangeLex: "zremrangebylex"}

func zremrange(c *Ctx, by zrangeBy) {
	sp, ok := parseZSpan(c, by, c.Args[2], c.Args[3])
	if !ok {
		return
	}
	s := c.Shard(c.Args[1])
	e, z, ok := typed[*engine.ZSet](c, s, c.Args[1], engine.ForWrite)
	if !ok {
		return
	}
	if z == nil {
		c.W.Int(0)
		return
	}
	lo, hi := sp.window(z, false, 0, -1)
	n := z.RemoveRange(lo, hi)
	if n > 0 {
		c.zsetNotify(zremrangeEvents[by], c.Args[1], zsetChanged(s, e, z))
	}
	c.W.Int(int64(n))
}

func cmdZPopMin(c *Ctx) { zpop(c, false) }
func cmdZPopMax(c *Ctx) { zpop(c, true) }

// zpop replies with the popped members and scores: flat, except that
// RESP3 with a count nests [member, score] pairs, as Redis 7.0 does.
func zpop(c *Ctx, highest bool) {
	if len(c.Args) > 3 {
		c.W.Error(msgSyntax)
		return
	}
	count := int64(-1) // no count: pop one
	if len(c.Args) == 3 {
		n, ok := engine.ParseInt(c.Args[2])
		if !ok || n < 0 {
			c.W.Error(msgZPositive)
			return
		}
		count = n
	}
	s := c.Shard(c.Args[1])
	e, z, ok := typed[*engine.ZSet](c, s, c.Args[1], engine.ForWrite)
	c.flushNotes(s) // an expiry goes before the reply's header
	if !ok {
		return
	}
	if z == nil || count == 0 {
		c.W.Array(0)
		return
	}
	nested := c.W.Proto() == 3 && count > 0
	k := z.Len()
	if count > 0 && count < int64(k) {
		k = int(count)
	} else if count < 0 {
		k = 1
	}
	lo, hi := 0, k
	if highest {
		lo, hi = z.Len()-k, z.Len()
	}
	if nested {
		c.W.Array(k)
	} else {
		c.W.Array(2 * k)
	}
	// Where Redis reports the pop: between the reply's header and its
	// first member, which a RESP3 client subscribed to it sees.
	c.notify(notifyZSet, zpopEvent(highest), c.Args[1])
	z.Range(lo, hi, highest, c.buf[:0], func(m []byte, sc float64) bool {
		if nested {
			c.W.Array(2)
		}
		c.W.Bulk(m)
		c.W.Double(sc)
		return true
	})
	z.RemoveRange(lo, hi)
	c.zsetNotifyDel(c.Args[1], zsetChanged(s, e, z))
}

// zpopEvent is the event of a pop from the lowest scores or the highest.
func zpopEvent(highest bool) string {
	if highest {
		return "zpopmax"
	}
	return "zpopmin"
}

// cmdZScan checks the cursor, then the key, and only then the options, in
// Redis's order: a missing key answers an empty scan whatever follows.
func cmdZScan(c *Ctx) {
	cursor, ok := c.cursorAt(2)
	if !ok {
		return
	}
	_, z, ok := typed[*engine.ZSet](c, c.Shard(c.Args[1]), c.Args[1], engine.ForRead)
	if !ok {
		return
	}
	if z == nil {
		c.emptyScan()
		return
	}
	_, o, ok := c.parseScan(2, false)
	if !ok {
		return
	}
	// Members and scores go into one buffer: the reply's length is known
	// only once the batch is complete.
	var flat []byte
	var ends []int
	next := z.Scan(cursor, o.count, c.buf[:0], func(m []byte, sc float64) {
		if !o.matchAll && !engine.Match(o.match, m, false) {
			return
		}
		flat = append(flat, m...)
		ends = append(ends, len(flat))
		flat = z.AppendScanScore(flat, sc)
		ends = append(ends, len(flat))
	})
	c.W.Array(2)
	c.W.BulkString(strconv.FormatUint(next, 10))
	c.W.Array(len(ends))
	from := 0
	for _, end := range ends {
		c.W.Bulk(flat[from:end])
		from = end
	}
}

func cmdBZPopMin(c *Ctx) { blockingZPop(c, false) }

func cmdBZPopMax(c *Ctx) { blockingZPop(c, true) }

func blockingZPop(c *Ctx, highest bool) {
	n := len(c.Args)
	timeout, ok := c.blockTimeout(c.Args[n-1])
	if !ok {
		return
	}
	zsetPopOrBlock(c, c.Args[1:n-1], highest, -1, false, timeout)
}

// zsetPopOrBlock pops from the first of keys that holds a sorted set, or
// blocks on them all.
func zsetPopOrBlock(c *Ctx, keys [][]byte, highest bool, count int64, nested bool, timeout time.Duration) {
	for _, key := range keys {
		s := c.Shard(key)
		e, z, ok := typed[*engine.ZSet](c, s, key, engine.ForWrite)
		c.flushNotes(s)
		if !ok {
			return
		}
		if z == nil || z.Len() == 0 {
			continue
		}
		c.replicateAs(zsetPop(c, s, e, key, highest, count, nested)...)
		return
	}
	if !c.mayBlock() {
		c.W.NullArray()
		return
	}
	op := opZPop
	if nested {
		op = opZMPop
	}
	c.block(&waiter{op: op, head: !highest, count: count}, engine.KindZSet, keys, timeout)
}

func cmdZMPop(c *Ctx) {
	keys, lowest, count, ok := mpopArgs(c, 1, [2]string{"MIN", "MAX"})
	if !ok {
		return
	}
	// As Redis's genericZpopCommand: the first key that exists decides,
	// its type checked.
	for _, key := range keys {
		s := c.Shard(key)
		e, z, ok := typed[*engine.ZSet](c, s, key, engine.ForWrite)
		c.flushNotes(s)
		if !ok {
			return
		}
		if z == nil {
			continue
		}
		c.replicateAs(zsetPop(c, s, e, key, !lowest, count, true)...)
		return
	}
	c.W.NullArray()
}

func cmdBZMPop(c *Ctx) {
	keys, lowest, count, ok := mpopArgs(c, 2, [2]string{"MIN", "MAX"})
	if !ok {
		return
	}
	timeout, ok := c.blockTimeout(c.Args[1])
	if !ok {
		return
	}
	zsetPopOrBlock(c, keys, !lowest, count, true, timeout)
}

// zsetPop pops from the sorted set under e, found non-empty: the lowest
// scores, or the highest, one as [key, member, score] (count -1), or, for
// ZMPOP and BZMPOP (nested), up to count as [key, [[member, score] ...]].
// It returns the command that does the same, for replication.
func zsetPop(c *Ctx, s *engine.Shard, e engine.Entry, key []byte, highest bool, count int64, nested bool) [][]byte {
	z := s.Object(e).(*engine.ZSet)
	name := []byte("ZPOPMIN")
	if highest {
		name = []byte("ZPOPMAX")
	}
	k := 1
	if count > 0 {
		k = int(min(count, int64(z.Len())))
	}
	lo, hi := 0, k
	if highest {
		lo, hi = z.Len()-k, z.Len()
	}
	if nested {
		c.W.Array(2)
		c.W.Bulk(key)
		c.W.Array(k)
	} else {
		c.W.Array(3)
		c.W.Bulk(key)
	}
	// c is the popping client's own request, served later or not: the
	// events are in its database. The pop is reported where Redis does,
	// after the reply's header.
	c.notify(notifyZSet, zpopEvent(highest), key)
	z.Range(lo, hi, highest, c.buf[:0], func(m []byte, sc float64) bool {
		if nested {
			c.W.Array(2)
		}
		c.W.Bulk(m)
		c.W.Double(sc)
		return true
	})
	z.RemoveRange(lo, hi)
	c.zsetNotifyDel(key, zsetChanged(s, e, z))
	if count < 0 {
		return [][]byte{name, key}
	}
	return [][]byte{name, key, strconv.AppendInt(nil, int64(k), 10)}
}
