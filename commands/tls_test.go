package commands

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"math/big"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/tlsconf/tlstest"
)

// tlsConfigFixture is a config that uses TLS for replication (so that it
// needs no listener), over certificates made for the test.
type tlsConfigFixture struct {
	cfg               *Config
	dir               string
	ca                *tlstest.CA
	certFile, keyFile string
	serial            *big.Int
}

func newTLSConfigFixture(t *testing.T) *tlsConfigFixture {
	t.Helper()
	f := &tlsConfigFixture{dir: t.TempDir(), ca: tlstest.NewCA(t, "CA")}
	kp := f.ca.Server(t, "first")
	f.certFile, f.keyFile = kp.Write(t, f.dir, "server")
	f.serial = kp.Cert.SerialNumber
	cfg := NewConfig()
	for _, kv := range [][2]string{
		{"tls-cert-file", f.certFile}, {"tls-key-file", f.keyFile},
		{"tls-ca-cert-file", f.ca.Write(t, f.dir, "ca")}, {"tls-replication", "yes"},
	} {
		if err := cfg.Set([][2]string{kv}, true); err != nil {
			t.Fatal(err)
		}
	}
	New(engine.New(engine.Config{Databases: 1}), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := cfg.ConfigureTLS(); err != nil {
		t.Fatal(err)
	}
	f.cfg = cfg
	return f
}

// servedSerial is the serial of the certificate new TLS connections get.
func (f *tlsConfigFixture) servedSerial() *big.Int {
	return f.cfg.TLSServerConfig().Certificates[0].Leaf.SerialNumber
}

func TestConfigSetTLSAllOrNothing(t *testing.T) {
	f := newTLSConfigFixture(t)
	next := f.ca.Server(t, "second")
	certFile, keyFile := next.Write(t, f.dir, "next")

	// The certificate and its key change together: one rebuild after
	// both are set, as Redis applies once per CONFIG SET.
	if err := f.cfg.Set([][2]string{{"tls-cert-file", certFile}, {"tls-key-file", keyFile}}, false); err != nil {
		t.Fatal(err)
	}
	if f.servedSerial().Cmp(next.Cert.SerialNumber) != 0 {
		t.Fatal("new certificate not in use")
	}

	// A certificate without its key: refused, every value back.
	want := "ERR CONFIG SET failed (possibly related to argument 'tls-cert-file') - Unable to update TLS configuration. Check server logs."
	err := f.cfg.Set([][2]string{{"TLS-CERT-FILE", f.certFile}, {"tls-protocols", "TLSv1.3"}}, false)
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	if got := f.cfg.Get("tls-cert-file"); got != certFile {
		t.Errorf("tls-cert-file is %q after a refused set", got)
	}
	if got := f.cfg.Get("tls-protocols"); got != "" {
		t.Errorf("tls-protocols is %q after a refused set", got)
	}
	if f.servedSerial().Cmp(next.Cert.SerialNumber) != 0 {
		t.Error("a refused set changed the certificate in use")
	}

	// A file renewed in place is read again when set to the same path;
	// a setting that is not a file, set to its value, rebuilds nothing.
	renewed := f.ca.Server(t, "renewed")
	tlstest.WriteFile(t, certFile, renewed.CertPEM)
	if err := f.cfg.Set([][2]string{{"tls-protocols", ""}}, false); err != nil {
		t.Fatal(err)
	}
	if f.servedSerial().Cmp(next.Cert.SerialNumber) != 0 {
		t.Error("an unchanged tls-protocols reloaded the files")
	}
	// The key on disk is not the certificate's yet: refused.
	if err := f.cfg.Set([][2]string{{"tls-cert-file", certFile}}, false); err == nil {
		t.Error("a certificate whose key is elsewhere was accepted")
	}
	tlstest.WriteFile(t, keyFile, renewed.KeyPEM)
	if err := f.cfg.Set([][2]string{{"tls-cert-file", certFile}}, false); err != nil {
		t.Fatal(err)
	}
	if f.servedSerial().Cmp(renewed.Cert.SerialNumber) != 0 {
		t.Error("setting the same path did not reload the file")
	}

	// tls-port needs a listener, which main provides.
	want = "ERR CONFIG SET failed (possibly related to argument 'tls-port') - Unable to listen on this port. Check server logs."
	if err := f.cfg.Set([][2]string{{"tls-port", "6390"}}, false); err == nil || err.Error() != want {
		t.Errorf("tls-port without a listener: %v", err)
	}
	if got := f.cfg.Get("tls-port"); got != "0" {
		t.Errorf("tls-port is %q after a refused set", got)
	}
}

func TestConfigSetTLSPortUndo(t *testing.T) {
	f := newTLSConfigFixture(t)
	var ports []int
	f.cfg.srv.Hooks.ListenTLS = func(port int) error {
		ports = append(ports, port)
		return nil
	}
	if err := f.cfg.Set([][2]string{{"tls-port", "7000"}}, false); err != nil {
		t.Fatal(err)
	}
	// The port opens, then the certificate fails: the port goes back.
	bad := filepath.Join(f.dir, "missing.crt")
	if err := f.cfg.Set([][2]string{{"tls-port", "7001"}, {"tls-cert-file", bad}}, false); err == nil {
		t.Fatal("a missing certificate was accepted")
	}
	if len(ports) != 3 || ports[0] != 7000 || ports[1] != 7001 || ports[2] != 7000 {
		t.Errorf("listened on %v, want [7000 7001 7000]", ports)
	}
	if got := f.cfg.Get("tls-port"); got != "7000" {
		t.Errorf("tls-port %s", got)
	}
	// Setting the port it has does nothing.
	if err := f.cfg.Set([][2]string{{"tls-port", "7000"}}, false); err != nil || len(ports) != 3 {
		t.Errorf("%v, listened on %v", err, ports)
	}
}

func TestTLSAuthClientsWithoutRebuild(t *testing.T) {
	f := newTLSConfigFixture(t)
	if f.cfg.TLSServerConfig().ClientAuth != tls.RequireAndVerifyClientCert {
		t.Error("tls-auth-clients yes by default")
	}
	for v, want := range map[string]tls.ClientAuthType{"no": tls.NoClientCert, "optional": tls.VerifyClientCertIfGiven, "YES": tls.RequireAndVerifyClientCert} {
		if err := f.cfg.Set([][2]string{{"tls-auth-clients", v}}, false); err != nil {
			t.Fatal(err)
		}
		if got := f.cfg.TLSServerConfig().ClientAuth; got != want {
			t.Errorf("tls-auth-clients %s: %v", v, got)
		}
	}
}

// TestReplicationTLS checks the hook a replica's dialer uses: a client
// configuration that presents the server's certificate and trusts the CA.
func TestReplicationTLS(t *testing.T) {
	f := newTLSConfigFixture(t)
	primary := f.ca.Server(t, "primary")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	seen := make(chan *big.Int, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{primary.TLS},
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: f.ca.Pool()})
		tc.SetDeadline(time.Now().Add(10 * time.Second))
		if tc.Handshake() == nil {
			seen <- tc.ConnectionState().PeerCertificates[0].SerialNumber
			tc.Write([]byte("+OK\r\n"))
		}
		close(seen)
	}()
	if f.cfg.ReplicationTLS() == nil {
		t.Fatal("tls-replication yes: no configuration")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := f.cfg.DialReplication(ctx, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(*tls.Conn); !ok {
		t.Fatalf("tls-replication yes: a %T", c)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Read(make([]byte, 5))
	if s := <-seen; s == nil || s.Cmp(f.serial) != 0 {
		t.Errorf("the primary saw serial %v, want the server's %v", s, f.serial)
	}
	if err := f.cfg.Set([][2]string{{"tls-replication", "no"}}, false); err != nil {
		t.Fatal(err)
	}
	if f.cfg.ReplicationTLS() != nil {
		t.Error("tls-replication no: a TLS configuration")
	}
	plain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	c2, err := f.cfg.DialReplication(ctx, plain.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, ok := c2.(*tls.Conn); ok {
		t.Error("tls-replication no: a TLS link")
	}
}
