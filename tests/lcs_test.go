package tests

import (
	"math/rand"
	"strconv"
	"testing"
)

// TestLCSMatchesRedis compares LCS, LEN and IDX replies with
// redis-server's on random strings over small alphabets, where ranges
// meet and restart often.
func TestLCSMatchesRedis(t *testing.T) {
	rs := startRedis(t)
	kv := startLimitkv(t)
	r, k := dialRaw(t, rs.Addr), dialRaw(t, kv.Addr)
	rng := rand.New(rand.NewSource(3))
	str := func() string {
		b := make([]byte, rng.Intn(300))
		alpha := "abcdefgh"[:1+rng.Intn(8)]
		for i := range b {
			b[i] = alpha[rng.Intn(len(alpha))]
		}
		return string(b)
	}
	for i := 0; i < 300; i++ {
		a, b := str(), str()
		min := strconv.Itoa(rng.Intn(5))
		for _, c := range []*rawConn{r, k} {
			c.do("MSET", "a", a, "b", b)
		}
		for _, cmd := range [][]string{
			{"LCS", "a", "b"},
			{"LCS", "a", "b", "LEN"},
			{"LCS", "a", "b", "IDX", "WITHMATCHLEN"},
			{"LCS", "a", "b", "IDX", "MINMATCHLEN", min},
		} {
			if want, got := r.do(cmd...).String(), k.do(cmd...).String(); want != got {
				t.Fatalf("%v with a=%q b=%q:\n redis: %s\nlimitkv: %s", cmd, a, b, want, got)
			}
		}
	}
}
