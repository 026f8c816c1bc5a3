package ratelimit

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
// Container (KindPolicies) body: a count of states, then per state, sorted
// by policy name: the name's length and bytes, the state's own expiry (ms,
// 0 for none) and the state's length and bytes. A state is what the
// policy's command keeps in a key of its own (its kind byte first),
// decided by the same pure functions. A state past its expiry reads as
// absent and is dropped at the container's next write.

// PolicyState is one policy's state inside a container.
type PolicyState struct {
	Name     []byte
	ExpireAt int64 // ms; 0 for none
	State    []byte
}

// Live reports whether the state is not past its expiry at now.
func (ps PolicyState) Live(now int64) bool { return ps.ExpireAt == 0 || now <= ps.ExpireAt }

// nextPolicyState reads the state at the head of a container body.
func nextPolicyState(r *varintReader) (ps PolicyState) {
	ps.Name = r.bytes()
	ps.ExpireAt = r.varint()
	ps.State = r.bytes()
	return ps
}

// PolicyStates calls fn with a container's states, in name order, until it
// returns false; a damaged container reads as holding those before the
// damage, anything but a container as holding none.
func PolicyStates(container []byte, fn func(ps PolicyState) bool) {
	body, _, ok := stateBody(container, KindPolicies)
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

// FindPolicyState returns the state of policy name in container when it
// is live at now and of kind; nil otherwise, so that a policy whose type
// was changed starts afresh.
func FindPolicyState(container, name []byte, now int64, kind byte) (old []byte) {
	PolicyStates(container, func(ps PolicyState) bool {
		if !bytes.Equal(ps.Name, name) {
			return true
		}
		if ps.Live(now) && KindOf(ps.State) == kind {
			old = ps.State
		}
		return false
	})
	return old
}

// PolicyScratch is the reusable memory of PutPolicyState.
type PolicyScratch struct {
	entries []byte
}

// PutPolicyState appends to out the container (nil: none yet) with name's
// state replaced by state, expiring at expireAt (a nil state removes it),
// and the states past their expiry at now dropped. It returns the new
// container with the key's expiry, the latest of its states' (0 when one
// never expires), and how many states it holds: with none the key is to
// be deleted.
func PutPolicyState(out, container, name, state []byte, expireAt, now int64, sc *PolicyScratch) (c []byte, keyExpireAt int64, n int) {
	out = append(out, KindPolicies)
	noExpiry := false
	states := sc.entries[:0] // the entries, after the count
	add := func(name []byte, exp int64, st []byte) {
		n++
		states = appendBytes(states, name)
		states = binary.AppendVarint(states, exp)
		states = appendBytes(states, st)
		if exp == 0 {
			noExpiry = true
		}
		keyExpireAt = max(keyExpireAt, exp)
	}
	placed := state == nil
	PolicyStates(container, func(ps PolicyState) bool {
		if !placed && bytes.Compare(name, ps.Name) < 0 {
			add(name, expireAt, state)
			placed = true
		}
		if !bytes.Equal(ps.Name, name) && ps.Live(now) {
			add(ps.Name, ps.ExpireAt, ps.State)
		}
		return true
	})
	if !placed {
		add(name, expireAt, state)
	}
	sc.entries = states[:0]
	if n == 0 {
		return out, 0, 0
	}
	out = binary.AppendUvarint(out, uint64(n))
	out = append(out, states...)
	if noExpiry {
		keyExpireAt = 0
	}
	return out, keyExpireAt, n
}
