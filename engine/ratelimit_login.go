package engine

import (
	"errors"
	"strconv"
)

// RL.LOGIN keeps a user's login history as a plain list at the key: the
// times of the recorded logins in ms, as decimal strings, newest first, so
// that LRANGE shows the history and LLEN counts it. A login is allowed if
// fewer than limit entries exist or the limit-th newest is older than the
// window; then its time is pushed at the head and the list trimmed to
// max(limit, keep) entries, so that raising the limit later works at once
// on the real history. The key expires when its newest login leaves the
// window. Refused logins are not recorded. With BAN the key's record also
// carries the ban's end (ratelimit_ban.go).

// ErrLoginEntry reports a list at an RL.LOGIN key holding something other
// than login times.
var ErrLoginEntry = errors.New("the list is not a list of login times")

// Login runs RL.LOGIN; ban is BAN's duration in ms (0: none). A ban's end
// is kept in the list's record (encListBan), not in the list.
func (s *Shard) Login(db int, key []byte, now, limit, window, keep, ban int64) (Decision, error) {
	var d Decision
	e, found := s.Find(db, key, now)
	var l *List
	var banEnd int64
	if found {
		if e.Kind() != KindList {
			return d, ErrWrongType
		}
		l = s.Object(e).(*List)
		banEnd = listBanEnd(e.rec)
	}
	// Read the first limit entries: the decision depends on no others.
	var scratch [24]byte
	var inWindow, limitTh, newest int64
	haveLimitTh, haveNewest := false, false
	if l != nil {
		for i, v := range l.Ascend(0, scratch[:]) {
			if int64(i) >= limit {
				break
			}
			t, ok := ParseInt(v)
			if !ok {
				return d, ErrLoginEntry
			}
			if i == 0 {
				newest, haveNewest = t, true
			}
			if t > now-window {
				inWindow++
			}
			if int64(i) == limit-1 {
				limitTh, haveLimitTh = t, true
			}
		}
	}
	d.Limit = limit
	banned := now < banEnd
	if haveLimitTh && limitTh > now-window {
		d.RetryAfter = limitTh + window - now
		if haveNewest {
			d.ResetAfter = max(newest+window-now, 0)
		}
		switch {
		case banned:
			d.RetryAfter = max(d.RetryAfter, banEnd-now)
		case ban > 0:
			// A rule's denial starts a ban; the key lives until its end.
			banEnd = now + ban
			d.RetryAfter = max(d.RetryAfter, ban)
			exp := e.ExpireAt()
			if exp > 0 {
				exp = max(exp, banEnd-1)
			}
			s.setListBan(e, banEnd, exp)
		}
		return d, nil
	}
	if banned {
		// The rules would allow it: their state as it is, nothing recorded.
		d.Remaining = limit - inWindow
		if haveNewest && inWindow > 0 {
			d.ResetAfter = newest + window - now
		}
		d.RetryAfter = banEnd - now
		return d, nil
	}
	d.Allowed = true
	d.Remaining = limit - min(inWindow+1, limit)
	d.RetryAfter = -1
	d.ResetAfter = window

	t := strconv.AppendInt(scratch[:0], now, 10)
	if l == nil {
		l = NewList()
		l.PushHead(t)
		s.SetObject(db, key, KindList, l, now+window-1)
		return d, nil
	}
	l.PushHead(t)
	if n, kept := int64(l.Len()), max(limit, keep); n > kept {
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
