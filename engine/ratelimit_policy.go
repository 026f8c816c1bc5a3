package engine

import (
	"bytes"
	"encoding/binary"
)

// Named policies (RL.CHECK name key) keep their states in the key they
// decide on, one state per policy: a key is the subject (a user, an IP, an
// API key) and every policy applied to it is a limit of its own, whatever
// its type. The key's value is a container of those states, so that the
// subject's limits live where the key lives (in cluster mode, in the key's
// slot, where a client routes RL.CHECK), DEL of the key resets them all,
// its TTL is the longest of theirs, and every path that moves or saves a
// key (snapshots, replication, RENAME, COPY, MOVE) carries them as one
// value.
//
// Container body: a count of states, then per state, sorted by policy
// name: the name's length and bytes, the state's own expiry (ms, 0 for
// none) and the state's length and bytes. A state is what the policy's
// command keeps in a key of its own (its kind byte first), decided by the
// same pure functions. A state past its expiry reads as absent and is
// dropped at the container's next write.
const LimitPolicies byte = 5

// policyState is one policy's state inside a container.
type policyState struct {
	name     []byte
	expireAt int64
	state    []byte
}

// nextPolicyState reads the state at the head of a container body.
func nextPolicyState(r *varintReader) (ps policyState) {
	n := r.uvarint()
	if r.bad || n > uint64(len(r.b)) {
		r.bad = true
		return ps
	}
	ps.name, r.b = r.b[:n], r.b[n:]
	ps.expireAt = r.varint()
	n = r.uvarint()
	if r.bad || n > uint64(len(r.b)) {
		r.bad = true
		return ps
	}
	ps.state, r.b = r.b[:n], r.b[n:]
	return ps
}

// policyStates iterates over a container's states; a damaged container
// reads as holding those before the damage.
func policyStates(container []byte, fn func(ps policyState) bool) {
	body, _, ok := limitBody(container, LimitPolicies)
	if !ok {
		return
	}
	r := varintReader{b: body}
	n := r.uvarint()
	for i := uint64(0); i < n && !r.bad; i++ {
		ps := nextPolicyState(&r)
		if r.bad || !fn(ps) {
			return
		}
	}
}

func (ps policyState) live(now int64) bool { return ps.expireAt == 0 || now <= ps.expireAt }

// policyLoad finds the state of policy name, of kind, at key. The key
// holds a container, nothing, or a plain state of kind, which is taken as
// name's (a key that a policy's command, or RL.CHECK before policies had a
// state each, wrote): its next write makes it a container. A state of
// another kind under name (a policy whose type was changed) reads as
// absent, so that the new type starts afresh. Anything else is
// ErrWrongType.
func (s *Shard) policyLoad(db int, key []byte, now int64, name []byte, kind byte) (container, old []byte, err error) {
	e, ok := s.Find(db, key, now)
	if !ok {
		return nil, nil, nil
	}
	if e.Kind() != KindLimit {
		return nil, nil, ErrWrongType
	}
	st := limitBytes(s, e)
	switch {
	case len(st) == 0:
		return nil, nil, ErrWrongType
	case st[0] == LimitPolicies:
		policyStates(st, func(ps policyState) bool {
			if !bytes.Equal(ps.name, name) {
				return true
			}
			if ps.live(now) && len(ps.state) > 0 && ps.state[0]&^limitBanned == kind {
				old = ps.state
			}
			return false
		})
		return st, old, nil
	case st[0]&^limitBanned == kind:
		return nil, st, nil
	}
	return nil, nil, ErrWrongType
}

// policyStore writes the container with name's state replaced by state
// (expiring at expireAt; nil removes it) and the states past their expiry
// dropped. The key expires with its last state and is deleted with it.
// container is what policyLoad returned (nil: no container yet).
func (s *Shard) policyStore(db int, key []byte, now int64, container, name, state []byte, expireAt int64, sc *LimitScratch) {
	out := append(sc.policy[:0], LimitPolicies)
	var count uint64
	var keyExp int64
	noExpiry := false
	var states []byte // the entries, after the count
	add := func(n []byte, exp int64, st []byte) {
		count++
		states = binary.AppendUvarint(states, uint64(len(n)))
		states = append(states, n...)
		states = binary.AppendVarint(states, exp)
		states = binary.AppendUvarint(states, uint64(len(st)))
		states = append(states, st...)
		if exp == 0 {
			noExpiry = true
		}
		keyExp = max(keyExp, exp)
	}
	states = sc.policyEntries[:0]
	placed := state == nil
	policyStates(container, func(ps policyState) bool {
		if !placed && bytes.Compare(name, ps.name) < 0 {
			add(name, expireAt, state)
			placed = true
		}
		if !bytes.Equal(ps.name, name) && ps.live(now) {
			add(ps.name, ps.expireAt, ps.state)
		}
		return true
	})
	if !placed {
		add(name, expireAt, state)
	}
	sc.policyEntries = states[:0]
	if count == 0 {
		s.Delete(db, key, now)
		return
	}
	out = binary.AppendUvarint(out, count)
	out = append(out, states...)
	if noExpiry {
		keyExp = 0
	}
	s.SetLimitState(db, key, now, out, keyExp)
	sc.policy = out[:0]
}

// PolicyFixed runs RL.FIXED's decision on policy name's state at key.
func (s *Shard) PolicyFixed(db int, key []byte, now int64, name []byte, rules []Rule, o FixedOptions, sc *LimitScratch) (Decision, error) {
	container, old, err := s.policyLoad(db, key, now, name, LimitFixed)
	if err != nil {
		return Decision{}, err
	}
	d, st, exp, write := DecideFixed(old, rules, now, o, &sc.fixed, sc.state[:0])
	if write {
		s.policyStore(db, key, now, container, name, st, exp, sc)
		sc.state = st[:0]
	}
	return d, nil
}

// PolicySlide runs RL.SLIDE's decision on policy name's state at key.
func (s *Shard) PolicySlide(db int, key []byte, now int64, name []byte, rules []Rule, o SlideOptions, sc *LimitScratch) (Decision, error) {
	container, old, err := s.policyLoad(db, key, now, name, LimitSlide)
	if err != nil {
		return Decision{}, err
	}
	d, st, exp, write := DecideSlide(old, rules, now, o, &sc.slide, sc.state[:0])
	if write {
		s.policyStore(db, key, now, container, name, st, exp, sc)
		sc.state = st[:0]
	}
	return d, nil
}

// PolicyThrottle runs CL.THROTTLE's decision on policy name's state at key.
func (s *Shard) PolicyThrottle(db int, key []byte, nowMs int64, name []byte, g GCRA, sc *LimitScratch) (ThrottleResult, error) {
	container, old, err := s.policyLoad(db, key, nowMs, name, LimitGCRA)
	if err != nil {
		return ThrottleResult{}, err
	}
	res, st, exp, write, err := DecideGCRA(old, g, nowMs, sc.state[:0])
	if err != nil {
		return res, err
	}
	if write {
		s.policyStore(db, key, nowMs, container, name, st, exp, sc)
		sc.state = st[:0]
	}
	return res, nil
}

// PolicyAcquire runs RL.ACQUIRE's decision on policy name's leases at key.
func (s *Shard) PolicyAcquire(db int, key []byte, now int64, name []byte, limit, lease int64, id []byte, sc *LimitScratch) (Decision, error) {
	container, old, err := s.policyLoad(db, key, now, name, LimitLease)
	if err != nil {
		return Decision{}, err
	}
	d, st, exp, write := decideAcquire(old, limit, lease, id, now, &sc.lease, sc.state[:0])
	sc.state = st[:0]
	if write {
		s.policyStore(db, key, now, container, name, st, exp, sc)
	}
	return d, nil
}

// releasePolicies runs RL.RELEASE on a container: id's lease is freed in
// every CONCURRENCY policy's state that holds one (a request holds one slot
// per policy it went through). It reports whether one was freed.
func (s *Shard) releasePolicies(db int, key []byte, now int64, container, id []byte, sc *LimitScratch) bool {
	freed := false
	var names [][]byte
	policyStates(container, func(ps policyState) bool {
		if ps.live(now) && len(ps.state) > 0 && ps.state[0] == LimitLease {
			if ok, _, _, _ := decideRelease(ps.state, id, now, nil); ok {
				names = append(names, append([]byte(nil), ps.name...))
			}
		}
		return true
	})
	for _, name := range names {
		c, old, err := s.policyLoad(db, key, now, name, LimitLease)
		if err != nil {
			break
		}
		ok, st, exp, buf := decideRelease(old, id, now, sc.state[:0])
		if ok {
			freed = true
			s.policyStore(db, key, now, c, name, st, exp, sc)
		}
		sc.state = buf[:0]
	}
	return freed
}
