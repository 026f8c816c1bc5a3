package ratelimit

import "errors"

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

// LoginHistory is what RL.LOGIN's decision reads of a key's list at now:
// the caller feeds it the entries, newest first, with Add while Add asks
// for more (at most Limit of them), then calls Decide. It is a value fed
// by the caller's own loop, not a function taking an iterator, because
// the decision's state would then move to the heap on every request.
type LoginHistory struct {
	req                          Login
	now                          int64
	n, inWindow, newest, limitTh int64
	err                          error
}

// History starts reading a history at now for l.
func (l Login) History(now int64) LoginHistory {
	return LoginHistory{req: l, now: now}
}

// Add reads the next entry, a login time as a decimal string, and reports
// whether the decision needs the one after it. An entry that is not a time
// fails the decision with ErrLoginEntry.
func (h *LoginHistory) Add(entry []byte) (more bool) {
	t, ok := ParseInt(entry)
	if !ok {
		h.err = ErrLoginEntry
		return false
	}
	if h.n == 0 {
		h.newest = t
	}
	if t > h.now-h.req.Window {
		h.inWindow++
	}
	h.n++
	if h.n == h.req.Limit {
		h.limitTh = t
	}
	return h.n < h.req.Limit
}

// Decide runs RL.LOGIN on the history read, for a key whose ban ends at
// banEnd (0: none). When record is set the login is to be recorded: now
// pushed at the head of the list, the list trimmed to Login.Kept()
// entries, the key expiring at now+Window-1 and carrying no ban any more.
// When banUntil is set the denial starts a ban that ends then: the key is
// to carry it and live at least until it ends.
func (h *LoginHistory) Decide(banEnd int64) (d Decision, record bool, banUntil int64, err error) {
	if h.err != nil {
		return d, false, 0, h.err
	}
	l, now := h.req, h.now
	d.Limit = l.Limit
	banned := now < banEnd
	if h.n >= l.Limit && h.limitTh > now-l.Window {
		// The limit-th newest login is in the window.
		d.RetryAfter = h.limitTh + l.Window - now
		d.ResetAfter = max(h.newest+l.Window-now, 0)
		switch {
		case banned:
			d.RetryAfter = max(d.RetryAfter, banEnd-now)
		case l.Ban > 0:
			// A rule's denial starts a ban; the key lives until its end.
			banUntil = now + l.Ban
			d.RetryAfter = max(d.RetryAfter, l.Ban)
			d.BanStarted = true
		}
		return d, false, banUntil, nil
	}
	if banned {
		// The rules would allow it: their state as it is, nothing recorded.
		d.Remaining = l.Limit - h.inWindow
		if h.n > 0 && h.inWindow > 0 {
			d.ResetAfter = h.newest + l.Window - now
		}
		d.RetryAfter = banEnd - now
		return d, false, 0, nil
	}
	d.Allowed = true
	d.Remaining = l.Limit - min(h.inWindow+1, l.Limit)
	d.RetryAfter = -1
	d.ResetAfter = l.Window
	return d, true, 0, nil
}
