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
// State body, laid out so that a decision touches only the ends of the log:
//
//	count, total cost, time of the oldest entry      (uvarint, uvarint, varint)
//	time, cost and delta-from-previous of the newest (varint, uvarint, uvarint)
//	the other entries, oldest first: the first as its cost, each later one
//	as its delta from the previous and its cost      (uvarints)
//
// Window sums are the total minus the old entries at the front that have
// left the window; the newest entry is merged or appended in the header;
// pruning re-encodes one entry and copies the rest of the bytes.

// SlideOptions are RL.SLIDE's options.
type SlideOptions struct {
	Cost     int64
	Peek     bool
	Penalize bool  // record denied requests too
	Ban      int64 // BAN: ms a rule's denial bans the key for; 0 for none
}

// slideLog is a decoded header with the undecoded older entries.
type slideLog struct {
	n, total  int64
	firstT    int64
	lastT     int64
	lastCost  int64
	lastDelta int64
	older     []byte // entries 0..n-2
}

// parseSlideLog reads a state; a missing or damaged one reads as empty.
func parseSlideLog(st []byte) slideLog {
	body, _, ok := stateBody(st, KindSlide)
	if !ok {
		return slideLog{}
	}
	r := varintReader{b: body}
	var l slideLog
	l.n, l.total, l.firstT = int64(r.uvarint()), int64(r.uvarint()), r.varint()
	l.lastT, l.lastCost, l.lastDelta = r.varint(), int64(r.uvarint()), int64(r.uvarint())
	if r.bad || l.n <= 0 {
		return slideLog{}
	}
	l.older = r.b
	return l
}

// slideIter walks a log oldest first, the newest entry last. It copies
// what it needs rather than pointing at the log, which keeps the log on the
// stack.
type slideIter struct {
	n, firstT, lastT, lastCost int64
	i                          int64 // entries returned so far
	t                          int64
	r                          varintReader // the older entries not read yet
}

func (l *slideLog) iter() slideIter {
	return slideIter{n: l.n, firstT: l.firstT, lastT: l.lastT, lastCost: l.lastCost, r: varintReader{b: l.older}}
}

func (it *slideIter) next() (t, cost int64, ok bool) {
	switch {
	case it.i >= it.n:
		return 0, 0, false
	case it.i == it.n-1:
		it.i++
		return it.lastT, it.lastCost, true
	}
	if it.i == 0 {
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
// appended, the old newest moving to the older bytes (copied into the
// scratch buffer, so the state being read is never written).
func (l *slideLog) record(now, cost int64, sc *SlideScratch) {
	l.total += cost
	switch {
	case l.n > 0 && l.lastT >= now:
		l.lastCost += cost
		return
	case l.n == 0:
		l.n, l.firstT, l.lastT, l.lastCost, l.lastDelta = 1, now, now, cost, 0
		return
	}
	b := append(sc.buf[:0], l.older...)
	if l.n > 1 {
		b = binary.AppendUvarint(b, uint64(l.lastDelta))
	}
	b = binary.AppendUvarint(b, uint64(l.lastCost))
	sc.buf = b
	l.older = b
	l.lastDelta = now - l.lastT
	l.lastT, l.lastCost = now, cost
	l.n++
}

// SlideScratch is the reusable buffer of DecideSlide, so that a decision
// on an existing key allocates nothing.
type SlideScratch struct {
	buf []byte
}

// DecideSlide runs RL.SLIDE. It returns the decision and, when the state
// changes, the new state (appended to out) with the key's new expiry: when
// the newest entry leaves the longest window.
func DecideSlide(old []byte, rules []Rule, now int64, o SlideOptions, sc *SlideScratch, out []byte) (d Decision, state []byte, expireAt int64, write bool) {
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
		l.record(now, o.Cost, sc)
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
	return d, l.encode(appendHead(out, KindSlide, banEnd, now), rules, now), expireAt, true
}

// encode appends the log's body (out holds the state's head) without its
// prefix of entries that can no longer change a decision under rules: the
// first kept entry is re-encoded, the bytes after it copied. The newest
// entry always stays.
func (l *slideLog) encode(out []byte, rules []Rule, now int64) []byte {
	newer := l.total
	var dropped, droppedCost, keepT, keepCost int64
	var rest []byte
	kept := false
	it := l.iter()
	for i := int64(0); i < l.n-1; i++ {
		t, c, _ := it.next()
		droppable := true
		for _, r := range rules {
			if t > now-r.Window && newer-c < r.Limit {
				droppable = false
				break
			}
		}
		if !droppable {
			kept, keepT, keepCost, rest = true, t, c, it.r.b
			break
		}
		newer -= c
		dropped++
		droppedCost += c
	}
	n := l.n - dropped
	firstT, lastDelta := l.lastT, int64(0)
	if kept {
		firstT, lastDelta = keepT, l.lastDelta
	}
	state := binary.AppendUvarint(out, uint64(n))
	state = binary.AppendUvarint(state, uint64(l.total-droppedCost))
	state = binary.AppendVarint(state, firstT)
	state = binary.AppendVarint(state, l.lastT)
	state = binary.AppendUvarint(state, uint64(l.lastCost))
	state = binary.AppendUvarint(state, uint64(lastDelta))
	if kept {
		state = binary.AppendUvarint(state, uint64(keepCost))
		state = append(state, rest...)
	}
	return state
}
