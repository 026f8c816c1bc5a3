package commands

import (
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// waitFor polls cond, 10 s at most.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 2000; i++ {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func (h *harness) blockedNow() int64 { return h.srv.blocks.Blocked() }

func (h *harness) blockedKeys() int { return h.srv.blocks.Keys() }

func loopSettings(loops bool) []string {
	if loops {
		return []string{"event-loops", "yes"}
	}
	return []string{"event-loops", "no"}
}

// TestBlockingFIFO: clients blocked one after the other on a key are
// served in that order, one element each, by pushes of one element or
// many; clients that disconnected while blocked are skipped and leave
// nothing behind.
func TestBlockingFIFO(t *testing.T) {
	for _, loops := range []bool{false, true} {
		t.Run(fmt.Sprintf("loops=%v", loops), func(t *testing.T) {
			h := newHarness(t, loopSettings(loops)...)
			const n = 40
			clients := make([]*rawSub, n)
			for i := range clients {
				clients[i] = dialSub(t, h)
				clients[i].send(t, []string{"BLPOP", "q", "0"})
				waitFor(t, "client "+strconv.Itoa(i)+" to block", func() bool { return h.blockedNow() == int64(i+1) })
			}
			// The odd ones go away while blocked.
			for i := 1; i < n; i += 2 {
				clients[i].c.Close()
			}
			waitFor(t, "disconnected clients to be freed", func() bool { return h.blockedNow() == n/2 })
			main := dialSub(t, h)
			// One push of many, then one element per push.
			args := []string{"RPUSH", "q"}
			for i := 0; i < n/4; i++ {
				args = append(args, "e"+strconv.Itoa(i))
			}
			main.send(t, args)
			if v := main.read(t); v.Int != n/4 {
				t.Fatalf("RPUSH: %s", v)
			}
			for i := n / 4; i < n/2; i++ {
				main.send(t, []string{"LPUSH", "q", "e" + strconv.Itoa(i)})
				if v := main.read(t); v.Int != 1 {
					t.Fatalf("LPUSH %d: %s (a client was not served at once)", i, v)
				}
			}
			for j, i := 0, 0; i < n; i, j = i+2, j+1 {
				v := clients[i].read(t)
				if want := fmt.Sprintf(`["q", "e%d"]`, j); v.String() != want {
					t.Errorf("client %d got %s, want %s", i, v, want)
				}
			}
			main.send(t, []string{"EXISTS", "q"})
			if v := main.read(t); v.Int != 0 {
				t.Errorf("EXISTS q: %s", v)
			}
			if b, k := h.blockedNow(), h.blockedKeys(); b != 0 || k != 0 {
				t.Errorf("after serving: %d blocked, %d keys", b, k)
			}
		})
	}
}

// TestBlockingConcurrent: many clients blocked on one key (and some on
// several) while pushers push from many connections at once, with
// pipelined pops racing them: every element is received exactly once.
func TestBlockingConcurrent(t *testing.T) {
	h := newHarness(t, loopSettings(true)...)
	const waiters, pushers, each = 60, 4, 20
	got := make(chan string, pushers*each)
	var wg sync.WaitGroup
	for i := 0; i < waiters; i++ {
		c := dialSub(t, h)
		cmd := []string{"BRPOP", "hot", "0"}
		if i%3 == 0 {
			cmd = []string{"BLPOP", "other" + strconv.Itoa(i), "hot", "0"}
		}
		c.send(t, cmd)
		wg.Add(1)
		go func() {
			defer wg.Done()
			v := c.read(t)
			if len(v.Elems) != 2 || string(v.Elems[0].Str) != "hot" {
				t.Errorf("reply %s", v)
				return
			}
			got <- string(v.Elems[1].Str)
		}()
	}
	waitFor(t, "all to block", func() bool { return h.blockedNow() == waiters })
	var pw sync.WaitGroup
	for p := 0; p < pushers; p++ {
		c := dialSub(t, h)
		pw.Add(1)
		go func() {
			defer pw.Done()
			for i := 0; i < each; i++ {
				c.send(t, []string{"LPUSH", "hot", fmt.Sprintf("p%d-%d", p, i)}, []string{"RPOP", "hot"})
				c.read(t)
				if v := c.read(t); v.Type == '$' && v.Str != nil {
					got <- string(v.Str) // taken by the racing pop: only when no client waited
				}
			}
		}()
	}
	pw.Wait()
	wg.Wait()
	close(got)
	seen := map[string]int{}
	for v := range got {
		seen[v]++
	}
	if len(seen) != pushers*each {
		t.Errorf("received %d distinct elements, want %d", len(seen), pushers*each)
	}
	for v, n := range seen {
		if n != 1 {
			t.Errorf("%s received %d times", v, n)
		}
	}
	if b, k := h.blockedNow(), h.blockedKeys(); b != 0 || k != 0 {
		t.Errorf("after serving: %d blocked, %d keys", b, k)
	}
}

// TestBlockingTimeouts: each blocking command times out with its null
// reply, in RESP2 and RESP3, and leaves nothing registered.
func TestBlockingTimeouts(t *testing.T) {
	h := newHarness(t)
	c := dialSub(t, h)
	for _, proto := range []string{"2", "3"} {
		c.send(t, []string{"HELLO", proto})
		c.read(t)
		null := "*nil"
		if proto == "3" {
			null = "_"
		}
		for _, cmd := range [][]string{
			{"BLPOP", "a", "b", "0.05"},
			{"BRPOP", "a", "0.05"},
			{"BRPOPLPUSH", "a", "b", "0.05"},
			{"BLMOVE", "a", "b", "LEFT", "RIGHT", "0.05"},
			{"BLMPOP", "0.05", "2", "a", "b", "LEFT"},
			{"BZPOPMIN", "a", "0.05"},
			{"BZPOPMAX", "a", "0.05"},
			{"BZMPOP", "0.05", "1", "a", "MIN", "COUNT", "3"},
		} {
			start := time.Now()
			c.send(t, cmd)
			v := c.read(t)
			if d := time.Since(start); d < 45*time.Millisecond {
				t.Errorf("%v answered after %v", cmd, d)
			}
			if s := v.String(); s != null {
				t.Errorf("RESP%s %v: %s, want %s", proto, cmd, s, null)
			}
		}
	}
	if b, k := h.blockedNow(), h.blockedKeys(); b != 0 || k != 0 {
		t.Errorf("after timeouts: %d blocked, %d keys", b, k)
	}
}

// TestClientUnblock: CLIENT UNBLOCK answers a blocked client as a timeout
// or with an error, frees it, and answers 0 for clients not blocked.
func TestClientUnblock(t *testing.T) {
	h := newHarness(t)
	main := dialSub(t, h)
	b := dialSub(t, h)
	b.send(t, []string{"CLIENT", "ID"})
	id := strconv.FormatInt(b.read(t).Int, 10)
	for _, tc := range []struct{ how, want string }{
		{"", "*nil"},
		{"TIMEOUT", "*nil"},
		{"ERROR", "-UNBLOCKED client unblocked via CLIENT UNBLOCK"},
	} {
		b.send(t, []string{"BLMOVE", "src", "dst", "LEFT", "LEFT", "0"})
		waitFor(t, "the client to block", func() bool { return h.blockedNow() == 1 })
		main.send(t, []string{"CLIENT", "LIST", "ID", id})
		if line := string(main.read(t).Str); !strings.Contains(line, "flags=b ") || !strings.Contains(line, "cmd=blmove ") {
			t.Errorf("CLIENT LIST of a blocked client: %s", line)
		}
		args := []string{"CLIENT", "UNBLOCK", id}
		if tc.how != "" {
			args = append(args, tc.how)
		}
		main.send(t, args)
		if v := main.read(t); v.Int != 1 {
			t.Errorf("%v: %s", args, v)
		}
		if v := b.read(t); v.String() != tc.want {
			t.Errorf("%v: the blocked client got %s, want %s", args, v, tc.want)
		}
		main.send(t, args)
		if v := main.read(t); v.Int != 0 {
			t.Errorf("%v again: %s", args, v)
		}
	}
	// WAIT, blocked on no key: TIMEOUT answers the replicas counted so far.
	for _, tc := range []struct{ how, want string }{
		{"TIMEOUT", ":0"},
		{"ERROR", "-UNBLOCKED client unblocked via CLIENT UNBLOCK"},
	} {
		b.send(t, []string{"WAIT", "1", "0"})
		waitFor(t, "WAIT to block", func() bool { return h.blockedNow() == 1 })
		main.send(t, []string{"CLIENT", "UNBLOCK", id, tc.how})
		if v := main.read(t); v.Int != 1 {
			t.Errorf("CLIENT UNBLOCK of WAIT: %s", v)
		}
		if v := b.read(t); v.String() != tc.want {
			t.Errorf("WAIT unblocked with %s: %s, want %s", tc.how, v, tc.want)
		}
	}
	// Still usable, and nothing left waiting.
	b.send(t, []string{"PING"})
	if v := b.read(t); v.String() != "+PONG" {
		t.Errorf("PING after unblock: %s", v)
	}
	if k := h.blockedKeys(); k != 0 {
		t.Errorf("%d keys still blocked", k)
	}
	main.send(t, []string{"INFO", "errorstats"})
	if s := string(main.read(t).Str); !strings.Contains(s, "errorstat_UNBLOCKED:count=2") {
		t.Errorf("errorstats: %s", s)
	}
}

// TestBlockingPipeline: commands a client sends behind a blocking one
// wait for it and are served after its reply, in order.
func TestBlockingPipeline(t *testing.T) {
	h := newHarness(t, loopSettings(true)...)
	b := dialSub(t, h)
	b.send(t, []string{"PING", "before"}, []string{"BLPOP", "pq", "0"}, []string{"PING", "after"})
	if v := b.read(t); v.String() != `"before"` {
		t.Fatalf("first reply %s", v)
	}
	waitFor(t, "the client to block", func() bool { return h.blockedNow() == 1 })
	main := dialSub(t, h)
	main.send(t, []string{"RPUSH", "pq", "x"})
	main.read(t)
	if v := b.read(t); v.String() != `["pq", "x"]` {
		t.Errorf("BLPOP: %s", v)
	}
	if v := b.read(t); v.String() != `"after"` {
		t.Errorf("after: %s", v)
	}
}

// TestBlockingInMulti: inside MULTI nothing blocks, and pushes inside it
// serve the clients blocked before, at EXEC.
func TestBlockingInMulti(t *testing.T) {
	h := newHarness(t)
	main := dialSub(t, h)
	b := dialSub(t, h)
	b.send(t, []string{"BZPOPMAX", "mz", "0"})
	waitFor(t, "the client to block", func() bool { return h.blockedNow() == 1 })
	main.send(t, []string{"MULTI"}, []string{"BLPOP", "none", "0"}, []string{"ZADD", "mz", "1", "a", "2", "b"}, []string{"ZCARD", "mz"}, []string{"EXEC"})
	for i := 0; i < 4; i++ {
		main.read(t)
	}
	if v := main.read(t); v.String() != "[*nil, :2, :2]" {
		t.Errorf("EXEC: %s", v)
	}
	if v := b.read(t); v.String() != `["mz", "b", "2"]` {
		t.Errorf("served: %s", v)
	}
}

// TestClientPause: a WRITE pause holds writes back, not reads; ALL holds
// everything; UNPAUSE or the timeout lets them go; paused clients show as
// blocked; event loops run nothing inline meanwhile.
func TestClientPause(t *testing.T) {
	h := newHarness(t, loopSettings(true)...)
	main := dialSub(t, h)
	w := dialSub(t, h)
	main.send(t, []string{"CLIENT", "PAUSE", "100000", "WRITE"})
	main.read(t)
	w.send(t, []string{"SET", "k", "v"})
	waitFor(t, "the write to pause", func() bool { return h.srv.pause.waiting.Load() == 1 })
	main.send(t, []string{"GET", "k"})
	if v := main.read(t); v.String() != "nil" {
		t.Errorf("GET during the pause: %s", v)
	}
	main.send(t, []string{"INFO", "clients"})
	if s := string(main.read(t).Str); !strings.Contains(s, "blocked_clients:1\r\n") {
		t.Errorf("INFO clients: %s", s)
	}
	main.send(t, []string{"CLIENT", "UNPAUSE"})
	main.read(t)
	if v := w.read(t); v.String() != "+OK" {
		t.Errorf("SET after unpause: %s", v)
	}
	// ALL, ended by its timeout.
	main.send(t, []string{"CLIENT", "PAUSE", "150", "ALL"})
	main.read(t)
	start := time.Now()
	w.send(t, []string{"PING"})
	if v := w.read(t); v.String() != "+PONG" {
		t.Errorf("PING: %s", v)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("PING answered after %v during a 150 ms pause", d)
	}
	if p := h.srv.pause.waiting.Load(); p != 0 {
		t.Errorf("%d clients still paused", p)
	}
	// A paused client that disconnects is freed.
	main.send(t, []string{"CLIENT", "PAUSE", "100000", "WRITE"})
	main.read(t)
	w.send(t, []string{"DEL", "k"})
	waitFor(t, "the write to pause", func() bool { return h.srv.pause.waiting.Load() == 1 })
	w.c.Close()
	waitFor(t, "the paused client to go", func() bool { return h.srv.pause.waiting.Load() == 0 })
	main.send(t, []string{"CLIENT", "UNPAUSE"})
	main.read(t)
	main.send(t, []string{"GET", "k"})
	if v := main.read(t); v.String() != `"v"` {
		t.Errorf("the dropped DEL ran: GET k = %s", v)
	}
}

// TestBlockingDisconnectAll: clients blocked on several keys that all
// disconnect leave no waiter and no connection behind.
func TestBlockingDisconnectAll(t *testing.T) {
	h := newHarness(t)
	var conns []net.Conn
	for i := 0; i < 10; i++ {
		c := dialSub(t, h)
		c.send(t, []string{"BLPOP", "k" + strconv.Itoa(i%3), "k9", "0"})
		conns = append(conns, c.c)
	}
	waitFor(t, "all to block", func() bool { return h.blockedNow() == 10 })
	for _, c := range conns {
		c.Close()
	}
	waitFor(t, "all to be freed", func() bool { return h.blockedNow() == 0 && h.blockedKeys() == 0 })
	waitFor(t, "the connections to close", func() bool { return h.srv.clients.count() <= 1 })
}

// TestBlockedWhenReplica: a master that becomes a replica ends its
// clients' blocks with an error and closes their connections.
func TestBlockedWhenReplica(t *testing.T) {
	h := newHarness(t)
	b := dialSub(t, h)
	b.send(t, []string{"BLPOP", "k", "0"})
	waitFor(t, "the client to block", func() bool { return h.blockedNow() == 1 })
	main := dialSub(t, h)
	main.send(t, []string{"REPLICAOF", "127.0.0.1", "1"})
	if v := main.read(t); v.String() != "+OK" {
		t.Fatalf("REPLICAOF: %s", v)
	}
	if v := b.read(t); v.String() != "-UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)" {
		t.Errorf("blocked client: %s", v)
	}
	b.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := b.r.ReadByte(); err == nil {
		t.Error("the connection stayed open")
	}
	main.send(t, []string{"REPLICAOF", "NO", "ONE"})
	main.read(t)
}

// TestClientNoEvict: the flag shows in CLIENT INFO as Redis's e.
func TestClientNoEvict(t *testing.T) {
	h := newHarness(t)
	c := dialSub(t, h)
	for _, tc := range []struct{ arg, flags string }{{"on", "flags=e "}, {"OFF", "flags=N "}, {"On", "flags=e "}} {
		c.send(t, []string{"CLIENT", "NO-EVICT", tc.arg})
		if v := c.read(t); v.String() != "+OK" {
			t.Fatalf("CLIENT NO-EVICT %s: %s", tc.arg, v)
		}
		c.send(t, []string{"CLIENT", "INFO"})
		if s := string(c.read(t).Str); !strings.Contains(s, tc.flags) {
			t.Errorf("after NO-EVICT %s: %s", tc.arg, s)
		}
	}
}

// BenchmarkBlockWake: one client blocks in BLPOP, another's LPUSH serves
// it; an op is one block and its wake-up, both replies read, over
// loopback. The allocations are the whole process's: registering the
// waiter, serving it, and the two requests.
func BenchmarkBlockWake(b *testing.B) {
	for _, loops := range []bool{false, true} {
		b.Run(fmt.Sprintf("loops=%v", loops), func(b *testing.B) {
			h := newHarness(b, loopSettings(loops)...)
			waiter := newNetClient(b, h, []string{"BLPOP", "q", "0"}, 1)
			pusher := newNetClient(b, h, []string{"LPUSH", "q", "v"}, 1)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := waiter.c.Write(waiter.req); err != nil {
					b.Fatal(err)
				}
				for h.blockedNow() == 0 {
					runtime.Gosched()
				}
				pusher.roundTrip(b)
				if err := skipReply(waiter.r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
