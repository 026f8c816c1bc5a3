package engine

import "sync/atomic"

// Watch is one client's WATCH state: it turns dirty when any key the client
// watches is written, deleted or expired.
type Watch struct {
	dirty atomic.Bool
}

// Dirty reports whether a watched key changed.
func (w *Watch) Dirty() bool { return w.dirty.Load() }

// Reset clears the dirty mark for a new transaction.
func (w *Watch) Reset() { w.dirty.Store(false) }

func (s *Shard) watchKey(db int, key []byte) []byte {
	s.wkey = append(append(s.wkey[:0], byte(db), byte(db>>8)), key...)
	return s.wkey
}

// AddWatch makes w watch key in database db. An already expired key is
// deleted first, so that its later removal does not count as a change, as
// in Redis.
func (s *Shard) AddWatch(db int, key []byte, now int64, w *Watch) {
	s.Peek(db, key, now)
	if s.watched == nil {
		s.watched = make(map[string][]*Watch)
	}
	k := string(s.watchKey(db, key))
	for _, x := range s.watched[k] {
		if x == w {
			return
		}
	}
	s.watched[k] = append(s.watched[k], w)
}

// RemoveWatch undoes AddWatch.
func (s *Shard) RemoveWatch(db int, key []byte, w *Watch) {
	k := s.watchKey(db, key)
	ws := s.watched[string(k)]
	for i, x := range ws {
		if x == w {
			ws[i] = ws[len(ws)-1]
			ws = ws[:len(ws)-1]
			break
		}
	}
	if len(ws) == 0 {
		delete(s.watched, string(k))
	} else {
		s.watched[string(k)] = ws
	}
}

// IsExpired reports whether key exists in db but its time has passed:
// EXEC treats a watched key that expired as changed.
func (s *Shard) IsExpired(db int, key []byte, now int64) bool {
	t := &s.dbs[db]
	_, r, ok := s.find(t, key, uint32(s.eng.hash(key)))
	return ok && expired(r, now)
}

func (s *Shard) touchWatched(db int, key []byte) {
	for _, w := range s.watched[string(s.watchKey(db, key))] {
		w.dirty.Store(true)
	}
}

// touchAllWatched marks the watchers of every watched key in db that
// exists there or in other (for SWAPDB; other < 0 for none).
func (s *Shard) touchAllWatched(db, other int) {
	for k, ws := range s.watched {
		kdb := int(k[0]) | int(k[1])<<8
		if kdb != db {
			continue
		}
		key := []byte(k[2:])
		h := uint32(s.eng.hash(key))
		_, _, in := s.find(&s.dbs[db], key, h)
		if !in && other >= 0 {
			_, _, in = s.find(&s.dbs[other], key, h)
		}
		if in {
			for _, w := range ws {
				w.dirty.Store(true)
			}
		}
	}
}
