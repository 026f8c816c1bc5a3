package persist

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/ratelimit"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

const t0 = int64(1_800_000_000_000)

func newEngine(clock *engine.ManualClock) *engine.Engine {
	return engine.New(engine.Config{Databases: 4, Clock: clock})
}

func open(t testing.TB, eng *engine.Engine, fs vfs.FS) *Store {
	t.Helper()
	st, err := Open(eng, Options{Dir: "/data", FS: fs, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// dump renders every key of every database with its encoding, for
// comparing two engines.
func dump(t testing.TB, eng *engine.Engine) []string {
	t.Helper()
	var out []string
	now := eng.Now()
	for db := 0; db < eng.Databases(); db++ {
		for i := 0; i < engine.Shards; i++ {
			sh := eng.Shard(i)
			sh.Lock()
			sh.Keys(db, 0, math.MaxInt, now, func(e engine.Entry) {
				v, err := engine.AppendValue(nil, sh, e)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, fmt.Sprintf("%d %q %x", db, e.Key(), v))
			})
			sh.Unlock()
		}
	}
	sort.Strings(out)
	return out
}

func with(eng *engine.Engine, key string, fn func(s *engine.Shard, k []byte)) {
	k := []byte(key)
	s := eng.ShardFor(k)
	s.Lock()
	fn(s, k)
	s.Unlock()
}

// fill writes one key of every type, in several databases, with and
// without TTLs, binary and empty names, and rate-limit states.
func fill(eng *engine.Engine) {
	now := eng.Now()
	with(eng, "str", func(s *engine.Shard, k []byte) { s.SetString(0, k, []byte("hello"), 0) })
	with(eng, "int", func(s *engine.Shard, k []byte) { s.SetInt(0, k, -42, now+60_000) })
	with(eng, "", func(s *engine.Shard, k []byte) { s.SetString(1, k, []byte{}, 0) })
	with(eng, "bin\x00\xff", func(s *engine.Shard, k []byte) { s.SetString(2, k, []byte("\r\n\x00"), 0) })
	with(eng, "big", func(s *engine.Shard, k []byte) { s.SetString(0, k, bytes.Repeat([]byte("x"), 5000), 0) })
	with(eng, "list", func(s *engine.Shard, k []byte) {
		l := engine.NewList()
		for i := 0; i < 300; i++ {
			l.PushTail([]byte(strconv.Itoa(i)))
		}
		s.SetObject(0, k, engine.KindList, l, now+3_600_000)
	})
	with(eng, "hash", func(s *engine.Shard, k []byte) {
		h := engine.NewHash()
		lim := engine.HashLimits{Entries: 512, Value: 64}
		for i := 0; i < 20; i++ {
			h.Set([]byte("f"+strconv.Itoa(i)), []byte("v"+strconv.Itoa(i)), lim)
		}
		s.SetObject(3, k, engine.KindHash, h, 0)
	})
	with(eng, "zset", func(s *engine.Shard, k []byte) {
		z := engine.NewZSet()
		lim := engine.ZSetLimits{Entries: 128, Value: 64}
		for i := 0; i < 200; i++ {
			z.Add([]byte(strconv.Itoa(i)), float64(i)/3, 0, lim)
		}
		z.Add([]byte("inf"), math.Inf(1), 0, lim)
		z.Add([]byte("negzero"), math.Copysign(0, -1), 0, lim)
		s.SetObject(0, k, engine.KindZSet, z, 0)
	})
	// Sets in their three forms; a hashtable of integers stays one.
	with(eng, "intset", func(s *engine.Shard, k []byte) {
		st := engine.NewSet()
		for i := 0; i < 100; i++ {
			st.Add([]byte(strconv.Itoa(i*70001-3_000_000)), engine.DefaultLimits.Set)
		}
		s.SetObject(0, k, engine.KindSet, st, now+60_000)
	})
	with(eng, "smallset", func(s *engine.Shard, k []byte) {
		st := engine.NewSet()
		for _, m := range []string{"7", "", "a\x00b", "member:1"} {
			st.Add([]byte(m), engine.DefaultLimits.Set)
		}
		st.Remove([]byte("member:1"))
		s.SetObject(2, k, engine.KindSet, st, 0)
	})
	with(eng, "bigset", func(s *engine.Shard, k []byte) {
		st := engine.NewSet()
		for i := 0; i < 2000; i++ {
			st.Add([]byte("member:"+strconv.Itoa(i)), engine.DefaultLimits.Set)
		}
		s.SetObject(0, k, engine.KindSet, st, 0)
	})
	with(eng, "htints", func(s *engine.Shard, k []byte) {
		st := engine.NewSet()
		st.Add([]byte("x"), engine.DefaultLimits.Set)
		st.Add([]byte("1"), engine.DefaultLimits.Set)
		st.Remove([]byte("x"))
		s.SetObject(0, k, engine.KindSet, st, 0)
	})
	with(eng, "fixed", func(s *engine.Shard, k []byte) {
		var sc ratelimit.FixedScratch
		_, st, exp, _ := ratelimit.DecideFixed(nil, []ratelimit.Rule{{Limit: 5, Window: 60_000}}, now, ratelimit.FixedOptions{Cost: 5}, &sc, nil)
		s.SetLimitState(0, k, now, st, exp)
	})
	with(eng, "slide", func(s *engine.Shard, k []byte) {
		var st []byte
		for i := int64(0); i < 10; i++ {
			var exp int64
			_, st, exp, _ = ratelimit.DecideSlide(st, []ratelimit.Rule{{Limit: 100, Window: 60_000}}, now+i*7, ratelimit.SlideOptions{Cost: 1}, nil)
			s.SetLimitState(0, k, now, st, exp)
		}
	})
	with(eng, "gcra", func(s *engine.Shard, k []byte) {
		_, st, exp, _, _ := ratelimit.DecideGCRA(nil, ratelimit.GCRA{MaxBurst: 5, Count: 1, Period: 1, Quantity: 3}, now, nil)
		s.SetLimitState(0, k, now, st, exp)
	})
}

// sameDump fails the test at the first difference between two dumps.
func sameDump(t testing.TB, got, want []string) {
	t.Helper()
	for i := 0; i < len(got) || i < len(want); i++ {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Fatalf("key %d differs (%d keys, want %d):\n got %.300s\nwant %.300s", i, len(got), len(want), g, w)
		}
	}
}

func restart(t testing.TB, fs vfs.FS, clock *engine.ManualClock) (*engine.Engine, *Store) {
	t.Helper()
	eng := newEngine(clock)
	st := open(t, eng, fs)
	if _, err := st.Load(clock.Now()); err != nil {
		t.Fatal(err)
	}
	return eng, st
}

func TestRoundTripEveryType(t *testing.T) {
	fs := vfs.NewMem()
	clock := engine.NewManualClock(t0)
	eng := newEngine(clock)
	st := open(t, eng, fs)
	if _, err := st.Load(t0); err != nil {
		t.Fatal(err)
	}
	fill(eng)
	if err := st.Snapshot(); err != nil {
		t.Fatal(err)
	}
	want := dump(t, eng)
	st.Close()
	eng2, _ := restart(t, fs, clock)
	sameDump(t, dump(t, eng2), want)
	for _, c := range []struct{ key, enc string }{{"intset", "intset"}, {"smallset", "hashtable"}, {"bigset", "hashtable"}, {"htints", "hashtable"}} {
		db := 0
		if c.key == "smallset" {
			db = 2
		}
		with(eng2, c.key, func(s *engine.Shard, k []byte) {
			e, ok := s.Raw(db, k)
			if !ok || s.Encoding(e) != c.enc {
				t.Errorf("%s after a restart: found %v, encoding %s, want %s", c.key, ok, s.Encoding(e), c.enc)
			}
		})
	}
	// An exhausted rate limit is still exhausted after the restart.
	with(eng2, "fixed", func(s *engine.Shard, k []byte) {
		old, _, err := s.LimitState(0, k, t0, ratelimit.KindFixed)
		if err != nil {
			t.Fatal(err)
		}
		var sc ratelimit.FixedScratch
		d, _, _, _ := ratelimit.DecideFixed(old, []ratelimit.Rule{{Limit: 5, Window: 60_000}}, t0+1, ratelimit.FixedOptions{Cost: 1}, &sc, nil)
		if d.Allowed {
			t.Fatal("an exhausted limit was allowed again after a restart")
		}
	})
}

// TestIncrementalChanges: writes, deletes, expiries, FLUSHDB and SWAPDB
// between snapshots all reach the disk.
func TestIncrementalChanges(t *testing.T) {
	fs := vfs.NewMem()
	clock := engine.NewManualClock(t0)
	eng, st := restart(t, fs, clock)
	fill(eng)
	for i := 0; i < 1000; i++ {
		with(eng, "k"+strconv.Itoa(i), func(s *engine.Shard, k []byte) { s.SetInt(i%4, k, int64(i), 0) })
	}
	if err := st.Snapshot(); err != nil {
		t.Fatal(err)
	}
	with(eng, "str", func(s *engine.Shard, k []byte) { s.SetString(0, k, []byte("changed"), 0) })
	with(eng, "k5", func(s *engine.Shard, k []byte) { s.Delete(1, k, clock.Now()) })
	with(eng, "short", func(s *engine.Shard, k []byte) { s.SetString(0, k, []byte("v"), t0+10) })
	eng.FlushDB(3, false)
	with(eng, "afterflush", func(s *engine.Shard, k []byte) { s.SetString(3, k, []byte("v"), 0) })
	eng.SwapDB(1, 2, false)
	if err := st.Snapshot(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(100) // "short" expires, and the sweeper removes it
	eng.ActiveExpire(clock.Now(), 1e9)
	if err := st.Snapshot(); err != nil {
		t.Fatal(err)
	}
	want := dump(t, eng)
	st.Close()
	eng2, _ := restart(t, fs, clock)
	sameDump(t, dump(t, eng2), want)
}

// TestExpiredWhileDown: keys whose time passed while the server was down
// are not loaded, and are gone from disk afterwards.
func TestExpiredWhileDown(t *testing.T) {
	fs := vfs.NewMem()
	clock := engine.NewManualClock(t0)
	eng, st := restart(t, fs, clock)
	with(eng, "soon", func(s *engine.Shard, k []byte) { s.SetString(0, k, []byte("v"), t0+1000) })
	with(eng, "later", func(s *engine.Shard, k []byte) { s.SetString(0, k, []byte("v"), t0+100_000) })
	if err := st.Snapshot(); err != nil {
		t.Fatal(err)
	}
	st.Close()
	clock.Advance(5000)
	eng2, st2 := restart(t, fs, clock)
	if eng2.DBSize(0, false) != 1 {
		t.Fatalf("loaded %d keys, want only the one still alive", eng2.DBSize(0, false))
	}
	if n := st2.Stats().Loaded; n != 1 {
		t.Fatalf("Loaded = %d", n)
	}
	st2.Close()
	clock.Set(t0) // even with the clock back, the expired key is gone from disk
	eng3, _ := restart(t, fs, clock)
	if eng3.DBSize(0, false) != 1 {
		t.Fatal("the expired key was not deleted from disk")
	}
}

// TestRefusesForeignNewerAndDamaged: a directory that is not limitkv's, of
// a newer format, or damaged is refused with a message, never emptied.
func TestRefusesForeignNewerAndDamaged(t *testing.T) {
	t.Run("foreign files", func(t *testing.T) {
		fs := vfs.NewMem()
		fs.MkdirAll("/data", 0o755)
		f, _ := fs.Create("/data/notes.txt", vfs.WriteCategoryUnspecified)
		f.Write([]byte("mine"))
		f.Close()
		_, err := Open(newEngine(engine.NewManualClock(t0)), Options{Dir: "/data", FS: fs, Log: quiet})
		if !errors.Is(err, ErrForeign) {
			t.Fatalf("err = %v", err)
		}
		if names, _ := fs.List("/data"); len(names) != 1 {
			t.Fatalf("directory touched: %v", names)
		}
	})
	t.Run("foreign pebble", func(t *testing.T) {
		fs := vfs.NewMem()
		db, err := pebble.Open("/data", &pebble.Options{FS: fs, Logger: localLogger{quiet, newLogThrottle(time.Minute)}})
		if err != nil {
			t.Fatal(err)
		}
		db.Set([]byte("someone"), []byte("else"), pebble.Sync)
		db.Close()
		_, err = Open(newEngine(engine.NewManualClock(t0)), Options{Dir: "/data", FS: fs, Log: quiet})
		if !errors.Is(err, ErrForeign) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("newer format", func(t *testing.T) {
		fs := vfs.NewMem()
		db, _ := pebble.Open("/data", &pebble.Options{FS: fs, Logger: localLogger{quiet, newLogThrottle(time.Minute)}})
		db.Set(metaKey, append(append([]byte(magic), 0), 99), pebble.Sync)
		db.Close()
		_, err := Open(newEngine(engine.NewManualClock(t0)), Options{Dir: "/data", FS: fs, Log: quiet})
		if !errors.Is(err, ErrNewerFormat) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("format 1 is read and marked 2", func(t *testing.T) {
		fs := vfs.NewMem()
		db, _ := pebble.Open("/data", &pebble.Options{FS: fs, Logger: localLogger{quiet, newLogThrottle(time.Minute)}})
		db.Set(metaKey, append(append([]byte(magic), 0), 1), pebble.Sync)
		db.Set(dataKey(nil, 0, []byte("k")), []byte{'s', 0, 'v'}, pebble.Sync)
		db.Close()
		eng := newEngine(engine.NewManualClock(t0))
		st, err := Open(eng, Options{Dir: "/data", FS: fs, Log: quiet})
		if err != nil {
			t.Fatal(err)
		}
		if n, err := st.Load(t0); err != nil || n != 1 {
			t.Fatalf("loaded %d keys, err %v", n, err)
		}
		st.Close()
		db, _ = pebble.Open("/data", &pebble.Options{FS: fs, Logger: localLogger{quiet, newLogThrottle(time.Minute)}})
		v, closer, err := db.Get(metaKey)
		if err != nil {
			t.Fatal(err)
		}
		version, _ := parseMeta(v)
		closer.Close()
		db.Close()
		if version != formatVersion {
			t.Fatalf("format marker %d after opening, want %d", version, formatVersion)
		}
	})
	t.Run("damaged value", func(t *testing.T) {
		fs := vfs.NewMem()
		db, _ := pebble.Open("/data", &pebble.Options{FS: fs, Logger: localLogger{quiet, newLogThrottle(time.Minute)}})
		db.Set(metaKey, metaValue(), pebble.Sync)
		// A list that claims 200 elements and holds none.
		db.Set(dataKey(nil, 0, []byte("k")), []byte{'l', 0, 200}, pebble.Sync)
		db.Close()
		eng := newEngine(engine.NewManualClock(t0))
		st, err := Open(eng, Options{Dir: "/data", FS: fs, Log: quiet})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if _, err := st.Load(t0); !errors.Is(err, ErrDamaged) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("too few databases", func(t *testing.T) {
		fs := vfs.NewMem()
		clock := engine.NewManualClock(t0)
		eng := engine.New(engine.Config{Databases: 16, Clock: clock})
		st := open(t, eng, fs)
		st.Load(t0)
		with(eng, "k", func(s *engine.Shard, k []byte) { s.SetString(9, k, []byte("v"), 0) })
		st.Snapshot()
		st.Close()
		st2 := open(t, newEngine(clock), fs)
		if _, err := st2.Load(t0); err == nil {
			t.Fatal("keys of database 9 were dropped silently")
		}
	})
}

// Snapshots larger than one capture chunk per shard, with sets and
// deletions staged between a shard's lock and the batch, round-trip.
func TestManyChangesInChunks(t *testing.T) {
	fs := vfs.NewMem()
	clock := engine.NewManualClock(t0)
	eng, st := restart(t, fs, clock)
	const n = 100 * captureChunk // over a chunk per shard on average
	for i := 0; i < n; i++ {
		with(eng, "k"+strconv.Itoa(i), func(s *engine.Shard, k []byte) { s.SetInt(0, k, int64(i), 0) })
	}
	if err := st.Snapshot(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += 3 {
		with(eng, "k"+strconv.Itoa(i), func(s *engine.Shard, k []byte) { s.Delete(0, k, clock.Now()) })
		with(eng, "k"+strconv.Itoa(i+1), func(s *engine.Shard, k []byte) {
			s.SetString(0, k, []byte(strings.Repeat("v", i%200)), t0+1_000_000)
		})
	}
	if err := st.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if got := st.Stats().LastKeys; got < 2*n/3 {
		t.Fatalf("the second snapshot wrote %d keys, want about %d", got, 2*n/3)
	}
	want := dump(t, eng)
	if len(want) < n/2 {
		t.Fatalf("dump holds %d keys", len(want))
	}
	st.Close()
	eng2, _ := restart(t, fs, clock)
	sameDump(t, dump(t, eng2), want)
}

// TestSealedStoreWritesNothing: after Seal (SHUTDOWN NOSAVE, perhaps
// stopping a script halfway), no snapshot writes anything more.
func TestSealedStoreWritesNothing(t *testing.T) {
	fs := vfs.NewMem()
	clock := engine.NewManualClock(t0)
	eng, st := restart(t, fs, clock)
	with(eng, "saved", func(s *engine.Shard, k []byte) { s.SetString(0, k, []byte("1"), 0) })
	if err := st.Snapshot(); err != nil {
		t.Fatal(err)
	}
	want := dump(t, eng)
	with(eng, "half", func(s *engine.Shard, k []byte) { s.SetString(0, k, []byte("v"), 0) })
	st.Seal()
	if err := st.Snapshot(); !errors.Is(err, ErrSealed) {
		t.Fatalf("Snapshot after Seal: %v, want ErrSealed", err)
	}
	if st.Stats().Errors != 0 {
		t.Fatal("a sealed snapshot counted as a failure")
	}
	st.Close()
	eng2, _ := restart(t, fs, clock)
	sameDump(t, dump(t, eng2), want)
}

// A snapshot records the replication position the Position hook gives,
// holding it (the hook's release) until every change is captured. While
// the hook says the keyspace is being rebuilt (a replica's full sync
// replacing it in place), a snapshot writes nothing, counts as neither a
// snapshot nor a failure, and leaves every change to the first snapshot
// after: the directory keeps the old dataset and its position until a
// batch writes the new one whole.
func TestReplicationPosition(t *testing.T) {
	fs := vfs.NewMem()
	clock := engine.NewManualClock(t0)
	id := strings.Repeat("ab", 20)
	var off int64 = 12345
	held, rebuilding := false, false
	eng := newEngine(clock)
	st, err := Open(eng, Options{Dir: "/data", FS: fs, Log: quiet, Position: func() (string, int64, func(), bool, bool) {
		if rebuilding {
			return "", 0, nil, true, true
		}
		held = true
		return id, off, func() { held = false }, true, false
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Load(clock.Now()); err != nil {
		t.Fatal(err)
	}
	with(eng, "old", func(s *engine.Shard, k []byte) { s.SetString(0, k, []byte("v"), 0) })
	if err := st.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if held {
		t.Fatal("the position was not released")
	}
	saved := st.Stats()

	// A full sync flushes and half loads the keyspace.
	rebuilding = true
	eng.FlushDB(-1, false)
	with(eng, "new1", func(s *engine.Shard, k []byte) { s.SetString(0, k, []byte("v"), 0) })
	if err := st.Snapshot(); !errors.Is(err, ErrRebuilding) {
		t.Fatalf("snapshot while rebuilding: %v, want ErrRebuilding", err)
	}
	if got := st.Stats(); got.Snapshots != saved.Snapshots || got.Errors != saved.Errors || !got.LastSuccess.Equal(saved.LastSuccess) {
		t.Fatalf("a skipped snapshot counted: %+v, before %+v", got, saved)
	}
	// The sync ends: a new position, and the whole new dataset.
	with(eng, "new2", func(s *engine.Shard, k []byte) { s.SetString(0, k, []byte("v"), 0) })
	rebuilding = false
	id, off = strings.Repeat("cd", 20), 999
	want := dump(t, eng)
	if err := st.Snapshot(); err != nil {
		t.Fatal(err)
	}
	st.Close()
	eng2 := newEngine(clock)
	st = open(t, eng2, fs)
	defer st.Close()
	st.Load(clock.Now())
	if gid, goff := st.Position(); gid != id || goff != off {
		t.Fatalf("position %q %d, want %q %d", gid, goff, id, off)
	}
	sameDump(t, dump(t, eng2), want)
}

// TestDirectoryLock: a store holds its directory from Open to Close; a
// second one is refused meanwhile, and the lock file it leaves behind
// does not make the directory look foreign.
func TestDirectoryLock(t *testing.T) {
	fs := vfs.NewMem()
	clock := engine.NewManualClock(t0)
	first, err := Open(newEngine(clock), Options{Dir: "/data", FS: fs, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(newEngine(clock), Options{Dir: "/data", FS: fs, Log: quiet}); !errors.Is(err, ErrLocked) {
		t.Fatalf("a second store on a held directory: %v", err)
	}
	first.Close()
	first.Close() // twice: harmless
	if names, _ := fs.List("/data"); len(names) != 1 || names[0] != lockName {
		t.Fatalf("directory after a store that never loaded: %v", names)
	}
	eng, st := restart(t, fs, clock)
	with(eng, "k", func(s *engine.Shard, k []byte) { s.SetString(0, k, []byte("v"), 0) })
	if err := st.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(newEngine(clock), Options{Dir: "/data", FS: fs, Log: quiet}); !errors.Is(err, ErrLocked) {
		t.Fatalf("a second store on a held directory: %v", err)
	}
	st.Close()
	eng2, _ := restart(t, fs, clock)
	if got, want := dump(t, eng2), dump(t, eng); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("after a restart: %v, want %v", got, want)
	}
}

// The function libraries the Functions hook gives are written when their
// generation changes, even with no key changed, read back by Functions
// after a restart, and deleted when the hook gives none.
func TestFunctionLibraries(t *testing.T) {
	fs := vfs.NewMem()
	clock := engine.NewManualClock(t0)
	libs, gen := []byte("payload-1"), uint64(1)
	reopen := func() *Store {
		st, err := Open(newEngine(clock), Options{Dir: "/data", FS: fs, Log: quiet,
			Functions: func() ([]byte, uint64) { return libs, gen }})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Load(clock.Now()); err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := reopen()
	if got := st.Functions(); got != nil {
		t.Fatalf("functions %q in a new directory", got)
	}
	if err := st.Snapshot(); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st = reopen()
	if got := string(st.Functions()); got != "payload-1" {
		t.Fatalf("functions %q after a restart, want payload-1", got)
	}
	// Unchanged generation: nothing is written, whatever the hook says.
	st.fnGen = gen
	libs = []byte("not written")
	if err := st.Snapshot(); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st = reopen()
	if got := string(st.Functions()); got != "payload-1" {
		t.Fatalf("functions %q, want payload-1 (same generation)", got)
	}
	libs, gen = nil, 2
	if err := st.Snapshot(); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st = reopen()
	defer st.Close()
	if got := st.Functions(); got != nil {
		t.Fatalf("functions %q after they were all deleted", got)
	}
}

// TestNothingDirtyIsNotASave: a periodic snapshot that finds nothing to
// write is not a save: LASTSAVE's time, the count and the bytes of the
// last one stay. SAVE is one all the same, as in Redis. Either way the
// changes on disk are known: what the engine counted before a capture
// that succeeded is saved.
func TestNothingDirtyIsNotASave(t *testing.T) {
	fs := vfs.NewMem()
	clock := engine.NewManualClock(t0)
	eng, st := restart(t, fs, clock)
	loaded := st.Stats()
	if loaded.SavedChanges != eng.Changes(false) {
		t.Fatalf("after the load: %d changes saved, the engine counts %d", loaded.SavedChanges, eng.Changes(false))
	}
	periodic := func() {
		t.Helper()
		if err := st.snapshot(context.Background(), true); err != nil {
			t.Fatal(err)
		}
	}
	periodic()
	if got := st.Stats(); got.Snapshots != 0 || !got.LastSuccess.Equal(loaded.LastSuccess) {
		t.Fatalf("an idle periodic snapshot counted: %d snapshots, last success %v (the load's %v)", got.Snapshots, got.LastSuccess, loaded.LastSuccess)
	}
	for _, v := range []string{"1", "2", "3"} {
		with(eng, "a", func(s *engine.Shard, k []byte) { s.SetString(0, k, []byte(v), 0) })
	}
	if n := eng.Changes(false) - st.Stats().SavedChanges; n != 3 {
		t.Fatalf("%d changes since the last save, want 3", n)
	}
	periodic()
	saved := st.Stats()
	if saved.Snapshots != 1 || saved.LastKeys != 1 || saved.SavedChanges != eng.Changes(false) || saved.LastSuccess.Before(loaded.LastSuccess) {
		t.Fatalf("after a periodic snapshot of one key: %+v, the engine counts %d changes", saved, eng.Changes(false))
	}
	for range 3 {
		periodic()
	}
	if got := st.Stats(); got.Snapshots != 1 || got.LastKeys != 1 || !got.LastSuccess.Equal(saved.LastSuccess) {
		t.Fatalf("idle periodic snapshots counted: %+v, after the last save %+v", got, saved)
	}
	if err := st.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if got := st.Stats(); got.Snapshots != 2 || got.LastKeys != 0 || got.LastSuccess.Before(saved.LastSuccess) {
		t.Fatalf("SAVE with nothing dirty: %+v, want a second save of 0 keys", got)
	}
}

// TestSyncSharesOneSnapshot: Sync returns once the changes made before
// it are on disk; callers that come together, while a snapshot runs,
// share the next one, and every change made before any of them returned
// is then found after a restart.
func TestSyncSharesOneSnapshot(t *testing.T) {
	fs := vfs.NewMem()
	clock := engine.NewManualClock(t0)
	eng, st := restart(t, fs, clock)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := range 50 {
				k := "w" + strconv.Itoa(w) + ":" + strconv.Itoa(i)
				with(eng, k, func(s *engine.Shard, k []byte) { s.SetInt(0, k, int64(i), 0) })
				if err := st.Sync(context.Background()); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := st.Stats().Snapshots; n >= 400 {
		t.Errorf("%d snapshots for 400 Syncs by 8 callers: none was shared", n)
	}
	want := dump(t, eng)
	st.Close()
	eng2, _ := restart(t, fs, clock)
	sameDump(t, dump(t, eng2), want)
}
