package client

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitkv/limitkv/internal/testserver"
	"github.com/redis/go-redis/v9"
)

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	io.WriteString(w, "ok")
})

func mustLimiter(t testing.TB, c *Client, cfg LimiterConfig) *Limiter {
	t.Helper()
	if cfg.KeyPrefix == "" {
		cfg.KeyPrefix = key(t, "") + ":"
	}
	l, err := NewLimiter(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestMiddlewareExactness: through a real HTTP server, N requests pass,
// the next is refused with 429, and every response carries the headers
// computed from the very reply limitkv gave it.
func TestMiddlewareExactness(t *testing.T) {
	rec := &recorder{}
	c, _ := newClient(t, rec)
	l := mustLimiter(t, c, LimiterConfig{Rules: []Rule{PerMinute(3)}})
	srv := httptest.NewServer(l.Handler(okHandler))
	defer srv.Close()

	for i := 1; i <= 5; i++ {
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		n := rawFive(t, rec.last(t))
		if got := argString(rec.last(t).args); got != "RL.SLIDE "+key(t, "")+":127.0.0.1 3 1m" {
			t.Errorf("sent %q", got)
		}
		allowed := i <= 3
		wantStatus := http.StatusOK
		if !allowed {
			wantStatus = http.StatusTooManyRequests
		}
		if resp.StatusCode != wantStatus || (n[0] == 1) != allowed {
			t.Fatalf("request %d: status %d, raw %v", i, resp.StatusCode, n)
		}
		if allowed && string(body) != "ok" {
			t.Errorf("request %d: body %q", i, body)
		}
		if got := resp.Header.Get("RateLimit-Policy"); got != `"default";q=3;w=60` {
			t.Errorf("request %d: RateLimit-Policy %q", i, got)
		}
		remaining := 3 - i
		if remaining < 0 {
			remaining = 0
		}
		if n[2] != int64(remaining) {
			t.Errorf("request %d: remaining %d", i, n[2])
		}
		// t: seconds rounded up, to the full limit when allowed, to the
		// retry when denied.
		tMs := n[4]
		if !allowed {
			tMs = n[3]
		}
		tSec := (tMs + 999) / 1000
		wantRL := `"default";r=` + strconv.Itoa(remaining) + ";t=" + strconv.FormatInt(tSec, 10)
		if got := resp.Header.Get("RateLimit"); got != wantRL {
			t.Errorf("request %d: RateLimit %q, want %q (raw %v)", i, got, wantRL, n)
		}
		if allowed {
			if ra := resp.Header.Get("Retry-After"); ra != "" {
				t.Errorf("request %d: Retry-After %q on an allowed request", i, ra)
			}
			continue
		}
		if ra := resp.Header.Get("Retry-After"); ra != strconv.FormatInt(tSec, 10) || tSec < 59 || tSec > 60 {
			t.Errorf("request %d: Retry-After %q, raw retry %dms", i, ra, n[3])
		}
	}
}

// TestMiddlewareAtomic: 40 clients at once through a real HTTP server get
// exactly the limit's worth of 200s.
func TestMiddlewareAtomic(t *testing.T) {
	c, _ := newClient(t, nil)
	l := mustLimiter(t, c, LimiterConfig{Rules: []Rule{PerHour(10)}, Fixed: true})
	srv := httptest.NewServer(l.Handler(okHandler))
	defer srv.Close()
	var ok, denied atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(srv.URL)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK:
				ok.Add(1)
			case http.StatusTooManyRequests:
				denied.Add(1)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 10 || denied.Load() != 30 {
		t.Errorf("%d allowed, %d denied; want 10 and 30", ok.Load(), denied.Load())
	}
}

func serve(h http.Handler, remoteAddr string, header http.Header) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = remoteAddr
	for k, v := range header {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestMiddlewareSeveralRules: each rule is named by its window in the
// policy, and RateLimit names the rule that decided.
func TestMiddlewareSeveralRules(t *testing.T) {
	c, _ := newClient(t, nil)
	l := mustLimiter(t, c, LimiterConfig{Name: "api", Fixed: true,
		Rules: []Rule{{Limit: 5, Window: time.Hour}, {Limit: 2, Window: 10 * time.Minute}}})
	h := l.Handler(okHandler)
	w := serve(h, "192.0.2.1:1000", nil)
	if got := w.Header().Get("RateLimit-Policy"); got != `"api-1h";q=5;w=3600, "api-10m";q=2;w=600` {
		t.Errorf("RateLimit-Policy %q", got)
	}
	if got := w.Header().Get("RateLimit"); !strings.HasPrefix(got, `"api-10m";r=1;t=`) {
		t.Errorf("first request: RateLimit %q: the 10m rule has the least remaining", got)
	}
	serve(h, "192.0.2.1:1000", nil)
	w = serve(h, "192.0.2.1:1000", nil)
	if w.Code != http.StatusTooManyRequests || !strings.HasPrefix(w.Header().Get("RateLimit"), `"api-10m";r=0;t=`) {
		t.Errorf("third request: %d, RateLimit %q", w.Code, w.Header().Get("RateLimit"))
	}
	// Another address has its own count.
	if w := serve(h, "192.0.2.2:1000", nil); w.Code != http.StatusOK {
		t.Errorf("another client: %d", w.Code)
	}
	// IPv4-mapped IPv6 is the same client as its IPv4 address.
	if w := serve(h, "[::ffff:192.0.2.1]:1000", nil); w.Code != http.StatusTooManyRequests {
		t.Errorf("::ffff:192.0.2.1: %d, want the count of 192.0.2.1", w.Code)
	}
}

func TestLimiterConfig(t *testing.T) {
	c, _ := newClient(t, nil)
	for _, cfg := range []LimiterConfig{
		{},
		{Rules: []Rule{{Limit: 3, Window: 100 * time.Microsecond}}},
		{Rules: []Rule{PerMinute(3), PerMinute(5)}},
		{Name: "caf\u00e9", Rules: []Rule{PerMinute(3)}},
		{Name: "a\nb", Rules: []Rule{PerMinute(3)}},
	} {
		if _, err := NewLimiter(c, cfg); err == nil {
			t.Errorf("NewLimiter(%+v): no error", cfg)
		}
	}
	if _, err := NewLimiter(nil, LimiterConfig{Rules: []Rule{PerMinute(3)}}); err == nil {
		t.Error("NewLimiter without a client: no error")
	}
	// Names are sf-strings; windows that are not whole seconds have no w.
	l, err := NewLimiter(c, LimiterConfig{Name: `a"b\c`, Rules: []Rule{{Limit: 3, Window: 1500 * time.Millisecond}}})
	if err != nil {
		t.Fatal(err)
	}
	if l.policy != `"a\"b\\c";q=3` {
		t.Errorf("policy %s", l.policy)
	}
	if l.prefix != `rl:a"b\c:` {
		t.Errorf("default prefix %q", l.prefix)
	}
}

// TestMiddlewareKeys: an empty key lets the request through unlimited and
// without headers; a key error is a failure; the key goes after the prefix.
func TestMiddlewareKeys(t *testing.T) {
	rec := &recorder{}
	c, _ := newClient(t, rec)
	var errs []error
	l := mustLimiter(t, c, LimiterConfig{
		Rules:      []Rule{PerMinute(1)},
		KeyPrefix:  key(t, "") + ":",
		FailClosed: true,
		OnError:    func(_ *http.Request, err error) { errs = append(errs, err) },
		Key: func(r *http.Request) (string, error) {
			switch u := r.Header.Get("X-User"); u {
			case "":
				return "", nil
			case "bad":
				return "", errors.New("no such user")
			default:
				return u, nil
			}
		},
	})
	h := l.Handler(okHandler)
	for i := 0; i < 3; i++ {
		w := serve(h, "192.0.2.1:1", nil)
		if w.Code != http.StatusOK || w.Header().Get("RateLimit") != "" {
			t.Errorf("unkeyed request: %d, RateLimit %q", w.Code, w.Header().Get("RateLimit"))
		}
	}
	w := serve(h, "192.0.2.1:1", http.Header{"X-User": {"alice"}})
	if w.Code != http.StatusOK || argString(rec.last(t).args) != "RL.SLIDE "+key(t, "")+":alice 1 1m" {
		t.Errorf("alice: %d, sent %q", w.Code, argString(rec.last(t).args))
	}
	if w := serve(h, "192.0.2.1:1", http.Header{"X-User": {"alice"}}); w.Code != http.StatusTooManyRequests {
		t.Errorf("alice again: %d", w.Code)
	}
	w = serve(h, "192.0.2.1:1", http.Header{"X-User": {"bad"}})
	if w.Code != http.StatusServiceUnavailable || len(errs) != 1 || errs[0].Error() != "no such user" {
		t.Errorf("key error: %d, errors %v", w.Code, errs)
	}
}

// TestMiddlewareFailure: limitkv down or answering an error goes to
// OnError, then through (fail open, the default) or 503 (FailClosed).
func TestMiddlewareFailure(t *testing.T) {
	port, err := testserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), MaxRetries: -1, DialTimeout: time.Second})
	defer down.Close()

	// A listener that accepts and never answers: the go-redis client's
	// ReadTimeout ends the wait.
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	go func() {
		for {
			c, err := mute.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	silent := redis.NewClient(&redis.Options{Addr: mute.Addr().String(), MaxRetries: -1, ReadTimeout: 100 * time.Millisecond})
	defer silent.Close()

	live, rdb := newClient(t, nil)
	wrongType := key(t, "") + ":192.0.2.1"
	if err := rdb.Set(context.Background(), wrongType, "x", 0).Err(); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name    string
		client  *Client
		timeout time.Duration
		check   func(error) bool
	}{
		{"unreachable", New(down), 0, func(err error) bool {
			var op *net.OpError
			return errors.As(err, &op)
		}},
		{"silent", New(silent), 100 * time.Millisecond, func(err error) bool {
			var ne net.Error
			return errors.As(err, &ne) && ne.Timeout()
		}},
		{"error reply", live, 0, func(err error) bool {
			var rerr redis.Error
			return errors.As(err, &rerr) && strings.HasPrefix(err.Error(), "WRONGTYPE")
		}},
	} {
		for _, closed := range []bool{false, true} {
			var errs []error
			l := mustLimiter(t, c.client, LimiterConfig{
				Rules: []Rule{PerMinute(1)}, KeyPrefix: key(t, "") + ":",
				FailClosed: closed,
				OnError:    func(_ *http.Request, err error) { errs = append(errs, err) },
			})
			start := time.Now()
			w := serve(l.Handler(okHandler), "192.0.2.1:1", nil)
			want := http.StatusOK
			if closed {
				want = http.StatusServiceUnavailable
			}
			if w.Code != want || len(errs) != 1 || !c.check(errs[0]) {
				t.Errorf("%s, FailClosed=%v: status %d, errors %v", c.name, closed, w.Code, errs)
			}
			if w.Header().Get("RateLimit") != "" {
				t.Errorf("%s: RateLimit header without a decision", c.name)
			}
			// The silent server never answers: without its timeout the
			// request would wait for ever, which a generous bound tells.
			if c.timeout > 0 && time.Since(start) > 10*time.Second {
				t.Errorf("%s: took %v with a timeout of %v", c.name, time.Since(start), c.timeout)
			}
		}
	}
}

// TestMiddlewareOnDenied: a custom denial response sees the decision, with
// the headers already set.
func TestMiddlewareOnDenied(t *testing.T) {
	c, _ := newClient(t, nil)
	l := mustLimiter(t, c, LimiterConfig{
		Rules: []Rule{PerMinute(1)},
		OnDenied: func(w http.ResponseWriter, r *http.Request, d Decision) {
			if w.Header().Get("Retry-After") == "" || w.Header().Get("RateLimit") == "" {
				t.Error("OnDenied called before the headers were set")
			}
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, "slow down: "+strconv.FormatInt(d.Limit, 10))
		},
	})
	h := l.Handler(okHandler)
	serve(h, "192.0.2.1:1", nil)
	w := serve(h, "192.0.2.1:1", nil)
	if w.Code != http.StatusTooManyRequests || w.Body.String() != "slow down: 1" {
		t.Errorf("%d %q", w.Code, w.Body.String())
	}
}

func TestCeilSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int64{
		-time.Second: 0, 0: 0, time.Millisecond: 1, 999 * time.Millisecond: 1,
		time.Second: 1, time.Second + time.Millisecond: 2, time.Minute: 60,
	} {
		if got := ceilSeconds(d); got != want {
			t.Errorf("ceilSeconds(%v) = %d, want %d", d, got, want)
		}
	}
}

func TestForwardedFor(t *testing.T) {
	key := ForwardedFor(netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8"))
	for _, c := range []struct {
		remote string
		xff    []string
		want   string
		err    bool
	}{
		// The header of an untrusted peer is ignored.
		{"192.0.2.1:5", []string{"203.0.113.9"}, "192.0.2.1", false},
		{"192.0.2.1:5", nil, "192.0.2.1", false},
		// A trusted proxy: the nearest hop that is not ours.
		{"10.0.0.1:5", []string{"203.0.113.9"}, "203.0.113.9", false},
		{"10.0.0.1:5", []string{"6.6.6.6, 203.0.113.9, 10.1.1.1"}, "203.0.113.9", false},
		{"10.0.0.1:5", []string{"6.6.6.6", "203.0.113.9, 10.1.1.1"}, "203.0.113.9", false},
		{"[fd00::1]:5", []string{"2001:db8::7"}, "2001:db8::7", false},
		{"10.0.0.1:5", []string{"::ffff:203.0.113.9"}, "203.0.113.9", false},
		// No header, or only proxies: the last address seen.
		{"10.0.0.1:5", nil, "10.0.0.1", false},
		{"10.0.0.1:5", []string{"10.2.2.2, 10.1.1.1"}, "10.2.2.2", false},
		// Garbage a trusted proxy passed on is an error, not a key.
		{"10.0.0.1:5", []string{"unknown"}, "", true},
		// Garbage left of the client is never read.
		{"10.0.0.1:5", []string{"unknown, 203.0.113.9"}, "203.0.113.9", false},
		{"not an address", nil, "", true},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.remote
		for _, v := range c.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		got, err := key(r)
		if got != c.want || (err != nil) != c.err {
			t.Errorf("RemoteAddr %s, X-Forwarded-For %q: %q, %v; want %q (error %v)", c.remote, c.xff, got, err, c.want, c.err)
		}
	}
	// RemoteIP never reads the header.
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.1:5"
	r.Header.Set("X-Forwarded-For", "203.0.113.9")
	if got, err := RemoteIP(r); got != "10.0.0.1" || err != nil {
		t.Errorf("RemoteIP = %q, %v", got, err)
	}
}
