package engine

import "github.com/limitkv/limitkv/ratelimit"

// RL.TOP: each shard counts the denials of its own keys (a
// ratelimit.Denials, allocated at its first denial) under the shard lock
// the deciding command already holds.

// NoteDenial counts a denied request on key in db at time now.
func (s *Shard) NoteDenial(db int, key []byte, now int64) {
	if s.denials == nil {
		s.denials = ratelimit.NewDenials()
	}
	s.denials.Note(db, key, s.eng.hash(key), now)
}

// TopDenials returns the n keys denied most often recently, by Count
// (then by Count-Err, then by db and key), in every database. held says
// the caller holds every shard's lock (EXEC, scripts); otherwise each
// shard is locked in turn.
func (e *Engine) TopDenials(n int, now int64, held bool) []ratelimit.Denial {
	var all []ratelimit.Denial
	for i := range e.shards {
		s := &e.shards[i]
		if !held {
			s.mu.Lock()
		}
		if d := s.denials; d != nil {
			all = d.Append(all, now)
		}
		if !held {
			s.mu.Unlock()
		}
	}
	ratelimit.SortDenials(all)
	return all[:min(n, len(all))]
}

// ResetDenials forgets every shard's denials (RL.TOP RESET) and frees
// their memory.
func (e *Engine) ResetDenials(held bool) {
	for i := range e.shards {
		s := &e.shards[i]
		if !held {
			s.mu.Lock()
		}
		s.denials = nil
		if !held {
			s.mu.Unlock()
		}
	}
}

// denialBytes is the memory RL.TOP's summaries hold, in every shard.
func (e *Engine) denialBytes(held bool) int {
	n := 0
	for i := range e.shards {
		s := &e.shards[i]
		if !held {
			s.mu.Lock()
		}
		if d := s.denials; d != nil {
			n += d.MemBytes()
		}
		if !held {
			s.mu.Unlock()
		}
	}
	return n
}
