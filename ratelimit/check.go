package ratelimit

import "errors"

// ErrBadState is CheckState's refusal.
var ErrBadState = errors.New("damaged rate-limit state")

// CheckState reports whether st is a whole state of a known kind, as the
// decisions write them. The decisions read a damaged state as empty, which
// suits the states this server wrote itself; a state that comes from a
// client (RESTORE) is checked first, so that a truncated or made-up one is
// refused rather than taken for a fresh key.
func CheckState(st []byte) error {
	if !checkState(st, true) {
		return ErrBadState
	}
	return nil
}

func checkState(st []byte, container bool) bool {
	if len(st) == 0 || st[0]&slideRoomy != 0 && KindOf(st) != KindSlide {
		return false
	}
	switch KindOf(st) {
	case KindFixed:
		return checkFixed(st)
	case KindSlide:
		return checkSlide(st)
	case KindGCRA:
		if st[0] != KindGCRA {
			return false
		}
		r := varintReader{b: st[1:]}
		r.varint()
		return !r.bad && len(r.b) == 0
	case KindLease:
		return st[0] == KindLease && checkLeases(st[1:])
	case KindPolicies:
		return container && checkPolicies(st)
	}
	return false
}

func checkFixed(st []byte) bool {
	body, _, ok := stateBody(st, KindFixed)
	if !ok {
		return false
	}
	r := varintReader{b: body}
	n := r.uvarint()
	for i := uint64(0); i < n && !r.bad; i++ {
		r.uvarint()
		if a := r.byte(); a != alignEpoch && a != alignFirst {
			return false
		}
		r.varint()
		r.uvarint()
	}
	return !r.bad && len(r.b) == 0
}

// checkSlide walks the header and the older entries. In the compact
// layout bytes after the last entry are tolerated: the log's readers
// never look past it. In the roomy one the older entries must fill
// region[start:end] exactly, since the next request appends at end.
func checkSlide(st []byte) bool {
	body, _, ok := stateBody(st, KindSlide)
	if !ok {
		return false
	}
	if st[0]&slideRoomy != 0 {
		n, start, end, ok := roomyCounts(body)
		if !ok || n == 1 && start != end {
			return false
		}
		region := body[roomyHead:]
		rest, ok := olderSpan(region[start:end], n-1, true)
		return ok && len(rest) == end-start
	}
	r := varintReader{b: body}
	n := r.uvarint()
	r.uvarint()
	r.varint()
	r.varint()
	r.uvarint()
	r.uvarint()
	if r.bad || n == 0 {
		return false
	}
	if n > 1 {
		_, ok := olderSpan(r.b, int64(n-1), false)
		return ok
	}
	return true
}

func checkLeases(b []byte) bool {
	for len(b) > 0 {
		if len(b) < leaseHead {
			return false
		}
		q := leaseHead + int(b[8]) + 1
		if q > len(b) {
			return false
		}
		b = b[q:]
	}
	return true
}

// checkPolicies checks a container and each state in it; a container
// holds no container.
func checkPolicies(st []byte) bool {
	body, _, ok := stateBody(st, KindPolicies)
	if !ok || st[0] != KindPolicies {
		return false
	}
	r := varintReader{b: body}
	n := r.uvarint()
	for i := uint64(0); i < n && !r.bad; i++ {
		ps := nextPolicyState(&r)
		if r.bad || CheckPolicyName(ps.Name) != nil || !checkState(ps.State, false) {
			return false
		}
	}
	return !r.bad && len(r.b) == 0
}
