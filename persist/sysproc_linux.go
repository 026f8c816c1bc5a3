package persist

import (
	"os"
	"strconv"
	"syscall"
)

// workerSysProcAttr has the kernel kill the worker when the server dies,
// however it dies: a worker never outlives its server, nor holds the data
// directory's lock after it.
func workerSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// workerNice is the worker's scheduling priority: its sorting and writing
// of a snapshot take the cores only when the server's connections leave
// them, so that a snapshot never delays a reply by taking a core away; on
// an idle machine it runs at full speed all the same. The lowest: with
// the server pinned to one core, a worker at nice 10 lifted
// redis-benchmark's p99 at depth 1 to 2.0-2.3 ms, against 1.0-1.2 at 19
// (and the same as at 19 with SCHED_IDLE), since a loop woken by a request
// waits for a running task to use up more of its slice the higher that
// task's weight. Under a core saturated for good, the worker still gets
// about 1.5% of it, so snapshots go on, more slowly.
const workerNice = 19

// lowerPriority lowers the priority of every thread of this process (on
// Linux a thread has its own, and threads made later inherit it from the
// thread that makes them).
func lowerPriority() {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return
	}
	for _, t := range tasks {
		if tid, err := strconv.Atoi(t.Name()); err == nil {
			syscall.Setpriority(syscall.PRIO_PROCESS, tid, workerNice)
		}
	}
}
