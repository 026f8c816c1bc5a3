package persist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Pebble v2 rather than v1: it is the maintained line, and its on-disk
// format is the current one, so a data directory written today stays
// readable by the releases to come.
//
// Pebble is fail-stop: a write it cannot complete (a WAL or MANIFEST
// write, the creation of a new WAL) ends in a panic or in Logger.Fatalf,
// which must not return. Neither can be contained in a serving process, so
// the server writes through a worker process (worker.go) and reads only at
// start-up, with a read-only handle that writes nothing.

// ErrForeign, ErrNewerFormat, ErrDamaged and ErrLocked describe a data
// directory that cannot be used; it is never emptied.
var (
	ErrForeign     = errors.New("not a limitkv data directory")
	ErrNewerFormat = errors.New("written by a newer limitkv")
	ErrDamaged     = errors.New("damaged data directory")
	ErrLocked      = errors.New("data directory in use by another process")
	// ErrDenied matches the errors of a directory the worker may not
	// use: permission denied, or a path through a file.
	ErrDenied = errors.New("permission denied")
)

// isDenied reports whether err says the directory may not be used as
// configured.
func isDenied(err error) bool {
	return errors.Is(err, ErrDenied) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) ||
		errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EROFS)
}

// recoverHint tells an operator what to do with a damaged directory.
const recoverHint = "to recover, move the directory aside and start again, " +
	"either empty or from a backup copy of the directory (README, Persistence)"

// corruptionNote remembers the first damaged file Pebble reported through
// its DataCorruption event, so that an error that does not carry the file
// can still name it.
type corruptionNote struct {
	mu   sync.Mutex
	path string
	err  error
}

func (n *corruptionNote) record(info pebble.DataCorruptionInfo) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.path == "" {
		n.path, n.err = info.Path, info.Details
	}
}

func (n *corruptionNote) get() (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.path, n.err
}

// damaged describes a corruption error, naming the damaged file.
func damaged(dir string, err error, note *corruptionNote) error {
	path, cause := "", err
	if info := pebble.ExtractDataCorruptionInfo(err); info != nil {
		path, cause = info.Path, info.Details
	} else if note != nil {
		path, _ = note.get()
	}
	what := "it"
	if path != "" {
		what = "file " + filepath.Base(path)
	}
	text := strings.ReplaceAll(cause.Error(), "\n", "; ")
	return fmt.Errorf("%w: %s: %s is damaged (%s); %s", ErrDamaged, dir, what, text, recoverHint)
}

// readFailed describes a failed read: damage if Pebble says the data is
// corrupt, else the error (a disk that fails to read is not damage).
func readFailed(dir string, err error, note *corruptionNote) error {
	if pebble.IsCorruptionError(err) || pebble.ExtractDataCorruptionInfo(err) != nil {
		return damaged(dir, err, note)
	}
	return fmt.Errorf("reading %s: %w", dir, err)
}

// isLockError reports whether err says that another process (or another
// handle in this one) holds the directory's lock.
func isLockError(err error) bool {
	var pe *fs.PathError
	return errors.Is(err, syscall.EAGAIN) ||
		(errors.Is(err, syscall.EACCES) && !errors.As(err, &pe)) ||
		strings.Contains(err.Error(), "lock held by current process")
}

// lockRetry is how long an open waits for the directory's lock: a worker
// that was just killed, or the worker of a server that just died, may
// hold it for a moment longer.
const lockRetry = 2 * time.Second

// openPebble opens the database at dir, waiting a little for its lock.
func openPebble(dir string, o *pebble.Options) (*pebble.DB, error) {
	deadline := time.Now().Add(lockRetry)
	for {
		db, err := pebble.Open(dir, o)
		if err == nil || !isLockError(err) {
			return db, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: %s: %v", ErrLocked, dir, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// hasPebbleFiles reports whether a directory listing has Pebble's
// manifest: a CURRENT file or a manifest marker.
func hasPebbleFiles(names []string) bool {
	for _, n := range names {
		if n == "CURRENT" || strings.HasPrefix(n, "marker.manifest.") || strings.HasPrefix(n, "MANIFEST-") {
			return true
		}
	}
	return false
}

// listDir reports whether dir holds files, refusing a directory that
// holds files but no Pebble database: Pebble would create its lock file
// even in a directory it then refuses. The server's own lock file alone
// (a server that stopped before its first snapshot) is an empty directory.
func listDir(fsys vfs.FS, dir string) (exists bool, err error) {
	names, err := fsys.List(dir)
	names = slices.DeleteFunc(names, func(n string) bool { return n == lockName })
	switch {
	case err == nil && len(names) > 0:
		if !hasPebbleFiles(names) {
			return false, fmt.Errorf("%w: %s holds files but no Pebble database; refusing to use it", ErrForeign, dir)
		}
		return true, nil
	case err != nil && !errors.Is(err, fs.ErrNotExist) && !os.IsNotExist(err):
		return false, fmt.Errorf("data directory %s: %w", dir, err)
	}
	return false, nil
}

// checkMeta validates the format marker of an open database. A database
// without one must be empty (a new one); writeMeta says whether to write
// the marker then.
func checkMeta(db *pebble.DB, dir string, note *corruptionNote, writeMeta bool) error {
	v, closer, err := db.Get(metaKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		it, ierr := db.NewIter(nil)
		if ierr != nil {
			return readFailed(dir, ierr, note)
		}
		empty := !it.First()
		ierr = it.Close()
		if ierr != nil {
			return readFailed(dir, ierr, note)
		}
		if !empty {
			return fmt.Errorf("%w: %s is a Pebble database without limitkv's format marker; refusing to use it", ErrForeign, dir)
		}
		if writeMeta {
			if err := db.Set(metaKey, metaValue(), pebble.Sync); err != nil {
				return fmt.Errorf("initialising %s: %v", dir, err)
			}
		}
		return nil
	case err != nil:
		return readFailed(dir, fmt.Errorf("reading the format marker: %w", err), note)
	}
	defer closer.Close()
	version, perr := parseMeta(v)
	if perr != nil {
		return fmt.Errorf("%w: %s: %v", ErrForeign, dir, perr)
	}
	if version > formatVersion {
		return fmt.Errorf("%w: %s has snapshot format %d; this limitkv reads format %d at most", ErrNewerFormat, dir, version, formatVersion)
	}
	if version < formatVersion && writeMeta {
		// An older format is read as it is; the marker moves on before
		// this binary writes what an older one could not read.
		if err := db.Set(metaKey, metaValue(), pebble.Sync); err != nil {
			return fmt.Errorf("upgrading the format marker of %s: %v", dir, err)
		}
	}
	return nil
}

// openWritable opens (or creates) the database in dir for writing and
// checks that it is limitkv's and of a format this binary reads. It runs
// in the snapshot worker, or in the server's process in in-process mode.
func openWritable(dir string, o *pebble.Options, note *corruptionNote) (*pebble.DB, error) {
	exists, err := listDir(o.FS, dir)
	if err != nil {
		return nil, err
	}
	if !exists {
		if err := o.FS.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("data directory %s: %w", dir, err)
		}
	}
	o.ErrorIfNotExists = exists
	db, err := openPebble(dir, o)
	switch {
	case err == nil:
	case errors.Is(err, ErrLocked):
		return nil, err
	case pebble.IsCorruptionError(err):
		return nil, damaged(dir, err, note)
	default:
		return nil, fmt.Errorf("opening %s: %w", dir, err)
	}
	if err := checkMeta(db, dir, note, true); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// loadLogger routes the read-only handle's logs to slog. Its Fatalf is
// reached only for an inconsistency Pebble cannot continue from; the load
// runs before the server serves anything, and Fatalf must not return, so
// it ends the process with a message rather than park the caller.
type loadLogger struct {
	log *slog.Logger
	dir string
}

func (l loadLogger) Infof(format string, args ...any) {
	l.log.Debug("pebble: " + fmt.Sprintf(format, args...))
}

func (l loadLogger) Errorf(format string, args ...any) {
	l.log.Warn("pebble: " + fmt.Sprintf(format, args...))
}

func (l loadLogger) Fatalf(format string, args ...any) {
	l.log.Error("cannot load the data directory", "dir", l.dir, "err", fmt.Sprintf(format, args...), "hint", recoverHint)
	os.Exit(1)
}

// openReadOnly opens an existing database for the load. Read-only, Pebble
// writes nothing (the write-ahead log is replayed into memory), so the
// server loads its keyspace on a full disk too.
func openReadOnly(dir string, fsys vfs.FS, log *slog.Logger, note *corruptionNote) (*pebble.DB, error) {
	o := &pebble.Options{
		FS:               fsys,
		Logger:           loadLogger{log, dir},
		ReadOnly:         true,
		ErrorIfNotExists: true,
		EventListener:    &pebble.EventListener{DataCorruption: note.record},
	}
	db, err := openPebble(dir, o)
	switch {
	case err == nil:
	case errors.Is(err, ErrLocked):
		return nil, err
	case pebble.IsCorruptionError(err):
		return nil, damaged(dir, err, note)
	default:
		return nil, fmt.Errorf("%w: opening %s: %v", ErrDamaged, dir, err)
	}
	if err := checkMeta(db, dir, note, false); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// Operations sent to a writer, one after another in a byte slice:
//
//	's' key length (uvarint) key value length (uvarint) value   set
//	'd' key length (uvarint) key                                 delete
//	'r' start length (uvarint) start end length (uvarint) end    delete range
//	'S' key length (uvarint) key value length (uvarint)          set a large value...
//	'v' length (uvarint) bytes                                   ...whose bytes follow in parts
//	'a'                                                          abandon the large value
//
// A large value is sent in parts, in as many chunks of operations as it
// takes, so that neither the server nor the worker holds it whole besides
// the batch: the server copies it from the keyspace a part at a time, and
// the writer copies each part into the batch. Nothing else comes between
// 'S' and its last part, or 'a': the server abandons a value that changed
// while it was being copied, and the writer leaves what it has in the
// batch, where a later operation on the same key (the value copied again,
// or a deletion) overrides it before the batch is committed.
const (
	opSet         byte = 's'
	opDelete      byte = 'd'
	opDeleteRange byte = 'r'
	opSetLarge    byte = 'S'
	opPart        byte = 'v'
	opAbandon     byte = 'a'
)

func appendSet(dst, key, value []byte) []byte {
	dst = append(dst, opSet)
	return appendBytes(appendBytes(dst, key), value)
}

func appendDelete(dst, key []byte) []byte {
	return appendBytes(append(dst, opDelete), key)
}

func appendDeleteRange(dst, start, end []byte) []byte {
	dst = append(dst, opDeleteRange)
	return appendBytes(appendBytes(dst, start), end)
}

func appendSetLarge(dst, key []byte, n int) []byte {
	dst = appendBytes(append(dst, opSetLarge), key)
	return binary.AppendUvarint(dst, uint64(n))
}

func appendPart(dst, part []byte) []byte {
	return appendBytes(append(dst, opPart), part)
}

// maxBatch bounds a batch: Pebble panics past 4 GB.
const maxBatch = math.MaxUint32 - 1<<20

// batchBuilder builds the batch of a snapshot from encoded operations,
// in the worker (or a local writer). The first error is kept, and the
// batch is then discarded at the commit.
type batchBuilder struct {
	b   *pebble.Batch
	err error
	// A large value being filled: large.Value[:filled] has arrived.
	large  pebble.DeferredBatchOp
	filled int
	open   bool
}

// add applies a chunk of operations to the batch, which it starts if
// need be.
func (bb *batchBuilder) add(db *pebble.DB, ops []byte) {
	if bb.b == nil {
		bb.b = db.NewBatch()
	}
	if err := bb.apply(ops); err != nil && bb.err == nil {
		bb.err = err
	}
}

func (bb *batchBuilder) apply(ops []byte) error {
	r := opReader{b: ops}
	for len(r.b) > 0 && r.err == nil {
		op := r.b[0]
		r.b = r.b[1:]
		if bb.open && op != opPart && op != opAbandon {
			return fmt.Errorf("snapshot operation %q inside a large value", op)
		}
		switch op {
		case opSet:
			k, v := r.bytes(), r.bytes()
			if r.err == nil {
				if err := bb.room(len(k) + len(v)); err != nil {
					return err
				}
				bb.b.Set(k, v, nil)
			}
		case opDelete:
			k := r.bytes()
			if r.err == nil {
				bb.b.Delete(k, nil)
			}
		case opDeleteRange:
			s, e := r.bytes(), r.bytes()
			if r.err == nil {
				bb.b.DeleteRange(s, e, nil)
			}
		case opSetLarge:
			k, n := r.bytes(), r.uvarint()
			if r.err != nil {
				break
			}
			if n > maxBatch {
				return fmt.Errorf("a value of %d bytes is more than a snapshot batch holds", n)
			}
			if err := bb.room(len(k) + int(n)); err != nil {
				return err
			}
			bb.large = *bb.b.SetDeferred(len(k), int(n))
			copy(bb.large.Key, k)
			bb.filled, bb.open = 0, true
			if n == 0 {
				bb.finishLarge()
			}
		case opPart:
			p := r.bytes()
			if r.err != nil {
				break
			}
			if !bb.open || len(p) > len(bb.large.Value)-bb.filled {
				return errors.New("a part past the end of a large value")
			}
			bb.filled += copy(bb.large.Value[bb.filled:], p)
			if bb.filled == len(bb.large.Value) {
				bb.finishLarge()
			}
		case opAbandon:
			if !bb.open {
				return errors.New("abandoning no large value")
			}
			bb.finishLarge()
		default:
			return fmt.Errorf("unknown snapshot operation %q", op)
		}
	}
	return r.err
}

// room refuses an operation that would take the batch past maxBatch.
func (bb *batchBuilder) room(n int) error {
	if uint64(bb.b.Len())+uint64(n) > maxBatch {
		return fmt.Errorf("a snapshot batch of more than %d bytes", uint64(maxBatch))
	}
	return nil
}

func (bb *batchBuilder) finishLarge() {
	bb.large.Finish()
	bb.large, bb.filled, bb.open = pebble.DeferredBatchOp{}, 0, false
}

// take hands over the batch built (nil if none) and the first error, and
// starts afresh.
func (bb *batchBuilder) take() (*pebble.Batch, error) {
	b, err := bb.b, bb.err
	if bb.open && err == nil {
		err = errors.New("a large value was cut short")
	}
	*bb = batchBuilder{}
	return b, err
}

// drop discards the batch built.
func (bb *batchBuilder) drop() {
	if bb.b != nil {
		bb.b.Close()
	}
	*bb = batchBuilder{}
}

// spaceReserve is the free space a commit leaves at least: a memtable's
// flush and a new write-ahead log (Pebble preallocates 110% of a 4 MB
// memtable) should still fit. On a small disk it is a tenth of the disk.
const spaceReserve = 10 << 20

// checkSpace refuses a commit of size bytes that the disk has no room
// for: the batch goes to the write-ahead log, then to a table. Committing
// it would fail halfway, and Pebble answers a failed log write by
// stopping; refused here, the commit fails cleanly and nothing is written.
// A filesystem that cannot tell is not checked.
func checkSpace(fsys vfs.FS, dir string, size int) error {
	du, err := fsys.GetDiskUsage(dir)
	if err != nil {
		return nil
	}
	need := 2*uint64(size) + min(spaceReserve, du.TotalBytes/10)
	if du.AvailBytes >= need {
		return nil
	}
	return &os.PathError{Op: "snapshot", Path: dir, Err: fmt.Errorf("%w (%s free, a snapshot of %s needs %s)",
		syscall.ENOSPC, mb(du.AvailBytes), mb(uint64(size)), mb(need))}
}

func mb(n uint64) string { return fmt.Sprintf("%.1f MB", float64(n)/(1<<20)) }
