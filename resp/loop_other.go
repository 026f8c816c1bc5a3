//go:build !linux

package resp

import "errors"

// Event loops need epoll (loop_linux.go); elsewhere every connection has
// its goroutine.

type loop struct{}

type loops struct{ all []*loop }

func (ls *loops) pick() *loop          { return nil }
func (l *loop) attach(c *Conn) bool    { return false }
func (l *loop) kick(c *Conn)           {}
func (l *loop) poke()                  {}
func loopCount() int                   { return 1 }
func (s *Server) startLoops(int) error { return errors.New("resp: event loops need Linux") }

type rawSock struct{}
