package ratelimit

import (
	"math/rand/v2"
	"testing"
)

// TestFixedOneEpochAgrees: the path for one rule aligned to the epoch
// answers, writes and expires as the general path does, for every
// request it takes, through rolled-over windows, denials, PEEK, costs,
// bans (which it leaves to the general path), zones and states of other
// shapes; and it takes most of them.
func TestFixedOneEpochAgrees(t *testing.T) {
	zone, err := ParseZone([]byte("Asia/Shanghai"))
	if err != nil {
		t.Skip("no zone database:", err)
	}
	var sc FixedScratch
	var taken, asked int
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 31))
		r := Rule{Limit: 1 + rng.Int64N(20), Window: []int64{1, 7, 1000, 60_000, 3_600_000}[rng.IntN(5)]}
		o := FixedOptions{}
		if seed%3 == 0 && r.Window == 3_600_000 {
			o.Zone = zone
		}
		now := int64(1_800_000_000_000)
		var st []byte
		if seed%7 == 0 {
			// A state another rule left.
			_, st, _, _ = decideFixed(nil, []Rule{{Limit: 5, Window: 2000}}, now, FixedOptions{Cost: 1}, &sc, nil)
		}
		for step := 0; step < 300; step++ {
			now += []int64{0, 1, rng.Int64N(50), rng.Int64N(5000)}[rng.IntN(4)]
			o.Cost = rng.Int64N(r.Limit + 1)
			o.Peek = rng.IntN(8) == 0
			o.Ban = []int64{0, 0, 0, 0, 0, 0, 0, 500}[rng.IntN(8)]
			want, wantSt, wantExp, wantWrite := decideFixed(st, []Rule{r}, now, o, &sc, nil)
			asked++
			got, gotSt, gotExp, gotWrite, ok := decideOneEpoch(st, r, now, o, nil)
			if ok {
				taken++
				if got != want || string(gotSt) != string(wantSt) || gotExp != wantExp || gotWrite != wantWrite {
					t.Fatalf("seed %d step %d rule %v opts %+v state %x:\n one %+v %x exp %d write %v\n all %+v %x exp %d write %v",
						seed, step, r, o, st, got, gotSt, gotExp, gotWrite, want, wantSt, wantExp, wantWrite)
				}
			}
			if wantWrite {
				st = wantSt
			}
		}
	}
	if taken*2 < asked {
		t.Fatalf("the path for one rule took %d of %d requests", taken, asked)
	}
}
