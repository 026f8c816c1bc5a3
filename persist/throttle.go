package persist

import (
	"sync"
	"time"
)

// logThrottle lets a recurring message through the first time, then at
// most once per period, saying how many like it were held back meanwhile.
// A failing disk makes Pebble report the same failure thousands of times a
// second; logged as is, that filled a log with 943k lines in two minutes.
type logThrottle struct {
	period time.Duration
	now    func() time.Time

	mu   sync.Mutex
	seen map[string]*throttled
}

type throttled struct {
	last time.Time // when one was last let through
	held int       // held back since
}

// maxThrottleKeys bounds the messages remembered; past it the memory
// starts afresh (a flood of distinct messages is let through at most
// this many at a time).
const maxThrottleKeys = 256

func newLogThrottle(period time.Duration) *logThrottle {
	return &logThrottle{period: period, now: time.Now, seen: map[string]*throttled{}}
}

// allow reports whether a message of this kind may be logged now and, if
// so, how many of its kind were held back since the last one logged.
func (t *logThrottle) allow(key string) (ok bool, held int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	e := t.seen[key]
	if e == nil {
		if len(t.seen) >= maxThrottleKeys {
			t.seen = map[string]*throttled{}
		}
		t.seen[key] = &throttled{last: now}
		return true, 0
	}
	if now.Sub(e.last) < t.period {
		e.held++
		return false, 0
	}
	held = e.held
	e.last, e.held = now, 0
	return true, held
}

// heldBack is the attribute a throttled message carries when others like
// it were held back.
func heldBack(held int) []any {
	if held == 0 {
		return nil
	}
	return []any{"held_back", held}
}
