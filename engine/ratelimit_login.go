package engine

import (
	"strconv"

	"github.com/limitkv/limitkv/ratelimit"
)

// Login runs RL.LOGIN on the login list at key (see ratelimit/login.go);
// ban is BAN's duration in ms (0: none). A ban's end is kept in the list's
// record (encListBan), not in the list. It fails with ErrWrongType when
// the key holds another type, with ratelimit.ErrLoginEntry when the list
// holds something other than login times.
func (s *Shard) Login(db int, key []byte, now, limit, window, keep, ban int64) (ratelimit.Decision, error) {
	e, found := s.Find(db, key, now)
	var l *List
	var banEnd int64
	var scratch [24]byte
	req := ratelimit.Login{Limit: limit, Window: window, Keep: keep, Ban: ban}
	h := req.History(now)
	if found {
		if e.Kind() != KindList {
			return ratelimit.Decision{}, ErrWrongType
		}
		l = s.Object(e).(*List)
		banEnd = listBanEnd(e.rec)
		for _, v := range l.Ascend(0, scratch[:]) {
			if !h.Add(v) {
				break
			}
		}
	}
	d, record, banUntil, err := h.Decide(banEnd)
	switch {
	case err != nil:
		return d, err
	case banUntil != 0:
		exp := e.ExpireAt()
		if exp > 0 {
			exp = max(exp, banUntil-1)
		}
		s.setListBan(e, banUntil, exp)
		return d, nil
	case !record:
		return d, nil
	}
	t := strconv.AppendInt(scratch[:0], now, 10)
	if l == nil {
		l = NewList()
		l.PushHead(t)
		s.SetObject(db, key, KindList, l, now+window-1)
		return d, nil
	}
	l.PushHead(t)
	if n, kept := int64(l.Len()), req.Kept(); n > kept {
		l.RemoveRange(int(kept), int(n-kept))
	}
	s.Touch(e)
	if banEnd != 0 {
		// The ban is over: the record goes back to a plain list.
		s.setListBan(e, 0, now+window-1)
		return d, nil
	}
	s.SetExpire(e, now+window-1)
	return d, nil
}
