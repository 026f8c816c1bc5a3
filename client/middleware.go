package client

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// LimiterConfig says what a Limiter protects and how.
type LimiterConfig struct {
	// Name identifies the limit in the RateLimit-Policy and RateLimit
	// headers (default "default"). Printable ASCII.
	Name string
	// Rules are the limits: RL.SLIDE's, or RL.FIXED's when Fixed is set.
	Rules []Rule
	// Fixed uses fixed windows (RL.FIXED) instead of a sliding window.
	Fixed bool
	// Options are sent with every request's command (Cost, Penalize,
	// AlignFirst, TZ, ...).
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
	// an error reply, a Key error), whichever way FailClosed goes: the
	// place to log and count them.
	OnError func(r *http.Request, err error)
	// OnDenied writes the response to a denied request. The RateLimit
	// headers and Retry-After are already set and the status not yet
	// written. The default writes 429 Too Many Requests with a short text
	// body.
	OnDenied func(w http.ResponseWriter, r *http.Request, d Decision)
}

// Limiter is net/http middleware that rate-limits requests with limitkv.
type Limiter struct {
	c        *Client
	args     []any // command, key placeholder, rules, options
	prefix   string
	key      func(*http.Request) (string, error)
	failMode bool
	onError  func(*http.Request, error)
	onDenied func(http.ResponseWriter, *http.Request, Decision)

	rules  []Rule
	items  []string // each rule's policy name, serialized as an sf-string
	policy string   // the RateLimit-Policy value, the same on every response
}

// NewLimiter checks cfg and builds the middleware. Every check that can be
// made before the first request is made here, so that a bad configuration
// fails at start-up, not at the first request.
func NewLimiter(c *Client, cfg LimiterConfig) (*Limiter, error) {
	if c == nil {
		return nil, errors.New("limitkv: NewLimiter needs a Client")
	}
	name := cfg.Name
	if name == "" {
		name = "default"
	}
	if _, err := sfString(name); err != nil {
		return nil, fmt.Errorf("limitkv: limiter name %q: %w", name, err)
	}
	cmd := "RL.SLIDE"
	if cfg.Fixed {
		cmd = "RL.FIXED"
	}
	args, err := appendRules([]any{cmd, ""}, cfg.Rules)
	if err != nil {
		return nil, err
	}
	if args, err = appendOptions(args, cfg.Options); err != nil {
		return nil, err
	}
	l := &Limiter{
		c:        c,
		args:     args,
		prefix:   cfg.KeyPrefix,
		key:      cfg.Key,
		failMode: cfg.FailClosed,
		onError:  cfg.OnError,
		onDenied: cfg.OnDenied,
		rules:    append([]Rule(nil), cfg.Rules...),
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
	// One rule is named Name; several are told apart by their windows
	// ("api-1m", "api-1h"). Two rules with the same window would share a
	// name, and the one with the higher limit could never decide anything.
	seen := make(map[string]bool)
	var policy []string
	for _, r := range cfg.Rules {
		w, _ := FormatWindow(r.Window) // checked by appendRules
		item := name
		if len(cfg.Rules) > 1 {
			item = name + "-" + w
		}
		if seen[item] {
			return nil, fmt.Errorf("limitkv: two rules with the window %s: the higher limit would never decide", w)
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
	return l, nil
}

// Handler wraps next: each request is decided by limitkv first; denied
// requests get OnDenied (429), allowed ones reach next, and both carry the
// RateLimit-Policy and RateLimit headers.
func (l *Limiter) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, limited, err := l.Decide(r)
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
		if !limited {
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
		next.ServeHTTP(w, r)
	})
}

// Decide asks limitkv about r without answering it, for handlers that
// decide for themselves. limited is false when the Key function returned
// an empty key (the request is not limited).
func (l *Limiter) Decide(r *http.Request) (d Decision, limited bool, err error) {
	key, err := l.key(r)
	if err != nil || key == "" {
		return Decision{}, false, err
	}
	d, err = l.c.decide(r.Context(), l.command(key))
	return d, err == nil, err
}

// command is the command for key: the arguments built once by NewLimiter,
// with the prefixed key in place.
func (l *Limiter) command(key string) []any {
	args := make([]any, len(l.args))
	copy(args, l.args)
	args[1] = l.prefix + key
	return args
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
// Retry-After), the time to the full limit when allowed.
func (l *Limiter) SetHeaders(h http.Header, d Decision) {
	item := l.items[0]
	for i, r := range l.rules {
		if r.Limit == d.Limit {
			item = l.items[i]
			break
		}
	}
	t := d.ResetAfter
	if !d.Allowed {
		t = d.RetryAfter
	}
	b := make([]byte, 0, len(item)+48)
	b = append(b, item...)
	b = append(b, ";r="...)
	b = strconv.AppendInt(b, max(d.Remaining, 0), 10)
	b = append(b, ";t="...)
	b = strconv.AppendInt(b, ceilSeconds(t), 10)
	// The canonical spellings (Go's, for headers it reads) skip a
	// canonicalization per call; field names are case-insensitive.
	h["Ratelimit-Policy"] = []string{l.policy}
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
