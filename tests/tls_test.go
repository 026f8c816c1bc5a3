package tests

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/limitkv/limitkv/internal/testserver"
	"github.com/limitkv/limitkv/tlsconf/tlstest"
)

// tlsFiles are the certificates a TLS test runs with, made at test time.
type tlsFiles struct {
	dir               string
	ca                *tlstest.CA
	caFile            string
	server            *tlstest.KeyPair
	certFile, keyFile string
	client            *tlstest.KeyPair
}

func newTLSFiles(t *testing.T) *tlsFiles {
	t.Helper()
	f := &tlsFiles{dir: t.TempDir(), ca: tlstest.NewCA(t, "limitkv test CA")}
	f.caFile = f.ca.Write(t, f.dir, "ca")
	f.server = f.ca.Server(t, "limitkv server")
	f.certFile, f.keyFile = f.server.Write(t, f.dir, "server")
	f.client = f.ca.Client(t, "limitkv client")
	return f
}

// flags returns the TLS flags of a server on tlsPort.
func (f *tlsFiles) flags(tlsPort int, more ...string) []string {
	return append([]string{"--tls-port", strconv.Itoa(tlsPort), "--tls-cert-file", f.certFile,
		"--tls-key-file", f.keyFile, "--tls-ca-cert-file", f.caFile}, more...)
}

// clientConfig trusts the test CA; with a client certificate if cert,
// sent whatever CAs the server names (Go's client would otherwise keep
// back one the server's CA did not sign).
func (f *tlsFiles) clientConfig(cert *tlstest.KeyPair) *tls.Config {
	c := &tls.Config{RootCAs: f.ca.Pool(), ServerName: "localhost"}
	if cert != nil {
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert.TLS, nil }
	}
	return c
}

// dialTLS opens a TLS connection and returns its peer's serial, or the
// handshake's error.
func dialTLS(t *testing.T, addr string, cfg *tls.Config) (*tls.Conn, error) {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(time.Minute))
	// TLS 1.3 reports a refused client certificate on the first read.
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return nil, err
	}
	if line != "+PONG\r\n" {
		return nil, fmt.Errorf("PING: %q", line)
	}
	return c, nil
}

func serial(c *tls.Conn) *big.Int { return c.ConnectionState().PeerCertificates[0].SerialNumber }

func tlsAddr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// TestTLSBesidePlain serves the plain and TLS ports side by side, to
// go-redis on both, with one keyspace.
func TestTLSBesidePlain(t *testing.T) {
	f := newTLSFiles(t)
	tlsPort := freePort(t)
	s := startLimitkv(t, f.flags(tlsPort, "--tls-auth-clients", "no")...)
	ctx := context.Background()
	for _, proto := range []int{2, 3} {
		secure := goRedis(t, tlsAddr(tlsPort), proto, func(o *redis.Options) { o.TLSConfig = f.clientConfig(nil) })
		plain := goRedis(t, s.Addr, proto)
		key := fmt.Sprintf("tls:%d", proto)
		if err := secure.Set(ctx, key, "over TLS", 0).Err(); err != nil {
			t.Fatalf("RESP%d SET over TLS: %v", proto, err)
		}
		if v, err := plain.Get(ctx, key).Result(); err != nil || v != "over TLS" {
			t.Fatalf("RESP%d GET on the plain port = %q, %v", proto, v, err)
		}
		res, err := secure.Do(ctx, "RL.SLIDE", "tls:limit", 2, 1000).Slice()
		if err != nil || res[0].(int64) != 1 {
			t.Fatalf("RL.SLIDE over TLS = %v, %v", res, err)
		}
		secure.Del(ctx, "tls:limit")
	}
	// CLIENT LIST shows the TLS client with its socket's fd.
	secure := goRedis(t, tlsAddr(tlsPort), 2, func(o *redis.Options) { o.TLSConfig = f.clientConfig(nil) })
	list, err := secure.ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		if strings.Contains(line, " fd=-1 ") {
			t.Errorf("a client without fd: %s", line)
		}
	}
	// Plain text on the TLS port is not served.
	raw, err := net.DialTimeout("tcp", tlsAddr(tlsPort), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(10 * time.Second))
	raw.Write([]byte("PING\r\n"))
	if line, _ := bufio.NewReader(raw).ReadString('\n'); strings.Contains(line, "PONG") {
		t.Errorf("plain PING on the TLS port answered %q", line)
	}
}

// TestTLSMutual checks tls-auth-clients: yes requires a certificate signed
// by the CA, optional checks one if given, no asks for none.
func TestTLSMutual(t *testing.T) {
	f := newTLSFiles(t)
	other := tlstest.NewCA(t, "another CA").Client(t, "stranger")
	tlsPort := freePort(t)
	s := startLimitkv(t, f.flags(tlsPort)...) // tls-auth-clients defaults to yes
	addr := tlsAddr(tlsPort)
	ctx := context.Background()

	noCert := goRedis(t, addr, 2, func(o *redis.Options) { o.TLSConfig = f.clientConfig(nil); o.MaxRetries = -1 })
	if err := noCert.Ping(ctx).Err(); err == nil {
		t.Error("tls-auth-clients yes: a client without a certificate was served")
	}
	withCert := goRedis(t, addr, 2, func(o *redis.Options) { o.TLSConfig = f.clientConfig(f.client) })
	if err := withCert.Ping(ctx).Err(); err != nil {
		t.Errorf("tls-auth-clients yes: a client with the CA's certificate: %v", err)
	}
	if _, err := dialTLS(t, addr, f.clientConfig(other)); err == nil {
		t.Error("tls-auth-clients yes: a certificate of another CA was accepted")
	}

	plain := goRedis(t, s.Addr, 2)
	if err := plain.ConfigSet(ctx, "tls-auth-clients", "optional").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := dialTLS(t, addr, f.clientConfig(nil)); err != nil {
		t.Errorf("tls-auth-clients optional: a client without a certificate: %v", err)
	}
	if _, err := dialTLS(t, addr, f.clientConfig(f.client)); err != nil {
		t.Errorf("tls-auth-clients optional: a client with a valid certificate: %v", err)
	}
	if _, err := dialTLS(t, addr, f.clientConfig(other)); err == nil {
		t.Error("tls-auth-clients optional: a certificate of another CA was accepted")
	}

	if err := plain.ConfigSet(ctx, "tls-auth-clients", "no").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := dialTLS(t, addr, f.clientConfig(other)); err != nil {
		t.Errorf("tls-auth-clients no: %v", err)
	}

	// Refused handshakes leave no client behind.
	if err := plain.ConfigSet(ctx, "tls-auth-clients", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	before := countClients(t, plain)
	for range 3 {
		if _, err := dialTLS(t, addr, f.clientConfig(other)); err == nil {
			t.Fatal("a certificate of another CA was accepted")
		}
	}
	// The server sends its alert before it lets the connection go: the
	// client may read the refusal a moment before the count drops.
	n := countClients(t, plain)
	for end := time.Now().Add(2 * time.Second); n != before && time.Now().Before(end); n = countClients(t, plain) {
		time.Sleep(10 * time.Millisecond)
	}
	if n != before {
		t.Errorf("%d clients 2 s after refused handshakes, %d before", n, before)
	}
	if !strings.Contains(s.Output(), "Error accepting a client connection") {
		t.Errorf("refused handshakes are not logged:\n%s", s.Output())
	}
}

func countClients(t *testing.T, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(context.Background(), "clients").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "connected_clients:"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	t.Fatal("no connected_clients in INFO")
	return 0
}

// redisCLIPath finds redis-cli; required under CI, skipped locally.
func redisCLIPath(t *testing.T) string {
	t.Helper()
	return testserver.Require(t, "redis-cli")
}

// TestTLSRedisCLI talks to the TLS port with redis-cli --tls, as
// docs/operations.md's TLS section shows.
func TestTLSRedisCLI(t *testing.T) {
	cli := redisCLIPath(t)
	f := newTLSFiles(t)
	tlsPort := freePort(t)
	startLimitkv(t, f.flags(tlsPort)...)
	clientCert, clientKey := f.client.Write(t, f.dir, "client")
	run := func(args ...string) (string, error) {
		cmd := exec.Command(cli, append([]string{"--tls", "--cacert", f.caFile, "-h", "127.0.0.1", "-p", strconv.Itoa(tlsPort)}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	out, err := run("--cert", clientCert, "--key", clientKey, "PING")
	if err != nil || out != "PONG" {
		t.Fatalf("redis-cli --tls PING: %q %v", out, err)
	}
	out, _ = run("--cert", clientCert, "--key", clientKey, "RL.SLIDE", "cli", "1", "1000")
	if !strings.HasPrefix(out, "1\n") {
		t.Errorf("RL.SLIDE over redis-cli --tls: %q", out)
	}
	// Without a client certificate: refused (tls-auth-clients yes).
	if out, _ := run("PING"); out == "PONG" {
		t.Error("redis-cli without a client certificate was served")
	}
}

// TestTLSReload replaces the certificate with CONFIG SET: new connections
// get the new one, open ones keep working, a bad file changes nothing.
func TestTLSReload(t *testing.T) {
	f := newTLSFiles(t)
	tlsPort := freePort(t)
	s := startLimitkv(t, f.flags(tlsPort, "--tls-auth-clients", "no")...)
	addr := tlsAddr(tlsPort)
	admin := dialRaw(t, s.Addr)
	cfg := f.clientConfig(nil)

	old, err := dialTLS(t, addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if serial(old).Cmp(f.server.Cert.SerialNumber) != 0 {
		t.Fatalf("serial %v, want %v", serial(old), f.server.Cert.SerialNumber)
	}

	// New files, named by CONFIG SET.
	next := f.ca.Server(t, "renewed")
	certFile, keyFile := next.Write(t, f.dir, "renewed")
	if got := admin.str("CONFIG", "SET", "tls-cert-file", certFile, "tls-key-file", keyFile); got != "+OK" {
		t.Fatalf("CONFIG SET: %s", got)
	}
	c, err := dialTLS(t, addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if serial(c).Cmp(next.Cert.SerialNumber) != 0 {
		t.Errorf("after CONFIG SET, serial %v, want %v", serial(c), next.Cert.SerialNumber)
	}
	if _, err := old.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(old).ReadString('\n'); line != "+PONG\r\n" {
		t.Errorf("the connection opened before the reload: %q %v", line, err)
	}

	// The same files, renewed in place: setting the same path reloads it.
	renewed := f.ca.Server(t, "renewed again")
	tlstest.WriteFile(t, certFile, renewed.CertPEM)
	tlstest.WriteFile(t, keyFile, renewed.KeyPEM)
	if got := admin.str("CONFIG", "SET", "tls-cert-file", certFile, "tls-key-file", keyFile); got != "+OK" {
		t.Fatalf("CONFIG SET, same paths: %s", got)
	}
	if c, err := dialTLS(t, addr, cfg); err != nil || serial(c).Cmp(renewed.Cert.SerialNumber) != 0 {
		t.Errorf("after reloading the same paths: %v", err)
	}

	// A bad file: Redis's error, and the configuration in use stays.
	bad := filepath.Join(f.dir, "bad.crt")
	tlstest.WriteFile(t, bad, []byte("not a certificate"))
	want := "-ERR CONFIG SET failed (possibly related to argument 'tls-cert-file') - Unable to update TLS configuration. Check server logs."
	if got := admin.str("CONFIG", "SET", "tls-cert-file", bad); got != want {
		t.Errorf("bad certificate file: %s", got)
	}
	if got := admin.str("CONFIG", "SET", "tls-key-file", f.keyFile); !strings.Contains(got, "Unable to update TLS configuration") {
		t.Errorf("a key that is not the certificate's: %s", got)
	}
	if got := admin.str("CONFIG", "GET", "tls-cert-file"); got != `["tls-cert-file", `+strconv.Quote(certFile)+`]` {
		t.Errorf("CONFIG GET after refused sets: %s", got)
	}
	if c, err := dialTLS(t, addr, cfg); err != nil || serial(c).Cmp(renewed.Cert.SerialNumber) != 0 {
		t.Errorf("after a refused reload, want the previous certificate: %v", err)
	}
	if !strings.Contains(s.Output(), "Failed to load certificate: "+bad) {
		t.Errorf("the log does not say why:\n%s", s.Output())
	}
}

// TestTLSProtocols restricts the versions: TLSv1.3 only refuses a client
// that speaks TLS 1.2 at most.
func TestTLSProtocols(t *testing.T) {
	f := newTLSFiles(t)
	tlsPort := freePort(t)
	s := startLimitkv(t, f.flags(tlsPort, "--tls-auth-clients", "no")...)
	addr := tlsAddr(tlsPort)
	admin := dialRaw(t, s.Addr)
	tls12 := f.clientConfig(nil)
	tls12.MaxVersion = tls.VersionTLS12
	if c, err := dialTLS(t, addr, tls12); err != nil || c.ConnectionState().Version != tls.VersionTLS12 {
		t.Fatalf("a TLS 1.2 client with the defaults: %v", err)
	}
	if got := admin.str("CONFIG", "SET", "tls-protocols", "TLSv1.3"); got != "+OK" {
		t.Fatal(got)
	}
	if _, err := dialTLS(t, addr, tls12); err == nil {
		t.Error("tls-protocols TLSv1.3 served a TLS 1.2 client")
	}
	if c, err := dialTLS(t, addr, f.clientConfig(nil)); err != nil || c.ConnectionState().Version != tls.VersionTLS13 {
		t.Errorf("a TLS 1.3 client: %v", err)
	}
	want := "-ERR CONFIG SET failed (possibly related to argument 'tls-protocols') - Unable to update TLS configuration. Check server logs."
	if got := admin.str("CONFIG", "SET", "tls-protocols", "TLSv1.2 SSLv3"); got != want {
		t.Errorf("bad tls-protocols: %s", got)
	}
	// tls-ciphers limits TLS 1.2 suites.
	if got := admin.str("CONFIG", "SET", "tls-protocols", "TLSv1.2", "tls-ciphers", "ECDHE-ECDSA-AES256-GCM-SHA384"); got != "+OK" {
		t.Fatal(got)
	}
	c, err := dialTLS(t, addr, f.clientConfig(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cs := c.ConnectionState().CipherSuite; cs != tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 {
		t.Errorf("cipher suite %s", tls.CipherSuiteName(cs))
	}
}

// TestTLSPortAtRunTime opens and closes the TLS port with CONFIG SET, as
// Redis 7 does.
func TestTLSPortAtRunTime(t *testing.T) {
	f := newTLSFiles(t)
	s := startLimitkv(t, "--tls-cert-file", f.certFile, "--tls-key-file", f.keyFile, "--tls-ca-cert-file", f.caFile, "--tls-auth-clients", "no")
	admin := dialRaw(t, s.Addr)
	tlsPort := freePort(t)
	addr := tlsAddr(tlsPort)
	if _, err := dialTLS(t, addr, f.clientConfig(nil)); err == nil {
		t.Fatal("TLS served before tls-port was set")
	}
	if got := admin.str("CONFIG", "SET", "tls-port", strconv.Itoa(tlsPort)); got != "+OK" {
		t.Fatalf("CONFIG SET tls-port: %s", got)
	}
	kept, err := dialTLS(t, addr, f.clientConfig(nil))
	if err != nil {
		t.Fatalf("after CONFIG SET tls-port: %v", err)
	}
	// A port in use: refused, and the TLS port stays where it was.
	_, plainPort, _ := net.SplitHostPort(s.Addr)
	want := "-ERR CONFIG SET failed (possibly related to argument 'tls-port') - Unable to listen on this port. Check server logs."
	if got := admin.str("CONFIG", "SET", "tls-port", plainPort); got != want {
		t.Errorf("CONFIG SET tls-port to a port in use: %s", got)
	}
	if got := admin.str("CONFIG", "GET", "tls-port"); got != `["tls-port", "`+strconv.Itoa(tlsPort)+`"]` {
		t.Errorf("CONFIG GET tls-port: %s", got)
	}
	if _, err := dialTLS(t, addr, f.clientConfig(nil)); err != nil {
		t.Errorf("after a refused change: %v", err)
	}
	// CONFIG SET bind moves the TLS listeners with the plain ones: an
	// address that cannot be bound leaves both where they were.
	if got := admin.str("CONFIG", "SET", "bind", "127.0.0.1 192.0.2.1"); !strings.Contains(got, "Failed to bind to specified addresses.") {
		t.Errorf("CONFIG SET bind to a foreign address: %s", got)
	}
	if got := admin.str("CONFIG", "SET", "bind", "*"); got != "+OK" {
		t.Fatalf("CONFIG SET bind *: %s", got)
	}
	if _, err := dialTLS(t, addr, f.clientConfig(nil)); err != nil {
		t.Errorf("TLS after CONFIG SET bind *: %v", err)
	}
	if got := admin.str("CONFIG", "SET", "bind", ""); got != "+OK" {
		t.Fatalf("CONFIG SET bind \"\": %s", got)
	}
	if _, err := dialTLS(t, addr, f.clientConfig(nil)); err == nil {
		t.Error("TLS served with no bind address")
	}
	if got := admin.str("CONFIG", "SET", "bind", "127.0.0.1"); got != "+OK" {
		t.Fatalf("CONFIG SET bind 127.0.0.1: %s", got)
	}
	if _, err := dialTLS(t, addr, f.clientConfig(nil)); err != nil {
		t.Errorf("TLS after CONFIG SET bind 127.0.0.1: %v", err)
	}
	if got := admin.str("CONFIG", "SET", "tls-port", "0"); got != "+OK" {
		t.Fatal(got)
	}
	if _, err := dialTLS(t, addr, f.clientConfig(nil)); err == nil {
		t.Error("TLS served after tls-port 0")
	}
	// Connections keep going when their listener closes.
	if _, err := kept.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(kept).ReadString('\n'); line != "+PONG\r\n" {
		t.Errorf("a TLS connection after its port closed: %q %v", line, err)
	}
}

// TestTLSOnly serves TLS alone (port 0), and refuses to start without a
// usable certificate, as Redis does.
func TestTLSOnly(t *testing.T) {
	f := newTLSFiles(t)
	tlsPort := freePort(t)
	dir := t.TempDir()
	s := startProcess(t, testserver.Spec{Kind: testserver.Limitkv, Bin: limitkvBin, Addr: tlsAddr(tlsPort), Dir: dir, TLS: f.clientConfig(nil),
		Args: append([]string{"--port", "0", "--dir", dir, "--tls-auth-clients", "no"}, f.flags(tlsPort)...)})
	c := goRedis(t, s.Addr, 3, func(o *redis.Options) { o.TLSConfig = f.clientConfig(nil) })
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, "tcp_port:"+strconv.Itoa(tlsPort)+"\r\n") {
		t.Errorf("INFO tcp_port of a TLS-only server should be its TLS port:\n%s", info)
	}

	out, err := runBinary(t, "--port", "0", "--dir", t.TempDir(), "--tls-port", strconv.Itoa(freePort(t)),
		"--tls-cert-file", filepath.Join(f.dir, "missing.crt"), "--tls-key-file", f.keyFile, "--tls-auth-clients", "no")
	if err == nil || !strings.Contains(out, "Failed to configure TLS") || !strings.Contains(out, "missing.crt") {
		t.Errorf("a missing certificate at start-up: %v\n%s", err, out)
	}
	out, err = runBinary(t, "--port", "0", "--dir", t.TempDir())
	if err == nil || !strings.Contains(out, "Configured to not listen anywhere") {
		t.Errorf("no port at all: %v\n%s", err, out)
	}
}

// TestTLSHandshakeHoldsASlot: a client in its handshake counts against
// maxclients, as in Redis, and one that never completes it is closed by
// the timeout, then its slot is free.
func TestTLSHandshakeHoldsASlot(t *testing.T) {
	f := newTLSFiles(t)
	tlsPort := freePort(t)
	s := startLimitkv(t, f.flags(tlsPort, "--tls-auth-clients", "no", "--maxclients", "2", "--timeout", "2")...)
	admin := goRedis(t, s.Addr, 2, func(o *redis.Options) { o.PoolSize = 1 })
	// The connection that saw the server ready may not be gone yet: the
	// server notices a closed connection when it next reads it.
	for wait := time.Now().Add(15 * time.Second); countClients(t, admin) != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(wait) {
			t.Fatalf("%d clients", countClients(t, admin))
		}
	}
	silent, err := net.DialTimeout("tcp", tlsAddr(tlsPort), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	start := time.Now()
	for countClients(t, admin) != 2 {
		if time.Since(start) > 15*time.Second {
			t.Fatal("the client in its handshake is not counted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c := dialRaw(t, s.Addr)
	if got := c.str("PING"); got != "-ERR max number of clients reached" {
		t.Errorf("while a handshake is pending: %s", got)
	}
	// Over TLS, a refusal before the handshake sends nothing, as in Redis.
	if _, err := dialTLS(t, tlsAddr(tlsPort), f.clientConfig(nil)); err == nil {
		t.Error("a TLS client past maxclients was served")
	}
	// Closed by the server, not by the client's own deadline, and not
	// before the timeout.
	silent.SetReadDeadline(time.Now().Add(15 * time.Second))
	n, err := silent.Read(make([]byte, 1))
	if ne, ok := err.(net.Error); err == nil || ok && ne.Timeout() {
		t.Fatalf("the silent client read %d bytes (%v): it was not closed", n, err)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("closed after %v, want about the 2s timeout", d)
	}
	deadline := time.Now().Add(15 * time.Second)
	for countClients(t, admin) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("slot not freed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := dialRaw(t, s.Addr).str("PING"); got != "+PONG" {
		t.Errorf("after the handshake timed out: %s", got)
	}
}

// str sends a command and returns its reply as resp.Value prints it.
func (rc *rawConn) str(args ...string) string {
	rc.t.Helper()
	return rc.do(args...).String()
}
