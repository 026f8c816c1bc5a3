package migrate

import (
	"bufio"
	"net"
	"sync"
	"time"
)

const (
	// socketTTL is how long Redis keeps an unused connection.
	socketTTL = 10 * time.Second
	// socketItems is how many connections Redis keeps at most.
	socketItems = 64
)

// Pool caches a connection per target, as Redis's migrate_cached_sockets
// does: it stays authenticated, remembers the database it last selected
// (no SELECT when it is the same), and is closed after ten seconds
// unused; at most 64 are kept. A connection in use is taken out of the
// cache, so that concurrent exchanges with one target each have their
// own. The zero Pool is ready to use.
type Pool struct {
	mu    sync.Mutex
	socks map[string]*Conn
	// afterFunc starts the idle timers; tests replace it to drive the
	// expiry without waiting ten seconds.
	afterFunc func(time.Duration, func()) stopper
}

type stopper interface{ Stop() bool }

// Conn is one connection to a target, out of the cache while in use.
type Conn struct {
	conn   net.Conn
	r      *bufio.Reader
	lastDB int64 // -1: none selected yet, or unknown after an error
	idle   stopper
}

// Cached is INFO's migrate_cached_sockets: the connections kept for the
// next exchange.
func (p *Pool) Cached() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.socks)
}

// Get takes addr's cached connection, or connects, waiting at most wait.
func (p *Pool) Get(addr string, wait time.Duration) (*Conn, error) {
	p.mu.Lock()
	s := p.socks[addr]
	if s != nil {
		delete(p.socks, addr)
		s.idle.Stop()
	}
	p.mu.Unlock()
	if s != nil {
		return s, nil
	}
	conn, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		return nil, err
	}
	return &Conn{conn: conn, r: bufio.NewReaderSize(conn, 1024), lastDB: -1}, nil
}

// Put gives s back to the cache, to be closed when unused for a while.
func (p *Pool) Put(addr string, s *Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.socks == nil {
		p.socks = map[string]*Conn{}
	}
	if old := p.socks[addr]; old != nil {
		// Another exchange with this target put one back meanwhile.
		s.conn.Close()
		return
	}
	if len(p.socks) >= socketItems {
		for a, old := range p.socks { // any one, as Redis drops a random one
			old.idle.Stop()
			old.conn.Close()
			delete(p.socks, a)
			break
		}
	}
	p.socks[addr] = s
	after := p.afterFunc
	if after == nil {
		after = func(d time.Duration, f func()) stopper { return time.AfterFunc(d, f) }
	}
	s.idle = after(socketTTL, func() {
		p.mu.Lock()
		if p.socks[addr] == s {
			delete(p.socks, addr)
			s.conn.Close()
		}
		p.mu.Unlock()
	})
}
