// Package tests holds limitkv's black-box tests: they build the real binary,
// start it on a free loopback port with its own data directory, and talk to
// it with go-redis and raw RESP; the differential tests send the same
// commands to a real redis-server and compare the replies.
package tests

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/limitkv/limitkv/internal/testserver"
	"github.com/limitkv/limitkv/resp"
)

// limitkvBin is the binary TestMain built for this test process.
var limitkvBin string

func TestMain(m *testing.M) {
	bin, remove, err := testserver.BuildTemp()
	if err != nil {
		fmt.Fprintln(os.Stderr, "building limitkv:", err)
		os.Exit(1)
	}
	limitkvBin = bin
	code := m.Run()
	remove()
	os.Exit(code)
}

// server is a process under test: limitkv, redis-server or redis-sentinel.
type server = testserver.Server

func freePort(t testing.TB) int {
	t.Helper()
	return testserver.Port(t)
}

// startProcess starts bin and waits until it answers PING on addr, even
// to say it wants a password or is still loading; it is stopped when the
// test ends.
func startProcess(t testing.TB, spec testserver.Spec) *server {
	t.Helper()
	spec.Up = testserver.Answering
	return testserver.StartTest(t, spec)
}

// startLimitkv starts the binary on a free port with a fresh data
// directory and extra flags, and waits until it answers PING.
func startLimitkv(t testing.TB, flags ...string) *server {
	t.Helper()
	dir := t.TempDir()
	return startLimitkvIn(t, dir, flags...)
}

func startLimitkvIn(t testing.TB, dir string, flags ...string) *server {
	t.Helper()
	testserver.TrackSources()
	port := freePort(t)
	return startProcess(t, testserver.Spec{Kind: testserver.Limitkv, Bin: limitkvBin, Addr: testserver.Addr(port), Dir: dir,
		Args: testserver.LimitkvArgs(port, dir, flags...)})
}

// runBinary runs limitkv to completion (it is expected to refuse to start)
// and returns its output.
func runBinary(t testing.TB, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(limitkvBin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("limitkv did not stop:\n%s", out.String())
		return "", nil
	}
}

// redisServerPath finds redis-server: locally its tests skip without it,
// under CI they fail.
func redisServerPath(t testing.TB) string {
	t.Helper()
	return testserver.Require(t, "redis-server")
}

// startRedis starts a real redis-server on a free loopback port, without
// persistence, and stops it by pid when the test ends.
func startRedis(t testing.TB, extra ...string) *server {
	t.Helper()
	bin := redisServerPath(t)
	port := freePort(t)
	dir := t.TempDir()
	return startProcess(t, testserver.Spec{Kind: testserver.Redis, Bin: bin, Addr: testserver.Addr(port), Dir: dir,
		Args: testserver.RedisArgs(port, dir, extra...)})
}

// rawConn is a plain RESP connection.
type rawConn struct {
	t testing.TB
	c net.Conn
	r *bufio.Reader
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(2 * time.Minute))
	return &rawConn{t: t, c: c, r: bufio.NewReader(c)}
}

func (rc *rawConn) send(b []byte) {
	rc.t.Helper()
	if _, err := rc.c.Write(b); err != nil {
		rc.t.Fatal(err)
	}
}

func (rc *rawConn) read() resp.Value {
	rc.t.Helper()
	v, err := resp.ReadValue(rc.r)
	if err != nil {
		rc.t.Fatalf("read: %v", err)
	}
	return v
}

func (rc *rawConn) do(args ...string) resp.Value {
	rc.t.Helper()
	var bs [][]byte
	for _, a := range args {
		bs = append(bs, []byte(a))
	}
	rc.send(resp.AppendCommand(nil, bs...))
	return rc.read()
}

// readAll reads until the peer closes the connection.
func (rc *rawConn) readAll() string {
	var b bytes.Buffer
	rc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b.ReadFrom(rc.r)
	return b.String()
}

// replicaLink is a replica's end of a master's link, read raw: the bytes
// the master propagates after its full copy, for tests of what it sends.
type replicaLink struct {
	t      *testing.T
	rc     *rawConn
	stream bytes.Buffer
}

func openReplicaLink(t *testing.T, addr string) *replicaLink {
	t.Helper()
	l := &replicaLink{t: t, rc: dialRaw(t, addr)}
	l.rc.do("REPLCONF", "listening-port", "1")
	l.rc.send(resp.AppendCommand(nil, []byte("PSYNC"), []byte("?"), []byte("-1")))
	// The copy goes shard by shard, writes to the shards already sent
	// interleaved with it: what follows is the stream only past its end.
	l.readUntil("*2\r\n$8\r\nLKV.SYNC\r\n$3\r\nEND\r\n")
	return l
}

// readUntil reads the link until marker has arrived (bounded).
func (l *replicaLink) readUntil(marker string) {
	l.t.Helper()
	buf := make([]byte, 64<<10)
	deadline := time.Now().Add(20 * time.Second)
	for !bytes.Contains(l.stream.Bytes(), []byte(marker)) {
		if time.Now().After(deadline) {
			l.t.Fatalf("%q never reached the replica; got %q", marker, l.stream.String())
		}
		l.rc.c.SetReadDeadline(time.Now().Add(time.Second))
		n, _ := l.rc.r.Read(buf)
		l.stream.Write(buf[:n])
	}
}
