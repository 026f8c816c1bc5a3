//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package persist

import (
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// lockFile uses Pebble's file lock where flock(2) is not available.
func lockFile(dir, path string) (io.Closer, error) {
	l, err := vfs.Default.Lock(path)
	if err != nil {
		if isLockError(err) {
			return nil, fmt.Errorf("%w: %s: another process holds %s", ErrLocked, dir, path)
		}
		return nil, fmt.Errorf("locking data directory %s: %w", dir, err)
	}
	return &onceCloser{c: l}, nil
}
