package resp

import "sync"

// pushQueue is a connection's output once other goroutines push into it
// (pub/sub messages, replica streams): blocks of bytes in the order they
// must leave, sent by the connection's writer goroutine. It is guarded by
// Conn.qmu.
type pushQueue struct {
	cond   *sync.Cond // the writer waits for blocks; the reader for room
	blocks [][]byte
	swap   [][]byte // the writer's previous batch, reused
	spare  [][]byte // emptied blocks of pushBlock bytes, reused
	closed bool
}

// Push appends b, complete RESP data, to the connection's output after
// everything queued or written before it. Any goroutine may call it, and
// it never waits for the network: a writer goroutine, started on first
// use, sends the queue. b is copied. When the unsent output passes the
// limits of the connection's class, the connection is closed, as Redis
// does, and Push returns false; it also does for a closed connection.
//
// The handler serving a request writes its own connection's replies to W,
// not with Push: they are sent in order with the rest.
func (c *Conn) Push(b []byte) bool { return c.enqueue(b, false) }

// Refuses reports whether a push of n bytes would pass the hard output
// limit of the connection's class, and then closes the connection for its
// limits as that push would: a pusher asks before it builds a message of
// a size a client chose (MONITOR's line of a big argument), so that one
// bound to be refused is never made.
func (c *Conn) Refuses(n int64) bool {
	lim := c.srv.Limits.Output(c.Class())
	if lim.Hard == 0 || c.pending.Load()+n <= lim.Hard {
		return false
	}
	c.closeForLimits()
	return true
}

// enqueueOwn adds the connection's own replies to the output queue; a big
// batch is handed over rather than copied. While the class has no output
// limit it then waits until the unsent output is back under flushAt: a
// client that does not read stops being read from. With a limit it does
// not wait, as Redis does not: the limit closes a client that lets its
// output pile up.
func (c *Conn) enqueueOwn(b []byte) bool {
	ok := c.enqueue(b, len(b) >= pushBlock)
	if ok && len(b) >= pushBlock {
		c.W.b = nil // the queue has it
	}
	if ok && !c.limited() {
		c.qmu.Lock()
		for c.pending.Load() > flushAt && !c.q.closed {
			c.q.cond.Wait()
		}
		ok = !c.q.closed
		c.qmu.Unlock()
	}
	return ok
}

// Commit moves the replies written to W so far into the output queue,
// starting the queue if need be, so that anything pushed afterwards is
// sent after them. A handler that makes its connection a target of pushes
// (SUBSCRIBE) calls it after writing its reply, under the lock that pushers
// take, so that no message can overtake the reply.
func (c *Conn) Commit() {
	c.enqueue(c.W.Bytes(), false)
	c.resetW()
}

// enqueue adds b to the output queue, copied, or handed over whole (take).
func (c *Conn) enqueue(b []byte, take bool) bool {
	if len(b) > 0 && !c.addPending(int64(len(b))) {
		return false
	}
	c.qmu.Lock()
	if c.killed.Load() || (c.q != nil && c.q.closed) {
		c.qmu.Unlock()
		return false
	}
	if c.q == nil {
		c.q = &pushQueue{cond: sync.NewCond(&c.qmu)}
		c.queued.Store(true)
		go c.writeQueue(c.q)
	}
	q := c.q
	switch {
	case take:
		q.blocks = append(q.blocks, b)
	case len(b) > 0:
		q.add(b)
	}
	c.blocksQueued.Store(int64(len(q.blocks)))
	q.cond.Broadcast()
	c.qmu.Unlock()
	return true
}

// add copies b into the queue: into the last block while it has room, a
// block of its own when it is big.
func (q *pushQueue) add(b []byte) {
	if n := len(q.blocks); n > 0 {
		last := q.blocks[n-1]
		if cap(last)-len(last) >= len(b) {
			q.blocks[n-1] = append(last, b...)
			return
		}
	}
	var blk []byte
	switch {
	case len(b) >= pushBlock:
		blk = make([]byte, 0, len(b))
	case len(q.spare) > 0:
		blk = q.spare[len(q.spare)-1]
		q.spare = q.spare[:len(q.spare)-1]
	default:
		blk = make([]byte, 0, pushBlock)
	}
	q.blocks = append(q.blocks, append(blk, b...))
}

// writeQueue is the writer goroutine: it sends the queue's blocks until
// the connection closes.
func (c *Conn) writeQueue(q *pushQueue) {
	for {
		c.qmu.Lock()
		for len(q.blocks) == 0 && !q.closed {
			q.cond.Wait()
		}
		if q.closed {
			c.qmu.Unlock()
			return
		}
		batch := q.blocks
		q.blocks = q.swap[:0]
		c.blocksQueued.Store(0)
		c.qmu.Unlock()

		ok := true
		c.wmu.Lock()
		for _, b := range batch {
			if ok {
				ok = c.write(b)
			} else {
				c.subPending(int64(len(b)))
			}
		}
		c.wmu.Unlock()

		c.qmu.Lock()
		for _, b := range batch {
			if cap(b) == pushBlock && len(q.spare) < 4 {
				q.spare = append(q.spare, b[:0])
			}
		}
		clear(batch)
		q.swap = batch[:0]
		if !ok {
			q.closed = true
		}
		q.cond.Broadcast()
		c.qmu.Unlock()
		if !ok {
			c.Kill()
			return
		}
	}
}

// drainQueue waits until the output queue, if any, is sent, before the
// connection closes (QUIT, a protocol error, shutdown).
func (c *Conn) drainQueue() {
	if !c.queued.Load() {
		return
	}
	c.qmu.Lock()
	for c.pending.Load() > 0 && !c.q.closed {
		c.q.cond.Wait()
	}
	c.qmu.Unlock()
}
