// Package tests holds limitkv's black-box tests: they build the real binary,
// start it on a free loopback port with its own data directory, and talk to
// it with go-redis and raw RESP; the differential tests send the same
// commands to a real redis-server and compare the replies.
package tests

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/limitkv/limitkv/resp"
)

var limitkvBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "limitkv-tests-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	limitkvBin = filepath.Join(dir, "limitkv")
	build := exec.Command("go", "build", "-o", limitkvBin, "../cmd/limitkv")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building limitkv:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// trackSources stats every source file of the server. These tests build
// and run the binary, which go test's result cache cannot see; files the
// tests touch it does see (while tests run, not in TestMain), so a change
// anywhere in the server makes a cached result stale.
var trackOnce sync.Once

func trackSources() { trackOnce.Do(statSources) }

func statSources() {
	filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "tests") && path != ".." {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".go") || d.Name() == "go.mod" || d.Name() == "go.sum") {
			os.Stat(path)
		}
		return nil
	})
}

// freePort asks the kernel for a free loopback port.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// server is a process under test: limitkv or redis-server.
type server struct {
	t    testing.TB
	cmd  *exec.Cmd
	addr string
	dir  string
	log  *bytes.Buffer
	args []string
	done chan struct{}
	// tls, if set, is how waitReady reaches addr (a TLS-only server).
	tls *tls.Config
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
	trackSources()
	port := freePort(t)
	args := append([]string{"--port", strconv.Itoa(port), "--dir", dir}, flags...)
	s := &server{t: t, addr: fmt.Sprintf("127.0.0.1:%d", port), dir: dir, args: args}
	s.start(limitkvBin, args)
	return s
}

func (s *server) start(bin string, args []string) {
	s.t.Helper()
	s.log = &bytes.Buffer{}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stdout = s.log
	s.cmd.Stderr = s.log
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.done = make(chan struct{})
	go func() {
		s.cmd.Wait()
		close(s.done)
	}()
	s.t.Cleanup(s.stop)
	s.waitReady()
}

func (s *server) waitReady() {
	s.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			s.t.Fatalf("server exited early:\n%s", s.log.String())
		default:
		}
		c, err := net.DialTimeout("tcp", s.addr, 200*time.Millisecond)
		if err == nil && s.tls != nil {
			c = tls.Client(c, s.tls)
		}
		if err == nil {
			c.SetDeadline(time.Now().Add(2 * time.Second))
			c.Write([]byte("*1\r\n$4\r\nPING\r\n"))
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.HasPrefix(line, "+PONG") || strings.HasPrefix(line, "-NOAUTH") || strings.HasPrefix(line, "-LOADING") {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatalf("server at %s not ready:\n%s", s.addr, s.log.String())
}

// stop ends the process by pid: SIGTERM, then SIGKILL after a while.
func (s *server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}

// kill ends the process with SIGKILL, as a crash would.
func (s *server) kill() {
	s.cmd.Process.Kill()
	<-s.done
}

// exited reports whether the process has ended.
func (s *server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
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

// redisServerPath finds redis-server. Locally its tests skip when it is
// missing; under CI (CI=true) they fail, so that a CI run cannot pass
// without them.
func redisServerPath(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is required in CI (.ci/run installs it) but was not found")
		}
		t.Skip("redis-server not installed; differential tests skipped (they run in CI)")
	}
	return p
}

// startRedis starts a real redis-server on a free loopback port, without
// persistence, and stops it by pid when the test ends.
func startRedis(t testing.TB, extra ...string) *server {
	t.Helper()
	bin := redisServerPath(t)
	port := freePort(t)
	dir := t.TempDir()
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--daemonize", "no"}, extra...)
	s := &server{t: t, addr: fmt.Sprintf("127.0.0.1:%d", port), dir: dir, args: args}
	s.start(bin, args)
	return s
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
