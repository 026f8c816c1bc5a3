package tests

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitkv/limitkv/resp"
)

// Persistence, black box: restarts, crashes at random moments, refusals.

// TestRestartKeepsEverything: a clean shutdown loses nothing, every type
// and TTL included, in several databases. The TTL is compared as its
// absolute time (PEXPIRETIME): TTL's seconds tick on during a slow restart.
func TestRestartKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	s := startLimitkvIn(t, dir, "--snapshot-interval", "1h")
	c := dialRaw(t, s.Addr)
	script := [][]string{
		{"SET", "str", "hello", "EX", "1000"},
		{"SET", "n", "41"}, {"INCR", "n"},
		{"RPUSH", "list", "a", "b", "c"},
		{"HSET", "hash", "f", "v", "g", "w"},
		{"ZADD", "zset", "1.5", "a", "-inf", "b"},
		{"SETBIT", "bits", "3649", "1"},
		{"SELECT", "7"}, {"SET", "in7", "v"},
		{"SELECT", "0"},
		{"RL.FIXED", "fixed", "2", "1h"}, {"RL.FIXED", "fixed", "2", "1h"},
		{"RL.SLIDE", "slide", "3", "1h"},
		{"RL.LOGIN", "login", "5", "1h"},
		{"CL.THROTTLE", "gcra", "5", "1", "60", "3"},
		{"SET", "gone", "v"}, {"DEL", "gone"},
	}
	for _, cmd := range script {
		if v := c.do(cmd...); v.Type == '-' {
			t.Fatalf("%v: %s", cmd, v)
		}
	}
	probe := [][]string{
		{"GET", "str"}, {"PEXPIRETIME", "str"}, {"GET", "n"}, {"LRANGE", "list", "0", "-1"},
		{"HGETALL", "hash"}, {"ZRANGE", "zset", "0", "-1", "WITHSCORES"}, {"BITCOUNT", "bits"},
		{"STRLEN", "bits"}, {"EXISTS", "gone"}, {"TYPE", "fixed"}, {"OBJECT", "ENCODING", "slide"},
		{"LLEN", "login"}, {"DBSIZE"},
	}
	var before []string
	for _, p := range probe {
		before = append(before, c.do(p...).String())
	}
	c.do("SELECT", "7")
	in7 := c.do("GET", "in7").String()
	s.Stop()
	if !strings.Contains(s.Output(), "limitkv stopped") {
		t.Fatalf("unclean stop:\n%s", s.Output())
	}

	s2 := startLimitkvIn(t, dir)
	if !strings.Contains(s2.Output(), "snapshot loaded") {
		t.Fatalf("log:\n%s", s2.Output())
	}
	c2 := dialRaw(t, s2.Addr)
	for i, p := range probe {
		if got := c2.do(p...).String(); got != before[i] {
			t.Errorf("%v after restart: %s, before: %s", p, got, before[i])
		}
	}
	c2.do("SELECT", "7")
	if got := c2.do("GET", "in7").String(); got != in7 {
		t.Errorf("db 7: %s", got)
	}
	c2.do("SELECT", "0")
	// The exhausted limit is still exhausted.
	if d := decision(t, c2.do("RL.FIXED", "fixed", "2", "1h")); d[0] != 0 {
		t.Fatalf("exhausted limit allowed after restart: %v", d)
	}
}

// TestSaveAndInfo: SAVE, BGSAVE, LASTSAVE and INFO persistence.
func TestSaveAndInfo(t *testing.T) {
	s := startLimitkv(t, "--snapshot-interval", "1h")
	c := dialRaw(t, s.Addr)
	c.do("SET", "k", "v")
	info := c.do("INFO", "persistence").String()
	if !strings.Contains(info, "rdb_changes_since_last_save:1") {
		t.Fatalf("INFO before SAVE: %s", info)
	}
	if v := c.do("SAVE"); v.String() != "+OK" {
		t.Fatal(v)
	}
	info = c.do("INFO", "persistence").String()
	for _, want := range []string{"rdb_changes_since_last_save:0", "rdb_last_bgsave_status:ok", "snapshot_last_keys:1", "snapshot_errors:0"} {
		if !strings.Contains(info, want) {
			t.Fatalf("INFO after SAVE lacks %s: %s", want, info)
		}
	}
	if v := c.do("LASTSAVE"); v.Int < time.Now().Unix()-5 {
		t.Fatalf("LASTSAVE %s", v)
	}
	if v := c.do("BGSAVE"); v.String() != "+Background saving started" {
		t.Fatal(v)
	}
	if v := c.do("BGSAVE", "NOW"); v.String() != "-ERR syntax error" {
		t.Fatal(v)
	}
	// Without persistence, SAVE says so.
	m := startLimitkv(t, "--persistence", "no")
	mc := dialRaw(t, m.Addr)
	if v := mc.do("SAVE"); !strings.Contains(v.String(), "persistence is off") {
		t.Fatal(v)
	}
	if entries, _ := os.ReadDir(m.Dir); len(entries) != 0 {
		t.Fatalf("--persistence no wrote %d files", len(entries))
	}
}

// TestCrashRecovery writes from many connections and kills the server with
// SIGKILL at random moments, during snapshots too (one every 20 ms). After
// each restart the data directory opens and every write acknowledged
// before the last SAVE that completed is there, with its TTL.
func TestCrashRecovery(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	const conns, rounds = 16, 4
	type keyState struct{ saved, sent int64 }
	all := map[string]*keyState{}
	check := func(c *rawConn) {
		t.Helper()
		for k, st := range all {
			v := c.do("GET", k)
			n, _ := strconv.ParseInt(string(v.Str), 10, 64)
			if v.Null || n < st.saved || n > st.sent {
				t.Fatalf("%s = %s after a crash; saved %d, last sent %d", k, v, st.saved, st.sent)
			}
			if ttl := c.do("TTL", k).Int; ttl <= 0 || ttl > 3600 {
				t.Fatalf("%s lost its TTL: %d", k, ttl)
			}
		}
	}
	for round := 0; round < rounds; round++ {
		s := startLimitkvIn(t, dir, "--snapshot-interval", "20ms")
		ctl := dialRaw(t, s.Addr)
		check(ctl)
		var acked, sent [conns]atomic.Int64
		var wg sync.WaitGroup
		for i := 0; i < conns; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				c := dialRaw(t, s.Addr)
				key := []byte(fmt.Sprintf("ctr:%d:%d", round, i))
				for n := int64(1); n < 1_000_000; n++ {
					sent[i].Store(n)
					c.send(resp.AppendCommand(nil, []byte("SET"), key, []byte(strconv.FormatInt(n, 10)), []byte("EX"), []byte("3600")))
					v, err := resp.ReadValue(c.r)
					if err != nil || v.String() != "+OK" {
						return // the server was killed
					}
					acked[i].Store(n)
				}
			}(i)
		}
		time.Sleep(time.Duration(50+rng.IntN(100)) * time.Millisecond)
		var atSave [conns]int64
		for i := range atSave {
			atSave[i] = acked[i].Load()
		}
		if v := ctl.do("SAVE"); v.String() != "+OK" {
			t.Fatalf("SAVE: %s", v)
		}
		time.Sleep(time.Duration(rng.IntN(120)) * time.Millisecond)
		s.Kill()
		wg.Wait()
		for i := 0; i < conns; i++ {
			all[fmt.Sprintf("ctr:%d:%d", round, i)] = &keyState{saved: atSave[i], sent: sent[i].Load()}
		}
	}
	s := startLimitkvIn(t, dir)
	check(dialRaw(t, s.Addr))
}

// TestRefusesDamagedAndForeignDirs: the server refuses to start on a
// directory that is not limitkv's, and leaves it as it was.
func TestRefusesDamagedAndForeignDirs(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "important.txt"), []byte("mine"), 0o644)
	port := freePort(t)
	out, err := runBinary(t, "--port", strconv.Itoa(port), "--dir", dir)
	if err == nil || !strings.Contains(out, "not a limitkv data directory") {
		t.Fatalf("started on a foreign directory: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "important.txt")); string(b) != "mine" {
		t.Fatal("foreign file touched")
	}
}

// TestChangesSinceLastSave: rdb_changes_since_last_save counts changes,
// not keys, as Redis's does (SET a 1, SET a 2, SET a 3 is 3), with
// persistence off too; a save resets it.
func TestChangesSinceLastSave(t *testing.T) {
	for _, persistence := range []string{"yes", "no"} {
		s := startLimitkv(t, "--persistence", persistence, "--snapshot-interval", "1h")
		c := dialRaw(t, s.Addr)
		for _, v := range []string{"1", "2", "3"} {
			c.do("SET", "a", v)
		}
		c.do("GET", "a")
		if got := info(c, "rdb_changes_since_last_save"); got != "3" {
			t.Fatalf("persistence %s: rdb_changes_since_last_save %q after SET a 1, 2, 3, want 3", persistence, got)
		}
		c.do("DEL", "a", "nosuch")
		if got := info(c, "rdb_changes_since_last_save"); got != "4" {
			t.Fatalf("persistence %s: rdb_changes_since_last_save %q after DEL, want 4", persistence, got)
		}
		if persistence == "no" {
			continue
		}
		if v := c.do("SAVE"); v.String() != "+OK" {
			t.Fatal(v)
		}
		if got := info(c, "rdb_changes_since_last_save"); got != "0" {
			t.Fatalf("rdb_changes_since_last_save %q after SAVE, want 0", got)
		}
	}
}

// TestIdleServerDoesNotSave: the periodic snapshots of a server where
// nothing changes write nothing and are not saves: LASTSAVE,
// snapshot_count and limitkv_snapshots_total stay, however many
// intervals pass. An explicit SAVE saves all the same, as in Redis.
func TestIdleServerDoesNotSave(t *testing.T) {
	mport := freePort(t)
	s := startLimitkv(t, "--snapshot-interval", "10ms", "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", mport))
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", mport)
	c := dialRaw(t, s.Addr)
	c.do("SET", "k", "v")
	pollUntil(t, "the write saved", func() bool { return info(c, "rdb_changes_since_last_save") == "0" })
	count, last := info(c, "snapshot_count"), c.do("LASTSAVE").Int
	total := sample(t, scrape(t, url), "limitkv_snapshots_total")
	// LASTSAVE counts seconds: wait until a save now would show.
	pollUntil(t, "the next second", func() bool { return time.Now().Unix() > last+1 })
	if got := info(c, "snapshot_count"); got != count {
		t.Errorf("snapshot_count went from %s to %s on an idle server", count, got)
	}
	if got := c.do("LASTSAVE").Int; got != last {
		t.Errorf("LASTSAVE went from %d to %d on an idle server", last, got)
	}
	if got := sample(t, scrape(t, url), "limitkv_snapshots_total"); got != total {
		t.Errorf("limitkv_snapshots_total went from %v to %v on an idle server", total, got)
	}
	if v := c.do("SAVE"); v.String() != "+OK" {
		t.Fatal(v)
	}
	if got := c.do("LASTSAVE").Int; got <= last {
		t.Errorf("LASTSAVE %d after SAVE, the one before %d: SAVE with nothing changed saves all the same", got, last)
	}
}
