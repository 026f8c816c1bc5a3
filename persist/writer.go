package persist

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// A writer commits snapshot batches to the database: through a worker
// process (procWriter, what the server uses) or in this process
// (localWriter, for fast tests on an in-memory filesystem).
type writer interface {
	// write adds encoded operations (pebble.go) to the batch being built.
	write(ctx context.Context, ops []byte) error
	// commit writes the batch, synced, and starts a new one.
	commit(ctx context.Context) error
	// discard drops the batch being built.
	discard(ctx context.Context) error
	// usable reports whether the writer can take more requests after an
	// error; one that cannot is killed and replaced.
	usable() bool
	// close closes the database, giving up (and killing) when ctx ends.
	close(ctx context.Context) error
	// kill ends the writer at once, whatever it is doing.
	kill()
}

// localWriter runs Pebble in this process. It cannot survive Pebble's
// fail-stop reactions to a failing disk (a panic, or a Fatalf that must
// not return), so only tests use it, on filesystems that do not fail.
type localWriter struct {
	dir  string
	fs   vfs.FS
	db   *pebble.DB
	bb   batchBuilder
	note corruptionNote
}

func openLocal(dir string, fsys vfs.FS, log *slog.Logger) (*localWriter, error) {
	w := &localWriter{dir: dir, fs: fsys}
	o := &pebble.Options{
		FS:            fsys,
		Logger:        localLogger{log, newLogThrottle(time.Minute)},
		EventListener: &pebble.EventListener{DataCorruption: w.note.record},
	}
	db, err := openWritable(dir, o, &w.note)
	if err != nil {
		return nil, err
	}
	w.db = db
	return w, nil
}

func (w *localWriter) write(_ context.Context, ops []byte) error {
	w.bb.add(w.db, ops)
	return nil
}

func (w *localWriter) commit(context.Context) error {
	b, err := w.bb.take()
	if b == nil {
		return err
	}
	defer b.Close()
	if err != nil {
		return err
	}
	if path, cerr := w.note.get(); path != "" {
		return damaged(w.dir, cerr, &w.note)
	}
	if err := checkSpace(w.fs, w.dir, b.Len()); err != nil {
		return err
	}
	return b.Commit(pebble.Sync)
}

func (w *localWriter) discard(context.Context) error {
	w.bb.drop()
	return nil
}

func (w *localWriter) usable() bool { return true }

func (w *localWriter) close(ctx context.Context) error {
	w.discard(ctx)
	return w.db.Close()
}

func (w *localWriter) kill() { w.close(context.Background()) }

// localLogger routes Pebble's logs to slog, holding back repeats.
type localLogger struct {
	log      *slog.Logger
	throttle *logThrottle
}

func (l localLogger) Infof(format string, args ...any) {
	l.log.Debug("pebble: " + fmt.Sprintf(format, args...))
}

func (l localLogger) Errorf(format string, args ...any) {
	if ok, held := l.throttle.allow(format); ok {
		l.log.Warn("pebble: "+fmt.Sprintf(format, args...), heldBack(held)...)
	}
}

// Fatalf must not return: in this process the only honest reaction is to
// crash with Pebble's message (runtime.Goexit instead ran Pebble's
// deferred unlocks twice, a fatal error of its own).
func (l localLogger) Fatalf(format string, args ...any) {
	panic("pebble: " + fmt.Sprintf(format, args...))
}
