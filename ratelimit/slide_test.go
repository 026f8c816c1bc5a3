package ratelimit

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSlideInPlaceAgrees: a log decided in place, request after request,
// answers, expires and holds what the pure DecideSlide gives for the same
// requests, through pruning, the region's compaction, its growth and
// shrinking, bans, and logs that start in the compact layout. Most writes
// happen in place, or the point of the layout is lost.
func TestSlideInPlaceAgrees(t *testing.T) {
	var writes, inPlace int
	for seed := uint64(0); seed < 400; seed++ {
		rng := rand.New(rand.NewPCG(seed, 23))
		rules := randomRules(rng)
		if seed%4 == 0 {
			rules = []Rule{{Limit: 20 + rng.Int64N(200), Window: 1000 + rng.Int64N(5000)}}
		}
		o := SlideOptions{Penalize: rng.IntN(4) == 0}
		now := int64(1_000_000)
		var pure, roomy []byte
		if seed%5 == 0 {
			// A log an earlier version wrote.
			es := []slideEntry{{now - 40, 1}, {now - 20, 2}, {now - 3, 1}}
			pure, roomy = encodeSlideEntries(es), encodeSlideEntries(es)
		}
		for step := 0; step < 600; step++ {
			now += []int64{0, 1, 1, rng.Int64N(5), rng.Int64N(300), rng.Int64N(4000), -rng.Int64N(3)}[rng.IntN(7)]
			o.Cost = 1 + rng.Int64N(minLimit(rules))
			o.Peek = rng.IntN(10) == 0
			o.Ban = 0
			if rng.IntN(20) == 0 {
				o.Ban = 1 + rng.Int64N(500)
			}
			was := slices.Clone(roomy)
			want, wantSt, wantExp, wantWrite := DecideSlide(pure, rules, now, o, nil)
			got, st, exp, write := DecideSlideInPlace(roomy, rules, now, o, nil)
			if got != want || exp != wantExp || write != wantWrite {
				t.Fatalf("seed %d step %d: in place %+v exp %d write %v, pure %+v exp %d write %v", seed, step, got, exp, write, want, wantExp, wantWrite)
			}
			if !write {
				if string(roomy) != string(was) {
					t.Fatalf("seed %d step %d: a decision that writes nothing changed the state", seed, step)
				}
				continue
			}
			if !slices.Equal(slideEntries(st), slideEntries(wantSt)) || BanEnd(st) != BanEnd(wantSt) {
				t.Fatalf("seed %d step %d: in place holds %v (ban end %d), pure %v (%d)", seed, step, slideEntries(st), BanEnd(st), slideEntries(wantSt), BanEnd(wantSt))
			}
			if err := CheckState(st); err != nil {
				t.Fatalf("seed %d step %d: %x: %v", seed, step, st, err)
			}
			writes++
			if len(roomy) > 0 && len(st) == len(roomy) && &st[0] == &roomy[0] {
				inPlace++
			}
			pure, roomy = wantSt, st
		}
	}
	if inPlace*2 < writes {
		t.Fatalf("%d of %d writes in place", inPlace, writes)
	}
	t.Logf("%d of %d writes in place", inPlace, writes)
}

// TestSlideRoomyDamaged: a roomy log whose counts point outside its
// region, whose region is cut (if only in its room), or whose entries do
// not fill region[start:end], is refused by CheckState, as RESTORE asks.
func TestSlideRoomyDamaged(t *testing.T) {
	rules := []Rule{{Limit: 10, Window: 1000}}
	var st []byte
	for i := int64(0); i < 4; i++ {
		_, st, _, _ = DecideSlideInPlace(st, rules, 1000+i*10, SlideOptions{Cost: 1}, nil)
	}
	if err := CheckState(st); err != nil || len(slideEntries(st)) != 4 {
		t.Fatalf("%x: %v, %d entries", st, err, len(slideEntries(st)))
	}
	for name, damage := range map[string]func(b []byte){
		"end past the region": func(b []byte) { b[1+8] = 0xff },
		"start after end":     func(b []byte) { b[1+4] = b[1+8] + 1 },
		"count too big":       func(b []byte) { b[1] = 9 },
		"count zero":          func(b []byte) { b[1] = 0 },
		"short header":        nil,
		"room cut":            func(b []byte) {},
	} {
		b := slices.Clone(st)
		switch name {
		case "short header":
			b = b[:roomyHead]
		case "room cut":
			b = b[:len(b)-1]
		default:
			damage(b)
		}
		if CheckState(b) == nil {
			t.Errorf("%s: %x accepted", name, b)
		}
	}
}
