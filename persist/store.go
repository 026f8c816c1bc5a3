package persist

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"limitkv/engine"
)

// Pebble v2 rather than v1: it is the maintained line, and its on-disk
// format is the current one, so a data directory written today stays
// readable by the releases to come.

// Options configure a Store.
type Options struct {
	Dir    string
	FS     vfs.FS // nil: the operating system's
	Log    *slog.Logger
	Limits func() Limits // compact-encoding limits for rebuilt values
	// OpTimeout bounds one Pebble operation; past it the database is
	// treated as broken (its goroutine may be stuck in a failing disk) and
	// reopened later. Zero means a minute.
	OpTimeout time.Duration
}

// Stats describe the snapshots so far, for INFO.
type Stats struct {
	LastSuccess  time.Time // of the last successful snapshot (or the load)
	LastDuration time.Duration
	LastKeys     int   // keys written or deleted by the last snapshot
	LastBytes    int64 // bytes of that batch
	InProgress   bool
	LastOK       bool
	LastError    string
	Errors       int64
	Snapshots    int64
	Loaded       int
	LoadDuration time.Duration
}

// Store keeps an engine's keyspace in a Pebble database.
type Store struct {
	opts Options
	eng  *engine.Engine
	log  *slog.Logger

	mu     sync.Mutex // one snapshot or reopen at a time
	db     *pebble.DB
	broken error // set when a Pebble failure left the handle unusable
	// A broken handle is closed, and a new one opened, in the background:
	// either may wait on a failing disk for a long time, and a snapshot
	// must not.
	closing chan struct{}
	opening chan openResult

	statsMu sync.Mutex
	stats   Stats
	running atomic.Bool

	logs [][]byte // recycled change-log buffers, one per shard
	buf  []byte   // value encoding scratch
	// stage holds a chunk of captured entries between the shard's lock
	// and the batch.
	stage []byte
	kbuf  []byte // key encoding scratch
}

// ErrForeign, ErrNewerFormat and ErrDamaged are returned by Open for a
// directory it refuses to use; it never empties one.
var (
	ErrForeign     = errors.New("not a limitkv data directory")
	ErrNewerFormat = errors.New("written by a newer limitkv")
	ErrDamaged     = errors.New("damaged data directory")
)

// Open opens (or creates) the data directory and checks that it is
// limitkv's and of a format this binary reads.
func Open(eng *engine.Engine, o Options) (*Store, error) {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.OpTimeout == 0 {
		o.OpTimeout = time.Minute
	}
	s := &Store{opts: o, eng: eng, log: o.Log, logs: make([][]byte, engine.Shards)}
	r := <-s.openAsync()
	if r.err != nil {
		return nil, r.err
	}
	s.db = r.db
	return s, nil
}

// openAsync runs openDB on a goroutine of its own and delivers its result,
// also when Pebble ends that goroutine (Fatalf): a failing disk can make
// opening take long or fail in any way, and the caller decides how long to
// wait. The result is delivered exactly once, so a handle is never lost.
func (s *Store) openAsync() chan openResult {
	out := make(chan openResult, 1)
	go func() {
		sent := false
		defer func() {
			if !sent {
				out <- openResult{nil, fmt.Errorf("%w: opening %s: pebble stopped: %v", ErrDamaged, s.opts.Dir, s.isBroken())}
			}
		}()
		db, err := s.openDB()
		sent = true
		out <- openResult{db, err}
	}()
	return out
}

// openDB opens Pebble and validates the format marker.
func (s *Store) openDB() (*pebble.DB, error) {
	dir := s.opts.Dir
	exists := false
	names, err := s.opts.FS.List(dir)
	switch {
	case err == nil && len(names) > 0:
		exists = true
		// Look before opening: Pebble would create its lock file even in a
		// directory it then refuses.
		if !hasPebbleFiles(names) {
			return nil, fmt.Errorf("%w: %s holds files but no Pebble database; refusing to use it", ErrForeign, dir)
		}
	case err != nil && !errors.Is(err, fs.ErrNotExist) && !os.IsNotExist(err):
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	if !exists {
		if err := s.opts.FS.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("data directory %s: %w", dir, err)
		}
	}
	popts := &pebble.Options{
		FS:               s.opts.FS,
		Logger:           pebbleLogger{s.log, s},
		ErrorIfNotExists: exists,
	}
	db, err := pebble.Open(dir, popts)
	if err != nil {
		return nil, fmt.Errorf("%w: opening %s: %v", ErrDamaged, dir, err)
	}
	fail := func(e error) (*pebble.DB, error) {
		db.Close()
		return nil, e
	}
	v, closer, err := db.Get(metaKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		// A new database, or someone else's Pebble database.
		it, ierr := db.NewIter(nil)
		if ierr != nil {
			return fail(fmt.Errorf("%w: %s: %v", ErrDamaged, dir, ierr))
		}
		empty := !it.First()
		it.Close()
		if !empty {
			return fail(fmt.Errorf("%w: %s is a Pebble database without limitkv's format marker; refusing to use it", ErrForeign, dir))
		}
		if err := s.guard(func() error { return db.Set(metaKey, metaValue(), pebble.Sync) }); err != nil {
			return fail(fmt.Errorf("initialising %s: %v", dir, err))
		}
	case err != nil:
		return fail(fmt.Errorf("%w: %s: reading the format marker: %v", ErrDamaged, dir, err))
	default:
		version, perr := parseMeta(v)
		closer.Close()
		if perr != nil {
			return fail(fmt.Errorf("%w: %s: %v", ErrForeign, dir, perr))
		}
		if version > formatVersion {
			return fail(fmt.Errorf("%w: %s has snapshot format %d; this limitkv reads format %d at most", ErrNewerFormat, dir, version, formatVersion))
		}
	}
	return db, nil
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

// pebbleLogger routes Pebble's logs to slog. Pebble calls Fatalf for
// failures it considers unrecoverable (a WAL or MANIFEST write that
// failed): a serving process must not exit for that, so Fatalf marks the
// store broken and ends the goroutine that hit the failure. Pebble
// operations run on goroutines of their own under guard, which notices.
type pebbleLogger struct {
	log *slog.Logger
	s   *Store
}

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug("pebble: " + fmt.Sprintf(format, args...))
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Warn("pebble: " + fmt.Sprintf(format, args...))
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.log.Error("pebble failed; snapshots will retry with the database reopened", "err", msg)
	l.s.markBroken(errors.New(msg))
	runtime.Goexit()
}

func (s *Store) markBroken(err error) {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	if s.broken == nil {
		s.broken = err
	}
}

func (s *Store) isBroken() error {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	return s.broken
}

// guard runs fn on a goroutine of its own and waits for it, at most
// OpTimeout. A goroutine that Pebble ended (Fatalf) or that hangs counts
// as a failure, and leaves the store marked broken.
func (s *Store) guard(fn func() error) error {
	done := make(chan error, 1)
	go func() {
		finished := false
		defer func() {
			if !finished {
				done <- fmt.Errorf("pebble stopped: %v", s.isBroken())
			}
		}()
		err := fn()
		finished = true
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(s.opts.OpTimeout):
		err := errors.New("pebble operation timed out")
		s.markBroken(err)
		return err
	}
}

// Load reads the snapshot into the engine (which should be empty) and then
// turns on change tracking. Keys that expired while the server was down are
// not loaded, and are deleted from disk by the next snapshot.
func (s *Store) Load(now int64) (int, error) {
	start := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tagKey}, UpperBound: []byte{tagKey + 1}})
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %v", ErrDamaged, s.opts.Dir, err)
	}
	defer it.Close()
	lim := s.limits()
	loaded := 0
	var stale [][]byte
	for ok := it.First(); ok; ok = it.Next() {
		db, key, kok := parseDataKey(it.Key())
		if !kok {
			return loaded, fmt.Errorf("%w: %s: bad key %q", ErrDamaged, s.opts.Dir, it.Key())
		}
		if db >= s.eng.Databases() {
			return loaded, fmt.Errorf("%s holds keys of database %d but the server has %d databases (set --databases)", s.opts.Dir, db, s.eng.Databases())
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return loaded, fmt.Errorf("%w: %s: reading key %q: %v", ErrDamaged, s.opts.Dir, key, err)
		}
		sh := s.eng.ShardFor(key)
		sh.Lock()
		expired, err := restore(sh, db, key, v, now, lim)
		sh.Unlock()
		if err != nil {
			return loaded, fmt.Errorf("%w: %s: key %q of database %d: %v", ErrDamaged, s.opts.Dir, key, db, err)
		}
		if expired {
			stale = append(stale, append([]byte(nil), it.Key()...))
			continue
		}
		loaded++
	}
	if err := it.Error(); err != nil {
		return loaded, fmt.Errorf("%w: %s: %v", ErrDamaged, s.opts.Dir, err)
	}
	s.eng.TrackChanges(true)
	if len(stale) > 0 {
		// Deleted now rather than logged: these keys are in no shard.
		b := s.db.NewBatch()
		for _, k := range stale {
			b.Delete(k, nil)
		}
		if err := s.guard(func() error { return b.Commit(pebble.Sync) }); err != nil {
			s.log.Warn("could not delete keys that expired while the server was down", "keys", len(stale), "err", err)
		}
	}
	s.statsMu.Lock()
	s.stats.Loaded = loaded
	s.stats.LoadDuration = time.Since(start)
	s.stats.LastSuccess = time.Now()
	s.stats.LastOK = true
	s.statsMu.Unlock()
	return loaded, nil
}

func (s *Store) limits() Limits {
	if s.opts.Limits != nil {
		return s.opts.Limits()
	}
	return Limits{
		Hash: engine.HashLimits{Entries: 512, Value: 64},
		ZSet: engine.ZSetLimits{Entries: 128, Value: 64},
	}
}

// captureChunk bounds the keys captured per lock acquisition, so that a
// large snapshot never holds a shard long (about 100 µs per chunk).
const captureChunk = 512

// Snapshot writes every key changed since the last snapshot, in one synced
// batch. It holds a shard's lock only while copying a chunk of that shard's
// changed entries into a small staging buffer, never across I/O nor while
// the batch grows: growing a batch of tens of megabytes copies it in one
// go, which stalled a shard for milliseconds and, by delaying the garbage
// collector's stop-the-world phases, every other request with it. On
// failure the changes are marked again so that the next snapshot retries
// them.
func (s *Store) Snapshot() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running.Store(true)
	defer s.running.Store(false)
	start := time.Now()
	if err := s.reopenIfBroken(); err != nil {
		s.record(start, 0, 0, err)
		return err
	}
	now := s.eng.Now()
	b := s.db.NewBatchWithSize(s.batchSizeHint())
	defer b.Close()
	flushed := s.eng.TakeFlushed()
	keys := 0
	var encErr error
	// Staged entries: [kind][key length uvarint][key][value length uvarint]
	// [value], kind 1 for a set, 0 for a deletion.
	stage := s.stage[:0]
	put := func(sh *engine.Shard, db int, key []byte, e engine.Entry) {
		var err error
		s.buf, err = encodeValue(s.buf[:0], sh, e)
		if err != nil {
			encErr = err
			return
		}
		s.kbuf = dataKey(s.kbuf[:0], db, key)
		stage = append(stage, 1)
		stage = binary.AppendUvarint(stage, uint64(len(s.kbuf)))
		stage = append(stage, s.kbuf...)
		stage = binary.AppendUvarint(stage, uint64(len(s.buf)))
		stage = append(stage, s.buf...)
		keys++
	}
	del := func(db int, key []byte) {
		s.kbuf = dataKey(s.kbuf[:0], db, key)
		stage = append(stage, 0)
		stage = binary.AppendUvarint(stage, uint64(len(s.kbuf)))
		stage = append(stage, s.kbuf...)
		keys++
	}
	// unstage moves the staged entries into the batch, outside any lock.
	unstage := func() {
		for st := stage; len(st) > 0; {
			kind := st[0]
			n, w := binary.Uvarint(st[1:])
			key := st[1+w : 1+w+int(n)]
			st = st[1+w+int(n):]
			if kind == 0 {
				b.Delete(key, nil)
				continue
			}
			n, w = binary.Uvarint(st)
			b.Set(key, st[w:w+int(n)], nil)
			st = st[w+int(n):]
		}
		stage = stage[:0]
	}
	// A flushed or swapped database is rewritten whole: a range deletion,
	// then every key it holds now.
	for _, db := range flushed {
		b.DeleteRange(dbPrefix(db), dbEnd(db), nil)
		for i := 0; i < engine.Shards; i++ {
			sh := s.eng.Shard(i)
			for from := 0; from >= 0; {
				sh.Lock()
				from = sh.Keys(db, from, captureChunk, now, func(e engine.Entry) { put(sh, db, e.Key(), e) })
				sh.Unlock()
				unstage()
			}
		}
	}
	taken := make([][]byte, engine.Shards)
	for i := 0; i < engine.Shards; i++ {
		sh := s.eng.Shard(i)
		sh.Lock()
		taken[i] = sh.TakeChanges(s.logs[i])
		sh.Unlock()
		log := taken[i]
		for len(log) > 0 {
			sh.Lock()
			for n := 0; n < captureChunk && len(log) > 0; n++ {
				db, key, rest, ok := engine.ReadChange(log)
				if !ok {
					log = nil
					break
				}
				log = rest
				e, live, skip := sh.Capture(db, key, now)
				switch {
				case skip:
				case live:
					put(sh, db, key, e)
				default:
					del(db, key)
				}
			}
			sh.Unlock()
			unstage()
		}
	}
	if cap(stage) <= 1<<20 {
		s.stage = stage[:0] // kept for the next snapshot, unless a huge value grew it
	} else {
		s.stage = nil
	}
	size := int64(b.Len())
	var err error
	switch {
	case encErr != nil:
		err = encErr
	case b.Count() > 0:
		err = s.guard(func() error { return b.Commit(pebble.Sync) })
	}
	if err != nil {
		s.retryLater(taken, flushed)
		s.record(start, keys, size, err)
		s.log.Error("snapshot failed; will retry", "err", err, "keys", keys)
		return err
	}
	for i := range taken {
		s.logs[i] = taken[i][:0]
	}
	s.record(start, keys, size, nil)
	return nil
}

// batchSizeHint guesses the bytes of the next snapshot's batch, so that
// the batch is allocated once rather than grown by copying: the keys
// changed so far at the size per key of the last snapshot (64 bytes before
// the first), a quarter more for the keys that change while it is taken.
// The batch is allocated at this size up front, so a last snapshot of a
// few huge values must not make a small one reserve gigabytes: the size
// per key counts at most 4 KiB and the hint at most 64 MiB (a larger
// batch grows as it fills, outside any lock).
func (s *Store) batchSizeHint() int {
	perKey := int64(64)
	s.statsMu.Lock()
	if s.stats.LastKeys > 0 && s.stats.LastBytes > 0 {
		perKey = min(s.stats.LastBytes/int64(s.stats.LastKeys)+1, 4<<10)
	}
	s.statsMu.Unlock()
	n := int64(s.eng.PendingChanges()) * perKey * 5 / 4
	return int(min(max(n, 1<<10), 64<<20))
}

// retryLater marks the keys of a failed snapshot as changed again.
func (s *Store) retryLater(taken [][]byte, flushed []int) {
	for i, log := range taken {
		sh := s.eng.Shard(i)
		sh.Lock()
		for len(log) > 0 {
			db, key, rest, ok := engine.ReadChange(log)
			if !ok {
				break
			}
			log = rest
			sh.MarkChanged(db, key)
		}
		for _, db := range flushed {
			sh.MarkFlushed(db)
		}
		sh.Unlock()
	}
}

type openResult struct {
	db  *pebble.DB
	err error
}

// reopenIfBroken replaces a database handle that a Pebble failure left
// unusable: it closes the old handle and opens a new one, each in the
// background, waiting for them at most OpTimeout per snapshot attempt.
// While the disk keeps failing, every attempt reports why; once it works
// again, the next attempt finds the database open.
func (s *Store) reopenIfBroken() error {
	if cause := s.isBroken(); cause != nil && s.db != nil {
		old := s.db
		s.db = nil
		s.closing = make(chan struct{})
		go func(done chan struct{}) {
			defer close(done)
			defer func() { recover() }()
			old.Close()
		}(s.closing)
		s.log.Warn("closing the snapshot database to reopen it", "after", cause)
	}
	if s.db != nil {
		return nil
	}
	wait := time.NewTimer(s.opts.OpTimeout)
	defer wait.Stop()
	if s.closing != nil {
		select {
		case <-s.closing:
			s.closing = nil
		case <-wait.C:
			return errors.New("the snapshot database is still closing after a disk failure")
		}
	}
	s.statsMu.Lock()
	s.broken = nil
	s.statsMu.Unlock()
	if s.opening == nil {
		s.opening = s.openAsync()
	}
	select {
	case r := <-s.opening:
		s.opening = nil
		if r.err != nil {
			return fmt.Errorf("reopening the snapshot database: %w", r.err)
		}
		s.db = r.db
		s.log.Info("snapshot database reopened")
		return nil
	case <-wait.C:
		return errors.New("reopening the snapshot database: still waiting for the disk")
	}
}

func (s *Store) record(start time.Time, keys int, size int64, err error) {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	s.stats.LastDuration = time.Since(start)
	s.stats.LastKeys = keys
	s.stats.LastBytes = size
	s.stats.Snapshots++
	if err != nil {
		s.stats.Errors++
		s.stats.LastOK = false
		s.stats.LastError = err.Error()
		return
	}
	s.stats.LastOK = true
	s.stats.LastSuccess = time.Now()
}

// Stats returns the snapshot statistics.
func (s *Store) Stats() Stats {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	st := s.stats
	st.InProgress = s.running.Load()
	return st
}

// Busy reports whether a snapshot is running.
func (s *Store) Busy() bool { return s.running.Load() }

// Run takes a snapshot every interval() (re-read each time; 0 pauses) until
// ctx ends.
func (s *Store) Run(ctx context.Context, interval func() time.Duration) {
	for {
		d := interval()
		if d <= 0 {
			d = time.Second
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
				continue
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
		s.Snapshot()
	}
}

// Close closes the database.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opening != nil {
		select {
		case r := <-s.opening:
			s.opening = nil
			if r.db != nil {
				s.db = r.db
			}
		case <-time.After(s.opts.OpTimeout):
		}
	}
	if s.db == nil {
		return nil
	}
	var err error
	closeErr := s.guard(func() error { err = s.db.Close(); return err })
	s.db = nil
	if closeErr != nil {
		return closeErr
	}
	return err
}
