package commands

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limitkv/limitkv/cluster"
	"github.com/limitkv/limitkv/resp"
)

// migrateTarget is a MIGRATE target on loopback that hands each
// exchange's commands to reply, numbered from 1, and answers each
// command with the line reply returns for it.
type migrateTarget struct {
	host, port string
	mu         sync.Mutex
	exchanges  [][][]string
}

func startMigrateTarget(t *testing.T, reply func(n int, cmd []string) string) *migrateTarget {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	mt := &migrateTarget{}
	mt.host, mt.port, _ = net.SplitHostPort(ln.Addr().String())
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go mt.serve(c, reply)
		}
	}()
	return mt
}

func (mt *migrateTarget) serve(c net.Conn, reply func(int, []string) string) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	r := bufio.NewReader(c)
	var cmds [][]string
	for {
		v, err := resp.ReadValue(r)
		if err != nil {
			return
		}
		var cmd []string
		for _, a := range v.Elems {
			cmd = append(cmd, string(a.Str))
		}
		if cmd[0] == "SELECT" {
			c.Write([]byte("+OK\r\n"))
			continue
		}
		cmds = append(cmds, cmd)
		if r.Buffered() > 0 {
			continue
		}
		mt.mu.Lock()
		mt.exchanges = append(mt.exchanges, cmds)
		n := len(mt.exchanges)
		mt.mu.Unlock()
		var out []byte
		for _, cmd := range cmds {
			out = append(out, reply(n, cmd)+"\r\n"...)
		}
		cmds = nil
		c.Write(out)
	}
}

func (mt *migrateTarget) received() [][][]string {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	return mt.exchanges
}

// TestMigrateSendsAgainWhatChanged: a key another client writes while
// MIGRATE waits for its target is sent again, its new value replacing
// the target's copy, until it is the value the target holds when the key
// is deleted here; a key that keeps changing is sent a bounded number of
// times, the last with its shard locked, so that the write made during
// that last exchange runs only once the key is gone and is sent to the
// target (ASK) rather than making it afresh here. The writer is the
// target itself, between reading an exchange and answering it.
func TestMigrateSendsAgainWhatChanged(t *testing.T) {
	s := newClusterServer(t)
	other, otherID := meet(t, s)
	const key = "k"
	slot := strconv.Itoa(int(cluster.KeySlot([]byte(key))))
	for _, req := range [][]string{{"CLUSTER", "ADDSLOTSRANGE", "0", "16383"}, {"SET", key, "v0"}, {"CLUSTER", "SETSLOT", slot, "MIGRATING", otherID}} {
		if got := s.reply(req...); got != "+OK" {
			t.Fatalf("%v: %s", req, got)
		}
	}
	for i := 0; !s.bus.Routing().OK; i++ {
		if i == 1500 {
			t.Fatal("the cluster did not come up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	writer := newTestClient(s.srv)
	write := func(v string) string {
		w := resp.NewWriter(2)
		s.srv.request(writer, w, [][]byte{[]byte("SET"), []byte(key), []byte(v)})
		return strings.TrimSuffix(string(w.Bytes()), "\r\n")
	}
	last := make(chan string, 1)
	mt := startMigrateTarget(t, func(n int, cmd []string) string {
		if n < migrateRounds {
			if got := write("v" + strconv.Itoa(n)); got != "+OK" {
				t.Errorf("SET during exchange %d: %s", n, got)
			}
			return "+OK"
		}
		// The last exchange: the write waits for the key's shard, which
		// MIGRATE holds until the key is deleted. A write that got
		// through in the half second the answer is held back would
		// have made the key differ from what the target holds.
		go func() { last <- write("v" + strconv.Itoa(n)) }()
		select {
		case got := <-last:
			last <- got
		case <-time.After(500 * time.Millisecond):
		}
		return "+OK"
	})
	if got := s.reply("MIGRATE", mt.host, mt.port, key, "0", "5000"); got != "+OK" {
		t.Fatalf("MIGRATE: %s", got)
	}
	if got, want := <-last, fmt.Sprintf("-ASK %s 127.0.0.1:%d", slot, other.port); got != want {
		t.Errorf("the write made during the last exchange: %q, want %q", got, want)
	}
	if got := s.reply("DBSIZE"); got != ":0" {
		t.Errorf("DBSIZE after MIGRATE: %s, want 0", got)
	}
	ex := mt.received()
	if len(ex) != migrateRounds {
		t.Fatalf("%d exchanges, want %d", len(ex), migrateRounds)
	}
	for i, cmds := range ex {
		cmd := cmds[0]
		if len(cmds) != 1 || cmd[0] != "RESTORE-ASKING" || cmd[1] != key {
			t.Fatalf("exchange %d: %q, want one RESTORE-ASKING of %s", i+1, cmds, key)
		}
		if want := "v" + strconv.Itoa(i); !bytes.Contains([]byte(cmd[3]), []byte(want)) {
			t.Errorf("exchange %d sent a payload without %q: %q", i+1, want, cmd[3])
		}
		if replace := len(cmd) > 4 && cmd[4] == "REPLACE"; replace != (i > 0) {
			t.Errorf("exchange %d: REPLACE %v, want %v (the target's copy is replaced from the second on)", i+1, replace, i > 0)
		}
	}
}

// TestMigrateResendRefused: a key written while MIGRATE waits, whose new
// value the target then refuses, stays here with that value, and MIGRATE
// answers the target's error, as Redis does for the keys it could not
// move.
func TestMigrateResendRefused(t *testing.T) {
	s := newScriptServer(t)
	s.do("SET", "k", "v0")
	writer := newTestClient(s.srv)
	mt := startMigrateTarget(t, func(n int, cmd []string) string {
		if n == 1 {
			w := resp.NewWriter(2)
			s.srv.request(writer, w, [][]byte{[]byte("SET"), []byte("k"), []byte("v1")})
			return "+OK"
		}
		return "-ERR no room"
	})
	if got := s.do("MIGRATE", mt.host, mt.port, "k", "0", "5000"); got != "-ERR Target instance replied with error: ERR no room" {
		t.Errorf("MIGRATE: %s", got)
	}
	if got := s.do("GET", "k"); got != `"v1"` {
		t.Errorf("GET k after MIGRATE: %s, want the value the target refused", got)
	}
	if n := len(mt.received()); n != 2 {
		t.Errorf("%d exchanges, want 2", n)
	}
}
