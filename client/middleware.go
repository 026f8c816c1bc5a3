package client

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
)

// LimiterConfig says what a Limiter protects and how. Exactly one of
// Rules, Policy and Concurrency is set.
type LimiterConfig struct {
	// Name identifies the limit in the RateLimit-Policy and RateLimit
	// headers (default: Policy if set, else "default"). Printable ASCII.
	Name string
	// Rules are the limits: RL.SLIDE's, or RL.FIXED's when Fixed is set.
	Rules []Rule
	// Fixed uses fixed windows (RL.FIXED) instead of a sliding window.
	Fixed bool
	// Policy names a policy defined on the server (RL.POLICY SET, or
	// --rl-policies): each request is RL.CHECK Policy key, so that the
	// limit changes on the server without a deploy. RateLimit-Policy then
	// carries the limit of each reply and no window, which only the
	// server knows.
	Policy string
	// Concurrency limits the requests in flight per key instead of their
	// rate: RL.ACQUIRE key Concurrency Lease <a random request id> before
	// the handler runs, RL.RELEASE when it returns.
	Concurrency int64
	// ConcurrencyPolicy, with Policy, says that the policy is a
	// CONCURRENCY one: RL.CHECK Policy key ID <a random request id> before
	// the handler, RL.RELEASE after, renewed every Lease/2 (Lease should
	// then be the policy's).
	ConcurrencyPolicy bool
	// Lease is how long a slot outlives a process that died holding it
	// (default 30s). A handler that runs longer keeps its slot: the lease
	// is renewed every Lease/2 until the handler returns.
	Lease time.Duration
	// Options are sent with every request's command: Cost, Penalize,
	// AlignFirst, TZ, Ban, Shadow for Rules; Cost for Policy; Shadow for
	// Concurrency.
	Options []Option

	// Key maps a request to the identity it is limited by. The default,
	// RemoteIP, is the peer's address: it does not trust X-Forwarded-For,
	// which any client can write; behind a proxy use ForwardedFor with the
	// proxies' addresses. An empty key with a nil error lets the request
	// through unlimited (an allow-list); an error is handled as a failure
	// of limitkv is (OnError, then FailClosed decides).
	Key func(*http.Request) (string, error)
	// KeyPrefix goes before every key (default "rl:<Name>:"), so that
	// limiters with different rules never share a key.
	KeyPrefix string

	// FailClosed answers 503 Service Unavailable when limitkv cannot be
	// reached or answers an error. The default is to fail open: the
	// request goes through unlimited, because a limiter that is down
	// should not take every endpoint it protects down with it (Envoy's
	// rate-limit filter makes the same choice by default). Set it where
	// letting traffic through unchecked is worse than refusing it: login
	// and password-reset endpoints, paid APIs.
	//
	// How long a failure takes to show is up to the go-redis client: its
	// DialTimeout and ReadTimeout (5s and 3s by default) bound each call,
	// and the request's context deadline applies only if the client has
	// ContextTimeoutEnabled. Give the limiter's client short timeouts
	// (tens of milliseconds on a LAN) so that an outage costs requests
	// little latency either way.
	FailClosed bool
	// OnError, if set, is called with every failure (limitkv unreachable,
	// an error reply, a Key error, a lease that could not be renewed or
	// released), whichever way FailClosed goes: the place to log and
	// count them.
	OnError func(r *http.Request, err error)
	// OnDenied writes the response to a denied request. The RateLimit
	// headers and Retry-After are already set and the status not yet
	// written. The default writes 429 Too Many Requests with a short text
	// body.
	OnDenied func(w http.ResponseWriter, r *http.Request, d Decision)
}

// ErrLeaseLost is given to OnError when a long handler's lease could not
// be renewed because it had already ended and its slot was taken.
var ErrLeaseLost = errors.New("limitkv: the request's lease ended before it could be renewed")

type limiterMode uint8

const (
	modeRules limiterMode = iota
	modePolicy
	modeConcurrency
)

// Limiter is net/http middleware that rate-limits requests with limitkv.
type Limiter struct {
	c        *Client
	mode     limiterMode
	args     []any // the command, with the key (and id) left to fill in
	keyPos   int
	idPos    int // the request id's place, for a lease
	prefix   string
	key      func(*http.Request) (string, error)
	failMode bool
	onError  func(*http.Request, error)
	onDenied func(http.ResponseWriter, *http.Request, Decision)
	lease    time.Duration

	concurrencyPolicy bool // the policy header comes from each reply

	rules  []Rule
	items  []string // each rule's name as an sf-string (one for Policy and Concurrency)
	policy string   // the RateLimit-Policy value, when it is the same on every response
}

// NewLimiter checks cfg and builds the middleware. Every check that can be
// made before the first request is made here, so that a bad configuration
// fails at start-up, not at the first request.
func NewLimiter(c *Client, cfg LimiterConfig) (*Limiter, error) {
	if c == nil {
		return nil, errors.New("limitkv: NewLimiter needs a Client")
	}
	modes := 0
	for _, set := range []bool{len(cfg.Rules) > 0, cfg.Policy != "", cfg.Concurrency != 0} {
		if set {
			modes++
		}
	}
	if modes != 1 {
		return nil, errors.New("limitkv: a limiter needs exactly one of Rules, Policy and Concurrency")
	}
	if cfg.ConcurrencyPolicy && cfg.Policy == "" {
		return nil, errors.New("limitkv: ConcurrencyPolicy needs the Policy's name")
	}
	name := cfg.Name
	if name == "" {
		name = "default"
		if cfg.Policy != "" {
			name = cfg.Policy
		}
	}
	quoted, err := sfString(name)
	if err != nil {
		return nil, fmt.Errorf("limitkv: limiter name %q: %w", name, err)
	}
	l := &Limiter{
		c:        c,
		prefix:   cfg.KeyPrefix,
		key:      cfg.Key,
		failMode: cfg.FailClosed,
		onError:  cfg.OnError,
		onDenied: cfg.OnDenied,
		items:    []string{quoted},
	}
	if l.prefix == "" {
		l.prefix = "rl:" + name + ":"
	}
	if l.key == nil {
		l.key = RemoteIP
	}
	if l.onDenied == nil {
		l.onDenied = tooManyRequests
	}
	var args []any
	switch {
	case cfg.Policy != "" && cfg.ConcurrencyPolicy:
		l.mode, l.keyPos, l.idPos = modeConcurrency, 2, 4
		if l.lease, err = leaseOf(cfg.Lease); err != nil {
			return nil, err
		}
		args = []any{"RL.CHECK", cfg.Policy, "", "ID", ""}
		l.concurrencyPolicy = true
	case cfg.Policy != "":
		l.mode, l.keyPos = modePolicy, 2
		args = []any{"RL.CHECK", cfg.Policy, ""}
	case cfg.Concurrency != 0:
		l.mode, l.keyPos, l.idPos = modeConcurrency, 1, 4
		if l.lease, err = leaseOf(cfg.Lease); err != nil {
			return nil, err
		}
		w, _ := FormatWindow(l.lease)
		args = []any{"RL.ACQUIRE", "", cfg.Concurrency, w, ""}
		l.policy = quoted + ";q=" + strconv.FormatInt(cfg.Concurrency, 10) + `;qu="concurrent-requests"`
	default:
		l.mode, l.keyPos = modeRules, 1
		cmd := "RL.SLIDE"
		if cfg.Fixed {
			cmd = "RL.FIXED"
		}
		if args, err = appendRules([]any{cmd, ""}, cfg.Rules); err != nil {
			return nil, err
		}
		if err := l.nameRules(name, cfg.Rules); err != nil {
			return nil, err
		}
	}
	if l.args, err = appendOptions(args, cfg.Options); err != nil {
		return nil, err
	}
	return l, nil
}

func leaseOf(d time.Duration) (time.Duration, error) {
	if d == 0 {
		d = 30 * time.Second
	}
	if _, err := FormatWindow(d); err != nil {
		return 0, fmt.Errorf("%w (lease)", err)
	}
	return d, nil
}

// nameRules names the rules in the headers: one rule is named name;
// several are told apart by their windows ("api-1m", "api-1h"). Two rules
// with the same window would share a name, and the one with the higher
// limit could never decide anything.
func (l *Limiter) nameRules(name string, rules []Rule) error {
	l.rules = append([]Rule(nil), rules...)
	l.items = l.items[:0]
	seen := make(map[string]bool)
	var policy []string
	for _, r := range rules {
		w, _ := FormatWindow(r.Window) // checked by appendRules
		item := name
		if len(rules) > 1 {
			item = name + "-" + w
		}
		if seen[item] {
			return fmt.Errorf("limitkv: two rules with the window %s: the higher limit would never decide", w)
		}
		seen[item] = true
		quoted, _ := sfString(item)
		l.items = append(l.items, quoted)
		p := quoted + ";q=" + strconv.FormatInt(r.Limit, 10)
		// w is whole seconds in the draft; a window that is not is left
		// out rather than rounded into a different policy.
		if r.Window%time.Second == 0 {
			p += ";w=" + strconv.FormatInt(int64(r.Window/time.Second), 10)
		}
		policy = append(policy, p)
	}
	l.policy = strings.Join(policy, ", ")
	return nil
}

// Handler wraps next: each request is decided by limitkv first; denied
// requests get OnDenied (429), allowed ones reach next, and both carry the
// RateLimit-Policy and RateLimit headers. With Concurrency, the slot is
// held while next runs and released when it returns.
func (l *Limiter) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, err := l.key(r)
		if err == nil && key == "" {
			next.ServeHTTP(w, r)
			return
		}
		var d Decision
		var args []any
		if err == nil {
			args = l.command(key)
			d, err = l.c.decide(r.Context(), args)
		}
		if err != nil {
			if r.Context().Err() != nil {
				return // the client has gone: nobody to answer
			}
			if l.onError != nil {
				l.onError(r, err)
			}
			if l.failMode {
				http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		l.SetHeaders(h, d)
		if !d.Allowed {
			h.Set("Retry-After", strconv.FormatInt(ceilSeconds(d.RetryAfter), 10))
			l.onDenied(w, r, d)
			return
		}
		if l.mode == modeConcurrency {
			defer l.hold(r, args)()
		}
		next.ServeHTTP(w, r)
	})
}

// command is the command for key: the arguments built once by NewLimiter,
// with the prefixed key (and, for a lease, a new request id) in place.
func (l *Limiter) command(key string) []any {
	args := make([]any, len(l.args))
	copy(args, l.args)
	args[l.keyPos] = l.prefix + key
	if l.mode == modeConcurrency {
		args[l.idPos] = rand.Text()
	}
	return args
}

// hold renews the lease that args acquired every Lease/2 while the handler
// runs; the function it returns stops that and releases the slot. A
// renewal in flight finishes before the release is sent, so that it
// cannot take the slot again after it.
func (l *Limiter) hold(r *http.Request, args []any) (release func()) {
	ctx := context.WithoutCancel(r.Context())
	var mu sync.Mutex
	done := false
	mu.Lock()
	var timer *time.Timer
	timer = time.AfterFunc(l.lease/2, func() {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		d, err := l.c.decide(ctx, args)
		if err == nil && !d.Allowed {
			err = ErrLeaseLost
		}
		if err != nil && l.onError != nil {
			l.onError(r, err)
		}
		timer.Reset(l.lease / 2)
	})
	mu.Unlock()
	return func() {
		mu.Lock()
		done = true
		timer.Stop()
		mu.Unlock()
		if _, err := l.c.Release(ctx, args[l.keyPos].(string), args[l.idPos].(string)); err != nil && l.onError != nil {
			l.onError(r, err)
		}
	}
}

// SetHeaders sets the RateLimit-Policy and RateLimit fields of
// draft-ietf-httpapi-ratelimit-headers-10 for decision d:
//
//	RateLimit-Policy: "api-1m";q=100;w=60, "api-1h";q=1000;w=3600
//	RateLimit: "api-1m";r=42;t=17
//
// RateLimit names the rule that decided (found by its limit: of rules with
// equal limits, the first), r is its remaining, and t the seconds, rounded
// up, until quota comes back: the retry time when denied (so that t equals
// Retry-After), the time to the full limit when allowed. A Policy limiter
// gives q from the reply and no w; a Concurrency limiter gives
// qu="concurrent-requests", r the free slots, and t only when denied (a
// slot comes back when a request ends, not at a time).
func (l *Limiter) SetHeaders(h http.Header, d Decision) {
	item := l.items[0]
	for i, r := range l.rules {
		if r.Limit == d.Limit {
			item = l.items[i]
			break
		}
	}
	policy := l.policy
	switch {
	case l.mode == modePolicy:
		policy = item + ";q=" + strconv.FormatInt(d.Limit, 10)
	case l.concurrencyPolicy:
		policy = item + ";q=" + strconv.FormatInt(d.Limit, 10) + `;qu="concurrent-requests"`
	}
	t := d.ResetAfter
	if !d.Allowed {
		t = d.RetryAfter
	}
	b := make([]byte, 0, len(item)+48)
	b = append(b, item...)
	b = append(b, ";r="...)
	b = strconv.AppendInt(b, max(d.Remaining, 0), 10)
	if l.mode != modeConcurrency || !d.Allowed {
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, ceilSeconds(t), 10)
	}
	// The canonical spellings (Go's, for headers it reads) skip a
	// canonicalization per call; field names are case-insensitive.
	h["Ratelimit-Policy"] = []string{policy}
	h["Ratelimit"] = []string{string(b)}
}

func tooManyRequests(w http.ResponseWriter, _ *http.Request, _ Decision) {
	http.Error(w, http.StatusText(http.StatusTooManyRequests), http.StatusTooManyRequests)
}

// ceilSeconds is d in whole seconds, rounded up: a client told to retry in
// 0 seconds when 300ms remain would be refused again.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// sfString serializes s as a Structured Field String (RFC 9651 section
// 4.1.6): printable ASCII in quotes, with '"' and '\' escaped.
func sfString(s string) (string, error) {
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e {
			return "", fmt.Errorf("byte %#x at %d is not printable ASCII", c, i)
		}
		if c == '"' || c == '\\' {
			b = append(b, '\\')
		}
		b = append(b, c)
	}
	return string(append(b, '"')), nil
}

// RemoteIP keys a request by the address of its peer (r.RemoteAddr),
// IPv4-mapped IPv6 addresses written as IPv4. Headers are not consulted:
// X-Forwarded-For is whatever the client wrote unless a trusted proxy set
// it (see ForwardedFor).
func RemoteIP(r *http.Request) (string, error) {
	a, err := remoteAddr(r)
	if err != nil {
		return "", err
	}
	return a.String(), nil
}

func remoteAddr(r *http.Request) (netip.Addr, error) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr // a RemoteAddr without a port
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("limitkv: RemoteAddr %q is not an IP address", r.RemoteAddr)
	}
	return a.Unmap().WithZone(""), nil
}

// ForwardedFor keys a request by the client address that trusted proxies
// recorded in X-Forwarded-For. If the peer is not one of trusted, the
// header is ignored and the peer's address is the key. Otherwise the
// header's addresses are read from the right (the hop nearest to us)
// and the first that is not itself a trusted proxy is the client: entries
// further left were written by whoever sent the request and prove nothing.
func ForwardedFor(trusted ...netip.Prefix) func(*http.Request) (string, error) {
	isTrusted := func(a netip.Addr) bool {
		for _, p := range trusted {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	return func(r *http.Request) (string, error) {
		peer, err := remoteAddr(r)
		if err != nil {
			return "", err
		}
		if !isTrusted(peer) {
			return peer.String(), nil
		}
		client := peer
		values := r.Header.Values("X-Forwarded-For")
		for i := len(values) - 1; i >= 0; i-- {
			hops := strings.Split(values[i], ",")
			for j := len(hops) - 1; j >= 0; j-- {
				a, err := netip.ParseAddr(strings.TrimSpace(hops[j]))
				if err != nil {
					return "", fmt.Errorf("limitkv: X-Forwarded-For entry %q from a trusted proxy is not an IP address", strings.TrimSpace(hops[j]))
				}
				client = a.Unmap().WithZone("")
				if !isTrusted(client) {
					return client.String(), nil
				}
			}
		}
		return client.String(), nil // every hop is a proxy of ours
	}
}
