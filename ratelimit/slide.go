package ratelimit

import "encoding/binary"

// RL.SLIDE: an exact sliding window over a log of recorded requests.
//
// A request at time t is allowed if, for every rule, the costs recorded in
// (t - window, t] plus its own cost fit the limit. The log holds (time,
// cost) entries, oldest first; requests of the same millisecond share one
// entry.
//
// The log never holds more entries than the largest limit. An entry E can
// be dropped once, for every rule, either E has left the rule's window or
// the entries newer than E already cost at least the rule's limit: while E
// is in a rule's window, so are all newer entries, which alone already fill
// the limit, so E changes no decision, no remaining count, no retry time
// (the newer entries must start leaving first, and E leaves before them) and
// no reset time (which the newest entry decides). Droppable entries form a
// prefix of the log; what is kept has less than the largest limit newer
// than each entry, hence at most that many entries, PENALIZE included.
//
// A log is read in two layouts and written in the second.
//
// Compact (the kind byte without slideRoomy), as earlier versions wrote it:
//
//	count, total cost, time of the oldest entry      (uvarint, uvarint, varint)
//	time, cost and delta-from-previous of the newest (varint, uvarint, uvarint)
//	the other entries, oldest first: the first as its cost, each later one
//	as its delta from the previous and its cost      (uvarints)
//
// Roomy (slideRoomy set), in which a request changes the state where it
// lies, so that a decision touches the header and the two ends of the log
// whatever its length:
//
//	count, start, end, region size                   (uint32 LE each)
//	total cost, time of the oldest entry, time, cost
//	and delta-from-previous of the newest            (uint64 LE each)
//	region: the other entries, oldest first, in region[start:end], each as
//	its delta from the previous and its cost (uvarints); the first one's
//	delta is stale (its time is the header's) and is not read
//
// A request in a new millisecond appends the newest entry's old fields at
// end; pruning moves start past the entries dropped. When the room after
// end runs out the entries move to the region's front, and when the region
// is too small (or four times too big) the state is written anew, with
// room to grow by a quarter. Window sums are the total minus the old
// entries at the front that have left the window.

// slideRoomy flags a log in the roomy layout.
const slideRoomy byte = 0x40

// roomyHead is the size of the roomy layout's header.
const roomyHead = 4*4 + 5*8

// roomyCounts reads a roomy header's counts; ok is false when they do not
// fit the body (the region's size is there so that a state cut short is
// found out even where it cut only room).
func roomyCounts(body []byte) (n int64, start, end int, ok bool) {
	if len(body) < roomyHead {
		return 0, 0, 0, false
	}
	n = int64(binary.LittleEndian.Uint32(body))
	start, end = int(binary.LittleEndian.Uint32(body[4:])), int(binary.LittleEndian.Uint32(body[8:]))
	size := int(binary.LittleEndian.Uint32(body[12:]))
	return n, start, end, n > 0 && start <= end && end <= size && size == len(body)-roomyHead
}

// olderSpan returns the prefix of b that holds entries older entries, in
// the roomy layout (each with its delta) or the compact one (the first
// without); ok is false when b runs out first.
func olderSpan(b []byte, entries int64, roomy bool) ([]byte, bool) {
	r := varintReader{b: b}
	for i := int64(0); i < entries && !r.bad; i++ {
		if i > 0 || roomy {
			r.uvarint()
		}
		r.uvarint()
	}
	return b[:len(b)-len(r.b)], !r.bad
}

// SlideOptions are RL.SLIDE's options.
type SlideOptions struct {
	Cost     int64
	Peek     bool
	Penalize bool  // record denied requests too
	Ban      int64 // BAN: ms a rule's denial bans the key for; 0 for none
}

// slideLog is a decoded header with the undecoded older entries, and
// the entry a request in a new millisecond moved out of the newest, which
// is not in older yet (pend).
type slideLog struct {
	n, total  int64
	firstT    int64
	lastT     int64
	lastCost  int64
	lastDelta int64
	older     []byte // the older entries, oldest first
	roomy     bool   // older's first entry carries a delta (not read)
	body      []byte // the roomy body read, for updateInPlace
	hasPend   bool
	pendT     int64
	pendCost  int64
	pendDelta int64
}

// parseSlideLog reads a state; a missing or damaged one reads as empty.
func parseSlideLog(st []byte) slideLog {
	body, _, ok := stateBody(st, KindSlide)
	if !ok {
		return slideLog{}
	}
	var l slideLog
	if st[0]&slideRoomy != 0 {
		n, start, end, ok := roomyCounts(body)
		if !ok {
			return slideLog{}
		}
		region := body[roomyHead:]
		h := body[16:]
		l = slideLog{n: n, total: int64(binary.LittleEndian.Uint64(h)), firstT: int64(binary.LittleEndian.Uint64(h[8:])),
			lastT: int64(binary.LittleEndian.Uint64(h[16:])), lastCost: int64(binary.LittleEndian.Uint64(h[24:])),
			lastDelta: int64(binary.LittleEndian.Uint64(h[32:])), older: region[start:end], roomy: true, body: body}
		return l
	}
	r := varintReader{b: body}
	l.n, l.total, l.firstT = int64(r.uvarint()), int64(r.uvarint()), r.varint()
	l.lastT, l.lastCost, l.lastDelta = r.varint(), int64(r.uvarint()), int64(r.uvarint())
	if r.bad || l.n <= 0 {
		return slideLog{}
	}
	l.older = r.b
	return l
}

// slideIter walks a log oldest first: the older entries, the pending one,
// the newest. It copies what it needs rather than pointing at the log,
// which keeps the log on the stack.
type slideIter struct {
	n, firstT, lastT, lastCost int64
	nOlder                     int64 // entries in r
	pendT, pendCost            int64
	roomy                      bool
	i                          int64 // entries returned so far
	t                          int64
	r                          varintReader // the older entries not read yet
}

func (l *slideLog) iter() slideIter {
	it := slideIter{n: l.n, firstT: l.firstT, lastT: l.lastT, lastCost: l.lastCost, nOlder: l.n - 1,
		roomy: l.roomy, r: varintReader{b: l.older}}
	if l.hasPend {
		it.nOlder--
		it.pendT, it.pendCost = l.pendT, l.pendCost
	}
	return it
}

func (it *slideIter) next() (t, cost int64, ok bool) {
	switch {
	case it.i >= it.n:
		return 0, 0, false
	case it.i == it.n-1:
		it.i++
		return it.lastT, it.lastCost, true
	case it.i == it.nOlder:
		it.i++
		return it.pendT, it.pendCost, true
	}
	if it.i == 0 {
		if it.roomy {
			it.r.uvarint()
		}
		it.t = it.firstT
	} else {
		it.t += int64(it.r.uvarint())
	}
	c := int64(it.r.uvarint())
	it.i++
	return it.t, c, true
}

// sum is the cost recorded in (now - w, now]. Entries stamped after now
// (the clock moved back) count as if they were now.
func (l *slideLog) sum(now, w int64) int64 {
	cut := now - w
	if l.n == 0 || l.lastT <= cut {
		return 0
	}
	if l.firstT > cut {
		return l.total
	}
	out := int64(0)
	it := l.iter()
	for {
		t, c, ok := it.next()
		if !ok || t > cut {
			break
		}
		out += c
	}
	return l.total - out
}

// fitsAt returns the earliest time >= now at which cost fits rule r, with
// no other traffic: the time the entries that must leave have left.
func (l *slideLog) fitsAt(now int64, r Rule, cost int64) int64 {
	sum := l.sum(now, r.Window)
	if sum+cost <= r.Limit {
		return now
	}
	it := l.iter()
	for {
		t, c, ok := it.next()
		if !ok {
			return now // unreachable: cost <= limit once every entry has left
		}
		if t <= now-r.Window {
			continue
		}
		sum -= c
		if sum+cost <= r.Limit {
			return t + r.Window
		}
	}
}

// resetAfter is the time until nothing recorded is left in a window of w.
func (l *slideLog) resetAfter(now, w int64) int64 {
	if l.n > 0 && l.lastT > now-w {
		return l.lastT + w - now
	}
	return 0
}

// record adds a request of cost at now: merged into the newest entry when
// that is of the same millisecond (or later: the clock moved back), else
// the newest becomes the pending entry and the request the newest. The
// state being read is never written here.
func (l *slideLog) record(now, cost int64) {
	l.total += cost
	switch {
	case l.n > 0 && l.lastT >= now:
		l.lastCost += cost
		return
	case l.n == 0:
		l.n, l.firstT, l.lastT, l.lastCost, l.lastDelta = 1, now, now, cost, 0
		return
	}
	l.hasPend, l.pendT, l.pendCost, l.pendDelta = true, l.lastT, l.lastCost, l.lastDelta
	l.lastDelta = now - l.lastT
	l.lastT, l.lastCost = now, cost
	l.n++
}

// DecideSlide runs RL.SLIDE. It returns the decision and, when the state
// changes, the new state (appended to out) with the key's new expiry: when
// the newest entry leaves the longest window. It never writes old.
func DecideSlide(old []byte, rules []Rule, now int64, o SlideOptions, out []byte) (d Decision, state []byte, expireAt int64, write bool) {
	return decideSlide(old, rules, now, o, out, false)
}

// DecideSlideInPlace is DecideSlide allowed to write the new state over
// old: when old is a roomy log, with no ban before or after, and has room
// for what the request adds, it does, and state is old itself. Otherwise
// the new state is appended to out with room to grow, for the next
// request to be written in place.
func DecideSlideInPlace(old []byte, rules []Rule, now int64, o SlideOptions, out []byte) (d Decision, state []byte, expireAt int64, write bool) {
	return decideSlide(old, rules, now, o, out, true)
}

func decideSlide(old []byte, rules []Rule, now int64, o SlideOptions, out []byte, inPlace bool) (d Decision, state []byte, expireAt int64, write bool) {
	l := parseSlideLog(old)
	_, banEnd, _ := stateBody(old, KindSlide)
	banned := now < banEnd
	allowed := true
	for _, r := range rules {
		if l.sum(now, r.Window)+o.Cost > r.Limit {
			allowed = false
			break
		}
	}
	// An allowed request is counted in the reply (PEEK says what would be
	// left); a denied one (by a rule or by a ban) only when PENALIZE
	// records it for real, so that a PEEK's retry time holds for the state
	// as it is. During a ban an allowed request is not counted either.
	record := allowed && !banned || (o.Penalize && !o.Peek)
	if record {
		l.record(now, o.Cost)
	}

	d.Allowed = allowed && !banned
	if allowed {
		best := -1
		for i, r := range rules {
			left := r.Limit - l.sum(now, r.Window)
			if best < 0 || left < d.Remaining {
				best, d.Remaining = i, left
			}
		}
		d.Limit = rules[best].Limit
		d.RetryAfter = -1
		d.ResetAfter = l.resetAfter(now, rules[best].Window)
	} else {
		best, at := -1, int64(0)
		for i, r := range rules {
			if t := l.fitsAt(now, r, o.Cost); best < 0 || t > at {
				best, at = i, t
			}
		}
		r := rules[best]
		d.Limit = r.Limit
		d.Remaining = max(r.Limit-l.sum(now, r.Window), 0)
		d.RetryAfter = at - now
		d.ResetAfter = l.resetAfter(now, r.Window)
	}
	if banned {
		// The ban's end, or later if a rule (which PENALIZE may just have
		// filled) needs longer.
		at := banEnd
		for _, r := range rules {
			at = max(at, l.fitsAt(now, r, o.Cost))
		}
		d.RetryAfter = max(d.RetryAfter, at-now)
	}
	write = record && !o.Peek
	if !allowed && !banned && o.Ban > 0 && !o.Peek {
		// A rule's denial starts a ban.
		banEnd = now + o.Ban
		d.RetryAfter = max(d.RetryAfter, o.Ban)
		d.BanStarted = true
		write = true
	}
	if !write {
		return d, nil, 0, false
	}
	var longest int64
	for _, r := range rules {
		longest = max(longest, r.Window)
	}
	expireAt = l.lastT + longest - 1
	if banEnd > now {
		expireAt = max(expireAt, banEnd-1)
	}
	p := l.prune(rules, now)
	if inPlace && banEnd <= now && l.body != nil && old[0] == KindSlide|slideRoomy && l.updateInPlace(p) {
		return d, old, expireAt, true
	}
	return d, l.encode(appendHead(out, KindSlide|slideRoomy, banEnd, now), p, inPlace), expireAt, true
}

// pruned is the prefix of entries that can no longer change a decision
// under rules (never the newest): an entry is dropped once, for every rule,
// it has left the window or the entries newer than it already cost the
// limit.
type pruned struct {
	n, cost         int64
	kept            bool   // an entry besides the newest is kept
	keptPend        bool   // the first kept is the pending entry
	keptT, keptCost int64  // the first kept
	from            []byte // the older bytes from the first kept one, when it is there
	rest            []byte // those after it
}

func (l *slideLog) prune(rules []Rule, now int64) (p pruned) {
	newer := l.total
	it := l.iter()
	for i := int64(0); i < l.n-1; i++ {
		from := it.r.b
		t, c, _ := it.next()
		droppable := true
		for _, r := range rules {
			if t > now-r.Window && newer-c < r.Limit {
				droppable = false
				break
			}
		}
		if !droppable {
			p.kept, p.keptT, p.keptCost = true, t, c
			p.keptPend = l.hasPend && i == it.nOlder
			if !p.keptPend {
				p.from, p.rest = from, it.r.b
			}
			return p
		}
		newer -= c
		p.n++
		p.cost += c
	}
	return p
}

// encode appends the log's body in the roomy layout (out holds the
// state's head) without its pruned prefix, with room after the entries
// when room is set.
func (l *slideLog) encode(out []byte, p pruned, room bool) []byte {
	head := len(out)
	state := append(out, make([]byte, roomyHead)...)
	if p.kept {
		state = appendPair(state, 0, p.keptCost)
		if !p.keptPend {
			// The entries after the first kept one, each with its delta.
			// The roomy layout's are exactly those; the compact one may
			// end in bytes that are no entry, so its are counted out.
			rest := p.rest
			if !l.roomy {
				left := l.n - 2 - p.n
				if l.hasPend {
					left--
				}
				rest, _ = olderSpan(rest, left, true)
			}
			state = append(state, rest...)
			if l.hasPend {
				state = appendPair(state, l.pendDelta, l.pendCost)
			}
		}
	}
	used := len(state) - head - roomyHead
	if room {
		state = append(state, make([]byte, used/4+8)...)
	}
	l.putHead(state[head:], p, 0, used, len(state)-head-roomyHead)
	return state
}

// updateInPlace writes the log, without its pruned prefix, over the roomy
// body it was read from. It reports false, having written nothing, when
// the region has no room for it or would be four times too big.
func (l *slideLog) updateInPlace(p pruned) bool {
	body := l.body
	region := body[roomyHead:]
	_, start, end, _ := roomyCounts(body)
	var pend [2 * binary.MaxVarintLen64]byte
	var add []byte
	switch {
	case !p.kept || p.keptPend:
		start, end = 0, 0
		if p.keptPend {
			add = appendPair(pend[:0], 0, l.pendCost)
		}
	default:
		start = end - len(p.from)
		if l.hasPend {
			add = appendPair(pend[:0], l.pendDelta, l.pendCost)
		}
	}
	if end+len(add) > len(region) {
		live := end - start
		if live+len(add) > len(region) || 4*(live+len(add)) < len(region) {
			return false
		}
		copy(region, region[start:end])
		start, end = 0, live
	}
	end += copy(region[end:], add)
	l.putHead(body, p, start, end, len(region))
	return true
}

// putHead writes the roomy header of the log without its pruned prefix
// p, its older entries in region[start:end] of a region of size bytes.
func (l *slideLog) putHead(h []byte, p pruned, start, end, size int) {
	firstT, lastDelta := l.lastT, int64(0)
	if p.kept {
		firstT, lastDelta = p.keptT, l.lastDelta
	}
	binary.LittleEndian.PutUint32(h, uint32(l.n-p.n))
	binary.LittleEndian.PutUint32(h[4:], uint32(start))
	binary.LittleEndian.PutUint32(h[8:], uint32(end))
	binary.LittleEndian.PutUint32(h[12:], uint32(size))
	binary.LittleEndian.PutUint64(h[16:], uint64(l.total-p.cost))
	binary.LittleEndian.PutUint64(h[24:], uint64(firstT))
	binary.LittleEndian.PutUint64(h[32:], uint64(l.lastT))
	binary.LittleEndian.PutUint64(h[40:], uint64(l.lastCost))
	binary.LittleEndian.PutUint64(h[48:], uint64(lastDelta))
}

// appendPair appends an older entry: its delta and its cost.
func appendPair(b []byte, delta, cost int64) []byte {
	b = binary.AppendUvarint(b, uint64(delta))
	return binary.AppendUvarint(b, uint64(cost))
}
