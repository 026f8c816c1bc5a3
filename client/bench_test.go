package client

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// The middleware's cost per request: the same handler with and without it,
// against the test's limitkv on loopback, one request at a time. The rule
// (RL.FIXED, 2^53 per second) never refuses, so every request does the
// full allowed path. BenchmarkRLRoundTrip is the bare client call the
// middleware makes, to be subtracted:
//
//	go test ./client -run '^$' -bench 'Middleware|RLRoundTrip' -benchmem
var benchRules = []Rule{{Limit: 1 << 53, Window: time.Second}}

func BenchmarkMiddleware(b *testing.B) {
	c, _ := newClient(b, nil)
	l, err := NewLimiter(c, LimiterConfig{Rules: benchRules, Fixed: true, KeyPrefix: key(b, "") + ":",
		OnError: func(_ *http.Request, err error) { b.Fatal(err) }})
	if err != nil {
		b.Fatal(err)
	}
	for _, h := range []struct {
		name string
		h    http.Handler
	}{{"bare", okHandler}, {"limited", l.Handler(okHandler)}} {
		// In process: the handler chain alone, as httptest's recorder
		// sees it.
		b.Run("recorder/"+h.name, func(b *testing.B) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = "192.0.2.1:1234"
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.h.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatal(w.Code)
				}
			}
		})
		// Over HTTP on loopback, keep-alive, as a client would see it.
		b.Run("server/"+h.name, func(b *testing.B) {
			srv := httptest.NewServer(h.h)
			defer srv.Close()
			hc := srv.Client()
			b.ReportAllocs()
			for b.Loop() {
				resp, err := hc.Get(srv.URL)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatal(resp.StatusCode)
				}
			}
		})
	}
}

func BenchmarkRLRoundTrip(b *testing.B) {
	c, _ := newClient(b, nil)
	ctx := context.Background()
	k := key(b, "")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Fixed(ctx, k, benchRules); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLimiterOwnWork is what the middleware adds besides the round
// trip: the key, the command's arguments and the two headers.
func BenchmarkLimiterOwnWork(b *testing.B) {
	l, err := NewLimiter(New(nil), LimiterConfig{Rules: benchRules, Fixed: true})
	if err != nil {
		b.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "192.0.2.1:1234"
	d := Decision{Allowed: true, Limit: 1 << 53, Remaining: 1<<53 - 1, ResetAfter: 734 * time.Millisecond}
	h := http.Header{}
	b.ReportAllocs()
	for b.Loop() {
		k, err := l.key(r)
		if err != nil {
			b.Fatal(err)
		}
		if args := l.command(k); len(args) != 4 {
			b.Fatal(args)
		}
		l.SetHeaders(h, d)
	}
}
