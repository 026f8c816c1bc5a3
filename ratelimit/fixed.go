package ratelimit

import "encoding/binary"

// RL.FIXED: one counter per rule, for the window that holds now.
//
// State body: a count of entries, then per entry its window (ms), its
// alignment (0 epoch, 1 first), the start of the window it counts (ms) and
// the count. An entry serves the rule with the same window and alignment;
// with ALIGN EPOCH it counts only if its start is the current window's
// start, so a window that rolled over (or a changed TZ) starts from zero.
// The size is constant per rule, whatever the limit or the traffic.

// FixedOptions are RL.FIXED's options.
type FixedOptions struct {
	Cost  int64
	Peek  bool
	First bool  // ALIGN FIRST: a window opens with the first request finding none
	Zone  *Zone // ALIGN EPOCH in this zone; nil for UTC
	Ban   int64 // BAN: ms a rule's denial bans the key for; 0 for none
}

const (
	alignEpoch byte = 0
	alignFirst byte = 1
)

type fixedEntry struct {
	window int64
	align  byte
	start  int64
	count  int64
}

// parseFixed decodes a state into entries; a damaged state reads as empty.
func parseFixed(st []byte, out []fixedEntry) []fixedEntry {
	out = out[:0]
	body, _, ok := stateBody(st, KindFixed)
	if !ok {
		return out
	}
	r := varintReader{b: body}
	n := r.uvarint()
	for i := uint64(0); i < n && !r.bad; i++ {
		e := fixedEntry{window: int64(r.uvarint()), align: r.byte(), start: r.varint(), count: int64(r.uvarint())}
		out = append(out, e)
	}
	if r.bad {
		return out[:0]
	}
	return out
}

// FixedScratch holds the reusable buffers of DecideFixed, so that a
// decision on an existing key allocates nothing.
type FixedScratch struct {
	entries []fixedEntry
	windows []fixedWindow
}

type fixedWindow struct {
	start, end, count int64
}

// DecideFixed runs RL.FIXED. It returns the decision and, when the state
// changes, the new state (appended to out) with the key's new expiry: the
// end of the last window that still counts something, after which the key
// no longer affects any decision.
func DecideFixed(old []byte, rules []Rule, now int64, o FixedOptions, sc *FixedScratch, out []byte) (d Decision, state []byte, expireAt int64, write bool) {
	if len(rules) == 1 && !o.First {
		if d, state, expireAt, write, ok := decideOneEpoch(old, rules[0], now, o, out); ok {
			return d, state, expireAt, write
		}
	}
	return decideFixed(old, rules, now, o, sc, out)
}

// decideFixed is DecideFixed's general path.
func decideFixed(old []byte, rules []Rule, now int64, o FixedOptions, sc *FixedScratch, out []byte) (d Decision, state []byte, expireAt int64, write bool) {
	sc.entries = parseFixed(old, sc.entries)
	sc.windows = sc.windows[:0]
	align := alignEpoch
	if o.First {
		align = alignFirst
	}
	allowed := true
	for _, r := range rules {
		var w fixedWindow
		var stored *fixedEntry
		for i := range sc.entries {
			if e := &sc.entries[i]; e.window == r.Window && e.align == align {
				stored = e
				break
			}
		}
		if o.First {
			if stored != nil && now < stored.start+r.Window {
				w = fixedWindow{stored.start, stored.start + r.Window, stored.count}
			} else {
				w = fixedWindow{now, now + r.Window, 0}
			}
		} else {
			w.start, w.end = windowBounds(now, r.Window, o.Zone)
			if stored != nil && stored.start == w.start {
				w.count = stored.count
			}
		}
		if w.count+o.Cost > r.Limit {
			allowed = false
		}
		sc.windows = append(sc.windows, w)
	}

	// During a ban nothing is counted: an allowed request's fields are the
	// rules' state as it is.
	_, banEnd, _ := stateBody(old, KindFixed)
	banned := now < banEnd
	cost := o.Cost
	if banned {
		cost = 0
	}
	d.Allowed = allowed && !banned
	if allowed {
		best := -1
		for i, r := range rules {
			left := r.Limit - (sc.windows[i].count + cost)
			if best < 0 || left < d.Remaining {
				best, d.Remaining = i, left
			}
		}
		d.Limit = rules[best].Limit
		d.RetryAfter = -1
		if w := sc.windows[best]; w.count+cost > 0 {
			d.ResetAfter = w.end - now
		}
	} else {
		best := -1
		for i, r := range rules {
			w := sc.windows[i]
			if w.count+o.Cost <= r.Limit {
				continue
			}
			if wait := w.end - now; best < 0 || wait > d.RetryAfter {
				best, d.RetryAfter = i, wait
			}
		}
		w := sc.windows[best]
		d.Limit = rules[best].Limit
		d.Remaining = max(rules[best].Limit-w.count, 0)
		if w.count > 0 {
			d.ResetAfter = w.end - now
		}
	}
	switch {
	case banned:
		d.RetryAfter = max(d.RetryAfter, banEnd-now)
		return d, nil, 0, false
	case o.Peek:
		return d, nil, 0, false
	case !allowed && o.Ban > 0:
		// A rule's denial starts a ban: the counts are kept as they are.
		banEnd, cost = now+o.Ban, 0
		d.RetryAfter = max(d.RetryAfter, o.Ban)
		d.BanStarted = true
		expireAt = banEnd - 1
	case !allowed:
		return d, nil, 0, false
	}

	state = appendHead(out, KindFixed, banEnd, now)
	n := 0
	for _, w := range sc.windows {
		if w.count+cost > 0 {
			n++
		}
	}
	state = binary.AppendUvarint(state, uint64(n))
	for i, r := range rules {
		w := sc.windows[i]
		if w.count+cost == 0 {
			continue
		}
		state = binary.AppendUvarint(state, uint64(r.Window))
		state = append(state, align)
		state = binary.AppendVarint(state, w.start)
		state = binary.AppendUvarint(state, uint64(w.count+cost))
		expireAt = max(expireAt, w.end-1)
	}
	return d, state, expireAt, true
}

// decideOneEpoch is DecideFixed for the request most clients send: one
// rule aligned to the epoch, on no state or the state of that one rule,
// without a ban. It reads the entry in place of decoding the state into
// the scratch lists; ok is false when the request is not of that shape (or
// starts a ban), and DecideFixed's general path decides it.
func decideOneEpoch(old []byte, r Rule, now int64, o FixedOptions, out []byte) (d Decision, state []byte, expireAt int64, write, ok bool) {
	start, end := windowBounds(now, r.Window, o.Zone)
	var count int64
	if len(old) > 0 {
		if old[0] != KindFixed {
			return
		}
		rd := varintReader{b: old[1:]}
		if rd.uvarint() != 1 || rd.uvarint() != uint64(r.Window) || rd.byte() != alignEpoch {
			return
		}
		s, c := rd.varint(), int64(rd.uvarint())
		if rd.bad || len(rd.b) != 0 {
			return
		}
		if s == start {
			count = c
		}
	}
	if count+o.Cost > r.Limit {
		if o.Ban > 0 && !o.Peek {
			return
		}
		d = Decision{Limit: r.Limit, Remaining: max(r.Limit-count, 0), RetryAfter: end - now}
		if count > 0 {
			d.ResetAfter = end - now
		}
		return d, nil, 0, false, true
	}
	count += o.Cost
	d = Decision{Allowed: true, Limit: r.Limit, Remaining: r.Limit - count, RetryAfter: -1}
	switch {
	case count == 0:
		return // a state without entries: the general path writes it
	case o.Peek:
		d.ResetAfter = end - now
		return d, nil, 0, false, true
	}
	d.ResetAfter = end - now
	state = append(out, KindFixed, 1)
	state = binary.AppendUvarint(state, uint64(r.Window))
	state = append(state, alignEpoch)
	state = binary.AppendVarint(state, start)
	state = binary.AppendUvarint(state, uint64(count))
	return d, state, end - 1, true, true
}
