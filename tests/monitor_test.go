package tests

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/limitkv/limitkv/resp"
)

// MONITOR and CLIENT REPLY, run the same way on limitkv and, where it is
// installed (always under CI), on redis-server: the two transcripts must
// be the same once timestamps and client addresses are masked.

var monitorMask = regexp.MustCompile(`^\+\d+\.\d{6} \[(\d+) (lua|[^\]]+)\]`)

// maskMonitorLine hides what differs between runs in a MONITOR line: the
// time and the client's address (not "lua").
func maskMonitorLine(s string) string {
	return monitorMask.ReplaceAllStringFunc(s, func(m string) string {
		sub := monitorMask.FindStringSubmatch(m)
		addr := sub[2]
		if addr != "lua" {
			addr = "<addr>"
		}
		return "+<time> [" + sub[1] + " " + addr + "]"
	})
}

// monitorTranscript runs the scenario on s and returns what the monitor
// saw, masked, and the replies of the monitor's own requests.
func monitorTranscript(t *testing.T, s *server) []string {
	mon := dialRaw(t, s.Addr)
	r := dialRaw(t, s.Addr)
	if v := r.do("FUNCTION", "LOAD", "#!lua name=montest\nredis.register_function('test', function() return redis.call('set', 'foo', 'bar') end)"); v.String() != `"montest"` {
		t.Fatalf("FUNCTION LOAD: %s", v)
	}
	if v := mon.do("MONITOR"); v.String() != "+OK" {
		t.Fatalf("MONITOR: %s", v)
	}
	host, port := splitAddr(t, s.Addr)
	steps := [][]string{
		{"SET", "foo", "bar"},
		{"get", "foo"},
		{"SET", "bin", "a\"b\\c\n\r\t\a\b\x01\xff é"},
		{"EVAL", "redis.call('set',KEYS[1],ARGV[1])", "1", "foo", "bar"},
		{"FCALL", "test", "0"},
		{"AUTH", "not-real"},
		{"AUTH", "not-real", "not-a-password"},
		{"HELLO", "2", "AUTH", "not-real", "not-a-password"},
		{"MIGRATE", host, port, "nokey", "9", "5000"},
		{"MIGRATE", host, port, "nokey", "9", "5000", "AUTH", "user"},
		{"MIGRATE", host, port, "nokey", "9", "5000", "AUTH2", "user", "password"},
		{"MULTI"}, {"SET", "foo", "baz"}, {"EXEC"},
		{"MULTI"}, {"NOSUCHCOMMAND"}, {"EXEC"},
		{"MULTI"}, {"MONITOR"}, {"EXEC"},
		{"CONFIG", "GET", "maxmemory"},
		{"SELECT", "3"}, {"INCR", "in-db-3"}, {"SELECT", "0"},
		{"PING"},
	}
	var out []string
	for i, st := range steps {
		v := r.do(st...)
		if st[0] == "EXEC" && steps[i-1][0] == "MONITOR" {
			out = append(out, "MONITOR in EXEC: "+v.String())
		}
	}
	readUntil := func(marker string) {
		for i := 0; ; i++ {
			if i == 100 {
				t.Fatalf("no %q among the monitor's first 100 lines: %q", marker, out)
			}
			line := mon.read().String()
			out = append(out, maskMonitorLine(line))
			if strings.Contains(line, marker) {
				return
			}
		}
	}
	r.do("ECHO", "end-of-steps")
	readUntil("end-of-steps")

	// The monitor's own requests: a PING answered, then shown; a key it
	// may not touch, refused and not shown.
	out = append(out, "own: "+mon.do("PING").String())
	out = append(out, maskMonitorLine(mon.read().String()))
	out = append(out, "own: "+mon.do("GET", "foo").String())
	r.do("ECHO", "after-own")
	readUntil("after-own")

	// MONITOR again: no answer at all; the next thing read is a line.
	mon.send(resp.AppendCommand(nil, []byte("MONITOR")))
	r.do("ECHO", "after-second-monitor")
	readUntil("after-second-monitor")

	// CLIENT LIST flags the monitor O.
	list := r.do("CLIENT", "LIST").String()
	out = append(out, fmt.Sprintf("monitors listed: %d", strings.Count(list, " flags=O ")))

	// RESET leaves MONITOR mode: nothing more comes.
	out = append(out, "own: "+mon.do("RESET").String())
	r.do("SET", "after", "reset")
	out = append(out, "own: "+mon.do("PING").String())
	return out
}

func splitAddr(t *testing.T, addr string) (string, string) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		t.Fatalf("address %q", addr)
	}
	return addr[:i], addr[i+1:]
}

// TestMonitor: what MONITOR shows (commands once run, scripts' commands
// after their EVAL or FCALL, queued commands before their EXEC, an
// aborted EXEC, the database, quoting, redacted passwords), what it hides
// (administrative commands), and how a monitor behaves itself.
func TestMonitor(t *testing.T) {
	servers := map[string]*server{"limitkv": startLimitkv(t, "--persistence", "no")}
	pubsubWithRedis(t, servers)
	got := map[string][]string{}
	for name, s := range servers {
		got[name] = monitorTranscript(t, s)
	}
	want := []string{
		`MONITOR in EXEC: [-ERR MONITOR isn't allowed for DENY BLOCKING client]`,
		`+<time> [0 <addr>] "SET" "foo" "bar"`,
		`+<time> [0 <addr>] "get" "foo"`,
		`+<time> [0 <addr>] "SET" "bin" "a\"b\\c\n\r\t\a\b\x01\xff \xc3\xa9"`,
		`+<time> [0 <addr>] "EVAL" "redis.call('set',KEYS[1],ARGV[1])" "1" "foo" "bar"`,
		`+<time> [0 lua] "set" "foo" "bar"`,
		`+<time> [0 <addr>] "FCALL" "test" "0"`,
		`+<time> [0 lua] "set" "foo" "bar"`,
		`+<time> [0 <addr>] "AUTH" "(redacted)"`,
		`+<time> [0 <addr>] "AUTH" "(redacted)" "(redacted)"`,
		`+<time> [0 <addr>] "HELLO" "2" "AUTH" "(redacted)" "(redacted)"`,
		`+<time> [0 <addr>] "MIGRATE" "127.0.0.1" "<port>" "nokey" "9" "5000"`,
		`+<time> [0 <addr>] "MIGRATE" "127.0.0.1" "<port>" "nokey" "9" "5000" "AUTH" "(redacted)"`,
		`+<time> [0 <addr>] "MIGRATE" "127.0.0.1" "<port>" "nokey" "9" "5000" "AUTH2" "(redacted)" "(redacted)"`,
		`+<time> [0 <addr>] "MULTI"`,
		`+<time> [0 <addr>] "SET" "foo" "baz"`,
		`+<time> [0 <addr>] "EXEC"`,
		`+<time> [0 <addr>] "MULTI"`,
		`+<time> [0 <addr>] "EXEC"`,
		`+<time> [0 <addr>] "MULTI"`,
		`+<time> [0 <addr>] "EXEC"`,
		`+<time> [3 <addr>] "SELECT" "3"`,
		`+<time> [3 <addr>] "INCR" "in-db-3"`,
		`+<time> [0 <addr>] "SELECT" "0"`,
		`+<time> [0 <addr>] "PING"`,
		`+<time> [0 <addr>] "ECHO" "end-of-steps"`,
		`own: +PONG`,
		`+<time> [0 <addr>] "PING"`,
		`own: -ERR Replica can't interact with the keyspace`,
		`+<time> [0 <addr>] "ECHO" "after-own"`,
		`+<time> [0 <addr>] "ECHO" "after-second-monitor"`,
		`monitors listed: 1`,
		`own: +RESET`,
		`own: +PONG`,
	}
	for name, lines := range got {
		_, port := splitAddr(t, servers[name].Addr)
		for i := range lines {
			lines[i] = strings.ReplaceAll(lines[i], `"`+port+`"`, `"<port>"`)
		}
		if strings.Join(lines, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s's monitor saw:\n%s\nwant:\n%s", name, strings.Join(lines, "\n"), strings.Join(want, "\n"))
		}
	}
}

// TestMonitorSlowReaderClosed: a monitor that never reads is closed past
// client-output-buffer-limit pubsub, as a subscriber is, and leaves the
// list of monitors; the server stays up for everyone else.
func TestMonitorSlowReaderClosed(t *testing.T) {
	s := startLimitkv(t, "--persistence", "no")
	r := dialRaw(t, s.Addr)
	if v := r.do("CONFIG", "SET", "client-output-buffer-limit", "pubsub 262144 0 0"); v.String() != "+OK" {
		t.Fatal(v)
	}
	mon := dialRaw(t, s.Addr)
	if v := mon.do("MONITOR"); v.String() != "+OK" {
		t.Fatal(v)
	}
	// From here on the monitor reads nothing. Each SET is shown in about
	// 1.1 KB: batches of 100 go until the monitor is gone, past the limit
	// and what the socket buffers hold, at most 200 MB.
	val := strings.Repeat("v", 1024)
	var batch []byte
	for i := 0; i < 100; i++ {
		batch = append(batch, resp.AppendCommand(nil, []byte("SET"), []byte("k"), []byte(val))...)
	}
	for sent := 0; ; sent += 100 {
		if sent >= 200_000 {
			t.Fatalf("a monitor that does not read is still listed after %d commands shown", sent)
		}
		r.send(batch)
		for i := 0; i < 100; i++ {
			if v := r.read(); v.String() != "+OK" {
				t.Fatal(v)
			}
		}
		if sent%2000 == 0 && !strings.Contains(r.do("CLIENT", "LIST").String(), " flags=O ") {
			t.Logf("the monitor was closed after %d commands", sent+100)
			break
		}
	}
	if v := r.do("PING"); v.String() != "+PONG" {
		t.Fatal(v)
	}
}

// TestMonitorLineOverLimit: a command whose line alone would pass a
// monitor's output limit (one argument of 1 MB, the limit 256 KB) closes
// that monitor, as the line would; the command itself is served, and a
// monitor that comes after sees what follows.
func TestMonitorLineOverLimit(t *testing.T) {
	s := startLimitkv(t, "--persistence", "no")
	r := dialRaw(t, s.Addr)
	if v := r.do("CONFIG", "SET", "client-output-buffer-limit", "pubsub 262144 0 0"); v.String() != "+OK" {
		t.Fatal(v)
	}
	mon := dialRaw(t, s.Addr)
	if v := mon.do("MONITOR"); v.String() != "+OK" {
		t.Fatal(v)
	}
	if v := r.do("SET", "big", strings.Repeat("\x01", 1<<20)); v.String() != "+OK" {
		t.Fatal(v)
	}
	// The server closes the monitor without sending it anything.
	mon.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if b, err := mon.r.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the monitor was not closed: read %q, %v", b, err)
	}
	mon2 := dialRaw(t, s.Addr)
	if v := mon2.do("MONITOR"); v.String() != "+OK" {
		t.Fatal(v)
	}
	r.do("STRLEN", "big")
	if v := maskMonitorLine(mon2.read().String()); v != `+<time> [0 <addr>] "STRLEN" "big"` {
		t.Fatal(v)
	}
}

// TestClientReply: CLIENT REPLY OFF drops every reply, errors included,
// until ON, whose OK is sent; SKIP drops the next request's reply,
// whatever that request is; SKIP while OFF does nothing. Compared with
// redis-server.
func TestClientReply(t *testing.T) {
	servers := map[string]*server{"limitkv": startLimitkv(t, "--persistence", "no")}
	pubsubWithRedis(t, servers)
	cmd := func(args ...string) []byte {
		var bs [][]byte
		for _, a := range args {
			bs = append(bs, []byte(a))
		}
		return resp.AppendCommand(nil, bs...)
	}
	type step struct {
		send [][]byte
		want string // the one reply read after sending
	}
	steps := []step{
		{[][]byte{cmd("CLIENT", "REPLY", "OFF"), cmd("SET", "a", "1"), cmd("GET", "a"), cmd("NOSUCHCOMMAND"), cmd("CLIENT", "REPLY", "ON")}, "+OK"},
		{[][]byte{cmd("CLIENT", "REPLY", "SKIP"), cmd("SET", "b", "2"), cmd("GET", "b")}, `"2"`},
		{[][]byte{cmd("CLIENT", "REPLY", "SKIP"), cmd("NOSUCHCOMMAND"), cmd("PING")}, "+PONG"},
		{[][]byte{cmd("CLIENT", "REPLY", "SKIP"), cmd("CLIENT", "REPLY", "ON")}, "+OK"},
		{[][]byte{cmd("CLIENT", "REPLY", "SKIP"), cmd("CLIENT", "REPLY", "SKIP"), cmd("PING"), cmd("PING")}, "+PONG"},
		{[][]byte{cmd("CLIENT", "REPLY", "OFF"), cmd("CLIENT", "REPLY", "SKIP"), cmd("CLIENT", "REPLY", "ON"), cmd("PING")}, "+OK"},
		{nil, "+PONG"},
		{[][]byte{cmd("CLIENT", "REPLY", "MAYBE")}, "-ERR syntax error"},
		{[][]byte{cmd("CLIENT", "REPLY", "OFF"), cmd("SET", "n", "0")}, ""},
	}
	for name, s := range servers {
		c := dialRaw(t, s.Addr)
		for i, st := range steps {
			for _, b := range st.send {
				c.send(b)
			}
			if st.want == "" {
				continue
			}
			if v := c.read(); v.String() != st.want {
				t.Fatalf("%s step %d: %s, want %s", name, i, v, st.want)
			}
		}
		// A pipeline with replies off: only the last reply, once on.
		var b []byte
		for i := 0; i < 100; i++ {
			b = append(b, cmd("INCR", "n")...)
		}
		b = append(b, cmd("CLIENT", "REPLY", "ON")...)
		b = append(b, cmd("GET", "n")...)
		c.send(b)
		if v := c.read(); v.String() != "+OK" {
			t.Fatalf("%s: %s after a pipeline with replies off", name, v)
		}
		if v := c.read(); v.String() != `"100"` {
			t.Fatalf("%s: GET n: %s", name, v)
		}
	}
}
