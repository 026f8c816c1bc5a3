package persist

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/limitkv/limitkv/engine"
)

// The fault-injection tests run the real worker protocol: the test binary
// re-executes itself as the snapshot worker (TestMain), with Pebble's
// errorfs between Pebble and the disk. A control file, read by the worker
// every few milliseconds, says which writes fail and with which error.

const workerEnv = "LIMITKV_TEST_SNAPSHOT_WORKER" // its value: the control file

func TestMain(m *testing.M) {
	if ctl, ok := os.LookupEnv(workerEnv); ok {
		os.Exit(ServeWorker(os.Stdin, os.Stdout, faultFS(ctl)))
	}
	os.Exit(m.Run())
}

// faultSpec is the control file's content: a fault point and an errno
// name ("wal ENOSPC"), or nothing.
type faultSpec struct {
	point string
	errno syscall.Errno
}

func parseFaultSpec(s string) *faultSpec {
	f := strings.Fields(s)
	if len(f) != 2 {
		return nil
	}
	errno := map[string]syscall.Errno{"ENOSPC": syscall.ENOSPC, "EIO": syscall.EIO}[f[1]]
	return &faultSpec{f[0], errno}
}

var writeOps = map[errorfs.OpKind]bool{
	errorfs.OpCreate: true, errorfs.OpLink: true, errorfs.OpRename: true, errorfs.OpReuseForWrite: true,
	errorfs.OpMkdirAll: true, errorfs.OpFileWrite: true, errorfs.OpFileWriteAt: true, errorfs.OpFileSync: true,
	errorfs.OpFileSyncData: true, errorfs.OpFileSyncTo: true, errorfs.OpFilePreallocate: true, errorfs.OpFileFlush: true,
}

// onStack reports whether a function whose name contains fn is running
// on this goroutine: how a test tells a flush's writes from a
// compaction's.
func onStack(fn string) bool {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if strings.Contains(f.Function, fn) {
			return true
		}
		if !more {
			return false
		}
	}
}

// matches reports whether op is one of the point's writes.
func (f *faultSpec) matches(op errorfs.Op) bool {
	base := filepath.Base(op.Path)
	write := writeOps[op.Kind]
	switch f.point {
	case "wal": // every write to a write-ahead log, its creation included
		return write && strings.HasSuffix(base, ".log")
	case "wal-create": // the creation of a log: at a rotation
		return strings.HasSuffix(base, ".log") && (op.Kind == errorfs.OpCreate || op.Kind == errorfs.OpReuseForWrite)
	case "sst-flush":
		return write && strings.HasSuffix(base, ".sst") && onStack("(*DB).flush1")
	case "sst-compaction":
		return write && strings.HasSuffix(base, ".sst") && onStack("(*DB).compact1")
	case "manifest":
		return write && strings.HasPrefix(base, "MANIFEST-")
	case "options":
		return write && (strings.HasPrefix(base, "OPTIONS-") || strings.HasSuffix(base, ".dbtmp"))
	case "marker":
		return write && strings.HasPrefix(base, "marker.")
	case "open": // every write, from the open on
		return write
	case "stall": // a log sync that never returns
		return strings.HasSuffix(base, ".log") && (op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData || op.Kind == errorfs.OpFileSyncTo)
	}
	return false
}

// faultFS is the worker's filesystem under test: the operating system's,
// failing as the control file says. The file is read at every operation,
// so that a fault armed (or lifted) by writeCtl holds from the worker's
// next operation on, with no poller for the test to wait for. Each point
// that fired is appended to the control file's name + ".fired", so that a
// test knows its fault was reached.
func faultFS(ctl string) vfs.FS {
	if ctl == "" {
		return vfs.Default
	}
	var fired sync.Map
	return errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		b, _ := os.ReadFile(ctl)
		f := parseFaultSpec(string(b))
		if f == nil || !f.matches(op) {
			return nil
		}
		if _, seen := fired.LoadOrStore(f.point, true); !seen {
			if out, err := os.OpenFile(ctl+".fired", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				fmt.Fprintln(out, f.point)
				out.Close()
			}
		}
		if f.point == "stall" {
			time.Sleep(time.Hour)
		}
		return &os.PathError{Op: "write", Path: op.Path, Err: f.errno}
	}))
}

// syncBuffer is a log destination that tests read while the store writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// faultRig is a store whose writer is a worker process with faults.
type faultRig struct {
	t     *testing.T
	dir   string // the data directory
	ctl   string
	clock *engine.ManualClock
	eng   *engine.Engine
	st    *Store
	log   *syncBuffer
}

func workerOptions(dir, ctl string, log *slog.Logger) Options {
	return Options{
		Dir: dir, Log: log,
		Worker:    &WorkerCommand{Path: os.Args[0], Env: []string{workerEnv + "=" + ctl}},
		OpTimeout: 10 * time.Second,
		RetryMin:  time.Millisecond, RetryMax: 10 * time.Millisecond,
	}
}

func newFaultRig(t *testing.T, armed string) *faultRig {
	t.Helper()
	base := t.TempDir()
	r := &faultRig{t: t, dir: filepath.Join(base, "data"), ctl: filepath.Join(base, "faults"),
		clock: engine.NewManualClock(t0), log: &syncBuffer{}}
	r.set(armed)
	r.eng = newEngine(r.clock)
	log := slog.New(slog.NewTextHandler(r.log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	st, err := Open(r.eng, workerOptions(r.dir, r.ctl, log))
	if err != nil {
		t.Fatal(err)
	}
	r.st = st
	t.Cleanup(func() { st.Close() })
	if _, err := st.Load(t0); err != nil {
		t.Fatal(err)
	}
	return r
}

// set writes the control file: the worker's next operation follows it.
func (r *faultRig) set(spec string) {
	writeCtl(r.t, r.ctl, spec)
}

// writeCtl replaces the control file at once (a rename), so that the
// worker reads either the old spec or the new one, never a part.
func writeCtl(t *testing.T, ctl, spec string) {
	t.Helper()
	if err := os.WriteFile(ctl+".tmp", []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(ctl+".tmp", ctl); err != nil {
		t.Fatal(err)
	}
}

func (r *faultRig) fired() string {
	b, _ := os.ReadFile(r.ctl + ".fired")
	return string(b)
}

// bigChanges changes about 2.5 MB of keys: more than half of Pebble's
// memtable, so the batch is flushed at once, through a new log.
func (r *faultRig) bigChanges(round int) {
	val := make([]byte, 1000)
	rng := rand.New(rand.NewPCG(uint64(round), 7))
	for i := 0; i < 2500; i++ {
		for j := range val {
			val[j] = byte(rng.Uint32())
		}
		with(r.eng, "big:"+strconv.Itoa(i), func(s *engine.Shard, k []byte) { s.SetString(0, k, val, 0) })
	}
	with(r.eng, "round", func(s *engine.Shard, k []byte) { s.SetInt(1, k, int64(round), 0) })
}

// reloaded opens the data directory afresh, in this process, and returns
// its keyspace.
func reloaded(t *testing.T, dir string, clock *engine.ManualClock) []string {
	t.Helper()
	eng := newEngine(clock)
	st, err := Open(eng, Options{Dir: dir, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Load(clock.Now()); err != nil {
		t.Fatal(err)
	}
	return dump(t, eng)
}

var errnoText = map[string]string{"ENOSPC": "no space left on device", "EIO": "input/output error"}

// TestWriteFaultsAtEveryPoint injects ENOSPC and EIO at each of Pebble's
// write points. Whatever Pebble does (a panic while rotating its log, a
// Fatalf, a flush retried for ever), the server's side stays up: the
// snapshot fails with an error naming the cause, the statistics say so,
// and once the fault is lifted the next snapshot writes every change made
// meanwhile.
func TestWriteFaultsAtEveryPoint(t *testing.T) {
	points := []struct {
		name   string
		reopen bool // the point is reached when the worker opens the database
		before int  // rounds of big changes before the fault, for compactions
	}{
		{name: "wal"},
		{name: "wal-create"},
		{name: "sst-flush"},
		{name: "sst-compaction", before: 3},
		{name: "manifest"},
		{name: "options", reopen: true},
		{name: "marker", reopen: true},
		{name: "open", reopen: true},
	}
	for _, p := range points {
		for _, errno := range []string{"ENOSPC", "EIO"} {
			t.Run(p.name+"/"+errno, func(t *testing.T) {
				r := newFaultRig(t, "")
				fill(r.eng)
				if err := r.st.Snapshot(); err != nil {
					t.Fatal(err)
				}
				for i := 0; i < p.before; i++ {
					r.bigChanges(100 + i)
					if err := r.st.Snapshot(); err != nil {
						t.Fatal(err)
					}
				}
				r.set(p.name + " " + errno)
				if p.reopen {
					r.st.dropWriter()
				}
				var err error
				start := time.Now()
				for round := 0; round < 8 && err == nil; round++ {
					r.bigChanges(round)
					with(r.eng, "str", func(s *engine.Shard, k []byte) { s.Delete(0, k, t0) })
					r.eng.FlushDB(3, false)
					err = r.st.Snapshot()
				}
				if err == nil {
					t.Fatalf("no snapshot failed (fired: %q)", r.fired())
				}
				if took := time.Since(start); took > 10*time.Second {
					t.Errorf("the failure took %v to show", took)
				}
				t.Logf("snapshot error: %v", err)
				if !strings.Contains(r.fired(), p.name) {
					t.Fatalf("the fault was not injected, yet: %v", err)
				}
				if want := errnoText[errno]; !strings.Contains(err.Error(), want) {
					t.Fatalf("the error does not name the cause (%s): %v", want, err)
				}
				if s := r.st.Stats(); s.LastOK || s.Errors == 0 || s.InProgress || s.LastError != err.Error() {
					t.Fatalf("stats after the failure: %+v", s)
				}
				r.set("")
				var rerr error
				for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
					if rerr = r.st.Snapshot(); rerr == nil {
						break
					}
				}
				if rerr != nil {
					t.Fatalf("snapshots still fail once the fault is lifted: %v\nlog:\n%s", rerr, r.log)
				}
				if s := r.st.Stats(); !s.LastOK || s.InProgress {
					t.Fatalf("stats after recovery: %+v", s)
				}
				if !strings.Contains(r.log.String(), "snapshots succeed again") {
					t.Errorf("the recovery was not logged:\n%s", r.log)
				}
				want := dump(t, r.eng)
				if err := r.st.Close(); err != nil {
					t.Fatal(err)
				}
				sameDump(t, reloaded(t, r.dir, r.clock), want)
			})
		}
	}
}

// TestFailuresAreLoggedOnce: a disk that stays full fails every snapshot;
// the log says so once, not once per attempt, and says when it recovers.
func TestFailuresAreLoggedOnce(t *testing.T) {
	r := newFaultRig(t, "")
	fill(r.eng)
	if err := r.st.Snapshot(); err != nil {
		t.Fatal(err)
	}
	r.set("open ENOSPC")
	r.st.dropWriter()
	for i := 0; i < 30; i++ {
		with(r.eng, "k"+strconv.Itoa(i), func(s *engine.Shard, k []byte) { s.SetInt(0, k, int64(i), 0) })
		if err := r.st.Snapshot(); err == nil {
			t.Fatal("a snapshot succeeded on a full disk")
		}
	}
	if s := r.st.Stats(); s.Errors != 30 {
		t.Fatalf("errors counted: %d", s.Errors)
	}
	if n := strings.Count(r.log.String(), "\n"); n > 3 {
		t.Fatalf("%d log lines for 30 failed snapshots:\n%s", n, r.log)
	}
	r.set("")
	if err := r.st.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.log.String(), "failed_attempts=30") {
		t.Fatalf("recovery not logged with the count:\n%s", r.log)
	}
}

// TestStuckWorkerIsKilled: a worker stuck in a sync that never returns
// (a hung disk) is killed after OpTimeout; the snapshot fails, and the
// next one, with a new worker, succeeds. Close is bounded too.
func TestStuckWorkerIsKilled(t *testing.T) {
	base := t.TempDir()
	ctl := filepath.Join(base, "faults")
	os.WriteFile(ctl, nil, 0o644)
	clock := engine.NewManualClock(t0)
	eng := newEngine(clock)
	o := workerOptions(filepath.Join(base, "data"), ctl, quiet)
	o.OpTimeout = 500 * time.Millisecond
	st, err := Open(eng, o)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Load(t0); err != nil {
		t.Fatal(err)
	}
	fill(eng)
	writeCtl(t, ctl, "stall EIO")
	// OpTimeout ends the wait, not a longer one: the stall lasts an hour,
	// the default timeout is 30 s; a generous bound tells them apart.
	start := time.Now()
	err = st.Snapshot()
	if err == nil || !strings.Contains(err.Error(), "did not answer") {
		t.Fatalf("snapshot on a hung disk: %v", err)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("the snapshot took %v to give up", took)
	}
	if s := st.Stats(); s.InProgress || s.LastOK {
		t.Fatalf("stats: %+v", s)
	}
	writeCtl(t, ctl, "")
	if err := st.Snapshot(); err != nil {
		t.Fatal(err)
	}
	// A snapshot stuck again when Close comes: Close kills the worker.
	// The new worker's stall shows as a second line in the fired file.
	writeCtl(t, ctl, "stall EIO")
	with(eng, "again", func(s *engine.Shard, k []byte) { s.SetInt(0, k, 1, 0) })
	go st.Snapshot()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(time.Millisecond) {
		if b, _ := os.ReadFile(ctl + ".fired"); strings.Count(string(b), "stall") >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second snapshot never reached the stalled sync")
		}
	}
	// Close does not wait for the hour the sync would take: a generous
	// bound tells a kill from that wait.
	start = time.Now()
	st.Close()
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("Close took %v", took)
	}
}

// largestSST returns the path of the largest table file in dir.
func largestSST(t *testing.T, dir string) string {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	sort.Slice(names, func(i, j int) bool { return fileSize(names[i]) > fileSize(names[j]) })
	if len(names) == 0 {
		t.Fatal("no table file")
	}
	return names[0]
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// damage overwrites 4 KB in the middle of a file with random bytes.
func damage(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	junk := make([]byte, 4096)
	for i := range junk {
		junk[i] = byte(rand.Uint32())
	}
	if _, err := f.WriteAt(junk, fileSize(path)/2); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedTableAtLoad: a damaged table makes the load fail at once,
// with an error naming the file and what to do; nothing hangs.
func TestDamagedTableAtLoad(t *testing.T) {
	dir := t.TempDir()
	clock := engine.NewManualClock(t0)
	eng := newEngine(clock)
	st, err := Open(eng, Options{Dir: dir, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	st.Load(t0)
	r := &faultRig{t: t, eng: eng}
	r.bigChanges(1) // flushed to a table at once
	if err := st.Snapshot(); err != nil {
		t.Fatal(err)
	}
	st.Close()
	sst := largestSST(t, dir)
	damage(t, sst)
	done := make(chan error, 1)
	go func() {
		st, err := Open(newEngine(clock), Options{Dir: dir, Log: quiet})
		if err == nil {
			defer st.Close()
			_, err = st.Load(t0)
		}
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("loading a damaged directory hangs")
	}
	t.Logf("load error: %q", err)
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), filepath.Base(sst)) || !strings.Contains(err.Error(), "move the directory aside") {
		t.Fatalf("err = %v", err)
	}
}

// TestDamagedTableFoundByWorker: damage that the worker finds later (a
// compaction reads the damaged table) fails that snapshot and every one
// after it with an error naming the file.
func TestDamagedTableFoundByWorker(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "data")
	ctl := filepath.Join(base, "faults")
	os.WriteFile(ctl, nil, 0o644)
	clock := engine.NewManualClock(t0)
	eng := newEngine(clock)
	st, err := Open(eng, Options{Dir: dir, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	st.Load(t0)
	r := &faultRig{t: t, eng: eng}
	r.bigChanges(1)
	if err := st.Snapshot(); err != nil {
		t.Fatal(err)
	}
	st.Close()
	sst := largestSST(t, dir)
	damage(t, sst)

	// Open, but skip the load, which would find the damage first.
	st, err = Open(eng, workerOptions(dir, ctl, quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.ro.Close()
	st.ro = nil
	// Tables pile up in L0 until a compaction, in the background, reads
	// them all; the snapshot after it fails. Rounds go on until then, a
	// key each once there are enough tables.
	var first error
	for round, deadline := 2, time.Now().Add(30*time.Second); first == nil && time.Now().Before(deadline); round++ {
		if round < 12 {
			r.bigChanges(round)
		} else {
			with(eng, "k"+strconv.Itoa(round), func(s *engine.Shard, k []byte) { s.SetInt(0, k, 1, 0) })
			time.Sleep(50 * time.Millisecond)
		}
		first = st.Snapshot()
	}
	t.Logf("snapshot error: %v", first)
	if !errors.Is(first, ErrDamaged) || !strings.Contains(first.Error(), filepath.Base(sst)) {
		t.Fatalf("err = %v", first)
	}
	if err := st.Snapshot(); !errors.Is(err, ErrDamaged) {
		t.Fatalf("a snapshot after the damage was found: %v", err)
	}
}

// TestDirectoryHeldWhileWorkerIsDown: the store holds its directory
// itself, not only through its worker's Pebble lock. On a full disk the
// worker stops, and a second store (a second server on the same --dir)
// used to find the directory free, load it and write to it once the disk
// had room; it is refused at once, naming the holder, until the first
// store is closed.
func TestDirectoryHeldWhileWorkerIsDown(t *testing.T) {
	r := newFaultRig(t, "")
	with(r.eng, "k", func(s *engine.Shard, k []byte) { s.SetString(0, k, []byte("v"), 0) })
	if err := r.st.Snapshot(); err != nil {
		t.Fatal(err)
	}
	r.set("wal ENOSPC")
	r.bigChanges(1)
	if err := r.st.Snapshot(); err == nil {
		t.Fatal("a snapshot on a full disk succeeded")
	}
	pw, _ := r.st.w.(*procWriter)
	if pw != nil {
		select {
		case <-pw.exited:
		case <-time.After(5 * time.Second):
			t.Fatal("the worker did not stop on a full disk")
		}
	}
	r.set("")
	start := time.Now()
	second, err := Open(newEngine(r.clock), Options{Dir: r.dir, Log: quiet})
	took := time.Since(start)
	if err == nil {
		second.Close()
		t.Fatal("a second store opened the directory while the first one's worker was down")
	}
	// Refused, not waiting for the lock: the first store holds it until
	// it closes, so a wait would last the test; a generous bound tells.
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) || took > 15*time.Second {
		t.Fatalf("second store: %v after %v", err, took)
	}
	t.Logf("refused after %v: %v", took.Round(time.Microsecond), err)
	if err := r.st.Snapshot(); err != nil {
		t.Fatalf("the first store, its worker restarted: %v", err)
	}
	r.st.Close()
	if got := reloaded(t, r.dir, r.clock); len(got) != 2502 {
		t.Fatalf("%d keys after a reload, want 2502", len(got))
	}
}

// TestLargeCommitThroughWorker: a value past releaseAbove goes to the
// worker in parts; after committing it the worker reopens its database
// (recycle), and the snapshots that follow still succeed.
func TestLargeCommitThroughWorker(t *testing.T) {
	r := newFaultRig(t, "")
	pw := r.st.w.(*procWriter)
	with(r.eng, "big", func(s *engine.Shard, k []byte) { s.SetString(0, k, randomBytes(5, releaseAbove+1), 0) })
	if err := r.st.Snapshot(); err != nil {
		t.Fatal(err)
	}
	with(r.eng, "after", func(s *engine.Shard, k []byte) { s.SetString(0, k, []byte("v"), 0) })
	if err := r.st.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if r.st.w != writer(pw) || !pw.usable() {
		t.Fatal("the worker was replaced")
	}
	with(r.eng, "big", func(s *engine.Shard, k []byte) { s.Delete(0, k, t0) })
	if err := r.st.Snapshot(); err != nil {
		t.Fatal(err)
	}
	want := dump(t, r.eng)
	r.st.Close()
	sameDump(t, reloaded(t, r.dir, r.clock), want)
}
