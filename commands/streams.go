package commands

import (
	"bytes"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/resp"
)

// streamCommands: the stream log's commands (XADD, XRANGE, XREVRANGE,
// XLEN, XDEL, XTRIM, XSETID) and its readers (XREAD, XREADGROUP).
func streamCommands() []*command {
	return []*command{
		cmd("xadd", -5, "write denyoom fast as_is", cmdXAdd),
		cmd("xrange", -4, "readonly", cmdXRange),
		cmd("xrevrange", -4, "readonly", cmdXRevRange),
		cmd("xlen", 2, "readonly fast", cmdXLen),
		cmd("xdel", -3, "write fast as_is", cmdXDel),
		cmd("xtrim", -4, "write as_is", cmdXTrim),
		cmd("xsetid", -3, "write denyoom fast as_is", cmdXSetID),
		cmd("xread", -4, "readonly blocking", cmdXRead).withKeys(xreadKeys(1)).withLockAll(xreadOddKeys(1)),
		cmd("xreadgroup", -7, "write blocking as_is", cmdXReadGroup).withKeys(xreadKeys(4)).withLockAll(xreadOddKeys(4)),
	}
}

// Redis 7.0.15's t_stream.c is followed for the order of the checks: the
// options are parsed before the key is looked up, but for XDEL, which
// looks the key up before it reads its IDs. Redis reads options as C
// strings (strcasecmp, strcmp), so an argument is compared up to its
// first NUL (cstr).
//
// Replication: XDEL, XSETID and XTRIM with "=" are deterministic and go
// as they are. XADD whose ID was generated ("*", "ms-*") goes with that
// ID, and "~" trimming (XADD's and XTRIM's) as the exact trimming it came
// to ("MAXLEN = <length left>", "MINID = <first ID left>"), as Redis
// rewrites them. XREAD changes nothing. XREADGROUP goes as what it did to
// the group (xreadRepl), never as itself. A command from a master obeys
// it: "~" trims without a LIMIT, and a LIMIT without "~" is accepted, as
// Redis's mustObeyClient.
//
// Blocking (XREAD and XREADGROUP with BLOCK) waits in blocking.go, which
// serves the stream's waiters once a command made the key ready.

const (
	msgXReadUnbalanced = "Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified."
	msgXReadGroupOpt   = "The GROUP option is only supported by XREADGROUP. You called XREAD instead."
	msgXReadNoAckOpt   = "The NOACK option is only supported by XREADGROUP. You called XREAD instead."
	msgXReadNoGroup    = "Missing GROUP option for XREADGROUP"
	msgXReadDollar     = "The $ ID is meaningless in the context of XREADGROUP: you want to read the history of " +
		"this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would " +
		"just return an empty result set."
	msgXReadGreater   = "The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option."
	msgXReadTimeout   = "timeout is not an integer or out of range"
	msgXReadNegative  = "timeout is negative"
	msgXTrimBoth      = "syntax error, MAXLEN and MINID options at the same time are not compatible"
	msgXTrimLimitOnly = "syntax error, LIMIT cannot be used without specifying a trimming strategy"
	msgXTrimNoStrat   = "syntax error, XTRIM must be called with a trimming strategy"
	msgXTrimLimitNoAp = "syntax error, LIMIT cannot be used without the special ~ option"
	msgXStartInterval = "invalid start ID for the interval"
	msgXEndInterval   = "invalid end ID for the interval"
	// The texts of a blocked XREADGROUP's end when its group or its key
	// goes (blocked.c).
	msgXGroupGone = "NOGROUP the consumer group this client was blocked on no longer exists"
	msgXKeyGone   = "UNBLOCKED the stream key no longer exists"
)

// xreadBlockedCount is the COUNT a blocked XREAD without one is served
// with (XREAD_BLOCKED_DEFAULT_COUNT): an old ID should not make the
// server send the whole stream.
const xreadBlockedCount = 1000

// xreadKeys finds XREAD's keys (from 1) or XREADGROUP's (from 4) as
// Redis's key spec does, which the table's range cannot say: the first
// half of what follows the first STREAMS at or after from (but for the
// last argument, which Redis's search never reaches).
func xreadKeys(from int) func([][]byte, []cmdspec.KeyRef) []cmdspec.KeyRef {
	return func(args [][]byte, out []cmdspec.KeyRef) []cmdspec.KeyRef {
		if first := xreadSpecStreams(args, from); first > 0 {
			for p := first; p < first+(len(args)-first)/2; p++ {
				out = append(out, cmdspec.KeyRef{Pos: p})
			}
		}
		return out
	}
}

// xreadSpecStreams is the index of the first key as the key spec finds
// it, 0 for none.
func xreadSpecStreams(args [][]byte, from int) int {
	for i := from; i < len(args)-1; i++ {
		if isC(args[i], "STREAMS") {
			return i + 1
		}
	}
	return 0
}

// xreadOddKeys tells dispatch to lock every shard for a request whose
// STREAMS the key spec and the parser find in different places (a group
// or consumer named STREAMS, after COUNT): the handler reads the keys the
// parser finds, which the key spec's lock would not cover.
func xreadOddKeys(from int) func([][]byte) bool {
	return func(args [][]byte) bool {
		at := 0
	parse:
		for i := 1; i < len(args); i++ {
			more := len(args) - i - 1
			switch a := args[i]; {
			case (isC(a, "BLOCK") || isC(a, "COUNT")) && more > 0:
				i++
			case isC(a, "GROUP") && more >= 2:
				i += 2
			case isC(a, "NOACK"):
			case isC(a, "STREAMS") && more > 0:
				at = i + 1
				break parse
			default:
				break parse
			}
		}
		return at != 0 && at != xreadSpecStreams(args, from)
	}
}

// cstr is an argument as C sees it: up to its first NUL.
func cstr(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

// isC is is over cstr (strcasecmp).
func isC(b []byte, s string) bool { return is(cstr(b), s) }

// streamEntry writes one entry: [id, [field, value, ...]].
func streamEntry(w *resp.Writer, id engine.StreamID, fv [][]byte) {
	var buf [48]byte
	w.Array(2)
	w.Bulk(id.Append(buf[:0]))
	w.Array(len(fv))
	for _, b := range fv {
		w.Bulk(b)
	}
}

// headerAt writes an array (asMap: a map) header of n at offset at, in
// front of what was written since: the length of a range is known once it
// is written, as with Redis's deferred lengths. The body moves up by the
// header's few bytes; nothing is allocated.
func headerAt(w *resp.Writer, at, n int, asMap bool) {
	end := w.Len()
	if asMap {
		w.Map(n)
	} else {
		w.Array(n)
	}
	b := w.Bytes()
	var hb [24]byte
	h := copy(hb[:], b[end:])
	copy(b[at+h:], b[at:end])
	copy(b[at:], hb[:h])
}

// streamRange writes the entries from start to end (in reverse when rev),
// at most count of them (0: all), as an array.
func streamRange(w *resp.Writer, st *engine.Stream, start, end engine.StreamID, count int, rev bool) {
	at := w.Len()
	n := st.Range(start, end, count, rev, func(id engine.StreamID, fv [][]byte) bool {
		streamEntry(w, id, fv)
		return true
	})
	headerAt(w, at, n, false)
}

// streamTrimOpts are XADD's and XTRIM's options (streamAddTrimArgs).
type streamTrimOpts struct {
	engine.StreamTrimArgs
	// thresholdAt is the argument of MAXLEN's count or MINID's ID, which
	// replication rewrites after "~".
	thresholdAt int
	limitGiven  bool
	noMkStream  bool
	// XADD's ID, when one was given rather than "*".
	idGiven bool
	id      engine.StreamID
	form    engine.XAddIDForm
}

// parseAddTrim reads the options of XADD (xadd) or XTRIM as
// streamParseAddOrTrimArgsOrReply, replying on error, and returns the
// index of XADD's ID.
func parseAddTrim(c *Ctx, xadd bool) (o streamTrimOpts, idpos int, ok bool) {
	args := c.Args
	i := 2
	for ; i < len(args); i++ {
		more := len(args) - 1 - i
		opt := args[i]
		switch {
		case xadd && bytes.Equal(cstr(opt), []byte("*")):
			// Checked first, as Redis's fast path for the usual form, so
			// that a field named MAXLEN after it stays a field.
		case isC(opt, "MAXLEN") && more > 0, isC(opt, "MINID") && more > 0:
			if o.Strategy != engine.StreamTrimNone {
				c.W.Error(msgXTrimBoth)
				return o, 0, false
			}
			maxlen := isC(opt, "MAXLEN")
			o.Approx = false
			if next := cstr(args[i+1]); more >= 2 && len(next) == 1 && (next[0] == '~' || next[0] == '=') {
				o.Approx = next[0] == '~'
				i++
			}
			if maxlen {
				n, ok := c.Int(i + 1)
				if !ok {
					return o, 0, false
				}
				if n < 0 {
					c.W.Error("The MAXLEN argument must be >= 0.")
					return o, 0, false
				}
				o.Strategy, o.MaxLen = engine.StreamTrimMaxLen, n
			} else {
				id, err := engine.ParseStreamID(args[i+1], 0)
				if err != nil {
					c.W.Error(err.Error())
					return o, 0, false
				}
				o.Strategy, o.MinID = engine.StreamTrimMinID, id
			}
			i++
			o.thresholdAt = i
			continue
		case isC(opt, "LIMIT") && more > 0:
			n, ok := c.Int(i + 1)
			if !ok {
				return o, 0, false
			}
			if n < 0 {
				c.W.Error("The LIMIT argument must be >= 0.")
				return o, 0, false
			}
			o.Limit, o.limitGiven = n, true
			i++
			continue
		case xadd && isC(opt, "NOMKSTREAM"):
			o.noMkStream = true
			continue
		case xadd:
			id, form, err := engine.ParseXAddID(opt)
			if err != nil {
				c.W.Error(err.Error())
				return o, 0, false
			}
			o.id, o.form, o.idGiven = id, form, true
		default:
			c.W.Error(msgSyntax)
			return o, 0, false
		}
		break
	}
	switch {
	case o.Limit != 0 && o.Strategy == engine.StreamTrimNone:
		c.W.Error(msgXTrimLimitOnly)
		return o, 0, false
	case !xadd && o.Strategy == engine.StreamTrimNone:
		c.W.Error(msgXTrimNoStrat)
		return o, 0, false
	}
	switch {
	case c.Client.master:
		// The master rewrote "~" to what it trimmed: trim exactly that.
		o.Limit = 0
	case o.limitGiven && !o.Approx:
		c.W.Error(msgXTrimLimitNoAp)
		return o, 0, false
	case !o.limitGiven && o.Approx:
		o.Limit = c.Srv.Cfg.StreamNodeLimits().ApproxTrimLimit()
	case !o.limitGiven:
		o.Limit = 0
	}
	return o, i, true
}

// trimRewrite is the command as replicas must run it after "~" trimming:
// "=" and the threshold the trimming came to, and, for XADD, the ID it
// generated (idpos > 0).
func trimRewrite(c *Ctx, st *engine.Stream, o *streamTrimOpts, idpos int, id engine.StreamID) [][]byte {
	args := make([][]byte, len(c.Args))
	copy(args, c.Args)
	if o.Approx {
		args[o.thresholdAt-1] = []byte("=")
		if o.Strategy == engine.StreamTrimMaxLen {
			args[o.thresholdAt] = strconv.AppendUint(nil, st.Len(), 10)
		} else {
			args[o.thresholdAt] = st.EdgeID(true, false).Append(nil)
		}
	}
	if idpos > 0 {
		args[idpos] = id.Append(nil)
	}
	return args
}

func cmdXAdd(c *Ctx) {
	o, idpos, ok := parseAddTrim(c, true)
	if !ok {
		return
	}
	fields := len(c.Args) - idpos - 1
	if fields < 2 || fields%2 == 1 {
		c.W.Error("wrong number of arguments for 'xadd' command")
		return
	}
	// Before the lookup, so that no empty stream is left behind.
	if o.idGiven && o.form == engine.XAddExplicit && o.id.IsZero() {
		c.W.Error(engine.ErrXAddIDZero.Error())
		return
	}
	key := c.Args[1]
	s := c.Shard(key)
	e, st, ok := typed[*engine.Stream](c, s, key, engine.ForWrite)
	if !ok {
		return
	}
	created := st == nil
	if created {
		if o.noMkStream {
			c.W.Null()
			return
		}
		st = engine.NewStream()
	}
	form := engine.XAddAuto
	if o.idGiven {
		form = o.form
	}
	id, err := st.Add(o.id, form, c.Args[idpos+1:], c.Srv.Cfg.StreamNodeLimits(), c.Now)
	if err != nil {
		// Redis created the key before it tried: it stays, empty.
		if created {
			s.SetObject(c.DB, key, engine.KindStream, st, 0)
		}
		c.W.Error(err.Error())
		return
	}
	var trimmed int64
	if o.Strategy != engine.StreamTrimNone {
		trimmed = st.Trim(o.StreamTrimArgs)
	}
	if created {
		s.SetObject(c.DB, key, engine.KindStream, st, 0)
	} else {
		s.Touch(e)
	}
	c.W.Bulk(id.Append(c.buf[:0]))
	c.notify(notifyStream, "xadd", key)
	if trimmed > 0 {
		c.notify(notifyStream, "xtrim", key)
	}
	generated := !o.idGiven || o.form == engine.XAddAutoSeq
	if (generated || o.Approx) && c.Srv.Repl.Recording() {
		if !generated {
			idpos = 0
		}
		c.replicateAs(trimRewrite(c, st, &o, idpos, id)...)
	}
}

// streamInterval parses a range end (XRANGE, XPENDING, XAUTOCLAIM), "("
// making it exclusive, replying on error.
func streamInterval(c *Ctx, arg []byte, start bool) (engine.StreamID, bool) {
	missing := uint64(0)
	if !start {
		missing = math.MaxUint64
	}
	id, excl, err := engine.ParseStreamIntervalID(arg, missing)
	if err != nil {
		c.W.Error(err.Error())
		return id, false
	}
	if !excl {
		return id, true
	}
	var moved bool
	if start {
		if id, moved = id.Incr(); !moved {
			c.W.Error(msgXStartInterval)
		}
	} else if id, moved = id.Decr(); !moved {
		c.W.Error(msgXEndInterval)
	}
	return id, moved
}

func cmdXRange(c *Ctx)    { xrange(c, false) }
func cmdXRevRange(c *Ctx) { xrange(c, true) }

// xrange is XRANGE, and XREVRANGE (rev), whose first bound is the end.
func xrange(c *Ctx, rev bool) {
	startArg, endArg := c.Args[2], c.Args[3]
	if rev {
		startArg, endArg = endArg, startArg
	}
	start, ok := streamInterval(c, startArg, true)
	if !ok {
		return
	}
	end, ok := streamInterval(c, endArg, false)
	if !ok {
		return
	}
	count := int64(-1)
	for j := 4; j < len(c.Args); j++ {
		if !isC(c.Args[j], "COUNT") || j+1 >= len(c.Args) {
			c.W.Error(msgSyntax)
			return
		}
		j++
		n, ok := c.Int(j)
		if !ok {
			return
		}
		count = max(n, 0)
	}
	key := c.Args[1]
	_, st, ok := typed[*engine.Stream](c, c.Shard(key), key, engine.ForRead)
	switch {
	case !ok:
	case st == nil:
		c.W.Array(0)
	case count == 0:
		c.W.NullArray()
	default:
		streamRange(c.W, st, start, end, int(max(count, 0)), rev)
	}
}

func cmdXLen(c *Ctx) {
	key := c.Args[1]
	_, st, ok := typed[*engine.Stream](c, c.Shard(key), key, engine.ForRead)
	switch {
	case !ok:
	case st == nil:
		c.W.Int(0)
	default:
		c.W.Int(int64(st.Len()))
	}
}

func cmdXDel(c *Ctx) {
	key := c.Args[1]
	s := c.Shard(key)
	e, st, ok := typed[*engine.Stream](c, s, key, engine.ForWrite)
	if !ok {
		return
	}
	if st == nil {
		c.W.Int(0)
		return
	}
	// Every ID is checked before any entry goes.
	var buf [8]engine.StreamID
	ids := buf[:0]
	for _, a := range c.Args[2:] {
		id, err := engine.ParseStreamID(a, 0)
		if err != nil {
			c.W.Error(err.Error())
			return
		}
		ids = append(ids, id)
	}
	n := st.Delete(ids)
	if n > 0 {
		s.Touch(e)
		c.notify(notifyStream, "xdel", key)
	}
	c.W.Int(int64(n))
}

func cmdXTrim(c *Ctx) {
	o, _, ok := parseAddTrim(c, false)
	if !ok {
		return
	}
	key := c.Args[1]
	s := c.Shard(key)
	e, st, ok := typed[*engine.Stream](c, s, key, engine.ForWrite)
	if !ok {
		return
	}
	if st == nil {
		c.W.Int(0)
		return
	}
	n := st.Trim(o.StreamTrimArgs)
	if n > 0 {
		// Redis reports the event before it signals the key modified.
		c.notify(notifyStream, "xtrim", key)
		s.Touch(e)
		if o.Approx && c.Srv.Repl.Recording() {
			c.replicateAs(trimRewrite(c, st, &o, 0, engine.StreamID{})...)
		}
	}
	c.W.Int(n)
}

func cmdXSetID(c *Ctx) {
	id, err := engine.ParseStreamID(c.Args[2], 0)
	if err != nil {
		c.W.Error(err.Error())
		return
	}
	entriesAdded := int64(-1)
	var maxDeleted engine.StreamID
	for i := 3; i < len(c.Args); i += 2 {
		more := i+1 < len(c.Args)
		switch opt := c.Args[i]; {
		case isC(opt, "ENTRIESADDED") && more:
			n, ok := c.Int(i + 1)
			if !ok {
				return
			}
			if n < 0 {
				c.W.Error("entries_added must be positive")
				return
			}
			entriesAdded = n
		case isC(opt, "MAXDELETEDID") && more:
			if maxDeleted, err = engine.ParseStreamID(c.Args[i+1], 0); err == nil {
				err = engine.CheckXSetIDArgs(id, maxDeleted)
			}
			if err != nil {
				c.W.Error(err.Error())
				return
			}
		default:
			c.W.Error(msgSyntax)
			return
		}
	}
	key := c.Args[1]
	s := c.Shard(key)
	e, st, ok := typed[*engine.Stream](c, s, key, engine.ForWrite)
	switch {
	case !ok:
		return
	case st == nil:
		c.W.Error(msgNoSuchKey)
		return
	}
	if err := st.SetID(id, entriesAdded, maxDeleted); err != nil {
		c.W.Error(err.Error())
		return
	}
	s.TouchQuiet(e) // Redis does not signal XSETID as a change to the key
	c.W.OK()
	c.notify(notifyStream, "xsetid", key)
}

// xreadArgs are XREAD's and XREADGROUP's options.
type xreadArgs struct {
	block   bool
	timeout time.Duration // BLOCK's; 0 waits for ever
	count   int64         // 0: no limit
	streams int           // the first key's index
	n       int           // the number of keys
	// XREADGROUP's: group nil for XREAD.
	group, consumer []byte
	noack           bool
}

func cmdXRead(c *Ctx)      { xread(c, false) }
func cmdXReadGroup(c *Ctx) { xread(c, true) }

// parseXRead reads XREAD's (or, grouped, XREADGROUP's) options as
// xreadCommand, replying on error.
func parseXRead(c *Ctx, grouped bool) (a xreadArgs, ok bool) {
	args := c.Args
	for i := 1; i < len(args); i++ {
		more := len(args) - i - 1
		switch o := args[i]; {
		case isC(o, "BLOCK") && more > 0:
			if c.script {
				c.W.Error("ERR " + string(cstr(args[0])) + " command is not allowed with BLOCK option from scripts")
				return a, false
			}
			i++
			ms, isInt := engine.ParseInt(args[i])
			if !isInt {
				c.W.Error(msgXReadTimeout)
				return a, false
			}
			if ms < 0 {
				c.W.Error(msgXReadNegative)
				return a, false
			}
			// Past what a Duration holds (292 years) Redis's deadline
			// overflows and never comes: the same as for ever.
			a.block, a.timeout = true, time.Duration(min(ms, math.MaxInt64/int64(time.Millisecond)))*time.Millisecond
		case isC(o, "COUNT") && more > 0:
			i++
			n, ok := c.Int(i)
			if !ok {
				return a, false
			}
			a.count = max(n, 0)
		case isC(o, "STREAMS") && more > 0:
			a.streams = i + 1
			rest := len(args) - a.streams
			if rest%2 != 0 {
				c.W.Error(msgXReadUnbalanced)
				return a, false
			}
			a.n = rest / 2
			i = len(args)
		case isC(o, "GROUP") && more >= 2:
			if !grouped {
				c.W.Error(msgXReadGroupOpt)
				return a, false
			}
			a.group, a.consumer = args[i+1], args[i+2]
			i += 2
		case isC(o, "NOACK"):
			if !grouped {
				c.W.Error(msgXReadNoAckOpt)
				return a, false
			}
			a.noack = true
		default:
			c.W.Error(msgSyntax)
			return a, false
		}
	}
	if a.streams == 0 {
		c.W.Error(msgSyntax)
		return a, false
	}
	if grouped && a.group == nil {
		c.W.Error(msgXReadNoGroup)
		return a, false
	}
	return a, true
}

// xread is XREAD, and XREADGROUP (grouped): it serves at once every key
// that has something past its ID, or blocks on them all with BLOCK, or
// answers a null array.
func xread(c *Ctx, grouped bool) {
	a, ok := parseXRead(c, grouped)
	if !ok {
		return
	}
	var idBuf [8]engine.StreamID
	var groupBuf [8]*engine.StreamGroup
	ids := idBuf[:0]
	var groups []*engine.StreamGroup
	if grouped {
		groups = groupBuf[:0]
	}
	for i := 0; i < a.n; i++ {
		key, idArg := c.Args[a.streams+i], c.Args[a.streams+a.n+i]
		_, st, ok := typed[*engine.Stream](c, c.Shard(key), key, engine.ForRead)
		if !ok {
			return
		}
		if grouped {
			var g *engine.StreamGroup
			if st != nil {
				g = st.Group(a.group)
			}
			if g == nil {
				c.W.Error("NOGROUP No such key '" + string(cstr(key)) + "' or consumer group '" +
					string(cstr(a.group)) + "' in XREADGROUP with GROUP option")
				return
			}
			groups = append(groups, g)
		}
		var id engine.StreamID
		switch arg := cstr(idArg); {
		case len(arg) == 1 && arg[0] == '$':
			if grouped {
				c.W.Error(msgXReadDollar)
				return
			}
			if st != nil {
				id = st.LastID()
			}
		case len(arg) == 1 && arg[0] == '>':
			if !grouped {
				c.W.Error(msgXReadGreater)
				return
			}
			// ">" is the largest ID, as in Redis: an explicit
			// 18446744073709551615-18446744073709551615 reads as ">" too.
			id = engine.MaxStreamID
		default:
			var err error
			if id, err = engine.ParseStreamID(idArg, 0); err != nil {
				c.W.Error(err.Error())
				return
			}
		}
		ids = append(ids, id)
	}

	var rep *xreadRepl
	if grouped && c.Srv.Repl.Recording() {
		rep = xreadRepls.Get().(*xreadRepl)
		defer rep.release()
	}
	at, served := c.W.Len(), 0
	for i := 0; i < a.n; i++ {
		key := c.Args[a.streams+i]
		s := c.Shard(key)
		// Looked up again, as Redis does: hits and misses count twice.
		e, st, _ := engine.Get[*engine.Stream](s, c.DB, key, c.Now, engine.ForRead)
		if st == nil {
			continue
		}
		after, history := ids[i], false
		var g *engine.StreamGroup
		if grouped {
			g = groups[i]
			switch {
			case after != engine.MaxStreamID:
				history = true
			case st.HasNewEntriesFor(g):
				after = g.LastID()
			default:
				continue
			}
		} else if last, ok := st.LastValidID(); !ok || !after.Less(last) {
			continue
		}
		served++
		if c.W.Proto() == 2 {
			c.W.Array(2)
		}
		c.W.Bulk(key)
		if g == nil {
			from, _ := after.Incr()
			streamRange(c.W, st, from, engine.MaxStreamID, int(a.count), false)
			continue
		}
		readGroup(c, s, e, st, g, key, after, history, int(a.count), a.consumer, a.noack, rep)
	}
	if served > 0 {
		headerAt(c.W, at, served, c.W.Proto() != 2)
		if grouped {
			c.replicateGroupReads(rep, &a)
		}
		return
	}
	if !a.block || !c.mayBlock() {
		// No BLOCK, or a request that may not block (MULTI, a master's
		// stream): as if it had timed out.
		c.W.NullArray()
		return
	}
	w := &waiter{op: opStream, count: a.count, streams: a.streams, group: a.group, consumer: a.consumer, noack: a.noack}
	if w.count == 0 {
		w.count = xreadBlockedCount
	}
	w.ids = append([]engine.StreamID(nil), ids...)
	c.block(w, engine.KindStream, c.Args[a.streams:a.streams+a.n], a.timeout)
}

// readGroup reads for XREADGROUP from one stream (found under e in s)
// into rc.W: the consumer's pending entries after after (history), or
// the entries the group has yet to deliver, up to count (0: all), for
// the consumer, which it creates if need be. What the replicas must be
// told goes to rep, when one is given.
func readGroup(rc *Ctx, s *engine.Shard, e engine.Entry, st *engine.Stream, g *engine.StreamGroup, key []byte,
	after engine.StreamID, history bool, count int, consumer []byte, noack bool, rep *xreadRepl) {
	created := g.Consumer(consumer) == nil
	if created {
		rc.notify(notifyStream, "xgroup-createconsumer", key)
	}
	var fx *engine.StreamGroupEffects
	if rep != nil {
		fx = rep.begin(key, created)
	}
	w := rc.W
	at := w.Len()
	var n int
	if history {
		n = st.ReadGroupHistory(g, consumer, after, count, rc.Now, func(id engine.StreamID, fv [][]byte, ok bool) {
			if ok {
				streamEntry(w, id, fv)
				return
			}
			// A pending entry deleted since: its ID and a null.
			var buf [48]byte
			w.Array(2)
			w.Bulk(id.Append(buf[:0]))
			w.NullArray()
		})
	} else {
		n = st.ReadGroupNew(g, consumer, count, noack, rc.Now, fx, func(id engine.StreamID, fv [][]byte) {
			streamEntry(w, id, fv)
		})
	}
	headerAt(w, at, n, false)
	s.TouchQuiet(e) // a group's bookkeeping, not a change to the key (Redis signals none)
	if rep != nil {
		rep.end(g)
	}
}

// xreadRepl gathers what XREADGROUP replicates instead of itself, as
// Redis 7.0 propagates it, key by key: XGROUP CREATECONSUMER for a
// consumer NOACK created, an XCLAIM ... FORCE JUSTID LASTID per entry
// delivered, and XGROUP SETID when NOACK moved the group. They are sent
// once the command has done all its changes, which replicateAs requires;
// a read of history is told nothing, as in Redis.
type xreadRepl struct {
	fx     engine.StreamGroupEffects
	keys   []xreadReplKey
	claims []engine.StreamClaimEffect
	args   [][]byte
	num    []byte
}

type xreadReplKey struct {
	key            []byte
	created, setID bool
	claims         [2]int // the key's range of claims
	lastID         engine.StreamID
	entriesRead    int64
}

// The words of the commands xreadRepl sends, made once.
var (
	wordXGroup, wordXClaim        = []byte("XGROUP"), []byte("XCLAIM")
	wordCreateConsumer, wordSetID = []byte("CREATECONSUMER"), []byte("SETID")
	wordEntriesRead, wordZero     = []byte("ENTRIESREAD"), []byte("0")
	wordTime, wordRetryCount      = []byte("TIME"), []byte("RETRYCOUNT")
	wordForce, wordJustID         = []byte("FORCE"), []byte("JUSTID")
	wordLastID                    = []byte("LASTID")
)

// xreadRepls recycles the gatherers: a replicated XREADGROUP needs one.
var xreadRepls = sync.Pool{New: func() any { return new(xreadRepl) }}

func (r *xreadRepl) release() {
	clear(r.keys)
	r.keys = r.keys[:0]
	clear(r.claims)
	r.claims = r.claims[:0]
	clear(r.fx.Claims)
	r.fx = engine.StreamGroupEffects{Claims: r.fx.Claims[:0]}
	xreadRepls.Put(r)
}

// begin starts the effects of a read of key and returns where the
// engine records them.
func (r *xreadRepl) begin(key []byte, created bool) *engine.StreamGroupEffects {
	r.keys = append(r.keys, xreadReplKey{key: key, created: created, claims: [2]int{len(r.claims), len(r.claims)}})
	r.fx = engine.StreamGroupEffects{Claims: r.fx.Claims[:0]}
	return &r.fx
}

// end closes the read begun last, g being its group after it.
func (r *xreadRepl) end(g *engine.StreamGroup) {
	k := &r.keys[len(r.keys)-1]
	r.claims = append(r.claims, r.fx.Claims...)
	k.claims[1] = len(r.claims)
	k.setID, k.lastID, k.entriesRead = r.fx.SetID, g.LastID(), g.EntriesRead()
}

// commands calls fn with each command the reads gathered, in order. The
// arguments are valid during the call only.
func (r *xreadRepl) commands(group, consumer []byte, noack bool, fn func(args ...[]byte)) {
	for _, k := range r.keys {
		if k.created && noack {
			fn(wordXGroup, wordCreateConsumer, k.key, group, consumer)
		}
		for _, cl := range r.claims[k.claims[0]:k.claims[1]] {
			num := cl.ID.Append(r.num[:0])
			idEnd := len(num)
			num = strconv.AppendInt(num, cl.DeliveryTime, 10)
			timeEnd := len(num)
			num = strconv.AppendUint(num, cl.DeliveryCount, 10)
			countEnd := len(num)
			num = cl.LastID.Append(num)
			r.num = num
			r.args = append(r.args[:0], wordXClaim, k.key, group, []byte(cl.Consumer), wordZero,
				num[:idEnd], wordTime, num[idEnd:timeEnd], wordRetryCount, num[timeEnd:countEnd],
				wordForce, wordJustID, wordLastID, num[countEnd:])
			fn(r.args...)
		}
		if k.setID {
			num := k.lastID.Append(r.num[:0])
			idEnd := len(num)
			num = strconv.AppendInt(num, k.entriesRead, 10)
			r.num = num
			fn(wordXGroup, wordSetID, k.key, group, num[:idEnd], wordEntriesRead, num[idEnd:])
		}
	}
	clear(r.args)
}

// replicateGroupReads sends what XREADGROUP's reads gathered in rep (nil:
// nothing is recorded) in place of the command, or, while a full sync has
// yet to capture one of its keys' shards, leaves the states to go as for
// any command.
func (c *Ctx) replicateGroupReads(rep *xreadRepl, a *xreadArgs) {
	if rep == nil {
		return
	}
	s := c.Srv
	var m engine.Mask
	for _, key := range c.Args[a.streams : a.streams+a.n] {
		m = s.Eng.Add(m, key)
	}
	if !s.Repl.AsIs(m) {
		return
	}
	b := c.Client.batch()
	forShards(m, func(i int) { b.Expired(s.Eng.Shard(i)) })
	rep.commands(a.group, a.consumer, a.noack, func(args ...[]byte) { b.Command(c.DB, args...) })
}
