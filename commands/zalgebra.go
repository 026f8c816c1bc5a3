package commands

import (
	"math"
	"math/rand/v2"
	"sort"

	"github.com/limitkv/limitkv/engine"
)

// zalgebraCommands: sorted-set algebra (union, intersection,
// difference) and random members.
func zalgebraCommands() []*command {
	return []*command{
		cmd("zunion", -3, "readonly", cmdZUnion),
		cmd("zinter", -3, "readonly", cmdZInter),
		cmd("zdiff", -3, "readonly", cmdZDiff),
		cmd("zunionstore", -4, "write denyoom as_is", cmdZUnionStore),
		cmd("zinterstore", -4, "write denyoom as_is", cmdZInterStore),
		cmd("zdiffstore", -4, "write denyoom as_is", cmdZDiffStore),
		cmd("zintercard", -3, "readonly", cmdZInterCard),
		cmd("zrandmember", -2, "readonly", cmdZRandMember),
	}
}

// Sorted-set algebra and random members: ZUNION ZINTER ZDIFF ZUNIONSTORE
// ZINTERSTORE ZDIFFSTORE ZINTERCARD ZRANDMEMBER, and the count rules
// HRANDFIELD shares with ZRANDMEMBER.
//
// Bounds: an algebra command reads its inputs and builds its result under
// the locks of its keys' shards only (dispatch locks them from the key
// specs), in time linear in its inputs, as Redis does while it holds the
// whole server; other shards keep serving. A random reply with repetitions
// (negative count) is the one reply whose size a client picks without the
// data backing it: it is refused up front, and cut off while it is built,
// once it would pass proto-max-bulk-len bytes.

const (
	msgZWeight        = "weight value is not a float"
	msgZInterLimit    = "ERR LIMIT can't be negative"
	msgRandRange      = "value is out of range"
	msgRandCountRange = "value is out of range, value must between -9223372036854775807 and 9223372036854775807"
)

// zop is a set operation.
type zop uint8

const (
	zopUnion zop = iota
	zopInter
	zopDiff
)

// zsrcAt reads input key for an algebra command: a sorted set, or a plain
// set whose members score 1, as Redis takes them.
// One lookup: it counts the keyspace hit or miss.
func (c *Ctx) zsrcAt(key []byte) (engine.ZSource, bool) {
	s := c.Shard(key)
	e, found := s.Lookup(c.DB, key, c.Now)
	c.flushNotes(s)
	switch {
	case !found:
		return engine.ZSource{Weight: 1}, true
	case e.Kind() == engine.KindZSet:
		return engine.ZSource{Z: s.Object(e).(*engine.ZSet), Weight: 1}, true
	case e.Kind() == engine.KindSet:
		return engine.ZSource{Set: s.Object(e).(*engine.Set), Weight: 1}, true
	}
	c.W.Error(msgWrongType)
	return engine.ZSource{}, false
}

func cmdZUnion(c *Ctx)      { zalgebra(c, nil, 1, zopUnion, false) }
func cmdZInter(c *Ctx)      { zalgebra(c, nil, 1, zopInter, false) }
func cmdZDiff(c *Ctx)       { zalgebra(c, nil, 1, zopDiff, false) }
func cmdZInterCard(c *Ctx)  { zalgebra(c, nil, 1, zopInter, true) }
func cmdZUnionStore(c *Ctx) { zalgebra(c, c.Args[1], 2, zopUnion, false) }
func cmdZInterStore(c *Ctx) { zalgebra(c, c.Args[1], 2, zopInter, false) }
func cmdZDiffStore(c *Ctx)  { zalgebra(c, c.Args[1], 2, zopDiff, false) }

// zalgebra implements the seven commands as Redis's
// zunionInterDiffGenericCommand does, in its order: the key count, the
// inputs' types, then the options; numkeys is the index of the key count.
func zalgebra(c *Ctx, dst []byte, numkeys int, op zop, cardOnly bool) {
	n, ok := c.Int(numkeys)
	if !ok {
		return
	}
	if n < 1 {
		c.W.Error("at least 1 input key is needed for '" + c.Spec.FullName() + "' command")
		return
	}
	if n > int64(len(c.Args)-numkeys-1) {
		c.W.Error(msgSyntax)
		return
	}
	src := make([]engine.ZSource, n)
	j := numkeys + 1
	for i := range src {
		if src[i], ok = c.zsrcAt(c.Args[j]); !ok {
			return
		}
		j++
	}
	aggr := engine.ZAggrSum
	withScores := false
	var limit int64
	for j < len(c.Args) {
		a, left := c.Args[j], len(c.Args)-j
		switch {
		case op != zopDiff && !cardOnly && left >= len(src)+1 && is(a, "WEIGHTS"):
			j++
			for i := range src {
				w, ok := engine.ParseFloat(c.Args[j])
				if !ok {
					c.W.Error(msgZWeight)
					return
				}
				src[i].Weight = w
				j++
			}
		case op != zopDiff && !cardOnly && left >= 2 && is(a, "AGGREGATE"):
			switch b := c.Args[j+1]; {
			case is(b, "SUM"):
				aggr = engine.ZAggrSum
			case is(b, "MIN"):
				aggr = engine.ZAggrMin
			case is(b, "MAX"):
				aggr = engine.ZAggrMax
			default:
				c.W.Error(msgSyntax)
				return
			}
			j += 2
		case dst == nil && !cardOnly && is(a, "WITHSCORES"):
			withScores = true
			j++
		case cardOnly && left >= 2 && is(a, "LIMIT"):
			l, ok := engine.ParseInt(c.Args[j+1])
			if !ok || l < 0 {
				c.W.Error(msgZInterLimit)
				return
			}
			limit = l
			j += 2
		default:
			c.W.Error(msgSyntax)
			return
		}
	}
	if op != zopDiff {
		// Smallest first, as Redis orders them: an intersection walks the
		// smallest, and a union's sums are added in this order.
		sort.SliceStable(src, func(a, b int) bool { return src[a].Len() < src[b].Len() })
	}
	if cardOnly {
		c.W.Int(engine.ZInterCard(src, limit, c.buf[:0]))
		return
	}
	var items []engine.ZItem
	switch op {
	case zopUnion:
		items = engine.ZUnion(src, aggr, c.buf[:0])
	case zopInter:
		items = engine.ZInter(src, aggr, c.buf[:0])
	case zopDiff:
		items = engine.ZDiff(src, c.buf[:0])
	}
	engine.SortZItems(items)
	if dst != nil {
		c.storeZItems(dst, items, zstoreEvents[op], false)
		return
	}
	zitemsReply(c, items, withScores)
}

// zstoreEvents names the event of each operation's STORE command.
var zstoreEvents = [...]string{zopUnion: "zunionstore", zopInter: "zinterstore", zopDiff: "zdiffstore"}

// zitemsReply writes a computed result as ZRANGE does.
func zitemsReply(c *Ctx, items []engine.ZItem, withScores bool) {
	pairs := withScores && c.W.Proto() == 3
	if withScores && !pairs {
		c.W.Array(2 * len(items))
	} else {
		c.W.Array(len(items))
	}
	for _, it := range items {
		if pairs {
			c.W.Array(2)
		}
		c.W.BulkString(it.M)
		if withScores {
			c.W.Double(it.S)
		}
	}
}

// storeZItems makes items, sorted, the value of dst and replies with their
// number, reporting event on dst; no items delete dst, as Redis does, and
// report "del" if there was one. The event follows the reply, as in
// ZRANGESTORE and the algebra, or with eventFirst precedes it, as in the
// geo stores: what a RESP3 client subscribed to it sees.
func (c *Ctx) storeZItems(dst []byte, items []engine.ZItem, event string, eventFirst bool) {
	s := c.Shard(dst)
	if len(items) == 0 {
		if !eventFirst {
			c.W.Int(0)
		}
		c.deleteDest(s, dst)
		if eventFirst {
			c.W.Int(0)
		}
		return
	}
	z, err := engine.ZSetFrom(c.zsetLimits(), false, func(yield func([]byte, float64) bool) {
		for _, it := range items {
			if !yield([]byte(it.M), it.S) {
				return
			}
		}
	})
	if err != nil { // a NaN score: the aggregation rules leave none
		c.W.Error(msgZNaN)
		return
	}
	s.Find(c.DB, dst, c.Now) // Redis's setKey: a key past its TTL expires first
	s.SetObject(c.DB, dst, engine.KindZSet, z, 0)
	if eventFirst {
		c.notify(notifyZSet, event, dst)
		c.W.Int(int64(len(items)))
		return
	}
	c.flushNotes(s) // the expiry and "new" of setKey, before the reply
	c.W.Int(int64(len(items)))
	c.notify(notifyZSet, event, dst)
}

// deleteDest deletes the destination of a store whose result is empty, and
// reports "del" if there was one. Redis's dbDelete does not look at the
// TTL: a key past it that has not expired yet goes with "del" too.
func (c *Ctx) deleteDest(s *engine.Shard, dst []byte) {
	if e, ok := s.Raw(c.DB, dst); ok {
		s.DeleteEntry(e)
		c.notify(notifyGeneric, "del", dst)
	}
}

// randCount parses ZRANDMEMBER's and HRANDFIELD's count as Redis does: a
// long within ±LONG_MAX, within ±LONG_MAX/2 when each member brings its
// score or value, and here also no more repetitions than fit in
// proto-max-bulk-len bytes of reply (Redis has no such bound and builds
// whatever was asked for: ZRANDMEMBER k -9223372036854775807 never ends).
func (c *Ctx) randCount(with bool) (int64, bool) {
	n, ok := engine.ParseInt(c.Args[2])
	switch {
	case !ok:
		c.W.Error(msgNotInteger)
		return 0, false
	case n == math.MinInt64:
		c.W.Error(msgRandCountRange)
		return 0, false
	case with && (n < -math.MaxInt64/2 || n > math.MaxInt64/2):
		c.W.Error(msgRandRange)
		return 0, false
	case n < 0 && -n > c.maxStringLen()/minRandReply:
		c.W.Error(msgRandRange)
		return 0, false
	}
	return n, true
}

// minRandReply is the fewest bytes a member takes in a reply: "$0\r\n\r\n".
const minRandReply = 6

// randReplyTooLong tells, while a reply with repetitions is built from
// start, whether it passed proto-max-bulk-len; then the reply is dropped
// for an error.
func (c *Ctx) randReplyTooLong(start int) bool {
	if int64(c.W.Len()-start) <= c.maxStringLen() {
		return false
	}
	c.W.Truncate(start)
	c.W.Error(msgRandRange)
	return true
}

// randOptions parses what follows the count: nothing or the one word.
func (c *Ctx) randOptions(word string) (with, ok bool) {
	switch {
	case len(c.Args) > 4, len(c.Args) == 4 && !is(c.Args[3], word):
		c.W.Error(msgSyntax)
		return false, false
	}
	return len(c.Args) == 4, true
}

func cmdZRandMember(c *Ctx) {
	if len(c.Args) == 2 {
		_, z, ok := typed[*engine.ZSet](c, c.Shard(c.Args[1]), c.Args[1], engine.ForRead)
		switch {
		case !ok:
		case z == nil:
			c.W.Null()
		default:
			r := rand.IntN(z.Len())
			z.Range(r, r+1, false, c.buf[:0], func(m []byte, _ float64) bool {
				c.W.Bulk(m)
				return false
			})
		}
		return
	}
	with, ok := c.randOptions("WITHSCORES")
	if !ok {
		return
	}
	count, ok := c.randCount(with)
	if !ok {
		return
	}
	_, z, ok := typed[*engine.ZSet](c, c.Shard(c.Args[1]), c.Args[1], engine.ForRead)
	if !ok {
		return
	}
	if z == nil || count == 0 {
		c.W.Array(0)
		return
	}
	pairs := with && c.W.Proto() == 3
	emit := func(m []byte, sc float64) bool {
		if pairs {
			c.W.Array(2)
		}
		c.W.Bulk(m)
		if with {
			c.W.Double(sc)
		}
		return true
	}
	header := func(k int) {
		if with && !pairs {
			c.W.Array(2 * k)
		} else {
			c.W.Array(k)
		}
	}
	size := z.Len()
	if count < 0 || count == 1 {
		k := int(max(count, -count))
		start := c.W.Len()
		header(k)
		pick := func(r int) { z.Range(r, r+1, false, c.buf[:0], emit) }
		if k > 1 && z.Encoding() == "listpack" {
			// Reaching a rank walks the compact encoding: take its
			// members once, so that each draw costs O(1).
			ms, scores := engine.CompactPairs(z.All())
			pick = func(r int) { emit(ms[r], scores[r]) }
		}
		for i := 0; i < k; i++ {
			pick(rand.IntN(size))
			if i%1024 == 1023 && c.randReplyTooLong(start) {
				return
			}
		}
		c.randReplyTooLong(start)
		return
	}
	if count >= int64(size) {
		// The whole set, from the highest score down, as Redis's
		// iterator over a sorted set walks it.
		header(size)
		z.Range(0, size, true, c.buf[:0], emit)
		return
	}
	ranks := engine.RandRanks(size, int(count))
	header(len(ranks))
	for _, r := range ranks {
		z.Range(r, r+1, false, c.buf[:0], emit)
	}
}
