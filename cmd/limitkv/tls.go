package main

import (
	"log/slog"
	"net"
	"strconv"
	"sync"

	"github.com/limitkv/limitkv/commands"
)

// tlsListeners are the listeners of tls-port, on every bind address:
// opened at start-up, and again whenever CONFIG SET tls-port changes it.
type tlsListeners struct {
	srv  *commands.Server
	bind string
	log  *slog.Logger

	mu  sync.Mutex
	lns []net.Listener
}

// listen serves TLS on port instead of the current port (0: nowhere).
// The new port is opened before the old one is closed, so that a port
// that cannot be opened leaves the server as it was.
func (t *tlsListeners) listen(port int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var lns []net.Listener
	if port != 0 {
		var err error
		if lns, err = listen(t.bind, strconv.Itoa(port), t.log); err != nil {
			t.log.Warn("Could not create server TLS listening socket", "port", port, "err", err)
			return err
		}
	}
	for _, ln := range t.lns {
		ln.Close()
	}
	t.lns = lns
	for _, ln := range lns {
		go func(ln net.Listener) {
			if err := t.srv.Net.ServeTLS(ln, t.srv.Cfg.TLSServerConfig); err != nil {
				t.log.Error("serve TLS", "addr", ln.Addr().String(), "err", err)
			}
		}(ln)
	}
	return nil
}

// addrs returns the addresses listened on.
func (t *tlsListeners) addrs() []net.Addr {
	t.mu.Lock()
	defer t.mu.Unlock()
	return listenAddrs(t.lns)
}
