//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package persist

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// lockFile takes an exclusive flock on path, created if need be, and
// writes this process's id in it for the message of the next server that
// finds it held. The file is never removed: a server that unlinked it on
// exit could let two others lock two different files.
func lockFile(dir, path string) (io.Closer, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s: %s holds %s", ErrLocked, dir, holder(path), path)
		}
		return nil, fmt.Errorf("locking data directory %s: %w", dir, err)
	}
	// Best effort: on a full disk the id may not fit, and the lock is
	// what counts. Overwritten, then cut, so that an old file's block is
	// reused rather than freed and asked for again.
	id := strconv.Itoa(os.Getpid()) + "\n"
	if _, err := f.WriteAt([]byte(id), 0); err == nil {
		f.Truncate(int64(len(id)))
	}
	return &onceCloser{c: f}, nil
}

// holder names the process that holds the lock, as its file says.
func holder(path string) string {
	b, _ := os.ReadFile(path)
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
		return "limitkv pid " + strconv.Itoa(pid)
	}
	return "another limitkv"
}
