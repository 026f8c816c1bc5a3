package engine

import "time"

// Keys are expired lazily, when a command touches them, and actively by a
// sweeper, so that keys nobody reads again still free their memory. The
// sweeper walks each table with a cursor, a bounded number of slots per shard
// per tick; when a round finds many expired keys it runs another, until the
// tick's time budget is spent, as Redis's active expire cycle does.

const (
	sweepSlotsPerRound = 128
	sweepRepeatRatio   = 10 // repeat while more than 1 in 10 keys with a TTL were expired
)

// SweepStats reports one tick of the sweeper.
type SweepStats struct {
	Examined int
	Expired  int
	// Work is the time spent sweeping, shard locks held: without the
	// waits for those locks, which a script holding every shard can make
	// as long as itself. It is what Redis's expire-cycle latency event
	// measures, a cycle that cannot run during a script there.
	Work time.Duration
}

// ActiveExpire runs one sweeper tick over every shard, spending at most
// budget. now is the time to expire against.
func (e *Engine) ActiveExpire(now int64, budget time.Duration) SweepStats {
	var st SweepStats
	if e.replica.Load() {
		return st // the master's deletions expire a replica's keys
	}
	clock := e.sweepClock
	start := clock()
	for i := range e.shards {
		s := &e.shards[i]
		for {
			s.mu.Lock()
			locked := clock()
			ex, withTTL, gone := s.sweepRound(now)
			s.sinkEffects()
			s.sinkNotes()
			st.Work += clock().Sub(locked)
			s.mu.Unlock()
			st.Examined += ex
			st.Expired += gone
			if withTTL == 0 || gone*sweepRepeatRatio <= withTTL || clock().Sub(start) > budget {
				break
			}
		}
		if clock().Sub(start) > budget {
			break
		}
	}
	return st
}

// sweepRound examines up to sweepSlotsPerRound slots of each database that
// has keys with a TTL. It returns the slots examined, the keys with a TTL
// among them and how many of those it deleted.
func (s *Shard) sweepRound(now int64) (examined, withTTL, gone int) {
	for db := range s.dbs {
		t := &s.dbs[db]
		if t.expires == 0 {
			continue
		}
		size := len(t.slots)
		i := t.sweep & t.mask
		for n := 0; n < sweepSlotsPerRound && n < size; n++ {
			examined++
			ref := slotRef(t.slots[i])
			if ref != 0 {
				r := s.record(ref)
				if r[1]&flagExpire != 0 {
					withTTL++
					if now > recExpire(r) {
						gone++
						s.expire(db, t, i)
						if len(t.slots) != size {
							break // the table shrank; start over next round
						}
						if t.expires == 0 {
							break
						}
						// A later key may have shifted into slot i: look again.
						continue
					}
				}
			}
			i = t.next(i)
		}
		t.sweep = i
	}
	return examined, withTTL, gone
}
