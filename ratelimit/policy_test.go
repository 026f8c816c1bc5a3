package ratelimit

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// TestPolicyDefinitionRoundTrip: a policy's normalised definition, parsed
// again, is the same policy with the same definition (RL.POLICY GET's
// words fed back to SET, and the definitions snapshots keep).
func TestPolicyDefinitionRoundTrip(t *testing.T) {
	for _, def := range []string{
		"SLIDE 3 10s", "slide 10 1500ms 20 90s 30 120m 40 48h PENALIZE",
		"FIXED 100 86400 ALIGN first", "FIXED 100 1d TZ +08:00", "FIXED 5 1h TZ Asia/Shanghai SHADOW",
		"FIXED 3 1m SHADOW BAN 600s", "GCRA 9 100 3600 shadow", "concurrency 10 30000ms",
	} {
		p, err := ParsePolicy([]byte("p"), bytes.Fields([]byte(def)))
		if err != nil {
			t.Fatalf("%s: %v", def, err)
		}
		q, err := ParsePolicy([]byte("p"), p.Def)
		if err != nil {
			t.Fatalf("%s: normalised %q refused: %v", def, p.Def, err)
		}
		if got, want := string(bytes.Join(q.Def, []byte(" "))), string(bytes.Join(p.Def, []byte(" "))); got != want {
			t.Fatalf("%s: %s, then %s", def, want, got)
		}
	}
	for _, def := range []string{"", "BOGUS 1 1s", "SLIDE", "FIXED 10 1m COST 1", "GCRA 1 1", "CONCURRENCY 0 1s"} {
		if _, err := ParsePolicy([]byte("p"), bytes.Fields([]byte(def))); err == nil {
			t.Errorf("%q accepted", def)
		} else if _, ok := err.(ArgError); !ok || strings.HasPrefix(err.Error(), "ERR") {
			t.Errorf("%q: %T %q, want an ArgError without a code", def, err, err)
		}
	}
}

// TestParseIntIsString2ll: limits and login times read as Redis's
// string2ll reads them: exactly the integers that format back to the
// same bytes.
func TestParseIntIsString2ll(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	cases := []string{"", "0", "-0", "00", "01", "+1", "-", " 1", "1 ", "9223372036854775807",
		"9223372036854775808", "-9223372036854775808", "-9223372036854775809", "18446744073709551616", "1e3"}
	for i := 0; i < 2000; i++ {
		n := rng.IntN(22)
		b := make([]byte, n)
		for j := range b {
			b[j] = "0123456789-+ x"[rng.IntN(14)]
		}
		cases = append(cases, string(b), strconv.FormatInt(rng.Int64()>>rng.IntN(63), 10))
	}
	for _, s := range cases {
		v, err := strconv.ParseInt(s, 10, 64)
		wantOK := err == nil && strconv.FormatInt(v, 10) == s
		got, ok := ParseInt([]byte(s))
		if ok != wantOK || ok && got != v {
			t.Fatalf("%q: %d %v, want %d %v", s, got, ok, v, wantOK)
		}
	}
}
