//go:build !linux

package persist

import "syscall"

// workerSysProcAttr: only Linux can tie the worker's life to the server's;
// elsewhere a worker left behind by a killed server exits when it reads
// the end of its standard input.
func workerSysProcAttr() *syscall.SysProcAttr { return nil }

// lowerPriority: see sysproc_linux.go.
func lowerPriority() {}
