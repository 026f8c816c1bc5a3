//go:build linux && race

package resp

import "syscall"

// Under the race detector the loop reads and writes through the syscall
// package, whose Read and Write tell the detector that what one
// goroutine did before writing to a socket happens before what another
// does after reading it (a test that sets a hook, then sends a request
// that the loop serves). The raw calls of rawio_linux.go say nothing to
// it, and it would report races that the socket orders.

func readFD(fd uintptr, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, err := syscall.Read(int(fd), b)
	return max(n, 0), err
}

func writeFD(fd uintptr, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, err := syscall.Write(int(fd), b)
	return max(n, 0), err
}
