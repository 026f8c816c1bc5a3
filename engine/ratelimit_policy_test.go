package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/limitkv/limitkv/ratelimit"
)

// Several policies on shared keys against a model that gives every
// (policy, key) pair a plain state of its own, decided by the same pure
// functions: every decision equals the model's, the key lives exactly as
// long as its longest state (its TTL the latest expiry written), DEL
// resets every policy of the key, RL.RELEASE frees a lease in every
// CONCURRENCY policy, and a key written by a policy's command is taken as
// that policy's state.
func TestPoliciesOnSharedKeysMatchModel(t *testing.T) {
	type pol struct {
		name  string
		kind  byte
		rules []ratelimit.Rule
		fixed ratelimit.FixedOptions
		slide ratelimit.SlideOptions
		gcra  ratelimit.GCRA
		limit int64 // CONCURRENCY
		lease int64
	}
	pols := []pol{
		{name: "f", kind: ratelimit.KindFixed, rules: []ratelimit.Rule{{Limit: 3, Window: 1000}, {Limit: 5, Window: 10_000}}},
		{name: "fb", kind: ratelimit.KindFixed, rules: []ratelimit.Rule{{Limit: 2, Window: 1000}}, fixed: ratelimit.FixedOptions{Ban: 3000}},
		{name: "ff", kind: ratelimit.KindFixed, rules: []ratelimit.Rule{{Limit: 2, Window: 1500}}, fixed: ratelimit.FixedOptions{First: true}},
		{name: "s", kind: ratelimit.KindSlide, rules: []ratelimit.Rule{{Limit: 4, Window: 2000}}},
		{name: "sp", kind: ratelimit.KindSlide, rules: []ratelimit.Rule{{Limit: 2, Window: 1000}, {Limit: 3, Window: 4000}}, slide: ratelimit.SlideOptions{Penalize: true}},
		{name: "g", kind: ratelimit.KindGCRA, gcra: ratelimit.GCRA{MaxBurst: 2, Count: 1, Period: 1}},
		{name: "c", kind: ratelimit.KindLease, limit: 2, lease: 1500},
		{name: "c2", kind: ratelimit.KindLease, limit: 1, lease: 700},
	}
	keys := []string{"k0", "k1", "k2"}
	type model struct {
		state map[string][]byte // policy name -> plain state, nil: none
		exp   map[string]int64  // its expiry
		key   int64             // the key's expiry after the last write (0: the key is gone)
	}
	ids := [][]byte{[]byte("a"), []byte("b"), []byte("c")}
	for seed := uint64(0); seed < 60; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		clock := NewManualClock(1_700_000_000_000)
		e := New(Config{Databases: 1, Clock: clock})
		var sc LimitScratch
		var fs ratelimit.FixedScratch
		var ls ratelimit.LeaseScratch
		models := map[string]*model{}
		for _, k := range keys {
			models[k] = &model{state: map[string][]byte{}, exp: map[string]int64{}}
		}
		live := func(m *model, name string, now int64) []byte {
			if st := m.state[name]; st != nil && now <= m.exp[name] {
				return st
			}
			return nil
		}
		// write records a model state change as the container does.
		write := func(m *model, name string, st []byte, exp, now int64) {
			if st == nil {
				delete(m.state, name)
			} else {
				m.state[name] = append([]byte(nil), st...)
				m.exp[name] = exp
			}
			m.key = 0
			for n := range m.state {
				if live(m, n, now) != nil {
					m.key = max(m.key, m.exp[n])
				} else {
					delete(m.state, n)
				}
			}
		}
		for step := 0; step < 1500; step++ {
			now := clock.Now()
			k := keys[rng.IntN(len(keys))]
			key := []byte(k)
			m := models[k]
			sh := e.ShardFor(key)
			what := fmt.Sprintf("seed %d step %d key %s", seed, step, k)
			switch r := rng.IntN(100); {
			case r < 3:
				sh.Delete(0, key, now)
				models[k] = &model{state: map[string][]byte{}, exp: map[string]int64{}}
				m = models[k]
			case r < 8:
				id := ids[rng.IntN(len(ids))]
				got, err := sh.Release(0, key, now, id, &sc)
				if err != nil {
					t.Fatalf("%s: RELEASE: %v", what, err)
				}
				want := false
				for _, p := range pols {
					if old := live(m, p.name, now); p.kind == ratelimit.KindLease && old != nil {
						ok, st, exp, _ := ratelimit.DecideRelease(old, id, now, nil)
						if ok {
							want = true
							write(m, p.name, st, exp, now)
						}
					}
				}
				if got != want {
					t.Fatalf("%s: RELEASE %s freed %v, want %v", what, id, got, want)
				}
			case r < 12:
				clock.Advance(int64(rng.IntN(1200)))
				continue
			default:
				p := pols[rng.IntN(len(pols))]
				name := []byte(p.name)
				old := live(m, p.name, now)
				cost := int64(1 + rng.IntN(2))
				peek := rng.IntN(6) == 0
				var got, want ratelimit.Decision
				var err error
				var st []byte
				var exp int64
				var wr bool
				switch p.kind {
				case ratelimit.KindFixed:
					o := p.fixed
					o.Cost, o.Peek = cost, peek
					got, err = sh.PolicyFixed(0, key, now, name, p.rules, o, &sc)
					want, st, exp, wr = ratelimit.DecideFixed(old, p.rules, now, o, &fs, nil)
				case ratelimit.KindSlide:
					o := p.slide
					o.Cost, o.Peek = cost, peek
					got, err = sh.PolicySlide(0, key, now, name, p.rules, o, &sc)
					want, st, exp, wr = ratelimit.DecideSlide(old, p.rules, now, o, nil)
				case ratelimit.KindGCRA:
					g := p.gcra
					g.Quantity, g.Peek = cost, peek
					var gr, wr2 ratelimit.ThrottleResult
					gr, err = sh.PolicyThrottle(0, key, now, name, g, &sc)
					wr2, st, exp, wr, _ = ratelimit.DecideGCRA(old, g, now, nil)
					got, want = ratelimit.Decision{Allowed: !gr.Limited, Limit: gr.Limit, Remaining: gr.Remaining, RetryAfter: gr.RetryNs, ResetAfter: gr.ResetNs},
						ratelimit.Decision{Allowed: !wr2.Limited, Limit: wr2.Limit, Remaining: wr2.Remaining, RetryAfter: wr2.RetryNs, ResetAfter: wr2.ResetNs}
				case ratelimit.KindLease:
					id := ids[rng.IntN(len(ids))]
					got, err = sh.PolicyAcquire(0, key, now, name, p.limit, p.lease, id, &sc)
					want, st, exp, wr = ratelimit.DecideAcquire(old, p.limit, p.lease, id, now, &ls, nil)
				}
				if err != nil {
					t.Fatalf("%s: policy %s: %v", what, p.name, err)
				}
				if got != want {
					t.Fatalf("%s: policy %s decided %+v, the model %+v", what, p.name, got, want)
				}
				if wr {
					write(m, p.name, st, exp, now)
				}
			}
			// The key lives as long as its longest state.
			ent, ok := sh.Find(0, key, now)
			if wantLive := m.key != 0 && now <= m.key; ok != wantLive {
				t.Fatalf("%s: key live %v, want %v (model expiry %d, now %d)", what, ok, wantLive, m.key, now)
			}
			if ok && ent.ExpireAt() != m.key {
				t.Fatalf("%s: key expires at %d, want %d", what, ent.ExpireAt(), m.key)
			}
		}
	}
}

// A key a policy's command wrote is taken as that policy's state; a key
// of another kind of state, or another type, is WRONGTYPE; a policy whose
// type changed starts afresh.
func TestPolicyKeyConversion(t *testing.T) {
	clock := NewManualClock(1_700_000_000_000)
	e := New(Config{Databases: 1, Clock: clock})
	var sc LimitScratch
	now := clock.Now()
	key := []byte("u")
	sh := e.ShardFor(key)
	rules := []ratelimit.Rule{{Limit: 3, Window: 10_000}}
	if _, err := sh.Slide(0, key, now, rules, ratelimit.SlideOptions{Cost: 2}, &sc); err != nil {
		t.Fatal(err)
	}
	d, err := sh.PolicySlide(0, key, now, []byte("api"), rules, ratelimit.SlideOptions{Cost: 1}, &sc)
	if err != nil || !d.Allowed || d.Remaining != 0 {
		t.Fatalf("the command's state was not taken as the policy's: %+v %v", d, err)
	}
	if _, err := sh.PolicyFixed(0, []byte("other"), now, []byte("api"), rules, ratelimit.FixedOptions{Cost: 1}, &sc); err != nil {
		t.Fatal(err)
	}
	ent, _ := sh.Find(0, key, now)
	if enc := sh.Encoding(ent); enc != "policies" {
		t.Fatalf("encoding %q", enc)
	}
	if _, err := sh.Slide(0, key, now, rules, ratelimit.SlideOptions{Cost: 1}, &sc); err != ErrWrongType {
		t.Fatalf("the command on a policies key: %v, want WRONGTYPE", err)
	}
	// The policy redefined as FIXED: its SLIDE state reads as absent.
	d, err = sh.PolicyFixed(0, key, now, []byte("api"), rules, ratelimit.FixedOptions{Cost: 1}, &sc)
	if err != nil || !d.Allowed || d.Remaining != 2 {
		t.Fatalf("a policy whose type changed: %+v %v", d, err)
	}
	g := []byte("g")
	e.ShardFor(g).SetString(0, g, []byte("x"), 0)
	if _, err := e.ShardFor(g).PolicyFixed(0, g, now, []byte("api"), rules, ratelimit.FixedOptions{Cost: 1}, &sc); err != ErrWrongType {
		t.Fatalf("a string key: %v", err)
	}
	h := []byte("h")
	if _, err := e.ShardFor(h).Throttle(0, h, now, ratelimit.GCRA{MaxBurst: 1, Count: 1, Period: 1, Quantity: 1}, &sc); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ShardFor(h).PolicyFixed(0, h, now, []byte("api"), rules, ratelimit.FixedOptions{Cost: 1}, &sc); err != ErrWrongType {
		t.Fatalf("a ratelimit.GCRA key checked through a FIXED policy: %v", err)
	}
}
