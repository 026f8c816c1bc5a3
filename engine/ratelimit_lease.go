package engine

import "github.com/limitkv/limitkv/ratelimit"

// RL.ACQUIRE / RL.RELEASE's Shard operations; the semaphore and its state
// are ratelimit/lease.go's.

// Acquire runs RL.ACQUIRE on key: it loads the leases, decides and, when
// allowed, stores the new leases and expiry. It fails with ErrWrongType
// when the key holds another type or another kind of rate-limit state.
// The caller has checked 1 <= limit <= ratelimit.MaxLeases,
// 1 <= lease <= ratelimit.MaxWindow and len(id) <= ratelimit.MaxLeaseID.
func (s *Shard) Acquire(db int, key []byte, now int64, limit, lease int64, id []byte, sc *LimitScratch) (ratelimit.Decision, error) {
	e, old, err := s.limitEntry(db, key, now, ratelimit.KindLease)
	if err != nil {
		return ratelimit.Decision{}, err
	}
	d, st, exp, write := ratelimit.DecideAcquire(old, limit, lease, id, now, &sc.lease, sc.state[:0])
	sc.state = st[:0] // kept for the next call, denied or not
	s.storeDecided(db, key, now, sc, e, old, st, exp, write)
	return d, nil
}

// Release runs RL.RELEASE on key: it reports whether id held a live lease,
// and if so frees it, deleting the key with its last lease. On a key of
// named policies it frees id's lease in every CONCURRENCY policy's state.
// It fails with ErrWrongType as Acquire does.
func (s *Shard) Release(db int, key []byte, now int64, id []byte, sc *LimitScratch) (bool, error) {
	if e, ok := s.Find(db, key, now); ok && e.Kind() == KindLimit {
		if st := limitBytes(s, e); len(st) > 0 && st[0] == ratelimit.KindPolicies {
			return s.releasePolicies(db, key, now, st, id, sc), nil
		}
	}
	e, old, err := s.limitEntry(db, key, now, ratelimit.KindLease)
	if err != nil {
		return false, err
	}
	freed, st, exp, buf := ratelimit.DecideRelease(old, id, now, sc.state[:0])
	sc.state = buf[:0]
	s.storeDecided(db, key, now, sc, e, old, st, exp, freed)
	return freed, nil
}

// PeekAcquire answers what RL.ACQUIRE (or, policy set, RL.CHECK of that
// CONCURRENCY policy) would answer for id, changing nothing: a nil id
// asks for a new holder. It fails with ErrWrongType as Acquire does.
func (s *Shard) PeekAcquire(db int, key []byte, now int64, policy []byte, limit, lease int64, id []byte, sc *LimitScratch) (ratelimit.Decision, error) {
	var old []byte
	var err error
	if policy != nil {
		_, old, err = s.policyLoad(db, key, now, policy, ratelimit.KindLease)
	} else {
		old, _, err = s.LimitState(db, key, now, ratelimit.KindLease)
	}
	if err != nil {
		return ratelimit.Decision{}, err
	}
	d, st, _, _ := ratelimit.DecideAcquire(old, limit, lease, id, now, &sc.lease, sc.state[:0])
	sc.state = st[:0]
	return d, nil
}
