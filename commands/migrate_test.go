package commands

import (
	"bufio"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limitkv/limitkv/resp"
)

// okTarget answers +OK to every command; with closeAfterFirst it closes
// each connection after its first batch, as a target that dropped a
// cached connection would be found.
func okTarget(t *testing.T, closeAfterFirst bool) string {
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
				c.SetDeadline(time.Now().Add(20 * time.Second))
				r := bufio.NewReader(c)
				n := 0
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if strings.HasPrefix(line, "*") {
						n++
					}
					if r.Buffered() == 0 && n > 0 {
						c.Write([]byte(strings.Repeat("+OK\r\n", n)))
						n = 0
						if closeAfterFirst {
							return
						}
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func restoreBody(keys ...string) []byte {
	var b []byte
	for _, k := range keys {
		b = resp.AppendCommand(b, []byte("RESTORE"), []byte(k), []byte("0"), []byte("payload"))
	}
	return b
}

// TestMigrateSocketsConcurrent: MIGRATEs to one target at once each get
// a connection of their own; run with -race.
func TestMigrateSocketsConcurrent(t *testing.T) {
	addr := okTarget(t, false)
	var m migrateSockets
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				acked, reply := m.send(addr, time.Second, nil, int64(i%3), restoreBody("a", "b"), 2)
				if reply != "" || !acked[0] || !acked[1] {
					t.Errorf("send: %q %v", reply, acked)
					return
				}
			}
		}()
	}
	wg.Wait()
	m.mu.Lock()
	n := len(m.socks)
	m.mu.Unlock()
	if n != 1 {
		t.Errorf("%d cached connections to one target, want 1", n)
	}
}

// TestMigrateSocketsRetry: a cached connection the target has closed is
// replaced, once, without the caller seeing an error.
func TestMigrateSocketsRetry(t *testing.T) {
	addr := okTarget(t, true)
	var m migrateSockets
	for i := 0; i < 3; i++ {
		acked, reply := m.send(addr, time.Second, nil, 0, restoreBody("k"), 1)
		if reply != "" || !acked[0] {
			t.Fatalf("send %d: %q %v", i, reply, acked)
		}
		time.Sleep(50 * time.Millisecond) // let the target's close arrive
	}
}
