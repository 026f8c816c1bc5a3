package engine

import "github.com/limitkv/limitkv/ratelimit"

// Named policies keep their states in a container at the key they decide
// on (see ratelimit/policies.go); these operations load a policy's state
// from it and store the decided state back.

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
	case st[0] == ratelimit.KindPolicies:
		return st, ratelimit.FindPolicyState(st, name, now, kind), nil
	case ratelimit.KindOf(st) == kind:
		return nil, st, nil
	}
	return nil, nil, ErrWrongType
}

// policyStore writes the container with name's state replaced by state
// (expiring at expireAt; nil removes it) and the states past their expiry
// dropped. The key expires with its last state and is deleted with it.
// container is what policyLoad returned (nil: no container yet).
func (s *Shard) policyStore(db int, key []byte, now int64, container, name, state []byte, expireAt int64, sc *LimitScratch) {
	out, keyExp, n := ratelimit.PutPolicyState(sc.policy[:0], container, name, state, expireAt, now, &sc.policies)
	if n == 0 {
		s.Delete(db, key, now)
		return
	}
	s.SetLimitState(db, key, now, out, keyExp)
	sc.policy = out[:0]
}

// PolicyFixed runs RL.FIXED's decision on policy name's state at key.
func (s *Shard) PolicyFixed(db int, key []byte, now int64, name []byte, rules []ratelimit.Rule, o ratelimit.FixedOptions, sc *LimitScratch) (ratelimit.Decision, error) {
	container, old, err := s.policyLoad(db, key, now, name, ratelimit.KindFixed)
	if err != nil {
		return ratelimit.Decision{}, err
	}
	d, st, exp, write := ratelimit.DecideFixed(old, rules, now, o, &sc.fixed, sc.state[:0])
	if write {
		s.policyStore(db, key, now, container, name, st, exp, sc)
		sc.state = st[:0]
	}
	return d, nil
}

// PolicySlide runs RL.SLIDE's decision on policy name's state at key.
func (s *Shard) PolicySlide(db int, key []byte, now int64, name []byte, rules []ratelimit.Rule, o ratelimit.SlideOptions, sc *LimitScratch) (ratelimit.Decision, error) {
	container, old, err := s.policyLoad(db, key, now, name, ratelimit.KindSlide)
	if err != nil {
		return ratelimit.Decision{}, err
	}
	d, st, exp, write := ratelimit.DecideSlide(old, rules, now, o, sc.state[:0])
	if write {
		s.policyStore(db, key, now, container, name, st, exp, sc)
		sc.state = st[:0]
	}
	return d, nil
}

// PolicyThrottle runs CL.THROTTLE's decision on policy name's state at key.
func (s *Shard) PolicyThrottle(db int, key []byte, nowMs int64, name []byte, g ratelimit.GCRA, sc *LimitScratch) (ratelimit.ThrottleResult, error) {
	container, old, err := s.policyLoad(db, key, nowMs, name, ratelimit.KindGCRA)
	if err != nil {
		return ratelimit.ThrottleResult{}, err
	}
	res, st, exp, write, err := ratelimit.DecideGCRA(old, g, nowMs, sc.state[:0])
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
func (s *Shard) PolicyAcquire(db int, key []byte, now int64, name []byte, limit, lease int64, id []byte, sc *LimitScratch) (ratelimit.Decision, error) {
	container, old, err := s.policyLoad(db, key, now, name, ratelimit.KindLease)
	if err != nil {
		return ratelimit.Decision{}, err
	}
	d, st, exp, write := ratelimit.DecideAcquire(old, limit, lease, id, now, &sc.lease, sc.state[:0])
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
	ratelimit.PolicyStates(container, func(ps ratelimit.PolicyState) bool {
		if ps.Live(now) && len(ps.State) > 0 && ps.State[0] == ratelimit.KindLease {
			if ok, _, _, _ := ratelimit.DecideRelease(ps.State, id, now, nil); ok {
				names = append(names, append([]byte(nil), ps.Name...))
			}
		}
		return true
	})
	for _, name := range names {
		c, old, err := s.policyLoad(db, key, now, name, ratelimit.KindLease)
		if err != nil {
			break
		}
		ok, st, exp, buf := ratelimit.DecideRelease(old, id, now, sc.state[:0])
		if ok {
			freed = true
			s.policyStore(db, key, now, c, name, st, exp, sc)
		}
		sc.state = buf[:0]
	}
	return freed
}
