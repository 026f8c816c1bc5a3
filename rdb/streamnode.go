package rdb

// A stream node's listpack (t_stream.c): the master entry (live count,
// deleted count, the master fields' count, the fields, a 0), then each
// entry: flags, the ID as differences from the master ID, the fields'
// count and names unless the flags say they are the master's, the values,
// and the number of elements the entry took (lp-count).

const (
	streamFlagDeleted    = 1 << 0
	streamFlagSameFields = 1 << 1
)

// nodeWalker checks and walks stream nodes, keeping its element buffer
// from one node to the next.
type nodeWalker struct {
	els  []lpElement
	live int64 // the live count of the last node walked
}

// walk checks lp whole, as streamValidateListpackIntegrity does in deep
// mode, and more: that the counts are not negative, that there is at
// least one entry, and that the first entry's ID is master (so Redis has
// always written it). It calls fn, unless nil, with each entry's ID and
// deleted flag until fn returns false; it reports whether lp is a sound
// node, all of it checked whatever fn returned.
func (w *nodeWalker) walk(lp []byte, master StreamID, fn func(id StreamID, deleted bool) bool) bool {
	w.els = w.els[:0]
	if !readListpack(lp, func(e lpElement) bool {
		w.els = append(w.els, e)
		return true
	}) {
		return false
	}
	els, i := w.els, 0
	// lpGetIntegerIfValid: an integer, or a string that is one.
	intAt := func() (int64, bool) {
		if i >= len(els) {
			return 0, false
		}
		e := els[i]
		i++
		if e.isInt {
			return e.v, true
		}
		return ParseInt(e.s)
	}
	skip := func(n int64) bool {
		if n < 0 || n > int64(len(els)-i) {
			return false
		}
		i += int(n)
		return true
	}
	live, ok1 := intAt()
	deleted, ok2 := intAt()
	fields, ok3 := intAt()
	if !ok1 || !ok2 || !ok3 || live < 0 || deleted < 0 || !skip(fields) {
		return false
	}
	// Each entry takes at least five elements: bounding the counts by
	// the elements keeps their sum from overflowing.
	entries := live + deleted
	if entries == 0 || live > int64(len(els)) || deleted > int64(len(els)) {
		return false
	}
	if zero, ok := intAt(); !ok || zero != 0 {
		return false
	}
	w.live = live
	call := fn != nil
	for n := int64(0); n < entries; n++ {
		flags, ok1 := intAt()
		msDiff, ok2 := intAt()
		seqDiff, ok3 := intAt()
		if !ok1 || !ok2 || !ok3 {
			return false
		}
		id := StreamID{master.Ms + uint64(msDiff), master.Seq + uint64(seqDiff)}
		if n == 0 && id != master {
			return false
		}
		own, extra := fields, int64(3)
		if flags&streamFlagSameFields == 0 {
			var ok bool
			if own, ok = intAt(); !ok || !skip(own) {
				return false
			}
			extra += own + 1
		}
		if !skip(own) {
			return false
		}
		if count, ok := intAt(); !ok || count != own+extra {
			return false
		}
		if call {
			call = fn(id, flags&streamFlagDeleted != 0)
		}
	}
	return i == len(els)
}
