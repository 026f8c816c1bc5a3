package persist

import "syscall"

// workerSysProcAttr has the kernel kill the worker when the server dies,
// however it dies: a worker never outlives its server, nor holds the data
// directory's lock after it.
func workerSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
