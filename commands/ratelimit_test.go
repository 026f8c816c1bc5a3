package commands

import (
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/resp"
)

// BenchmarkRLCommands runs the rate-limit handlers directly, as dispatch
// does: the spec's Prepare (parsing), then under the key's lock the
// decision on an existing key and the reply, without the network. A
// decision on an existing key should allocate nothing.
func BenchmarkRLCommands(b *testing.B) {
	eng := engine.New(engine.Config{Databases: 1})
	srv := New(eng, NewConfig(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	w := resp.NewWriter(2)
	c := &Ctx{Srv: srv, Client: &Client{srv: srv}, W: w, Now: transcriptEpoch}
	run := func(args [][]byte) {
		c.Args = args
		c.Spec = srv.findSpec(args)
		key := args[1]
		if c.Spec.Name == "rl.check" {
			key = args[2] // RL.CHECK policy key
		}
		if prepare := srv.cmd(c.Spec).prepare; prepare != nil {
			prepare(c)
		}
		s := c.Shard(key)
		s.Lock()
		srv.cmd(c.Spec).run(c)
		s.Unlock()
		if b := w.Bytes(); len(b) > 0 && b[0] == '-' {
			panic(string(b))
		}
		w.Reset()
	}
	argv := func(s ...string) [][]byte {
		out := make([][]byte, len(s))
		for i := range s {
			out[i] = []byte(s[i])
		}
		return out
	}
	bench := func(name string, args [][]byte, fill int, step int64) {
		b.Run(name, func(b *testing.B) {
			for i := 0; i < fill; i++ {
				run(args)
				c.Now += step
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				run(args)
				c.Now += step
			}
		})
	}
	bench("fixed", argv("RL.FIXED", "f", "1000000000000", "1m"), 1, 0)
	bench("fixed-3rules-tz", argv("RL.FIXED", "ft", "1000000000000", "1m", "1000000000000", "1h",
		"1000000000000", "1d", "TZ", "Asia/Shanghai"), 1, 0)
	// A full window of 100 entries 600 ms apart: the oldest leaves as a
	// new one comes.
	bench("slide100", argv("RL.SLIDE", "s", "100", "1m"), 100, 600)
	bench("throttle", argv("CL.THROTTLE", "t", "1000000000", "1000000000", "1"), 1, 0)
	bench("login", argv("RL.LOGIN", "l", "5", "1m", "KEEP", "5"), 5, 12_001)
	// Named policies: the same decisions through RL.CHECK (a lookup of
	// the policy by name, no lock, no allocation).
	run(argv("RL.POLICY", "SET", "pf", "FIXED", "1000000000000", "1m"))
	run(argv("RL.POLICY", "SET", "ps", "SLIDE", "100", "1m"))
	run(argv("RL.POLICY", "SET", "pg", "GCRA", "1000000000", "1000000000", "1"))
	bench("check-fixed", argv("RL.CHECK", "pf", "cf"), 1, 0)
	bench("check-slide100", argv("RL.CHECK", "ps", "cs"), 100, 600)
	bench("check-gcra", argv("RL.CHECK", "pg", "cg"), 1, 0)
	run(argv("RL.POLICY", "SET", "pc", "CONCURRENCY", "100", "30s"))
	for i := 0; i < 100; i++ {
		run(argv("RL.CHECK", "pc", "csem", "ID", "req:"+strconv.Itoa(100_000+i)))
	}
	bench("check-concurrency-renew100", argv("RL.CHECK", "pc", "csem", "ID", "req:100042"), 0, 0)
	// BAN and SHADOW: "open" is BAN given with no ban in force; "banned"
	// is every request denied by a ban (the first denial started it, the
	// clock stands still); shadow answers allowed for what the limit
	// denies.
	bench("fixed-ban-open", argv("RL.FIXED", "fbo", "1000000000000", "1m", "BAN", "1h"), 1, 0)
	bench("fixed-ban-banned", argv("RL.FIXED", "fbb", "1", "1m", "BAN", "1h"), 2, 0)
	bench("fixed-shadow-denied", argv("RL.FIXED", "fsd", "1", "1m", "SHADOW"), 2, 0)
	bench("slide100-ban-open", argv("RL.SLIDE", "sbo", "100", "1m", "BAN", "1h"), 100, 600)
	bench("slide-ban-banned", argv("RL.SLIDE", "sbb", "1", "1m", "BAN", "1h"), 2, 0)
	bench("slide100-shadow", argv("RL.SLIDE", "ss", "100", "1m", "SHADOW"), 100, 600)
	bench("login-ban-banned", argv("RL.LOGIN", "lbb", "1", "1m", "BAN", "1h"), 2, 0)
	// A semaphore of 100 held by 100 ids: a heartbeat, a denial, and a
	// release with the acquire that takes the slot back (two commands).
	var ids [][]byte
	for i := 0; i < 100; i++ {
		id := []byte("req:" + strconv.Itoa(100_000+i))
		ids = append(ids, id)
		run([][]byte{[]byte("RL.ACQUIRE"), []byte("sem"), []byte("100"), []byte("30s"), id})
	}
	bench("acquire-renew100", argv("RL.ACQUIRE", "sem", "100", "30s", "req:100042"), 0, 0)
	bench("acquire-denied100", argv("RL.ACQUIRE", "sem", "100", "30s", "req:other"), 0, 0)
	b.Run("release+acquire100", func(b *testing.B) {
		rel := argv("RL.RELEASE", "sem", "")
		acq := argv("RL.ACQUIRE", "sem", "100", "30s", "")
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			rel[2], acq[4] = ids[i%100], ids[i%100]
			run(rel)
			run(acq)
		}
	})
	// Denials, which RL.TOP counts.
	bench("fixed-denied", argv("RL.FIXED", "fd", "1", "1h"), 1, 0)
	bench("throttle-denied", argv("CL.THROTTLE", "td", "0", "1", "3600"), 1, 0)
}

// TestInfoRateLimit: INFO's ratelimit section counts each RL command's
// allowed and denied decisions on this server; PEEKs and CL.THROTTLE with
// quantity 0 take nothing and are not counted, nor are refused arguments
// or RL.RELEASE; a SHADOW request the limit refuses is shadow-denied.
func TestInfoRateLimit(t *testing.T) {
	h := newHarness(t)
	for _, cmd := range [][]string{
		{"RL.FIXED", "f", "2", "1m"},
		{"RL.FIXED", "f", "2", "1m", "PEEK"},
		{"RL.FIXED", "f", "2", "1m"},
		{"RL.FIXED", "f", "2", "1m"},
		{"RL.FIXED", "f", "0", "1m"},
		{"RL.SLIDE", "s", "1", "1m"},
		{"RL.SLIDE", "s", "1", "1m", "PENALIZE"},
		{"RL.SLIDE", "s", "1", "1m", "PEEK"},
		{"RL.LOGIN", "l", "1", "1m"},
		{"RL.LOGIN", "l", "1", "1m"},
		{"RL.LOGIN", "l", "1", "1m"},
		{"CL.THROTTLE", "t", "0", "1", "60"},
		{"CL.THROTTLE", "t", "0", "1", "60", "0"},
		{"CL.THROTTLE", "t", "0", "1", "60"},
		{"CL.THROTTLE", "t", "0", "0", "60"},
		{"RL.ACQUIRE", "a", "1", "1m", "x"},
		{"RL.ACQUIRE", "a", "1", "1m", "x"},
		{"RL.ACQUIRE", "a", "1", "1m", "y"},
		{"RL.ACQUIRE", "a", "1", "1m", "y", "SHADOW"},
		{"RL.ACQUIRE", "a", "0", "1m", "y"},
		{"RL.RELEASE", "a", "x"},
		{"RL.RELEASE", "a", "x"},
	} {
		h.do(cmd...)
	}
	want := "# Ratelimit\r\n" +
		"rl_fixed_allowed:2\r\nrl_fixed_denied:1\r\nrl_fixed_shadow_denied:0\r\n" +
		"rl_slide_allowed:1\r\nrl_slide_denied:1\r\nrl_slide_shadow_denied:0\r\n" +
		"rl_login_allowed:1\r\nrl_login_denied:2\r\n" +
		"cl_throttle_allowed:1\r\ncl_throttle_denied:1\r\n" +
		"rl_acquire_allowed:2\r\nrl_acquire_denied:1\r\nrl_acquire_shadow_denied:1\r\n" +
		"rl_check_allowed:0\r\nrl_check_denied:0\r\nrl_check_shadow_denied:0\r\n"
	if got := string(h.do("INFO", "ratelimit").Str); got != want {
		t.Fatalf("INFO ratelimit:\n%q\nwant\n%q", got, want)
	}
}

// TestRLParsedBeforeLock: RL.FIXED, RL.SLIDE and RL.CHECK read their
// arguments before dispatch locks the key's shard, so the first use of a
// TZ loads its zone (time.LoadLocation) while no lock is held: when
// dispatch is about to lock, the request holds the loaded zone, or the
// refusal of a bad one. Inside a transaction, where the locks are held,
// the same reading runs first and the replies are the same.
func TestRLParsedBeforeLock(t *testing.T) {
	h := newHarness(t)
	type seen struct {
		cmd, zone, msg string
	}
	at := make(chan seen, 16)
	h.srv.beforeLock = func(c *Ctx) {
		if h.srv.cmd(c.Spec).prepare == nil {
			return
		}
		r := &c.Client.rl.req
		s := seen{cmd: c.Spec.Name, msg: r.msg}
		switch z := r.args.Zone; {
		case c.Spec.Name == "rl.check" && r.check.p != nil && r.check.p.Zone != nil:
			s.zone = r.check.p.Zone.Name
		case strings.HasPrefix(c.Spec.Name, "rl.fixed") && z != nil:
			s.zone = z.Name
		}
		at <- s
	}
	expect := func(want seen) {
		t.Helper()
		if got := <-at; got != want {
			t.Fatalf("before the lock: %+v, want %+v", got, want)
		}
	}
	if v := h.do("RL.FIXED", "k", "5", "1d", "TZ", "Pacific/Chatham"); v.String() != "[:1, :5, :4, :-1, :43300000]" {
		t.Fatalf("RL.FIXED: %s", v)
	}
	expect(seen{cmd: "rl.fixed", zone: "Pacific/Chatham"})
	const badTZ = "ERR invalid TZ 'Mars/Olympus_Mons': expected an IANA time zone such as Asia/Shanghai or an offset such as +08:00"
	if v := h.do("RL.FIXED_RO", "k", "5", "1d", "TZ", "Mars/Olympus_Mons"); v.String() != "-"+badTZ {
		t.Fatalf("RL.FIXED_RO: %s", v)
	}
	expect(seen{cmd: "rl.fixed_ro", msg: badTZ})
	h.do("RL.SLIDE", "s", "5", "1m", "COST", "6")
	expect(seen{cmd: "rl.slide", msg: "ERR COST 6 exceeds the limit 5 of rule '5 1m': the request could never be allowed"})
	h.do("RL.POLICY", "SET", "daily", "FIXED", "5", "1d", "TZ", "Asia/Kathmandu")
	h.do("RL.CHECK", "daily", "u")
	expect(seen{cmd: "rl.check", zone: "Asia/Kathmandu"})
	h.do("RL.CHECK", "nosuch", "u")
	expect(seen{cmd: "rl.check", msg: "ERR no such policy 'nosuch'"})

	// Inside EXEC dispatch takes no lock per command: only EXEC is seen.
	h.do("MULTI")
	for _, args := range [][]string{
		{"RL.FIXED", "k", "5", "1d", "TZ", "Pacific/Chatham"},
		{"RL.FIXED", "k", "5", "1d", "TZ", "Mars/Olympus_Mons"},
		{"RL.CHECK", "daily", "u"},
	} {
		if v := h.do(args...); v.String() != "+QUEUED" {
			t.Fatalf("%v: %s", args, v)
		}
	}
	v := h.do("EXEC")
	if got, want := v.String(), "[[:1, :5, :3, :-1, :43300000], -"+badTZ+", [:1, :5, :3, :-1, :72100000]]"; got != want {
		t.Fatalf("EXEC: %s, want %s", got, want)
	}
	select {
	case s := <-at:
		t.Fatalf("a command locked inside EXEC: %+v", s)
	default:
	}
}

// TestRLArgsReused: the rules kept from a client's last request are used
// only for the same bytes to the same command, and never after a request
// whose parse failed overwrote them.
func TestRLArgsReused(t *testing.T) {
	h := newHarness(t)
	steps := []struct {
		args []string
		want string
	}{
		{[]string{"RL.FIXED", "a", "2", "1h"}, "[:1, :2, :1, :-1, :"},
		{[]string{"RL.FIXED", "a", "2", "1h"}, "[:1, :2, :0, :-1, :"},
		{[]string{"RL.FIXED", "a", "2", "1h"}, "[:0, :2, :0, :"},
		// One byte more, then one byte fewer: other rules each time.
		{[]string{"RL.FIXED", "a", "20", "1h"}, "[:1, :20, :17, :-1, :"},
		{[]string{"RL.FIXED", "a", "2", "1h"}, "[:0, :2, :0, :"},
		// The same bytes to RL.SLIDE are read for RL.SLIDE.
		{[]string{"RL.SLIDE", "s", "2", "1h"}, "[:1, :2, :1, :-1, :"},
		{[]string{"RL.SLIDE", "s", "2", "1h", "PENALIZE"}, "[:1, :2, :0, :-1, :"},
		// A failed parse writes its first rule over the kept ones.
		{[]string{"RL.FIXED", "b", "2", "1h"}, "[:1, :2, :1, :-1, :"},
		{[]string{"RL.FIXED", "b", "7", "1h", "COST", "9"}, "-ERR COST 9 exceeds the limit 7"},
		{[]string{"RL.FIXED", "b", "2", "1h"}, "[:1, :2, :0, :-1, :"},
		// Argument boundaries count, not only the bytes.
		{[]string{"RL.FIXED", "c", "21", "h"}, "-ERR invalid window"},
		{[]string{"RL.FIXED", "c", "2", "1h"}, "[:1, :2, :1, :-1, :"},
		{[]string{"RL.FIXED", "c", "2", "1h", "PEEK"}, "[:1, :2, :0, :-1, :"},
	}
	for i, st := range steps {
		if got := h.do(st.args...).String(); !strings.HasPrefix(got, st.want) {
			t.Fatalf("step %d %v: %s, want %s...", i, st.args, got, st.want)
		}
	}
}
