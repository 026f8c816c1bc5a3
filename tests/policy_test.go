package tests

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/limitkv/limitkv/resp"
)

// Named policies against the real binary: atomicity through RL.CHECK, the
// policies surviving a restart, reaching replicas by the full sync and by
// the stream, and --rl-policies at start-up.

// TestPolicyCheckAtomicity: 128 connections hammer one key through
// RL.CHECK at once; exactly limit requests are admitted, for each kind of
// policy, and for two policies on one key, each its own limit.
func TestPolicyCheckAtomicity(t *testing.T) {
	const conns, each, limit = 128, 8, 300
	s, ctl := frozenServer(t, 1_800_000_000_000)
	for _, def := range [][]string{
		{"fixed", "FIXED", strconv.Itoa(limit), "1h"},
		{"fixed2", "FIXED", "1000", "1h", strconv.Itoa(limit), "1d"},
		{"slide", "SLIDE", strconv.Itoa(limit), "1h"},
		{"pen", "SLIDE", strconv.Itoa(limit), "1h", "PENALIZE"},
		// GCRA on a frozen clock: the burst, max_burst + 1, and no more.
		{"gcra", "GCRA", strconv.Itoa(limit - 1), "1", "3600"},
		// CONCURRENCY: every request a holder of its own.
		{"sem", "CONCURRENCY", strconv.Itoa(limit), "1h"},
	} {
		mustDo(t, ctl, "+OK", append([]string{"RL.POLICY", "SET"}, def...)...)
	}
	for _, name := range []string{"fixed", "fixed2", "slide", "pen", "gcra", "sem"} {
		t.Run(name, func(t *testing.T) {
			key := "k-" + name
			batches := make([][]byte, conns)
			for ci := range batches {
				for i := 0; i < each; i++ {
					args := [][]byte{[]byte("RL.CHECK"), []byte(name), []byte(key)}
					if name == "sem" {
						args = append(args, []byte("ID"), []byte("id-"+strconv.Itoa(ci)+"-"+strconv.Itoa(i)))
					}
					batches[ci] = resp.AppendCommand(batches[ci], args...)
				}
			}
			var admitted atomic.Int64
			hammer(t, s.Addr, batches, each, func(v resp.Value) {
				if v.Type == '*' && v.Elems[0].Int == 1 {
					admitted.Add(1)
				}
			})
			if got := admitted.Load(); got != limit {
				t.Fatalf("%d of %d requests admitted, want exactly %d", got, conns*each, limit)
			}
		})
	}
	// Two policies of different types on one subject key, every
	// connection sending both: each admits exactly its own limit (the
	// reply's limit field says which policy answered).
	t.Run("two-policies", func(t *testing.T) {
		const other = 200
		mustDo(t, ctl, "+OK", "RL.POLICY", "SET", "per-user", "SLIDE", strconv.Itoa(other), "1h")
		batches := make([][]byte, conns)
		for ci := range batches {
			for i := 0; i < each; i++ {
				name := "fixed"
				if (ci+i)%2 == 1 {
					name = "per-user"
				}
				batches[ci] = resp.AppendCommand(batches[ci], []byte("RL.CHECK"), []byte(name), []byte("user:42"))
			}
		}
		admitted := map[int64]*atomic.Int64{limit: new(atomic.Int64), other: new(atomic.Int64)}
		hammer(t, s.Addr, batches, each, func(v resp.Value) {
			if v.Type == '*' && v.Elems[0].Int == 1 {
				admitted[v.Elems[1].Int].Add(1)
			}
		})
		if a, b := admitted[limit].Load(), admitted[other].Load(); a != limit || b != other {
			t.Fatalf("admitted %d through fixed (limit %d) and %d through per-user (limit %d)", a, limit, b, other)
		}
		mustDo(t, ctl, `"policies"`, "OBJECT", "ENCODING", "user:42")
	})
	info := ctl.do("INFO", "ratelimit").String()
	if !strings.Contains(info, "policy_slide:allowed=300,denied=724,shadow_denied=0") {
		t.Fatalf("INFO ratelimit:\n%s", info)
	}
}

// TestPoliciesSurviveRestart: the snapshot keeps the policies (a change
// with no key changed included, and a deletion); --rl-policies's file is
// loaded after the snapshot, replacing the policies of the same names and
// leaving the others.
func TestPoliciesSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	s := startLimitkvIn(t, dir, "--snapshot-interval", "1h")
	c := dialRaw(t, s.Addr)
	mustDo(t, c, "+OK", "RL.POLICY", "SET", "api", "SLIDE", "2", "1h")
	mustDo(t, c, "+OK", "RL.POLICY", "SET", "login", "FIXED", "5", "15m", "TZ", "Europe/Paris", "SHADOW")
	mustDo(t, c, "+OK", "RL.POLICY", "SET", "gone", "GCRA", "4", "10", "60")
	mustDo(t, c, "+OK", "RL.POLICY", "SET", "sem", "CONCURRENCY", "1", "1h")
	mustDo(t, c, "[:1, :1, :0, :-1, :3600000]", "RL.CHECK", "sem", "s", "ID", "job")
	mustDo(t, c, "[:1, :2, :1, :-1, :3600000]", "RL.CHECK", "api", "u")
	s.Stop()

	s = startLimitkvIn(t, dir, "--snapshot-interval", "1h")
	c = dialRaw(t, s.Addr)
	mustDo(t, c, `["api", "gone", "login", "sem"]`, "RL.POLICY", "LIST")
	if d := decision(t, c.do("RL.CHECK", "sem", "s", "ID", "other")); d[0] != 0 {
		t.Fatalf("the lease taken before the restart is gone: %v", d)
	}
	mustDo(t, c, ":1", "RL.POLICY", "DEL", "sem")
	mustDo(t, c, `["FIXED", "5", "15m", "TZ", "Europe/Paris", "SHADOW"]`, "RL.POLICY", "GET", "login")
	if d := decision(t, c.do("RL.CHECK", "api", "u")); d[0] != 1 || d[2] != 0 {
		t.Fatalf("the second request after the restart: %v", d)
	}
	if d := decision(t, c.do("RL.CHECK", "api", "u")); d[0] != 0 {
		t.Fatalf("the third request after the restart: %v", d)
	}
	mustDo(t, c, ":1", "RL.POLICY", "DEL", "gone")
	s.Stop()

	file := filepath.Join(t.TempDir(), "policies.conf")
	os.WriteFile(file, []byte("# deployed with the app\nRL.POLICY SET api SLIDE 100 1m\nRL.POLICY SET new FIXED 1 1s   # a comment after a definition\n"), 0o644)
	s = startLimitkvIn(t, dir, "--snapshot-interval", "1h", "--rl-policies", file)
	c = dialRaw(t, s.Addr)
	mustDo(t, c, `["api", "login", "new"]`, "RL.POLICY", "LIST")
	mustDo(t, c, `["SLIDE", "100", "1m"]`, "RL.POLICY", "GET", "api")
	mustDo(t, c, `["FIXED", "5", "15m", "TZ", "Europe/Paris", "SHADOW"]`, "RL.POLICY", "GET", "login")
	mustDo(t, c, `["rl-policies", "`+file+`"]`, "CONFIG", "GET", "rl-policies")
	s.Stop()

	// The file's policies were saved too: without the flag they are there.
	s = startLimitkvIn(t, dir, "--snapshot-interval", "1h")
	c = dialRaw(t, s.Addr)
	mustDo(t, c, `["api", "login", "new"]`, "RL.POLICY", "LIST")
	mustDo(t, c, `["SLIDE", "100", "1m"]`, "RL.POLICY", "GET", "api")
}

// TestPolicyFileRefused: one bad line and the server does not start; the
// error names the file and the line.
func TestPolicyFileRefused(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policies.conf")
	os.WriteFile(file, []byte("RL.POLICY SET api SLIDE 100 1m\n\n# next one is wrong\nRL.POLICY SET sms SLIDE 3 1m COST 2\n"), 0o644)
	out, err := runBinary(t, "--port", strconv.Itoa(freePort(t)), "--persistence", "no", "--rl-policies", file)
	if err == nil {
		t.Fatalf("the server started with a bad policies file:\n%s", out)
	}
	if !strings.Contains(out, file+":4: COST belongs to RL.CHECK, not to a policy's definition") {
		t.Fatalf("the error does not name the line:\n%s", out)
	}
	out, err = runBinary(t, "--port", strconv.Itoa(freePort(t)), "--persistence", "no", "--rl-policies", file+".missing")
	if err == nil || !strings.Contains(out, "no such file") {
		t.Fatalf("a missing policies file: %v\n%s", err, out)
	}
}

// TestPoliciesReplicate: a replica gets the master's policies by the full
// sync (its own are replaced) and then by the stream, and the states
// RL.CHECK writes; it refuses RL.POLICY SET as any write.
func TestPoliciesReplicate(t *testing.T) {
	m := startMaster(t, "--persistence", "no")
	mc := goRedis(t, m.Addr, 2)
	mr := dialRaw(t, m.Addr)
	mustDo(t, mr, "+OK", "RL.POLICY", "SET", "api", "SLIDE", "3", "1m")
	mustDo(t, mr, "+OK", "RL.POLICY", "SET", "burst", "GCRA", "4", "10", "60", "SHADOW")
	mustDo(t, mr, "[:1, :3, :2, :-1, :60000]", "RL.CHECK", "api", "u")
	r := startMaster(t, "--persistence", "no")
	rc := goRedis(t, r.Addr, 2)
	rr := dialRaw(t, r.Addr)
	mustDo(t, rr, "+OK", "RL.POLICY", "SET", "mine", "FIXED", "1", "1s")
	host, port, _ := net.SplitHostPort(m.Addr)
	mustDo(t, rr, "+OK", "REPLICAOF", host, port)
	waitInSync(t, mc, rc)
	mustDo(t, rr, `["api", "burst"]`, "RL.POLICY", "LIST")
	mustDo(t, rr, `["GCRA", "4", "10", "1m", "SHADOW"]`, "RL.POLICY", "GET", "burst")
	mustDo(t, rr, "-READONLY You can't write against a read only replica.", "RL.POLICY", "SET", "x", "SLIDE", "1", "1s")
	mustDo(t, rr, "-READONLY You can't write against a read only replica.", "RL.CHECK", "api", "u")

	// The stream: changes, deletions, and the decisions' states.
	mustDo(t, mr, "+OK", "RL.POLICY", "SET", "api", "SLIDE", "5", "1m")
	mustDo(t, mr, "+OK", "RL.POLICY", "SET", "new", "FIXED", "2", "1h", "ALIGN", "FIRST")
	mustDo(t, mr, "+OK", "RL.POLICY", "SET", "sem", "CONCURRENCY", "2", "1h")
	mustDo(t, mr, "[:1, :2, :1, :-1, :3600000]", "RL.CHECK", "sem", "s", "ID", "job")
	mustDo(t, mr, ":1", "RL.POLICY", "DEL", "burst")
	mustDo(t, mr, "[:1, :5, :3, :-1, :60000]", "RL.CHECK", "api", "u")
	mustDo(t, mr, "[:1, :2, :1, :-1, :3600000]", "RL.CHECK", "new", "n")
	waitInSync(t, mc, rc)
	mustDo(t, rr, `["api", "new", "sem"]`, "RL.POLICY", "LIST")
	mustDo(t, rr, `["FIXED", "2", "1h", "ALIGN", "FIRST"]`, "RL.POLICY", "GET", "new")
	sameKeyspace(t, mc, rc)

	// A second replica's full sync, now that the policies changed.
	r2 := startReplicaOf(t, m, "", "--persistence", "no")
	rc2 := goRedis(t, r2.Addr, 2)
	waitInSync(t, mc, rc, rc2)
	mustDo(t, dialRaw(t, r2.Addr), `["SLIDE", "5", "1m"]`, "RL.POLICY", "GET", "api")
	sameKeyspace(t, mc, rc2)

	// A master whose policies are all deleted: a replica that syncs again
	// keeps none.
	mustDo(t, mr, ":1", "RL.POLICY", "DEL", "api")
	mustDo(t, mr, ":1", "RL.POLICY", "DEL", "new")
	mustDo(t, mr, ":1", "RL.POLICY", "DEL", "sem")
	mustDo(t, rr, "+OK", "REPLICAOF", "NO", "ONE")
	mustDo(t, rr, "+OK", "RL.POLICY", "SET", "stale", "SLIDE", "1", "1s")
	mustDo(t, rr, "+OK", "REPLICAOF", host, port)
	waitInSync(t, mc, rc, rc2)
	mustDo(t, rr, "[]", "RL.POLICY", "LIST")
	mustDo(t, dialRaw(t, r2.Addr), "[]", "RL.POLICY", "LIST")
}

// TestPolicyMetrics: the metrics count each policy's decisions, labelled
// by policy and decision; a deleted policy's series go.
func TestPolicyMetrics(t *testing.T) {
	mport := freePort(t)
	s := startLimitkv(t, "--persistence", "no", "--metrics-addr", "127.0.0.1:"+strconv.Itoa(mport))
	c := dialRaw(t, s.Addr)
	mustDo(t, c, "+OK", "RL.POLICY", "SET", "api", "FIXED", "2", "1m")
	mustDo(t, c, "+OK", "RL.POLICY", "SET", "roll", "SLIDE", "1", "1m", "SHADOW")
	mustDo(t, c, "+OK", "RL.POLICY", "SET", "gone", "SLIDE", "1", "1m")
	for i := 0; i < 3; i++ {
		c.do("RL.CHECK", "api", "a")
		c.do("RL.CHECK", "roll", "r")
	}
	c.do("RL.CHECK", "api", "a", "PEEK")
	mustDo(t, c, ":1", "RL.POLICY", "DEL", "gone")
	url := "http://127.0.0.1:" + strconv.Itoa(mport) + "/metrics"
	fams := scrape(t, url)
	for _, tc := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"policy=api", "decision=allowed"}, 2},
		{[]string{"policy=api", "decision=denied"}, 1},
		{[]string{"policy=api", "decision=shadow_denied"}, 0},
		{[]string{"policy=roll", "decision=allowed"}, 1},
		{[]string{"policy=roll", "decision=denied"}, 0},
		{[]string{"policy=roll", "decision=shadow_denied"}, 2},
	} {
		if got := sample(t, fams, "limitkv_ratelimit_policy_decisions_total", tc.labels...); got != tc.want {
			t.Errorf("%v = %v, want %v", tc.labels, got, tc.want)
		}
	}
	if _, ok := lookupSample(fams, "limitkv_ratelimit_policy_decisions_total", "policy=gone", "decision=allowed"); ok {
		t.Error("a deleted policy is still in the metrics")
	}
	if got := sample(t, fams, "limitkv_ratelimit_decisions_total", "command=rl.check", "decision=shadow_denied"); got != 2 {
		t.Errorf("rl.check shadow_denied = %v, want 2", got)
	}
}

// TestPoliciesOnOneKeyTravel: a subject key holding the states of three
// policies moves and survives as one value: RENAME, COPY and MOVE carry
// every state, so do DUMP and RESTORE, a restart and a replica keep them,
// RL.TOP counts the key's denials, and DEL resets every limit of the
// subject.
func TestPoliciesOnOneKeyTravel(t *testing.T) {
	dir := t.TempDir()
	// A frozen clock, so that the replies' times are exact.
	const at = "1800000000000"
	s := startLimitkvIn(t, dir, "--snapshot-interval", "1h", "--enable-debug-command", "yes")
	c := dialRaw(t, s.Addr)
	mustDo(t, c, ":"+at, "DEBUG", "CLOCK", "SET", at)
	mustDo(t, c, "+OK", "RL.POLICY", "SET", "api", "SLIDE", "2", "1h")
	mustDo(t, c, "+OK", "RL.POLICY", "SET", "login", "FIXED", "1", "1h", "ALIGN", "FIRST", "BAN", "2h")
	mustDo(t, c, "+OK", "RL.POLICY", "SET", "sem", "CONCURRENCY", "1", "1h")
	use := func(key string) {
		t.Helper()
		mustDo(t, c, "[:1, :2, :1, :-1, :3600000]", "RL.CHECK", "api", key)
		mustDo(t, c, "[:1, :1, :0, :-1, :3600000]", "RL.CHECK", "login", key)
		mustDo(t, c, "[:0, :1, :0, :7200000, :3600000]", "RL.CHECK", "login", key) // banned for 2h
		mustDo(t, c, "[:1, :1, :0, :-1, :3600000]", "RL.CHECK", "sem", key, "ID", "job")
	}
	// used checks that key holds the three states as use left them.
	used := func(cl *rawConn, key string) {
		t.Helper()
		if d := decision(t, cl.do("RL.CHECK", "api", key, "PEEK")); d[0] != 1 || d[2] != 0 {
			t.Fatalf("api on %s: %v", key, d)
		}
		if d := decision(t, cl.do("RL.CHECK", "login", key, "PEEK")); d[0] != 0 || d[3] <= 3_600_000 {
			t.Fatalf("login on %s (banned): %v", key, d)
		}
		if d := decision(t, cl.do("RL.CHECK", "sem", key, "ID", "other")); d[0] != 0 {
			t.Fatalf("sem on %s: %v", key, d)
		}
	}
	use("user:1")
	mustDo(t, c, `"policies"`, "OBJECT", "ENCODING", "user:1")
	mustDo(t, c, "+OK", "RENAME", "user:1", "user:2")
	used(c, "user:2")
	mustDo(t, c, ":1", "COPY", "user:2", "user:3")
	used(c, "user:3")
	mustDo(t, c, ":1", "MOVE", "user:3", "1")
	mustDo(t, c, "+OK", "SELECT", "1")
	used(c, "user:3")
	mustDo(t, c, "+OK", "SELECT", "0")
	// DUMP and RESTORE carry the three states as one value.
	payload := c.do("DUMP", "user:2")
	if payload.Type != '$' {
		t.Fatalf("DUMP of a policies key: %s", payload)
	}
	mustDo(t, c, "+OK", "RESTORE", "user:4", "0", string(payload.Str))
	used(c, "user:4")
	if v := c.do("RL.TOP", "10").String(); !strings.Contains(v, "user:1") {
		t.Fatalf("RL.TOP does not count the subject's denials: %s", v)
	}
	mustDo(t, c, "+OK", "SAVE")
	s.Stop()

	s = startLimitkvIn(t, dir, "--snapshot-interval", "1h", "--enable-debug-command", "yes")
	c = dialRaw(t, s.Addr)
	mustDo(t, c, ":"+at, "DEBUG", "CLOCK", "SET", at)
	used(c, "user:2")
	mustDo(t, c, ":1", "DEL", "user:2")
	use("user:2") // every limit of the subject starts afresh

	// A replica holds the same states.
	r := startReplicaOf(t, s, "", "--persistence", "no")
	sc, rc := goRedis(t, s.Addr, 2), goRedis(t, r.Addr, 2)
	waitInSync(t, sc, rc)
	sameKeyspace(t, sc, rc)
}

// TestReadOnlyTwins: the *_RO twins of the rate-limit commands are reads:
// a replica answers them exactly as its master does (where the command
// itself, PEEK or not, is refused as a write), and a user allowed only
// @read may call them but not the commands.
func TestReadOnlyTwins(t *testing.T) {
	// Both clocks frozen at one time, so that the times answered agree.
	const at = 1_800_000_000_000
	m := startMaster(t, "--persistence", "no")
	mc := goRedis(t, m.Addr, 2)
	mr := dialRaw(t, m.Addr)
	mustDo(t, mr, ":"+strconv.Itoa(at), "DEBUG", "CLOCK", "SET", strconv.Itoa(at))
	mustDo(t, mr, "+OK", "RL.POLICY", "SET", "api", "SLIDE", "3", "1h")
	mustDo(t, mr, "+OK", "RL.POLICY", "SET", "jobs", "CONCURRENCY", "2", "1h")
	mr.do("RL.FIXED", "f", "5", "1h", "ALIGN", "FIRST", "COST", "2")
	mr.do("RL.SLIDE", "s", "4", "1h")
	mr.do("CL.THROTTLE", "g", "5", "1", "3600", "2")
	mr.do("RL.ACQUIRE", "sem", "3", "1h", "job-1")
	mr.do("RL.CHECK", "api", "user:1")
	mr.do("RL.CHECK", "jobs", "user:1", "ID", "j1")
	reads := [][]string{
		{"RL.FIXED_RO", "f", "5", "1h", "ALIGN", "FIRST"},
		{"RL.SLIDE_RO", "s", "4", "1h", "COST", "3"},
		{"CL.THROTTLE_RO", "g", "5", "1", "3600"},
		{"RL.ACQUIRE_RO", "sem", "3", "1h"},
		{"RL.CHECK_RO", "api", "user:1"},
		{"RL.CHECK_RO", "jobs", "user:1"},
	}
	// Answers of the master, which the twins do not change.
	want := make([]string, len(reads))
	for i, args := range reads {
		want[i] = mr.do(args...).String()
		if again := mr.do(args...).String(); again != want[i] {
			t.Fatalf("%v changed the state: %s, then %s", args, want[i], again)
		}
	}
	r := startReplicaOf(t, m, "", "--persistence", "no")
	rc := goRedis(t, r.Addr, 2)
	waitInSync(t, mc, rc)
	rr := dialRaw(t, r.Addr)
	mustDo(t, rr, ":"+strconv.Itoa(at), "DEBUG", "CLOCK", "SET", strconv.Itoa(at))
	for i, args := range reads {
		if got := rr.do(args...).String(); got != want[i] {
			t.Errorf("%v on the replica: %s, the master %s", args, got, want[i])
		}
	}
	mustDo(t, rr, "-READONLY You can't write against a read only replica.", "RL.SLIDE", "s", "4", "1h", "PEEK")

	mustDo(t, mr, "+OK", "ACL", "SETUSER", "reader", "on", ">pw", "~*", "-@all", "+@read")
	reader := dialRaw(t, m.Addr)
	mustDo(t, reader, "+OK", "AUTH", "reader", "pw")
	for i, args := range reads {
		if got := reader.do(args...).String(); got != want[i] {
			t.Errorf("%v as a @read user: %s, want %s", args, got, want[i])
		}
	}
	if v := reader.do("RL.FIXED", "f", "5", "1h", "PEEK"); v.Type != '-' || !strings.HasPrefix(string(v.Str), "NOPERM") {
		t.Fatalf("RL.FIXED as a @read user: %s", v)
	}
}
