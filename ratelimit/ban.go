package ratelimit

import "encoding/binary"

// BAN (RL.FIXED, RL.SLIDE, RL.LOGIN): once a rule denies a request, every
// request on the key is denied until the ban's end, `duration` after that
// denial, whatever the rules say.
//
// Only a rule's denial made while no ban is in force starts a ban: requests
// during a ban never extend it (PENALIZE is the tool for "retrying keeps you
// blocked"), and a PEEK never starts one. A ban is part of the key's state,
// not of the call: it holds until its end for every later call, with or
// without BAN or with another duration, and DEL lifts it.
//
// Where the end is kept:
//   - RL.FIXED and RL.SLIDE states: the kind byte carries the banned flag
//     and a zig-zag varint, the ban's end in ms, follows it, before the
//     kind's body. States written before BAN existed have no flag and read
//     as never banned; a state is written without the flag once its ban is
//     over.
//   - RL.LOGIN's list: the engine keeps the end in the list's record, so
//     LRANGE and LLEN see only the login times (LoginHistory.Decide takes
//     it and says when a ban starts).
//
// The key's expiry is at least the ban's end, so a banned key never
// vanishes before its ban is over.

// banned flags a rate-limit state that carries a ban's end.
const banned byte = 0x80

// stateBody splits a state of kind into its ban's end (0 when it carries
// none) and its body, the bytes after the kind byte and the end. ok is
// false for a missing, damaged or other kind of state.
func stateBody(st []byte, kind byte) (body []byte, banEnd int64, ok bool) {
	if len(st) == 0 || st[0]&^kindFlags != kind {
		return nil, 0, false
	}
	if st[0]&banned == 0 {
		return st[1:], 0, true
	}
	r := varintReader{b: st[1:]}
	banEnd = r.varint()
	if r.bad {
		return nil, 0, false
	}
	return r.b, banEnd, true
}

// appendHead starts a state of kind (with its layout's flag), with the
// ban's end when the ban is still in force at now.
func appendHead(out []byte, kind byte, banEnd, now int64) []byte {
	if banEnd <= now {
		return append(out, kind)
	}
	out = append(out, kind|banned)
	return binary.AppendVarint(out, banEnd)
}

// BanEnd returns the end of the ban a state carries, 0 when it carries
// none.
func BanEnd(st []byte) int64 {
	if len(st) == 0 {
		return 0
	}
	_, end, _ := stateBody(st, st[0]&^kindFlags)
	return end
}
