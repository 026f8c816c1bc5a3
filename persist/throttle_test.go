package persist

import (
	"testing"
	"time"
)

// A message repeated thousands of times a second is let through once,
// then once per period with the count of those held back.
func TestLogThrottle(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	th := newLogThrottle(time.Minute)
	th.now = func() time.Time { return now }
	let := 0
	for i := 0; i < 10_000; i++ {
		if ok, _ := th.allow("background error: %s"); ok {
			let++
		}
	}
	if let != 1 {
		t.Fatalf("%d of 10000 let through within a period", let)
	}
	if ok, _ := th.allow("another message"); !ok {
		t.Fatal("a different message was held back")
	}
	now = now.Add(time.Minute)
	ok, held := th.allow("background error: %s")
	if !ok || held != 9_999 {
		t.Fatalf("after a period: %v, %d held back", ok, held)
	}
	for i := 0; i < 2*maxThrottleKeys; i++ {
		th.allow(string(rune('a' + i)))
	}
	if len(th.seen) > maxThrottleKeys {
		t.Fatalf("%d messages remembered", len(th.seen))
	}
}
