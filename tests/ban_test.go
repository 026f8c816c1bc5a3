package tests

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/limitkv/limitkv/resp"
)

// BAN through the real server: atomic under many connections, kept by a
// restart and by a replica (promoted, it denies until the same end).

const banT0 = 1_800_000_000_000 // a whole minute: windows start here

// TestBanAtomicity: 128 connections hammer one key with BAN at once, the
// clock frozen: exactly limit requests are admitted, the first denial bans
// the key, and it stays denied until the ban's end to the millisecond,
// although the rule's own window is over long before.
func TestBanAtomicity(t *testing.T) {
	const conns, each, limit = 128, 8, 300
	s, ctl := frozenServer(t, banT0)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"RL.FIXED", []string{"RL.FIXED", "b-fixed", strconv.Itoa(limit), "1s", "BAN", "10m"}},
		{"RL.SLIDE", []string{"RL.SLIDE", "b-slide", strconv.Itoa(limit), "1s", "BAN", "10m"}},
		{"RL.SLIDE PENALIZE", []string{"RL.SLIDE", "b-pen", strconv.Itoa(limit), "1s", "BAN", "10m", "PENALIZE"}},
		{"RL.LOGIN", []string{"RL.LOGIN", "b-login", strconv.Itoa(limit), "1s", "BAN", "10m"}},
		{"RL.FIXED SHADOW", []string{"RL.FIXED", "b-shadow", strconv.Itoa(limit), "1s", "BAN", "10m", "SHADOW"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctl.do("DEBUG", "CLOCK", "SET", strconv.FormatInt(banT0, 10))
			var admitted, retryBan atomic.Int64
			hammer(t, s.Addr, sameBatches(conns, each, tc.args), each, func(v resp.Value) {
				d := decision(t, v)
				if d[3] == -1 {
					admitted.Add(1)
				} else if d[3] == 600_000 {
					retryBan.Add(1)
				}
			})
			if got := admitted.Load(); got != limit {
				t.Fatalf("%d of %d requests admitted, want exactly %d", got, conns*each, limit)
			}
			if got := retryBan.Load(); got != conns*each-limit {
				t.Fatalf("%d denials said retry in 10m, want all %d", got, conns*each-limit)
			}
			// The rule's window is over; the ban is not, until its end.
			shadow := tc.name == "RL.FIXED SHADOW"
			advance(t, ctl, 1000)
			if d := decision(t, ctl.do(tc.args...)); d[3] != 599_000 || (d[0] == 1) != shadow {
				t.Fatalf("1 s later: %v, want denied until the ban's end", d)
			}
			advance(t, ctl, 598_999)
			if d := decision(t, ctl.do(tc.args...)); d[3] != 1 || (d[0] == 1) != shadow {
				t.Fatalf("1 ms before the ban's end: %v", d)
			}
			advance(t, ctl, 1)
			if d := decision(t, ctl.do(tc.args...)); d[0] != 1 || d[3] != -1 {
				t.Fatalf("at the ban's end: %v, want allowed", d)
			}
		})
	}
}

// banKeys starts a ban on an RL.FIXED, an RL.SLIDE and an RL.LOGIN key at
// banT0, each banned until banT0+1h.
var banKeys = [][]string{
	{"RL.FIXED", "ban-fixed", "1", "1m", "BAN", "1h"},
	{"RL.SLIDE", "ban-slide", "1", "1m", "BAN", "1h"},
	{"RL.LOGIN", "ban-login", "1", "1m", "BAN", "1h"},
}

func startBans(t *testing.T, c *rawConn) {
	t.Helper()
	for _, args := range banKeys {
		c.do(args...)
		if d := decision(t, c.do(args...)); d[0] != 0 || d[3] != 3_600_000 {
			t.Fatalf("%v: %v, want a ban of 1h", args, d)
		}
	}
}

// checkBans: at banT0+30m (the rules long satisfied) every key is still
// denied until banT0+1h, with or without the BAN option; at banT0+1h it is
// allowed.
func checkBans(t *testing.T, c *rawConn, what string) {
	t.Helper()
	c.do("DEBUG", "CLOCK", "SET", strconv.FormatInt(banT0+1_800_000, 10))
	for _, args := range banKeys {
		if d := decision(t, c.do(args[:4]...)); d[0] != 0 || d[3] != 1_800_000 {
			t.Fatalf("%s: %v at +30m: %v, want denied for 30m more", what, args[:4], d)
		}
	}
	if v := c.do("LRANGE", "ban-login", "0", "-1"); len(v.Elems) != 1 || string(v.Elems[0].Str) != strconv.Itoa(banT0) {
		t.Fatalf("%s: LRANGE ban-login = %s, want the one login", what, v)
	}
	c.do("DEBUG", "CLOCK", "SET", strconv.FormatInt(banT0+3_600_000, 10))
	for _, args := range banKeys {
		if d := decision(t, c.do(args...)); d[0] != 1 {
			t.Fatalf("%s: %v at the ban's end: %v, want allowed", what, args, d)
		}
	}
}

// TestBanSurvivesRestart: a restarted server denies until the same end.
func TestBanSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	s := startLimitkvIn(t, dir, "--enable-debug-command", "yes", "--snapshot-interval", "1h")
	c := dialRaw(t, s.Addr)
	c.do("DEBUG", "CLOCK", "SET", strconv.Itoa(banT0))
	startBans(t, c)
	s.Stop()
	s2 := startLimitkvIn(t, dir, "--enable-debug-command", "yes")
	checkBans(t, dialRaw(t, s2.Addr), "after a restart")
}

// TestBanReplicated: a replica holds the bans its master started; promoted,
// it denies until the same end.
func TestBanReplicated(t *testing.T) {
	ctx := context.Background()
	m := startMaster(t, "--persistence", "no")
	mraw := dialRaw(t, m.Addr)
	mraw.do("DEBUG", "CLOCK", "SET", strconv.Itoa(banT0))
	startBans(t, mraw)
	r := startReplicaOf(t, m, "", "--persistence", "no")
	mc, rc := goRedis(t, m.Addr, 2), goRedis(t, r.Addr, 2)
	waitInSync(t, mc, rc)
	sameKeyspace(t, mc, rc)
	// A ban started while the replica is connected reaches it too.
	mraw.do("RL.FIXED", "ban-late", "1", "1m", "BAN", "1h")
	mraw.do("RL.FIXED", "ban-late", "1", "1m", "BAN", "1h")
	waitInSync(t, mc, rc)
	sameKeyspace(t, mc, rc)
	if err := rc.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	rraw := dialRaw(t, r.Addr)
	checkBans(t, rraw, "on the promoted replica")
	rraw.do("DEBUG", "CLOCK", "SET", strconv.Itoa(banT0+3_599_999))
	if d := decision(t, rraw.do("RL.FIXED", "ban-late", "1", "1m")); d[0] != 0 || d[3] != 1 {
		t.Fatalf("ban-late 1 ms before its end on the promoted replica: %v", d)
	}
}
