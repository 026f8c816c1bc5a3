package tests

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A replica's full sync is all or nothing, with real processes: a master
// of 500k keys killed, or the replica killed, at ten points spread over
// the sync into a replica that holds a different dataset. After each kill,
// and after the replica restarts with no master, its keyspace is the old
// dataset or the complete new one (DEBUG DIGEST, a signature of every
// key, value and expiry), never a mix; a sync cut short leaves the old.

const fullSyncKeys = 500_000

// syncFixture holds the data directories the rounds start from: the
// master's, holding the new dataset, and the replica's, holding the old.
type syncFixture struct {
	masterDir, replicaDir string
	newDigest, oldDigest  string
	copyBytes             int64 // bytes of the master's copy, as a replica counts them
}

var (
	syncFixtureOnce sync.Once
	sharedSync      *syncFixture
)

// newSyncFixture builds the fixture once for every test that uses it (the
// rounds start from copies), in the tests' own temporary directory.
func newSyncFixture(t *testing.T) *syncFixture {
	t.Helper()
	syncFixtureOnce.Do(func() { sharedSync = buildSyncFixture(t) })
	if sharedSync == nil {
		t.Fatal("the full-sync fixture could not be built")
	}
	return sharedSync
}

func buildSyncFixture(t *testing.T) *syncFixture {
	t.Helper()
	ctx := context.Background()
	base := filepath.Dir(limitkvBin)
	f := &syncFixture{masterDir: filepath.Join(base, "sync-master"), replicaDir: filepath.Join(base, "sync-replica")}
	m := startLimitkvIn(t, f.masterDir, "--enable-debug-command", "yes")
	fill(t, m.Addr, fullSyncKeys)
	mc := goRedis(t, m.Addr, 2)
	// Rate-limit states and a hash beside the strings.
	for i := 0; i < 200; i++ {
		k := "rl:" + strconv.Itoa(i)
		for j := 0; j <= i%5; j++ {
			if err := mc.Do(ctx, "RL.FIXED", k, 3, "1h").Err(); err != nil {
				t.Fatal(err)
			}
		}
		mc.HSet(ctx, "h:"+strconv.Itoa(i), "f", i)
	}
	f.newDigest = digestOf(t, mc)
	m.Stop() // its final snapshot holds every key
	r := startLimitkvIn(t, f.replicaDir, "--enable-debug-command", "yes")
	rc := goRedis(t, r.Addr, 2)
	for i := 0; i < 3000; i++ {
		rc.Set(ctx, "old:"+strconv.Itoa(i), i, 0)
	}
	rc.Do(ctx, "RL.SLIDE", "old:rl", 5, "1h")
	f.oldDigest = digestOf(t, rc)
	r.Stop()
	if f.oldDigest == f.newDigest {
		t.Fatal("the two datasets are the same")
	}
	return f
}

// copyDir copies a data directory (a stopped server's).
func copyDir(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	err := filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		os.MkdirAll(filepath.Dir(filepath.Join(to, rel)), 0o755)
		dst, err := os.Create(filepath.Join(to, rel))
		if err != nil {
			return err
		}
		defer dst.Close()
		_, err = io.Copy(dst, src)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return to
}

// syncRound is one master and one replica (holding the old dataset)
// started on copies of the fixture's directories, the replica told to
// follow the master.
type syncRound struct {
	m, r   *server
	mc, rc *redis.Client
	rdir   string
	flags  []string
}

func (f *syncFixture) startRound(t *testing.T, replicaFlags ...string) *syncRound {
	t.Helper()
	s := &syncRound{rdir: copyDir(t, f.replicaDir), flags: append([]string{"--enable-debug-command", "yes"}, replicaFlags...)}
	s.m = startLimitkvIn(t, copyDir(t, f.masterDir), "--enable-debug-command", "yes")
	s.mc = goRedis(t, s.m.Addr, 2)
	s.r = startLimitkvIn(t, s.rdir, s.flags...)
	s.rc = goRedis(t, s.r.Addr, 2)
	host, port, _ := net.SplitHostPort(s.m.Addr)
	if err := s.rc.Do(context.Background(), "REPLICAOF", host, port).Err(); err != nil {
		t.Fatal(err)
	}
	return s
}

// infoMap reads an INFO section into a map.
func infoMap(t testing.TB, c *redis.Client, section string) map[string]string {
	t.Helper()
	s, err := c.Info(context.Background(), section).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(s, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = v
		}
	}
	return out
}

// pollUntil polls every millisecond until cond says yes (bounded): kill
// points need a finer grain than waitFor's.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 60_000; i++ {
		if cond() {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("never saw %s", what)
}

// copyRead is how much of the master's copy the replica has read, -1 once
// no sync is in progress.
func copyRead(t *testing.T, rc *redis.Client) int64 {
	in := infoMap(t, rc, "replication")
	if in["master_sync_in_progress"] != "1" {
		return -1
	}
	n, _ := strconv.ParseInt(in["master_sync_read_bytes"], 10, 64)
	return n
}

// which names the dataset the replica holds, failing on any other.
func (f *syncFixture) which(t *testing.T, c *redis.Client, when string) string {
	t.Helper()
	switch d := digestOf(t, c); d {
	case f.oldDigest:
		return "old"
	case f.newDigest:
		return "new"
	default:
		n, _ := c.DBSize(context.Background()).Result()
		t.Fatalf("%s: the replica holds a mix (%d keys, digest %s): neither the old dataset nor the new one", when, n, d)
	}
	return ""
}

var syncBytesRe = regexp.MustCompile(`sync: Finished with success" keys=\d+ bytes=(\d+)`)

// calibrate runs one whole sync and measures the copy's bytes.
func (f *syncFixture) calibrate(t *testing.T) {
	t.Helper()
	if f.copyBytes > 0 {
		return
	}
	s := f.startRound(t)
	pollUntil(t, "the first sync's end", func() bool { return syncBytesRe.MatchString(s.r.Output()) })
	f.copyBytes, _ = strconv.ParseInt(syncBytesRe.FindStringSubmatch(s.r.Output())[1], 10, 64)
	if got := f.which(t, s.rc, "after a whole sync"); got != "new" {
		t.Fatalf("after a whole sync the replica holds the %s dataset", got)
	}
	s.r.Stop()
	s.m.Stop()
}

// restartAlone restarts the replica on its directory with no master and
// names the dataset it came back with.
func (f *syncFixture) restartAlone(t *testing.T, s *syncRound) string {
	t.Helper()
	r := startLimitkvIn(t, s.rdir, "--enable-debug-command", "yes")
	defer r.Stop()
	rc := goRedis(t, r.Addr, 2)
	pollUntil(t, "the restarted replica serving", func() bool { return rc.DBSize(context.Background()).Err() == nil })
	return f.which(t, rc, "after a restart with no master")
}

func TestFullSyncAllOrNothing(t *testing.T) {
	f := newSyncFixture(t)
	f.calibrate(t)
	t.Logf("the master's copy: %d bytes", f.copyBytes)
	for _, mode := range []string{"disabled", "swapdb"} {
		t.Run(mode+"/master-killed", func(t *testing.T) {
			old := 0
			for k := 0; k < 10; k++ {
				s := f.startRound(t, "--repl-diskless-load", mode, "--snapshot-interval", "100ms")
				at := f.copyBytes * int64(2*k+1) / 20
				pollUntil(t, "the copy reach "+strconv.FormatInt(at, 10)+" bytes", func() bool {
					n := copyRead(t, s.rc)
					return n >= at || (n < 0 && infoMap(t, s.rc, "replication")["master_link_status"] == "up")
				})
				s.m.Kill()
				pollUntil(t, "the link go down", func() bool {
					in := infoMap(t, s.rc, "replication")
					return in["master_link_status"] == "down" && in["master_sync_in_progress"] == "0" &&
						infoMap(t, s.rc, "persistence")["loading"] == "0"
				})
				live := f.which(t, s.rc, "after the master's kill")
				if live == "old" {
					old++
					in := infoMap(t, s.rc, "replication")
					if in["replica_full_sync_status"] != "err" {
						t.Fatalf("kill %d: the failed sync is reported as %q", k, in["replica_full_sync_status"])
					}
				}
				time.Sleep(250 * time.Millisecond) // snapshots run meanwhile
				s.r.Stop()
				// which fails on a mix. A replica that held the old dataset
				// cannot come back with the new; one that held the new comes
				// back with it unless its final snapshot (500k keys) did not
				// finish, which a loaded machine may cause: then it says so.
				switch got := f.restartAlone(t, s); {
				case got == live:
				case live == "old":
					t.Fatalf("kill %d: the replica served the old dataset, and came back with the new one", k)
				case !strings.Contains(s.r.Output(), "final snapshot failed"):
					t.Fatalf("kill %d: the replica served the new dataset and saved it, and came back with the old one:\n%s", k, s.r.Output())
				default:
					t.Logf("kill %d: the final snapshot did not finish; the replica came back with the dataset before the sync", k)
				}
			}
			if old < 5 {
				t.Fatalf("only %d of 10 kills cut the sync short: the failure was not exercised", old)
			}
		})
		t.Run(mode+"/replica-killed", func(t *testing.T) {
			outcome := map[string]int{}
			for k := 0; k < 10; k++ {
				s := f.startRound(t, "--repl-diskless-load", mode, "--snapshot-interval", "100ms")
				want := ""
				switch {
				case k < 7: // while the copy arrives
					at := f.copyBytes * int64(2*k+1) / 14
					pollUntil(t, "the copy reach "+strconv.FormatInt(at, 10)+" bytes", func() bool { return copyRead(t, s.rc) >= at })
					want = "old"
				case k == 7: // while it loads (disk) or just before the swap
					pollUntil(t, "the load", func() bool {
						return infoMap(t, s.rc, "persistence")["loading"] == "1" && copyRead(t, s.rc) >= f.copyBytes-64 ||
							copyRead(t, s.rc) < 0
					})
				case k == 8: // as soon as the sync is over, before a snapshot
					pollUntil(t, "the link up", func() bool { return infoMap(t, s.rc, "replication")["master_link_status"] == "up" })
				default: // once a snapshot has saved the new dataset
					pollUntil(t, "the link up", func() bool { return infoMap(t, s.rc, "replication")["master_link_status"] == "up" })
					// The snapshot that writes the whole new dataset: one
					// under way at the swap held it off and captured the old
					// dataset, if it had anything to write (an idle one is not
					// counted).
					saved, _ := strconv.Atoi(infoMap(t, s.rc, "persistence")["snapshot_count"])
					pollUntil(t, "the new dataset saved", func() bool {
						p := infoMap(t, s.rc, "persistence")
						n, _ := strconv.Atoi(p["snapshot_count"])
						keys, _ := strconv.Atoi(p["snapshot_last_keys"])
						return n >= saved+2 || n > saved && keys >= fullSyncKeys
					})
					want = "new"
				}
				s.r.Kill()
				got := f.restartAlone(t, s)
				if want != "" && got != want {
					t.Fatalf("kill %d: the replica came back with the %s dataset, want the %s one", k, got, want)
				}
				outcome[got]++
				s.m.Stop()
			}
			t.Logf("came back with: %v", outcome)
		})
	}
}

// While a sync is under way, what a replica answers is its old dataset,
// LOADING (where Redis answers it), or, once the sync ended, the new one:
// a transaction reading an old key and a new key together never finds
// both missing (the keyspace seen flushed and not yet loaded) nor both
// present. Readers hammer it from 16 connections through the whole sync.
func TestFullSyncReadsDuringSync(t *testing.T) {
	f := newSyncFixture(t)
	for _, mode := range []string{"disabled", "swapdb", "on-empty-db"} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			s := f.startRound(t, "--repl-diskless-load", mode)
			if mode == "on-empty-db" {
				// An empty keyspace is loaded in place: restart the round
				// with an empty replica.
				s.r.Stop()
				s = &syncRound{m: s.m, mc: s.mc, rdir: t.TempDir(), flags: []string{"--enable-debug-command", "yes", "--repl-diskless-load", mode}}
				s.r = startLimitkvIn(t, s.rdir, s.flags...)
				s.rc = goRedis(t, s.r.Addr, 2)
				host, port, _ := net.SplitHostPort(s.m.Addr)
				s.rc.Do(ctx, "REPLICAOF", host, port)
			}
			type seen struct{ old, new, loading, other int }
			results := make(chan seen, 16)
			stop := make(chan struct{})
			for w := 0; w < 16; w++ {
				go func(w int) {
					c := goRedis(t, s.r.Addr, 2)
					var got seen
					defer func() { results <- got }()
					oldKey, newKey := "old:"+strconv.Itoa(w*100), "fill:"+strconv.Itoa(w*1000)
					for {
						select {
						case <-stop:
							return
						default:
						}
						cmds, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
							p.Get(ctx, oldKey)
							p.Get(ctx, newKey)
							return nil
						})
						switch {
						case err != nil && (strings.Contains(err.Error(), "LOADING") || strings.HasPrefix(err.Error(), "EXECABORT")):
							// Refused whole: a GET queued while loading
							// aborts the transaction, as in Redis.
							got.loading++
						case err != nil && err != redis.Nil:
							t.Errorf("reader %d: %v", w, err)
							return
						default:
							o, n := cmds[0].(*redis.StringCmd).Err() == nil, cmds[1].(*redis.StringCmd).Err() == nil
							switch {
							case o && !n:
								got.old++
							case n && !o:
								got.new++
							case mode == "on-empty-db" && !o && !n && got.new == 0:
								got.old++ // the old dataset is the empty one
							default:
								got.other++
								t.Errorf("reader %d read %s=%v and %s=%v in one transaction", w, oldKey, o, newKey, n)
								return
							}
						}
					}
				}(w)
			}
			pollUntil(t, "the sync's end", func() bool { return infoMap(t, s.rc, "replication")["master_link_status"] == "up" })
			time.Sleep(50 * time.Millisecond)
			close(stop)
			var total seen
			for w := 0; w < 16; w++ {
				r := <-results
				total.old += r.old
				total.new += r.new
				total.loading += r.loading
			}
			t.Logf("transactions: old %d, LOADING %d, new %d", total.old, total.loading, total.new)
			if total.new == 0 {
				t.Fatal("no reader saw the new dataset")
			}
			// Redis answers LOADING while it loads in place (disk's load,
			// on-empty-db's transfer) and while swapdb loads a copy of
			// another history.
			if total.loading == 0 {
				t.Fatal("no reader was told LOADING")
			}
		})
	}
}

// With replica-serve-stale-data no, reads answer MASTERDOWN while a full
// sync is under way and after it failed; INFO still answers.
func TestFullSyncServeStaleNo(t *testing.T) {
	f := newSyncFixture(t)
	ctx := context.Background()
	const masterDown = "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."
	// The kill lands a few round trips after the copy starts; on a loaded
	// machine the whole copy may arrive first, and then the round proves
	// nothing and is run again (bounded).
	for round := 0; round < 5; round++ {
		s := f.startRound(t, "--replica-serve-stale-data", "no")
		pollUntil(t, "the transfer", func() bool { return copyRead(t, s.rc) > 0 })
		during := s.rc.Get(ctx, "old:1").Err()
		s.m.Kill()
		pollUntil(t, "the link go down", func() bool { return infoMap(t, s.rc, "replication")["master_sync_in_progress"] == "0" })
		// Link down, the replica refuses reads whether or not the copy
		// was whole.
		if err := s.rc.Get(ctx, "old:1").Err(); err == nil || err.Error() != masterDown {
			t.Fatalf("GET after the kill: %v", err)
		}
		s.rc.ConfigSet(ctx, "replica-serve-stale-data", "yes")
		if f.which(t, s.rc, "after the kill") == "new" {
			// Only a whole copy gives the new dataset.
			t.Logf("round %d: the whole copy arrived before the kill", round)
			s.r.Stop()
			continue
		}
		if during == nil || during.Error() != masterDown {
			t.Fatalf("GET during the sync: %v", during)
		}
		return
	}
	t.Fatal("in 5 rounds the whole copy arrived before the kill: the failed sync was not exercised")
}

// The INFO replication of a replica whose full sync failed, against
// redis-server's in the same failure: a master holding 500k keys killed
// while it sends them to a replica holding another dataset.
func TestFullSyncFailureInfoMatchesRedis(t *testing.T) {
	ctx := context.Background()
	redisServerPath(t)
	failed := func(m, r *server, populate func(*redis.Client)) map[string]string {
		mc, rc := goRedis(t, m.Addr, 2), goRedis(t, r.Addr, 2)
		populate(mc)
		for i := 0; i < 100; i++ {
			rc.Set(ctx, "other:"+strconv.Itoa(i), i, 0)
		}
		host, port, _ := net.SplitHostPort(m.Addr)
		if err := rc.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
			t.Fatal(err)
		}
		pollUntil(t, "the transfer", func() bool { return copyRead(t, rc) > 0 })
		during := infoMap(t, rc, "replication")
		for _, k := range []string{"master_sync_total_bytes", "master_sync_read_bytes", "master_sync_left_bytes", "master_sync_perc", "master_sync_last_io_seconds_ago"} {
			if _, ok := during[k]; !ok {
				t.Errorf("%s: no %s during the transfer", m.Args[0], k)
			}
		}
		m.Kill()
		pollUntil(t, "the link go down", func() bool { return infoMap(t, rc, "replication")["master_sync_in_progress"] == "0" })
		if n, _ := rc.DBSize(ctx).Result(); n != 100 {
			t.Fatalf("the replica holds %d keys after the failed sync, want its own 100", n)
		}
		in := infoMap(t, rc, "replication")
		p := infoMap(t, rc, "persistence")
		in["loading"], in["async_loading"] = p["loading"], p["async_loading"]
		return in
	}
	rm := startRedis(t, "--repl-diskless-sync-delay", "0", "--enable-debug-command", "yes")
	rr := startRedis(t, "--repl-diskless-load", "disabled")
	want := failed(rm, rr, func(c *redis.Client) { c.Do(ctx, "DEBUG", "POPULATE", fullSyncKeys) })
	km := startLimitkv(t, "--enable-debug-command", "yes")
	kr := startLimitkv(t)
	got := failed(km, kr, func(*redis.Client) { fill(t, km.Addr, fullSyncKeys) })
	// Names and values that must agree; master_port, master_replid and
	// the last I/O differ by nature.
	for _, k := range []string{"role", "master_host", "master_link_status", "master_last_io_seconds_ago",
		"master_sync_in_progress", "slave_read_repl_offset", "slave_repl_offset", "master_link_down_since_seconds",
		"slave_priority", "slave_read_only", "replica_announced", "connected_slaves", "master_failover_state",
		"master_replid2", "master_repl_offset", "second_repl_offset", "repl_backlog_active", "repl_backlog_size",
		"repl_backlog_first_byte_offset", "repl_backlog_histlen", "loading", "async_loading"} {
		if got[k] != want[k] {
			t.Errorf("%s: limitkv %q, redis-server %q", k, got[k], want[k])
		}
	}
	for k := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("INFO replication lacks %s (redis-server: %q)", k, want[k])
		}
	}
}
