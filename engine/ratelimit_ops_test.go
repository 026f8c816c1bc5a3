package engine

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/limitkv/limitkv/ratelimit"
)

// TestLimitOpsDoNotAllocate: a decision on an existing key, through the
// Shard operations the commands call, allocates nothing once the caller's
// scratch has grown: the state is decided in the scratch and copied into
// the key's record in place.
func TestLimitOpsDoNotAllocate(t *testing.T) {
	e := New(Config{Databases: 1})
	now := int64(1_800_000_000_000)
	var sc LimitScratch
	rules := []ratelimit.Rule{{Limit: 1 << 40, Window: 60_000}, {Limit: 1 << 40, Window: 3_600_000}}
	slide := []ratelimit.Rule{{Limit: 100, Window: 60_000}}
	ops := []struct {
		name string
		run  func(s *Shard, k []byte) error
	}{
		{"fixed", func(s *Shard, k []byte) error {
			_, err := s.Fixed(0, k, now, rules, ratelimit.FixedOptions{Cost: 1}, &sc)
			return err
		}},
		{"fixed-first", func(s *Shard, k []byte) error {
			_, err := s.Fixed(0, k, now, rules, ratelimit.FixedOptions{Cost: 1, First: true}, &sc)
			return err
		}},
		{"slide", func(s *Shard, k []byte) error {
			now += 600 // a full window: the oldest entry leaves as one comes
			_, err := s.Slide(0, k, now, slide, ratelimit.SlideOptions{Cost: 1}, &sc)
			return err
		}},
		{"throttle", func(s *Shard, k []byte) error {
			_, err := s.Throttle(0, k, now, ratelimit.GCRA{MaxBurst: 1 << 30, Count: 1 << 20, Period: 1, Quantity: 1}, &sc)
			return err
		}},
	}
	for _, op := range ops {
		k := []byte("rl:" + op.name)
		s := e.ShardFor(k)
		for i := 0; i < 100; i++ {
			if err := op.run(s, k); err != nil {
				t.Fatal(err)
			}
		}
		if n := testing.AllocsPerRun(200, func() { op.run(s, k) }); n != 0 {
			t.Errorf("%s: %v allocations per decision on an existing key", op.name, n)
		}
	}
}

// TestLimitOpsCheckTheKind: each operation refuses a key of another type
// or another kind of rate-limit state, and leaves it as it was.
func TestLimitOpsCheckTheKind(t *testing.T) {
	e := New(Config{Databases: 1})
	now := int64(1_800_000_000_000)
	var sc LimitScratch
	rules := []ratelimit.Rule{{Limit: 5, Window: 1000}}
	k := []byte("k")
	s := e.ShardFor(k)
	fixed := func() error { _, err := s.Fixed(0, k, now, rules, ratelimit.FixedOptions{Cost: 1}, &sc); return err }
	slide := func() error { _, err := s.Slide(0, k, now, rules, ratelimit.SlideOptions{Cost: 1}, &sc); return err }
	throttle := func() error {
		_, err := s.Throttle(0, k, now, ratelimit.GCRA{MaxBurst: 1, Count: 1, Period: 1, Quantity: 1}, &sc)
		return err
	}
	ops := []func() error{fixed, slide, throttle}
	kinds := []byte{ratelimit.KindFixed, ratelimit.KindSlide, ratelimit.KindGCRA}
	for i, first := range ops {
		s.Delete(0, k, now)
		if err := first(); err != nil {
			t.Fatal(err)
		}
		before, _, _ := s.LimitState(0, k, now, kinds[i])
		before = append([]byte(nil), before...)
		for j, other := range ops {
			if j == i {
				continue
			}
			if err := other(); !errors.Is(err, ErrWrongType) {
				t.Errorf("op %d on a key of kind %d: %v", j, kinds[i], err)
			}
		}
		if after, _, _ := s.LimitState(0, k, now, kinds[i]); string(after) != string(before) {
			t.Errorf("refused ops changed the state of kind %d", kinds[i])
		}
	}
	s.Delete(0, k, now)
	s.SetObject(0, k, KindList, NewList(), 0)
	for j, op := range ops {
		if err := op(); !errors.Is(err, ErrWrongType) {
			t.Errorf("op %d on a list: %v", j, err)
		}
	}
	if _, err := s.Throttle(0, []byte("z"), now, ratelimit.GCRA{MaxBurst: 1, Count: 0, Period: 1, Quantity: 1}, &sc); err != ratelimit.ErrZeroRate {
		t.Errorf("zero rate: %v", err)
	}
}

// TestLimitOpsStoreWhatTheyDecide: each Shard operation answers what its
// pure function answers on the key's state, and stores exactly the state
// and expiry the function returned, or leaves the key as it was when the
// function wrote nothing. (The functions themselves are checked by
// ratelimit's models and datadriven files.)
func TestLimitOpsStoreWhatTheyDecide(t *testing.T) {
	z, err := ratelimit.ParseZone([]byte("America/New_York"))
	if err != nil {
		t.Fatal(err)
	}
	for seed := uint64(0); seed < 50; seed++ {
		rng := rand.New(rand.NewPCG(seed, 29))
		e := New(Config{Databases: 1})
		k := []byte("k")
		s := e.ShardFor(k)
		kind := []byte{ratelimit.KindFixed, ratelimit.KindSlide, ratelimit.KindGCRA}[rng.IntN(3)]
		rules := []ratelimit.Rule{{Limit: 1 + rng.Int64N(5), Window: 1000}, {Limit: 3 + rng.Int64N(20), Window: 60_000}}
		var sc LimitScratch
		var fsc ratelimit.FixedScratch
		now := int64(1_800_000_000_000)
		for step := 0; step < 300; step++ {
			now += []int64{0, 1, rng.Int64N(300), rng.Int64N(5000)}[rng.IntN(4)]
			s.Lock()
			changes := s.changes
			old, _, err := s.LimitState(0, k, now, kind)
			if err != nil {
				t.Fatal(err)
			}
			old = append([]byte(nil), old...)
			var got, want [5]int64
			var st []byte
			var exp int64
			var write bool
			row := func(d ratelimit.Decision) [5]int64 {
				a := int64(0)
				if d.Allowed {
					a = 1
				}
				return [5]int64{a, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter}
			}
			switch kind {
			case ratelimit.KindFixed:
				o := ratelimit.FixedOptions{Cost: 1, Peek: rng.IntN(8) == 0, First: seed%3 == 0, Ban: []int64{0, 0, 3000}[rng.IntN(3)]}
				if seed%3 == 1 {
					o.Zone = z
				}
				var d ratelimit.Decision
				d, st, exp, write = ratelimit.DecideFixed(old, rules, now, o, &fsc, nil)
				want = row(d)
				d, err = s.Fixed(0, k, now, rules, o, &sc)
				got = row(d)
			case ratelimit.KindSlide:
				o := ratelimit.SlideOptions{Cost: 1, Peek: rng.IntN(8) == 0, Penalize: seed%2 == 0, Ban: []int64{0, 0, 3000}[rng.IntN(3)]}
				var d ratelimit.Decision
				d, st, exp, write = ratelimit.DecideSlideInPlace(append([]byte(nil), old...), rules, now, o, nil)
				want = row(d)
				d, err = s.Slide(0, k, now, rules, o, &sc)
				got = row(d)
			case ratelimit.KindGCRA:
				g := ratelimit.GCRA{MaxBurst: rules[0].Limit, Count: rules[1].Limit, Period: 60, Quantity: rng.Int64N(3)}
				var r ratelimit.ThrottleResult
				r, st, exp, write, _ = ratelimit.DecideGCRA(old, g, now, nil)
				want = [5]int64{r.RetryNs, r.Limit, r.Remaining, r.RetryAfter, r.ResetNs}
				r, err = s.Throttle(0, k, now, g, &sc)
				got = [5]int64{r.RetryNs, r.Limit, r.Remaining, r.RetryAfter, r.ResetNs}
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("seed %d step %d: operation answered %v, function %v", seed, step, got, want)
			}
			after, _, _ := s.LimitState(0, k, now, kind)
			switch {
			case !write && string(after) != string(old):
				t.Fatalf("seed %d step %d: state changed from %x to %x; the function wrote nothing", seed, step, old, after)
			case write && string(after) != string(st):
				t.Fatalf("seed %d step %d: stored %x, the function %x", seed, step, after, st)
			case write:
				if ent, _ := s.Find(0, k, now); ent.ExpireAt() != exp {
					t.Fatalf("seed %d step %d: expiry %d, the function %d", seed, step, ent.ExpireAt(), exp)
				}
				// A state rewritten in place keeps the table's expiry
				// count and sum (INFO keyspace's expires, avg_ttl) true.
				tb := &s.dbs[0]
				wantExp, wantSum := int64(0), int64(0)
				if exp != 0 && len(st) > 0 {
					wantExp, wantSum = 1, exp/1000
				}
				if int64(tb.expires) != wantExp || tb.expSum != wantSum {
					t.Fatalf("seed %d step %d: table counts %d expiries summing %d, want %d, %d", seed, step, tb.expires, tb.expSum, wantExp, wantSum)
				}
			}
			if write && s.changes == changes {
				t.Fatalf("seed %d step %d: a stored state was not counted as a change", seed, step)
			}
			s.Unlock()
		}
	}
}

// TestLimitOpsManyKeys: decisions on many keys sharing shards, with plain
// strings written between them (tables growing, blocks of every size class
// reused), leave every key's state and expiry exactly what the pure
// functions give, whether the state was rewritten in place, replaced where
// its decision found it, or stored anew; and the tables' expiry counts true.
func TestLimitOpsManyKeys(t *testing.T) {
	e := New(Config{Databases: 1})
	rng := rand.New(rand.NewPCG(7, 27))
	type model struct {
		state []byte
		exp   int64
	}
	want := map[string]model{}
	live := func(k string, now int64) []byte {
		m, ok := want[k]
		if !ok || (m.exp != 0 && m.exp <= now) {
			return nil
		}
		return m.state
	}
	var sc LimitScratch
	var fsc ratelimit.FixedScratch
	now := int64(1_800_000_000_000)
	rules := [][]ratelimit.Rule{
		{{Limit: 3, Window: 1000}},
		{{Limit: 100, Window: 60_000}},
		{{Limit: 5, Window: 1000}, {Limit: 40, Window: 3_600_000}},
	}
	check := func() {
		t.Helper()
		expires := 0
		for k := range want {
			key := []byte(k)
			s := e.ShardFor(key)
			s.Lock()
			got, _, err := s.LimitState(0, key, now, ratelimit.KindOf(want[k].state))
			ent, found := s.Peek(0, key, now)
			s.Unlock()
			w := live(k, now)
			if err != nil || string(got) != string(w) {
				t.Fatalf("%s: state %x (%v), want %x", k, got, err, w)
			}
			if w != nil {
				if ent.ExpireAt() != want[k].exp {
					t.Fatalf("%s: expiry %d, want %d", k, ent.ExpireAt(), want[k].exp)
				}
			} else if found && ent.Kind() == KindLimit {
				t.Fatalf("%s: still there", k)
			}
		}
		for i := 0; i < Shards; i++ {
			s := e.Shard(i)
			s.Lock()
			s.Keys(0, 0, 1<<30, now, func(en Entry) {
				if en.ExpireAt() != 0 {
					expires++
				}
			})
			s.Unlock()
		}
		n := 0
		for i := 0; i < Shards; i++ {
			n += int(e.Shard(i).dbs[0].expires)
		}
		if n != expires {
			t.Fatalf("the tables count %d expiries, the keys have %d", n, expires)
		}
	}
	for step := 1; step <= 40_000; step++ {
		now += rng.Int64N(30)
		if rng.IntN(10) == 0 {
			// A plain string between decisions moves other records.
			sk := []byte("s" + strconv.Itoa(rng.IntN(2000)))
			s := e.ShardFor(sk)
			s.Lock()
			s.Set(0, sk, make([]byte, rng.IntN(300)), now, SetOptions{}, nil)
			s.Unlock()
			continue
		}
		id := rng.IntN(2000)
		k := "k" + strconv.Itoa(id)
		key := []byte(k)
		r := rules[id%len(rules)]
		old := live(k, now)
		s := e.ShardFor(key)
		s.Lock()
		var st []byte
		var exp int64
		var write bool
		var err error
		if id%2 == 0 {
			o := ratelimit.FixedOptions{Cost: 1}
			_, st, exp, write = ratelimit.DecideFixed(old, r, now, o, &fsc, nil)
			_, err = s.Fixed(0, key, now, r, o, &sc)
		} else {
			o := ratelimit.SlideOptions{Cost: 1, Penalize: id%3 == 0}
			_, st, exp, write = ratelimit.DecideSlideInPlace(append([]byte(nil), old...), r, now, o, nil)
			_, err = s.Slide(0, key, now, r, o, &sc)
		}
		s.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if write {
			if len(st) == 0 {
				delete(want, k)
			} else {
				want[k] = model{append([]byte(nil), st...), exp}
			}
		}
		if step%10_000 == 0 {
			check()
		}
	}
	check()
}
