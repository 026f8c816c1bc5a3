package engine

import (
	"errors"
	"testing"
)

// TestLimitOpsDoNotAllocate: a decision on an existing key, through the
// Shard operations the commands call, allocates nothing once the caller's
// scratch has grown: the state is decided in the scratch and copied into
// the key's record in place.
func TestLimitOpsDoNotAllocate(t *testing.T) {
	e := New(Config{Databases: 1})
	now := int64(1_800_000_000_000)
	var sc LimitScratch
	rules := []Rule{{Limit: 1 << 40, Window: 60_000}, {Limit: 1 << 40, Window: 3_600_000}}
	slide := []Rule{{Limit: 100, Window: 60_000}}
	ops := []struct {
		name string
		run  func(s *Shard, k []byte) error
	}{
		{"fixed", func(s *Shard, k []byte) error {
			_, err := s.Fixed(0, k, now, rules, FixedOptions{Cost: 1}, &sc)
			return err
		}},
		{"fixed-first", func(s *Shard, k []byte) error {
			_, err := s.Fixed(0, k, now, rules, FixedOptions{Cost: 1, First: true}, &sc)
			return err
		}},
		{"slide", func(s *Shard, k []byte) error {
			now += 600 // a full window: the oldest entry leaves as one comes
			_, err := s.Slide(0, k, now, slide, SlideOptions{Cost: 1}, &sc)
			return err
		}},
		{"throttle", func(s *Shard, k []byte) error {
			_, err := s.Throttle(0, k, now, GCRA{MaxBurst: 1 << 30, Count: 1 << 20, Period: 1, Quantity: 1}, &sc)
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
	rules := []Rule{{Limit: 5, Window: 1000}}
	k := []byte("k")
	s := e.ShardFor(k)
	fixed := func() error { _, err := s.Fixed(0, k, now, rules, FixedOptions{Cost: 1}, &sc); return err }
	slide := func() error { _, err := s.Slide(0, k, now, rules, SlideOptions{Cost: 1}, &sc); return err }
	throttle := func() error {
		_, err := s.Throttle(0, k, now, GCRA{MaxBurst: 1, Count: 1, Period: 1, Quantity: 1}, &sc)
		return err
	}
	ops := []func() error{fixed, slide, throttle}
	kinds := []byte{LimitFixed, LimitSlide, LimitGCRA}
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
	if _, err := s.Throttle(0, []byte("z"), now, GCRA{MaxBurst: 1, Count: 0, Period: 1, Quantity: 1}, &sc); err != ErrZeroRate {
		t.Errorf("zero rate: %v", err)
	}
}
