package engine

import (
	"cmp"
	"encoding/binary"
	"slices"
)

// Notes are the key events the engine causes on its own, for keyspace
// notifications: a key created, expired, evicted, or missed by a read.
// A command knows what it did to its keys and says so itself; these
// happen inside the engine's lookups and deletions, in the middle of a
// command or with no command at all (the sweeper, eviction).
//
// While a kind is turned on, each such event is logged on its shard, in
// order, until whoever holds the shard's lock drains it (DrainNotes).
// A command drains it before it reports events of its own and after it
// runs, so that, as in Redis, a lazy expiry is reported before what the
// command then did. The engine's own changes hand the log to the sink.

// NoteKind is a kind of engine event, a bit of a mask.
type NoteKind uint8

const (
	NoteNew     NoteKind = 1 << iota // a key was added ("new")
	NoteExpired                      // a key was deleted because it expired
	NoteEvicted                      // a key was evicted for maxmemory
	NoteMiss                         // a read found no key ("keymiss")
	// NoteChanged: a key was written, deleted, expired or evicted, for
	// client-side caching's invalidations.
	NoteChanged
)

// SetNotes turns note logging on for kinds (0: off) and sets where the
// engine's own changes go: sink is called, with the shard locked, after
// the sweeper or eviction logged notes there, and must drain them.
// Loading a dataset is no command's doing: Store.Load turns notes off
// meanwhile.
func (e *Engine) SetNotes(kinds NoteKind, sink func(s *Shard)) {
	if sink != nil {
		e.noteSink.Store(&sink)
	}
	e.notes.Store(uint32(kinds))
}

// Notes returns the kinds being logged.
func (e *Engine) Notes() NoteKind { return NoteKind(e.notes.Load()) }

// note logs an event of kind on key if that kind is on.
func (s *Shard) note(kind NoteKind, db int, key []byte) {
	if NoteKind(s.eng.notes.Load())&kind == 0 {
		return
	}
	if kind == NoteNew && s.eng.replica.Load() {
		// A replica's keys come from its master's effects, not from
		// commands run here: it reports none of them.
		return
	}
	s.notes = append(s.notes, byte(kind))
	s.notes = binary.AppendUvarint(s.notes, s.eng.noteSeq.Add(1))
	s.notes = binary.AppendUvarint(s.notes, uint64(db))
	s.notes = binary.AppendUvarint(s.notes, uint64(len(key)))
	s.notes = append(s.notes, key...)
}

// HasNotes reports whether events are waiting to be drained.
func (s *Shard) HasNotes() bool { return len(s.notes) > 0 }

// DrainNotes calls fn for each waiting event, oldest first, and empties
// the log; key is valid during the call only. The caller holds the
// shard's lock, and fn must not change the shard's keys.
func (s *Shard) DrainNotes(fn func(kind NoteKind, db int, key []byte)) {
	for b := s.notes; len(b) > 0; {
		var n note
		n, b = readNote(b)
		fn(n.kind, n.db, n.key)
	}
	s.notes = s.notes[:0]
}

// note is one logged event; seq orders events across shards.
type note struct {
	seq  uint64
	kind NoteKind
	db   int
	key  []byte
}

func readNote(b []byte) (note, []byte) {
	n := note{kind: NoteKind(b[0])}
	seq, k := binary.Uvarint(b[1:])
	b = b[1+k:]
	db, k := binary.Uvarint(b)
	b = b[k:]
	l, k := binary.Uvarint(b)
	b = b[k:]
	n.seq, n.db, n.key = seq, int(db), b[:l]
	return n, b[l:]
}

// DrainNotes is Shard.DrainNotes for the shards of m, in the order the
// events happened across them (a command that changed keys of several
// shards: their invalidations go out in the order it changed them). The
// caller holds those shards' locks.
func (e *Engine) DrainNotes(m Mask, fn func(kind NoteKind, db int, key []byte)) {
	var one *Shard
	var all []note
	for i := range e.shards {
		s := &e.shards[i]
		if m&(1<<i) == 0 || len(s.notes) == 0 {
			continue
		}
		if one == nil && all == nil {
			one = s
			continue
		}
		if one != nil {
			all = one.appendNotes(all)
			one = nil
		}
		all = s.appendNotes(all)
	}
	if one != nil {
		one.DrainNotes(fn)
		return
	}
	slices.SortFunc(all, func(a, b note) int { return cmp.Compare(a.seq, b.seq) })
	for _, n := range all {
		fn(n.kind, n.db, n.key)
	}
	for i := range e.shards {
		if m&(1<<i) != 0 {
			e.shards[i].notes = e.shards[i].notes[:0]
		}
	}
}

// appendNotes appends the shard's notes, pointing into its log, to dst.
func (s *Shard) appendNotes(dst []note) []note {
	for b := s.notes; len(b) > 0; {
		var n note
		n, b = readNote(b)
		dst = append(dst, n)
	}
	return dst
}

// FlushNotes hands the notes of the shards of m to the sink: a change
// made outside any command (a replica applying its master's) is told at
// once. The caller holds those shards' locks.
func (e *Engine) FlushNotes(m Mask) {
	for i := range e.shards {
		if m&(1<<i) != 0 {
			e.shards[i].sinkNotes()
		}
	}
}

// sinkNotes gives the notes of a change the engine made on its own to
// the sink. The caller holds the shard's lock.
func (s *Shard) sinkNotes() {
	if len(s.notes) == 0 {
		return
	}
	if sink := s.eng.noteSink.Load(); sink != nil {
		(*sink)(s)
	} else {
		s.notes = s.notes[:0]
	}
}
