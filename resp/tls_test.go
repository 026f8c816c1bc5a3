package resp

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limitkv/limitkv/tlsconf/tlstest"
)

// tlsServer serves h over TLS with the configuration cfg holds.
func tlsServer(t *testing.T, h *testHandler, cfg *atomic.Pointer[tls.Config]) *testServer {
	t.Helper()
	srv := NewServer(h)
	srv.HandshakeTimeout = 300 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.ServeTLS(ln, cfg.Load)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return &testServer{srv: srv, h: h, addr: ln.Addr().String()}
}

func dialTLS(t *testing.T, addr string, cfg *tls.Config) (*client, *tls.Conn) {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	return &client{t: t, c: c, r: bufio.NewReader(c)}, c
}

func TestTLSServe(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	first, second := ca.Server(t, "first"), ca.Server(t, "second")
	var cfg atomic.Pointer[tls.Config]
	cfg.Store(&tls.Config{Certificates: []tls.Certificate{first.TLS}})
	h := &testHandler{}
	var fd atomic.Int64
	h.onOpen = func(c *Conn) { fd.Store(int64(c.FD())) }
	ts := tlsServer(t, h, &cfg)
	clientCfg := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}

	old, oldConn := dialTLS(t, ts.addr, clientCfg)
	if got := old.do("ECHO", "over tls"); got != `"over tls"` {
		t.Fatalf("ECHO: %q", got)
	}
	if fd.Load() < 0 {
		t.Errorf("a TLS connection's FD is %d, want its socket's", fd.Load())
	}
	if got := old.do("BIG", "100000"); len(got) != 100002 {
		t.Fatalf("BIG over TLS: %d bytes", len(got))
	}

	// A new configuration serves new connections; the old one keeps its own.
	cfg.Store(&tls.Config{Certificates: []tls.Certificate{second.TLS}})
	nc, newConn := dialTLS(t, ts.addr, clientCfg)
	if got := nc.do("PING"); got != "+PONG" {
		t.Fatalf("PING: %q", got)
	}
	if s := newConn.ConnectionState().PeerCertificates[0].SerialNumber; s.Cmp(second.Cert.SerialNumber) != 0 {
		t.Errorf("new connection sees serial %v, want the new certificate's %v", s, second.Cert.SerialNumber)
	}
	if got := old.do("PING"); got != "+PONG" {
		t.Fatalf("old connection after the change: %q", got)
	}
	if s := oldConn.ConnectionState().PeerCertificates[0].SerialNumber; s.Cmp(first.Cert.SerialNumber) != 0 {
		t.Errorf("old connection's serial changed to %v", s)
	}

	// Plain text on the TLS port gets nothing back, and costs one closed
	// connection.
	raw := ts.dial(t)
	raw.send("PING\r\n")
	if got := raw.readAll(); got != "" && got[0] == '+' {
		t.Errorf("plain PING on the TLS port answered %q", got)
	}
}

func TestTLSHandshakeTimeout(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	var cfg atomic.Pointer[tls.Config]
	cfg.Store(&tls.Config{Certificates: []tls.Certificate{ca.Server(t, "srv").TLS}})
	h := &testHandler{}
	hsErr := make(chan error, 1)
	h.onOpen = func(c *Conn) { hsErr <- c.Handshake() }
	ts := tlsServer(t, h, &cfg)

	// A client that connects and says nothing loses its connection once
	// the handshake's time is up; the handler learns why.
	silent := ts.dial(t)
	select {
	case err := <-hsErr:
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("handshake error %v, want a timeout", err)
		}
	case <-time.After(5 * time.Second):
		// 16 times the server's 300 ms, half the 10 s default: the
		// configured timeout ended it, however slow the machine.
		t.Fatal("a silent client's handshake did not time out")
	}
	if got := silent.readAll(); got != "" {
		t.Errorf("silent client got %q", got)
	}
	if n := len(ts.srv.Conns()); n != 0 {
		t.Errorf("%d connections left after a failed handshake", n)
	}
}

func TestTLSRefused(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	var cfg atomic.Pointer[tls.Config]
	cfg.Store(&tls.Config{Certificates: []tls.Certificate{ca.Server(t, "srv").TLS}})
	clientCfg := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}

	// Refused before the handshake (as for max clients): dropped.
	h := &testHandler{}
	h.refuse.Store(true)
	ts := tlsServer(t, h, &cfg)
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ts.addr, clientCfg)
	if err == nil {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		b := make([]byte, 64)
		n, rerr := c.Read(b)
		c.Close()
		if rerr == nil {
			t.Errorf("refused before the handshake, the client read %q", b[:n])
		}
	}

	// Refused after it (as for protected mode): the error reaches it.
	h2 := &testHandler{}
	h2.refuse.Store(true)
	h2.onOpen = func(c *Conn) { c.Handshake() }
	ts2 := tlsServer(t, h2, &cfg)
	cl, _ := dialTLS(t, ts2.addr, clientCfg)
	if got := cl.readAll(); got != "-ERR max number of clients reached\r\n" {
		t.Errorf("refused after the handshake: %q", got)
	}
}

func TestTLSKillDuringWrite(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	var cfg atomic.Pointer[tls.Config]
	cfg.Store(&tls.Config{Certificates: []tls.Certificate{ca.Server(t, "srv").TLS}})
	h := &testHandler{}
	ts := tlsServer(t, h, &cfg)
	cl, _ := dialTLS(t, ts.addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
	cl.do("PING")
	// A client that does not read: the server blocks writing to it, and
	// Kill from another goroutine must not wait for it.
	cl.send("BIG 8000000\r\n")
	time.Sleep(200 * time.Millisecond)
	conns := ts.srv.Conns()
	if len(conns) != 1 {
		t.Fatalf("%d connections", len(conns))
	}
	done := make(chan struct{})
	go func() {
		conns[0].Kill()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second): // blocked, it would wait for the client to read
		t.Fatal("Kill of a TLS connection blocked")
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(ts.srv.Conns()) != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(ts.srv.Conns()); n != 0 {
		t.Errorf("%d connections after Kill", n)
	}
}
