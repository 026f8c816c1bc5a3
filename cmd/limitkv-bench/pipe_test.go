package main

import (
	"io"
	"net"
	"sync"
)

// pipeNet connects the load generator to a test server over memory
// (net.Pipe) instead of loopback TCP: inside a testing/synctest bubble
// every wait, a send, a stall or a reply, then happens on the bubble's
// fake clock, and what a test measures is the generator's schedule, not
// how busy the machine is.
type pipeNet struct {
	serve func(c net.Conn)
	wg    sync.WaitGroup
}

// dial returns the client's end of a new connection and serves the other
// end on a goroutine of its own.
func (p *pipeNet) dial(string) (net.Conn, error) {
	client, server := net.Pipe()
	s := newBufferedEnd(server)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer s.Close()
		p.serve(s)
	}()
	return client, nil
}

// bufferedEnd is a server's end of a pipe that always takes what the
// client writes: net.Pipe has no buffer, so a client still writing a
// batch while the server writes its first replies would otherwise wait
// for each other forever. A goroutine reads the pipe into buffers
// recycled through free, so that serving allocates nothing.
type bufferedEnd struct {
	net.Conn
	in, free chan []byte
	cur      []byte // the buffer being read, and what is left of it
	rest     []byte
}

const pipeBuffers, pipeBufferSize = 64, 16 << 10

func newBufferedEnd(c net.Conn) *bufferedEnd {
	b := &bufferedEnd{Conn: c, in: make(chan []byte, pipeBuffers), free: make(chan []byte, pipeBuffers)}
	for range pipeBuffers {
		b.free <- make([]byte, pipeBufferSize)
	}
	go func() {
		defer close(b.in)
		for {
			buf := <-b.free
			n, err := c.Read(buf[:cap(buf)])
			if n > 0 {
				b.in <- buf[:n]
			} else {
				b.free <- buf
			}
			if err != nil {
				return
			}
		}
	}()
	return b
}

func (b *bufferedEnd) Read(p []byte) (int, error) {
	if len(b.rest) == 0 {
		if b.cur != nil {
			b.free <- b.cur
			b.cur = nil
		}
		buf, ok := <-b.in
		if !ok {
			return 0, io.EOF
		}
		b.cur, b.rest = buf, buf
	}
	n := copy(p, b.rest)
	b.rest = b.rest[n:]
	return n, nil
}
