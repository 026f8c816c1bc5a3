package commands

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/engine"
)

// CLIENT PAUSE, CLIENT UNPAUSE and CLIENT NO-EVICT.
//
// While a pause lasts, a client's command that it covers (every command
// for ALL; for WRITE, the writes and the commands that may replicate:
// EVAL, EVALSHA, FCALL, PUBLISH, SPUBLISH, PFCOUNT, and an EXEC whose
// transaction has one; but not a script or function that declared
// no-writes) waits in dispatch before it runs, or before it is
// queued inside MULTI, as Redis 7.0 postpones it: on the connection's own
// goroutine, holding no lock and outside the script gate. Replicas and
// the client of a master's stream are never paused, so replication goes
// on; snapshots do not go through dispatch. While any pause is on, no
// request runs on an event loop (Server.Inline), where waiting would hold
// up the loop's other connections. Paused clients count as blocked (INFO
// blocked_clients, the b flag of CLIENT LIST).

const (
	pauseOff int32 = iota
	pauseWrite
	pauseAll
)

// pauseState is the server's client pause.
type pauseState struct {
	kind  atomic.Int32
	mu    sync.Mutex
	end   time.Time
	wake  chan struct{} // closed, and replaced, when the pause ends or eases
	timer *time.Timer
	// waiting counts the clients held back by the pause, which INFO's
	// blocked_clients counts with those blocked on keys, as Redis does.
	waiting atomic.Int64
}

// pause starts a pause, or extends the one under way: the stricter kind
// and the later end win, as Redis's pauseClients.
func (p *pauseState) pause(kind int32, end time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.wake == nil {
		p.wake = make(chan struct{})
	}
	if kind > p.kind.Load() {
		p.kind.Store(kind)
	}
	if end.After(p.end) {
		p.end = end
	}
	d := time.Until(p.end)
	if p.timer == nil {
		p.timer = time.AfterFunc(d, p.expire)
	} else {
		p.timer.Reset(d)
	}
}

// expire ends the pause once its time has come.
func (p *pauseState) expire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.kind.Load() == pauseOff {
		return
	}
	if d := time.Until(p.end); d > 0 {
		p.timer.Reset(d)
		return
	}
	p.endLocked()
}

// unpause ends the pause now.
func (p *pauseState) unpause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.kind.Load() == pauseOff {
		return
	}
	if p.timer != nil {
		p.timer.Stop()
	}
	p.endLocked()
}

func (p *pauseState) endLocked() {
	p.kind.Store(pauseOff)
	p.end = time.Time{}
	close(p.wake)
	p.wake = make(chan struct{})
}

// current returns the pause's kind and what closes when it changes.
func (p *pauseState) current() (int32, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.wake == nil {
		p.wake = make(chan struct{})
	}
	return p.kind.Load(), p.wake
}

// pausedFor reports whether a pause of kind holds back a request of cl
// admitted by flags (commandFlags): for WRITE, a write or a command that
// may replicate, or an EXEC that queued one.
func pausedFor(kind int32, cl *Client, spec *cmdspec.Spec, flags cmdspec.Flag) bool {
	switch kind {
	case pauseAll:
		return true
	case pauseWrite:
		if flags&(cmdspec.Write|cmdspec.MayReplicate) != 0 {
			return true
		}
		if spec.Name == "exec" {
			for _, q := range cl.queued {
				if q.flags&(cmdspec.Write|cmdspec.MayReplicate) != 0 {
					return true
				}
			}
		}
	}
	return false
}

// awaitPause holds a request back while a pause covers it. It reports
// false when the connection closed meanwhile: the request is dropped.
func (s *Server) awaitPause(cl *Client, spec *cmdspec.Spec, flags cmdspec.Flag) bool {
	if cl.master || cl.replica.Load() || cl.conn == nil {
		return true
	}
	// On an event loop nothing may wait: the pause began after Inline
	// let the request run there, which is as if it had come just before.
	if cl.conn.OnLoop() {
		return true
	}
	var hung <-chan struct{}
	stop := func() {}
	defer func() {
		if cl.paused.Load() {
			cl.paused.Store(false)
			s.pause.waiting.Add(-1)
		}
		stop()
	}()
	for {
		kind, wake := s.pause.current()
		if !pausedFor(kind, cl, spec, flags) {
			return true
		}
		if !cl.paused.Load() {
			cl.conn.Flush()
			hung, stop = cl.conn.WatchHangup()
			cl.paused.Store(true)
			s.pause.waiting.Add(1)
		}
		select {
		case <-wake:
		case <-cl.conn.Done():
			return false
		case <-hung:
			cl.conn.Kill()
			return false
		}
	}
}

func cmdClientPause(c *Ctx) {
	if len(c.Args) > 4 {
		c.W.Error(subcommandSyntax(c))
		return
	}
	kind := pauseAll
	if len(c.Args) == 4 {
		switch a := c.Args[3]; {
		case is(a, "WRITE"):
			kind = pauseWrite
		case is(a, "ALL"):
		default:
			c.W.Error("ERR CLIENT PAUSE mode must be WRITE or ALL")
			return
		}
	}
	ms, ok := engine.ParseInt(c.Args[2])
	if !ok {
		c.W.Error("timeout is not an integer or out of range")
		return
	}
	if ms < 0 {
		c.W.Error("timeout is negative")
		return
	}
	end := time.Now()
	if ms > 0 {
		end = end.Add(time.Duration(min(ms, int64(1<<62)/int64(time.Millisecond))) * time.Millisecond)
	}
	c.Srv.pause.pause(kind, end)
	c.W.OK()
}

func cmdClientUnpause(c *Ctx) {
	c.Srv.pause.unpause()
	c.W.OK()
}

// cmdClientNoEvict sets the flag that client eviction (maxmemory-clients,
// Server.evictClients) spares.
func cmdClientNoEvict(c *Ctx) {
	switch a := c.Args[2]; {
	case is(a, "ON"):
		c.Client.noEvict.Store(true)
	case is(a, "OFF"):
		c.Client.noEvict.Store(false)
	default:
		c.W.Error(msgSyntax)
		return
	}
	c.W.OK()
}
