package commands

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/limitkv/limitkv/rdb"
)

// TestDumpRestoreLimitStates: for each rate-limit state kind, a state made
// by real commands on the manual clock is DUMPed and RESTOREd under
// another name with the source's TTL; from then on both keys answer the
// same requests identically, and expire together.
func TestDumpRestoreLimitStates(t *testing.T) {
	cases := []struct {
		name  string
		setup [][]string // run on the key {k}
		probe [][]string // run on both keys, the clock moving between
		enc   string
	}{
		{"fixed", [][]string{{"RL.FIXED", "{k}", "5", "1h"}, {"RL.FIXED", "{k}", "5", "1h", "COST", "2"}},
			[][]string{{"RL.FIXED", "{k}", "5", "1h"}, {"RL.FIXED", "{k}", "5", "1h"}, {"RL.FIXED_RO", "{k}", "5", "1h"}}, "fixed-window"},
		{"fixed banned", [][]string{{"RL.FIXED", "{k}", "1", "1m", "BAN", "1h"}, {"RL.FIXED", "{k}", "1", "1m", "BAN", "1h"}},
			[][]string{{"RL.FIXED", "{k}", "1", "1m"}, {"RL.FIXED", "{k}", "1", "1m"}}, "fixed-window"},
		{"slide", [][]string{{"RL.SLIDE", "{k}", "4", "10s"}, {"RL.SLIDE", "{k}", "4", "10s", "COST", "2"}},
			[][]string{{"RL.SLIDE", "{k}", "4", "10s"}, {"RL.SLIDE", "{k}", "4", "10s"}, {"RL.SLIDE", "{k}", "4", "10s", "PEEK"}}, "sliding-window"},
		{"gcra", [][]string{{"CL.THROTTLE", "{k}", "3", "10", "60"}, {"CL.THROTTLE", "{k}", "3", "10", "60", "2"}},
			[][]string{{"CL.THROTTLE", "{k}", "3", "10", "60"}, {"CL.THROTTLE", "{k}", "3", "10", "60", "3"}, {"CL.THROTTLE", "{k}", "3", "10", "60"}}, "gcra"},
		{"lease", [][]string{{"RL.ACQUIRE", "{k}", "3", "10s", "a"}, {"RL.ACQUIRE", "{k}", "3", "20s", "b"}},
			[][]string{{"RL.ACQUIRE", "{k}", "3", "10s", "c"}, {"RL.ACQUIRE", "{k}", "3", "10s", "d"}, {"RL.RELEASE", "{k}", "a"}, {"RL.ACQUIRE", "{k}", "3", "10s", "d"}}, "concurrency"},
		{"login banned", [][]string{{"RL.LOGIN", "{k}", "2", "1m", "BAN", "1h"}, {"RL.LOGIN", "{k}", "2", "1m", "BAN", "1h"}, {"RL.LOGIN", "{k}", "2", "1m", "BAN", "1h"}},
			[][]string{{"RL.LOGIN", "{k}", "2", "1m"}, {"LRANGE", "{k}", "0", "-1"}, {"RL.LOGIN", "{k}", "2", "1m"}}, "quicklist"},
		{"policies", [][]string{{"RL.POLICY", "SET", "api", "SLIDE", "3", "10s"}, {"RL.POLICY", "SET", "burst", "GCRA", "4", "10", "60"},
			{"RL.CHECK", "api", "{k}"}, {"RL.CHECK", "burst", "{k}"}, {"RL.CHECK", "api", "{k}"}},
			[][]string{{"RL.CHECK", "api", "{k}"}, {"RL.CHECK", "burst", "{k}"}, {"RL.CHECK", "api", "{k}"}, {"RL.CHECK_RO", "api", "{k}"}}, "policies"},
	}
	on := func(args []string, key string) []string {
		out := make([]string, len(args))
		for i, a := range args {
			out[i] = strings.ReplaceAll(a, "{k}", key)
		}
		return out
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			for _, a := range tc.setup {
				if r := h.do(on(a, "src")...); r.Type == '-' {
					t.Fatalf("%v: %s", a, r.Str)
				}
			}
			h.clock.Advance(700)
			dump := h.do("DUMP", "src")
			if dump.Type != '$' || dump.Null || !rdb.IsLimitkv(dump.Str) {
				t.Fatalf("DUMP: %+v", dump)
			}
			pttl := h.do("PTTL", "src").Int
			if pttl <= 0 {
				t.Fatalf("PTTL src = %d", pttl)
			}
			if r := h.do("RESTORE", "dst", strconv.FormatInt(pttl, 10), string(dump.Str)); string(r.Str) != "OK" {
				t.Fatalf("RESTORE: %+v", r)
			}
			for _, q := range [][]string{{"TYPE", "{k}"}, {"OBJECT", "ENCODING", "{k}"}, {"PTTL", "{k}"}} {
				a, b := h.do(on(q, "src")...), h.do(on(q, "dst")...)
				if fmt.Sprint(a) != fmt.Sprint(b) {
					t.Fatalf("%v: src %+v dst %+v", q, a, b)
				}
			}
			if enc := string(h.do("OBJECT", "ENCODING", "dst").Str); enc != tc.enc {
				t.Fatalf("OBJECT ENCODING dst = %q, want %q", enc, tc.enc)
			}
			for i, q := range tc.probe {
				h.clock.Advance(int64(i) * 1500)
				a, b := h.do(on(q, "src")...), h.do(on(q, "dst")...)
				if fmt.Sprint(a) != fmt.Sprint(b) {
					t.Fatalf("%v: src %+v dst %+v", q, a, b)
				}
				if a.Type == '-' {
					t.Fatalf("%v: %s", q, a.Str)
				}
			}
			if a, b := h.do("PTTL", "src"), h.do("PTTL", "dst"); a.Int != b.Int {
				t.Fatalf("PTTL after the probes: src %d dst %d", a.Int, b.Int)
			}
		})
	}
}

// TestRestoreLimitOptions: RESTORE of a rate-limit payload takes BUSYKEY,
// REPLACE, ABSTTL, a TTL already past and IDLETIME as for any other type.
func TestRestoreLimitOptions(t *testing.T) {
	h := newHarness(t)
	h.do("RL.FIXED", "src", "5", "1h")
	h.do("RL.FIXED", "src", "5", "1h")
	p := string(h.do("DUMP", "src").Str)
	h.do("SET", "busy", "x")
	want := func(args []string, reply string) {
		t.Helper()
		r := h.do(args...)
		got := string(r.Str)
		if r.Type == ':' {
			got = strconv.FormatInt(r.Int, 10)
		}
		if got != reply {
			t.Fatalf("%v: got %q, want %q", args[:2], got, reply)
		}
	}
	want([]string{"RESTORE", "busy", "0", p}, "BUSYKEY Target key name already exists.")
	want([]string{"RESTORE", "busy", "0", p, "REPLACE", "IDLETIME", "100"}, "OK")
	want([]string{"TYPE", "busy"}, "ratelimit")
	want([]string{"OBJECT", "IDLETIME", "busy"}, "100")
	want([]string{"PTTL", "busy"}, "-1")
	abs := strconv.FormatInt(h.clock.Now()+5000, 10)
	want([]string{"RESTORE", "abs", abs, p, "ABSTTL"}, "OK")
	want([]string{"PTTL", "abs"}, "5000")
	past := strconv.FormatInt(h.clock.Now()-1, 10)
	want([]string{"RESTORE", "gone", past, p, "ABSTTL"}, "OK")
	want([]string{"EXISTS", "gone"}, "0")
	want([]string{"RESTORE", "neg", "-1", p}, "ERR Invalid TTL value, must be >= 0")
	// Two used: a third would leave two.
	r := h.do("RL.FIXED_RO", "busy", "5", "1h")
	if r.Elems[2].Int != 2 {
		t.Fatalf("restored state: %+v", r)
	}
}

// TestRestoreLimitDamaged: a rate-limit payload with any byte changed is
// refused by its checksum; a body cut short and sealed again is refused
// as bad data; neither creates the key or panics. A payload of limitkv's
// version is refused by FUNCTION RESTORE as a version above Redis's.
func TestRestoreLimitDamaged(t *testing.T) {
	h := newHarness(t)
	h.do("RL.SLIDE", "src", "5", "1h")
	h.clock.Advance(10)
	h.do("RL.SLIDE", "src", "5", "1h", "COST", "2")
	h.do("RL.POLICY", "SET", "api", "FIXED", "3", "10s")
	h.do("RL.CHECK", "api", "pol")
	for _, key := range []string{"src", "pol"} {
		p := h.do("DUMP", key).Str
		for i := range p {
			q := []byte(string(p))
			q[i] ^= 0x41
			if r := h.do("RESTORE", "x", "0", string(q)); string(r.Str) != "ERR DUMP payload version or checksum are wrong" {
				t.Fatalf("%s: byte %d changed: %q", key, i, r.Str)
			}
		}
		body, err := rdb.OpenLimitkv(p)
		if err != nil {
			t.Fatal(err)
		}
		for n := 0; n < len(body); n++ {
			q := rdb.SealLimitkv([]byte(string(body[:n])))
			if r := h.do("RESTORE", "x", "0", string(q)); string(r.Str) != "ERR Bad data format" {
				t.Fatalf("%s: body cut to %d bytes: %q", key, n, r.Str)
			}
		}
		if r := h.do("FUNCTION", "RESTORE", string(p)); string(r.Str) != "ERR DUMP payload version or checksum are wrong" {
			t.Fatalf("FUNCTION RESTORE: %q", r.Str)
		}
	}
	if r := h.do("EXISTS", "x"); r.Int != 0 {
		t.Fatal("a refused payload created its key")
	}
}
