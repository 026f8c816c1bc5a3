package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/limitkv/limitkv/ratelimit"
)

// leaseModel is RL.ACQUIRE/RL.RELEASE from first principles: a map from id
// to the end of its lease (exclusive), never pruned; a lease is live while
// now < end.
type leaseModel map[string]int64

// leaseHead is the fixed part of a lease in ratelimit's state layout
// (ratelimit/lease.go): its end and its id's length.
const leaseHead = 9

func (m leaseModel) live(now int64) int64 {
	var n int64
	for _, end := range m {
		if end > now {
			n++
		}
	}
	return n
}

func (m leaseModel) lastEnd(now int64) (int64, bool) {
	var last int64
	found := false
	for _, end := range m {
		if end > now && (!found || end > last) {
			last, found = end, true
		}
	}
	return last, found
}

func (m leaseModel) holds(id string, now int64) bool {
	end, ok := m[id]
	return ok && end > now
}

// fits says whether a new id would get a slot at t with no other traffic.
func (m leaseModel) fits(t, limit int64) bool { return m.live(t) < limit }

func (m leaseModel) acquire(now, limit, lease int64, id string) ratelimit.Decision {
	d := ratelimit.Decision{Limit: limit}
	if !m.holds(id, now) && !m.fits(now, limit) {
		// The retry time by search: the first millisecond a slot is free.
		at := now
		for !m.fits(at, limit) {
			at++
		}
		last, _ := m.lastEnd(now)
		d.RetryAfter, d.ResetAfter = at-now, last-now
		return d
	}
	m[id] = now + lease
	last, _ := m.lastEnd(now)
	d.Allowed = true
	d.Remaining = max(limit-m.live(now), 0)
	d.RetryAfter = -1
	d.ResetAfter = last - now
	return d
}

func (m leaseModel) release(now int64, id string) bool {
	if !m.holds(id, now) {
		return false
	}
	delete(m, id)
	return true
}

// TestLeaseAgainstModel drives random acquires (new ids and renewals, with
// limits and leases that change between calls), releases and clock steps
// through the Shard operations, and compares every reply, the key's
// existence and its expiry (the last millisecond of its last lease) with
// the model.
func TestLeaseAgainstModel(t *testing.T) {
	e := New(Config{Databases: 1})
	var sc LimitScratch
	leases := []int64{1, 2, 5, 20, 100, 1000}
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 17))
		key := []byte(fmt.Sprintf("lease:%d", seed))
		s := e.ShardFor(key)
		m := leaseModel{}
		limit := 1 + rng.Int64N(6)
		ids := 1 + rng.IntN(12)
		now := int64(1_800_000_000_000)
		for step := 0; step < 500; step++ {
			switch rng.IntN(4) {
			case 0:
			case 1:
				now += rng.Int64N(3)
			default:
				now += rng.Int64N(60)
			}
			if rng.IntN(40) == 0 {
				limit = 1 + rng.Int64N(6) // takes effect on the leases held
			}
			id := fmt.Sprintf("id%d", rng.IntN(ids))
			ctx := fmt.Sprintf("seed %d step %d now %d limit %d id %s", seed, step, now, limit, id)
			if rng.IntN(4) == 0 {
				want := m.release(now, id)
				got, err := s.Release(0, key, now, []byte(id), &sc)
				if err != nil || got != want {
					t.Fatalf("%s: release %v %v, want %v", ctx, got, err, want)
				}
			} else {
				lease := leases[rng.IntN(len(leases))]
				want := m.acquire(now, limit, lease, id)
				got, err := s.Acquire(0, key, now, limit, lease, []byte(id), &sc)
				if err != nil || got != want {
					t.Fatalf("%s lease %d:\n got %+v %v\nwant %+v", ctx, lease, got, err, want)
				}
			}
			// The key lives exactly as long as its last lease.
			ent, ok := s.Find(0, key, now)
			last, live := m.lastEnd(now)
			if ok != live {
				t.Fatalf("%s: key exists %v, leases live %v", ctx, ok, live)
			}
			if ok && ent.ExpireAt() != last-1 {
				t.Fatalf("%s: key expires at %d, last lease ends at %d", ctx, ent.ExpireAt(), last)
			}
			if ok {
				st, _, _ := s.LimitState(0, key, now, ratelimit.KindLease)
				n := int64(0)
				p := 1
				for ; p+leaseHead <= len(st); p += leaseHead + int(st[p+8]) + 1 {
					end := int64(binary.LittleEndian.Uint64(st[p:]))
					lid := st[p+leaseHead : p+leaseHead+int(st[p+8])+1]
					n++
					if m[string(lid)] != end {
						t.Fatalf("%s: stored lease %s ends at %d, model %d", ctx, lid, end, m[string(lid)])
					}
				}
				if p != len(st) {
					t.Fatalf("%s: damaged state %x", ctx, st)
				}
				if n > 6 {
					t.Fatalf("%s: %d leases stored, limits never exceed 6", ctx, n)
				}
			}
		}
	}
}

// TestLeaseExpiresToTheMillisecond: a lease acquired at t for L ms holds
// its slot at t+L-1 and frees it at t+L, when the key disappears; a
// renewal restarts the lease from the renewal.
func TestLeaseExpiresToTheMillisecond(t *testing.T) {
	e := New(Config{Databases: 1})
	var sc LimitScratch
	k := []byte("sem")
	s := e.ShardFor(k)
	t0 := int64(1_800_000_000_000)
	acq := func(now int64, id string) ratelimit.Decision {
		d, err := s.Acquire(0, k, now, 1, 1000, []byte(id), &sc)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := acq(t0, "a"); d != (ratelimit.Decision{Allowed: true, Limit: 1, Remaining: 0, RetryAfter: -1, ResetAfter: 1000}) {
		t.Fatalf("first: %+v", d)
	}
	if d := acq(t0+999, "b"); d != (ratelimit.Decision{Allowed: false, Limit: 1, Remaining: 0, RetryAfter: 1, ResetAfter: 1}) {
		t.Fatalf("at t+L-1: %+v", d)
	}
	if _, ok := s.Find(0, k, t0+999); !ok {
		t.Fatal("key gone at t+L-1")
	}
	if _, ok := s.Find(0, k, t0+1000); ok {
		t.Fatal("key still there at t+L")
	}
	if d := acq(t0+1000, "b"); d != (ratelimit.Decision{Allowed: true, Limit: 1, Remaining: 0, RetryAfter: -1, ResetAfter: 1000}) {
		t.Fatalf("at t+L: %+v", d)
	}
	// b renews at t+1500: its lease now ends at t+2500.
	if d := acq(t0+1500, "b"); d != (ratelimit.Decision{Allowed: true, Limit: 1, Remaining: 0, RetryAfter: -1, ResetAfter: 1000}) {
		t.Fatalf("renew: %+v", d)
	}
	if d := acq(t0+2499, "a"); d.Allowed || d.RetryAfter != 1 {
		t.Fatalf("before the renewed end: %+v", d)
	}
	if d := acq(t0+2500, "a"); !d.Allowed {
		t.Fatalf("at the renewed end: %+v", d)
	}
	// Releasing the last lease deletes the key.
	if ok, _ := s.Release(0, k, t0+2501, []byte("a"), &sc); !ok {
		t.Fatal("release of a live lease answered 0")
	}
	if _, ok := s.Find(0, k, t0+2501); ok {
		t.Fatal("key left after its last lease was released")
	}
	if ok, _ := s.Release(0, k, t0+2501, []byte("a"), &sc); ok {
		t.Fatal("second release answered 1")
	}
}

// TestLeaseLoweredLimit: leases admitted under a higher limit stay; a new
// id waits until enough have ended to be under the new limit, and holders
// still renew.
func TestLeaseLoweredLimit(t *testing.T) {
	e := New(Config{Databases: 1})
	var sc LimitScratch
	k := []byte("sem")
	s := e.ShardFor(k)
	t0 := int64(1_800_000_000_000)
	for i, id := range []string{"a", "b", "c"} {
		if d, _ := s.Acquire(0, k, t0+int64(i), 3, 100, []byte(id), &sc); !d.Allowed {
			t.Fatalf("%s: %+v", id, d)
		}
	}
	// Limit 1: a, b and c (ending at t+100..t+102) must all end before a
	// slot frees.
	if d, _ := s.Acquire(0, k, t0+10, 1, 100, []byte("x"), &sc); d != (ratelimit.Decision{Allowed: false, Limit: 1, Remaining: 0, RetryAfter: 92, ResetAfter: 92}) {
		t.Fatalf("lowered: %+v", d)
	}
	if d, _ := s.Acquire(0, k, t0+10, 1, 100, []byte("c"), &sc); d != (ratelimit.Decision{Allowed: true, Limit: 1, Remaining: 0, RetryAfter: -1, ResetAfter: 100}) {
		t.Fatalf("renew over the limit: %+v", d)
	}
}

// TestLeaseWrongKind: RL.ACQUIRE and RL.RELEASE refuse other limit kinds
// and other types, and the other limit commands refuse a lease key.
func TestLeaseWrongKind(t *testing.T) {
	e := New(Config{Databases: 1})
	var sc LimitScratch
	now := int64(1_800_000_000_000)
	k := []byte("k")
	s := e.ShardFor(k)
	if _, err := s.Fixed(0, k, now, []ratelimit.Rule{{Limit: 5, Window: 1000}}, ratelimit.FixedOptions{Cost: 1}, &sc); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(0, k, now, 5, 1000, []byte("a"), &sc); !errors.Is(err, ErrWrongType) {
		t.Errorf("acquire on a fixed key: %v", err)
	}
	if _, err := s.Release(0, k, now, []byte("a"), &sc); !errors.Is(err, ErrWrongType) {
		t.Errorf("release on a fixed key: %v", err)
	}
	s.Delete(0, k, now)
	if _, err := s.Acquire(0, k, now, 5, 1000, []byte("a"), &sc); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Slide(0, k, now, []ratelimit.Rule{{Limit: 5, Window: 1000}}, ratelimit.SlideOptions{Cost: 1}, &sc); !errors.Is(err, ErrWrongType) {
		t.Errorf("slide on a lease key: %v", err)
	}
	if got := s.Encoding(mustFind(t, s, k, now)); got != "concurrency" {
		t.Errorf("OBJECT ENCODING %q", got)
	}
	s.Delete(0, k, now)
	s.SetObject(0, k, KindList, NewList(), 0)
	if _, err := s.Acquire(0, k, now, 5, 1000, []byte("a"), &sc); !errors.Is(err, ErrWrongType) {
		t.Errorf("acquire on a list: %v", err)
	}
	if _, err := s.Release(0, k, now, []byte("a"), &sc); !errors.Is(err, ErrWrongType) {
		t.Errorf("release on a list: %v", err)
	}
}

func mustFind(t *testing.T, s *Shard, k []byte, now int64) Entry {
	t.Helper()
	e, ok := s.Find(0, k, now)
	if !ok {
		t.Fatal("key not found")
	}
	return e
}

// TestLeaseOpsDoNotAllocate: on an existing key, acquiring a new id,
// renewing, a denial and a release allocate nothing once the scratch has
// grown.
func TestLeaseOpsDoNotAllocate(t *testing.T) {
	e := New(Config{Databases: 1})
	var sc LimitScratch
	now := int64(1_800_000_000_000)
	k := []byte("sem")
	s := e.ShardFor(k)
	ids := [][]byte{[]byte("a"), []byte("b"), []byte("c")}
	for _, id := range ids {
		s.Acquire(0, k, now, 3, 60_000, id, &sc)
	}
	ops := map[string]func(){
		"renew":  func() { s.Acquire(0, k, now, 3, 60_000, ids[0], &sc) },
		"denied": func() { s.Acquire(0, k, now, 3, 60_000, []byte("d"), &sc) },
		"release+acquire": func() {
			s.Release(0, k, now, ids[1], &sc)
			s.Acquire(0, k, now, 3, 60_000, ids[1], &sc)
		},
	}
	for name, op := range ops {
		for i := 0; i < 10; i++ {
			op()
		}
		if n := testing.AllocsPerRun(200, op); n != 0 {
			t.Errorf("%s: %v allocations on an existing key", name, n)
		}
	}
}
