package commands

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limitkv/limitkv/resp"
)

// rawSub is a connection read directly, for the pub/sub tests.
type rawSub struct {
	c net.Conn
	r *bufio.Reader
}

func dialSub(t testing.TB, h *harness) *rawSub {
	t.Helper()
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(time.Minute))
	return &rawSub{c: c, r: bufio.NewReader(c)}
}

func (s *rawSub) send(t testing.TB, cmds ...[]string) {
	var b []byte
	for _, args := range cmds {
		var bs [][]byte
		for _, a := range args {
			bs = append(bs, []byte(a))
		}
		b = resp.AppendCommand(b, bs...)
	}
	if _, err := s.c.Write(b); err != nil {
		t.Error(err)
	}
}

func (s *rawSub) read(t testing.TB) resp.Value {
	v, err := resp.ReadValue(s.r)
	if err != nil {
		t.Errorf("read: %v", err)
	}
	return v
}

// TestPublishOrder: while four publishers publish numbered messages,
// subscribers join in every way there is (SUBSCRIBE, PSUBSCRIBE, inside
// MULTI, in RESP3, behind pipelined commands) and others subscribe and
// unsubscribe in a loop. Each subscriber must get its confirmation before
// any message, then each publisher's messages in order, without gaps.
func TestPublishOrder(t *testing.T) {
	h := newHarness(t)
	const publishers = 4
	var pubWG sync.WaitGroup
	stopPub := make(chan struct{})
	for p := 0; p < publishers; p++ {
		conn := dialSub(t, h)
		pubWG.Add(1)
		go func() {
			defer pubWG.Done()
			// Until every subscriber has joined, and at least 500 each.
			for i := 0; ; i += 50 {
				select {
				case <-stopPub:
					if i >= 500 {
						return
					}
				default:
				}
				var batch [][]string
				for j := i; j < i+50; j++ {
					batch = append(batch, []string{"PUBLISH", "ord", fmt.Sprintf("%d:%d", p, j)})
				}
				conn.send(t, batch...)
				for range batch {
					if v := conn.read(t); v.Type != ':' {
						t.Errorf("PUBLISH: %s", v)
						return
					}
				}
			}
		}()
	}

	// Each way of subscribing: the requests, and the replies that must come
	// before any message.
	ways := []struct {
		name    string
		cmds    [][]string
		confirm []string
	}{
		{"subscribe", [][]string{{"SUBSCRIBE", "ord"}}, []string{`["subscribe", "ord", :1]`}},
		{"two channels", [][]string{{"SUBSCRIBE", "other", "ord"}}, []string{`["subscribe", "other", :1]`, `["subscribe", "ord", :2]`}},
		{"psubscribe", [][]string{{"PSUBSCRIBE", "o?d"}}, []string{`["psubscribe", "o?d", :1]`}},
		{"pipelined", [][]string{{"SET", "k", "v"}, {"GET", "k"}, {"SUBSCRIBE", "ord"}}, []string{"+OK", `"v"`, `["subscribe", "ord", :1]`}},
		{"multi", [][]string{{"MULTI"}, {"PING"}, {"SUBSCRIBE", "ord"}, {"PING"}, {"EXEC"}},
			[]string{"+OK", "+QUEUED", "+QUEUED", "+QUEUED", `[+PONG, ["subscribe", "ord", :1], ["pong", ""]]`}},
		{"resp3", [][]string{{"HELLO", "3"}, {"SUBSCRIBE", "ord"}}, []string{"", `>["subscribe", "ord", :1]`}},
	}
	stopChurn := make(chan struct{})
	var churnWG sync.WaitGroup
	for i := 0; i < 2; i++ {
		churnWG.Add(1)
		go func() {
			defer churnWG.Done()
			for n := 0; n < 500; n++ {
				select {
				case <-stopChurn:
					return
				default:
				}
				nc, err := net.Dial("tcp", h.addr)
				if err != nil {
					t.Error(err)
					return
				}
				c := &rawSub{c: nc, r: bufio.NewReader(nc)}
				c.send(t, []string{"SUBSCRIBE", "ord", "x"}, []string{"PSUBSCRIBE", "*"}, []string{"UNSUBSCRIBE", "ord"})
				if n%2 == 0 {
					c.send(t, []string{"RESET"})
				}
				// Read some of the replies, so that the requests are served
				// while the connection is open.
				nc.SetReadDeadline(time.Now().Add(5 * time.Second))
				c.read(t)
				nc.Close()
				time.Sleep(time.Millisecond)
			}
		}()
	}

	type result struct {
		name string
		got  int
		err  string
	}
	results := make(chan result, len(ways)*3)
	var subWG sync.WaitGroup
	failed := false
	for round := 0; round < 3 && !failed; round++ {
		for _, w := range ways {
			c := dialSub(t, h)
			c.send(t, w.cmds...)
			for _, want := range w.confirm {
				v := c.read(t)
				if want != "" && v.String() != want {
					t.Errorf("%s: got %s before its confirmation %s", w.name, v, want)
					failed = true
				}
			}
			if failed {
				break
			}
			subWG.Add(1)
			go func() {
				defer subWG.Done()
				last := make([]int, publishers)
				for i := range last {
					last[i] = -1
				}
				got := 0
				for {
					v := c.read(t)
					if len(v.Elems) < 3 {
						results <- result{w.name, got, "not a message: " + v.String()}
						return
					}
					payload := string(v.Elems[len(v.Elems)-1].Str)
					if payload == "end" {
						results <- result{w.name, got, ""}
						return
					}
					p, j, _ := strings.Cut(payload, ":")
					pi, _ := strconv.Atoi(p)
					ji, _ := strconv.Atoi(j)
					if last[pi] >= 0 && ji != last[pi]+1 {
						results <- result{w.name, got, fmt.Sprintf("publisher %d: message %d after %d", pi, ji, last[pi])}
						return
					}
					last[pi] = ji
					got++
				}
			}()
			time.Sleep(5 * time.Millisecond)
		}
	}
	close(stopPub)
	pubWG.Wait()
	close(stopChurn)
	churnWG.Wait()
	h.do("PUBLISH", "ord", "end")
	subWG.Wait()
	close(results)
	total := 0
	for r := range results {
		if r.err != "" {
			t.Errorf("%s: %s", r.name, r.err)
		}
		total += r.got
	}
	t.Logf("%d subscribers received %d messages in order", len(ways)*3, total)
}

// TestPublishToSelfInExec: a message a transaction publishes to the
// channel it subscribed to comes inside EXEC's reply, where Redis 7.0
// writes it (after the subscription's confirmation).
func TestPublishToSelfInExec(t *testing.T) {
	h := newHarness(t)
	c := dialSub(t, h)
	c.send(t, []string{"MULTI"}, []string{"SUBSCRIBE", "a"}, []string{"EVAL", "return redis.call('publish', 'a', 'lua')", "0"},
		[]string{"PUBLISH", "a", "x"}, []string{"EXEC"})
	var got []string
	for i := 0; i < 7; i++ {
		got = append(got, c.read(t).String())
	}
	want := []string{"+OK", "+QUEUED", "+QUEUED", "+QUEUED",
		// EXEC's reply as Redis 7.0 writes it: the messages sit between
		// its elements, uncounted.
		`[["subscribe", "a", :1], ["message", "a", "lua"], :1]`, `["message", "a", "x"]`, ":1"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("got  %v\nwant %v", got, want)
	}
}

// BenchmarkPublish: PUBLISH to 1, 10 and 100 subscribers that read, from
// one client over loopback, one at a time and pipelined 16 deep.
func BenchmarkPublish(b *testing.B) {
	for _, subs := range []int{1, 10, 100} {
		for _, pipeline := range []int{1, 16} {
			b.Run(fmt.Sprintf("subs=%d/P%d", subs, pipeline), func(b *testing.B) {
				h := newHarness(b)
				for i := 0; i < subs; i++ {
					c := dialSub(b, h)
					c.c.SetDeadline(time.Time{})
					c.send(b, []string{"SUBSCRIBE", "bench"})
					c.read(b)
					go io.Copy(io.Discard, c.r)
				}
				nc := newNetClient(b, h, []string{"PUBLISH", "bench", strings.Repeat("m", 100)}, pipeline)
				nc.roundTrip(b)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i += pipeline {
					nc.roundTrip(b)
				}
				b.ReportMetric(float64(b.N*subs)/b.Elapsed().Seconds(), "msgs/s")
			})
		}
	}
}

// BenchmarkPublishDeliver: the delivery alone (Server.Publish, as a replica
// calls it) to 1, 10 and 100 subscribers; allocations are those of the
// output queues.
func BenchmarkPublishDeliver(b *testing.B) {
	for _, subs := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("subs=%d", subs), func(b *testing.B) {
			h := newHarness(b)
			for i := 0; i < subs; i++ {
				c := dialSub(b, h)
				c.c.SetDeadline(time.Time{})
				c.send(b, []string{"SUBSCRIBE", "bench"})
				c.read(b)
				go io.Copy(io.Discard, c.r)
			}
			ch, msg := []byte("bench"), []byte(strings.Repeat("m", 100))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if n := h.srv.Publish(ch, msg, false); n != subs {
					b.Fatalf("%d receivers", n)
				}
			}
		})
	}
}
