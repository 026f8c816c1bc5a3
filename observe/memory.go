package observe

import (
	"fmt"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// RuntimeMemory is what the Go runtime and the kernel say of the
// process's memory; used_memory itself is the server's own account, not
// the heap.
type RuntimeMemory struct {
	// Heap is the bytes in live (and not yet swept) heap objects.
	Heap int64
	// Sys is all the memory the runtime has mapped.
	Sys int64
	// HeapGoal is the heap size at which the next collection starts.
	HeapGoal int64
	// RSS is the resident set size, 0 where /proc has none.
	RSS int64
}

// ReadRuntimeMemory reads the runtime's figures in one metrics.Read, so
// that they describe the same moment.
func ReadRuntimeMemory() RuntimeMemory {
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/gc/heap/goal:bytes"},
	}
	metrics.Read(samples)
	return RuntimeMemory{
		Heap:     int64(samples[0].Value.Uint64()),
		Sys:      int64(samples[1].Value.Uint64()),
		HeapGoal: int64(samples[2].Value.Uint64()),
		RSS:      RSS(),
	}
}

// HeapInUse is the bytes in live (and not yet swept) heap objects, the
// figure Go's collector works from.
func HeapInUse() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// RSS returns the resident set size from /proc, or 0 where there is none.
func RSS() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// TotalSystemMemory is the machine's RAM as sysinfo gives it, or 0.
func TotalSystemMemory() int64 {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}

// Human writes a byte count as Redis's bytesToHuman does (1.50K, 2.00M).
func Human(n int64) string {
	f := float64(n)
	switch {
	case n < 1024:
		return strconv.FormatInt(n, 10) + "B"
	case n < 1<<20:
		return fmt.Sprintf("%.2fK", f/1024)
	case n < 1<<30:
		return fmt.Sprintf("%.2fM", f/(1<<20))
	case n < 1<<40:
		return fmt.Sprintf("%.2fG", f/(1<<30))
	}
	return fmt.Sprintf("%.2fT", f/(1<<40))
}

// MemoryMarks keeps used_memory_startup and used_memory_peak. The peak is
// sampled by the server's periodic work as well as on every reading, so a
// spike between two INFO calls still shows.
type MemoryMarks struct {
	startup, peak atomic.Int64
}

// SetStartup records the memory in use once the server has started, which
// is also the first peak.
func (m *MemoryMarks) SetStartup(n int64) {
	m.startup.Store(n)
	m.Note(n)
}

// Startup is used_memory_startup.
func (m *MemoryMarks) Startup() int64 { return m.startup.Load() }

// Peak is used_memory_peak.
func (m *MemoryMarks) Peak() int64 { return m.peak.Load() }

// Note raises the peak to used if it is higher.
func (m *MemoryMarks) Note(used int64) {
	for {
		p := m.peak.Load()
		if used <= p || m.peak.CompareAndSwap(p, used) {
			return
		}
	}
}

// CPUUsage is the CPU time the process has used so far.
type CPUUsage struct {
	Sys, User syscall.Timeval
	// GC is the seconds the collector has used, part of both.
	GC float64
}

// ReadCPU reads the process's CPU time; false when the kernel gives none.
func ReadCPU() (CPUUsage, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return CPUUsage{}, false
	}
	samples := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(samples)
	return CPUUsage{Sys: ru.Stime, User: ru.Utime, GC: samples[0].Value.Float64()}, true
}
