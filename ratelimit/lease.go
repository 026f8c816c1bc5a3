package ratelimit

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
	if len(old) == 0 || old[0] != KindLease {
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
// returns the decision and, when allowed (write), the new state (appended
// to out) with the key's expiry: the last millisecond of its last lease.
// When denied, state is only the buffer it built in, which the caller may
// pass back as out to allocate nothing next time.
//
// The reply: remaining is the free slots after the request; a denial's
// retry_after_ms is the time until enough leases have ended for a slot to
// free (the earliest one's end when the semaphore is exactly full; a
// release may free one sooner); reset_after_ms is the time until every
// lease, the new one included, has ended.
func DecideAcquire(old []byte, limit, lease int64, id []byte, now int64, sc *LeaseScratch, out []byte) (d Decision, state []byte, expireAt int64, write bool) {
	s, state := scanLeases(old, id, now, append(out, KindLease))
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
// without allocating; the next acquire drops it with the expired ones. buf
// is the buffer it built in, for the caller to pass back as out.
func DecideRelease(old []byte, id []byte, now int64, out []byte) (freed bool, state []byte, expireAt int64, buf []byte) {
	if len(old) == 0 || old[0] != KindLease {
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
