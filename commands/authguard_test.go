package commands

import (
	"strings"
	"testing"
	"time"
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
