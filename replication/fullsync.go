package replication

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/limitkv/limitkv/engine"
)

// A replica's full sync is all or nothing. Until the master's copy has
// arrived whole and loaded, the replica keeps its previous dataset, in
// memory and on disk; a copy that fails halfway (the master dies, the link
// drops, a value will not decode) leaves it exactly as it was. How the copy
// waits while it arrives is repl-diskless-load's choice (LoadMode):
//
//   - LoadDisk writes it to a file in the data directory, checking every
//     value with the decoder that will load it. The old dataset is served
//     until the file is whole and synced; then the keyspace is flushed and
//     loaded from the file, commands answering LOADING. Memory: one
//     dataset; disk: the copy.
//   - LoadSwap builds it in a second dataset in memory and swaps the two
//     at the end. The old dataset is served meanwhile when it is of the
//     same history as the copy (the replica's replication id is the
//     master's), else commands answer LOADING, as Redis decides. Memory:
//     both datasets at the peak (INFO replication shows it).
//   - LoadOnEmpty loads straight into an empty keyspace (LOADING
//     meanwhile), and a copy that fails is flushed: the keyspace is empty
//     again. A keyspace that holds keys goes the LoadDisk way.
//
// While the keyspace itself is being replaced (the flush and load of
// LoadDisk and LoadOnEmpty) it stands at no replication position: the node
// is rebuilding, snapshots capture nothing and the role cannot change, so
// that a crash at any moment restarts the replica with its old dataset or,
// once a snapshot has written it whole, the new one.

// loadProgress is the progress of the full sync under way and the outcome
// of the last, for INFO.
type loadProgress struct {
	state    atomic.Int32 // a LoadState
	mode     atomic.Int32 // the LoadMode taken by the sync under way or the last, -1: none yet
	read     atomic.Int64 // bytes of the copy received so far
	start    atomic.Int64 // Unix s when the keyspace started loading
	total    atomic.Int64 // bytes to load, when known (a copy on disk)
	loaded   atomic.Int64 // bytes loaded so far
	status   atomic.Int32 // of the last full sync: 0 none yet, 1 ok, 2 failed
	failures atomic.Int64 // full syncs that failed since the start
	swapMem  atomic.Int64 // bytes of the dataset LoadSwap is building
	swapPeak atomic.Int64 // the most both datasets held at once in the last LoadSwap
}

// LoadInfo describes the full syncs a replica loads, for INFO.
type LoadInfo struct {
	State                   LoadState
	Mode                    string // disk, diskless, swapdb; "" before the first
	Status                  string // of the last: ok, err; "" before the first
	Failures                int64
	StartUnix               int64 // while loading: when it started
	TotalBytes, LoadedBytes int64 // while loading (total 0: unknown)
	SwapMemory, SwapPeak    int64
}

// LoadInfo returns what INFO shows of the full syncs.
func (n *Node) LoadInfo() LoadInfo {
	p := &n.load
	in := LoadInfo{
		State: LoadState(p.state.Load()), Failures: p.failures.Load(),
		StartUnix: p.start.Load(), TotalBytes: p.total.Load(), LoadedBytes: p.loaded.Load(),
		SwapMemory: p.swapMem.Load(), SwapPeak: p.swapPeak.Load(),
	}
	if in.TotalBytes == 0 {
		in.LoadedBytes = p.read.Load() // loading as it arrives: what arrived
	}
	switch p.mode.Load() {
	case int32(LoadDisk):
		in.Mode = "disk"
	case int32(LoadOnEmpty):
		in.Mode = "diskless"
	case int32(LoadSwap):
		in.Mode = "swapdb"
	}
	switch p.status.Load() {
	case 1:
		in.Status = "ok"
	case 2:
		in.Status = "err"
	}
	return in
}

// settle ends what a load told commands: the keyspace is served again,
// unless a replacement in place was left unfinished.
func (n *Node) settle() {
	n.mu.Lock()
	partial := n.rebuilding
	n.mu.Unlock()
	if partial {
		n.setLoading(LoadFull)
	} else {
		n.setLoading(LoadNone)
	}
}

// setLoading tells commands what they may do, and INFO.
func (n *Node) setLoading(st LoadState) {
	if LoadState(n.load.state.Swap(int32(st))) == st {
		return
	}
	if st != LoadNone {
		n.load.start.Store(time.Now().Unix())
	}
	if n.hooks.Loading != nil {
		n.hooks.Loading(st)
	}
}

// syncCopy is what a master's copy carries besides its keys, kept until
// the copy is whole.
type syncCopy struct {
	funcs [][]byte // FUNCTION RESTORE payload FLUSH, nil: none sent
	pols  []byte   // the rate-limit policies, nil: none
	keys  int
}

// fullSync takes in the master's copy that follows +FULLRESYNC.
func (l *link) fullSync(rd *entryReader) error {
	n := l.n
	l.state.Store(linkSync)
	p := &n.load
	p.read.Store(0)
	start := time.Now()
	var cp syncCopy
	err := l.takeCopy(rd, &cp)
	if err != nil {
		p.status.Store(2)
		p.failures.Add(1)
		n.mu.Lock()
		partial := n.rebuilding
		n.mu.Unlock()
		if partial {
			return fmt.Errorf("full sync failed, the keyspace stays unavailable (LOADING) until one succeeds: %w", err)
		}
		return fmt.Errorf("full sync failed, the dataset from before it is kept: %w", err)
	}
	p.status.Store(1)
	d := time.Since(start)
	n.stats.ReplicaFullEnd.Store(int64(d))
	n.log.Info("MASTER <-> REPLICA sync: Finished with success", "keys", cp.keys, "bytes", p.read.Load(), "took", d.Round(time.Millisecond))
	return nil
}

// takeCopy reads the start of the copy and loads it the way
// repl-diskless-load says.
func (l *link) takeCopy(rd *entryReader, cp *syncCopy) error {
	n := l.n
	mode := LoadMode(n.Set.DisklessLoad.Load())
	if mode == LoadOnEmpty && n.eng.TotalKeys(false) != 0 {
		mode = LoadDisk
	}
	n.load.mode.Store(int32(mode))
	if rd.rdb() {
		return errors.New("the master sent an RDB file: it is not limitkv, and limitkv replicas follow limitkv masters only")
	}
	args, raw, err := rd.entry()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return errors.New("connection closed by master before its copy")
		}
		return err
	}
	if len(args) != 2 || !isCmd(args[0], "LKV.SYNC") || !isCmd(args[1], "BEGIN") {
		return fmt.Errorf("%w: expected the start of the master's copy", errProtocol)
	}
	n.load.read.Add(int64(len(raw)))
	switch mode {
	case LoadSwap:
		return l.loadSwap(rd, cp)
	case LoadOnEmpty:
		return l.loadInPlace(rd, cp)
	}
	return l.loadDisk(rd, cp)
}

// readCopy reads the copy up to LKV.SYNC END. It keeps the function
// libraries and policies in cp, gives each key to key (its arguments valid
// until it returns), and each entry's bytes, END's included, to raw when it
// is set.
func (l *link) readCopy(rd *entryReader, cp *syncCopy, key func(db int, k, v []byte) error, raw func([]byte) error) error {
	n := l.n
	db := 0
	for {
		if l.ctx.Err() != nil {
			return errStopped
		}
		args, b, err := rd.entry()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return errors.New("connection closed by master before the end of its copy")
			}
			return err
		}
		l.lastIO.Store(time.Now().UnixNano())
		n.load.read.Add(int64(len(b)))
		if len(args) == 0 {
			return fmt.Errorf("%w: an empty entry in the master's copy", errProtocol)
		}
		if raw != nil {
			if err := raw(b); err != nil {
				return err
			}
		}
		switch {
		case isCmd(args[0], "LKV.SYNC") && len(args) == 2 && isCmd(args[1], "END"):
			return nil
		case isCmd(args[0], "SELECT") && len(args) == 2:
			d, err := strconv.Atoi(string(args[1]))
			if err != nil || d < 0 || d >= n.eng.Databases() {
				return fmt.Errorf("%w: SELECT %q", errProtocol, args[1])
			}
			db = d
		case isCmd(args[0], "FUNCTION"):
			cp.funcs = copyArgs(args)
		case isCmd(args[0], "LKV.POLICIES") && len(args) == 2:
			cp.pols = append([]byte{}, args[1]...)
		case isCmd(args[0], "LKV.SET") && len(args) == 3:
			if err := key(db, args[1], args[2]); err != nil {
				return fmt.Errorf("key %q of database %d in the master's copy: %w", args[1], db, err)
			}
			cp.keys++
		default:
			return fmt.Errorf("%w: unexpected %q in the master's copy", errProtocol, args[0])
		}
	}
}

// storeKey stores one key of a copy in eng.
func storeKey(eng *engine.Engine, lim engine.Limits, db int, k, v []byte) error {
	sh := eng.ShardFor(k)
	sh.Lock()
	err := sh.StoreValue(db, k, v, lim)
	sh.Unlock()
	return err
}

// beginRebuild marks the keyspace as being replaced in place, unless the
// link was stopped (a role change got in first), and waits until no
// command that was let through before still runs. The replicas of this
// replica are dropped: they cannot continue from a history that is
// replaced.
func (l *link) beginRebuild() error {
	n := l.n
	n.applyMu.Lock() // a snapshot capturing the old dataset ends first
	n.mu.Lock()
	if l.ctx.Err() != nil {
		n.mu.Unlock()
		n.applyMu.Unlock()
		return errStopped
	}
	n.rebuilding = true
	drop := append([]*Session(nil), n.sessions...)
	n.mu.Unlock()
	n.applyMu.Unlock()
	for _, s := range drop {
		s.conn.Kill()
	}
	n.setLoading(LoadFull)
	return nil
}

// endRebuild ends a replacement in place, installing the copy's position
// when it succeeded.
func (l *link) endRebuild(ok bool) {
	n := l.n
	n.applyMu.Lock()
	n.mu.Lock()
	if ok {
		l.takePosition()
	}
	n.rebuilding = false
	n.mu.Unlock()
	n.applyMu.Unlock()
	n.settle()
}

// takePosition makes the copy's replication id and offset the node's, as
// Redis does at the end of a full sync: a new history, with no secondary
// id. The caller holds applyMu and mu.
func (l *link) takePosition() {
	n := l.n
	n.replid, n.replid2, n.secondOff = l.fullID, zeroID, -1
	n.streamMu.Lock()
	n.backlog = NewBacklog(l.fullOff, n.Set.BacklogSize.Load())
	n.offset = l.fullOff
	n.streamDB = -1
	n.streamMu.Unlock()
	l.readOff.Store(l.fullOff)
	l.applied.Store(l.fullOff)
	l.positioned.Store(true)
}

// installMeta replaces the function libraries and the policies with the
// copy's: the policies first, put back if the libraries are refused, so
// that a copy either installs both or changes neither. held: every shard
// is locked.
func (l *link) installMeta(cp *syncCopy, held bool) error {
	n := l.n
	var old []byte
	if f := n.hooks.SetPolicies; f != nil {
		if g := n.hooks.Policies; g != nil {
			payload, release := g()
			old = append([]byte(nil), payload...)
			release()
		}
		if err := f(cp.pols); err != nil {
			return fmt.Errorf("the master's rate-limit policies: %w", err)
		}
	}
	if cp.funcs == nil {
		return nil
	}
	if err := n.hooks.Exec(0, cp.funcs, held); err != nil {
		if f := n.hooks.SetPolicies; f != nil {
			f(old)
		}
		return fmt.Errorf("the master's function libraries: %w", err)
	}
	return nil
}

// loadSwap builds the copy in a staging dataset and swaps it in whole.
func (l *link) loadSwap(rd *entryReader, cp *syncCopy) error {
	n := l.n
	p := &n.load
	// The old dataset may be read meanwhile if it is an earlier point of
	// the history the copy stands in, as Redis decides; not if a failed
	// replacement left it partial.
	n.mu.Lock()
	async := strings.EqualFold(n.replid, l.fullID) && !n.rebuilding
	n.mu.Unlock()
	if async {
		n.setLoading(LoadAsync)
	} else {
		n.setLoading(LoadFull)
	}
	defer n.settle()
	stage := n.eng.NewStaging()
	lim := n.limits()
	p.swapMem.Store(0)
	p.swapPeak.Store(n.eng.MemoryUsed())
	notePeak := func() {
		staged := stage.MemoryUsed()
		p.swapMem.Store(staged)
		if both := staged + n.eng.MemoryUsed(); both > p.swapPeak.Load() {
			p.swapPeak.Store(both)
		}
	}
	defer p.swapMem.Store(0)
	n.log.Info("MASTER <-> REPLICA sync: Loading DB in memory, beside the old one (repl-diskless-load swapdb)", "async", async)
	err := l.readCopy(rd, cp, func(db int, k, v []byte) error {
		if err := storeKey(stage, lim, db, k, v); err != nil {
			return err
		}
		if cp.keys&1023 == 0 {
			notePeak()
		}
		return nil
	}, nil)
	notePeak()
	if err != nil {
		return err
	}
	// The swap: the stream stays stopped and snapshots wait, so that a
	// snapshot captures the old dataset at its position or the new one at
	// the copy's, never one at the other's.
	n.applyMu.Lock()
	defer n.applyMu.Unlock()
	// rebuilding holds role changes off until the position is the copy's.
	n.mu.Lock()
	if l.ctx.Err() != nil {
		n.mu.Unlock()
		return errStopped
	}
	wasPartial := n.rebuilding
	n.rebuilding = true
	drop := append([]*Session(nil), n.sessions...)
	n.mu.Unlock()
	for _, s := range drop {
		s.conn.Kill()
	}
	n.log.Info("MASTER <-> REPLICA sync: Swapping active DB with loaded DB")
	n.eng.Lock(engine.AllShards)
	err = l.installMeta(cp, true)
	if err == nil {
		n.eng.Adopt(stage, true)
	}
	n.eng.Unlock(engine.AllShards)
	n.mu.Lock()
	if err == nil {
		l.takePosition()
	}
	n.rebuilding = wasPartial && err != nil
	n.mu.Unlock()
	if err != nil {
		return err
	}
	n.log.Info("MASTER <-> REPLICA sync: Discarding old DB")
	return nil
}

// loadInPlace loads the copy straight into the keyspace, which is empty;
// a copy that fails is flushed.
func (l *link) loadInPlace(rd *entryReader, cp *syncCopy) error {
	n := l.n
	if err := l.beginRebuild(); err != nil {
		return err
	}
	n.log.Info("MASTER <-> REPLICA sync: Loading DB in memory (repl-diskless-load on-empty-db)")
	lim := n.limits()
	err := l.readCopy(rd, cp, func(db int, k, v []byte) error { return storeKey(n.eng, lim, db, k, v) }, nil)
	if err == nil {
		err = l.installMeta(cp, false)
	}
	if err != nil {
		if ferr := n.hooks.Exec(0, [][]byte{[]byte("FLUSHALL")}, false); ferr != nil {
			// The half-loaded keys stay: the node keeps answering
			// LOADING and snapshots keep capturing nothing.
			n.log.Error("could not flush a half-loaded copy: the keyspace stays unavailable until a full sync succeeds", "err", ferr)
			return errors.Join(err, ferr)
		}
		l.endRebuild(false)
		return err
	}
	l.endRebuild(true)
	return nil
}

// syncFileCRC checks a copy read back from disk.
var syncFileCRC = crc32.MakeTable(crc32.Castagnoli)

// syncFilePrefix names the files LoadDisk receives copies in, followed by
// the process id.
const syncFilePrefix = "temp-fullsync-"

// loadDisk receives the copy to a file, then replaces the keyspace with
// it.
func (l *link) loadDisk(rd *entryReader, cp *syncCopy) error {
	n := l.n
	dir := "."
	if n.hooks.Dir != nil {
		dir = n.hooks.Dir()
	}
	removeStaleSyncFiles(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("opening the temp file needed for MASTER <-> REPLICA synchronization: %w", err)
	}
	path := filepath.Join(dir, syncFilePrefix+strconv.Itoa(os.Getpid())+".lkv")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("opening the temp file needed for MASTER <-> REPLICA synchronization: %w", err)
	}
	defer func() {
		f.Close()
		os.Remove(path)
	}()
	n.log.Info("MASTER <-> REPLICA sync: receiving the master's copy to disk (repl-diskless-load disabled)", "file", path)
	w := bufio.NewWriterSize(f, 1<<20)
	sum := crc32.New(syncFileCRC)
	var size int64
	chk := engine.NewValueChecker()
	lim := n.limits()
	err = l.readCopy(rd, cp, func(_ int, _, v []byte) error { return chk.Check(v, lim) }, func(b []byte) error {
		sum.Write(b)
		size += int64(len(b))
		_, err := w.Write(b)
		return err
	})
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		return err
	}
	// The copy is whole: from here it is loaded whatever becomes of the
	// link.
	if err := l.beginRebuild(); err != nil {
		return err
	}
	n.log.Info("MASTER <-> REPLICA sync: Flushing old data")
	if err := l.installMeta(cp, false); err != nil {
		l.endRebuild(false) // nothing was replaced yet
		return err
	}
	if err := n.hooks.Exec(0, [][]byte{[]byte("FLUSHALL")}, false); err != nil {
		n.log.Error("could not flush the old dataset: the keyspace stays unavailable until a full sync succeeds", "err", err)
		return err
	}
	n.log.Info("MASTER <-> REPLICA sync: Loading DB in memory")
	if err := l.loadFile(f, size, sum.Sum32()); err != nil {
		// A file written, synced and checked moments ago that does not
		// read back is a failing disk. Part of the keyspace is loaded:
		// it stays unavailable (LOADING) and uncaptured until a full sync
		// succeeds, and the data directory keeps the dataset from before.
		n.log.Error("reading back the master's copy failed: the keyspace stays unavailable until a full sync succeeds; the data directory keeps the dataset from before it",
			"file", path, "err", err)
		return err
	}
	l.endRebuild(true)
	return nil
}

var errDamagedCopy = errors.New("the file does not read back as it was written")

// loadFile loads a copy received to f, of size bytes with checksum crc,
// into the keyspace.
func (l *link) loadFile(f *os.File, size int64, crc uint32) error {
	n := l.n
	p := &n.load
	p.total.Store(size)
	p.loaded.Store(0)
	defer func() {
		p.total.Store(0)
		p.loaded.Store(0)
	}()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	sum := crc32.New(syncFileCRC)
	rd := newEntryReader(io.TeeReader(f, sum))
	lim := n.limits()
	db := 0
	for {
		args, raw, err := rd.entry()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		p.loaded.Add(int64(len(raw)))
		// Checked as it arrived; what does not read back the same is a
		// damaged file (the checksum, at the end, says so too).
		switch {
		case len(args) == 0:
			return errDamagedCopy
		case isCmd(args[0], "LKV.SYNC"):
			if p.loaded.Load() != size || sum.Sum32() != crc {
				return errDamagedCopy
			}
			return nil
		case isCmd(args[0], "SELECT"):
			if len(args) != 2 {
				return errDamagedCopy
			}
			d, err := strconv.Atoi(string(args[1]))
			if err != nil || d < 0 || d >= n.eng.Databases() {
				return errDamagedCopy
			}
			db = d
		case isCmd(args[0], "LKV.SET"):
			if len(args) != 3 {
				return errDamagedCopy
			}
			if err := storeKey(n.eng, lim, db, args[1], args[2]); err != nil {
				return fmt.Errorf("key %q: %w", args[1], err)
			}
		}
	}
}

// removeStaleSyncFiles removes the files of copies that processes which
// no longer run were receiving in dir: a replica killed during a sync
// leaves its file behind.
func removeStaleSyncFiles(dir string) {
	names, _ := filepath.Glob(filepath.Join(dir, syncFilePrefix+"*.lkv"))
	for _, name := range names {
		pid, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(name), syncFilePrefix), ".lkv"))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.Remove(name)
		}
	}
}
