package commands

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"time"

	"github.com/limitkv/limitkv/resp"
	"github.com/limitkv/limitkv/tlsconf"
)

// TLS is configured as in Redis 7.0 (config.c, tls.c): the tls-* settings
// below, a configuration built from them when tls-port, tls-replication or
// tls-cluster is on, and rebuilt, all or nothing, when CONFIG SET changes
// any of them; setting a file again re-reads it (a renewed certificate).
// New connections take the configuration of the moment, existing ones
// keep theirs. tls-auth-clients applies to new connections without a
// rebuild, as in Redis. See package tlsconf for what Go's crypto/tls does
// differently from OpenSSL.

const (
	msgTLSFailed    = "Unable to update TLS configuration. Check server logs."
	msgListenFailed = "Unable to listen on this port. Check server logs."
)

var (
	// reconfTLS is Redis's applyTlsCfg.
	reconfTLS = &reconfigurer{apply: (*Config).applyTLS}
	// reconfTLSPort is applyTLSPort: opens and closes the TLS listeners.
	reconfTLSPort = &reconfigurer{apply: (*Config).applyTLSPort}
)

func tlsParams() []*param {
	file := func(name, help string) *param {
		return &param{name: name, help: help, reconf: reconfTLS, volatile: true}
	}
	str := func(name, help string) *param {
		return &param{name: name, help: help, reconf: reconfTLS}
	}
	boolean := func(name, def, help string) *param {
		return &param{name: name, kind: pBool, def: def, help: help, reconf: reconfTLS}
	}
	return []*param{
		{name: "tls-port", kind: pInt, def: "0", min: 0, max: 65535, reconf: reconfTLSPort,
			help: "TLS port, beside the plain one (0: none); CONFIG SET opens and closes it"},
		file("tls-cert-file", "server certificate chain (PEM); CONFIG SET, even to the same path, reloads it"),
		file("tls-key-file", "server private key (PEM)"),
		str("tls-key-file-pass", "passphrase of an encrypted tls-key-file"),
		file("tls-client-cert-file", "certificate for outgoing connections (replication); empty: tls-cert-file"),
		file("tls-client-key-file", "private key of tls-client-cert-file"),
		str("tls-client-key-file-pass", "passphrase of an encrypted tls-client-key-file"),
		file("tls-ca-cert-file", "CA certificates that client and primary certificates are checked against"),
		file("tls-ca-cert-dir", "directory of CA certificate files"),
		file("tls-dh-params-file", "accepted for compatibility and checked; Go negotiates elliptic-curve keys only"),
		{name: "tls-auth-clients", kind: pEnum, def: "yes", enum: []string{"no", "yes", "optional"},
			help:  "clients must present a certificate signed by the CA (yes), may (optional), or are not asked (no)",
			apply: func(c *Config, v string, _ int64) { c.tlsAuth.Store(int32(tlsAuthMode(v))) }},
		str("tls-protocols", `TLS versions, from "TLSv1 TLSv1.1 TLSv1.2 TLSv1.3" (empty: TLSv1.2 and TLSv1.3)`),
		str("tls-ciphers", "TLS 1.2 cipher suites, in OpenSSL's names and keywords (DEFAULT:!MEDIUM); empty: Go's default"),
		str("tls-ciphersuites", "TLS 1.3 cipher suites allowed (TLS_AES_256_GCM_SHA384:...); empty: all"),
		boolean("tls-prefer-server-ciphers", "no", "accepted for compatibility; Go always chooses the cipher suite by its own order"),
		boolean("tls-session-caching", "yes", "let clients resume TLS sessions (with session tickets)"),
		{name: "tls-session-cache-size", kind: pInt, def: "20480", min: 0, max: 2147483647, reconf: reconfTLS,
			help: "accepted for compatibility; Go's session tickets keep no server-side cache"},
		{name: "tls-session-cache-timeout", kind: pInt, def: "300", min: 0, max: 2147483647, reconf: reconfTLS,
			help: "seconds a TLS session may be resumed"},
		boolean("tls-replication", "no", "a replica's link to its primary uses TLS"),
		boolean("tls-cluster", "no", "accepted for compatibility (limitkv has no cluster bus)"),
	}
}

func tlsAuthMode(v string) tlsconf.AuthClients {
	switch v {
	case "no":
		return tlsconf.AuthNo
	case "optional":
		return tlsconf.AuthOptional
	}
	return tlsconf.AuthYes
}

// tlsWanted reports whether TLS must be configured: something uses it.
// The caller holds c.mu.
func (c *Config) tlsWanted() bool {
	return c.value("tls-port") != "0" || c.value("tls-replication") == "yes" || c.value("tls-cluster") == "yes"
}

// value returns a parameter's current value; the caller holds c.mu.
func (c *Config) value(name string) string { return c.values[c.byName[name]] }

// tlsSettings collects the tls-* values; the caller holds c.mu.
func (c *Config) tlsSettings() tlsconf.Settings {
	timeout, _ := c.byName["tls-session-cache-timeout"].parseInt(c.value("tls-session-cache-timeout"))
	return tlsconf.Settings{
		CertFile:            c.value("tls-cert-file"),
		KeyFile:             c.value("tls-key-file"),
		KeyFilePass:         c.value("tls-key-file-pass"),
		ClientCertFile:      c.value("tls-client-cert-file"),
		ClientKeyFile:       c.value("tls-client-key-file"),
		ClientKeyFilePass:   c.value("tls-client-key-file-pass"),
		CACertFile:          c.value("tls-ca-cert-file"),
		CACertDir:           c.value("tls-ca-cert-dir"),
		DHParamsFile:        c.value("tls-dh-params-file"),
		Protocols:           c.value("tls-protocols"),
		Ciphers:             c.value("tls-ciphers"),
		CipherSuites:        c.value("tls-ciphersuites"),
		SessionCaching:      c.value("tls-session-caching") == "yes",
		SessionCacheTimeout: time.Duration(timeout) * time.Second,
		NeedCA:              c.value("tls-auth-clients") != "no" || c.value("tls-replication") == "yes" || c.value("tls-cluster") == "yes",
	}
}

func (p *param) parseInt(v string) (int64, error) {
	_, n, err := p.parse(v)
	return n, err
}

// configureTLS builds the TLS configuration from the current values and
// puts it in place, or logs why it cannot and changes nothing. The caller
// holds c.mu.
func (c *Config) configureTLS() error {
	set, err := tlsconf.Build(c.tlsSettings())
	if err != nil {
		c.warn(err.Error())
		return err
	}
	c.tlsSet.Store(set)
	if c.srv != nil && c.srv.Log != nil && set.Leaf != nil {
		c.srv.Log.Info("TLS configuration loaded", "cert", c.value("tls-cert-file"),
			"subject", set.Leaf.Subject.String(), "serial", set.Leaf.SerialNumber.String(),
			"not_after", set.Leaf.NotAfter.Format(time.RFC3339))
	}
	return nil
}

// applyTLS is Redis's applyTlsCfg: rebuild if anything uses TLS.
func (c *Config) applyTLS() error {
	if c.tlsWanted() && c.configureTLS() != nil {
		return errors.New(msgTLSFailed)
	}
	return nil
}

// applyTLSPort is Redis's applyTLSPort: configure TLS if it never was,
// then listen on the new port (0: close the TLS listeners).
func (c *Config) applyTLSPort() error {
	if c.tlsSet.Load() == nil && c.configureTLS() != nil {
		return errors.New(msgTLSFailed)
	}
	port, _ := c.byName["tls-port"].parseInt(c.value("tls-port"))
	var listen func(int) error
	if c.srv != nil {
		listen = c.srv.Hooks.ListenTLS
	}
	if listen == nil {
		if port == 0 {
			return nil
		}
		return errors.New(msgListenFailed)
	}
	if err := listen(int(port)); err != nil {
		return errors.New(msgListenFailed)
	}
	return nil
}

// ConfigureTLS builds the TLS configuration at start-up, when tls-port,
// tls-replication or tls-cluster asks for it, as Redis's initServer does.
// Its error says why (Redis's log line).
func (c *Config) ConfigureTLS() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.tlsWanted() {
		return nil
	}
	return c.configureTLS()
}

// TLSServerConfig returns the configuration for a TLS connection accepted
// now (resp.Server.ServeTLS asks for each), or nil if TLS is not
// configured.
func (c *Config) TLSServerConfig() *tls.Config {
	set := c.tlsSet.Load()
	if set == nil {
		return nil
	}
	return set.Server(tlsconf.AuthClients(c.tlsAuth.Load()))
}

// ReplicationTLS is the hook for a replica's link to its primary: nil when
// tls-replication is no (a plain link), otherwise the client configuration
// to wrap the link in, with tls.Client(conn, cfg). It presents
// tls-client-cert-file (or tls-cert-file) and checks the primary's
// certificate against tls-ca-cert-file/tls-ca-cert-dir, as Redis does.
// Each call returns the configuration of the moment: a reconnecting
// replica picks up a reloaded certificate.
func (c *Config) ReplicationTLS() *tls.Config {
	c.mu.Lock()
	on := c.value("tls-replication") == "yes"
	c.mu.Unlock()
	set := c.tlsSet.Load()
	if !on || set == nil {
		return nil
	}
	return set.Client()
}

// logHandshakeError logs a failed TLS handshake as Redis does, as a
// warning; a client that closed before saying anything (a port probe, a
// load balancer's health check) only at debug level.
func (s *Server) logHandshakeError(conn *resp.Conn, err error) {
	if errors.Is(err, io.EOF) {
		s.Log.Debug("TLS client closed before its handshake", "addr", conn.RemoteAddr())
		return
	}
	s.Log.Warn("Error accepting a client connection: "+err.Error(), "addr", conn.RemoteAddr())
}

// DialReplication connects a replica to its primary at addr: over TLS
// when tls-replication is yes (see ReplicationTLS), the handshake within
// ctx; plain otherwise. It has the shape of the replication link's
// dialer, for the replication code to use once it lands.
func (c *Config) DialReplication(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	cfg := c.ReplicationTLS()
	if cfg == nil {
		return conn, nil
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return tc, nil
}
