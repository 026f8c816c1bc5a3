// Package tlsconf builds crypto/tls configurations from Redis 7.0's tls-*
// settings: the certificate and key files (a key may be encrypted with a
// passphrase), the CA file or directory, tls-protocols, tls-ciphers and
// tls-ciphersuites, session caching. Build is all or nothing, as Redis's
// tlsConfigure: a bad file, name or list yields an error in Redis's words
// and no configuration, so that the caller keeps the one it has.
//
// What Go's crypto/tls does differently from OpenSSL, and what it means
// for each setting:
//   - tls-protocols: Go takes a range of versions, so a list that leaves
//     out a version between two it names (TLSv1.1 TLSv1.3) is refused.
//   - tls-ciphers: a list of suite names, OpenSSL's (ECDHE-RSA-AES128-GCM-SHA256)
//     or IANA's (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256), separated by ':',
//     with the keywords DEFAULT, HIGH, MEDIUM and ALL and the '!' and '-'
//     prefixes that remove; Go chooses among the allowed suites in its own
//     order, so order, '+' and tls-prefer-server-ciphers change nothing.
//   - tls-ciphersuites: Go does not let a server choose its TLS 1.3 suites;
//     the list is enforced by refusing a handshake that settled on another.
//   - tls-session-caching, tls-session-cache-timeout: Go resumes sessions
//     with tickets rather than a server-side cache; they say whether
//     tickets are issued and how long one stays valid. tls-session-cache-size
//     has nothing to size. Tickets never outlive the configuration that
//     issued them: after a reload every client makes a full handshake.
//   - tls-dh-params-file: Go negotiates only elliptic-curve key exchange;
//     the file is checked, as Redis checks it, and otherwise unused.
//   - tls-ca-cert-dir: every certificate of every file in the directory
//     is trusted (OpenSSL looks up hashed names; the files are the same).
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Settings are the tls-* settings a configuration is built from, with
// Redis's names in the comments.
type Settings struct {
	CertFile    string // tls-cert-file: certificate chain, leaf first (PEM)
	KeyFile     string // tls-key-file (PEM)
	KeyFilePass string // tls-key-file-pass: passphrase of an encrypted key
	// For outgoing connections (replication); the server's own
	// certificate when ClientCertFile or ClientKeyFile is empty.
	ClientCertFile    string // tls-client-cert-file
	ClientKeyFile     string // tls-client-key-file
	ClientKeyFilePass string // tls-client-key-file-pass
	CACertFile        string // tls-ca-cert-file
	CACertDir         string // tls-ca-cert-dir
	DHParamsFile      string // tls-dh-params-file
	Protocols         string // tls-protocols; empty: TLSv1.2 TLSv1.3
	Ciphers           string // tls-ciphers (TLS 1.2 and older); empty: Go's default
	CipherSuites      string // tls-ciphersuites (TLS 1.3); empty: all
	SessionCaching    bool   // tls-session-caching
	// tls-session-cache-timeout: how long a session may be resumed.
	SessionCacheTimeout time.Duration
	// NeedCA: tls-auth-clients is not "no", or tls-replication or
	// tls-cluster is on, so a CA is required (as Redis requires it).
	NeedCA bool
}

// AuthClients is tls-auth-clients: whether a client must present a
// certificate signed by the CA.
type AuthClients int

const (
	AuthNo       AuthClients = iota // no certificate asked for
	AuthYes                         // a valid certificate is required
	AuthOptional                    // a certificate, if given, must be valid
)

// ParseAuthClients reads a tls-auth-clients value ("no", "yes" or
// "optional", as the setting checks it); anything else is yes, the
// strictest.
func ParseAuthClients(v string) AuthClients {
	switch v {
	case "no":
		return AuthNo
	case "optional":
		return AuthOptional
	}
	return AuthYes
}

// Wanted reports whether the settings ask for TLS at all: a TLS port,
// TLS replication or TLS cluster links. Redis builds no configuration
// otherwise, so files named but unused are not read. get returns a
// setting's value by its Redis name.
func Wanted(get func(name string) string) bool {
	return get("tls-port") != "0" || get("tls-replication") == "yes" || get("tls-cluster") == "yes"
}

// SettingsOf collects the Settings from the tls-* values, which get
// returns by their Redis names, as the config checked them.
func SettingsOf(get func(name string) string) Settings {
	timeout, _ := strconv.ParseInt(get("tls-session-cache-timeout"), 10, 64)
	return Settings{
		CertFile:            get("tls-cert-file"),
		KeyFile:             get("tls-key-file"),
		KeyFilePass:         get("tls-key-file-pass"),
		ClientCertFile:      get("tls-client-cert-file"),
		ClientKeyFile:       get("tls-client-key-file"),
		ClientKeyFilePass:   get("tls-client-key-file-pass"),
		CACertFile:          get("tls-ca-cert-file"),
		CACertDir:           get("tls-ca-cert-dir"),
		DHParamsFile:        get("tls-dh-params-file"),
		Protocols:           get("tls-protocols"),
		Ciphers:             get("tls-ciphers"),
		CipherSuites:        get("tls-ciphersuites"),
		SessionCaching:      get("tls-session-caching") == "yes",
		SessionCacheTimeout: time.Duration(timeout) * time.Second,
		NeedCA:              get("tls-auth-clients") != "no" || get("tls-replication") == "yes" || get("tls-cluster") == "yes",
	}
}

// Set is the configurations built from one Settings: the server's, for
// each tls-auth-clients mode (that setting applies to new connections
// without a rebuild, as in Redis), and the client's for outgoing links.
type Set struct {
	server [3]*tls.Config
	client *tls.Config
	// Leaf is the server's certificate.
	Leaf *x509.Certificate
}

// Server returns the configuration for a connection accepted now.
func (s *Set) Server(a AuthClients) *tls.Config {
	if a < AuthNo || a > AuthOptional {
		a = AuthYes // as Redis: anything else verifies
	}
	return s.server[a]
}

// Client returns the configuration of an outgoing connection (a replica's
// link to its primary). As Redis does, it checks the peer's certificate
// against the CA but not the name in it: a replica names its primary by
// address, which certificates seldom carry.
func (s *Set) Client() *tls.Config { return s.client }

// Build loads the files and checks every setting. Its errors are Redis's
// log lines for the same failures.
func Build(st Settings) (*Set, error) {
	if st.CertFile == "" {
		return nil, errors.New("No tls-cert-file configured!")
	}
	if st.KeyFile == "" {
		return nil, errors.New("No tls-key-file configured!")
	}
	if st.NeedCA && st.CACertFile == "" && st.CACertDir == "" {
		return nil, errors.New("Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, tls-replication or tls-auth-clients are enabled!")
	}
	minV, maxV, err := ParseProtocols(st.Protocols)
	if err != nil {
		return nil, err
	}
	cert, err := loadKeyPair(st.CertFile, st.KeyFile, st.KeyFilePass)
	if err != nil {
		return nil, err
	}
	// Without a CA nothing verifies; never the system's roots, which
	// crypto/tls would use for a nil pool.
	pool := x509.NewCertPool()
	if st.CACertFile != "" || st.CACertDir != "" {
		if pool, err = loadCAs(st.CACertFile, st.CACertDir); err != nil {
			return nil, fmt.Errorf("Failed to configure CA certificate(s) file/directory: %v", err)
		}
	}
	var suites []uint16
	if st.Ciphers != "" {
		if suites, err = ParseCiphers(st.Ciphers); err != nil {
			return nil, fmt.Errorf("Failed to configure ciphers: %s (%v)", st.Ciphers, err)
		}
	}
	var suites13 []uint16
	if st.CipherSuites != "" {
		if suites13, err = ParseCipherSuites(st.CipherSuites); err != nil {
			return nil, fmt.Errorf("Failed to configure ciphersuites: %s (%v)", st.CipherSuites, err)
		}
		if len(suites13) == 0 { // only suites Go lacks: no TLS 1.3, as OpenSSL would do
			if minV == tls.VersionTLS13 {
				return nil, fmt.Errorf("Failed to configure ciphersuites: %s (no TLSv1.3 cipher suite that Go's TLS implements, and tls-protocols allows only TLSv1.3)", st.CipherSuites)
			}
			maxV = min(maxV, tls.VersionTLS12)
		}
	}
	if st.DHParamsFile != "" {
		if err := checkDHParams(st.DHParamsFile); err != nil {
			return nil, err
		}
	}
	clientCert := cert
	if st.ClientCertFile != "" && st.ClientKeyFile != "" {
		if clientCert, err = loadKeyPair(st.ClientCertFile, st.ClientKeyFile, st.ClientKeyFilePass); err != nil {
			return nil, err
		}
	}

	base := &tls.Config{
		MinVersion:   minV,
		MaxVersion:   maxV,
		CipherSuites: suites,
		Certificates: []tls.Certificate{cert},
		ClientCAs:    pool,
	}
	if suites13 != nil {
		base.VerifyConnection = func(cs tls.ConnectionState) error {
			if cs.Version == tls.VersionTLS13 && !slices.Contains(suites13, cs.CipherSuite) {
				return fmt.Errorf("tls: cipher suite %s is not in tls-ciphersuites", tls.CipherSuiteName(cs.CipherSuite))
			}
			return nil
		}
	}
	if !st.SessionCaching || st.SessionCacheTimeout <= 0 {
		base.SessionTicketsDisabled = true
	} else {
		sessionTimeout(base, st.SessionCacheTimeout)
	}

	set := &Set{Leaf: cert.Leaf}
	for a, auth := range [...]tls.ClientAuthType{
		AuthNo:       tls.NoClientCert,
		AuthYes:      tls.RequireAndVerifyClientCert,
		AuthOptional: tls.VerifyClientCertIfGiven,
	} {
		c := base.Clone()
		c.ClientAuth = auth
		set.server[a] = c
	}

	client := &tls.Config{
		MinVersion:   minV,
		MaxVersion:   maxV,
		CipherSuites: suites,
		Certificates: []tls.Certificate{clientCert},
		// The chain is verified below, against the CA only.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyChain(cs, pool, suites13)
		},
	}
	set.client = client
	return set, nil
}

// verifyChain checks the peer's certificate against the CA, as OpenSSL's
// SSL_VERIFY_PEER does: the chain, not the host name.
func verifyChain(cs tls.ConnectionState, pool *x509.CertPool, suites13 []uint16) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: the server sent no certificate")
	}
	opts := x509.VerifyOptions{Roots: pool, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
		return err
	}
	if suites13 != nil && cs.Version == tls.VersionTLS13 && !slices.Contains(suites13, cs.CipherSuite) {
		return fmt.Errorf("tls: cipher suite %s is not in tls-ciphersuites", tls.CipherSuiteName(cs.CipherSuite))
	}
	return nil
}

// ticketStamp marks the issue time limitkv adds to a session ticket.
const ticketStamp = "limitkv-issued:"

// sessionTimeout makes c's session tickets expire after d, as
// tls-session-cache-timeout does for OpenSSL's cache. The tickets are
// encrypted with keys of c's own, so that no other configuration (an older
// certificate, another CA) can resume them.
func sessionTimeout(c *tls.Config, d time.Duration) {
	keys := &tls.Config{} // only its ticket keys are used
	c.WrapSession = func(cs tls.ConnectionState, ss *tls.SessionState) ([]byte, error) {
		stamp := binary.BigEndian.AppendUint64([]byte(ticketStamp), uint64(time.Now().Unix()))
		ss.Extra = append(ss.Extra, stamp)
		return keys.EncryptTicket(cs, ss)
	}
	c.UnwrapSession = func(identity []byte, cs tls.ConnectionState) (*tls.SessionState, error) {
		ss, err := keys.DecryptTicket(identity, cs)
		if ss == nil || err != nil {
			return nil, err
		}
		for _, e := range ss.Extra {
			if t, ok := strings.CutPrefix(string(e), ticketStamp); ok && len(t) == 8 {
				issued := time.Unix(int64(binary.BigEndian.Uint64([]byte(t))), 0)
				if time.Since(issued) <= d {
					return ss, nil
				}
			}
		}
		return nil, nil // expired: a full handshake
	}
}

// ParseProtocols reads tls-protocols as Redis does: versions separated by
// single spaces, any case; empty means TLSv1.2 and TLSv1.3.
func ParseProtocols(s string) (minV, maxV uint16, err error) {
	if s == "" {
		return tls.VersionTLS12, tls.VersionTLS13, nil
	}
	var have []uint16
	for _, tok := range strings.Split(s, " ") {
		var v uint16
		switch strings.ToLower(tok) {
		case "tlsv1":
			v = tls.VersionTLS10
		case "tlsv1.1":
			v = tls.VersionTLS11
		case "tlsv1.2":
			v = tls.VersionTLS12
		case "tlsv1.3":
			v = tls.VersionTLS13
		default:
			return 0, 0, errors.New("Invalid tls-protocols specified. Use a combination of 'TLSv1', 'TLSv1.1', 'TLSv1.2' and 'TLSv1.3'.")
		}
		if !slices.Contains(have, v) {
			have = append(have, v)
		}
	}
	minV, maxV = slices.Min(have), slices.Max(have)
	for v := minV; v <= maxV; v++ {
		if !slices.Contains(have, v) {
			return 0, 0, fmt.Errorf("Invalid tls-protocols specified: %s leaves out %s, and Go's TLS takes a range of versions.", s, tls.VersionName(v))
		}
	}
	return minV, maxV, nil
}

// loadCAs reads the CA certificates of a file and of every file in a
// directory.
func loadCAs(file, dir string) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("%s: no PEM certificate", file)
		}
	}
	if dir != "" {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if e.IsDir() {
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				continue // a dangling link, a file we may not read: not a CA
			}
			pool.AppendCertsFromPEM(b)
		}
	}
	return pool, nil
}

// checkDHParams checks that the file holds DH parameters, as Redis does
// before using them.
func checkDHParams(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("Failed to load %s: %v", path, errors.Unwrap(err))
	}
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return fmt.Errorf("%s: failed to read DH params.", path)
		}
		if blk.Type == "DH PARAMETERS" || blk.Type == "X9.42 DH PARAMETERS" {
			return nil
		}
	}
}
