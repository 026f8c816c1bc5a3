package commands

import (
	"bytes"

	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/engine"
)

// sortCommands: SORT and SORT_RO. Key functions find the STORE key,
// and BY and GET patterns lock every shard.
func sortCommands() []*command {
	return []*command{
		cmd("sort", -2, "write denyoom may_wait", cmdSort).withKeys(sortKeys).withLockAll(sortReadsPatterns(false)),
		cmd("sort_ro", -2, "readonly may_wait", cmdSortRO).withKeys(sortROKeys).withLockAll(sortReadsPatterns(true)),
	}
}

// SORT and SORT_RO, as Redis's sort.c: sort a list, set or sorted set by
// its elements or by weights in other keys (BY), numerically or as strings
// (ALPHA), return a window (LIMIT) of the elements or of values looked up
// from them (GET), or store the result as a list (STORE).
//
// Locking: the key specs cannot name the keys BY and GET patterns read, nor
// the STORE key (which may come anywhere), so the rows carry a key function
// (sortKeys, Redis's sortGetKeys: the key and STORE's destination, for the
// locks, ACL and COMMAND GETKEYS) and a LockAll function (sortReadsPatterns:
// a pattern with a '*' reads keys anywhere, so every shard is locked, as
// Redis's single thread has them all). Without patterns only the shards of
// the key and of the destination are held: other keys are served while a
// big SORT runs. SORT runs off the event loops (MayWait), so a long one does
// not hold up the other connections of its loop either; the time it holds
// its locks is Redis's own algorithm in Go (load, weigh, sort, emit), which
// a test compares with Redis on a million elements.

const (
	msgSortScores = "One or more scores can't be converted into double"
	msgSortByACL  = "ERR BY option of SORT denied due to insufficient ACL permissions."
	msgSortGetACL = "ERR GET option of SORT denied due to insufficient ACL permissions."
)

// sortOpts are SORT's parsed options.
type sortOpts struct {
	desc, alpha, dontsort  bool
	limitStart, limitCount int64
	hasBy, hasStore        bool
	by, store              []byte
	gets                   [][]byte
}

// parseSort parses SORT's options in Redis's order. fullKeys reports
// whether the user may read every key (asked only for a BY or GET that
// reads other keys). On failure it returns the error to reply.
func parseSort(args [][]byte, readOnly bool, fullKeys func() bool) (o sortOpts, errMsg string) {
	o.limitCount = -1
	for j := 2; j < len(args); j++ {
		left := len(args) - j - 1
		a := args[j]
		switch {
		case is(a, "ASC"):
			o.desc = false
		case is(a, "DESC"):
			o.desc = true
		case is(a, "ALPHA"):
			o.alpha = true
		case is(a, "LIMIT") && left >= 2:
			var ok1, ok2 bool
			o.limitStart, ok1 = engine.ParseInt(args[j+1])
			o.limitCount, ok2 = engine.ParseInt(args[j+2])
			if !ok1 || !ok2 {
				return o, msgNotInteger
			}
			j += 2
		case !readOnly && is(a, "STORE") && left >= 1:
			o.hasStore, o.store = true, args[j+1]
			j++
		case is(a, "BY") && left >= 1:
			o.hasBy, o.by = true, args[j+1]
			if bytes.IndexByte(engine.CString(o.by), '*') < 0 {
				// A constant: nothing to weigh, the elements keep their order.
				o.dontsort = true
			} else if !fullKeys() {
				return o, msgSortByACL
			}
			j++
		case is(a, "GET") && left >= 1:
			if !fullKeys() {
				return o, msgSortGetACL
			}
			o.gets = append(o.gets, args[j+1])
			j++
		default:
			return o, msgSyntax
		}
	}
	return o, ""
}

// readsOtherKeys reports whether a pattern makes lookups: "#" is the
// element itself, and a pattern without '*' finds nothing.
func readsOtherKeys(pattern []byte) bool {
	p := engine.CString(pattern)
	return !(len(p) == 1 && p[0] == '#') && bytes.IndexByte(p, '*') >= 0
}

// sortReadsPatterns is SORT's LockAll: whether BY or GET read keys.
func sortReadsPatterns(readOnly bool) func(args [][]byte) bool {
	return func(args [][]byte) bool {
		o, msg := parseSort(args, readOnly, func() bool { return true })
		if msg != "" {
			return false
		}
		if o.hasBy && !o.dontsort {
			return true
		}
		for _, g := range o.gets {
			if readsOtherKeys(g) {
				return true
			}
		}
		return false
	}
}

// sortKeys is Redis's sortGetKeys: the key, and the last STORE's
// destination, found skipping the arguments of LIMIT, GET and BY.
func sortKeys(args [][]byte, out []cmdspec.KeyRef) []cmdspec.KeyRef {
	out = append(out, cmdspec.KeyRef{Pos: 1, Spec: 0})
	store := -1
	for i := 2; i < len(args); i++ {
		switch {
		case is(args[i], "LIMIT"):
			i += 2
		case is(args[i], "STORE") && i+1 < len(args):
			store = i + 1
		case is(args[i], "GET"), is(args[i], "BY"):
			i++
		}
	}
	if store >= 0 {
		out = append(out, cmdspec.KeyRef{Pos: store, Spec: 2})
	}
	return out
}

// sortROKeys is Redis's sortROGetKeys: only the key.
func sortROKeys(args [][]byte, out []cmdspec.KeyRef) []cmdspec.KeyRef {
	return append(out, cmdspec.KeyRef{Pos: 1, Spec: 0})
}

// fullKeyRead is ACLUserCheckCmdWithUnrestrictedKeyAccess for reads: some
// selector allows the command and every key.
func (c *Ctx) fullKeyRead() bool {
	r := c.Client.aclRules()
	return r == nil || r.FullKeyRead(c.Spec, c.Args)
}

// lookupByPattern is Redis's lookupKeyByPattern: "#" is subst itself;
// otherwise the first '*' of the pattern is replaced by subst, and
// "key->field" reads a hash field. A missing key, field, or a key of the
// wrong type gives nil. The value is copied into buf.
func (c *Ctx) lookupByPattern(pattern, subst []byte, keyBuf *[]byte, buf []byte) ([]byte, bool) {
	p := engine.CString(pattern)
	if len(p) == 1 && p[0] == '#' {
		return append(buf, subst...), true
	}
	star := bytes.IndexByte(p, '*')
	if star < 0 {
		return nil, false
	}
	var field []byte
	keyEnd := len(pattern)
	if f := bytes.Index(p[star+1:], []byte("->")); f >= 0 {
		f += star + 1
		if f+2 < len(p) {
			field = pattern[f+2:]
			keyEnd = f
		}
	}
	k := append((*keyBuf)[:0], pattern[:star]...)
	k = append(k, subst...)
	k = append(k, pattern[star+1:keyEnd]...)
	*keyBuf = k
	s := c.Shard(k)
	e, ok := s.Lookup(c.DB, k, c.Now)
	c.flushNotes(c.Shard(k))
	if !ok {
		return nil, false
	}
	if field != nil {
		if e.Kind() != engine.KindHash {
			return nil, false
		}
		_, h, err := engine.Get[*engine.Hash](s, c.DB, k, c.Now, engine.ForRead)
		if err != nil || h == nil {
			return nil, false
		}
		v, ok := h.Get(field)
		if !ok {
			return nil, false
		}
		return append(buf, v...), true
	}
	var num [24]byte
	v, err := e.StringOf(num[:])
	if err != nil {
		return nil, false
	}
	return append(buf, v...), true
}

func cmdSort(c *Ctx)   { sortCommand(c, false) }
func cmdSortRO(c *Ctx) { sortCommand(c, true) }

func sortCommand(c *Ctx, readOnly bool) {
	fullChecked, full := false, false
	o, msg := parseSort(c.Args, readOnly, func() bool {
		if !fullChecked {
			fullChecked, full = true, c.fullKeyRead()
		}
		return full
	})
	if msg != "" {
		c.W.Error(msg)
		return
	}
	key := c.Args[1]
	s := c.Shard(key)
	e, found := s.Lookup(c.DB, key, c.Now)
	c.flushNotes(c.Shard(key))
	var list *engine.List
	var zset *engine.ZSet
	var set *engine.Set
	isSet := false
	if found {
		switch e.Kind() {
		case engine.KindList:
			list = s.Object(e).(*engine.List)
		case engine.KindZSet:
			zset = s.Object(e).(*engine.ZSet)
		case engine.KindSet:
			set, isSet = s.Object(e).(*engine.Set), true
		default:
			c.W.Error(msgWrongType)
			return
		}
	}
	// A set sorted BY a constant is sorted ALPHA anyway when stored or
	// called from a script, so that replicas and scripts see one order.
	if isSet && o.dontsort && (o.hasStore || c.script) {
		o.dontsort, o.alpha, o.hasBy = false, true, false
	}

	n := 0
	switch {
	case list != nil:
		n = list.Len()
	case zset != nil:
		n = zset.Len()
	case set != nil:
		n = set.Len()
	}
	// LIMIT, clamped to the elements as Redis does, so huge values are
	// harmless.
	vlen := int64(n)
	start := min(max(o.limitStart, 0), vlen)
	count := min(max(o.limitCount, -1), vlen)
	end := vlen - 1
	if count >= 0 {
		end = start + count - 1
	}
	if start >= vlen {
		start, end = vlen-1, vlen-2
	}
	end = min(end, vlen-1)

	// Load the elements: with nothing to sort, only the window, in the
	// key's order (reversed for DESC).
	var items []engine.SortItem
	var arena []byte
	add := func(v []byte) {
		items = append(items, engine.SortItem{Off: len(arena), N: int32(len(v))})
		arena = append(arena, v...)
	}
	if (list != nil || zset != nil) && o.dontsort && (start != 0 || end != vlen-1) {
		vlen = max(end-start+1, 0)
	}
	items = make([]engine.SortItem, 0, vlen)
	window := o.dontsort
	switch {
	case list != nil && window:
		if end >= start {
			if o.desc {
				for _, v := range list.Descend(n-1-int(start), nil) {
					if int64(len(items)) == vlen {
						break
					}
					add(v)
				}
			} else {
				for _, v := range list.Ascend(int(start), nil) {
					if int64(len(items)) == vlen {
						break
					}
					add(v)
				}
			}
			end -= start
			start = 0
		}
	case list != nil:
		for _, v := range list.Ascend(0, nil) {
			add(v)
		}
	case zset != nil && window:
		lo := int(start)
		if o.desc {
			lo = n - int(start) - int(vlen)
		}
		zset.Range(lo, lo+int(vlen), o.desc, nil, func(m []byte, _ float64) bool {
			add(m)
			return true
		})
		end -= start
		start = 0
	case zset != nil:
		zset.Range(0, n, false, nil, func(m []byte, _ float64) bool {
			add(m)
			return true
		})
	case set != nil:
		for m := range set.All() {
			add(m)
		}
	}
	elem := func(it *engine.SortItem) []byte { return arena[it.Off : it.Off+int(it.N) : it.Off+int(it.N)] }

	var keyBuf, weights []byte
	var order []int32 // the sorted order of items; nil: as loaded
	if !o.dontsort {
		badScore := false
		var wbuf []byte
		for i := range items {
			it := &items[i]
			var w []byte
			if o.hasBy {
				v, ok := c.lookupByPattern(o.by, elem(it), &keyBuf, wbuf[:0])
				if !ok {
					continue
				}
				w = v
			} else {
				w = elem(it)
			}
			if o.alpha {
				if o.hasBy {
					it.CmpOff, it.CmpN, it.HasCmp = len(weights), int32(len(w)), true
					weights = append(weights, w...)
					wbuf = w
				}
				continue
			}
			f, ok := engine.ParseSortWeight(w)
			if !ok {
				badScore = true
			}
			it.Score = f
			if o.hasBy {
				wbuf = w // the lookup's buffer, reused
			}
		}
		if badScore {
			c.W.Error(msgSortScores)
			return
		}
		order = engine.SortOrder(items, arena, weights, engine.SortSpec{Desc: o.desc, Alpha: o.alpha, By: o.hasBy, Store: o.hasStore}, start, end)
	}
	at := func(j int64) *engine.SortItem {
		if order != nil {
			return &items[order[j]]
		}
		return &items[j]
	}

	outLen := max(end-start+1, 0)
	if len(o.gets) > 0 {
		outLen *= int64(len(o.gets))
	}
	if !o.hasStore {
		c.W.Array(int(outLen))
		var vbuf []byte
		for j := start; j <= end; j++ {
			it := at(j)
			if len(o.gets) == 0 {
				c.W.Bulk(elem(it))
			}
			for _, g := range o.gets {
				v, ok := c.lookupByPattern(g, elem(it), &keyBuf, vbuf[:0])
				if !ok {
					c.W.Null()
				} else {
					c.W.Bulk(v)
					vbuf = v
				}
			}
		}
		return
	}
	dest := o.store
	if outLen == 0 {
		c.deleteStored(dest)
		c.W.Int(0)
		return
	}
	out := engine.NewList()
	var vbuf []byte
	for j := start; j <= end; j++ {
		it := at(j)
		if len(o.gets) == 0 {
			out.PushTail(elem(it))
			continue
		}
		for _, g := range o.gets {
			v, _ := c.lookupByPattern(g, elem(it), &keyBuf, vbuf[:0])
			out.PushTail(v) // a missing value is stored as ""
			vbuf = v
		}
	}
	c.storeObject(dest, engine.KindList, out)
	c.notify(notifyList, "sortstore", dest)
	c.W.Int(outLen)
}
