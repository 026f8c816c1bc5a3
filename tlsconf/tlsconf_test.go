package tlsconf

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limitkv/limitkv/tlsconf/tlstest"
)

type files struct {
	dir               string
	ca                *tlstest.CA
	caFile            string
	server            *tlstest.KeyPair
	certFile, keyFile string
}

func newFiles(t *testing.T) *files {
	t.Helper()
	f := &files{dir: t.TempDir(), ca: tlstest.NewCA(t, "CA")}
	f.caFile = f.ca.Write(t, f.dir, "ca")
	f.server = f.ca.Server(t, "server")
	f.certFile, f.keyFile = f.server.Write(t, f.dir, "server")
	return f
}

func (f *files) settings() Settings {
	return Settings{CertFile: f.certFile, KeyFile: f.keyFile, CACertFile: f.caFile, NeedCA: true,
		SessionCaching: true, SessionCacheTimeout: 300 * time.Second}
}

func TestBuildErrors(t *testing.T) {
	f := newFiles(t)
	other := tlstest.NewCA(t, "other").Server(t, "other")
	_, otherKey := other.Write(t, f.dir, "other")
	junk := filepath.Join(f.dir, "junk")
	tlstest.WriteFile(t, junk, []byte("junk"))
	for _, tc := range []struct {
		name string
		edit func(*Settings)
		want string
	}{
		{"no cert", func(s *Settings) { s.CertFile = "" }, "No tls-cert-file configured!"},
		{"no key", func(s *Settings) { s.KeyFile = "" }, "No tls-key-file configured!"},
		{"no CA", func(s *Settings) { s.CACertFile = "" }, "Either tls-ca-cert-file or tls-ca-cert-dir must be specified"},
		{"protocols", func(s *Settings) { s.Protocols = "TLSv1.2 SSLv3" }, "Invalid tls-protocols specified. Use a combination"},
		{"protocols double space", func(s *Settings) { s.Protocols = "TLSv1.2  TLSv1.3" }, "Invalid tls-protocols"},
		{"protocols gap", func(s *Settings) { s.Protocols = "TLSv1.1 TLSv1.3" }, "leaves out TLS 1.2"},
		{"missing cert", func(s *Settings) { s.CertFile = f.dir + "/nope.crt" }, "Failed to load certificate: " + f.dir + "/nope.crt: no such file"},
		{"junk cert", func(s *Settings) { s.CertFile = junk }, "Failed to load certificate: " + junk},
		{"missing key", func(s *Settings) { s.KeyFile = f.dir + "/nope.key" }, "Failed to load private key: " + f.dir + "/nope.key"},
		{"key of another cert", func(s *Settings) { s.KeyFile = otherKey }, "Failed to load private key: " + otherKey},
		{"junk CA", func(s *Settings) { s.CACertFile = junk }, "Failed to configure CA certificate(s) file/directory"},
		{"missing CA dir", func(s *Settings) { s.CACertFile, s.CACertDir = "", f.dir+"/nope" }, "Failed to configure CA certificate(s) file/directory"},
		{"ciphers", func(s *Settings) { s.Ciphers = "BOGUS" }, "Failed to configure ciphers: BOGUS"},
		{"ciphersuites", func(s *Settings) { s.CipherSuites = "BOGUS" }, "Failed to configure ciphersuites: BOGUS"},
		{"ciphersuites Go lacks, TLS 1.3 only", func(s *Settings) { s.CipherSuites, s.Protocols = "TLS_AES_128_CCM_SHA256", "TLSv1.3" }, "Failed to configure ciphersuites"},
		{"dh params", func(s *Settings) { s.DHParamsFile = junk }, junk + ": failed to read DH params."},
		{"client key", func(s *Settings) { s.ClientCertFile, s.ClientKeyFile = f.certFile, otherKey }, "Failed to load private key: " + otherKey},
	} {
		st := f.settings()
		tc.edit(&st)
		set, err := Build(st)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
		if set != nil {
			t.Errorf("%s: a failed build returned a configuration", tc.name)
		}
	}
	// Without a CA and with nothing needing one, it builds.
	st := f.settings()
	st.CACertFile, st.NeedCA = "", false
	if _, err := Build(st); err != nil {
		t.Error(err)
	}
	// A CA directory.
	caDir := t.TempDir()
	f.ca.Write(t, caDir, "ca")
	tlstest.WriteFile(t, filepath.Join(caDir, "README"), []byte("not a certificate"))
	st = f.settings()
	st.CACertFile, st.CACertDir = "", caDir
	if _, err := Build(st); err != nil {
		t.Error(err)
	}
}

func TestParseProtocols(t *testing.T) {
	for _, tc := range []struct {
		in       string
		min, max uint16
	}{
		{"", tls.VersionTLS12, tls.VersionTLS13},
		{"TLSv1.2", tls.VersionTLS12, tls.VersionTLS12},
		{"tlsv1.3", tls.VersionTLS13, tls.VersionTLS13},
		{"TLSv1.3 TLSv1.2", tls.VersionTLS12, tls.VersionTLS13},
		{"TLSv1 TLSv1.1 TLSv1.2", tls.VersionTLS10, tls.VersionTLS12},
	} {
		lo, hi, err := ParseProtocols(tc.in)
		if err != nil || lo != tc.min || hi != tc.max {
			t.Errorf("%q: %x %x %v", tc.in, lo, hi, err)
		}
	}
	for _, in := range []string{" ", "TLSv1.4", "TLSv1.2 ", "TLSv1 TLSv1.2"} {
		if _, _, err := ParseProtocols(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func TestParseCiphers(t *testing.T) {
	names := func(ids []uint16) string {
		var out []string
		for _, id := range ids {
			out = append(out, tls.CipherSuiteName(id))
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	parse := func(in string) string {
		t.Helper()
		ids, err := ParseCiphers(in)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		return names(ids)
	}
	def := parse("DEFAULT")
	for _, n := range strings.Fields(def) {
		if strings.HasPrefix(n, "TLS_RSA_") || strings.Contains(n, "3DES") || strings.Contains(n, "RC4") {
			t.Errorf("DEFAULT has %s", n)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"ECDHE-RSA-AES128-GCM-SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"},
		{"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384:ecdhe-rsa-aes128-gcm-sha256",
			"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"},
		// OpenSSL skips suites it cannot use; so does Go's side.
		{"DHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-AES128-GCM-SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"},
		// redis.conf's example.
		{"DEFAULT:!MEDIUM", def},
		{"HIGH:!aNULL:!MD5:!kRSA:@STRENGTH", parse("ECDHE:!MEDIUM")},
		{"ECDHE+AESGCM", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 " +
			"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"},
		{"ECDHE+CHACHA20,ECDHE-RSA-AES128-GCM-SHA256 -ECDSA", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"},
		{"MEDIUM", "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA TLS_ECDHE_RSA_WITH_RC4_128_SHA TLS_RSA_WITH_3DES_EDE_CBC_SHA TLS_RSA_WITH_RC4_128_SHA"},
	} {
		if got := parse(tc.in); got != tc.want {
			t.Errorf("%q:\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
	for _, in := range []string{"BOGUS", "!ALL", "MEDIUM:!MEDIUM", "TLS_AES_128_GCM_SHA256", "DHE-RSA-AES256-GCM-SHA384", "aNULL"} {
		if got, err := ParseCiphers(in); err == nil {
			t.Errorf("%q: accepted as %v", in, names(got))
		}
	}
}

func TestParseCipherSuites(t *testing.T) {
	got, err := ParseCipherSuites("TLS_AES_256_GCM_SHA384:bogus:TLS_CHACHA20_POLY1305_SHA256")
	if err != nil || !slices.Equal(got, []uint16{tls.TLS_AES_256_GCM_SHA384, tls.TLS_CHACHA20_POLY1305_SHA256}) {
		t.Errorf("%v %v", got, err)
	}
	if got, err := ParseCipherSuites("TLS_AES_128_CCM_SHA256"); err != nil || len(got) != 0 {
		t.Errorf("a suite Go lacks: %v %v", got, err)
	}
	if _, err := ParseCipherSuites("bogus"); err == nil {
		t.Error("no known suite accepted")
	}
}

// serve answers one handshake with cfg, then closes.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				tc := tls.Server(c, cfg)
				tc.SetDeadline(time.Now().Add(10 * time.Second))
				if tc.Handshake() == nil {
					tc.Write([]byte("ok"))
					tc.Read(make([]byte, 1))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// handshake connects with cfg and reads the server's "ok".
func handshake(addr string, cfg *tls.Config) (tls.ConnectionState, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return tls.ConnectionState{}, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, 2)
	if _, err := c.Read(b); err != nil {
		return tls.ConnectionState{}, err
	}
	return c.ConnectionState(), nil
}

func TestClientAuth(t *testing.T) {
	f := newFiles(t)
	set, err := Build(f.settings())
	if err != nil {
		t.Fatal(err)
	}
	good := f.ca.Client(t, "client")
	stranger := tlstest.NewCA(t, "other").Client(t, "stranger")
	with := func(kp *tlstest.KeyPair) *tls.Config {
		c := &tls.Config{RootCAs: f.ca.Pool(), ServerName: "localhost"}
		if kp != nil {
			c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &kp.TLS, nil }
		}
		return c
	}
	for _, tc := range []struct {
		mode AuthClients
		kp   *tlstest.KeyPair
		ok   bool
	}{
		{AuthYes, nil, false}, {AuthYes, good, true}, {AuthYes, stranger, false},
		{AuthOptional, nil, true}, {AuthOptional, good, true}, {AuthOptional, stranger, false},
		{AuthNo, nil, true}, {AuthNo, stranger, true},
		{AuthClients(7), nil, false}, // anything else verifies, as in Redis
	} {
		addr := serve(t, set.Server(tc.mode))
		_, err := handshake(addr, with(tc.kp))
		if (err == nil) != tc.ok {
			name := "none"
			if tc.kp != nil {
				name = tc.kp.Cert.Subject.CommonName
			}
			t.Errorf("mode %d, client certificate %s: %v", tc.mode, name, err)
		}
	}
	// Without a CA nothing verifies: not even certificates of the
	// system's roots.
	st := f.settings()
	st.CACertFile, st.NeedCA = "", false
	noCA, err := Build(st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := handshake(serve(t, noCA.Server(AuthYes)), with(good)); err == nil {
		t.Error("a client certificate verified without a CA")
	}
}

func TestCipherSuitesFilter(t *testing.T) {
	f := newFiles(t)
	set, err := Build(f.settings())
	if err != nil {
		t.Fatal(err)
	}
	client := &tls.Config{RootCAs: f.ca.Pool(), ServerName: "localhost"}
	cs, err := handshake(serve(t, set.Server(AuthNo)), client)
	if err != nil || cs.Version != tls.VersionTLS13 {
		t.Fatalf("%v %x", err, cs.Version)
	}
	// Go picks the TLS 1.3 suite itself: a list without its choice
	// refuses the handshake rather than use another.
	var others []string
	for name, id := range tls13Names {
		if id != 0 && id != cs.CipherSuite {
			others = append(others, name)
		}
	}
	st := f.settings()
	st.CipherSuites = strings.Join(others, ":")
	strict, err := Build(st)
	if err != nil {
		t.Fatal(err)
	}
	if cs2, err := handshake(serve(t, strict.Server(AuthNo)), client); err == nil {
		t.Errorf("tls-ciphersuites %s served %s", st.CipherSuites, tls.CipherSuiteName(cs2.CipherSuite))
	}
	st.CipherSuites = tls.CipherSuiteName(cs.CipherSuite)
	if only, err := Build(st); err != nil {
		t.Fatal(err)
	} else if _, err := handshake(serve(t, only.Server(AuthNo)), client); err != nil {
		t.Errorf("tls-ciphersuites %s: %v", st.CipherSuites, err)
	}
	// Only suites Go lacks: TLS 1.2, as OpenSSL does without a TLS 1.3 suite.
	st.CipherSuites = "TLS_AES_128_CCM_SHA256"
	ccm, err := Build(st)
	if err != nil {
		t.Fatal(err)
	}
	if cs, err := handshake(serve(t, ccm.Server(AuthNo)), client); err != nil || cs.Version != tls.VersionTLS12 {
		t.Errorf("tls-ciphersuites with suites Go lacks: %v %x", err, cs.Version)
	}
}

func TestSessionResumption(t *testing.T) {
	f := newFiles(t)
	resumes := func(st Settings, rebuild bool) bool {
		t.Helper()
		set, err := Build(st)
		if err != nil {
			t.Fatal(err)
		}
		client := &tls.Config{RootCAs: f.ca.Pool(), ServerName: "localhost", ClientSessionCache: tls.NewLRUClientSessionCache(4)}
		addr := serve(t, set.Server(AuthNo))
		if _, err := handshake(addr, client); err != nil {
			t.Fatal(err)
		}
		if rebuild {
			if set, err = Build(st); err != nil {
				t.Fatal(err)
			}
			addr = serve(t, set.Server(AuthNo))
		}
		cs, err := handshake(addr, client)
		if err != nil {
			t.Fatal(err)
		}
		return cs.DidResume
	}
	st := f.settings()
	if !resumes(st, false) {
		t.Error("tls-session-caching yes: no resumption")
	}
	if resumes(st, true) {
		t.Error("a session resumed across a rebuild (a reload)")
	}
	st.SessionCacheTimeout = time.Nanosecond
	if resumes(st, false) {
		t.Error("an expired session resumed")
	}
	st = f.settings()
	st.SessionCaching = false
	if resumes(st, false) {
		t.Error("tls-session-caching no: resumed")
	}
}

func TestClientConfig(t *testing.T) {
	f := newFiles(t)
	clientKP := f.ca.Client(t, "replica")
	st := f.settings()
	st.ClientCertFile, st.ClientKeyFile = clientKP.Write(t, f.dir, "replica")
	set, err := Build(st)
	if err != nil {
		t.Fatal(err)
	}
	// A primary whose certificate the CA signed, named anything: served,
	// and it sees the replica's own certificate.
	primary := &tls.Config{Certificates: []tls.Certificate{f.ca.Server(t, "primary").TLS}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: f.ca.Pool()}
	var seen *x509.Certificate
	primary.VerifyPeerCertificate = func(_ [][]byte, chains [][]*x509.Certificate) error {
		seen = chains[0][0]
		return nil
	}
	if _, err := handshake(serve(t, primary), set.Client()); err != nil {
		t.Fatalf("replica to primary: %v", err)
	}
	if seen == nil || seen.SerialNumber.Cmp(clientKP.Cert.SerialNumber) != 0 {
		t.Error("the replica did not present tls-client-cert-file")
	}
	stranger := &tls.Config{Certificates: []tls.Certificate{tlstest.NewCA(t, "other").Server(t, "stranger").TLS}}
	if _, err := handshake(serve(t, stranger), set.Client()); err == nil {
		t.Error("the replica accepted a primary the CA did not sign")
	}
}

// TestEncryptedKeys reads keys encrypted by OpenSSL, as tls-key-file-pass
// allows.
func TestEncryptedKeys(t *testing.T) {
	f := newFiles(t)
	// The legacy PEM encryption (OpenSSL 1.x's default), written by Go.
	blk, _ := pem.Decode(f.server.KeyPEM)
	key, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.MarshalECPrivateKey(key.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	legacy, err := x509.EncryptPEMBlock(rand.Reader, "EC PRIVATE KEY", ecDER, []byte("secret"), x509.PEMCipherAES256)
	if err != nil {
		t.Fatal(err)
	}
	legacyFile := filepath.Join(f.dir, "legacy.key")
	tlstest.WriteFile(t, legacyFile, pem.EncodeToMemory(legacy))
	check := func(name, keyFile, pass string, ok bool) {
		t.Helper()
		st := f.settings()
		st.KeyFile, st.KeyFilePass = keyFile, pass
		_, err := Build(st)
		if (err == nil) != ok {
			t.Errorf("%s, pass %q: %v", name, pass, err)
		}
	}
	check("legacy", legacyFile, "secret", true)
	check("legacy", legacyFile, "wrong", false)
	check("legacy", legacyFile, "", false)
	check("plain key with a passphrase", f.keyFile, "ignored", true)

	openssl, err := exec.LookPath("openssl")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("openssl is required in CI (.ci/run installs it)")
		}
		t.Skip("openssl not installed")
	}
	for _, args := range [][]string{
		{"pkcs8", "-topk8", "-v2", "aes-256-cbc", "-v2prf", "hmacWithSHA256"},
		{"pkcs8", "-topk8", "-v2", "aes-128-cbc"},
		{"pkcs8", "-topk8", "-v2", "des3", "-v2prf", "hmacWithSHA512"},
	} {
		out := filepath.Join(f.dir, "enc.key")
		cmd := exec.Command(openssl, append(args, "-in", f.keyFile, "-out", out, "-passout", "pass:s3cret")...)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, b)
		}
		name := strings.Join(args[3:], " ")
		check(name, out, "s3cret", true)
		check(name, out, "wrong", false)
		check(name, out, "", false)
	}
}

// The tls-* values, by Redis's names, make the Settings: a CA is needed
// as soon as anything checks a peer's certificate, and TLS is wanted as
// soon as anything uses it.
func TestSettingsOf(t *testing.T) {
	vals := map[string]string{
		"tls-port": "0", "tls-replication": "no", "tls-cluster": "no", "tls-auth-clients": "no",
		"tls-cert-file": "c.pem", "tls-session-caching": "yes", "tls-session-cache-timeout": "300",
	}
	get := func(name string) string { return vals[name] }
	if Wanted(get) {
		t.Error("TLS wanted with no TLS port, replication or cluster")
	}
	st := SettingsOf(get)
	if st.CertFile != "c.pem" || !st.SessionCaching || st.SessionCacheTimeout != 300*time.Second || st.NeedCA {
		t.Errorf("settings: %+v", st)
	}
	vals["tls-replication"] = "yes"
	if !Wanted(get) || !SettingsOf(get).NeedCA {
		t.Error("tls-replication yes: TLS not wanted, or no CA needed")
	}
	for v, want := range map[string]AuthClients{"no": AuthNo, "yes": AuthYes, "optional": AuthOptional} {
		if got := ParseAuthClients(v); got != want {
			t.Errorf("ParseAuthClients(%q) = %v, want %v", v, got, want)
		}
	}
}
