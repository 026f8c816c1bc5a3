package engine

import (
	"strconv"
	"testing"

	"github.com/limitkv/limitkv/ratelimit"
)

// BenchmarkLease runs RL.ACQUIRE and RL.RELEASE's Shard operations under
// the shard lock on 100 keys, each holding `limit` leases (ids of 8 to 12
// bytes): a call walks every live lease, so the cost grows with the limit.
//
//	new:     a new id takes the slot of a lease that has just expired
//	renew:   a holder renews on a full semaphore
//	denied:  a new id on a full semaphore
//	release: a holder releases (the keys are refilled, off the clock, when
//	         every lease has been released)
func BenchmarkLease(b *testing.B) {
	for _, limit := range []int64{10, 100, 1000} {
		name := "limit=" + strconv.FormatInt(limit, 10)
		b.Run("new/"+name, func(b *testing.B) { benchLease(b, limit, "new") })
		b.Run("renew/"+name, func(b *testing.B) { benchLease(b, limit, "renew") })
		b.Run("denied/"+name, func(b *testing.B) { benchLease(b, limit, "denied") })
		b.Run("release/"+name, func(b *testing.B) { benchLease(b, limit, "release") })
	}
}

func benchLease(b *testing.B, limit int64, op string) {
	e := New(Config{Databases: 1})
	keys := benchDecisionKeys(100)
	ids := make([][]byte, 2*limit)
	for i := range ids {
		ids[i] = []byte("req:" + strconv.Itoa(1_000_000+i))
	}
	var sc LimitScratch
	now := int64(1_800_000_000_000)
	const step = 10 // ms between acquires of one key in "new"
	lease := int64(3_600_000)
	if op == "new" {
		lease = limit * step // the oldest lease ends as a new one comes
	}
	acquire := func(k, id []byte) ratelimit.Decision {
		s := e.ShardFor(k)
		s.Lock()
		d, err := s.Acquire(0, k, now, limit, lease, id, &sc)
		s.Unlock()
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	release := func(k, id []byte) bool {
		s := e.ShardFor(k)
		s.Lock()
		ok, err := s.Release(0, k, now, id, &sc)
		s.Unlock()
		if err != nil {
			b.Fatal(err)
		}
		return ok
	}
	fill := func() {
		for j := int64(0); j < limit; j++ {
			for _, k := range keys {
				if !acquire(k, ids[j]).Allowed {
					b.Fatal("fill denied")
				}
			}
			if op == "new" {
				now += step
			}
		}
	}
	fill()
	next := limit // the id "new" acquires next
	released := 0
	denied := []byte("req:denied")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := keys[i%len(keys)]
		switch op {
		case "new":
			if i%len(keys) == 0 && i > 0 {
				now += step
				next = (next + 1) % int64(len(ids))
			}
			if !acquire(k, ids[next]).Allowed {
				b.Fatal("new id denied")
			}
		case "renew":
			if !acquire(k, ids[(i/len(keys))%int(limit)]).Allowed {
				b.Fatal("renewal denied")
			}
		case "denied":
			if acquire(k, denied).Allowed {
				b.Fatal("allowed on a full semaphore")
			}
		case "release":
			if released == len(keys)*int(limit) {
				b.StopTimer()
				fill()
				released = 0
				b.StartTimer()
			}
			if !release(k, ids[released/len(keys)]) {
				b.Fatal("release freed nothing")
			}
			released++
		}
	}
}
