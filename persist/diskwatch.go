package persist

import (
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// watchFS tells the worker of every write to its directory that fails,
// before Pebble reacts to it. Pebble's reaction to some failures is a
// panic whose report names no cause, or a flush retried for ever; the
// worker stops at the first write that fails for want of space, and
// remembers the others to explain a crash that follows.
type watchFS struct {
	vfs.FS
	failed func(op, path string, err error)
}

func (fs *watchFS) note(op, path string, err error) error {
	if err != nil {
		fs.failed(op, path, err)
	}
	return err
}

func (fs *watchFS) wrap(f vfs.File, name string, err error, op string) (vfs.File, error) {
	if err != nil {
		return nil, fs.note(op, name, err)
	}
	return &watchFile{File: f, name: name, fs: fs}, nil
}

func (fs *watchFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(f, name, err, "create")
}

func (fs *watchFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	return fs.wrap(f, name, err, "open")
}

func (fs *watchFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return fs.wrap(f, newname, err, "reuse")
}

// OpenDir's files are synced to make renames and creations durable.
func (fs *watchFS) OpenDir(name string) (vfs.File, error) {
	f, err := fs.FS.OpenDir(name)
	return fs.wrap(f, name, err, "open")
}

func (fs *watchFS) Link(oldname, newname string) error {
	return fs.note("link", newname, fs.FS.Link(oldname, newname))
}

func (fs *watchFS) Rename(oldname, newname string) error {
	return fs.note("rename", newname, fs.FS.Rename(oldname, newname))
}

func (fs *watchFS) MkdirAll(dir string, perm os.FileMode) error {
	return fs.note("mkdir", dir, fs.FS.MkdirAll(dir, perm))
}

func (fs *watchFS) Unwrap() vfs.FS { return fs.FS }

type watchFile struct {
	vfs.File
	name string
	fs   *watchFS
}

func (f *watchFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	return n, f.fs.note("write", f.name, err)
}

func (f *watchFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	return n, f.fs.note("write", f.name, err)
}

func (f *watchFile) Preallocate(off, n int64) error {
	return f.fs.note("preallocate", f.name, f.File.Preallocate(off, n))
}

func (f *watchFile) Sync() error { return f.fs.note("sync", f.name, f.File.Sync()) }

func (f *watchFile) SyncData() error { return f.fs.note("sync", f.name, f.File.SyncData()) }

func (f *watchFile) SyncTo(length int64) (bool, error) {
	full, err := f.File.SyncTo(length)
	return full, f.fs.note("sync", f.name, err)
}
