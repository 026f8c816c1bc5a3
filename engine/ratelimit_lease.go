package engine

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
)

// RL.ACQUIRE / RL.RELEASE: a semaphore of at most `limit` leases per key,
// each named by its holder's id and ending by itself `lease` after it was
// last acquired or renewed, so that a holder that crashes leaks nothing.
//
// A lease acquired at t for L ms is live in [t, t+L): at t+L-1 it still
// holds its slot, at t+L the slot is free. Expired leases are dropped by
// every acquire that writes; the key's expiry is the end of its last lease
// (the last millisecond it is live), so the key disappears with its last
// lease, and releasing the last lease deletes it.
//
// State body: the leases, back to back, in no particular order:
//
//	end (ms since the epoch, exclusive; 8 bytes little-endian),
//	id length - 1 (1 byte), id
//
// A decision walks them once, dropping the expired ones and looking for the
// caller's id, and copies the runs of leases it keeps: a call costs
// O(leases stored) (their bytes, ids included). An acquire that writes
// keeps only live leases, at most the largest limit in force while they
// live; a release only marks one ended; a denied request records nothing:
// memory is bounded by the limit, never by the traffic. Fixed-width ends
// keep the walk cheap and a renewal the same size, so that the key's record
// is rewritten in place.

// MaxLeaseID bounds an id's length (and with the limit a state's size);
// ids are at least 1 byte.
const MaxLeaseID = 256

// MaxLeases bounds RL.ACQUIRE's limit: every call walks and an allowed one
// rewrites all live leases under the shard lock, so a semaphore wider than
// this is better split over several keys.
const MaxLeases = 10_000

const leaseHead = 9 // end and id length

// leaseScan is what one walk over a state found.
type leaseScan struct {
	live     int64 // live leases, id's included
	held     bool  // id holds a live lease
	firstEnd int64 // the earliest end of the other live leases
	lastEnd  int64 // the latest end of the other live leases
}

// scanLeases walks the leases of old (a state of any kind reads as none, a
// damaged tail is dropped), appending to out the live leases other than
// id's.
func scanLeases(old []byte, id []byte, now int64, out []byte) (leaseScan, []byte) {
	sc := leaseScan{firstEnd: math.MaxInt64, lastEnd: math.MinInt64}
	if len(old) == 0 || old[0] != LimitLease {
		return sc, out
	}
	b := old[1:]
	run, p := 0, 0 // the run of kept leases not copied yet: b[run:p]
	for p+leaseHead <= len(b) {
		end := int64(binary.LittleEndian.Uint64(b[p:]))
		q := p + leaseHead + int(b[p+8]) + 1
		if q > len(b) {
			break
		}
		keep := end > now
		if keep {
			sc.live++
			if q-p-leaseHead == len(id) && bytes.Equal(b[p+leaseHead:q], id) {
				sc.held, keep = true, false
			} else {
				sc.firstEnd = min(sc.firstEnd, end)
				sc.lastEnd = max(sc.lastEnd, end)
			}
		}
		if !keep {
			out = append(out, b[run:p]...)
			run = q
		}
		p = q
	}
	return sc, append(out, b[run:p]...)
}

// LeaseScratch is the reusable memory of DecideAcquire, so that a decision
// on an existing key allocates nothing.
type LeaseScratch struct {
	ends []int64
}

// DecideAcquire runs RL.ACQUIRE: a request by id (1 to MaxLeaseID bytes)
// for one of limit slots, held for lease ms. A live lease of the same id is
// renewed instead of taking a new slot (it succeeds even when the semaphore
// is full) and ends at now+lease. Denied requests record nothing. It
// returns the decision and, when allowed, the new state (appended to out)
// with the key's expiry: the last millisecond of its last lease.
//
// The reply: remaining is the free slots after the request; a denial's
// retry_after_ms is the time until enough leases have ended for a slot to
// free (the earliest one's end when the semaphore is exactly full; a
// release may free one sooner); reset_after_ms is the time until every
// lease, the new one included, has ended.
func DecideAcquire(old []byte, limit, lease int64, id []byte, now int64, sc *LeaseScratch, out []byte) (d Decision, state []byte, expireAt int64, write bool) {
	d, state, expireAt, write = decideAcquire(old, limit, lease, id, now, sc, out)
	if !write {
		state = nil
	}
	return d, state, expireAt, write
}

// decideAcquire is DecideAcquire returning the buffer it built in even
// when it writes nothing, for the caller to reuse.
func decideAcquire(old []byte, limit, lease int64, id []byte, now int64, sc *LeaseScratch, out []byte) (d Decision, state []byte, expireAt int64, write bool) {
	s, state := scanLeases(old, id, now, append(out, LimitLease))
	d.Limit = limit
	if !s.held && s.live >= limit {
		at := s.firstEnd
		if k := s.live - limit; k > 0 {
			// The limit was lowered under the leases held: k+1 of them
			// must end before a slot frees.
			ends := sc.ends[:0]
			for p := 1; p < len(state); p += leaseHead + int(state[p+8]) + 1 {
				ends = append(ends, int64(binary.LittleEndian.Uint64(state[p:])))
			}
			slices.Sort(ends)
			sc.ends = ends
			at = ends[k]
		}
		d.RetryAfter = at - now
		d.ResetAfter = s.lastEnd - now
		return d, state, 0, false
	}
	n := s.live
	if !s.held {
		n++
	}
	newEnd := now + lease
	state = binary.LittleEndian.AppendUint64(state, uint64(newEnd))
	state = append(state, byte(len(id)-1))
	state = append(state, id...)
	last := max(s.lastEnd, newEnd)
	d.Allowed = true
	d.Remaining = max(limit-n, 0)
	d.RetryAfter = -1
	d.ResetAfter = last - now
	return d, state, last - 1, true
}

// DecideRelease runs RL.RELEASE: it frees id's live lease, if it holds
// one. When it does, it returns the new state (appended to out; nil when
// no lease is left, which deletes the key) and the key's new expiry. The
// released lease is marked ended (end 0) rather than cut out, so that the
// state keeps its length and the key's record is rewritten in place
// without allocating; the next acquire drops it with the expired ones.
func DecideRelease(old []byte, id []byte, now int64, out []byte) (freed bool, state []byte, expireAt int64) {
	freed, state, expireAt, _ = decideRelease(old, id, now, out)
	return freed, state, expireAt
}

// decideRelease is DecideRelease returning also the buffer it built in.
func decideRelease(old []byte, id []byte, now int64, out []byte) (freed bool, state []byte, expireAt int64, buf []byte) {
	if len(old) == 0 || old[0] != LimitLease {
		return false, nil, 0, out
	}
	at := -1 // the offset of id's lease
	var others int64
	last := int64(math.MinInt64)
	for p := 1; p+leaseHead <= len(old); {
		end := int64(binary.LittleEndian.Uint64(old[p:]))
		q := p + leaseHead + int(old[p+8]) + 1
		if q > len(old) {
			break
		}
		if end > now {
			if q-p-leaseHead == len(id) && bytes.Equal(old[p+leaseHead:q], id) {
				at = p
			} else {
				others++
				last = max(last, end)
			}
		}
		p = q
	}
	if at < 0 || others == 0 {
		return at >= 0, nil, 0, out
	}
	buf = append(out, old...)
	binary.LittleEndian.PutUint64(buf[at:], 0)
	return true, buf, last - 1, buf
}

// Acquire runs RL.ACQUIRE on key: it loads the leases, decides and, when
// allowed, stores the new leases and expiry. It fails with ErrWrongType
// when the key holds another type or another kind of rate-limit state.
// The caller has checked 1 <= limit <= MaxLeases, 1 <= lease <= MaxWindow
// and len(id) <= MaxLeaseID.
func (s *Shard) Acquire(db int, key []byte, now int64, limit, lease int64, id []byte, sc *LimitScratch) (Decision, error) {
	old, _, err := s.LimitState(db, key, now, LimitLease)
	if err != nil {
		return Decision{}, err
	}
	d, st, exp, write := decideAcquire(old, limit, lease, id, now, &sc.lease, sc.state[:0])
	sc.state = st[:0] // kept for the next call, denied or not
	s.storeDecided(db, key, now, sc, st, exp, write)
	return d, nil
}

// Release runs RL.RELEASE on key: it reports whether id held a live lease,
// and if so frees it, deleting the key with its last lease. On a key of
// named policies it frees id's lease in every CONCURRENCY policy's state.
// It fails with ErrWrongType as Acquire does.
func (s *Shard) Release(db int, key []byte, now int64, id []byte, sc *LimitScratch) (bool, error) {
	if e, ok := s.Find(db, key, now); ok && e.Kind() == KindLimit {
		if st := limitBytes(s, e); len(st) > 0 && st[0] == LimitPolicies {
			return s.releasePolicies(db, key, now, st, id, sc), nil
		}
	}
	old, _, err := s.LimitState(db, key, now, LimitLease)
	if err != nil {
		return false, err
	}
	freed, st, exp, buf := decideRelease(old, id, now, sc.state[:0])
	sc.state = buf[:0]
	s.storeDecided(db, key, now, sc, st, exp, freed)
	return freed, nil
}

// PeekAcquire answers what RL.ACQUIRE (or, policy set, RL.CHECK of that
// CONCURRENCY policy) would answer for id, changing nothing: a nil id
// asks for a new holder. It fails with ErrWrongType as Acquire does.
func (s *Shard) PeekAcquire(db int, key []byte, now int64, policy []byte, limit, lease int64, id []byte, sc *LimitScratch) (Decision, error) {
	var old []byte
	var err error
	if policy != nil {
		_, old, err = s.policyLoad(db, key, now, policy, LimitLease)
	} else {
		old, _, err = s.LimitState(db, key, now, LimitLease)
	}
	if err != nil {
		return Decision{}, err
	}
	d, st, _, _ := decideAcquire(old, limit, lease, id, now, &sc.lease, sc.state[:0])
	sc.state = st[:0]
	return d, nil
}
