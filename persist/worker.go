package persist

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// The snapshot worker is a child process that owns the Pebble database
// and commits the batches the server sends it. Pebble stops on a write it
// cannot complete (a panic, or a Fatalf that must not return); in the
// worker that ends the worker only, and the server reports the failure,
// keeps the changes for the next snapshot and starts a new worker later.
//
// The worker goes further than Pebble: at the first write that fails for
// want of space, or at a flush or compaction that fails, it reports why
// and exits, rather than let Pebble retry the flush in a tight loop (one
// log line per attempt) or panic in the middle of rotating its log. The
// database stays as a crash at that instant would leave it, which Pebble
// recovers from.
//
// Protocol, over the worker's standard input and output: frames of a type
// byte, the payload's length (4 bytes, big-endian) and the payload. The
// server sends one request at a time and, but for frameOps, waits for its
// answer; the worker may send log lines at any time.
const (
	frameOpen    byte = 'O' // server: the data directory; answer K or E
	frameOps     byte = 'B' // server: operations for the batch; no answer
	frameDiscard byte = 'X' // server: drop the batch; no answer
	frameCommit  byte = 'C' // server: commit the batch, synced; answer K or E
	frameClose   byte = 'Q' // server: close the database and exit; answer K or E
	frameOK      byte = 'K' // worker: the request succeeded
	frameError   byte = 'E' // worker: the request failed: kind byte, message
	frameLog     byte = 'L' // worker: slog level (int8), message
	frameFatal   byte = 'F' // worker: it stops: kind byte, message
	frameDisk    byte = 'D' // worker: a write failed: kind byte, message
)

// Kinds of error, so that the server's errors match the sentinels.
const (
	kindOther byte = iota
	kindForeign
	kindNewer
	kindDamaged
	kindLocked
	kindNoSpace
	kindDenied
)

func errorKind(err error) byte {
	switch {
	case errors.Is(err, ErrForeign):
		return kindForeign
	case errors.Is(err, ErrNewerFormat):
		return kindNewer
	case errors.Is(err, ErrDamaged), pebble.IsCorruptionError(err):
		return kindDamaged
	case errors.Is(err, ErrLocked):
		return kindLocked
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return kindNoSpace
	case isDenied(err):
		return kindDenied
	}
	return kindOther
}

// workerError is an error the worker reported.
type workerError struct {
	kind byte
	msg  string
}

func (e *workerError) Error() string { return e.msg }

func (e *workerError) Is(target error) bool {
	switch e.kind {
	case kindForeign:
		return target == ErrForeign
	case kindNewer:
		return target == ErrNewerFormat
	case kindDamaged:
		return target == ErrDamaged
	case kindLocked:
		return target == ErrLocked
	case kindNoSpace:
		return target == syscall.ENOSPC
	case kindDenied:
		return target == ErrDenied
	}
	return false
}

// protocolVersion opens frameOpen's payload: a worker refuses a server
// that speaks another version of the protocol.
const protocolVersion byte = 2

const frameHeader = 5

// maxFrame bounds a frame's payload: what its length field holds. A chunk
// of changes is sent when it passes 256 KB, so only values of hundreds of
// megabytes make one this large.
const maxFrame = math.MaxUint32

func appendFrame(dst []byte, typ byte, parts ...[]byte) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	dst = append(dst, typ)
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	for _, p := range parts {
		dst = append(dst, p...)
	}
	return dst
}

// readFrame reads one frame, its payload into buf (grown as needed).
func readFrame(r io.Reader, buf []byte) (byte, []byte, error) {
	var h [frameHeader]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, buf, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, buf, err
	}
	return h[0], buf, nil
}

// WorkerCommand starts a snapshot worker: a process that runs
// ServeWorker on its standard input and output. The server re-executes
// its own binary with a hidden flag.
type WorkerCommand struct {
	Path string
	Args []string
	Env  []string // added to this process's environment
}

// procWriter is the server's end of a worker.
type procWriter struct {
	log     *slog.Logger
	cmd     *exec.Cmd
	in      *os.File      // the worker's standard input
	replies chan reply    // answers, in order
	exited  chan struct{} // closed once the worker ended and its output was read

	mu        sync.Mutex
	fatal     *workerError // what the worker said as it stopped
	diskErr   string       // the first write that failed
	stderr    tail
	broken    bool // a request was half sent or went unanswered
	waitErr   error
	throttled *logThrottle
}

type reply struct {
	ok   bool
	kind byte
	msg  string
}

// startWorker starts a worker and has it open dir, waiting for it until
// ctx ends.
func startWorker(ctx context.Context, c *WorkerCommand, dir string, log *slog.Logger, throttle *logThrottle) (*procWriter, error) {
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err1 := pipe()
	outR, outW, err2 := pipe()
	errR, errW, err3 := pipe()
	if err := errors.Join(err1, err2, err3); err != nil {
		closeAll()
		return nil, fmt.Errorf("starting the snapshot worker: %w", err)
	}
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Args[0] = os.Args[0] // as ps shows it: the server's name, not /proc/self/exe
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = workerSysProcAttr()
	if err := spawn(cmd); err != nil {
		closeAll()
		return nil, fmt.Errorf("starting the snapshot worker: %w", err)
	}
	inR.Close()
	outW.Close()
	errW.Close()
	p := &procWriter{
		log: log, cmd: cmd, in: inW,
		replies: make(chan reply, 8), exited: make(chan struct{}),
		throttled: throttle,
	}
	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		p.readFrames(outR)
	}()
	go func() {
		defer readers.Done()
		p.readStderr(errR)
	}()
	go func() {
		err := cmd.Wait()
		readers.Wait()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		inW.Close()
		close(p.exited)
	}()
	if err := p.request(ctx, frameOpen, append([]byte{protocolVersion}, dir...)); err != nil {
		p.kill()
		return nil, err
	}
	return p, nil
}

// spawn starts cmd from one OS thread that lives as long as the process:
// the kernel sends a worker its parent-death signal when the thread that
// started it ends, not the process, and the Go runtime may end a thread.
func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnCalls = make(chan spawnCall)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread stays
			for c := range spawnCalls {
				c.done <- c.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	spawnCalls <- spawnCall{cmd, done}
	return <-done
}

type spawnCall struct {
	cmd  *exec.Cmd
	done chan error
}

var (
	spawnOnce  sync.Once
	spawnCalls chan spawnCall
)

// readFrames reads the worker's answers and log lines until it exits.
func (p *procWriter) readFrames(f *os.File) {
	defer f.Close()
	r := bufio.NewReader(f)
	var buf []byte
	for {
		typ, payload, err := readFrame(r, buf[:0])
		if err != nil {
			return
		}
		buf = payload
		switch typ {
		case frameOK:
			p.answer(reply{ok: true})
		case frameError:
			if len(payload) > 0 {
				p.answer(reply{kind: payload[0], msg: string(payload[1:])})
			}
		case frameFatal:
			if len(payload) > 0 {
				p.mu.Lock()
				p.fatal = &workerError{payload[0], string(payload[1:])}
				p.mu.Unlock()
			}
		case frameDisk:
			if len(payload) > 0 {
				p.mu.Lock()
				if p.diskErr == "" {
					p.diskErr = string(payload[1:])
				}
				p.mu.Unlock()
			}
		case frameLog:
			if len(payload) > 0 {
				p.log.Log(context.Background(), slog.Level(int8(payload[0])), string(payload[1:]), "pid", p.cmd.Process.Pid)
			}
		}
		if cap(buf) > 1<<20 {
			buf = nil
		}
	}
}

func (p *procWriter) answer(r reply) {
	select {
	case p.replies <- r:
	default: // more answers than requests: not this protocol
	}
}

// readStderr keeps the end of what the worker writes to its standard
// error: nothing, unless the Go runtime reports a crash there.
func (p *procWriter) readStderr(f *os.File) {
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			p.mu.Lock()
			p.stderr.write(buf[:n])
			p.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// request sends a frame and waits for its answer until ctx ends; then
// the worker is killed.
func (p *procWriter) request(ctx context.Context, typ byte, payload []byte) error {
	start := time.Now()
	if err := p.send(ctx, typ, payload); err != nil {
		return err
	}
	select {
	case r := <-p.replies:
		return r.err()
	case <-p.exited:
		select {
		case r := <-p.replies: // answered, then stopped
			return r.err()
		default:
		}
		return p.deathError()
	case <-ctx.Done():
		p.kill()
		return fmt.Errorf("the snapshot worker did not answer within %s (%v); it was stopped",
			time.Since(start).Round(time.Millisecond), context.Cause(ctx))
	}
}

func (r reply) err() error {
	if r.ok {
		return nil
	}
	return &workerError{r.kind, r.msg}
}

// send writes one frame, giving up when ctx ends: a worker that stopped
// reading is stuck, and is killed.
func (p *procWriter) send(ctx context.Context, typ byte, payload []byte) error {
	if uint64(len(payload)) > maxFrame {
		return fmt.Errorf("a chunk of %d bytes is more than the snapshot worker takes", len(payload))
	}
	var h [frameHeader]byte
	h[0] = typ
	binary.BigEndian.PutUint32(h[1:], uint32(len(payload)))
	p.in.SetWriteDeadline(time.Time{})
	stop := context.AfterFunc(ctx, func() { p.in.SetWriteDeadline(time.Now()) })
	_, err := p.in.Write(h[:])
	if err == nil && len(payload) > 0 {
		_, err = p.in.Write(payload)
	}
	stop()
	if err == nil {
		return nil
	}
	p.mu.Lock()
	p.broken = true
	p.mu.Unlock()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		p.kill()
		return fmt.Errorf("the snapshot worker stopped reading its requests (%v); it was stopped", context.Cause(ctx))
	}
	// Most likely it exited: say why.
	select {
	case <-p.exited:
	case <-time.After(time.Second):
		p.kill()
	}
	return p.deathError()
}

// deathError says why the worker ended.
func (p *procWriter) deathError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.broken = true
	after := ""
	if p.diskErr != "" {
		after = " after a failed write (" + p.diskErr + ")"
	}
	if p.fatal != nil {
		msg := "snapshot worker stopped: " + p.fatal.msg
		if p.diskErr != "" && !strings.Contains(msg, p.diskErr) {
			msg += ";" + after
		}
		return &workerError{p.fatal.kind, msg}
	}
	status := "exit status 0"
	if p.waitErr != nil {
		status = p.waitErr.Error()
	}
	if line := p.stderr.crashLine(); line != "" {
		return fmt.Errorf("snapshot worker crashed%s: %s (%s)", after, line, status)
	}
	return fmt.Errorf("snapshot worker exited%s (%s)", after, status)
}

func (p *procWriter) write(ctx context.Context, ops []byte) error {
	return p.send(ctx, frameOps, ops)
}

func (p *procWriter) commit(ctx context.Context) error {
	return p.request(ctx, frameCommit, nil)
}

func (p *procWriter) discard(ctx context.Context) error {
	return p.send(ctx, frameDiscard, nil)
}

func (p *procWriter) usable() bool {
	select {
	case <-p.exited:
		return false
	default:
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.broken
}

// close asks the worker to close the database and exit; when ctx ends
// it is killed. A worker killed while writing leaves the database as a
// crash would, which Pebble recovers from.
func (p *procWriter) close(ctx context.Context) error {
	var err error
	if p.usable() {
		err = p.request(ctx, frameClose, nil)
	}
	select {
	case <-p.exited:
	case <-ctx.Done():
		p.kill()
		if err == nil {
			err = errors.New("the snapshot worker did not exit in time; it was stopped")
		}
	}
	p.logStderr()
	return err
}

// kill ends the worker with SIGKILL and waits (briefly) until it is gone,
// so that its lock on the directory is released.
func (p *procWriter) kill() {
	p.mu.Lock()
	p.broken = true
	p.mu.Unlock()
	p.cmd.Process.Kill()
	select {
	case <-p.exited:
	case <-time.After(2 * time.Second):
	}
	p.logStderr()
}

// logStderr logs what the worker wrote to its standard error, if
// anything (a crash report): once a minute at most.
func (p *procWriter) logStderr() {
	p.mu.Lock()
	out := p.stderr.String()
	p.stderr.reset()
	p.mu.Unlock()
	if out == "" {
		return
	}
	if ok, held := p.throttled.allow("worker stderr"); ok {
		p.log.Warn("snapshot worker output", append([]any{"pid", p.cmd.Process.Pid, "stderr", out}, heldBack(held)...)...)
	}
}

// tail keeps the first and last bytes of a stream: a Go crash report
// starts with its cause and may run long.
type tail struct {
	head, end []byte
}

const tailKeep = 2048

func (t *tail) write(b []byte) {
	if n := min(tailKeep-len(t.head), len(b)); n > 0 {
		t.head = append(t.head, b[:n]...)
		b = b[n:]
	}
	t.end = append(t.end, b...)
	if len(t.end) > tailKeep {
		t.end = append(t.end[:0], t.end[len(t.end)-tailKeep:]...)
	}
}

func (t *tail) reset() { t.head, t.end = nil, nil }

func (t *tail) String() string {
	if len(t.end) == 0 {
		return string(t.head)
	}
	return string(t.head) + "\n...\n" + string(t.end)
}

// crashLine picks the lines of a Go crash report that say what happened.
// A panic value the runtime could only print as a type and an address
// ("panic: (*fs.PathError) 0xc000123456", when the panic ended in a fatal
// error) says nothing, and is left out.
func (t *tail) crashLine() string {
	var parts []string
	for _, line := range strings.Split(string(t.head), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "panic: (*") && strings.Contains(line, ") 0x"):
		case strings.HasPrefix(line, "panic: "), strings.HasPrefix(line, "fatal error: "):
			parts = append(parts, line)
		}
	}
	return strings.Join(parts, "; ")
}

// ServeWorker runs the worker's end of the protocol on in and out until
// the server asks it to stop or goes away, and returns the exit code. fsys
// nil means the operating system's filesystem; tests inject faults.
func ServeWorker(in io.Reader, out io.Writer, fsys vfs.FS) int {
	if fsys == nil {
		fsys = vfs.Default
	}
	// The server decides when the worker ends (it closes the pipe, or
	// dies, and the kernel kills the worker); a Ctrl-C sent to the whole
	// process group must not end the worker before the server's final
	// snapshot.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	if fsys == vfs.Default {
		lowerPriority() // a real worker process, not a test's
	}
	w := &worker{out: out, throttle: newLogThrottle(time.Minute), release: make(chan struct{}, 1)}
	go w.releaseLoop()
	w.fs = &watchFS{FS: fsys, failed: w.writeFailed}
	r := bufio.NewReaderSize(in, 256<<10)
	var buf []byte
	for {
		typ, payload, err := readFrame(r, buf[:0])
		if err != nil {
			// The server is gone, or gave up on this worker. Exiting
			// without closing leaves what a crash would.
			return 0
		}
		buf = payload
		if cap(buf) > 1<<20 {
			buf = nil
		}
		switch typ {
		case frameOpen:
			if len(payload) == 0 || payload[0] != protocolVersion {
				w.stop(kindOther, "the server speaks another version of the snapshot worker protocol")
			}
			w.answer(w.open(string(payload[1:])))
		case frameOps:
			w.add(payload)
		case frameDiscard:
			w.drop()
		case frameCommit:
			size, err := w.commit()
			w.answer(err)
			if err == nil && size >= releaseAbove {
				w.recycle()
			}
		case frameClose:
			err := w.close()
			w.answer(err)
			if err != nil {
				return 1
			}
			return 0
		default:
			w.stop(kindOther, fmt.Sprintf("unknown request %q", typ))
		}
	}
}

type worker struct {
	outMu    sync.Mutex
	out      io.Writer
	fs       vfs.FS
	dir      string
	db       *pebble.DB
	bb       batchBuilder
	note     corruptionNote
	throttle *logThrottle
	release  chan struct{} // asks for the memory of a large write back
}

func (w *worker) send(typ byte, kind byte, msg string) {
	w.outMu.Lock()
	defer w.outMu.Unlock()
	w.out.Write(appendFrame(nil, typ, []byte{kind}, []byte(msg)))
}

func (w *worker) answer(err error) {
	if err == nil {
		w.outMu.Lock()
		defer w.outMu.Unlock()
		w.out.Write(appendFrame(nil, frameOK))
		return
	}
	w.send(frameError, errorKind(err), err.Error())
}

func (w *worker) log(level slog.Level, msg string) {
	w.send(frameLog, byte(int8(level)), msg)
}

// stop reports why the worker stops, and exits. It may be called from
// any goroutine, Pebble's included, which must not continue.
func (w *worker) stop(kind byte, msg string) {
	w.send(frameFatal, kind, msg)
	os.Exit(3)
}

// writeFailed hears of every write that failed. Out of space, the worker
// stops at once: Pebble would panic in the middle of rotating its log, or
// retry a flush in a tight loop. Other failures are reported to the
// server, which names them if the worker then crashes.
func (w *worker) writeFailed(op, path string, err error) {
	msg := err.Error()
	if !strings.Contains(msg, path) {
		msg = op + " " + path + ": " + msg
	}
	if kind := errorKind(err); kind == kindNoSpace {
		w.stop(kind, msg)
	}
	w.send(frameDisk, errorKind(err), msg)
}

func (w *worker) open(dir string) error {
	if w.db != nil {
		return errors.New("already open")
	}
	w.dir = dir
	db, err := openWritable(dir, w.options(), &w.note)
	if err != nil {
		return err
	}
	w.db = db
	return nil
}

func (w *worker) options() *pebble.Options {
	return &pebble.Options{
		FS:     w.fs,
		Logger: workerLogger{w},
		EventListener: &pebble.EventListener{
			DataCorruption:  w.note.record,
			BackgroundError: w.backgroundError,
			CompactionEnd: func(info pebble.CompactionInfo) {
				if compactionBytes(info) >= releaseAbove {
					w.releaseSoon()
				}
			},
		},
	}
}

// recycle gives back the memory of a large commit. A batch larger than
// half a memtable is flushed on its own, and Pebble keeps it referenced
// after the flush (its queue of memtables is resliced, not cleared) until
// later flushes happen to reallocate that queue: for hours on a quiet
// server. So the worker waits for the flush, closes the database, opens
// it again (nothing to replay: everything is flushed) and collects. The
// next request waits meanwhile, as the next commit would have waited for
// the flush anyway. A database that will not reopen stops the worker; the
// server starts another at the next snapshot.
func (w *worker) recycle() {
	err := w.db.Flush()
	if err == nil {
		err = w.db.Close()
	}
	w.db = nil
	if err == nil {
		w.db, err = openWritable(w.dir, w.options(), &w.note)
	}
	if err != nil {
		w.stop(errorKind(err), "reopening the database after a large snapshot: "+err.Error())
	}
	w.releaseSoon()
}

// backgroundError stops the worker at a failed flush or compaction:
// Pebble would retry at once, for ever, one error line per attempt.
func (w *worker) backgroundError(err error) {
	if pebble.IsCorruptionError(err) {
		w.stop(kindDamaged, damaged(w.dir, err, &w.note).Error())
	}
	w.stop(errorKind(err), "pebble: background error: "+err.Error())
}

func (w *worker) add(ops []byte) {
	if w.db == nil {
		if w.bb.err == nil {
			w.bb.err = errors.New("the database is not open")
		}
		return
	}
	w.bb.add(w.db, ops)
}

func (w *worker) drop() { w.bb.drop() }

// commit commits the batch built, and returns its size.
func (w *worker) commit() (int, error) {
	b, err := w.bb.take()
	if w.db == nil {
		return 0, errors.New("the database is not open")
	}
	if b == nil {
		return 0, err
	}
	defer b.Close()
	if err != nil {
		return 0, err
	}
	if err := checkSpace(w.fs, w.dir, b.Len()); err != nil {
		return 0, err
	}
	// A failure here ends in Fatalf, which stops the worker.
	return b.Len(), b.Commit(pebble.Sync)
}

// releaseAbove is the size of a commit or compaction after which the
// worker gives the memory it used back to the system. Go would keep it:
// the worker allocates nothing between snapshots, so no collection runs
// for up to two minutes, and the scavenger returns only what a collection
// found free. A value of hundreds of megabytes passes through the batch,
// the flush's copy and the table writer's block, and the worker stayed at
// a gigabyte after writing one 256 MB value.
const releaseAbove = 32 << 20

// releaseSoon asks for a release, which runs on its own goroutine, one
// at a time: full collections of the worker's small heap.
func (w *worker) releaseSoon() {
	select {
	case w.release <- struct{}{}:
	default:
	}
}

func (w *worker) releaseLoop() {
	for range w.release {
		// Twice: Pebble pools the table writer's block buffer and the
		// compressor's, and a pool keeps what it held for one
		// collection more.
		debug.FreeOSMemory()
		debug.FreeOSMemory()
	}
}

// compactionBytes is what a compaction read.
func compactionBytes(info pebble.CompactionInfo) uint64 {
	var n uint64
	for _, l := range info.Input {
		for _, t := range l.Tables {
			n += t.Size
		}
	}
	return n
}

func (w *worker) close() error {
	w.drop()
	if w.db == nil {
		return nil
	}
	err := w.db.Close()
	w.db = nil
	return err
}

// workerLogger sends Pebble's logs to the server, holding back repeats.
type workerLogger struct{ w *worker }

func (l workerLogger) Infof(format string, args ...any) {
	l.w.log(slog.LevelDebug, "pebble: "+fmt.Sprintf(format, args...))
}

func (l workerLogger) Errorf(format string, args ...any) {
	ok, held := l.w.throttle.allow(format)
	if !ok {
		return
	}
	msg := "pebble: " + fmt.Sprintf(format, args...)
	if held > 0 {
		msg += fmt.Sprintf(" (%d more like it held back)", held)
	}
	l.w.log(slog.LevelWarn, msg)
}

// Fatalf must not return: the worker reports and exits.
func (l workerLogger) Fatalf(format string, args ...any) {
	kind := kindOther
	for _, a := range args {
		if err, ok := a.(error); ok && errorKind(err) != kindOther {
			kind = errorKind(err)
		}
	}
	l.w.stop(kind, "pebble: "+fmt.Sprintf(format, args...))
}
