package commands

import (
	"context"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limitkv/limitkv/observe"
)

// Run does the server's periodic work until ctx ends: active expiry, hz
// times a second with a quarter of each tick at most, and the samples
// behind INFO's instantaneous_ops_per_sec.
func (s *Server) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			interval := time.Second / time.Duration(max(s.Cfg.Hz(), 1))
			select {
			case <-ctx.Done():
				return
			case <-time.After(interval):
			}
			if s.noActiveExpire.Load() {
				continue // DEBUG SET-ACTIVE-EXPIRE 0
			}
			if s.pause.kind.Load() != pauseOff {
				continue // a CLIENT PAUSE keeps the dataset still, as Redis's activeExpireCycle
			}
			st := s.Eng.ActiveExpire(s.Eng.Now(), interval/4)
			s.LatencyEvent("expire-cycle", st.Work)
		}
	}()
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				s.ops.sample(now, s.commandsProcessed())
				s.memoryTick()
				s.mem.Note(s.usedMemory())
				s.release.tick(now, s.Net.ReleasedBytes()+s.Eng.FreedBytes())
				s.trackingTick()
				s.broadcastInvalidations(nil) // what the sweeper and eviction changed
			}
		}
	}()
	wg.Wait()
}

// commandsProcessed counts every command executed so far.
func (s *Server) commandsProcessed() int64 {
	n := s.stats.Commands.Load()
	for _, cl := range s.clients.all() {
		n += cl.commands.Load()
	}
	return n
}

// opsMeter keeps the last 16 command-rate samples, as Redis does.
type opsMeter struct {
	mu       sync.Mutex
	lastT    time.Time
	lastN    int64
	samples  [16]float64
	idx, len int
}

func (m *opsMeter) sample(now time.Time, n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.lastT.IsZero() {
		if dt := now.Sub(m.lastT).Seconds(); dt > 0 {
			m.samples[m.idx] = float64(n-m.lastN) / dt
			m.idx = (m.idx + 1) % len(m.samples)
			m.len = min(m.len+1, len(m.samples))
		}
	}
	m.lastT, m.lastN = now, n
}

func (m *opsMeter) rate() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.len == 0 {
		return 0
	}
	var sum float64
	for i := 0; i < m.len; i++ {
		sum += m.samples[i]
	}
	return int64(sum / float64(m.len))
}

func (s *Server) opsPerSec() int64 { return s.ops.rate() }

// memRelease hands memory back to the system once big buffers or values
// have been let go of. Go would keep it: after a big value is deleted or a
// client with big buffers leaves, nothing may allocate, so no collection
// runs for up to two minutes (the runtime's forced period), and the
// scavenger returns only pages a collection has found free. A release is a
// full collection, so it waits for 32 MiB to be let go of and runs at most
// once a second, and never more than a twentieth of the time.
type memRelease struct {
	last      int64        // bytes let go of at the last release
	next      atomic.Int64 // earliest next release, Unix ns
	running   atomic.Bool
	collected atomic.Int64 // bytes let go of at the last collection beforeBig ran
}

const releaseMin = 32 << 20

func (m *memRelease) tick(now time.Time, letGo int64) {
	if letGo-m.last < releaseMin || now.UnixNano() < m.next.Load() || m.running.Load() {
		return
	}
	m.last = letGo
	m.running.Store(true)
	go func() {
		defer m.running.Store(false)
		start := time.Now()
		debug.FreeOSMemory()
		took := time.Since(start)
		m.next.Store(start.Add(max(time.Second, 20*took)).UnixNano())
	}()
}

// beforeBig runs on a connection about to read an argument of n bytes. When
// at least that much has been let go of since the last collection (SET
// replacing a big value with another) and the argument is big next to the
// heap, it collects first, so that the argument reuses that memory instead
// of adding to it: Redis frees the old value at once.
func (m *memRelease) beforeBig(n, letGo int64) {
	if n < 1<<20 || letGo-m.collected.Load() < n || observe.HeapInUse() > 8*n {
		return
	}
	m.collected.Store(letGo)
	runtime.GC()
}
