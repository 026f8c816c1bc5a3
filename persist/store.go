package persist

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/limitkv/limitkv/engine"
)

// Options configure a Store.
type Options struct {
	Dir    string
	FS     vfs.FS // for the load and an in-process writer; nil: the operating system's
	Log    *slog.Logger
	Limits func() engine.Limits // compact-encoding limits for rebuilt values
	// Worker starts the snapshot worker that writes the database (see
	// worker.go). Nil writes in this process, which cannot survive Pebble's
	// reaction to a failing disk: for tests only.
	Worker *WorkerCommand
	// OpTimeout bounds every wait on the writer: starting it, sending it a
	// chunk of changes, a commit. Past it the worker is killed and the
	// snapshot fails. Zero means 30 seconds.
	OpTimeout time.Duration
	// After a failed snapshot the periodic ones wait RetryMin, doubling at
	// each failure up to RetryMax, before they try again (a new worker
	// included); SAVE and shutdown try at once. Zero means 1s and 30s.
	RetryMin, RetryMax time.Duration
	// Position, if set, gives the replication position (id, offset) a
	// snapshot records, when ok: read before the snapshot captures
	// anything, with the keyspace held at that position (no replicated
	// change applied) until release, which the snapshot calls once it has
	// captured every change. rebuilding says that the keyspace is being
	// replaced by a full sync and stands at no position: the snapshot
	// captures nothing and fails with ErrRebuilding.
	Position func() (id string, off int64, release func(), ok, rebuilding bool)
	// Functions, if set, gives the function libraries a snapshot keeps:
	// an encoding the store does not read (nil: none), and a number that
	// changes whenever they do. They are written when that number differs
	// from the one last written, and read back by Functions.
	Functions func() (libs []byte, gen uint64)
	// Policies, if set, gives the named rate-limit policies a snapshot
	// keeps, as Functions does the libraries; read back by Policies.
	Policies func() (policies []byte, gen uint64)
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
	// LastPause is the longest time the last snapshot held a shard's lock.
	LastPause time.Duration
	// SavedChanges is the engine's change count (engine.Changes) that
	// the data directory holds: read before the last successful capture
	// (or after the load). What the engine counts beyond it is Redis's
	// rdb_changes_since_last_save.
	SavedChanges int64
}

// Store keeps an engine's keyspace in a Pebble database: loaded at
// start-up through a read-only handle, written by snapshots through a
// writer (a worker process in the server).
type Store struct {
	opts Options
	eng  *engine.Engine
	log  *slog.Logger

	// sem admits one snapshot (or the load, or Close) at a time; a
	// channel rather than a mutex so that a caller with a deadline can
	// give up waiting behind a snapshot stuck on a failing disk.
	sem chan struct{}
	// group is the Sync whose snapshot has not begun yet: callers until
	// it begins share it.
	groupMu sync.Mutex
	group   *syncGroup
	ro      *pebble.DB // the read-only handle, between Open and Load
	wMu     sync.Mutex // guards w for Close, which may not get sem
	w       writer     // nil until started, and after it failed
	// Periodic snapshots wait until retryAt after a failure.
	retryAt time.Time
	backoff time.Duration
	damage  error    // the directory is damaged: no snapshot can succeed
	stale   [][]byte // keys found expired at the load, deleted by the next snapshot
	note    corruptionNote
	fails   failureLog

	// lock: the server's hold on the directory, from Open to Close
	// (dirlock.go).
	lock io.Closer

	// sealed: nothing more may be written (Seal).
	sealed atomic.Bool

	throttle *logThrottle // for the worker's crash reports
	onPause  atomic.Pointer[func(time.Duration)]
	statsMu  sync.Mutex
	stats    Stats
	running  atomic.Bool

	logs [][]byte // recycled change-log buffers, one per shard
	// posID and posOff: the replication position the loaded snapshot
	// recorded.
	posID  string
	posOff int64
	buf    []byte // value encoding scratch
	kbuf   []byte // key encoding scratch
	stage  []byte // operations captured, not yet sent to the writer

	// funcs: the function libraries the loaded snapshot kept; fnGen: the
	// generation of those the last snapshot wrote.
	funcs []byte
	fnGen uint64
	// pols and polGen: the same for the rate-limit policies.
	pols   []byte
	polGen uint64
}

// Open checks the data directory and, if it holds a database, opens it
// read-only for Load. A directory that is not limitkv's, of a newer
// format or damaged is refused with a message naming it, never emptied.
func Open(eng *engine.Engine, o Options) (*Store, error) {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.OpTimeout == 0 {
		o.OpTimeout = 30 * time.Second
	}
	if o.RetryMin == 0 {
		o.RetryMin = time.Second
	}
	if o.RetryMax == 0 {
		o.RetryMax = 30 * time.Second
	}
	s := &Store{
		opts: o, eng: eng, log: o.Log, sem: make(chan struct{}, 1),
		logs: make([][]byte, engine.Shards), throttle: newLogThrottle(time.Minute),
	}
	// A foreign directory is refused before anything is created in it.
	exists, err := listDir(o.FS, o.Dir)
	if err != nil {
		return nil, err
	}
	if err := o.FS.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("data directory %s: %w", o.Dir, err)
	}
	if s.lock, err = lockDir(o.FS, o.Dir); err != nil {
		return nil, err
	}
	if exists {
		if s.ro, err = openReadOnly(o.Dir, o.FS, s.log, &s.note); err != nil {
			s.lock.Close()
			return nil, err
		}
	}
	return s, nil
}

// Load reads the snapshot into the engine (which should be empty), turns
// on change tracking and starts the writer. Keys that expired while the
// server was down are not loaded, and the next snapshot deletes them.
//
// A directory that is damaged, or that another process uses, is an error.
// A writer that cannot start for another reason (a full disk) is not: the
// server serves, INFO reports the failure and snapshots keep retrying.
func (s *Store) Load(now int64) (int, error) {
	start := time.Now()
	s.sem <- struct{}{}
	defer func() { <-s.sem }()
	loaded := 0
	if s.ro != nil {
		if v, closer, err := s.ro.Get(replKey); err == nil {
			s.posID, s.posOff, _ = parseRepl(v)
			closer.Close()
		}
		if v, closer, err := s.ro.Get(funcKey); err == nil {
			s.funcs = append([]byte(nil), v...)
			closer.Close()
		}
		if v, closer, err := s.ro.Get(policyKey); err == nil {
			s.pols = append([]byte(nil), v...)
			closer.Close()
		}
		// The keys loaded are no command's: none is a keyspace event.
		notes := s.eng.Notes()
		s.eng.SetNotes(0, nil)
		n, err := s.loadFrom(s.ro, now)
		s.eng.SetNotes(notes, nil)
		cerr := s.ro.Close()
		s.ro = nil
		if err == nil && cerr != nil {
			err = fmt.Errorf("%w: %s: %v", ErrDamaged, s.opts.Dir, cerr)
		}
		if err != nil {
			return n, err
		}
		loaded = n
	}
	s.eng.TrackChanges(true)
	s.statsMu.Lock()
	s.stats.SavedChanges = s.eng.Changes(false)
	s.stats.Loaded = loaded
	s.stats.LoadDuration = time.Since(start)
	s.stats.LastSuccess = time.Now()
	s.stats.LastOK = true
	s.statsMu.Unlock()

	wstart := time.Now()
	if err := s.startWriter(context.Background()); err != nil {
		if refusedAtStart(err) {
			return loaded, err
		}
		s.failed(wstart, 0, 0, err)
		return loaded, nil
	}
	if len(s.stale) > 0 {
		s.deleteStale()
	}
	return loaded, nil
}

// Position returns the replication position the loaded snapshot recorded
// ("" when none).
func (s *Store) Position() (string, int64) { return s.posID, s.posOff }

// Functions returns the function libraries the loaded snapshot kept, as
// Options.Functions gave them (nil when none).
func (s *Store) Functions() []byte { return s.funcs }

// Policies returns the rate-limit policies the loaded snapshot kept, as
// Options.Policies gave them (nil when none).
func (s *Store) Policies() []byte { return s.pols }

// refusedAtStart reports whether a writer that cannot start makes the
// start-up fail: for a directory that is not usable as configured (in use,
// foreign, newer, damaged, not allowed). A disk that is full or fails is
// not such a reason: the server serves what it loaded and retries.
func refusedAtStart(err error) bool {
	for _, target := range []error{ErrLocked, ErrForeign, ErrNewerFormat, ErrDamaged} {
		if errors.Is(err, target) {
			return true
		}
	}
	return isDenied(err)
}

// deleteStale deletes the keys found expired at the load; if it cannot,
// the next snapshot does.
func (s *Store) deleteStale() {
	var ops []byte
	for _, k := range s.stale {
		ops = appendDelete(ops, k)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.OpTimeout)
	defer cancel()
	err := s.w.write(ctx, ops)
	if err == nil {
		err = s.w.commit(ctx)
	}
	if err != nil {
		s.log.Warn("could not delete keys that expired while the server was down; the next snapshot will", "keys", len(s.stale), "err", err)
		if !s.w.usable() {
			s.dropWriter()
		}
		return
	}
	s.stale = nil
}

func (s *Store) loadFrom(db *pebble.DB, now int64) (int, error) {
	dir := s.opts.Dir
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{tagKey}, UpperBound: []byte{tagKey + 1}})
	if err != nil {
		return 0, readFailed(dir, err, &s.note)
	}
	defer it.Close()
	lim := s.limits()
	loaded := 0
	for ok := it.First(); ok; ok = it.Next() {
		db, key, kok := parseDataKey(it.Key())
		if !kok {
			return loaded, fmt.Errorf("%w: %s: bad key %q", ErrDamaged, dir, it.Key())
		}
		if db >= s.eng.Databases() {
			return loaded, fmt.Errorf("%s holds keys of database %d but the server has %d databases (set --databases)", dir, db, s.eng.Databases())
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return loaded, readFailed(dir, fmt.Errorf("reading key %q: %w", key, err), &s.note)
		}
		exp, err := engine.ValueExpireAt(v)
		if err == nil && exp != 0 && now > exp {
			s.stale = append(s.stale, append([]byte(nil), it.Key()...))
			continue
		}
		if err == nil {
			sh := s.eng.ShardFor(key)
			sh.Lock()
			err = sh.StoreValue(db, key, v, lim)
			sh.Unlock()
		}
		if err != nil {
			return loaded, fmt.Errorf("%w: %s: key %q of database %d: %v", ErrDamaged, dir, key, db, err)
		}
		loaded++
	}
	if err := it.Error(); err != nil {
		return loaded, readFailed(dir, err, &s.note)
	}
	return loaded, nil
}

func (s *Store) limits() engine.Limits {
	if s.opts.Limits != nil {
		return s.opts.Limits()
	}
	return engine.DefaultLimits
}

// startWriter starts the writer: a worker process, or Pebble in this
// process when Options.Worker is nil.
func (s *Store) startWriter(ctx context.Context) error {
	var w writer
	if s.opts.Worker == nil {
		lw, err := openLocal(s.opts.Dir, s.opts.FS, s.log)
		if err != nil {
			return err
		}
		w = lw
	} else {
		ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
		defer cancel()
		pw, err := startWorker(ctx, s.opts.Worker, s.opts.Dir, s.log, s.throttle)
		if err != nil {
			return err
		}
		s.log.Debug("snapshot worker started", "pid", pw.cmd.Process.Pid)
		w = pw
	}
	s.wMu.Lock()
	s.w = w
	s.wMu.Unlock()
	return nil
}

// dropWriter kills the writer after a failure that left it unusable.
func (s *Store) dropWriter() {
	s.wMu.Lock()
	w := s.w
	s.w = nil
	s.wMu.Unlock()
	if w != nil {
		w.kill()
	}
}

// captureChunk bounds the keys captured per lock acquisition, so that a
// large snapshot never holds a shard long (about 100 µs per chunk).
const captureChunk = 512

// sendChunk is the size at which captured operations go to the writer.
const sendChunk = 256 << 10

// Snapshot writes every key changed since the last snapshot, in one synced
// batch. It waits for the writer OpTimeout at most per step.
func (s *Store) Snapshot() error { return s.snapshot(context.Background(), false) }

// SnapshotContext is Snapshot, giving up when ctx ends (the final snapshot
// at shutdown has a few seconds).
func (s *Store) SnapshotContext(ctx context.Context) error { return s.snapshot(ctx, false) }

// ErrSealed is the answer of every snapshot after Seal.
var ErrSealed = errors.New("snapshots are sealed: the server is stopping without saving")

// Seal stops every later snapshot, and one being captured, from writing
// anything: the server is stopping without saving (SHUTDOWN NOSAVE), and
// it may do so by killing a script halfway, whose partial effects must
// never reach the disk. A script holds every shard lock while it runs, so
// a snapshot captures either none of it or, once the kill released the
// locks, the half that Seal keeps from being committed.
func (s *Store) Seal() { s.sealed.Store(true) }

// ErrRebuilding is the answer of a snapshot taken while a replica's full
// sync replaces the keyspace in place: what memory holds is neither the
// old dataset nor the new one, so the data directory keeps the old one
// until a snapshot after the sync writes the new one, whole, in one batch.
// It is not a failure.
var ErrRebuilding = errors.New("not saved: a full sync from the master is replacing the keyspace; the data directory keeps the dataset from before it")

// errWaiting is the answer of a periodic snapshot skipped while the
// store waits to retry after a failure.
var errWaiting = errors.New("waiting to retry after a failed snapshot")

// snapshot captures the changes and streams them to the writer, which
// builds the batch and commits it. It holds a shard's lock only while
// copying a chunk of that shard's changed entries into a small staging
// buffer, never across I/O. On failure the changes are marked again, so
// that the next snapshot retries them; a batch is atomic and its
// operations idempotent, so a commit whose outcome is unknown (a worker
// that died) is simply written again.
func (s *Store) snapshot(ctx context.Context, periodic bool) error {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("a snapshot is still running: %w", context.Cause(ctx))
	}
	defer func() { <-s.sem }()
	return s.snapshotHeld(ctx, periodic)
}

// syncGroup is one snapshot that Sync callers share.
type syncGroup struct {
	done chan struct{}
	err  error
}

// Sync returns once every change made before it was called is on disk,
// or the snapshot that was to write it failed. Callers that come while
// one snapshot waits to begin share it (a group commit): an imported key
// is acknowledged only once it is durable, at the cost of one snapshot
// per batch of them rather than per key.
func (s *Store) Sync(ctx context.Context) error {
	s.groupMu.Lock()
	g := s.group
	if g == nil {
		g = &syncGroup{done: make(chan struct{})}
		s.group = g
		go s.runGroup(g)
	}
	s.groupMu.Unlock()
	select {
	case <-g.done:
		return g.err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// runGroup takes g's snapshot once no other runs. From then on, callers
// start a new group: this snapshot may miss their changes.
func (s *Store) runGroup(g *syncGroup) {
	s.sem <- struct{}{}
	s.groupMu.Lock()
	if s.group == g {
		s.group = nil
	}
	s.groupMu.Unlock()
	g.err = s.snapshotHeld(context.Background(), false)
	<-s.sem
	close(g.done)
}

// snapshotHeld is snapshot for a caller that holds sem.
func (s *Store) snapshotHeld(ctx context.Context, periodic bool) error {
	if periodic && time.Now().Before(s.retryAt) {
		return errWaiting
	}
	if s.sealed.Load() {
		return ErrSealed
	}
	s.running.Store(true)
	defer s.running.Store(false)
	start := time.Now()
	if s.damage != nil {
		s.failed(start, 0, 0, s.damage)
		return s.damage
	}
	if s.w == nil {
		if err := s.startWriter(ctx); err != nil {
			s.failed(start, 0, 0, err)
			return err
		}
	}
	c, err := s.capture(ctx)
	keys, size := c.keys, c.size
	if errors.Is(err, ErrSealed) || errors.Is(err, ErrRebuilding) {
		return err // not a failure: nothing may be saved now
	}
	if err != nil {
		s.failed(start, keys, size, err)
		return err
	}
	s.stale = nil
	if periodic && c.ops == 0 {
		// Nothing was dirty: the directory already held everything. Not
		// a save (LASTSAVE, snapshot_count and the failure state stay);
		// only the changes it accounts for are known to be on disk.
		s.statsMu.Lock()
		s.stats.SavedChanges = c.changes
		s.statsMu.Unlock()
		return nil
	}
	s.backoff, s.retryAt = 0, time.Time{}
	s.record(start, keys, size, nil)
	s.statsMu.Lock()
	s.stats.SavedChanges = c.changes
	s.statsMu.Unlock()
	if s.fails.failing {
		s.log.Info("snapshots succeed again", "failed_attempts", s.fails.attempts, "since", s.fails.since.Format(time.RFC3339))
		s.fails = failureLog{}
	}
	return nil
}

// largeValue is the size past which a value is sent in parts of that
// size (pebble.go), rather than staged whole.
const largeValue = sendChunk

// keepBuffer bounds the scratch buffers a store keeps between snapshots.
const keepBuffer = 1 << 20

// bigValue is a value too large to stage, sent once the shard's lock is
// released: a string captured from the change log, copied from the
// keyspace a part at a time (e set), or a value encoded whole (enc set).
type bigValue struct {
	sh   *engine.Shard
	db   int
	key  []byte // the key in the keyspace, for a string
	dkey []byte // the Pebble key
	e    engine.Entry
	enc  []byte
}

// capture sends every change to the writer and commits. On failure the
// changes taken are marked to be retried.
//
// A big value costs the server no copy of its own: a string changed since
// the last snapshot (SET of a 256 MB value) is copied from the keyspace a
// part at a time, the shard locked per part, and the writer copies each
// part into its batch. Staged whole, it used to be copied twice (the
// encoding buffer, kept for the next snapshot, and the staging buffer),
// three times the value at the peak.
// captured is what a capture did: the keys it wrote or deleted, the bytes
// it sent, the operations of its batch (0: nothing was dirty), and the
// engine's change count read before it took anything, which the batch
// covers.
type captured struct {
	keys    int
	size    int64
	ops     int
	changes int64
}

func (s *Store) capture(ctx context.Context) (c captured, err error) {
	keys, size, ops := 0, int64(0), 0
	defer func() { c.keys, c.size, c.ops = keys, size, ops }()
	var longest time.Duration // the longest hold of a shard's lock
	held := func(since time.Time) { longest = max(longest, time.Since(since)) }
	defer func() { s.notePause(longest) }()
	w := s.w
	now := s.eng.Now()
	var pos []byte
	var release func()
	if s.opts.Position != nil {
		id, off, rel, ok, rebuilding := s.opts.Position()
		if rebuilding {
			return c, ErrRebuilding
		}
		if release = rel; ok {
			pos = replValue(id, off)
		}
	}
	releaseOnce := func() {
		if release != nil {
			release()
			release = nil
		}
	}
	defer releaseOnce()
	var funcs []byte
	fnGen, fnChanged := s.fnGen, false
	if s.opts.Functions != nil {
		funcs, fnGen = s.opts.Functions()
		fnChanged = fnGen != s.fnGen
	}
	var pols []byte
	polGen, polChanged := s.polGen, false
	if s.opts.Policies != nil {
		pols, polGen = s.opts.Policies()
		polChanged = polGen != s.polGen
	}
	// Every change counted so far is in a change log or a flush mark
	// taken below: the batch covers at least these.
	c.changes = s.eng.Changes(false)
	flushed := s.eng.TakeFlushed()
	taken := make([][]byte, engine.Shards)
	var encErr, sendErr error
	stage := s.stage[:0]
	send := func(force bool) {
		if sendErr != nil || len(stage) == 0 || (!force && len(stage) < sendChunk) {
			return
		}
		octx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
		sendErr = w.write(octx, stage)
		cancel()
		size += int64(len(stage))
		stage = stage[:0]
	}
	var bigs []bigValue // sent after the chunk that found them
	// put stages a live entry; captured says it came from Capture, so
	// that a big string may be copied later, a part at a time, as long as
	// Unchanged says it may.
	put := func(sh *engine.Shard, db int, key []byte, e engine.Entry, captured bool) {
		keys++
		ops++
		if n, err := e.StrLen(); captured && err == nil && n > largeValue {
			bigs = append(bigs, bigValue{sh: sh, db: db, key: key, dkey: dataKey(nil, db, key), e: e})
			return
		}
		var err error
		s.buf, err = engine.AppendValue(s.buf[:0], sh, e)
		if err != nil {
			encErr = err
			return
		}
		if len(s.buf) > largeValue {
			bigs = append(bigs, bigValue{dkey: dataKey(nil, db, key), enc: s.buf})
			s.buf = nil
			return
		}
		s.kbuf = dataKey(s.kbuf[:0], db, key)
		stage = appendSet(stage, s.kbuf, s.buf)
	}
	del := func(key []byte) {
		stage = appendDelete(stage, key)
		keys++
		ops++
	}
	// sendEncoded sends a value encoded whole: staged, or in parts.
	sendEncoded := func(dkey, enc []byte) {
		if len(enc) <= largeValue {
			stage = appendSet(stage, dkey, enc)
			return
		}
		stage = appendSetLarge(stage, dkey, len(enc))
		for off := 0; off < len(enc) && sendErr == nil; {
			k := min(len(enc)-off, largeValue)
			stage = appendPart(stage, enc[off:off+k])
			off += k
			send(true)
		}
	}
	// sendString copies a big string a part at a time. If it changed
	// since its capture, what was sent is abandoned and the key captured
	// again, and sent whole: a string changed faster than it is copied is
	// still saved.
	sendString := func(b bigValue) {
		var scratch, head [24]byte
		started, off := false, 0
		for sendErr == nil {
			b.sh.Lock()
			t0 := time.Now()
			if !b.sh.Unchanged(b.db, b.key, b.e, now) {
				if started {
					stage = append(stage, opAbandon)
				}
				e, live, _ := b.sh.Capture(b.db, b.key, now)
				var enc []byte
				var err error
				if live {
					enc, err = engine.AppendValue(nil, b.sh, e)
				}
				held(t0)
				b.sh.Unlock()
				switch {
				case !live:
					stage = appendDelete(stage, b.dkey)
				case err != nil:
					encErr = err
				default:
					sendEncoded(b.dkey, enc)
				}
				send(false)
				return
			}
			v, _ := b.e.StringOf(scratch[:0])
			if !started {
				h := engine.AppendStringHead(head[:0], b.e)
				stage = appendSetLarge(stage, b.dkey, len(h)+len(v))
				stage = appendPart(stage, h)
				started = true
			}
			k := min(len(v)-off, largeValue)
			stage = appendPart(stage, v[off:off+k])
			off += k
			held(t0)
			b.sh.Unlock()
			send(true)
			if off == len(v) {
				return
			}
		}
	}
	// afterChunk sends what a chunk staged, then its big values, with no
	// lock held.
	afterChunk := func() {
		send(false)
		for i := range bigs {
			if sendErr == nil && encErr == nil {
				if bigs[i].enc != nil {
					sendEncoded(bigs[i].dkey, bigs[i].enc)
				} else {
					sendString(bigs[i])
				}
			}
			bigs[i] = bigValue{}
		}
		bigs = bigs[:0]
		// The capture gives way after every chunk: with as many
		// processors as cores, a goroutine that never blocks keeps its
		// processor until Go preempts it, 10 ms, while an event loop
		// with requests waits for one.
		runtime.Gosched()
	}
	for _, k := range s.stale {
		del(k)
	}
	// A flushed or swapped database is rewritten whole: a range deletion,
	// then every key it holds now.
	for _, db := range flushed {
		stage = appendDeleteRange(stage, dbPrefix(db), dbEnd(db))
		ops++
		for i := 0; i < engine.Shards && sendErr == nil; i++ {
			sh := s.eng.Shard(i)
			for from := 0; from >= 0 && sendErr == nil; {
				sh.Lock()
				t0 := time.Now()
				from = sh.Keys(db, from, captureChunk, now, func(e engine.Entry) { put(sh, db, e.Key(), e, false) })
				held(t0)
				sh.Unlock()
				afterChunk()
			}
		}
	}
	for i := 0; i < engine.Shards && sendErr == nil; i++ {
		sh := s.eng.Shard(i)
		sh.Lock()
		taken[i] = sh.TakeChanges(s.logs[i])
		sh.Unlock()
		log := taken[i]
		for len(log) > 0 && sendErr == nil {
			sh.Lock()
			t0 := time.Now()
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
					put(sh, db, key, e, true)
				default:
					s.kbuf = dataKey(s.kbuf[:0], db, key)
					del(s.kbuf)
				}
			}
			held(t0)
			sh.Unlock()
			afterChunk()
		}
	}
	releaseOnce() // every change is captured: the stream may go on
	switch {
	case !fnChanged:
	case len(funcs) == 0:
		stage = appendDelete(stage, funcKey)
		ops++
	default:
		stage = appendSet(stage, funcKey, funcs)
		ops++
	}
	switch {
	case !polChanged:
	case len(pols) == 0:
		stage = appendDelete(stage, policyKey)
		ops++
	default:
		stage = appendSet(stage, policyKey, pols)
		ops++
	}
	if pos != nil && ops > 0 {
		stage = appendSet(stage, replKey, pos)
	}
	if encErr == nil {
		send(true)
	}
	// Kept for the next snapshot, unless a big value or key grew them.
	if cap(stage) <= keepBuffer {
		s.stage = stage[:0]
	} else {
		s.stage = nil
	}
	if cap(s.buf) > keepBuffer {
		s.buf = nil
	}
	if cap(s.kbuf) > keepBuffer {
		s.kbuf = nil
	}
	octx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	switch {
	case s.sealed.Load():
		// Checked after the capture: it may have waited on a shard lock
		// behind the very script whose kill sealed the store.
		err = ErrSealed
		if derr := w.discard(octx); derr != nil {
			err = errors.Join(err, derr)
		}
	case sendErr != nil:
		err = sendErr
	case encErr != nil:
		err = encErr
		if derr := w.discard(octx); derr != nil {
			err = errors.Join(err, derr)
		}
	case ops > 0:
		err = w.commit(octx)
	}
	if err != nil {
		s.retryLater(taken, flushed)
		return c, err
	}
	for i := range taken {
		if taken[i] != nil {
			s.logs[i] = taken[i][:0]
		}
	}
	s.fnGen = fnGen
	s.polGen = polGen
	return c, nil
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

// failureLog keeps a failing disk from flooding the log: the first
// failure is logged, then one line a minute at most while they go on, and
// one when snapshots succeed again.
type failureLog struct {
	failing  bool
	since    time.Time
	attempts int
	logged   time.Time
}

const failureLogPeriod = time.Minute

// failed records a failed snapshot: the writer is dropped if it cannot go
// on, periodic snapshots back off, and the failure is logged (throttled).
func (s *Store) failed(start time.Time, keys int, size int64, err error) {
	s.wMu.Lock()
	w := s.w
	s.wMu.Unlock()
	if w != nil && !w.usable() {
		s.dropWriter()
	}
	if errors.Is(err, ErrDamaged) && s.damage == nil {
		s.damage = err
	}
	if s.backoff == 0 {
		s.backoff = s.opts.RetryMin
	} else {
		s.backoff = min(2*s.backoff, s.opts.RetryMax)
	}
	s.retryAt = time.Now().Add(s.backoff)
	s.record(start, keys, size, err)
	now := time.Now()
	f := &s.fails
	if !f.failing {
		*f = failureLog{failing: true, since: now, attempts: 1, logged: now}
		s.log.Error("snapshot failed; the changes are kept for the next attempt", "err", err, "keys", keys, "retry_in", s.backoff)
		return
	}
	f.attempts++
	if now.Sub(f.logged) >= failureLogPeriod {
		f.logged = now
		s.log.Error("snapshot still failing", "attempts", f.attempts, "since", f.since.Format(time.RFC3339), "err", err)
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

// OnPause makes fn be told, after each snapshot's capture, the longest
// time it held one shard's lock: how long commands on that shard may have
// waited for it (the latency monitor's "snapshot" event).
func (s *Store) OnPause(fn func(time.Duration)) { s.onPause.Store(&fn) }

// notePause records the longest shard hold of a capture.
func (s *Store) notePause(d time.Duration) {
	s.statsMu.Lock()
	s.stats.LastPause = d
	s.statsMu.Unlock()
	if fn := s.onPause.Load(); fn != nil {
		(*fn)(d)
	}
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
// ctx ends. After a failure it waits longer (RetryMin doubling to
// RetryMax). A snapshot under way when ctx ends is not interrupted.
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
		s.snapshot(context.Background(), true)
	}
}

// closeWait is how long Close waits for a running snapshot before it kills
// the worker under it, and then for the worker to close the database
// before it kills it: stopping must take seconds, and a killed worker
// leaves what a crash would, which Pebble recovers from.
const closeWait = 2 * time.Second

// Close closes the database, within seconds.
func (s *Store) Close() error {
	select {
	case s.sem <- struct{}{}:
	case <-time.After(closeWait):
		// A snapshot is stuck on the worker: kill it, and the snapshot
		// ends.
		s.wMu.Lock()
		w := s.w
		s.wMu.Unlock()
		if w != nil {
			w.kill()
		}
		s.sem <- struct{}{}
	}
	defer func() { <-s.sem }()
	var err error
	if s.ro != nil {
		err = s.ro.Close()
		s.ro = nil
	}
	s.wMu.Lock()
	w := s.w
	s.w = nil
	s.wMu.Unlock()
	if w != nil {
		ctx, cancel := context.WithTimeout(context.Background(), min(s.opts.OpTimeout, 2*closeWait))
		defer cancel()
		err = errors.Join(err, w.close(ctx))
	}
	// Last: the worker has closed the database, or was killed.
	return errors.Join(err, s.lock.Close())
}
