package commands

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/limitkv/limitkv/ratelimit"
	"github.com/limitkv/limitkv/resp"
)

// TestPolicyDefinitions: every definition SET accepts comes back from GET
// normalised, and GET's words fed back to SET give the same policy; every
// refused definition names what is wrong and changes nothing.
func TestPolicyDefinitions(t *testing.T) {
	h := newHarness(t)
	good := []struct{ def, get string }{
		{"SLIDE 3 10s", `["SLIDE", "3", "10s"]`},
		{"slide 3 10000ms", `["SLIDE", "3", "10s"]`},
		{"SLIDE 10 1500ms 20 90s 30 120m 40 48h PENALIZE", `["SLIDE", "10", "1500ms", "20", "90s", "30", "2h", "40", "2d", "PENALIZE"]`},
		{"FIXED 100 86400 ALIGN first", `["FIXED", "100", "1d", "ALIGN", "FIRST"]`},
		{"FIXED 100 1d ALIGN EPOCH", `["FIXED", "100", "1d"]`},
		{"FIXED 100 1d TZ +08:00", `["FIXED", "100", "1d", "TZ", "+08:00"]`},
		{"FIXED 5 1h TZ Asia/Shanghai SHADOW", `["FIXED", "5", "1h", "TZ", "Asia/Shanghai", "SHADOW"]`},
		{"GCRA 0 1 1", `["GCRA", "0", "1", "1s"]`},
		{"FIXED 3 1m SHADOW BAN 600s", `["FIXED", "3", "1m", "BAN", "10m", "SHADOW"]`},
		{"SLIDE 3 1m ban 90000ms penalize", `["SLIDE", "3", "1m", "PENALIZE", "BAN", "90s"]`},
		{"GCRA 9 100 3600 shadow", `["GCRA", "9", "100", "1h", "SHADOW"]`},
		{"GCRA 4 10 2m", `["GCRA", "4", "10", "2m"]`},
		{"concurrency 10 30000ms", `["CONCURRENCY", "10", "30s"]`},
		{"CONCURRENCY 1 1h SHADOW", `["CONCURRENCY", "1", "1h", "SHADOW"]`},
	}
	for _, tc := range good {
		args := append([]string{"RL.POLICY", "SET", "p"}, strings.Fields(tc.def)...)
		if v := h.do(args...); v.String() != "+OK" {
			t.Fatalf("%s: %s", tc.def, v)
		}
		got := h.do("RL.POLICY", "GET", "p")
		if got.String() != tc.get {
			t.Fatalf("%s: GET %s, want %s", tc.def, got, tc.get)
		}
		again := []string{"RL.POLICY", "SET", "q"}
		for _, e := range got.Elems {
			again = append(again, string(e.Str))
		}
		h.do(again...)
		if g2 := h.do("RL.POLICY", "GET", "q"); g2.String() != tc.get {
			t.Fatalf("%s: GET's words fed back give %s", tc.def, g2)
		}
	}
	h.do("RL.POLICY", "SET", "keep", "SLIDE", "1", "1m")
	bad := []struct{ args, err string }{
		{"keep SLIDE 0 1m", "invalid limit '0'"},
		{"keep SLIDE 9007199254740993 1m", "invalid limit '9007199254740993'"},
		{"keep SLIDE 10 0", "invalid window '0' for limit 10"},
		{"keep SLIDE 10 1.5s", "invalid window '1.5s'"},
		{"keep SLIDE 10 3651d", "invalid window '3651d'"},
		{"keep SLIDE 10", "limit 10 has no window"},
		{"keep SLIDE", "has no rule"},
		{"keep", "wrong number of arguments"},
		{"keep SLIDE 10 1m COST 1", "COST belongs to RL.CHECK"},
		{"keep FIXED 10 1m PEEK", "PEEK belongs to RL.CHECK"},
		{"keep SLIDE 10 1m ALIGN FIRST", "ALIGN given twice or not valid for RL.SLIDE"},
		{"keep FIXED 10 1m PENALIZE", "PENALIZE given twice or not valid for RL.FIXED"},
		{"keep FIXED 10 1m ALIGN LAST", "invalid ALIGN 'LAST'"},
		{"keep FIXED 10 1m ALIGN", "ALIGN needs a value"},
		{"keep FIXED 10 1m TZ Local", "invalid TZ 'Local'"},
		{"keep FIXED 10 1m ALIGN FIRST TZ +08:00", "TZ applies to ALIGN EPOCH only"},
		{"keep FIXED 10 7h TZ Asia/Shanghai", "window '7h' cannot be aligned"},
		{"keep SLIDE 1 1m 2 1m 3 1m 4 1m 5 1m 6 1m 7 1m 8 1m 9 1m 10 1m 11 1m 12 1m 13 1m 14 1m 15 1m 16 1m 17 1m", "too many rules"},
		{"keep SLIDE 10 1m BOGUS", "unexpected argument 'BOGUS'"},
		{"keep SLIDE 10 1m SHADOW SHADOW", "SHADOW given twice or not valid for RL.SLIDE"},
		{"keep SLIDE 10 1m BAN 0", "invalid BAN '0'"},
		{"keep SLIDE 10 1m BAN", "BAN needs a value"},
		{"keep GCRA 4 10 60 BAN 1m", "unexpected argument 'BAN'"},
		{"keep GCRA 4 10 60 SHADOW SHADOW", "unexpected argument 'SHADOW'"},
		{"keep TOKEN 10 1m", "invalid policy type 'TOKEN'"},
		{"keep GCRA 4 10", "GCRA needs max_burst count_per_period period"},
		{"keep GCRA 4 10 60 1", "unexpected argument '1'"},
		{"keep GCRA -1 10 60", "invalid max_burst '-1'"},
		{"keep GCRA x 10 60", "invalid max_burst 'x'"},
		{"keep GCRA 4 0 60", "invalid count_per_period '0'"},
		{"keep GCRA 4 10 0", "invalid period '0'"},
		{"keep GCRA 4 10 1500ms", "invalid period '1500ms'"},
		{"keep GCRA 4 2000000000 1", "more than one per nanosecond"},
		{"keep GCRA 9007199254740990 1 3650d", "GCRA policy too long"},
		{"keep CONCURRENCY 0 30s", "invalid limit '0'"},
		{"keep CONCURRENCY 10001 30s", "invalid limit '10001'"},
		{"keep CONCURRENCY 10 0s", "invalid lease '0s'"},
		{"keep CONCURRENCY 10", "expected limit lease"},
		{"keep CONCURRENCY 10 30s id1", "unexpected argument 'id1'"},
		{"keep CONCURRENCY 10 30s COST 2", "COST belongs to RL.CHECK"},
		{"keep CONCURRENCY 10 30s BAN 1m", "BAN given twice or not valid for RL.ACQUIRE"},
		{"bad:name SLIDE 10 1m", "invalid policy name 'bad:name'"},
		{"bad,name SLIDE 10 1m", "invalid policy name"},
		{strings.Repeat("n", 129) + " SLIDE 10 1m", "invalid policy name"},
	}
	for _, tc := range bad {
		args := append([]string{"RL.POLICY", "SET"}, strings.Fields(tc.args)...)
		v := h.do(args...)
		if v.Type != '-' || !strings.Contains(string(v.Str), tc.err) {
			t.Errorf("SET %s: %s, want an error with %q", tc.args, v, tc.err)
		}
	}
	if v := h.do("RL.POLICY", "GET", "keep"); v.String() != `["SLIDE", "1", "1m"]` {
		t.Fatalf("a refused SET changed the policy: %s", v)
	}
	if v := h.do("RL.POLICY", "LIST"); v.String() != `["keep", "p", "q"]` {
		t.Fatalf("LIST %s", v)
	}
	name128 := strings.Repeat("n", 128)
	if v := h.do("RL.POLICY", "SET", name128, "SLIDE", "1", "1m"); v.String() != "+OK" {
		t.Fatalf("a 128-byte name: %s", v)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"RL.POLICY", "LIST", "?"}, `["p", "q"]`},
		{[]string{"RL.POLICY", "LIST", "[kp]*"}, `["keep", "p"]`},
		{[]string{"RL.POLICY", "LIST", "n*"}, `["` + name128 + `"]`},
		{[]string{"RL.POLICY", "LIST", "x", "y"}, "-ERR syntax error"},
		{[]string{"RL.POLICY", "GET", "nosuch"}, "-ERR no such policy 'nosuch'"},
		{[]string{"RL.POLICY", "GET", "a", "b"}, "-ERR wrong number of arguments for 'rl.policy|get' command"},
		{[]string{"RL.POLICY", "DEL", "nosuch"}, ":0"},
		{[]string{"RL.POLICY", "DEL", "p"}, ":1"},
		{[]string{"RL.POLICY", "DEL", "p"}, ":0"},
		{[]string{"RL.POLICY", "DEL"}, "-ERR wrong number of arguments for 'rl.policy|del' command"},
		{[]string{"RL.POLICY"}, "-ERR wrong number of arguments for 'rl.policy' command"},
		{[]string{"RL.POLICY", "NOPE"}, "-ERR unknown subcommand 'NOPE'. Try RL.POLICY HELP."},
		{[]string{"RL.CHECK", "p", "k"}, "-ERR no such policy 'p'"},
		{[]string{"RL.CHECK", "keep"}, "-ERR wrong number of arguments for 'rl.check' command"},
		{[]string{"RL.CHECK", "keep", "k", "COST", "2"}, "-ERR COST 2 exceeds the limit 1 of policy 'keep': the request could never be allowed"},
		{[]string{"RL.CHECK", "keep", "k", "COST", "x"}, "-ERR invalid COST 'x': expected an integer from 1 to 9007199254740992"},
		{[]string{"RL.CHECK", "keep", "k", "COST"}, "-ERR COST needs a value"},
		{[]string{"RL.CHECK", "keep", "k", "COST", "1", "COST", "1"}, "-ERR COST given twice or not valid for policy 'keep' (SLIDE)"},
		{[]string{"RL.CHECK", "keep", "k", "PEEK", "PEEK"}, "-ERR PEEK given twice or not valid for policy 'keep' (SLIDE)"},
		{[]string{"RL.CHECK", "keep", "k", "PENALIZE"}, "-ERR syntax error: unexpected argument 'PENALIZE'"},
		{[]string{"RL.CHECK", "keep", "k", "ID", "x"}, "-ERR ID given twice or not valid for policy 'keep' (SLIDE)"},
		{[]string{"RL.POLICY", "SET", "sem", "CONCURRENCY", "2", "30s"}, "+OK"},
		{[]string{"RL.CHECK", "sem", "k"}, "-ERR policy 'sem' is a CONCURRENCY policy: RL.CHECK sem key ID id, released with RL.RELEASE key id"},
		{[]string{"RL.CHECK", "sem", "k", "ID"}, "-ERR ID needs a value"},
		{[]string{"RL.CHECK", "sem", "k", "ID", ""}, "-ERR invalid id of 0 bytes: expected 1 to 256 bytes"},
		{[]string{"RL.CHECK", "sem", "k", "ID", strings.Repeat("i", 257)}, "-ERR invalid id of 257 bytes: expected 1 to 256 bytes"},
		{[]string{"RL.CHECK", "sem", "k", "ID", "a", "ID", "b"}, "-ERR ID given twice or not valid for policy 'sem' (CONCURRENCY)"},
		{[]string{"RL.CHECK", "sem", "k", "ID", "a", "COST", "1"}, "-ERR COST is not valid for policy 'sem' (CONCURRENCY): a request holds one slot, RL.ACQUIRE has no PEEK"},
		{[]string{"RL.CHECK", "sem", "k", "PEEK", "ID", "a"}, "-ERR PEEK is not valid for policy 'sem' (CONCURRENCY): a request holds one slot, RL.ACQUIRE has no PEEK"},
		{[]string{"EXISTS", "k"}, ":0"},
		{[]string{"RL.POLICY", "DEL", "sem"}, ":1"},
		{[]string{"RL.POLICY", "LIST"}, `["keep", "` + name128 + `", "q"]`},
	} {
		if v := h.do(tc.args...); v.String() != tc.want {
			t.Errorf("%v: %s, want %s", tc.args, v, tc.want)
		}
	}
}

// TestPolicyCheckMatchesCommand: on random sequences of requests, RL.CHECK
// with a policy decides exactly as the command with the same arguments on
// another key (the property behind "define once, apply by name").
func TestPolicyCheckMatchesCommand(t *testing.T) {
	h := newHarness(t)
	rng := rand.New(rand.NewSource(17))
	windows := []string{"250ms", "1s", "7s", "1m", "1h", "1d"}
	for round := 0; round < 30; round++ {
		var def, cmd []string
		maxCost := int64(1 << 53)
		switch kind := round % 3; kind {
		case 0, 1:
			rules := 1 + rng.Intn(3)
			for i := 0; i < rules; i++ {
				limit := 1 + rng.Int63n(8)
				maxCost = min(maxCost, limit)
				def = append(def, strconv.FormatInt(limit, 10), windows[rng.Intn(len(windows))])
			}
			if rng.Intn(3) == 0 {
				def = append(def, "BAN", windows[rng.Intn(len(windows))])
			}
			if rng.Intn(4) == 0 {
				def = append(def, "SHADOW")
			}
			if kind == 0 {
				cmd = []string{"RL.FIXED"}
				if rng.Intn(2) == 0 {
					def = append(def, "ALIGN", "FIRST")
				}
				def = append([]string{"FIXED"}, def...)
			} else {
				cmd = []string{"RL.SLIDE"}
				if rng.Intn(2) == 0 {
					def = append(def, "PENALIZE")
				}
				def = append([]string{"SLIDE"}, def...)
			}
		case 2:
			// An emission interval of whole ms, so that CL.THROTTLE's
			// seconds and RL.CHECK's ms describe the same times exactly.
			burst := rng.Int63n(6)
			period := int64(1 + rng.Intn(10))
			count := []int64{1, 2, 4, 5, 8, 10}[rng.Intn(6)]
			maxCost = burst + 1
			def = []string{"GCRA", strconv.FormatInt(burst, 10), strconv.FormatInt(count, 10), strconv.FormatInt(period, 10)}
			cmd = []string{"CL.THROTTLE"}
		}
		name := "p" + strconv.Itoa(round)
		if v := h.do(append([]string{"RL.POLICY", "SET", name}, def...)...); v.String() != "+OK" {
			t.Fatalf("%v: %s", def, v)
		}
		kc, kd := "check:"+name, "direct:"+name
		for step := 0; step < 200; step++ {
			cost := 1 + rng.Int63n(maxCost)
			peek := rng.Intn(8) == 0
			check := []string{"RL.CHECK", name, kc, "COST", strconv.FormatInt(cost, 10)}
			var direct []string
			if cmd[0] == "CL.THROTTLE" {
				// CL.THROTTLE has no PEEK (quantity 0 asks another
				// question): a PEEK is compared with the request on a copy.
				target := kd
				if peek {
					target = "copy:" + name
					h.do("DEL", target)
					h.do("COPY", kd, target)
				}
				direct = append([]string{"CL.THROTTLE", target}, def[1:]...)
				direct = append(direct, strconv.FormatInt(cost, 10))
			} else {
				direct = append(append([]string{cmd[0], kd}, def[1:]...), "COST", strconv.FormatInt(cost, 10))
			}
			if peek {
				check = append(check, "PEEK")
				if cmd[0] != "CL.THROTTLE" {
					direct = append(direct, "PEEK")
				}
			}
			got, want := h.do(check...), h.do(direct...)
			if cmd[0] == "CL.THROTTLE" {
				gcraSame(t, got, want, def, step)
			} else if got.String() != want.String() {
				t.Fatalf("%v step %d: RL.CHECK %s, %s %s", def, step, got, cmd[0], want)
			}
			h.clock.Advance(rng.Int63n(3000))
		}
		if a, b := h.do("PTTL", kc).Int, h.do("PTTL", kd).Int; a != b && cmd[0] != "CL.THROTTLE" {
			t.Fatalf("%v: PTTL %d, direct %d", def, a, b)
		}
	}
}

// TestPolicyConcurrencyMatchesAcquire: RL.CHECK on a CONCURRENCY policy
// decides as RL.ACQUIRE with its limit and lease, and RL.RELEASE frees the
// slots it took, on random sequences of acquires, renewals, releases and
// expiries.
func TestPolicyConcurrencyMatchesAcquire(t *testing.T) {
	h := newHarness(t)
	rng := rand.New(rand.NewSource(42))
	for round := 0; round < 10; round++ {
		limit := strconv.Itoa(1 + rng.Intn(5))
		lease := []string{"500ms", "2s", "10s"}[rng.Intn(3)]
		def := []string{"CONCURRENCY", limit, lease}
		if rng.Intn(3) == 0 {
			def = append(def, "SHADOW")
		}
		name := "c" + strconv.Itoa(round)
		h.do(append([]string{"RL.POLICY", "SET", name}, def...)...)
		kc, kd := "check:"+name, "direct:"+name
		for step := 0; step < 200; step++ {
			id := "req" + strconv.Itoa(rng.Intn(8))
			var got, want string
			if rng.Intn(4) == 0 {
				got, want = h.do("RL.RELEASE", kc, id).String(), h.do("RL.RELEASE", kd, id).String()
			} else {
				direct := append([]string{"RL.ACQUIRE", kd, limit, lease, id}, def[3:]...)
				got, want = h.do("RL.CHECK", name, kc, "ID", id).String(), h.do(direct...).String()
			}
			if got != want {
				t.Fatalf("%v step %d: policy %s, direct %s", def, step, got, want)
			}
			h.clock.Advance(rng.Int63n(400))
		}
		if a, b := h.do("PTTL", kc).Int, h.do("PTTL", kd).Int; a != b {
			t.Fatalf("%v: PTTL %d, direct %d", def, a, b)
		}
	}
}

// gcraSame compares RL.CHECK's reply on a GCRA policy with CL.THROTTLE's:
// allowed is the opposite of limited, times are ms against redis-cell's
// whole seconds rounded up.
func gcraSame(t *testing.T, got, want interface{ String() string }, def []string, step int) {
	t.Helper()
	g, w := parseInts(got.String()), parseInts(want.String())
	secs := func(ms int64) int64 {
		if ms < 0 {
			return -1
		}
		return (ms + 999) / 1000
	}
	if len(g) != 5 || len(w) != 5 || g[0] != 1-w[0] || g[1] != w[1] || g[2] != w[2] || secs(g[3]) != w[3] || secs(g[4]) != w[4] {
		t.Fatalf("%v step %d: RL.CHECK %s, CL.THROTTLE %s", def, step, got, want)
	}
}

func parseInts(s string) []int64 {
	var out []int64
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == '[' || r == ']' || r == ',' || r == ' ' || r == ':' }) {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil
		}
		out = append(out, n)
	}
	return out
}

// TestPolicyCounters: each policy counts its decisions in INFO ratelimit;
// PEEK is not counted; a replaced policy keeps its counts, a deleted one
// loses them; CONFIG RESETSTAT zeroes them; a SHADOW policy's denials are
// answered allowed and counted apart.
func TestPolicyCounters(t *testing.T) {
	h := newHarness(t)
	h.do("RL.POLICY", "SET", "api", "FIXED", "2", "1m")
	h.do("RL.POLICY", "SET", "roll", "SLIDE", "1", "1m", "SHADOW")
	for _, args := range [][]string{
		{"RL.CHECK", "api", "a"}, {"RL.CHECK", "api", "a"}, {"RL.CHECK", "api", "a"}, {"RL.CHECK", "api", "a", "PEEK"},
		{"RL.CHECK", "roll", "r"}, {"RL.CHECK", "roll", "r"}, {"RL.CHECK", "roll", "r"},
	} {
		h.do(args...)
	}
	if v := h.do("RL.CHECK", "roll", "r"); v.String() != "[:1, :1, :0, :60000, :60000]" {
		t.Fatalf("a shadow denial: %s", v)
	}
	info := func() string { return string(h.do("INFO", "ratelimit").Str) }
	for _, want := range []string{
		"rl_check_allowed:3\r\n", "rl_check_denied:1\r\n", "rl_check_shadow_denied:3\r\n",
		"policy_api:allowed=2,denied=1,shadow_denied=0\r\n", "policy_roll:allowed=1,denied=0,shadow_denied=3\r\n",
	} {
		if !strings.Contains(info(), want) {
			t.Fatalf("INFO ratelimit lacks %q:\n%s", want, info())
		}
	}
	stats := h.srv.PolicyStats()
	if len(stats) != 2 || stats[0] != (PolicyStat{"api", 2, 1, 0}) || stats[1] != (PolicyStat{"roll", 1, 0, 3}) {
		t.Fatalf("PolicyStats %+v", stats)
	}
	h.do("RL.POLICY", "SET", "api", "FIXED", "5", "1m")
	h.do("RL.CHECK", "api", "a")
	if !strings.Contains(info(), "policy_api:allowed=3,denied=1,shadow_denied=0\r\n") {
		t.Fatalf("a replaced policy's counts:\n%s", info())
	}
	h.do("RL.POLICY", "DEL", "api")
	h.do("RL.POLICY", "SET", "api", "FIXED", "5", "1m")
	if !strings.Contains(info(), "policy_api:allowed=0,denied=0,shadow_denied=0\r\n") {
		t.Fatalf("a deleted policy's counts came back:\n%s", info())
	}
	h.do("CONFIG", "RESETSTAT")
	if !strings.Contains(info(), "policy_roll:allowed=0,denied=0,shadow_denied=0\r\n") {
		t.Fatalf("CONFIG RESETSTAT:\n%s", info())
	}
}

// TestPolicyPayload: what snapshots and full syncs carry gives another
// server the same policies; an empty payload clears them.
func TestPolicyPayload(t *testing.T) {
	a, b := newHarness(t), newHarness(t)
	defs := [][]string{
		{"f", "FIXED", "3", "1m", "10", "1d", "TZ", "Europe/Paris"},
		{"s", "SLIDE", "5", "10s", "PENALIZE", "SHADOW"},
		{"g", "GCRA", "4", "10", "60"},
	}
	for _, d := range defs {
		a.do(append([]string{"RL.POLICY", "SET"}, d...)...)
	}
	b.do("RL.POLICY", "SET", "other", "SLIDE", "1", "1s")
	payload, gen := a.srv.PoliciesPayload()
	if err := b.srv.RestorePolicies(payload); err != nil {
		t.Fatal(err)
	}
	for _, d := range defs {
		if x, y := a.do("RL.POLICY", "GET", d[0]).String(), b.do("RL.POLICY", "GET", d[0]).String(); x != y {
			t.Fatalf("%s: %s restored as %s", d[0], x, y)
		}
	}
	if v := b.do("RL.POLICY", "LIST"); v.String() != `["f", "g", "s"]` {
		t.Fatalf("restored LIST %s", v)
	}
	if _, gen2 := a.srv.PoliciesPayload(); gen2 != gen {
		t.Fatal("the generation changed without a change")
	}
	a.do("RL.POLICY", "DEL", "nosuch")
	if _, gen2 := a.srv.PoliciesPayload(); gen2 != gen {
		t.Fatal("a DEL of nothing changed the generation")
	}
	if err := b.srv.RestorePolicies(nil); err != nil {
		t.Fatal(err)
	}
	if v := b.do("RL.POLICY", "LIST"); v.String() != "[]" {
		t.Fatalf("after restoring none: %s", v)
	}
	for _, damaged := range [][]byte{{9}, {1, 5}, payload[:len(payload)-3]} {
		if err := b.srv.RestorePolicies(damaged); err == nil {
			t.Fatalf("damaged payload %q accepted", damaged)
		}
	}
}

// TestPolicyFile: --rl-policies's file: comments, blank lines, quoting;
// its policies replace those of the same names and leave the others; one
// bad line refuses the whole file, naming the line.
func TestPolicyFile(t *testing.T) {
	h := newHarness(t)
	h.do("RL.POLICY", "SET", "old", "SLIDE", "1", "1s")
	h.do("RL.POLICY", "SET", "api", "SLIDE", "1", "1s")
	dir := t.TempDir()
	good := filepath.Join(dir, "good.conf")
	os.WriteFile(good, []byte("# Limits of the public API\n\n"+
		"RL.POLICY SET api SLIDE 100 1m 1000 1h\n"+
		"  rl.policy set 'login' FIXED 5 15m \"SHADOW\"   \n"+
		"RL.POLICY SET cn FIXED 100 1d TZ \"Asia/Shanghai\"\n"+
		"# the last definition of a name wins, as the commands would\n"+
		"RL.POLICY SET cn FIXED 200 1d TZ Asia/Shanghai\n"+
		"RL.POLICY SET roll SLIDE 50 1m SHADOW     # rolling out: a comment after a definition\n"+
		"\tRL.POLICY SET tab SLIDE 7 1m\t#\n"+
		"   # an indented comment line\n"), 0o644)
	n, err := h.srv.LoadPolicyFile(good)
	if err != nil || n != 6 {
		t.Fatalf("LoadPolicyFile: %d %v", n, err)
	}
	for _, tc := range [][2]string{
		{"api", `["SLIDE", "100", "1m", "1000", "1h"]`},
		{"login", `["FIXED", "5", "15m", "SHADOW"]`},
		{"cn", `["FIXED", "200", "1d", "TZ", "Asia/Shanghai"]`},
		{"old", `["SLIDE", "1", "1s"]`},
		{"roll", `["SLIDE", "50", "1m", "SHADOW"]`},
		{"tab", `["SLIDE", "7", "1m"]`},
	} {
		if v := h.do("RL.POLICY", "GET", tc[0]); v.String() != tc[1] {
			t.Fatalf("%s: %s, want %s", tc[0], v, tc[1])
		}
	}
	for _, tc := range []struct{ text, err string }{
		{"RL.POLICY SET a SLIDE 1 1m\n# fine\nRL.POLICY SET b SLIDE 0 1m\n", ":3: invalid limit '0'"},
		{"\n\nRL.POLICY SET a SLIDE 1 1m COST 1\n", ":3: COST belongs to RL.CHECK"},
		{"RL.POLICY SET a SLIDE 1 '1m\n", ":1: unbalanced quotes"},
		{"RL.POLICY DEL a\n", ":1: expected RL.POLICY SET name"},
		{"SET a b\n", ":1: expected RL.POLICY SET name"},
		{"RL.POLICY SET a:b SLIDE 1 1m\n", ":1: invalid policy name 'a:b'"},
		// A '#' inside an argument, or quoted, is data, not a comment.
		{"RL.POLICY SET a SLIDE 1 1m#x\n", ":1: invalid window '1m#x'"},
		{"RL.POLICY SET a SLIDE 1 1m '#' rest\n", ":1: syntax error: unexpected argument '#'"},
		{"RL.POLICY SET a SLIDE 1 1m \"# x\"\n", ":1: syntax error: unexpected argument '# x'"},
		{"RL.POLICY SET a SLIDE 1 1m \"x\"# y\n", ":1: unbalanced quotes"},
	} {
		bad := filepath.Join(dir, "bad.conf")
		os.WriteFile(bad, []byte(tc.text), 0o644)
		_, err := h.srv.LoadPolicyFile(bad)
		if err == nil || !strings.Contains(err.Error(), bad+tc.err) {
			t.Errorf("%q: %v, want %q", tc.text, err, tc.err)
		}
	}
	if v := h.do("RL.POLICY", "GET", "a"); v.Type != '-' {
		t.Fatalf("a refused file left policy a: %s", v)
	}
	if _, err := h.srv.LoadPolicyFile(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing file was accepted")
	}

	// The bound: ratelimit.MaxPolicies in all, a file included.
	var b strings.Builder
	for i := 0; i < ratelimit.MaxPolicies-1; i++ {
		fmt.Fprintf(&b, "RL.POLICY SET p%d SLIDE 10 1m\n", i)
	}
	full := filepath.Join(dir, "full.conf")
	os.WriteFile(full, []byte(b.String()), 0o644)
	if _, err := h.srv.LoadPolicyFile(full); err == nil || !strings.Contains(err.Error(), "too many policies: at most 10000") {
		t.Fatalf("past the bound: %v", err)
	}
	h.do("RL.POLICY", "DEL", "old")
	h.do("RL.POLICY", "DEL", "login")
	h.do("RL.POLICY", "DEL", "cn")
	h.do("RL.POLICY", "DEL", "roll")
	h.do("RL.POLICY", "DEL", "tab")
	if _, err := h.srv.LoadPolicyFile(full); err != nil {
		t.Fatal(err)
	}
	if v := h.do("RL.POLICY", "SET", "one-more", "SLIDE", "1", "1m"); v.String() != "-ERR too many policies: at most 10000" {
		t.Fatalf("SET past the bound: %s", v)
	}
	if v := h.do("RL.POLICY", "SET", "api", "SLIDE", "2", "1m"); v.String() != "+OK" {
		t.Fatalf("replacing at the bound: %s", v)
	}
}

// TestPolicyFileDocExamples loads every policies file that the docs show,
// so that an example an operator copies always starts the server. The
// examples are found, not listed: a fenced block whose lines are all
// RL.POLICY SET lines, '#' comments or blank is a policies file.
func TestPolicyFileDocExamples(t *testing.T) {
	found := 0
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range append([]string{"../README.md"}, docs...) {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, ex := range policyFileExamples(string(text)) {
			found++
			file := filepath.Join(t.TempDir(), "policies.conf")
			os.WriteFile(file, []byte(ex.text), 0o644)
			h := newHarness(t)
			n, err := h.srv.LoadPolicyFile(file)
			if err != nil {
				// The error names the file's line; say the doc's.
				line := ""
				_, rest, _ := strings.Cut(err.Error(), file+":")
				n, _, _ := strings.Cut(rest, ":")
				if l, err := strconv.Atoi(n); err == nil {
					line = strconv.Itoa(ex.line + l - 1)
				}
				t.Errorf("%s:%s: the policies file of the block at line %d does not load: %v", doc, line, ex.line, err)
				continue
			}
			if n != ex.policies {
				t.Errorf("%s:%d: the policies file loaded %d policies, want %d", doc, ex.line, n, ex.policies)
			}
		}
	}
	if found == 0 {
		t.Fatal("no policies file found in the docs: has the example, or the way it is found, changed?")
	}
}

// policyFileExample is a fenced block of a Markdown text that is a
// policies file: its text, the line of its first line and how many
// RL.POLICY SET lines it has.
type policyFileExample struct {
	text           string
	line, policies int
}

func policyFileExamples(markdown string) []policyFileExample {
	var out []policyFileExample
	var block []string
	start, open := 0, false
	for i, l := range strings.Split(markdown, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			if open {
				if ex, ok := asPolicyFile(block); ok {
					ex.line = start
					out = append(out, ex)
				}
			}
			open, block, start = !open, nil, i+2
			continue
		}
		if open {
			block = append(block, l)
		}
	}
	return out
}

func asPolicyFile(lines []string) (policyFileExample, bool) {
	ex := policyFileExample{text: strings.Join(lines, "\n") + "\n"}
	for _, l := range lines {
		l = strings.TrimSpace(l)
		words := strings.Fields(l)
		switch {
		case l == "" || l[0] == '#':
		case len(words) >= 2 && strings.EqualFold(words[0], "RL.POLICY") && strings.EqualFold(words[1], "SET"):
			ex.policies++
		default:
			return ex, false
		}
	}
	return ex, ex.policies > 0
}

// TestPolicyChangesUnderLoad: RL.CHECK runs while the policy is replaced
// and deleted (go test -race watches the registry); every reply is a
// decision of one of the definitions or the unknown-policy error.
func TestPolicyChangesUnderLoad(t *testing.T) {
	h := newHarness(t)
	h.do("RL.POLICY", "SET", "p", "SLIDE", "1000000", "1h")
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := 0; g < 4; g++ {
		h.use("c" + strconv.Itoa(g))
		c := h.cur
		key := []byte("k" + strconv.Itoa(g))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				c.c.Write(resp.AppendCommand(nil, []byte("RL.CHECK"), []byte("p"), key))
				v, err := resp.ReadValue(c.r)
				switch {
				case err != nil:
					errs <- err.Error()
					return
				case v.Type == '-' && string(v.Str) == "ERR no such policy 'p'":
				case v.Type == '*' && v.Elems[0].Int == 1 && (v.Elems[1].Int == 1000000 || v.Elems[1].Int == 2000000):
				default:
					errs <- v.String()
					return
				}
			}
		}()
	}
	h.use("main")
	for i := 0; i < 200; i++ {
		switch i % 3 {
		case 0:
			h.do("RL.POLICY", "SET", "p", "SLIDE", "1000000", "1h")
		case 1:
			h.do("RL.POLICY", "SET", "p", "SLIDE", "2000000", "1h")
		case 2:
			h.do("RL.POLICY", "DEL", "p")
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

// TestPolicyACL: RL.CHECK's key is checked against the user's key
// patterns; "+@ratelimit -@admin" applies and reads policies but does not
// redefine them.
func TestPolicyACL(t *testing.T) {
	h := newHarness(t)
	h.do("RL.POLICY", "SET", "api", "SLIDE", "10", "1m")
	h.do("ACL", "SETUSER", "app", "on", ">pw", "~rl:*", "+@ratelimit", "-@admin")
	h.use("app")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"AUTH", "app", "pw"}, "+OK"},
		{[]string{"RL.CHECK", "api", "rl:1"}, "[:1, :10, :9, :-1, :60000]"},
		{[]string{"RL.CHECK", "api", "other"}, "-NOPERM this user has no permissions to access one of the keys used as arguments"},
		{[]string{"RL.POLICY", "GET", "api"}, `["SLIDE", "10", "1m"]`},
		{[]string{"RL.POLICY", "LIST"}, `["api"]`},
		{[]string{"RL.POLICY", "SET", "api", "SLIDE", "1000", "1m"}, "-NOPERM this user has no permissions to run the 'rl.policy|set' command"},
		{[]string{"RL.POLICY", "DEL", "api"}, "-NOPERM this user has no permissions to run the 'rl.policy|del' command"},
	} {
		if v := h.do(tc.args...); v.String() != tc.want {
			t.Errorf("%v: %s, want %s", tc.args, v, tc.want)
		}
	}
}
