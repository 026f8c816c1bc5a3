package commands

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"time"

	"github.com/limitkv/limitkv/config"
	"github.com/limitkv/limitkv/resp"
	"github.com/limitkv/limitkv/tlsconf"
)

// TLS is configured as in Redis 7.0 (config.c, tls.c): the tls-* settings
// (package config), a configuration built from them when tls-port, tls-replication or
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

// tlsEffects wires the tls-* settings: every one but tls-port and
// tls-auth-clients rebuilds the configuration, as Redis's applyTlsCfg.
func (c *Config) tlsEffects() map[string]config.Effect {
	rebuild := config.Effect{Reconf: &config.Reconfigurer{Apply: c.applyTLS}}
	effects := map[string]config.Effect{
		// Redis's applyTLSPort: opens and closes the TLS listeners.
		"tls-port":         {Reconf: &config.Reconfigurer{Apply: c.applyTLSPort}},
		"tls-auth-clients": {Apply: func(v string, _ int64) { c.tlsAuth.Store(int32(tlsconf.ParseAuthClients(v))) }},
	}
	for _, name := range []string{"tls-cert-file", "tls-key-file", "tls-key-file-pass", "tls-client-cert-file",
		"tls-client-key-file", "tls-client-key-file-pass", "tls-ca-cert-file", "tls-ca-cert-dir", "tls-dh-params-file",
		"tls-protocols", "tls-ciphers", "tls-ciphersuites", "tls-prefer-server-ciphers", "tls-session-caching",
		"tls-session-cache-size", "tls-session-cache-timeout", "tls-replication", "tls-cluster"} {
		effects[name] = rebuild
	}
	return effects
}

// configureTLS builds the TLS configuration from the current values and
// puts it in place, or logs why it cannot and changes nothing. The caller
// holds the config's lock (v).
func (c *Config) configureTLS(v config.Values) error {
	set, err := tlsconf.Build(tlsconf.SettingsOf(v.Get))
	if err != nil {
		if c.srv != nil && c.srv.Log != nil {
			c.srv.Log.Warn(err.Error())
		}
		return err
	}
	c.tlsSet.Store(set)
	if c.srv != nil && c.srv.Log != nil && set.Leaf != nil {
		c.srv.Log.Info("TLS configuration loaded", "cert", v.Get("tls-cert-file"),
			"subject", set.Leaf.Subject.String(), "serial", set.Leaf.SerialNumber.String(),
			"not_after", set.Leaf.NotAfter.Format(time.RFC3339))
	}
	return nil
}

// applyTLS is Redis's applyTlsCfg: rebuild if anything uses TLS.
func (c *Config) applyTLS(v config.Values) error {
	if tlsconf.Wanted(v.Get) && c.configureTLS(v) != nil {
		return errors.New(msgTLSFailed)
	}
	return nil
}

// applyTLSPort is Redis's applyTLSPort: configure TLS if it never was,
// then listen on the new port (0: close the TLS listeners).
func (c *Config) applyTLSPort(v config.Values) error {
	if c.tlsSet.Load() == nil && c.configureTLS(v) != nil {
		return errors.New(msgTLSFailed)
	}
	port := v.Int("tls-port")
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
func (c *Config) ConfigureTLS() (err error) {
	c.Do(func(v config.Values) {
		if tlsconf.Wanted(v.Get) {
			err = c.configureTLS(v)
		}
	})
	return err
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
	on := c.Get("tls-replication") == "yes"
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
