package engine

import "encoding/binary"

// RL.LOGIN's ban (see ratelimit/ban.go for BAN's contract): the list's
// record is encListBan, whose payload is the list's handle followed by the
// ban's end (see record.go), so LRANGE and LLEN see only the login times.

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
