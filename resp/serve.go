package resp

// The serve loop. A connection is served by its own goroutine, which may
// wait, or by an event loop (loop_linux.go), which may not. Either reads
// what arrived into the connection's parser in its own way, then calls
// serveInput, which serves every complete request read: it parses it,
// hands it to the handler, sends the replies (early once they pass
// flushAt, so that a pipeline of big replies never piles up) and stops at
// a protocol error. The two servers differ only in whether a request may
// run on them at all and in how replies leave, which a runner says, and in
// what they do with a connection serveInput stops on, which its step tells
// them. Keeping this loop in one place keeps the order of replies, the
// output limits and the protocol errors the same on both.

// runner is what serves a connection: own (its goroutine) or *loop.
type runner interface {
	// admits reports whether the request may run here.
	admits(c *Conn, args [][]byte) bool
	// flush sends the replies in c.W, applying the output limits. It
	// reports false when the connection is to close or has left the runner.
	flush(c *Conn) bool
}

// step says where serveInput stopped.
type step uint8

const (
	// stepRead: every complete request read is served and its replies
	// sent; the connection waits for more input.
	stepRead step = iota
	// stepRefused: the runner does not admit the next request, returned
	// unserved; the replies before it are in W.
	stepRefused
	// stepProtocol: the input broke the protocol; the replies before the
	// bad request are in W, and the connection is to close once they and
	// the error are sent.
	stepProtocol
	// stepQuit: a request asked to close after its reply (CloseAfterReply):
	// the replies are sent, though the output queue may still hold some.
	stepQuit
	// stepGone: a flush failed: the connection is to close, or has left
	// the runner.
	stepGone
)

// serveInput serves, on r, the complete requests read so far, and sends
// their replies. It returns the request r refused (stepRefused) or the
// protocol error (stepProtocol).
func (c *Conn) serveInput(r runner) (st step, args [][]byte, perr *ProtocolError) {
	for !c.closing {
		args, perr = c.p.next()
		if perr != nil {
			return stepProtocol, nil, perr
		}
		if args == nil {
			break
		}
		if !r.admits(c, args) {
			return stepRefused, args, nil
		}
		c.run(args)
		if c.W.Len() >= flushAt && !c.send(r) {
			return stepGone, nil, nil
		}
	}
	if !c.send(r) {
		return stepGone, nil, nil
	}
	if c.closing {
		return stepQuit, nil, nil
	}
	c.publishInput()
	return stepRead, nil, nil
}

// send sends the replies in W on r, once what holds them (HoldReplies)
// lets them go; replies it refuses are dropped with the connection.
func (c *Conn) send(r runner) bool {
	if hold := c.hold; hold != nil {
		c.hold = nil
		if !hold() {
			c.W.Reset()
			c.closing = true
			return false
		}
	}
	return r.flush(c)
}

// HoldReplies makes the replies written so far, and those of the
// requests served with them in one read, wait for fn before they leave:
// a group commit, one fn for a pipeline. fn false drops them and closes
// the connection, so that none of them reaches the client. Only a
// request that runs on the connection's goroutine may hold its replies
// (an event loop never waits); a hold already set stands for both.
func (c *Conn) HoldReplies(fn func() bool) {
	if c.hold == nil {
		c.hold = fn
	}
}

// run executes one request and lets go of its input.
func (c *Conn) run(args [][]byte) {
	c.srv.call(c, args)
	if p := int32(c.W.Proto()); p != c.proto.Load() {
		c.proto.Store(p)
	}
	c.released(c.p.done())
}

// own is the connection's goroutine as a runner: any request may run on
// it, and its flushes wait for a client that reads slowly.
type own struct{}

func (own) admits(*Conn, [][]byte) bool { return true }
func (own) flush(c *Conn) bool          { return c.flush() }

// serveOwn serves the connection on its goroutine, reading as it needs,
// until the connection is to close (false). When home is the event loop
// the connection came from, it goes back there (true) as soon as every
// request read is served and its output sent, since only the goroutine
// can wait for a slow reader.
func (c *Conn) serveOwn(home *loop) bool {
	for {
		// own admits every request: serveInput never stops on a refused one.
		switch st, _, perr := c.serveInput(own{}); st {
		case stepProtocol:
			c.protocolError(perr)
			return false
		case stepQuit:
			c.drainQueue()
			return false
		case stepGone:
			return false
		}
		if c.killed.Load() {
			return false
		}
		if home != nil && !(c.queued.Load() && c.pending.Load() > 0) && home.attach(c) {
			if c.srv.draining.Load() {
				home.poke() // its loop closes it
			}
			return true
		}
		if !c.read() {
			return false
		}
	}
}
