package tests

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"
)

// dialFrom connects to addr from the loopback address from (127.0.0.2 is on
// the loopback interface but not "local" in Redis's sense) and returns the
// first reply line to PING, or "" if the connection closed without one.
func dialFrom(t *testing.T, from, addr string) string {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", from, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte("PING\r\n"))
	line, _ := bufio.NewReader(c).ReadString('\n')
	return strings.TrimRight(line, "\r\n")
}

// TestProtectedMode: without a password, a client that is not on
// 127.0.0.1 or ::1 gets Redis's DENIED text, byte for byte, and is
// dropped; a password or protected-mode no lets it in.
func TestProtectedMode(t *testing.T) {
	kv := startLimitkv(t, "--persistence", "no")
	redis := startRedis(t)
	want := dialFrom(t, "127.0.0.2", redis.Addr)
	if !strings.HasPrefix(want, "-DENIED ") {
		t.Fatalf("redis-server from 127.0.0.2: %q; this machine cannot test protected mode", want)
	}
	if got := dialFrom(t, "127.0.0.2", kv.Addr); got != want {
		t.Fatalf("limitkv from 127.0.0.2:\n got %q\nwant %q", got, want)
	}
	if got := dialFrom(t, "127.0.0.1", kv.Addr); got != "+PONG" {
		t.Fatalf("limitkv from 127.0.0.1: %q", got)
	}
	c := dialRaw(t, kv.Addr)
	info := string(c.do("INFO", "stats").Str)
	if !strings.Contains(info, "rejected_connections:1\r\n") {
		t.Errorf("the refused client is not counted in rejected_connections:\n%s", info)
	}
	if v := c.do("CONFIG", "SET", "requirepass", "pw"); v.String() != "+OK" {
		t.Fatal(v)
	}
	if got := dialFrom(t, "127.0.0.2", kv.Addr); !strings.HasPrefix(got, "-NOAUTH") {
		t.Fatalf("with a password, from 127.0.0.2: %q", got)
	}
	c.do("AUTH", "pw")
	c.do("CONFIG", "SET", "requirepass", "")
	if v := c.do("CONFIG", "SET", "protected-mode", "no"); v.String() != "+OK" {
		t.Fatal(v)
	}
	if got := dialFrom(t, "127.0.0.2", kv.Addr); got != "+PONG" {
		t.Fatalf("protected-mode no, from 127.0.0.2: %q", got)
	}
}
