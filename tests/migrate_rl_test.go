package tests

import (
	"net"
	"strconv"
	"testing"
)

// TestDumpRateLimitOnRedis: a rate-limit payload DUMPed by limitkv, given
// to redis-server's RESTORE, gets exactly the reply Redis gives any
// payload of a version above its own, and creates no key; MIGRATE of a
// rate-limit key to redis-server fails with the target's error and leaves
// the key at the source, decisions unchanged.
func TestDumpRateLimitOnRedis(t *testing.T) {
	rs, kv := startRedis(t), startLimitkv(t)
	r, k := dialRaw(t, rs.Addr), dialRaw(t, kv.Addr)
	for _, setup := range [][]string{
		{"RL.FIXED", "rl", "5", "1h", "ALIGN", "FIRST"},
		{"CL.THROTTLE", "rl", "3", "10", "60"},
		{"RL.ACQUIRE", "rl", "3", "10s", "a"},
	} {
		k.do("DEL", "rl")
		k.do(setup...)
		p := k.do("DUMP", "rl")
		if p.Type != '$' || p.Null {
			t.Fatalf("%v: DUMP: %s", setup, p.String())
		}
		for _, args := range [][]string{{"RESTORE", "x", "0", string(p.Str)}, {"RESTORE", "x", "0", string(p.Str), "REPLACE", "ABSTTL"}} {
			if got := r.do(args...).String(); got != "-ERR DUMP payload version or checksum are wrong" {
				t.Fatalf("%v: redis-server RESTORE answered %s", setup[0], got)
			}
		}
		if got := r.do("EXISTS", "x").String(); got != ":0" {
			t.Fatalf("%v: redis-server holds the key after refusing it: EXISTS %s", setup[0], got)
		}
	}

	k.do("DEL", "rl")
	for range 3 {
		k.do("RL.FIXED", "rl", "5", "1h", "ALIGN", "FIRST")
	}
	_, port, _ := net.SplitHostPort(rs.Addr)
	got := k.do("MIGRATE", "127.0.0.1", port, "", "0", "5000", "KEYS", "rl").String()
	if got != "-ERR Target instance replied with error: ERR DUMP payload version or checksum are wrong" {
		t.Fatalf("MIGRATE to redis-server: %s", got)
	}
	if v := k.do("RL.FIXED_RO", "rl", "5", "1h", "ALIGN", "FIRST"); len(v.Elems) != 5 || v.Elems[2].Int != 1 {
		t.Fatalf("the key at the source after the failed MIGRATE: %s", v.String())
	}
	if got := r.do("DBSIZE").String(); got != ":0" {
		t.Fatalf("redis-server DBSIZE after the failed MIGRATE: %s", got)
	}
}

// TestMigrateRateLimitKeys: MIGRATE ... KEYS moves rate-limit keys of
// every kind between two limitkv servers, their TTL with them, and the
// decisions continue at the target where they stopped at the source.
func TestMigrateRateLimitKeys(t *testing.T) {
	src, dst := startLimitkv(t), startLimitkv(t)
	s, d := dialRaw(t, src.Addr), dialRaw(t, dst.Addr)
	fixed := []string{"5", "1h", "ALIGN", "FIRST"}
	for range 3 {
		s.do(append([]string{"RL.FIXED", "f"}, fixed...)...)
	}
	s.do("RL.SLIDE", "s", "4", "1h", "COST", "3")
	s.do("RL.ACQUIRE", "c", "2", "1h", "a")
	s.do("RL.LOGIN", "l", "1", "1h", "BAN", "2h")
	s.do("RL.LOGIN", "l", "1", "1h", "BAN", "2h")
	s.do("RL.POLICY", "SET", "api", "FIXED", "2", "1h", "ALIGN", "FIRST")
	s.do("RL.CHECK", "api", "p")
	d.do("RL.POLICY", "SET", "api", "FIXED", "2", "1h", "ALIGN", "FIRST")
	d.do("SET", "f", "occupied")

	_, port, _ := net.SplitHostPort(dst.Addr)
	migrate := []string{"MIGRATE", "127.0.0.1", port, "", "0", "5000", "REPLACE", "KEYS", "f", "s", "c", "l", "p"}
	if got := s.do(migrate...).String(); got != "+OK" {
		t.Fatalf("MIGRATE: %s", got)
	}
	if got := s.do("EXISTS", "f", "s", "c", "l", "p").String(); got != ":0" {
		t.Fatalf("EXISTS at the source after MIGRATE: %s", got)
	}
	for _, key := range []string{"f", "s", "c", "l", "p"} {
		ttl := d.do("PTTL", key).Int
		if ttl < 3_000_000 {
			t.Errorf("PTTL %s at the target: %d, want the source's hour or more", key, ttl)
		}
	}
	allowed := func(args ...string) int64 {
		t.Helper()
		v := d.do(args...)
		if v.Type == '-' || len(v.Elems) == 0 {
			t.Fatalf("%v at the target: %s", args, v.String())
		}
		return v.Elems[0].Int
	}
	for i, want := range []int64{1, 1, 0} {
		if got := allowed(append([]string{"RL.FIXED", "f"}, fixed...)...); got != want {
			t.Fatalf("RL.FIXED f, request %d at the target: allowed %d, want %d", 4+i, got, want)
		}
	}
	if allowed("RL.SLIDE", "s", "4", "1h") != 1 || allowed("RL.SLIDE", "s", "4", "1h") != 0 {
		t.Fatal("RL.SLIDE s at the target does not continue the source's log")
	}
	if allowed("RL.ACQUIRE", "c", "2", "1h", "b") != 1 || allowed("RL.ACQUIRE", "c", "2", "1h", "x") != 0 {
		t.Fatal("RL.ACQUIRE c at the target does not see the source's lease")
	}
	if v := d.do("RL.LOGIN", "l", "1", "1h"); len(v.Elems) < 4 || v.Elems[0].Int != 0 || v.Elems[3].Int < 3_600_000 {
		t.Fatalf("RL.LOGIN l at the target, still banned for 2h: %s", v.String())
	}
	if allowed("RL.CHECK", "api", "p") != 1 || allowed("RL.CHECK", "api", "p") != 0 {
		t.Fatal("RL.CHECK api p at the target does not continue the source's count")
	}

	// COPY leaves the source as it was; a second MIGRATE without REPLACE
	// meets the keys already there.
	s.do("RL.FIXED", "g", "5", "1h")
	if got := s.do("MIGRATE", "127.0.0.1", port, "g", "0", "5000", "COPY").String(); got != "+OK" {
		t.Fatalf("MIGRATE COPY: %s", got)
	}
	if got := s.do("MIGRATE", "127.0.0.1", port, "g", "0", "5000").String(); got != "-ERR Target instance replied with error: BUSYKEY Target key name already exists." {
		t.Fatalf("MIGRATE onto an existing key: %s", got)
	}
	if got := s.do("RL.FIXED_RO", "g", "5", "1h").Elems[2].Int; got != 3 {
		t.Fatalf("the source key after COPY and a refused MIGRATE: remaining %s", strconv.FormatInt(got, 10))
	}
}
