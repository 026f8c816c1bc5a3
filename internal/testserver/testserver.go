// Package testserver runs the servers that limitkv's tests and its
// benchmark talk to: it builds the limitkv binary of this module, starts
// limitkv, redis-server and redis-sentinel as child processes on free
// loopback ports, each with a directory of its own, waits until they answer
// PING, and stops them by pid (SIGTERM, then SIGKILL) or kills them as a
// crash would.
//
// It is for tests/, the client package's tests and cmd/limitkv-bench only:
// no part of the server may import it (tests/imports_test.go checks).
//
// Every function comes in the form the benchmark needs, returning errors;
// the few a test calls directly (StartTest, Port, Require) fail or skip the
// test instead.
package testserver

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// TB is the part of testing.TB the harness uses. It is declared here, not
// imported, so that the benchmark, a command, does not link the testing
// package.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Skip(args ...any)
	Cleanup(func())
}

// Kinds of server, as the benchmark's results name them.
const (
	Limitkv  = "limitkv"
	Redis    = "redis"
	Sentinel = "sentinel"
)

// reservedPorts are listened on by other tools on the machines the
// benchmark runs on; a server given one would fail to start.
var reservedPorts = map[int]bool{7001: true, 7777: true, 7799: true, 7800: true}

// FreePort asks the kernel for a free loopback port.
func FreePort() (int, error) {
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if !reservedPorts[port] {
			return port, nil
		}
	}
	return 0, errors.New("no free port")
}

// Port is FreePort for a test.
func Port(t TB) int {
	t.Helper()
	port, err := FreePort()
	if err != nil {
		t.Fatalf("%v", err)
	}
	return port
}

// Addr is the loopback address of port.
func Addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

var moduleRoot struct {
	once sync.Once
	dir  string
	err  error
}

// ModuleRoot is the directory of this module's go.mod, found by the go
// command from the working directory: a test's package directory, or
// wherever the benchmark was started inside the module.
func ModuleRoot() (string, error) {
	moduleRoot.once.Do(func() {
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			moduleRoot.err = fmt.Errorf("go env GOMOD: %v", err)
			return
		}
		mod := strings.TrimSpace(string(out))
		if mod == "" || mod == os.DevNull {
			moduleRoot.err = errors.New("not inside the limitkv module (run from its directory: go run ./cmd/limitkv-bench)")
			return
		}
		moduleRoot.dir = filepath.Dir(mod)
	})
	return moduleRoot.dir, moduleRoot.err
}

// Build builds ./cmd/limitkv of this module into dir and returns the
// binary's path.
func Build(dir string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "limitkv")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/limitkv")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/limitkv: %v\n%s", err, out)
	}
	return bin, nil
}

// BuildTemp builds limitkv into a new temporary directory, for a test
// package's TestMain: once per test process, before any test runs.
// remove deletes the directory.
func BuildTemp() (bin string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "limitkv-test-")
	if err != nil {
		return "", nil, err
	}
	remove = func() { os.RemoveAll(dir) }
	if bin, err = Build(dir); err != nil {
		remove()
		return "", nil, err
	}
	return bin, remove, nil
}

var track sync.Once

// TrackSources stats every Go source file of the module, and go.mod and
// go.sum. Tests that run the built binary depend on files go test's result
// cache does not see; it does see the files a test stats while it runs
// (not those TestMain reads before m.Run), so a test that starts limitkv
// calls this, and a change anywhere in the server makes its cached result
// stale.
func TrackSources() {
	track.Do(func() {
		root, err := ModuleRoot()
		if err != nil {
			return
		}
		filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if d.IsDir() && path != root && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			if !d.IsDir() && (strings.HasSuffix(path, ".go") || d.Name() == "go.mod" || d.Name() == "go.sum") {
				os.Stat(path)
			}
			return nil
		})
	})
}

// Find resolves a Redis tool (redis-server, redis-sentinel, redis-cli,
// redis-benchmark): path if it is set, else the name from PATH.
func Find(name, path string) (string, error) {
	if path != "" {
		return filepath.Abs(path)
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s not found in PATH (Debian: apt-get install %s)", name, debianPackage(name))
	}
	return p, nil
}

func debianPackage(tool string) string {
	switch tool {
	case "redis-cli", "redis-benchmark":
		return "redis-tools"
	}
	return tool
}

// Version is a tool's --version line.
func Version(bin string) (string, error) {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %v", bin, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Require finds a Redis tool for a test. Locally a test without it skips;
// under CI (CI=true) it fails, so that a CI run cannot pass without the
// tests that need it (.ci/run installs them).
func Require(t TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required in CI (.ci/run installs it) but was not found", name)
		}
		t.Skip(name + " not installed; the tests that need it run in CI")
	}
	return p
}

// Available says whether a test may compare with a Redis tool: when it
// is installed, and always under CI, where Require then fails without it.
func Available(name string) bool {
	if os.Getenv("CI") == "true" {
		return true
	}
	_, err := exec.LookPath(name)
	return err == nil
}

// LimitkvArgs are the flags that put limitkv on port with its data in dir.
func LimitkvArgs(port int, dir string, flags ...string) []string {
	return append([]string{"--port", strconv.Itoa(port), "--dir", dir}, flags...)
}

// RedisArgs run redis-server on loopback port, in the foreground, with dir
// as its directory and no persistence: no RDB saves, no AOF.
func RedisArgs(port int, dir string, extra ...string) []string {
	return append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--daemonize", "no"}, extra...)
}

// SentinelArgs write dir/sentinel.conf for a redis-sentinel on loopback
// port that monitors master (host:port) as mymaster with a quorum of 2,
// with lines added (down-after-milliseconds and the like), and return the
// arguments that start it. Sentinel rewrites the file as it learns.
func SentinelArgs(port int, dir, master string, lines ...string) ([]string, error) {
	host, mport, ok := strings.Cut(master, ":")
	if !ok {
		return nil, fmt.Errorf("master %q is not host:port", master)
	}
	conf := filepath.Join(dir, "sentinel.conf")
	body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndaemonize no\ndir %s\nsentinel monitor mymaster %s %s 2\n%s\n",
		port, dir, host, mport, strings.Join(lines, "\n"))
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		return nil, err
	}
	return []string{conf}, nil
}

// Spec says how to run a server.
type Spec struct {
	Kind string // Limitkv, Redis, Sentinel: names it in errors
	Bin  string
	Args []string
	Addr string // where it answers PING once it is up
	Dir  string // its data directory, kept in Server.Dir for the caller
	// WorkDir is the process's working directory; "" keeps ours.
	WorkDir string
	// LogFile receives its output; "" keeps the output in memory.
	LogFile string
	// TLS, if set, is how to reach Addr: a TLS-only server.
	TLS *tls.Config
	// Up decides from the first line of the reply to PING whether the
	// server is ready; nil waits for PONG.
	Up func(line string) bool
	// Within is how long it may take to answer; 0 means 15 s.
	Within time.Duration
	// StopWithin is how long Stop waits after SIGTERM before it sends
	// SIGKILL; 0 means 10 s.
	StopWithin time.Duration
	// OwnGroup starts it in a process group of its own, killed if we die:
	// a Ctrl-C then reaches only the benchmark, which stops its servers
	// itself, by pid.
	OwnGroup bool
}

// Pong is ready once PING gets PONG.
func Pong(line string) bool { return strings.HasPrefix(line, "+PONG") }

// Answering is ready once the server answers PING at all, even to say
// that it wants a password or is still loading its data.
func Answering(line string) bool {
	return Pong(line) || strings.HasPrefix(line, "-NOAUTH") || strings.HasPrefix(line, "-LOADING")
}

// Server is a running (or exited) server process.
type Server struct {
	Kind    string
	Addr    string
	Dir     string
	Bin     string
	Args    []string
	LogFile string // "" when the output is kept in memory
	Cmd     *exec.Cmd
	// Done is closed when the process has exited.
	Done chan struct{}
	spec Spec
	out  *syncBuffer
}

// running holds the servers started and not yet stopped, for StopAll.
var running struct {
	sync.Mutex
	set map[*Server]bool
}

// Start starts a server and waits until it answers; a server that exits
// or does not answer in time is stopped and reported with its output.
func Start(spec Spec) (*Server, error) {
	s := &Server{Kind: spec.Kind, Addr: spec.Addr, Dir: spec.Dir, Bin: spec.Bin, Args: spec.Args, LogFile: spec.LogFile, spec: spec}
	if s.Kind == "" {
		s.Kind = filepath.Base(spec.Bin)
	}
	if spec.LogFile == "" {
		s.out = &syncBuffer{}
	}
	if err := s.launch(os.O_TRUNC); err != nil {
		return nil, err
	}
	return s, nil
}

// Restart starts a server that has exited (Kill, Stop) again, with the
// same binary, arguments, directory and address, and waits until it
// answers, as an operator restarts a crashed node; its output goes on
// after what the first process wrote.
func (s *Server) Restart() error {
	if !s.Exited() {
		return fmt.Errorf("%s at %s: restarted while still running", s.Kind, s.Addr)
	}
	return s.launch(os.O_APPEND)
}

// launch starts the process of s and waits until it answers; mode says
// whether a log file is truncated or appended to.
func (s *Server) launch(mode int) error {
	spec := s.spec
	cmd := exec.Command(spec.Bin, spec.Args...)
	cmd.Dir = spec.WorkDir
	if spec.LogFile != "" {
		f, err := os.OpenFile(spec.LogFile, os.O_WRONLY|os.O_CREATE|mode, 0o644)
		if err != nil {
			return err
		}
		defer f.Close() // the child has its own descriptor
		cmd.Stdout, cmd.Stderr = f, f
	} else {
		cmd.Stdout, cmd.Stderr = s.out, s.out
	}
	if spec.OwnGroup {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %v", spec.Bin, err)
	}
	s.Cmd = cmd
	done := make(chan struct{})
	s.Done = done
	go func() {
		cmd.Wait()
		close(done)
	}()
	running.Lock()
	if running.set == nil {
		running.set = map[*Server]bool{}
	}
	running.set[s] = true
	running.Unlock()
	if err := s.waitUp(); err != nil {
		s.Stop()
		return err
	}
	return nil
}

// StartTest starts a server for a test, failing it if the server does not
// come up, and stops the server when the test ends.
func StartTest(t TB, spec Spec) *Server {
	t.Helper()
	s, err := Start(spec)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) waitUp() error {
	up := s.spec.Up
	if up == nil {
		up = Pong
	}
	within := s.spec.Within
	if within == 0 {
		// A guard against a server that never comes up, not a bound on
		// start-up time: on a loaded machine loading a large snapshot
		// takes many seconds.
		within = time.Minute
	}
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if s.Exited() {
			return fmt.Errorf("%s exited at start:\n%s", s.Kind, s.Output())
		}
		c, err := net.DialTimeout("tcp", s.Addr, 200*time.Millisecond)
		if err == nil {
			if s.spec.TLS != nil {
				c = tls.Client(c, s.spec.TLS)
			}
			c.SetDeadline(time.Now().Add(2 * time.Second))
			c.Write([]byte("*1\r\n$4\r\nPING\r\n"))
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if up(line) {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s at %s not ready after %v:\n%s", s.Kind, s.Addr, within, s.Output())
}

// Pid is the process's id.
func (s *Server) Pid() int { return s.Cmd.Process.Pid }

// Output is what the process has written to stdout and stderr so far.
func (s *Server) Output() string {
	if s.out != nil {
		return s.out.String()
	}
	b, _ := os.ReadFile(s.LogFile)
	return string(b)
}

// Exited reports whether the process has ended.
func (s *Server) Exited() bool {
	select {
	case <-s.Done:
		return true
	default:
		return false
	}
}

// Stop ends the process by pid: SIGTERM, then SIGKILL if it has not
// exited within Spec.StopWithin. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	running.Lock()
	delete(running.set, s)
	running.Unlock()
	if s.Exited() {
		return
	}
	within := s.spec.StopWithin
	if within == 0 {
		// A graceful stop drains connections (up to 10 s) and takes a
		// final snapshot (up to 10 s): cut shorter, a loaded machine's
		// final snapshot is lost and a restart shows the one before.
		within = 30 * time.Second
	}
	s.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.Done:
	case <-time.After(within):
		s.Cmd.Process.Kill()
		<-s.Done
	}
}

// Kill ends the process with SIGKILL, as a crash would, and waits for it.
func (s *Server) Kill() {
	s.Cmd.Process.Kill()
	<-s.Done
}

// StopAll stops every server started and not yet stopped, at once: the
// benchmark's way out on Ctrl-C.
func StopAll() {
	running.Lock()
	var all []*Server
	for s := range running.set {
		all = append(all, s)
	}
	running.Unlock()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Go(s.Stop)
	}
	wg.Wait()
}

// syncBuffer is a process's output: written by exec's copying goroutine
// while a test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// busOffset is how far above its client port a cluster node listens for
// the cluster bus, in Redis and in limitkv alike.
const busOffset = 10000

// FreeClusterPort asks the kernel for a free loopback port whose cluster
// bus port, port+10000, is free too; the ports in taken, and those whose
// bus port or client port would meet one of them, are passed over, so
// that the nodes of one cluster do not collide with each other.
func FreeClusterPort(taken ...int) (int, error) {
	used := map[int]bool{}
	for _, p := range taken {
		used[p], used[p+busOffset], used[p-busOffset] = true, true, true
	}
	for range 100 {
		port, err := FreePort()
		if err != nil {
			return 0, err
		}
		if port+busOffset > 65535 || used[port] || used[port+busOffset] || reservedPorts[port+busOffset] {
			continue
		}
		ln, err := net.Listen("tcp", Addr(port+busOffset))
		if err != nil {
			continue
		}
		ln.Close()
		return port, nil
	}
	return 0, errors.New("no free port with a free cluster bus port")
}

// ClusterArgs are the flags, the same for limitkv and redis-server, that
// make a node of a cluster with its nodes.conf in its data directory and
// the given node timeout.
func ClusterArgs(nodeTimeout time.Duration) []string {
	return []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10)}
}

// ClusterSpec says how to run the nodes of a cluster.
type ClusterSpec struct {
	// Kinds has one entry per node, Limitkv or Redis, in the order the
	// nodes are returned.
	Kinds []string
	// Limitkv and Redis are the binaries of the two kinds; only those of
	// the kinds named are needed.
	Limitkv, Redis string
	// Dir holds a directory of its own for each node.
	Dir string
	// NodeTimeout is cluster-node-timeout; 0 means 3 s.
	NodeTimeout time.Duration
	// Extra flags for every node.
	Extra []string
}

// startAttempts bounds the starts of one node: a port found free may be
// taken by another process before the node binds it, its bus port above
// all.
const startAttempts = 3

// StartCluster starts one cluster-enabled node of each kind of spec.Kinds,
// each on a port whose bus port is free, in a directory of its own under
// spec.Dir, and waits until each answers PING. The nodes know nothing of
// each other yet: joining them is the caller's (redis-cli --cluster
// create, CLUSTER MEET). On an error the nodes already started are
// stopped.
func StartCluster(spec ClusterSpec) ([]*Server, error) {
	timeout := spec.NodeTimeout
	if timeout == 0 {
		timeout = 3 * time.Second
	}
	var nodes []*Server
	var ports []int
	fail := func(err error) ([]*Server, error) {
		for _, n := range nodes {
			n.Stop()
		}
		return nil, err
	}
	for i, kind := range spec.Kinds {
		var bin string
		switch kind {
		case Limitkv:
			bin = spec.Limitkv
		case Redis:
			bin = spec.Redis
		default:
			return fail(fmt.Errorf("node %d: unknown kind %q", i, kind))
		}
		if bin == "" {
			return fail(fmt.Errorf("node %d: no %s binary", i, kind))
		}
		var err error
		for range startAttempts {
			var port int
			if port, err = FreeClusterPort(ports...); err != nil {
				return fail(err)
			}
			dir := filepath.Join(spec.Dir, fmt.Sprintf("node%d-%s-%d", i, kind, port))
			if err = os.MkdirAll(dir, 0o755); err != nil {
				return fail(err)
			}
			flags := append(ClusterArgs(timeout), spec.Extra...)
			args := LimitkvArgs(port, dir, flags...)
			if kind == Redis {
				args = RedisArgs(port, dir, flags...)
			}
			var s *Server
			s, err = Start(Spec{Kind: kind, Bin: bin, Args: args, Addr: Addr(port), Dir: dir, WorkDir: dir})
			if err == nil {
				nodes = append(nodes, s)
				ports = append(ports, port)
				break
			}
		}
		if err != nil {
			return fail(fmt.Errorf("node %d: %v", i, err))
		}
	}
	return nodes, nil
}

// StartClusterTest is StartCluster for a test: it fails the test if a node
// does not come up, and stops every node, by pid, when the test ends.
func StartClusterTest(t TB, spec ClusterSpec) []*Server {
	t.Helper()
	nodes, err := StartCluster(spec)
	if err != nil {
		t.Fatalf("%v", err)
	}
	for _, n := range nodes {
		t.Cleanup(n.Stop)
	}
	return nodes
}

// Port is the client port the server answers on.
func (s *Server) Port() int {
	_, p, _ := net.SplitHostPort(s.Addr)
	port, _ := strconv.Atoi(p)
	return port
}
