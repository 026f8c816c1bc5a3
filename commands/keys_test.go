package commands

import (
	"strings"
	"testing"
)

// TestMetadataReadsDoNotTouch: EXISTS, TYPE, TTL and its kin, and OBJECT
// read a key without counting as an access, so its idle time goes on
// growing; each counts a keyspace hit or miss all the same, as Redis's
// LOOKUP_NOTOUCH reads do.
func TestMetadataReadsDoNotTouch(t *testing.T) {
	h := newHarness(t)
	expect(t, h, "+OK", "SET", "k", "v")
	h.clock.Advance(5000)
	h.do("CONFIG", "RESETSTAT")
	for _, cmd := range [][]string{
		{"EXISTS", "k", "missing"}, {"TYPE", "k"}, {"TTL", "k"}, {"PTTL", "missing"},
		{"EXPIRETIME", "k"}, {"PEXPIRETIME", "k"}, {"OBJECT", "ENCODING", "k"},
		{"OBJECT", "REFCOUNT", "missing"}, {"OBJECT", "IDLETIME", "k"},
	} {
		h.do(cmd...)
	}
	info := string(h.do("INFO", "stats").Str)
	for _, want := range []string{"keyspace_hits:7\r\n", "keyspace_misses:3\r\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO stats lacks %q:\n%s", want, info)
		}
	}
	expect(t, h, ":5", "OBJECT", "IDLETIME", "k")
	expect(t, h, `"v"`, "GET", "k")
	expect(t, h, ":0", "OBJECT", "IDLETIME", "k")
}
