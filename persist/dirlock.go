package persist

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The server holds its data directory for its whole life, through a lock
// file of its own: Pebble's lock is held by the snapshot worker, which
// dies on a full disk or a failing one and is restarted later, and a
// second server started meanwhile would find the directory free, serve,
// and take it over once the disk had room again, the first server's
// snapshots failing from then on. The worker's Pebble lock stays: it keeps
// a worker left behind from writing beside a new one.
const lockName = "limitkv.lock"

// lockDir takes the server's lock on dir, which exists, or says which
// process holds it. On the operating system's filesystem it is flock(2)
// on lockName, which the kernel releases when the process ends, however
// it ends; another filesystem (in tests) has its own Lock.
func lockDir(fsys vfs.FS, dir string) (io.Closer, error) {
	path := fsys.PathJoin(dir, lockName)
	if fsys == vfs.Default {
		return lockFile(dir, path)
	}
	l, err := fsys.Lock(path)
	if err != nil {
		if errors.Is(err, syscall.EAGAIN) {
			return nil, fmt.Errorf("%w: %s: another store holds %s", ErrLocked, dir, path)
		}
		return nil, fmt.Errorf("locking data directory %s: %w", dir, err)
	}
	return &onceCloser{c: l}, nil
}

// onceCloser lets Close be called more than once.
type onceCloser struct {
	once sync.Once
	c    io.Closer
	err  error
}

func (o *onceCloser) Close() error {
	o.once.Do(func() { o.err = o.c.Close() })
	return o.err
}
