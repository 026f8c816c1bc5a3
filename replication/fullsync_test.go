package replication

import (
	"bufio"
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/resp"
)

// A full sync is all or nothing, in every repl-diskless-load mode: a copy
// cut anywhere (the master gone at that byte) leaves the replica's dataset
// and replication position exactly as they were; a whole copy replaces
// them exactly. A fake master answers the handshake and sends a copy
// built with the value codec, cut where the test says.

const masterID = "0123456789abcdef0123456789abcdef01234567"

// fakeMaster serves one replica connection: the handshake, then copy[:cut],
// then it closes the connection (cut < 0: the whole copy, then it keeps
// the connection open until the test ends).
type fakeMaster struct {
	ln   net.Listener
	copy []byte
	cut  int
	wg   sync.WaitGroup
	stop chan struct{}
}

func startFakeMaster(t *testing.T, copy []byte, cut int) *fakeMaster {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &fakeMaster{ln: ln, copy: copy, cut: cut, stop: make(chan struct{})}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		c, err := ln.Accept()
		ln.Close() // one connection: the replica's retries are refused
		if err != nil {
			return
		}
		defer c.Close()
		m.serve(c)
	}()
	t.Cleanup(func() {
		close(m.stop)
		ln.Close()
		m.wg.Wait()
	})
	return m
}

func (m *fakeMaster) port() int { return m.ln.Addr().(*net.TCPAddr).Port }

func (m *fakeMaster) serve(c net.Conn) {
	rd := newEntryReader(bufio.NewReader(c))
	for {
		args, _, err := rd.entry()
		if err != nil {
			return
		}
		switch {
		case isCmd(args[0], "PING"):
			c.Write([]byte("+PONG\r\n"))
		case isCmd(args[0], "REPLCONF"):
			c.Write([]byte("+OK\r\n"))
		case isCmd(args[0], "PSYNC"):
			c.Write([]byte("+FULLRESYNC " + masterID + " 100\r\n"))
			if m.cut >= 0 {
				c.Write(m.copy[:m.cut])
				return
			}
			c.Write(m.copy)
			<-m.stop
			return
		}
	}
}

// copyOf builds a master's copy of n string keys in databases 0 and 2,
// with the function libraries' and the policies' entries, and returns it
// with the offsets at which each of its entries ends.
func copyOf(t *testing.T, n int, badAt int) (copy []byte, ends []int, want map[string]string) {
	t.Helper()
	src := engine.New(engine.Config{Databases: 4})
	want = map[string]string{}
	copy = append(copy, syncBegin...)
	ends = append(ends, len(copy))
	copy = resp.AppendCommand(copy, []byte("FUNCTION"), []byte("RESTORE"), []byte("libs"), []byte("FLUSH"))
	ends = append(ends, len(copy))
	copy = resp.AppendCommand(copy, policiesCmd, []byte("pols"))
	ends = append(ends, len(copy))
	for i := 0; i < n; i++ {
		db := 0
		if i >= n/2 {
			db = 2
		}
		if i == 0 || i == n/2 {
			copy = appendSelect(copy, db)
			ends = append(ends, len(copy))
		}
		k, v := []byte("new:"+strconv.Itoa(i)), []byte("value-"+strconv.Itoa(i))
		sh := src.ShardFor(k)
		e := sh.SetString(db, k, v, 0)
		val, err := engine.AppendValue(nil, sh, e)
		if err != nil {
			t.Fatal(err)
		}
		if i == badAt {
			val = []byte{0xee, 0, 1}
		}
		copy = resp.AppendCommand(copy, []byte("LKV.SET"), k, val)
		ends = append(ends, len(copy))
		want[fmt.Sprintf("%d/%s", db, k)] = string(v)
	}
	copy = append(copy, syncEnd...)
	ends = append(ends, len(copy))
	return copy, ends, want
}

// testReplica is a node over an engine holding an old dataset.
type testReplica struct {
	n      *Node
	eng    *engine.Engine
	dir    string
	mu     sync.Mutex
	states []LoadState
	funcs  []string
	pols   []byte
}

const oldID = "fedcba9876543210fedcba9876543210fedcba98"

func newTestReplica(t *testing.T, mode LoadMode, oldKeys int) *testReplica {
	t.Helper()
	r := &testReplica{eng: engine.New(engine.Config{Databases: 4}), dir: t.TempDir(), pols: []byte("old-pols")}
	for i := 0; i < oldKeys; i++ {
		k := []byte("old:" + strconv.Itoa(i))
		r.eng.ShardFor(k).SetString(1, k, []byte("o"+strconv.Itoa(i)), 0)
	}
	set := NewSettings()
	set.DisklessLoad.Store(int32(mode))
	r.n = New(r.eng, set, Hooks{
		Exec: func(db int, args [][]byte, held bool) error {
			switch {
			case isCmd(args[0], "FLUSHALL"):
				r.eng.FlushDB(-1, held)
			case isCmd(args[0], "FUNCTION"):
				r.mu.Lock()
				r.funcs = append(r.funcs, string(args[2]))
				r.mu.Unlock()
			}
			return nil
		},
		Loading: func(st LoadState) {
			r.mu.Lock()
			r.states = append(r.states, st)
			r.mu.Unlock()
		},
		Dir: func() string { return r.dir },
		Dial: func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		},
		Policies: func() ([]byte, func()) {
			r.mu.Lock()
			defer r.mu.Unlock()
			return append([]byte(nil), r.pols...), func() {}
		},
		SetPolicies: func(p []byte) error {
			r.mu.Lock()
			r.pols = append([]byte(nil), p...)
			r.mu.Unlock()
			return nil
		},
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	// The old dataset stands in a history of its own.
	r.n.Restore(oldID, 77)
	return r
}

// follow makes the replica follow m and waits until its first full sync
// ended, then stops the link.
func (r *testReplica) follow(t *testing.T, m *fakeMaster) string {
	t.Helper()
	r.n.ReplicaOf("127.0.0.1", m.port())
	defer r.n.Stop()
	for i := 0; i < 2000; i++ {
		if st := r.n.LoadInfo().Status; st != "" {
			return st
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the full sync did not end")
	return ""
}

// dataset renders every key of every database with its value.
func dataset(t *testing.T, eng *engine.Engine) map[string]string {
	t.Helper()
	out := map[string]string{}
	for i := 0; i < engine.Shards; i++ {
		sh := eng.Shard(i)
		sh.Lock()
		for db := 0; db < eng.Databases(); db++ {
			sh.Keys(db, 0, 1<<30, 0, func(e engine.Entry) {
				v, err := e.StringOf(nil)
				if err != nil {
					t.Errorf("key %q: %v", e.Key(), err)
				}
				out[fmt.Sprintf("%d/%s", db, e.Key())] = string(v)
			})
		}
		sh.Unlock()
	}
	return out
}

func sameDataset(t *testing.T, got, want map[string]string, what string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d keys, want %d", what, len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s: key %s = %q, want %q", what, k, got[k], v)
		}
	}
}

func cutPoints(ends []int) []int {
	var cuts []int
	for i, e := range ends {
		if i == len(ends)-1 {
			break // the whole copy is not a cut
		}
		if len(ends) < 60 || i%7 == 0 || i >= len(ends)-3 {
			cuts = append(cuts, e, e-1) // at an entry's end, and one byte short of it
		}
	}
	return append(cuts, 0)
}

func TestFullSyncCutAnywhereKeepsOldDataset(t *testing.T) {
	copy, ends, _ := copyOf(t, 300, -1)
	for _, mode := range []LoadMode{LoadDisk, LoadSwap, LoadOnEmpty} {
		for _, cut := range cutPoints(ends) {
			t.Run(fmt.Sprintf("mode%d/cut%d", mode, cut), func(t *testing.T) {
				oldKeys := 50
				if mode == LoadOnEmpty {
					oldKeys = 0 // else it takes the disk's way
				}
				r := newTestReplica(t, mode, oldKeys)
				before := dataset(t, r.eng)
				if st := r.follow(t, startFakeMaster(t, copy, cut)); st != "err" {
					t.Fatalf("sync status %q, want err", st)
				}
				sameDataset(t, dataset(t, r.eng), before, "after a cut copy")
				id, off, release, ok, rebuilding := r.n.Position()
				if rebuilding || !ok || id != oldID || off != 77 {
					t.Fatalf("position %q %d ok=%v rebuilding=%v, want the old one", id, off, ok, rebuilding)
				}
				release()
				r.mu.Lock()
				defer r.mu.Unlock()
				if len(r.funcs) != 0 || string(r.pols) != "old-pols" {
					t.Fatalf("a cut copy installed libraries %q or policies %q", r.funcs, r.pols)
				}
				if len(r.states) > 0 && r.states[len(r.states)-1] != LoadNone {
					t.Fatalf("load states %v: commands are still refused", r.states)
				}
				if files, _ := filepath.Glob(filepath.Join(r.dir, syncFilePrefix+"*")); len(files) != 0 {
					t.Fatalf("files left behind: %v", files)
				}
			})
		}
	}
}

func TestFullSyncWholeCopyReplaces(t *testing.T) {
	copy, _, want := copyOf(t, 300, -1)
	for _, mode := range []LoadMode{LoadDisk, LoadSwap, LoadOnEmpty} {
		for _, oldKeys := range []int{0, 50} {
			t.Run(fmt.Sprintf("mode%d/old%d", mode, oldKeys), func(t *testing.T) {
				r := newTestReplica(t, mode, oldKeys)
				if st := r.follow(t, startFakeMaster(t, copy, -1)); st != "ok" {
					t.Fatalf("sync status %q", st)
				}
				sameDataset(t, dataset(t, r.eng), want, "after a whole copy")
				id, off, release, ok, rebuilding := r.n.Position()
				if rebuilding || !ok || id != masterID || off != 100 {
					t.Fatalf("position %q %d, want the master's", id, off)
				}
				release()
				wantMode := map[LoadMode]string{LoadDisk: "disk", LoadSwap: "swapdb", LoadOnEmpty: "diskless"}[mode]
				if mode == LoadOnEmpty && oldKeys > 0 {
					wantMode = "disk"
				}
				if got := r.n.LoadInfo().Mode; got != wantMode {
					t.Fatalf("load mode %q, want %q", got, wantMode)
				}
				r.mu.Lock()
				defer r.mu.Unlock()
				if !slices.Equal(r.funcs, []string{"libs"}) || string(r.pols) != "pols" {
					t.Fatalf("libraries %q, policies %q: not the copy's", r.funcs, r.pols)
				}
				// Commands were refused while the keyspace was replaced,
				// and served again after.
				if !slices.Contains(r.states, LoadFull) || r.states[len(r.states)-1] != LoadNone {
					t.Fatalf("load states %v", r.states)
				}
			})
		}
	}
}

// A value the replica cannot decode fails the sync before its dataset is
// touched (disk: checked as it arrives; swapdb: built aside); into an
// empty keyspace, the half-loaded keys are flushed.
func TestFullSyncBadValueKeepsOldDataset(t *testing.T) {
	copy, _, _ := copyOf(t, 300, 250)
	for _, mode := range []LoadMode{LoadDisk, LoadSwap, LoadOnEmpty} {
		t.Run(fmt.Sprint("mode", mode), func(t *testing.T) {
			oldKeys := 50
			if mode == LoadOnEmpty {
				oldKeys = 0
			}
			r := newTestReplica(t, mode, oldKeys)
			before := dataset(t, r.eng)
			if st := r.follow(t, startFakeMaster(t, copy, -1)); st != "err" {
				t.Fatalf("sync status %q", st)
			}
			sameDataset(t, dataset(t, r.eng), before, "after a bad copy")
		})
	}
}

// swapdb serves the old dataset while it loads when the copy is of the
// replica's own history (async loading), and refuses reads (LOADING)
// when it is not, as Redis decides.
func TestFullSyncSwapAsyncOnlyForSameHistory(t *testing.T) {
	copy, _, _ := copyOf(t, 10, -1)
	for _, same := range []bool{false, true} {
		r := newTestReplica(t, LoadSwap, 5)
		if same {
			r.n.Restore(masterID, 50)
		}
		if st := r.follow(t, startFakeMaster(t, copy, -1)); st != "ok" {
			t.Fatalf("sync status %q", st)
		}
		want := LoadFull
		if same {
			want = LoadAsync
		}
		r.mu.Lock()
		if len(r.states) == 0 || r.states[0] != want {
			t.Errorf("same history %v: load states %v, want %v first", same, r.states, want)
		}
		r.mu.Unlock()
	}
}

// While the keyspace is replaced in place, snapshots capture nothing and
// the role cannot change; both are allowed again once it is whole.
func TestFullSyncRebuildHoldsSnapshotsAndRole(t *testing.T) {
	copy, _, _ := copyOf(t, 50, -1)
	r := newTestReplica(t, LoadDisk, 5)
	seen := make(chan struct{})
	var once sync.Once
	checked := make(chan error, 1)
	r.n.hooks.Exec = func(db int, args [][]byte, held bool) error {
		if isCmd(args[0], "FLUSHALL") {
			// Called with the keyspace marked as rebuilding.
			once.Do(func() {
				var err error
				if _, _, _, _, rebuilding := r.n.Position(); !rebuilding {
					err = fmt.Errorf("Position does not say rebuilding during the flush")
				} else if _, e := r.n.ReplicaOfNoOne(); e != ErrLoading {
					err = fmt.Errorf("REPLICAOF NO ONE during the flush: %v, want ErrLoading", e)
				}
				checked <- err
				close(seen)
			})
			r.eng.FlushDB(-1, held)
		}
		return nil
	}
	if st := r.follow(t, startFakeMaster(t, copy, -1)); st != "ok" {
		t.Fatalf("sync status %q", st)
	}
	<-seen
	if err := <-checked; err != nil {
		t.Fatal(err)
	}
	if _, _, release, _, rebuilding := r.n.Position(); rebuilding {
		t.Fatal("still rebuilding after the sync")
	} else {
		release()
	}
	if changed, err := r.n.ReplicaOfNoOne(); err != nil || !changed {
		t.Fatalf("REPLICAOF NO ONE after the sync: %v %v", changed, err)
	}
}

// A replica killed during a sync leaves its file behind; the next sync
// removes the files of processes that no longer run, and no other.
func TestStaleSyncFilesRemoved(t *testing.T) {
	dir := t.TempDir()
	dead := filepath.Join(dir, syncFilePrefix+"999999999.lkv") // no such process
	live := filepath.Join(dir, syncFilePrefix+strconv.Itoa(os.Getppid())+".lkv")
	other := filepath.Join(dir, "dump.rdb")
	for _, f := range []string{dead, live, other} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	removeStaleSyncFiles(dir)
	for f, keep := range map[string]bool{dead: false, live: true, other: true} {
		_, err := os.Stat(f)
		if exists := err == nil; exists != keep {
			t.Errorf("%s: exists %v, want %v", strings.TrimPrefix(f, dir), exists, keep)
		}
	}
}

// A copy that is not what a master sends (an empty entry, a database out
// of range, a key without a value, an unknown entry) fails the sync, in
// every mode, without a panic and without touching the old dataset.
func TestFullSyncMalformedCopy(t *testing.T) {
	good, _, _ := copyOf(t, 20, -1)
	head := good[:len(syncBegin)]
	for name, bad := range map[string][]byte{
		"empty entry":  []byte("*0\r\n"),
		"bad database": resp.AppendCommand(nil, []byte("SELECT"), []byte("99")),
		"no value":     resp.AppendCommand(nil, []byte("LKV.SET"), []byte("k")),
		"unknown":      resp.AppendCommand(nil, []byte("FLUSHALL")),
		"not an array": []byte("+OK\r\n"),
	} {
		copy := append(append(append([]byte{}, head...), bad...), good[len(syncBegin):]...)
		for _, mode := range []LoadMode{LoadDisk, LoadSwap, LoadOnEmpty} {
			t.Run(fmt.Sprintf("%s/mode%d", name, mode), func(t *testing.T) {
				oldKeys := 50
				if mode == LoadOnEmpty {
					oldKeys = 0
				}
				r := newTestReplica(t, mode, oldKeys)
				before := dataset(t, r.eng)
				if st := r.follow(t, startFakeMaster(t, copy, -1)); st != "err" {
					t.Fatalf("sync status %q", st)
				}
				sameDataset(t, dataset(t, r.eng), before, "after a malformed copy")
			})
		}
	}
}

// A copy on disk that does not read back as it was written is refused
// as damaged, whatever the damage, and never panics.
func TestLoadFileRefusesDamage(t *testing.T) {
	copy, _, _ := copyOf(t, 20, -1)
	body := copy[len(syncBegin):]
	crc := crc32.Checksum(body, syncFileCRC)
	r := newTestReplica(t, LoadDisk, 0)
	l := &link{n: r.n}
	for name, damaged := range map[string][]byte{
		"flipped byte": func() []byte { b := slices.Clone(body); b[len(b)/2] ^= 0x20; return b }(),
		"truncated":    body[:len(body)-10],
		"empty entry":  append([]byte("*0\r\n"), body...),
		"short set":    append(resp.AppendCommand(nil, []byte("LKV.SET"), []byte("k")), body...),
		"short select": append(resp.AppendCommand(nil, []byte("SELECT")), body...),
	} {
		f, err := os.CreateTemp(t.TempDir(), "copy")
		if err != nil {
			t.Fatal(err)
		}
		f.Write(damaged)
		if err := l.loadFile(f, int64(len(body)), crc); err == nil {
			t.Errorf("%s: loaded", name)
		}
		f.Close()
	}
	// The copy as written loads.
	f, _ := os.CreateTemp(t.TempDir(), "copy")
	defer f.Close()
	f.Write(body)
	if err := l.loadFile(f, int64(len(body)), crc); err != nil {
		t.Fatalf("the intact copy: %v", err)
	}
}
