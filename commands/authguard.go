package commands

import (
	"sync"
	"sync/atomic"
	"time"
)

// Password guessing. A wrong AUTH (or HELLO ... AUTH) used to answer at
// once, so one connection could try 435k passwords a second and nothing
// was logged. Now every failure is counted (INFO's acl_access_denied_auth,
// as Redis 7.2 names it), logged at most once a minute, and its reply is
// delayed: per connection the delay doubles with each consecutive failure
// (10 ms, 20 ms, ... up to 1 s), and across all connections failures are
// spaced by a shared budget of authFailRate per second, so opening more
// connections does not buy more guesses. A right password never waits:
// the delay is decided only after the constant-time comparison failed.
// The delay is served after the command has run, outside every lock and
// outside the script gate (see Server.request), so it holds up nothing but
// the guessing connection.
//
// A guesser must not hold its connection slot for long either: with a
// pipeline of thousands of AUTHs queued it used to be served them all at
// the slowed rate, for most of an hour, after it had gone, keeping
// maxclients' slot and holding up a shutdown for its whole drain limit.
// So the delay ends when the connection is killed or the server drains,
// and the rest of the pipeline is dropped then; the reply is sent as soon
// as the delay is over, so that a client that went away is found by the
// write failing (at the latest one failure later: the first write after
// a close still succeeds), and the connection is closed; and after
// authFailClose failures in a row the connection is closed after the
// reply, whatever it has queued.
const (
	authFailFirst = 10 * time.Millisecond
	authFailMax   = time.Second
	authFailRate  = 100 // failures per second, server-wide, before queueing
	authFailBurst = 100
	authFailClose = 10 // consecutive failures that close the connection
	authLogEvery  = time.Minute
)

type authGuard struct {
	denied atomic.Int64 // failed AUTH attempts since start (or CONFIG RESETSTAT)

	mu sync.Mutex
	// next is when the shared budget has room again: failures reserve a
	// slot 1/authFailRate apart, allowing a burst of authFailBurst.
	next time.Time
	// Logging: one line for the first failure of a quiet period, then a
	// count per authLogEvery.
	lastLog    time.Time
	suppressed int64
}

// failed records a failed authentication by cl and returns how long its
// reply must wait. It logs the failure (rate-limited).
func (g *authGuard) failed(s *Server, cl *Client) time.Duration {
	g.denied.Add(1)
	cl.authFails++
	own := min(authFailFirst<<min(cl.authFails-1, 7), authFailMax)
	now := time.Now()
	shared := g.sharedDelay(now)

	g.mu.Lock()
	logNow := now.Sub(g.lastLog) >= authLogEvery
	var quiet int64
	if logNow {
		quiet, g.suppressed, g.lastLog = g.suppressed, 0, now
	} else {
		g.suppressed++
	}
	g.mu.Unlock()
	if logNow {
		if quiet > 0 {
			s.Log.Warn("failed AUTH attempts", "since_last_report", quiet+1, "last_client", cl.conn.RemoteAddr(), "total", g.denied.Load())
		} else {
			s.Log.Warn("failed AUTH attempt", "client", cl.conn.RemoteAddr(), "total", g.denied.Load())
		}
	}
	return max(own, shared)
}

// sharedDelay reserves the next slot of the server-wide budget and returns
// how long from now it is: zero or less while the burst lasts, capped so
// that a flood cannot park a connection for ever.
func (g *authGuard) sharedDelay(now time.Time) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	step := time.Second / authFailRate
	if floor := now.Add(-authFailBurst * step); g.next.Before(floor) {
		g.next = floor
	}
	g.next = g.next.Add(step)
	return min(g.next.Sub(now), 5*time.Second)
}

// serve holds a failed authentication's reply back for d, then sends it,
// and drops the connection when it is gone, closing or draining, or has
// failed authFailClose times in a row. It runs on the connection's
// goroutine, after the command, holding nothing.
func (g *authGuard) serve(cl *Client, d time.Duration) {
	conn := cl.conn
	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-conn.Done():
		t.Stop()
		conn.CloseAfterReply()
		return
	}
	if !conn.Flush() || cl.authFails >= authFailClose {
		conn.CloseAfterReply()
	}
}

// succeeded resets the connection's consecutive failures.
func (g *authGuard) succeeded(cl *Client) { cl.authFails = 0 }
