// Package client is the Go client of limitkv's rate-limit commands: typed
// calls over a go-redis client the application already has, and net/http
// middleware.
//
//	go get github.com/limitkv/limitkv/client
//
// It imports go-redis and the standard library only: nothing of the server.
//
// # Calls
//
// New wraps any redis.UniversalClient (a plain client, a Sentinel failover
// client, a cluster or ring client), so pools, timeouts, TLS and retries
// stay the application's. Each call is one command and one round trip:
//
//	Fixed        RL.FIXED key limit window [limit window ...] [COST n] [PEEK] [ALIGN FIRST] [TZ zone] [BAN d] [SHADOW]
//	Slide        RL.SLIDE key limit window [limit window ...] [COST n] [PEEK] [PENALIZE] [BAN d] [SHADOW]
//	Login        RL.LOGIN key limit window [KEEP n] [BAN d]
//	Throttle     CL.THROTTLE key max_burst count_per_period period quantity
//	Acquire      RL.ACQUIRE key limit lease id [SHADOW]
//	Release      RL.RELEASE key id
//	SetPolicy    RL.POLICY SET name FIXED|SLIDE|GCRA|CONCURRENCY args... (FixedPolicy, SlidePolicy, GCRAPolicy, ConcurrencyPolicy)
//	GetPolicy    RL.POLICY GET name
//	DelPolicy    RL.POLICY DEL name
//	ListPolicies RL.POLICY LIST [pattern]
//	Check        RL.CHECK name key [COST n] [PEEK]
//	CheckID      RL.CHECK name key ID id (a CONCURRENCY policy)
//	Top          RL.TOP count (on every master of a cluster, merged)
//	TopReset     RL.TOP RESET (on every master of a cluster)
//
// The RL commands answer a Decision, whose times are time.Durations;
// RetryAfter is 0 (not the wire's -1) when the request was allowed.
// CL.THROTTLE keeps redis-cell's meaning (whole seconds, "never fits") in
// its own type, Throttled.
//
// Rules are a limit and a window (Rule{Limit: 100, Window: time.Minute},
// or PerMinute(100)); windows are written in the commands' syntax in the
// largest unit that is exact ("1d", "90s", "1500ms"), and a window that is
// not a positive whole number of milliseconds is an error (ErrWindow), not
// a rounded window.
//
// Optional arguments are functional options (Cost(3), Peek(), Penalize(),
// AlignFirst(), TZ("Asia/Shanghai"), Keep(64), Ban(time.Hour), Shadow()): the common call has none
// and stays short, each reads like the argument it sends, and there is no
// zero value to misread (is Cost 0 "default" or an error?). They are plain
// values, not closures, so passing them costs no allocation. The server
// checks them: an option a command does not take comes back as limitkv's
// own error naming it.
//
// Errors the server answers (WRONGTYPE, ERR invalid limit ...) are
// returned as go-redis returns them, text unchanged; errors found before
// sending (a bad window) are the package's own.
//
// # Middleware
//
// NewLimiter builds net/http middleware from a LimiterConfig: rules
// (RL.SLIDE or RL.FIXED), a named policy (RL.CHECK), or a concurrency
// limit (RL.ACQUIRE before the handler, RL.RELEASE after, the lease
// renewed while a long handler runs); the key function (by default the peer's IP address; X-Forwarded-For only
// through ForwardedFor with the trusted proxies' addresses), and what to
// do when limitkv fails. A denied request gets 429 Too Many Requests with
// Retry-After in whole seconds, rounded up. Every decided response carries
// the fields of the IETF draft "RateLimit header fields for HTTP",
// draft-ietf-httpapi-ratelimit-headers-10 (September 2025), whose format
// is a Structured Field list of named items with parameters:
//
//	RateLimit-Policy: "api";q=100;w=60
//	RateLimit: "api";r=42;t=17
//
// (q the quota, w the window in seconds, r the remaining, t the seconds
// until quota comes back). Revision 11 (May 2026) is listed by the IETF
// but its text was not available when this was written; the field syntax
// above is the one revisions 08 to 10 share.
//
// When limitkv cannot be reached the middleware fails open by default
// (the request goes through, OnError is told) so that a limiter outage is
// not an outage of every endpoint; FailClosed answers 503 instead.
package client
