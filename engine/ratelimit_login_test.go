package engine

import (
	"math/rand/v2"
	"testing"

	"github.com/limitkv/limitkv/ratelimit"
)

// TestLoginAgainstModel drives RL.LOGIN on a shard with random logins,
// limits, windows and KEEP, and compares each reply with a model keeping
// every successful login.
func TestLoginAgainstModel(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 5))
		e := New(Config{Databases: 1})
		key := []byte("login:1")
		s := e.ShardFor(key)
		limit := 1 + rng.Int64N(6)
		window := []int64{10, 100, 1000, 5000}[rng.IntN(4)]
		keep := 1 + rng.Int64N(10)
		var logins []int64 // newest first
		now := int64(1_000_000)
		for step := 0; step < 300; step++ {
			now += []int64{0, 1, rng.Int64N(50), rng.Int64N(2000)}[rng.IntN(4)]
			// The model: the limit-th newest login decides.
			var want ratelimit.Decision
			want.Limit = limit
			if int64(len(logins)) >= limit && logins[limit-1] > now-window {
				want.RetryAfter = logins[limit-1] + window - now
				want.ResetAfter = logins[0] + window - now
			} else {
				in := int64(0)
				for i, t := range logins {
					if int64(i) >= limit {
						break
					}
					if t > now-window {
						in++
					}
				}
				want.Allowed = true
				want.Remaining = limit - min(in+1, limit)
				want.RetryAfter = -1
				want.ResetAfter = window
			}
			s.Lock()
			got, err := s.Login(0, key, now, limit, window, keep, 0)
			s.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			// The key expires when its newest login leaves the window: then
			// the model forgets too.
			if len(logins) > 0 && now > logins[0]+window-1 {
				logins = nil
				want = ratelimit.Decision{Allowed: true, Limit: limit, Remaining: limit - 1, RetryAfter: -1, ResetAfter: window}
			}
			if got != want {
				t.Fatalf("seed %d step %d: got %+v want %+v (logins %v now %d)", seed, step, got, want, logins, now)
			}
			if got.Allowed {
				logins = append([]int64{now}, logins...)
				if n := max(limit, keep); int64(len(logins)) > n {
					logins = logins[:n]
				}
			}
			s.Lock()
			e2, ok := s.Find(0, key, now)
			if ok != (len(logins) > 0) || (ok && s.Object(e2).(*List).Len() != len(logins)) {
				t.Fatalf("seed %d step %d: list holds the wrong history", seed, step)
			}
			s.Unlock()
		}
	}
}
