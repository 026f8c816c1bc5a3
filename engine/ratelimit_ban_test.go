package engine

import (
	"math/rand/v2"
	"testing"

	"github.com/limitkv/limitkv/ratelimit"
)

// RL.LOGIN's BAN, which the engine keeps in the list's record; the BAN of
// the other commands is ratelimit's (ratelimit/ban_test.go).

// TestLoginBanAgainstModel drives RL.LOGIN BAN on a shard and checks each
// reply, the history LRANGE would show (the login times only), the ban's
// end kept with the key and the key's expiry, which covers the ban.
func TestLoginBanAgainstModel(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 23))
		e := New(Config{Databases: 1})
		key := []byte("login:1")
		s := e.ShardFor(key)
		limit := 1 + rng.Int64N(6)
		window := []int64{10, 100, 1000, 5000}[rng.IntN(4)]
		keep := 1 + rng.Int64N(10)
		banFor := []int64{1, 50, 700, 9000}[rng.IntN(4)]
		var logins []int64 // newest first
		var banEnd, exp int64
		now := int64(1_000_000)
		for step := 0; step < 300; step++ {
			now += []int64{0, 1, rng.Int64N(50), rng.Int64N(2000), rng.Int64N(9000)}[rng.IntN(5)]
			ban := banFor
			if rng.IntN(10) == 0 {
				ban = 0
			}
			if now > exp {
				logins, banEnd = nil, 0 // the key expired
			}
			var want ratelimit.Decision
			want.Limit = limit
			in := int64(0)
			for i, t := range logins {
				if int64(i) < limit && t > now-window {
					in++
				}
			}
			banned := now < banEnd
			rulesDeny := int64(len(logins)) >= limit && logins[limit-1] > now-window
			switch {
			case rulesDeny:
				want.RetryAfter = logins[limit-1] + window - now
				want.ResetAfter = logins[0] + window - now
				if banned {
					want.RetryAfter = max(want.RetryAfter, banEnd-now)
				} else if ban > 0 {
					banEnd = now + ban
					want.RetryAfter = max(want.RetryAfter, ban)
					want.BanStarted = true
					exp = max(exp, banEnd-1)
				}
			case banned:
				want.Remaining = limit - in
				if in > 0 {
					want.ResetAfter = logins[0] + window - now
				}
				want.RetryAfter = banEnd - now
			default:
				want.Allowed = true
				want.Remaining = limit - min(in+1, limit)
				want.RetryAfter = -1
				want.ResetAfter = window
				logins = append([]int64{now}, logins...)
				if n := max(limit, keep); int64(len(logins)) > n {
					logins = logins[:n]
				}
				exp = now + window - 1
			}
			s.Lock()
			got, err := s.Login(0, key, now, limit, window, keep, ban)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("seed %d step %d now %d: got %+v want %+v (logins %v ban end %d)", seed, step, now, got, want, logins, banEnd)
			}
			ent, ok := s.Find(0, key, now)
			if ok != (len(logins) > 0) {
				t.Fatalf("seed %d step %d: key exists %v, model has %d logins", seed, step, ok, len(logins))
			}
			if ok {
				var hist []int64
				for v := range s.Object(ent).(*List).All() {
					n, _ := ParseInt(v)
					hist = append(hist, n)
				}
				if len(hist) != len(logins) || (len(hist) > 0 && hist[0] != logins[0]) {
					t.Fatalf("seed %d step %d: history %v, model %v", seed, step, hist, logins)
				}
				if b := ListBanEnd(ent); b != banEnd && (b > now || banEnd > now) {
					t.Fatalf("seed %d step %d: ban end %d, model %d", seed, step, b, banEnd)
				}
				if ent.ExpireAt() != exp {
					t.Fatalf("seed %d step %d: expiry %d, model %d", seed, step, ent.ExpireAt(), exp)
				}
			}
			s.Unlock()
			// Retry exactly: at now+retry the same login is allowed (no
			// other traffic), 1 ms before it is not.
			if !want.Allowed {
				allowedAt := func(at int64) bool {
					if at > exp {
						return true
					}
					return at >= banEnd && !(int64(len(logins)) >= limit && logins[limit-1] > at-window)
				}
				if !allowedAt(now + want.RetryAfter) {
					t.Fatalf("seed %d step %d: not allowed at now+retry (%d)", seed, step, want.RetryAfter)
				}
				if want.RetryAfter > 0 && allowedAt(now+want.RetryAfter-1) {
					t.Fatalf("seed %d step %d: allowed 1 ms before now+retry (%d)", seed, step, want.RetryAfter)
				}
			}
		}
	}
}

// TestLoginBanCarried: a banned login list keeps its ban through the
// value codec (snapshots, replication, COPY), RENAME (Move) and a change of
// expiry, and LRANGE's view is the login times only.
func TestLoginBanCarried(t *testing.T) {
	e := New(Config{Databases: 1})
	key := []byte("u")
	s := e.ShardFor(key)
	s.Lock()
	defer s.Unlock()
	now := int64(5_000_000)
	for i := 0; i < 3; i++ {
		if _, err := s.Login(0, key, now, 2, 1000, 5, 60_000); err != nil {
			t.Fatal(err)
		}
	}
	ent, _ := s.Find(0, key, now)
	if got := ListBanEnd(ent); got != now+60_000 {
		t.Fatalf("ban end %d", got)
	}
	if ent.ExpireAt() != now+60_000-1 || s.Object(ent).(*List).Len() != 2 || ent.Kind() != KindList {
		t.Fatalf("expiry %d, len %d, kind %v", ent.ExpireAt(), s.Object(ent).(*List).Len(), ent.Kind())
	}
	v, err := AppendValue(nil, s, ent)
	if err != nil || v[0] != valListBan {
		t.Fatalf("encoded %q, %v", v, err)
	}
	other := []byte("copy")
	o := e.ShardFor(other)
	if o != s {
		o.Lock()
		defer o.Unlock()
	}
	if err := o.StoreValue(0, other, v, DefaultLimits); err != nil {
		t.Fatal(err)
	}
	c, _ := o.Find(0, other, now)
	if ListBanEnd(c) != now+60_000 || c.ExpireAt() != now+60_000-1 || o.Object(c).(*List).Len() != 2 {
		t.Fatalf("decoded ban %d expiry %d", ListBanEnd(c), c.ExpireAt())
	}
	ent = s.SetExpire(ent, now+99_999)
	if ListBanEnd(ent) != now+60_000 {
		t.Fatal("SetExpire lost the ban")
	}
	moved := []byte("renamed")
	m := e.ShardFor(moved)
	if m != s && m != o {
		m.Lock()
		defer m.Unlock()
	}
	Move(s, ent, m, 0, moved)
	r, _ := m.Find(0, moved, now)
	if ListBanEnd(r) != now+60_000 || m.Object(r).(*List).Len() != 2 {
		t.Fatal("Move lost the ban")
	}
	// Still denied under the moved key, until the ban's end.
	d, _ := m.Login(0, moved, now+59_999, 2, 1000, 5, 0)
	if d.Allowed || d.RetryAfter != 1 || d.Remaining != 2 {
		t.Fatalf("during the ban: %+v", d)
	}
	d, _ = m.Login(0, moved, now+60_000, 2, 1000, 5, 0)
	if !d.Allowed {
		t.Fatalf("after the ban: %+v", d)
	}
	r, _ = m.Find(0, moved, now+60_000)
	if ListBanEnd(r) != 0 || r.ExpireAt() != now+60_000+999 {
		t.Fatalf("after the ban the record keeps ban %d, expiry %d", ListBanEnd(r), r.ExpireAt())
	}
}

// BenchmarkDecideBan: the cost of BAN on existing keys, beside
// BenchmarkDecideFixed and BenchmarkDecideSlide100. "open": BAN given, no
// ban in force (the common case: one more option read, nothing stored);
// "banned": every key under a ban, each request denied by it; "login": an
// RL.LOGIN key under a ban.
func BenchmarkDecideBan(b *testing.B) {
	now := int64(1_800_000_000_000)
	run := func(b *testing.B, keys [][]byte, op func(s *Shard, k []byte) error) {
		e := New(Config{Databases: 1})
		do := func(k []byte) {
			s := e.ShardFor(k)
			s.Lock()
			err := op(s, k)
			s.Unlock()
			if err != nil {
				b.Fatal(err)
			}
		}
		for _, k := range keys {
			do(k)
			do(k)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			do(keys[i%len(keys)])
		}
	}
	var sc LimitScratch
	big := []ratelimit.Rule{{Limit: 1 << 40, Window: 60_000}}
	one := []ratelimit.Rule{{Limit: 1, Window: 60_000}}
	keys := benchDecisionKeys(10_000)
	b.Run("fixed-open", func(b *testing.B) {
		run(b, keys, func(s *Shard, k []byte) error {
			_, err := s.Fixed(0, k, now, big, ratelimit.FixedOptions{Cost: 1, Ban: 600_000}, &sc)
			return err
		})
	})
	b.Run("fixed-banned", func(b *testing.B) {
		run(b, keys, func(s *Shard, k []byte) error {
			_, err := s.Fixed(0, k, now, one, ratelimit.FixedOptions{Cost: 1, Ban: 600_000}, &sc)
			return err
		})
	})
	b.Run("slide-open", func(b *testing.B) {
		run(b, keys, func(s *Shard, k []byte) error {
			_, err := s.Slide(0, k, now, big, ratelimit.SlideOptions{Cost: 1, Ban: 600_000}, &sc)
			return err
		})
	})
	b.Run("slide-banned", func(b *testing.B) {
		run(b, keys, func(s *Shard, k []byte) error {
			_, err := s.Slide(0, k, now, one, ratelimit.SlideOptions{Cost: 1, Ban: 600_000}, &sc)
			return err
		})
	})
	b.Run("login-banned", func(b *testing.B) {
		run(b, keys, func(s *Shard, k []byte) error {
			_, err := s.Login(0, k, now, 1, 60_000, 5, 600_000)
			return err
		})
	})
}
