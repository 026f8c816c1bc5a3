package main

import (
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
)

// listenerSet is the listeners of one port, the plain one or tls-port, on
// every bind address: opened at start-up, and again when CONFIG SET
// changes the port or bind, as Redis 7.0 does. Connections accepted
// before a change stay.
type listenerSet struct {
	kind  string // "plain" or "TLS", for the log
	serve func(net.Listener) error
	log   *slog.Logger

	mu      sync.Mutex
	bind    string
	port    int
	lns     []net.Listener
	serving bool // accepting: listeners opened from now on serve at once
}

// listen serves on port instead of the current port (0: nowhere).
func (s *listenerSet) listen(port int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.moveLocked(s.bind, port)
}

// rebind serves on the addresses of bind instead of the current ones.
func (s *listenerSet) rebind(bind string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.moveLocked(bind, s.port)
}

// moveLocked listens on bind and port instead. A port or address that
// cannot be listened on leaves the set as it was: the new listeners are
// opened before the old ones close; when they cannot open beside them
// (the same port on addresses that overlap: 127.0.0.1 and *), the old
// ones close first and, if the new ones still cannot open, open again.
func (s *listenerSet) moveLocked(bind string, port int) error {
	if port == 0 {
		s.closeLocked()
		s.bind, s.port = bind, 0
		return nil
	}
	lns, err := listen(bind, strconv.Itoa(port), s.log)
	if err != nil && len(s.lns) > 0 {
		s.closeLocked()
		if lns, err = listen(bind, strconv.Itoa(port), s.log); err != nil {
			old, rerr := listen(s.bind, strconv.Itoa(s.port), s.log)
			if rerr != nil {
				s.log.Error("cannot listen again where the server listened: it no longer accepts "+s.kind+" connections",
					"bind", s.bind, "port", s.port, "err", rerr)
			}
			s.startLocked(old)
		}
	}
	if err != nil {
		s.log.Warn("cannot listen", "kind", s.kind, "bind", bind, "port", port, "err", err)
		return err
	}
	s.closeLocked()
	s.bind, s.port = bind, port
	s.startLocked(lns)
	return nil
}

// startLocked makes lns the set's listeners, serving them if it serves.
func (s *listenerSet) startLocked(lns []net.Listener) {
	s.lns = lns
	if s.serving {
		for _, ln := range lns {
			go s.serveOne(ln)
		}
	}
}

func (s *listenerSet) closeLocked() {
	for _, ln := range s.lns {
		ln.Close()
	}
	s.lns = nil
}

func (s *listenerSet) serveOne(ln net.Listener) {
	if err := s.serve(ln); err != nil {
		s.log.Error("serve", "kind", s.kind, "addr", ln.Addr().String(), "err", err)
	}
}

// start serves the listeners, now and from now on.
func (s *listenerSet) start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.serving = true
	s.startLocked(s.lns)
}

// close closes the listeners.
func (s *listenerSet) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked()
}

// addrs returns the addresses listened on.
func (s *listenerSet) addrs() []net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]net.Addr, len(s.lns))
	for i, ln := range s.lns {
		out[i] = ln.Addr()
	}
	return out
}

// rebindAll moves the plain and the TLS listeners to the addresses of
// bind, for CONFIG SET bind (Redis's changeBindAddr): both or neither.
func rebindAll(plain, tls *listenerSet, bind string) error {
	old := plain.bindAddr()
	if err := plain.rebind(bind); err != nil {
		return err
	}
	if err := tls.rebind(bind); err != nil {
		if rerr := plain.rebind(old); rerr != nil {
			plain.log.Error("cannot listen again on the previous bind addresses", "bind", old, "err", rerr)
		}
		return err
	}
	return nil
}

func (s *listenerSet) bindAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bind
}

// listen opens a listener for every address in bind ("127.0.0.1 ::1"). An
// address written with a leading '-' is optional, as in Redis: failing to
// bind it is not an error. An empty bind opens none, as Redis 7.0 listens
// on no TCP socket then.
func listen(bind, port string, log *slog.Logger) ([]net.Listener, error) {
	var out []net.Listener
	addrs := strings.Fields(bind)
	if len(addrs) == 0 {
		return nil, nil
	}
	for _, addr := range addrs {
		optional := strings.HasPrefix(addr, "-")
		addr = strings.TrimPrefix(addr, "-")
		if addr == "*" {
			addr = ""
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(addr, port))
		if err != nil {
			if optional {
				log.Warn("optional bind address unavailable", "addr", addr, "err", err)
				continue
			}
			for _, l := range out {
				l.Close()
			}
			return nil, err
		}
		out = append(out, ln)
	}
	if len(out) == 0 {
		return nil, errors.New("no address to listen on (bind " + bind + ")")
	}
	return out, nil
}
