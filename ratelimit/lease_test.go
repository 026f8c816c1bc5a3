package ratelimit

import "testing"

// TestLeaseDamagedState: a truncated state reads as fewer leases, never
// panics.
func TestLeaseDamagedState(t *testing.T) {
	var sc LeaseScratch
	now := int64(1_800_000_000_000)
	_, st, _, _ := DecideAcquire(nil, 3, 1000, []byte("a"), now, &sc, nil)
	_, st, _, _ = DecideAcquire(st, 3, 1000, []byte("bb"), now, &sc, nil)
	for i := 0; i < len(st); i++ {
		DecideAcquire(st[:i], 3, 1000, []byte("c"), now, &sc, nil)
		DecideRelease(st[:i], []byte("a"), now, nil)
	}
}
