package commands

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/limitkv/limitkv/ratelimit"
)

// TestShadowMatchesEnforced drives one key with SHADOW and another without
// it through the same random requests (rules, COST, PEEK, PENALIZE, BAN)
// on the manual clock: after every request the two keys hold the same
// state bytes and TTL, the replies differ only in allowed (always 1 for the
// shadow key), and INFO counts as shadow-denied exactly what was denied.
func TestShadowMatchesEnforced(t *testing.T) {
	h := newHarness(t)
	var denied [2]int
	for seed := uint64(0); seed < 24; seed++ {
		rng := rand.New(rand.NewPCG(seed, 29))
		cmd, kind, fixed := "RL.SLIDE", ratelimit.KindSlide, seed%2 == 0
		if fixed {
			cmd, kind = "RL.FIXED", ratelimit.KindFixed
		}
		var rules []string
		minLimit := int64(1 << 62)
		for i := 0; i < 1+rng.IntN(2); i++ {
			l := 1 + rng.Int64N(6)
			minLimit = min(minLimit, l)
			rules = append(rules, strconv.FormatInt(l, 10), []string{"50ms", "1s", "3s"}[rng.IntN(3)])
		}
		enf, sh := fmt.Sprintf("enf:%d", seed), fmt.Sprintf("shadow:%d", seed)
		for step := 0; step < 150; step++ {
			h.clock.Advance([]int64{0, 1, rng.Int64N(100), rng.Int64N(2000)}[rng.IntN(4)])
			opts := []string{"COST", strconv.FormatInt(1+rng.Int64N(minLimit), 10)}
			peek := rng.IntN(8) == 0
			if peek {
				opts = append(opts, "PEEK")
			}
			if !fixed && rng.IntN(3) == 0 {
				opts = append(opts, "PENALIZE")
			}
			if rng.IntN(2) == 0 {
				opts = append(opts, "BAN", []string{"10ms", "500ms", "4s"}[rng.IntN(3)])
			}
			a := h.do(append(append([]string{cmd, enf}, rules...), opts...)...)
			b := h.do(append(append(append([]string{cmd, sh}, rules...), opts...), "SHADOW")...)
			if a.Type != '*' || b.Type != '*' || len(a.Elems) != 5 || len(b.Elems) != 5 {
				t.Fatalf("seed %d step %d: replies %+v %+v", seed, step, a, b)
			}
			if b.Elems[0].Int != 1 {
				t.Fatalf("seed %d step %d: a shadow reply says allowed=%d", seed, step, b.Elems[0].Int)
			}
			for i := 1; i < 5; i++ {
				if a.Elems[i].Int != b.Elems[i].Int {
					t.Fatalf("seed %d step %d: field %d enforced %d shadow %d", seed, step, i, a.Elems[i].Int, b.Elems[i].Int)
				}
			}
			if a.Elems[0].Int == 0 && !peek {
				denied[b2i(fixed)]++
			}
			now := h.clock.Now()
			s1, s2 := h.srv.Eng.ShardFor([]byte(enf)), h.srv.Eng.ShardFor([]byte(sh))
			s1.Lock()
			st1, ok1, _ := s1.LimitState(0, []byte(enf), now, kind)
			st1 = append([]byte(nil), st1...)
			s1.Unlock()
			s2.Lock()
			st2, ok2, _ := s2.LimitState(0, []byte(sh), now, kind)
			st2 = append([]byte(nil), st2...)
			s2.Unlock()
			if ok1 != ok2 || string(st1) != string(st2) {
				t.Fatalf("seed %d step %d: states differ:\nenforced %x\nshadow   %x", seed, step, st1, st2)
			}
			if p1, p2 := h.do("PTTL", enf).Int, h.do("PTTL", sh).Int; p1 != p2 {
				t.Fatalf("seed %d step %d: PTTL enforced %d shadow %d", seed, step, p1, p2)
			}
		}
	}
	want := fmt.Sprintf("rl_fixed_shadow_denied:%d\r\n", denied[1])
	info := string(h.do("INFO", "ratelimit").Str)
	if !strings.Contains(info, want) || !strings.Contains(info, fmt.Sprintf("rl_fixed_denied:%d\r\n", denied[1])) ||
		!strings.Contains(info, fmt.Sprintf("rl_slide_shadow_denied:%d\r\n", denied[0])) || !strings.Contains(info, fmt.Sprintf("rl_slide_denied:%d\r\n", denied[0])) {
		t.Fatalf("INFO ratelimit:\n%s\nwant fixed %d, slide %d denied and shadow-denied", info, denied[1], denied[0])
	}
	if denied[0] == 0 || denied[1] == 0 {
		t.Fatal("the random requests were never denied")
	}
}
