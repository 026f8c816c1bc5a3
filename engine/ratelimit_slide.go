package engine

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
// State body: the entry count, the time of the oldest entry (ms), its cost,
// then per further entry the delta from the previous time and the cost.

// SlideOptions are RL.SLIDE's options.
type SlideOptions struct {
	Cost     int64
	Peek     bool
	Penalize bool // record denied requests too
}

// SlideEntry is one millisecond of the log.
type SlideEntry struct {
	T    int64 // ms
	Cost int64
}

// parseSlide decodes a state, oldest entry first; a damaged state reads as
// empty.
func parseSlide(st []byte, out []SlideEntry) []SlideEntry {
	out = out[:0]
	if len(st) == 0 || st[0] != LimitSlide {
		return out
	}
	r := stateReader{b: st[1:]}
	n := r.uvarint()
	t := int64(0)
	for i := uint64(0); i < n && !r.bad; i++ {
		if i == 0 {
			t = r.varint()
		} else {
			t += int64(r.uvarint())
		}
		out = append(out, SlideEntry{T: t, Cost: int64(r.uvarint())})
	}
	if r.bad {
		return out[:0]
	}
	return out
}

// appendSlide encodes entries as a state.
func appendSlide(out []byte, entries []SlideEntry) []byte {
	out = append(out, LimitSlide)
	out = binary.AppendUvarint(out, uint64(len(entries)))
	for i, e := range entries {
		if i == 0 {
			out = binary.AppendVarint(out, e.T)
		} else {
			out = binary.AppendUvarint(out, uint64(e.T-entries[i-1].T))
		}
		out = binary.AppendUvarint(out, uint64(e.Cost))
	}
	return out
}

// SlideScratch holds the reusable buffers of DecideSlide.
type SlideScratch struct {
	entries []SlideEntry
	sums    []int64
}

// windowSum is the cost recorded in (now - w, now]. Entries stamped after
// now (the clock moved back) count as if they were now.
func windowSum(entries []SlideEntry, now, w int64) int64 {
	var sum int64
	for i := len(entries) - 1; i >= 0 && entries[i].T > now-w; i-- {
		sum += entries[i].Cost
	}
	return sum
}

// fitsAt returns the earliest time >= now at which cost fits rule r given
// entries, with no other traffic: the time the entries that must leave the
// window have left it.
func fitsAt(entries []SlideEntry, now int64, r Rule, cost int64) int64 {
	sum := windowSum(entries, now, r.Window)
	if sum+cost <= r.Limit {
		return now
	}
	for _, e := range entries {
		if e.T <= now-r.Window {
			continue // already out of the window
		}
		sum -= e.Cost
		if sum+cost <= r.Limit {
			return e.T + r.Window
		}
	}
	return now // unreachable: cost <= limit once every entry has left
}

// DecideSlide runs RL.SLIDE. It returns the decision and, when the state
// changes, the new state (appended to out) with the key's new expiry: when
// the newest entry leaves the longest window.
func DecideSlide(old []byte, rules []Rule, now int64, o SlideOptions, sc *SlideScratch, out []byte) (d Decision, state []byte, expireAt int64, write bool) {
	entries := parseSlide(old, sc.entries)
	allowed := true
	for _, r := range rules {
		if windowSum(entries, now, r.Window)+o.Cost > r.Limit {
			allowed = false
			break
		}
	}
	// An allowed request is counted in the reply (PEEK says what would be
	// left); a denied one only when PENALIZE records it for real, so that a
	// PEEK's retry time holds for the state as it is.
	record := allowed || (o.Penalize && !o.Peek)
	if record {
		if n := len(entries); n > 0 && entries[n-1].T >= now {
			entries[n-1].Cost += o.Cost
		} else {
			entries = append(entries, SlideEntry{T: now, Cost: o.Cost})
		}
	}
	sc.entries = entries

	d.Allowed = allowed
	if allowed {
		best := -1
		for i, r := range rules {
			left := r.Limit - windowSum(entries, now, r.Window)
			if best < 0 || left < d.Remaining {
				best, d.Remaining = i, left
			}
		}
		d.Limit = rules[best].Limit
		d.RetryAfter = -1
		d.ResetAfter = resetAfter(entries, now, rules[best].Window)
	} else {
		best, at := -1, int64(0)
		for i, r := range rules {
			if t := fitsAt(entries, now, r, o.Cost); best < 0 || t > at {
				best, at = i, t
			}
		}
		r := rules[best]
		d.Limit = r.Limit
		d.Remaining = max(r.Limit-windowSum(entries, now, r.Window), 0)
		d.RetryAfter = at - now
		d.ResetAfter = resetAfter(entries, now, r.Window)
	}
	if !record || o.Peek {
		return d, nil, 0, false
	}

	entries = pruneSlide(entries, rules, now)
	if len(entries) == 0 {
		return d, nil, 0, true
	}
	var longest int64
	for _, r := range rules {
		longest = max(longest, r.Window)
	}
	return d, appendSlide(out, entries), entries[len(entries)-1].T + longest - 1, true
}

// resetAfter is the time until nothing recorded is left in a window of w.
func resetAfter(entries []SlideEntry, now, w int64) int64 {
	if n := len(entries); n > 0 && entries[n-1].T > now-w {
		return entries[n-1].T + w - now
	}
	return 0
}

// pruneSlide drops the prefix of entries that can no longer change any
// decision under rules (see the package comment above).
func pruneSlide(entries []SlideEntry, rules []Rule, now int64) []SlideEntry {
	var newer int64
	for _, e := range entries {
		newer += e.Cost
	}
	drop := 0
	for drop < len(entries) {
		e := entries[drop]
		newer -= e.Cost // now: the cost of the entries newer than e
		droppable := true
		for _, r := range rules {
			if e.T > now-r.Window && newer < r.Limit {
				droppable = false
				break
			}
		}
		if !droppable {
			break
		}
		drop++
	}
	return entries[drop:]
}
