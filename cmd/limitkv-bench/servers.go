package main

import (
	"bufio"
	"bytes"
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

	"github.com/limitkv/limitkv/resp"
)

// Both servers run as child processes on free loopback ports, each in its
// own directory, in their own process group so that a Ctrl-C reaches the
// benchmark only: it then stops them itself, by pid.

const (
	kindLimitkv = "limitkv"
	kindRedis   = "redis"
)

type server struct {
	kind string
	addr string
	dir  string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func (s *server) pid() int { return s.cmd.Process.Pid }

// running holds the servers to stop when the benchmark is interrupted.
var running struct {
	sync.Mutex
	set map[*server]bool
}

// reservedPorts are used by other tools on this machine.
var reservedPorts = map[int]bool{7001: true, 7777: true, 7799: true, 7800: true}

func freePort() (int, error) {
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

// buildLimitkv builds ./cmd/limitkv of the module the benchmark runs in.
func buildLimitkv(dir string) (string, error) {
	root, err := moduleRoot()
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

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %v", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("run the benchmark inside the limitkv module (go run ./cmd/limitkv-bench)")
	}
	return filepath.Dir(mod), nil
}

// findRedis resolves redis-server and returns its version line.
func findRedis(flagValue string) (string, string, error) {
	bin := flagValue
	if bin == "" {
		p, err := exec.LookPath("redis-server")
		if err != nil {
			return "", "", errors.New("redis-server not found in PATH: install Redis 7.0 (Debian: apt-get install redis-server) or pass -redis-bin")
		}
		bin = p
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "", "", fmt.Errorf("%s --version: %v", bin, err)
	}
	return bin, strings.TrimSpace(string(out)), nil
}

// startLimitkv starts limitkv in dir; persistence decides whether it keeps
// snapshots there (with only forced snapshots) or is memory-only.
func startLimitkv(bin, dir string, persistence bool) (*server, error) {
	args := []string{"--dir", filepath.Join(dir, "data"), "--loglevel", "warning"}
	if persistence {
		args = append(args, "--persistence", "yes", "--snapshot-interval", "1h")
	} else {
		args = append(args, "--persistence", "no")
	}
	return startServer(kindLimitkv, bin, dir, func(port int) []string {
		return append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port)}, args...)
	})
}

// startRedis starts redis-server as a memory-only server, as limitkv runs
// for the throughput runs: no RDB saves, no AOF.
func startRedis(bin, dir string) (*server, error) {
	return startServer(kindRedis, bin, dir, func(port int) []string {
		return []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port),
			"--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no"}
	})
}

func startServer(kind, bin, dir string, args func(port int) []string) (*server, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, kind+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, args(port)...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %v", bin, err)
	}
	s := &server{kind: kind, addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(s.done)
	}()
	running.Lock()
	if running.set == nil {
		running.set = map[*server]bool{}
	}
	running.set[s] = true
	running.Unlock()
	if err := s.waitPing(20 * time.Second); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

func (s *server) waitPing(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			out, _ := os.ReadFile(s.log)
			return fmt.Errorf("%s exited at start:\n%s", s.kind, out)
		default:
		}
		if c, err := dial(s.addr); err == nil {
			v, err := c.do("PING")
			c.close()
			if err == nil && v.Type == '+' && string(v.Str) == "PONG" {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s at %s does not answer PING", s.kind, s.addr)
}

// stop ends the process by pid: SIGTERM, SIGKILL if it lingers.
func (s *server) stop() {
	running.Lock()
	delete(running.set, s)
	running.Unlock()
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}

// stopAll stops every running server (on Ctrl-C).
func stopAll() {
	running.Lock()
	var all []*server
	for s := range running.set {
		all = append(all, s)
	}
	running.Unlock()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.stop()
		}()
	}
	wg.Wait()
}

// client is a plain connection for setup and checks, off the hot path.
type client struct {
	conn net.Conn
	r    *bufio.Reader
	buf  []byte
}

func dial(addr string) (*client, error) {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	return &client{conn: conn, r: bufio.NewReaderSize(conn, 64<<10)}, nil
}

func (c *client) close() { c.conn.Close() }

// do sends one command and reads its reply; an error reply is returned as
// a value, not as an error.
func (c *client) do(args ...string) (resp.Value, error) {
	c.buf = c.buf[:0]
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	c.buf = resp.AppendCommand(c.buf, bs...)
	c.conn.SetDeadline(time.Now().Add(5 * time.Minute))
	if _, err := c.conn.Write(c.buf); err != nil {
		return resp.Value{}, err
	}
	return resp.ReadValue(c.r)
}

// ok sends a command that must not fail and returns its reply.
func (c *client) ok(args ...string) (resp.Value, error) {
	v, err := c.do(args...)
	if err != nil {
		return v, fmt.Errorf("%s: %v", args[0], err)
	}
	if v.Type == '-' {
		return v, fmt.Errorf("%s: %s", strings.Join(args, " "), v.Str)
	}
	return v, nil
}

// info returns the fields of an INFO section.
func (c *client) info(section string) (map[string]string, error) {
	v, err := c.ok("INFO", section)
	if err != nil {
		return nil, err
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(v.Str), "\r\n") {
		if k, val, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
			fields[k] = val
		}
	}
	return fields, nil
}

func (c *client) infoInt(section, field string) (int64, error) {
	f, err := c.info(section)
	if err != nil {
		return 0, err
	}
	v, ok := f[field]
	if !ok {
		return 0, fmt.Errorf("INFO %s has no %s", section, field)
	}
	return strconv.ParseInt(v, 10, 64)
}

// rssBytes reads a process's resident set size from /proc/<pid>/statm.
func rssBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
	if err != nil {
		return 0, err
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, errors.New("short statm")
	}
	pages, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return 0, err
	}
	return pages * int64(os.Getpagesize()), nil
}

// cpuTicks reads a process's user+system time in clock ticks.
func cpuTicks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name is in parentheses and may hold spaces: count the
	// fields after the last ')'. utime and stime are fields 14 and 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(string(f[11]), 10, 64)
	s, _ := strconv.ParseInt(string(f[12]), 10, 64)
	return u + s
}

// machineTicks reads the whole machine's busy and steal time in clock
// ticks from /proc/stat.
func machineTicks() (busy, steal int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 {
		return 0, 0
	}
	v := func(i int) int64 {
		n, _ := strconv.ParseInt(string(f[i]), 10, 64)
		return n
	}
	return v(1) + v(2) + v(3) + v(6) + v(7), v(8)
}

// loadAvg returns the 1, 5 and 15 minute load averages.
func loadAvg() [3]float64 {
	var out [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return out
	}
	f := strings.Fields(string(b))
	for i := 0; i < 3 && i < len(f); i++ {
		out[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return out
}

// clockTick is USER_HZ, the unit of /proc's CPU times (100 on Linux).
const clockTick = 100
