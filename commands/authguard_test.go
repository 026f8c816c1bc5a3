package commands

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limitkv/limitkv/resp"
)

// TestFailedAuthIsSlowedAndCounted: wrong passwords get slower replies the
// more a connection guesses, are counted in INFO, and a right password on
// another connection is answered at once.
func TestFailedAuthIsSlowedAndCounted(t *testing.T) {
	h := newHarness(t, "requirepass", "s3cret")
	start := time.Now()
	for i := 0; i < 5; i++ {
		if v := h.do("AUTH", "guess"); !strings.HasPrefix(v.String(), "-WRONGPASS") {
			t.Fatalf("AUTH guess: %v", v)
		}
	}
	// 10+20+40+80+160 ms: a lower bound, which a slow machine only exceeds.
	if took := time.Since(start); took < 310*time.Millisecond {
		t.Fatalf("5 wrong passwords answered in %v; want them delayed", took)
	}
	h.use("other")
	if v := h.do("HELLO", "3", "AUTH", "default", "nope"); !strings.HasPrefix(v.String(), "-WRONGPASS") {
		t.Fatalf("HELLO AUTH nope: %v", v)
	}
	if v := h.do("AUTH", "s3cret"); v.String() != "+OK" {
		t.Fatalf("AUTH s3cret: %v", v)
	}
	info := string(h.do("INFO", "stats").Str)
	if !strings.Contains(info, "acl_access_denied_auth:6\r\n") {
		t.Fatalf("INFO stats does not count 6 failures:\n%s", info)
	}
}

// TestAuthGuardSharedBudget: past the burst, failures from any connection
// are spaced by the shared rate, so more connections do not buy more
// guesses per second.
func TestAuthGuardSharedBudget(t *testing.T) {
	h := newHarness(t, "requirepass", "s3cret")
	g := &h.srv.auth
	var last time.Duration
	for i := 0; i < authFailBurst+50; i++ {
		last = g.sharedDelay(time.Now())
	}
	// 50 failures past the burst wait about 50/authFailRate seconds.
	if want := 40 * time.Second / authFailRate; last < want {
		t.Fatalf("after the burst the shared delay is %v; want at least %v", last, want)
	}
}

// guesses returns n pipelined wrong AUTHs.
func guesses(n int) []byte {
	var b []byte
	for i := 0; i < n; i++ {
		b = resp.AppendCommand(b, []byte("AUTH"), []byte("guess"+strconv.Itoa(i)))
	}
	return b
}

// TestAuthGuesserGoneIsDropped: a guesser that queued thousands of AUTHs
// and went away used to be served them all at the slowed rate, holding its
// client slot for most of an hour. Its connection goes within a failure or
// two of the close.
func TestAuthGuesserGoneIsDropped(t *testing.T) {
	h := newHarness(t, "requirepass", "s3cret")
	h.use("guesser")
	h.send(guesses(4000))
	h.cur.c.Close()
	delete(h.conns, "guesser")
	h.use("main")
	start := time.Now()
	// Served its queue, it would stay most of an hour: a generous bound
	// tells that from a drop within a failure or two.
	for h.srv.clients.count() > 1 {
		if time.Since(start) > 20*time.Second {
			t.Fatalf("the guesser's connection is still served %v after it closed (%d failures so far)",
				time.Since(start), h.srv.auth.denied.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("dropped %v after the close, after %d failures", time.Since(start).Round(time.Millisecond), h.srv.auth.denied.Load())
	if n := h.srv.auth.denied.Load(); n > 3 {
		t.Errorf("%d failures served to a client that had gone", n)
	}
	if v := h.do("AUTH", "s3cret"); v.String() != "+OK" {
		t.Fatalf("AUTH s3cret: %v", v)
	}
}

// TestAuthGuesserClosedAfterRun: a connection that keeps failing gets
// authFailClose answers, then is closed, whatever it has queued.
func TestAuthGuesserClosedAfterRun(t *testing.T) {
	h := newHarness(t, "requirepass", "s3cret")
	h.send(guesses(3 * authFailClose))
	n := 0
	for {
		v, err := resp.ReadValue(h.cur.r)
		if err != nil {
			break
		}
		if !strings.HasPrefix(v.String(), "-WRONGPASS") {
			t.Fatalf("reply %d: %v", n+1, v)
		}
		n++
	}
	if n != authFailClose {
		t.Fatalf("%d replies before the close, want %d", n, authFailClose)
	}
	if got := h.srv.auth.denied.Load(); got != authFailClose {
		t.Fatalf("%d failures counted, want %d", got, authFailClose)
	}
	h.use("other")
	if v := h.do("AUTH", "s3cret"); v.String() != "+OK" {
		t.Fatalf("AUTH s3cret: %v", v)
	}
}

// TestAuthDelayEndsAtShutdown: a shutdown does not wait for a guesser's
// queued failures.
func TestAuthDelayEndsAtShutdown(t *testing.T) {
	h := newHarness(t, "requirepass", "s3cret")
	h.use("guesser")
	// Past the first few failures, each is held back a second.
	h.send(guesses(200))
	for h.srv.auth.denied.Load() < 8 {
		time.Sleep(10 * time.Millisecond)
	}
	// Waiting for the queue would take 200 failures of a second each.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	start := time.Now()
	if err := h.srv.Net.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with a guesser connected: %v after %v", err, time.Since(start))
	}
	t.Logf("shutdown took %v", time.Since(start).Round(time.Millisecond))
}
