package commands

import (
	"context"
	"sync"
	"time"
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
			s.Eng.ActiveExpire(s.Eng.Now(), interval/4)
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
				s.mem.note(heapInUse())
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
