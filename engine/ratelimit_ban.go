package engine

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
//   - RL.FIXED and RL.SLIDE states: the kind byte carries limitBanned and a
//     zig-zag varint, the ban's end in ms, follows it, before the kind's
//     body. States written before BAN existed have no flag and read as
//     never banned; a state is written without the flag once its ban is
//     over.
//   - RL.LOGIN's list: the record's encoding is encListBan, whose payload is
//     the list's handle followed by the end (see record.go), so LRANGE and
//     LLEN see only the login times.
//
// The key's expiry is at least the ban's end, so a banned key never
// vanishes before its ban is over.

// limitBanned flags a rate-limit state that carries a ban's end.
const limitBanned byte = 0x80

// limitBody splits a state of kind into its ban's end (0 when it carries
// none) and its body, the bytes after the kind byte and the end. ok is
// false for a missing, damaged or other kind of state.
func limitBody(st []byte, kind byte) (body []byte, banEnd int64, ok bool) {
	if len(st) == 0 || st[0]&^limitBanned != kind {
		return nil, 0, false
	}
	if st[0]&limitBanned == 0 {
		return st[1:], 0, true
	}
	r := varintReader{b: st[1:]}
	banEnd = r.varint()
	if r.bad {
		return nil, 0, false
	}
	return r.b, banEnd, true
}

// appendLimitHead starts a state of kind, with the ban's end when the ban
// is still in force at now.
func appendLimitHead(out []byte, kind byte, banEnd, now int64) []byte {
	if banEnd <= now {
		return append(out, kind)
	}
	out = append(out, kind|limitBanned)
	return binary.AppendVarint(out, banEnd)
}

// LimitBanEnd returns the end of the ban a rate-limit state carries, 0 when
// it carries none.
func LimitBanEnd(st []byte) int64 {
	if len(st) == 0 {
		return 0
	}
	_, end, _ := limitBody(st, st[0]&^limitBanned)
	return end
}

// listBanEnd returns the ban's end kept in a list record (RL.LOGIN), 0 when
// it has none.
func listBanEnd(r []byte) int64 {
	if r[0] != encListBan {
		return 0
	}
	return int64(binary.LittleEndian.Uint64(recPayload(r)[4:]))
}

// setListBan rewrites list entry e with the ban's end banEnd (0: none) and
// expiry expireAt, keeping its object, and returns the updated entry.
func (s *Shard) setListBan(e Entry, banEnd, expireAt int64) Entry {
	var p [12]byte
	copy(p[:4], recPayload(e.rec)[:4])
	enc := encList
	if banEnd != 0 {
		enc = encListBan
		binary.LittleEndian.PutUint64(p[4:], uint64(banEnd))
	}
	payload := p[:4]
	if enc == encListBan {
		payload = p[:]
	}
	// The key may alias the old record, which put does not write over
	// when fresh is set; a heap record is always rewritten fresh.
	inline := s.arena.bytes(slotRef(s.dbs[e.db].slots[e.slot]), 1)[0] != encStub
	return s.put(e.db, recKey(e.rec), enc, expireAt, payload, nil, true, !inline)
}

// ListBanEnd returns the end of the RL.LOGIN ban kept with a list entry, 0
// when it has none.
func ListBanEnd(e Entry) int64 { return listBanEnd(e.rec) }
