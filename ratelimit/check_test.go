package ratelimit

import "testing"

// TestCheckState: every state the decisions write passes, and every
// truncation of it that is not itself a whole state is refused.
func TestCheckState(t *testing.T) {
	now := int64(1_800_000_000_000)
	rules := []Rule{{Limit: 5, Window: 60_000}, {Limit: 100, Window: 3_600_000}}
	var fsc FixedScratch
	_, fixed, _, _ := DecideFixed(nil, rules, now, FixedOptions{Cost: 1}, &fsc, nil)
	_, banSt, _, _ := DecideFixed(fixed, rules, now+1, FixedOptions{Cost: 5, Ban: 10_000}, &fsc, nil)
	if BanEnd(banSt) == 0 {
		t.Fatalf("no ban in %x", banSt)
	}
	var slide []byte
	for i := int64(0); i < 4; i++ {
		_, slide, _, _ = DecideSlide(slide, rules, now+i*1000, SlideOptions{Cost: 1 + i}, nil)
	}
	_, gcra, _, _, err := DecideGCRA(nil, GCRA{MaxBurst: 5, Count: 10, Period: 60, Quantity: 1}, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	var lsc LeaseScratch
	_, lease, _, _ := DecideAcquire(nil, 3, 1000, []byte("a"), now, &lsc, nil)
	_, lease, _, _ = DecideAcquire(lease, 3, 1000, []byte("bb"), now, &lsc, nil)
	var psc PolicyScratch
	c, _, _ := PutPolicyState(nil, nil, []byte("api"), fixed, now+60_000, now, &psc)
	c, _, _ = PutPolicyState(nil, c, []byte("burst"), gcra, now+60_000, now, &psc)

	cases := []struct {
		name string
		st   []byte
		// whole says which prefixes are states in their own right.
		whole func(n int) bool
	}{
		{"fixed", fixed, nil},
		{"fixed banned", banSt, nil},
		{"slide", slide, nil},
		{"gcra", gcra, nil},
		{"lease", lease, func(n int) bool { return n == 1 || n == 1+leaseHead+1 }},
		{"policies", c, nil},
	}
	for _, tc := range cases {
		if err := CheckState(tc.st); err != nil {
			t.Errorf("%s %x: %v", tc.name, tc.st, err)
		}
		for n := 0; n < len(tc.st); n++ {
			if tc.whole != nil && tc.whole(n) {
				continue
			}
			if CheckState(tc.st[:n]) == nil {
				t.Errorf("%s: prefix %x of %x passes", tc.name, tc.st[:n], tc.st)
			}
		}
	}
	for _, st := range [][]byte{{0}, {9}, {KindGCRA | banned, 2}, {KindPolicies, 1, 1, '!', 0, 1, KindGCRA}} {
		if CheckState(st) == nil {
			t.Errorf("%x passes", st)
		}
	}
}
