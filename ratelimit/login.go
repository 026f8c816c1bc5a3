package ratelimit

import (
	"errors"
	"iter"
)

// RL.LOGIN keeps a user's login history as a plain list at the key: the
// times of the recorded logins in ms, as decimal strings, newest first, so
// that LRANGE shows the history and LLEN counts it. A login is allowed if
// fewer than limit entries exist or the limit-th newest is older than the
// window; then its time is pushed at the head and the list trimmed to
// max(limit, keep) entries, so that raising the limit later works at once
// on the real history. The key expires when its newest login leaves the
// window. Refused logins are not recorded. With BAN the key's record also
// carries the ban's end (ban.go). The engine keeps the list; the decision
// is here.

// ErrLoginEntry reports a login history holding something other than
// login times.
var ErrLoginEntry = errors.New("the list is not a list of login times")

// Login is one RL.LOGIN request.
type Login struct {
	Limit  int64
	Window int64 // ms
	Keep   int64 // KEEP: how many logins to keep at least
	Ban    int64 // BAN: ms a rule's denial bans the key for; 0 for none
}

// Kept is the number of newest logins a recorded login keeps.
func (l Login) Kept() int64 { return max(l.Limit, l.Keep) }

// DecideLogin runs RL.LOGIN at now on a key whose history (the list's
// entries, newest first; nil for no key) it reads up to l.Limit entries,
// and whose ban ends at banEnd (0: none). When record is set the login is
// to be recorded: now pushed at the head of the list, the list trimmed to
// l.Kept() entries, the key expiring at now+l.Window-1 and carrying no ban
// any more. When banUntil is set the denial starts a ban that ends then:
// the key is to carry it and live at least until it ends. An entry that is
// not a time fails with ErrLoginEntry.
func DecideLogin(history iter.Seq[[]byte], now, banEnd int64, l Login) (d Decision, record bool, banUntil int64, err error) {
	// The first limit entries: the decision depends on no others.
	var inWindow, limitTh, newest int64
	haveLimitTh, haveNewest := false, false
	if history != nil {
		i := int64(0)
		for v := range history {
			if i >= l.Limit {
				break
			}
			t, ok := parseInt(v)
			if !ok {
				return d, false, 0, ErrLoginEntry
			}
			if i == 0 {
				newest, haveNewest = t, true
			}
			if t > now-l.Window {
				inWindow++
			}
			if i == l.Limit-1 {
				limitTh, haveLimitTh = t, true
			}
			i++
		}
	}
	d.Limit = l.Limit
	banned := now < banEnd
	if haveLimitTh && limitTh > now-l.Window {
		d.RetryAfter = limitTh + l.Window - now
		if haveNewest {
			d.ResetAfter = max(newest+l.Window-now, 0)
		}
		switch {
		case banned:
			d.RetryAfter = max(d.RetryAfter, banEnd-now)
		case l.Ban > 0:
			// A rule's denial starts a ban; the key lives until its end.
			banUntil = now + l.Ban
			d.RetryAfter = max(d.RetryAfter, l.Ban)
		}
		return d, false, banUntil, nil
	}
	if banned {
		// The rules would allow it: their state as it is, nothing recorded.
		d.Remaining = l.Limit - inWindow
		if haveNewest && inWindow > 0 {
			d.ResetAfter = newest + l.Window - now
		}
		d.RetryAfter = banEnd - now
		return d, false, 0, nil
	}
	d.Allowed = true
	d.Remaining = l.Limit - min(inWindow+1, l.Limit)
	d.RetryAfter = -1
	d.ResetAfter = l.Window
	return d, true, 0, nil
}
