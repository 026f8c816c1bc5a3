package commands

import (
	"math/rand/v2"
	"testing"
)

// TestReprLen: the length feedMonitors checks against the output limits
// before it makes a line is that of the quoting it makes, for every byte.
func TestReprLen(t *testing.T) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	cases := [][]byte{nil, {}, all, []byte(`a"b\c`)}
	for i := 0; i < 200; i++ {
		b := make([]byte, rng.IntN(40))
		for j := range b {
			b[j] = byte(rng.IntN(256))
		}
		cases = append(cases, b)
	}
	for _, b := range cases {
		if got, want := reprLen(b), len(appendRepr(nil, b)); got != want {
			t.Fatalf("%q: reprLen %d, quoted %d bytes", b, got, want)
		}
	}
	if got := string(appendRepr(nil, []byte("a\"b\\c\n\r\t\a\b\x01\xff"))); got != `"a\"b\\c\n\r\t\a\b\x01\xff"` {
		t.Fatalf("quoted as %s", got)
	}
}
