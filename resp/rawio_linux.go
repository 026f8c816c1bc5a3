//go:build linux && !race

package resp

import (
	"syscall"
	"unsafe"
)

// readFD and writeFD read and write a non-blocking socket once, as raw
// system calls (see epollPoll).
func readFD(fd uintptr, b []byte) (int, error) { return rawRW(syscall.SYS_READ, fd, b) }

func writeFD(fd uintptr, b []byte) (int, error) { return rawRW(syscall.SYS_WRITE, fd, b) }

func rawRW(trap uintptr, fd uintptr, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, _, errno := syscall.RawSyscall(trap, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}
