package commands

import (
	"bufio"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/limitkv/limitkv/resp"
)

// TestRLTopRace: connections deny on keys of many shards, in scripts and
// transactions too, while others read and reset RL.TOP and the clock
// crosses periods; run with -race. With RESETs under way only the shape
// of the replies can be checked; the final count is checked after.
func TestRLTopRace(t *testing.T) {
	h := newHarness(t)
	const conns, rounds = 16, 200
	var wg sync.WaitGroup
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(time.Minute))
		return c, bufio.NewReader(c)
	}
	do := func(c net.Conn, r *bufio.Reader, args ...string) resp.Value {
		var bs [][]byte
		for _, a := range args {
			bs = append(bs, []byte(a))
		}
		if _, err := c.Write(resp.AppendCommand(nil, bs...)); err != nil {
			t.Error(err)
			return resp.Value{}
		}
		v, err := resp.ReadValue(r)
		if err != nil {
			t.Error(err)
		}
		return v
	}
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, r := dial()
			defer c.Close()
			for j := 0; j < rounds; j++ {
				key := fmt.Sprintf("k%d", (i*rounds+j)%97)
				switch j % 4 {
				case 0:
					do(c, r, "RL.FIXED", key, "1", "1h")
				case 1:
					do(c, r, "CL.THROTTLE", key+"g", "0", "1", "3600")
				case 2:
					do(c, r, "EVAL", "return redis.call('RL.SLIDE', KEYS[1], 1, '1h')", "1", key+"s")
				case 3:
					do(c, r, "MULTI")
					do(c, r, "RL.FIXED", key, "1", "1h")
					do(c, r, "RL.TOP", "5")
					do(c, r, "EXEC")
				}
			}
		}(i)
	}
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, r := dial()
			defer c.Close()
			for j := 0; j < rounds; j++ {
				if v := do(c, r, "RL.TOP", "1000"); v.Type != '*' {
					t.Errorf("RL.TOP: %s", v)
				}
				if i == 1 && j%50 == 0 {
					do(c, r, "RL.TOP", "RESET")
					h.clock.Advance(30_000)
				}
			}
		}(i)
	}
	wg.Wait()
	h.do("RL.TOP", "RESET")
	for i := 0; i < 5; i++ {
		h.do("RL.FIXED", "last", "1", "1h")
	}
	if got := h.do("RL.TOP", "1").String(); got != `[["key", "last", "db", :0, "denied", :4, "error", :0]]` {
		t.Fatalf("RL.TOP 1: %s", got)
	}
}
