package engine

import (
	"encoding/binary"

	"github.com/limitkv/limitkv/ratelimit"
)

// Rate-limit states are values of their own type (TYPE says "ratelimit").
// Each is a small byte string in the key's record, laid out and decided by
// package ratelimit. Each command has a Shard operation (Fixed, Slide,
// Throttle, Acquire, Release, Policy*; Login keeps a list instead) that
// loads the state, runs the decision and stores the new state with the
// key's expiry, under the shard lock that the caller holds.

// LimitState returns the rate-limit state bytes at key, valid until the next
// change to the shard. It fails with ErrWrongType for other types and when
// the state is of another kind.
func (s *Shard) LimitState(db int, key []byte, now int64, kind byte) ([]byte, bool, error) {
	e, st, err := s.limitEntry(db, key, now, kind)
	return st, err == nil && e.rec != nil, err
}

// limitEntry is LimitState with the entry the state is in (a zero Entry
// when there is none), for storeDecided to rewrite in place.
func (s *Shard) limitEntry(db int, key []byte, now int64, kind byte) (Entry, []byte, error) {
	e, ok := s.Find(db, key, now)
	if !ok {
		return Entry{}, nil, nil
	}
	if e.Kind() != KindLimit {
		return Entry{}, nil, ErrWrongType
	}
	st := limitBytes(s, e)
	if ratelimit.KindOf(st) != kind {
		return Entry{}, nil, ErrWrongType
	}
	return e, st, nil
}

// LimitScratch is a caller's reusable memory for rate-limit decisions, one
// per connection: with it a decision on an existing key allocates nothing.
// The zero value is ready to use.
type LimitScratch struct {
	fixed    ratelimit.FixedScratch
	lease    ratelimit.LeaseScratch
	policies ratelimit.PolicyScratch
	state    []byte // the new state, until SetLimitState copies it
	policy   []byte // a policy container being rebuilt (ratelimit_policy.go)
}

// storeDecided stores a state a decision returned, if it wrote one, and
// keeps the new state's memory as the scratch for the next one. e and old
// are the entry and state the decision read: a state of the same length,
// which a counter's usually is, is rewritten where it lies, as INCR
// rewrites a number (a decision that wrote old itself, as RL.SLIDE's
// does, leaves only the expiry to change), and any other replaces the
// entry found, without looking the key up again.
func (s *Shard) storeDecided(db int, key []byte, now int64, sc *LimitScratch, e Entry, old, state []byte, expireAt int64, write bool) {
	if !write {
		return
	}
	wroteOld := len(state) > 0 && len(old) > 0 && &state[0] == &old[0]
	inPlace := e.rec != nil && len(state) > 0 && len(state) == len(old) && (recExpire(e.rec) != 0) == (expireAt != 0)
	if wroteOld && !inPlace {
		// The record is about to be rewritten from the state it holds:
		// copy the state out first.
		state = append(sc.state[:0], state...)
	}
	switch {
	case inPlace:
		if !wroteOld {
			copy(old, state)
		}
		if was := recExpire(e.rec); was != expireAt {
			_, end := recKeyBounds(e.rec)
			binary.LittleEndian.PutUint64(e.rec[end:], uint64(expireAt))
			t := &s.dbs[db]
			t.delExp(was)
			t.addExp(expireAt)
		}
		s.changed(db, e.rec)
	case e.rec != nil && len(state) > 0:
		var hb [binary.MaxVarintLen64]byte
		n := binary.PutUvarint(hb[:], uint64(len(state)))
		s.replaceAt(db, &s.dbs[db], e.slot, e.rec, key, encLimit, expireAt, hb[:n], state, false, false)
	default:
		s.SetLimitState(db, key, now, state, expireAt)
	}
	if state != nil && !(wroteOld && inPlace) {
		sc.state = state[:0]
	}
}

// limitBytes returns the state bytes of a rate-limit entry.
func limitBytes(_ *Shard, e Entry) []byte {
	return rawString(recPayload(e.rec))
}

// SetLimitState stores a rate-limit state at key with its expiry, or
// deletes the key when state is empty.
func (s *Shard) SetLimitState(db int, key []byte, now int64, state []byte, expireAt int64) {
	if len(state) == 0 {
		s.Delete(db, key, now)
		return
	}
	var hb [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(hb[:], uint64(len(state)))
	s.put(db, key, encLimit, expireAt, hb[:n], state, false, false)
}

// Fixed runs RL.FIXED on key: it loads the state, decides and, unless the
// request was denied or a PEEK, stores the new state and expiry. It fails
// with ErrWrongType when the key holds another type or another kind of
// rate-limit state.
func (s *Shard) Fixed(db int, key []byte, now int64, rules []ratelimit.Rule, o ratelimit.FixedOptions, sc *LimitScratch) (ratelimit.Decision, error) {
	e, old, err := s.limitEntry(db, key, now, ratelimit.KindFixed)
	if err != nil {
		return ratelimit.Decision{}, err
	}
	d, st, exp, write := ratelimit.DecideFixed(old, rules, now, o, &sc.fixed, sc.state[:0])
	s.storeDecided(db, key, now, sc, e, old, st, exp, write)
	return d, nil
}

// Slide runs RL.SLIDE on key: it loads the log, decides and, when the
// request is recorded (allowed, or PENALIZE) and not a PEEK, stores the
// new log and expiry, in place when the log has room. It fails with
// ErrWrongType when the key holds another type or another kind of
// rate-limit state.
func (s *Shard) Slide(db int, key []byte, now int64, rules []ratelimit.Rule, o ratelimit.SlideOptions, sc *LimitScratch) (ratelimit.Decision, error) {
	e, old, err := s.limitEntry(db, key, now, ratelimit.KindSlide)
	if err != nil {
		return ratelimit.Decision{}, err
	}
	d, st, exp, write := ratelimit.DecideSlideInPlace(old, rules, now, o, sc.state[:0])
	s.storeDecided(db, key, now, sc, e, old, st, exp, write)
	return d, nil
}

// Throttle runs CL.THROTTLE on key at nowMs: it loads the TAT, decides
// and, when the request took tokens, stores the new TAT and expiry. It
// fails with ErrWrongType when the key holds another type or another kind
// of rate-limit state, then with ratelimit.ErrZeroRate or
// ratelimit.ErrGCRAOverflow for parameters DecideGCRA refuses.
func (s *Shard) Throttle(db int, key []byte, nowMs int64, g ratelimit.GCRA, sc *LimitScratch) (ratelimit.ThrottleResult, error) {
	e, old, err := s.limitEntry(db, key, nowMs, ratelimit.KindGCRA)
	if err != nil {
		return ratelimit.ThrottleResult{}, err
	}
	res, st, exp, write, err := ratelimit.DecideGCRA(old, g, nowMs, sc.state[:0])
	if err != nil {
		return res, err
	}
	s.storeDecided(db, key, nowMs, sc, e, old, st, exp, write)
	return res, nil
}
