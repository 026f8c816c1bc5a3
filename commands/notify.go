package commands

import (
	"strconv"

	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/pubsub"
)

// Keyspace notifications (Redis's notify.c): with notify-keyspace-events
// naming a class and K or E, each event of that class is published to
// __keyspace@<db>__:<key> (the event as the message) and to
// __keyevent@<db>__:<event> (the key), locally, as Redis 7.0 does even in
// a cluster. A handler reports what it did to a key with Ctx.notify; the
// engine logs what it does by itself (a key created, expired, evicted, or
// missed by a read, engine.NoteKind), and those are published before the
// next event of the command that caused them, or after it ran, or, for
// the sweeper and eviction, at once.

// notifyClass is a set of event classes, one bit per letter of
// notify-keyspace-events.
type notifyClass uint32

const (
	notifyKeyspace notifyClass = 1 << iota // K: __keyspace@<db>__:<key>
	notifyKeyevent                         // E: __keyevent@<db>__:<event>
	notifyGeneric                          // g: DEL, EXPIRE, RENAME, ...
	notifyString                           // $
	notifyList                             // l
	notifySet                              // s
	notifyHash                             // h
	notifyZSet                             // z
	notifyExpired                          // x
	notifyEvicted                          // e
	notifyStream                           // t
	notifyKeyMiss                          // m
	notifyModule                           // d: no modules here, accepted
	notifyNew                              // n
	// notifyRateLimit (r) is limitkv's own: rl.denied for a request a
	// rate-limit command refused, rl.ban for a ban that started. "A"
	// leaves it out, so that it is off unless named.
	notifyRateLimit
)

// notifyLetters maps each class letter to its bit; "A" is its own.
var notifyLetters = map[byte]notifyClass{
	'K': notifyKeyspace, 'E': notifyKeyevent, 'g': notifyGeneric, '$': notifyString,
	'l': notifyList, 's': notifySet, 'h': notifyHash, 'z': notifyZSet, 'x': notifyExpired,
	'e': notifyEvicted, 't': notifyStream, 'm': notifyKeyMiss, 'd': notifyModule,
	'n': notifyNew, 'r': notifyRateLimit,
}

const notifyAll = notifyGeneric | notifyString | notifyList | notifySet | notifyHash |
	notifyZSet | notifyExpired | notifyEvicted | notifyStream | notifyModule

// parseNotifyClasses reads a notify-keyspace-events value the config has
// validated.
func parseNotifyClasses(v string) notifyClass {
	var f notifyClass
	for i := 0; i < len(v); i++ {
		if v[i] == 'A' {
			f |= notifyAll
		} else {
			f |= notifyLetters[v[i]]
		}
	}
	return f
}

// setNotify applies notify-keyspace-events: what handlers report, and
// what the engine logs. Nothing is published unless K or E is on.
func (s *Server) setNotify(f notifyClass) {
	if f&(notifyKeyspace|notifyKeyevent) == 0 {
		f = 0
	}
	s.notifyOn.Store(uint32(f))
	s.notesMu.Lock()
	defer s.applyNotes()
	defer s.notesMu.Unlock()
	var kinds engine.NoteKind
	for _, k := range []struct {
		c notifyClass
		n engine.NoteKind
	}{{notifyNew, engine.NoteNew}, {notifyExpired, engine.NoteExpired}, {notifyEvicted, engine.NoteEvicted}, {notifyKeyMiss, engine.NoteMiss}} {
		if f&k.c != 0 {
			kinds |= k.n
		}
	}
	s.notifyKinds = kinds
}

// notify reports event, of class, on key of the request's database.
func (c *Ctx) notify(class notifyClass, event string, key []byte) {
	if notifyClass(c.Srv.notifyOn.Load())&class == 0 {
		return
	}
	c.notifyDB(class, event, key, c.DB)
}

// notifyDB is notify for a key of database db (MOVE's, COPY's target).
func (c *Ctx) notifyDB(class notifyClass, event string, key []byte, db int) {
	s := c.Srv
	f := notifyClass(s.notifyOn.Load())
	if f&class == 0 {
		return
	}
	// What the engine did to this key's shard first: the expiry that
	// the command's lookup caused comes before the command's event.
	if sh := c.Shard(key); sh.HasNotes() {
		sh.DrainNotes(func(kind engine.NoteKind, db int, key []byte) { s.noteEvent(c, kind, db, key) })
	}
	s.keyEvent(c, f, event, db, key)
}

// flushNotes publishes at once what the engine reported on shard s (a
// miss, an expiry) during this request. notify publishes, before its
// event, only the reports of its own key's shard, which orders a one-key
// command as Redis does; a command that looks up keys of other shards
// flushes each after its lookup, so that a source's "keymiss" or
// "expired" comes before the destination's event, and the keys' reports
// in the order of their lookups rather than of their shards.
func (c *Ctx) flushNotes(s *engine.Shard) {
	if s.HasNotes() {
		s.DrainNotes(func(kind engine.NoteKind, db int, key []byte) { c.Srv.noteEvent(c, kind, db, key) })
	}
}

// drainNotes publishes the engine's events left on the shards of m by the
// request c (nil: none, the sweeper's or eviction's). The caller holds
// their locks.
func (s *Server) drainNotes(c *Ctx, m engine.Mask) {
	s.Eng.DrainNotes(m, func(kind engine.NoteKind, db int, key []byte) { s.noteEvent(c, kind, db, key) })
}

// sinkNotes publishes the events of the engine's own changes to a shard.
func (s *Server) sinkNotes(sh *engine.Shard) {
	sh.DrainNotes(func(kind engine.NoteKind, db int, key []byte) { s.noteEvent(nil, kind, db, key) })
}

// noteEvent publishes one engine event.
func (s *Server) noteEvent(c *Ctx, kind engine.NoteKind, db int, key []byte) {
	f := notifyClass(s.notifyOn.Load())
	switch kind {
	case engine.NoteNew:
		if f&notifyNew != 0 {
			s.keyEvent(c, f, "new", db, key)
		}
	case engine.NoteExpired:
		if f&notifyExpired != 0 {
			s.keyEvent(c, f, "expired", db, key)
		}
	case engine.NoteEvicted:
		if f&notifyEvicted != 0 {
			s.keyEvent(c, f, "evicted", db, key)
		}
	case engine.NoteMiss:
		if f&notifyKeyMiss != 0 {
			s.keyEvent(c, f, "keymiss", db, key)
		}
	case engine.NoteChanged:
		s.invalidate(c, key)
	}
}

// keyEvent publishes event on key to the channels f turns on.
func (s *Server) keyEvent(c *Ctx, f notifyClass, event string, db int, key []byte) {
	if s.pubsub.Count(pubsub.Channel) == 0 && s.pubsub.Count(pubsub.Pattern) == 0 {
		return // nobody could hear it
	}
	var buf [96]byte
	if f&notifyKeyspace != 0 {
		ch := append(buf[:0], "__keyspace@"...)
		ch = strconv.AppendInt(ch, int64(db), 10)
		ch = append(ch, "__:"...)
		ch = append(ch, key...)
		s.publish(c, pubsub.Channel, ch, []byte(event))
	}
	if f&notifyKeyevent != 0 {
		ch := append(buf[:0], "__keyevent@"...)
		ch = strconv.AppendInt(ch, int64(db), 10)
		ch = append(ch, "__:"...)
		ch = append(ch, event...)
		s.publish(c, pubsub.Channel, ch, key)
	}
}
