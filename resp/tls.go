package resp

import "time"

// DefaultHandshakeTimeout bounds a TLS handshake when the Server's
// HandshakeTimeout is 0: a client that connects and never completes it
// must not hold a connection slot forever.
const DefaultHandshakeTimeout = 10 * time.Second

// Handshake runs the TLS handshake of a connection served by ServeTLS,
// within the server's HandshakeTimeout (or its idle timeout, if shorter),
// and returns its outcome (later
// calls return the same). For a plain connection it does nothing.
//
// The handler's Open may call it to order admission as Redis does: max
// clients are checked before the handshake (a refusal then sends nothing:
// there is no channel yet), the connection counts as a client during it,
// and protected mode is checked after it (its refusal reaches the client).
// When Open does not call it, the server does once Open accepts. Only the
// connection's goroutine may call it.
func (c *Conn) Handshake() error {
	if c.tls == nil || c.hsDone {
		return c.hsErr
	}
	c.hsDone = true
	d := c.srv.HandshakeTimeout
	if d <= 0 {
		d = DefaultHandshakeTimeout
	}
	if idle := time.Duration(c.srv.idleTimeout.Load()); idle > 0 && idle < d {
		d = idle // Redis's timeout closes a client stuck in its handshake too
	}
	c.raw.SetDeadline(time.Now().Add(d))
	c.hsErr = c.tls.Handshake()
	if c.hsErr == nil {
		c.hsErr = c.raw.SetDeadline(time.Time{})
	}
	if c.hsErr != nil {
		c.raw.Close()
	}
	return c.hsErr
}

// handshaken reports whether replies can be sent: a plain connection, or
// a TLS one whose handshake succeeded.
func (c *Conn) handshaken() bool { return c.tls == nil || (c.hsDone && c.hsErr == nil) }
