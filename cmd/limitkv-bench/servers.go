package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/limitkv/limitkv/internal/testserver"
	"github.com/limitkv/limitkv/resp"
)

// The servers run as child processes on free loopback ports, each in its
// own directory, in their own process group so that a Ctrl-C reaches the
// benchmark only: it then stops them itself, by pid (testserver.StopAll).

const (
	kindLimitkv = testserver.Limitkv
	kindRedis   = testserver.Redis
)

type server = testserver.Server

// findRedis resolves redis-server and returns its version line.
func findRedis(flagValue string) (string, string, error) {
	return findTool("redis-server", flagValue, "-redis-bin")
}

// findTool resolves a Redis tool, the one a flag names or else the one in
// PATH, and returns its version line.
func findTool(name, flagValue, flagName string) (string, string, error) {
	bin, err := testserver.Find(name, flagValue)
	if err != nil {
		return "", "", fmt.Errorf("%v, or pass %s", err, flagName)
	}
	version, err := testserver.Version(bin)
	if err != nil {
		return "", "", err
	}
	return bin, version, nil
}

// startLimitkv starts limitkv in dir; persistence decides whether it keeps
// snapshots there (with only forced snapshots) or is memory-only.
func startLimitkv(bin, dir string, persistence bool) (*server, error) {
	args := []string{"--loglevel", "warning"}
	if persistence {
		args = append(args, "--persistence", "yes", "--snapshot-interval", "1h")
	} else {
		args = append(args, "--persistence", "no")
	}
	return startServer(kindLimitkv, bin, dir, func(port int) []string {
		return testserver.LimitkvArgs(port, filepath.Join(dir, "data"), append([]string{"--bind", "127.0.0.1"}, args...)...)
	})
}

// startRedis starts redis-server as a memory-only server, as limitkv runs
// for the throughput runs: no RDB saves, no AOF.
func startRedis(bin, dir string) (*server, error) {
	return startServer(kindRedis, bin, dir, func(port int) []string {
		return testserver.RedisArgs(port, dir)
	})
}

// startServer starts a server of the kind in dir (its working directory,
// where its output goes to <kind>.log) with the arguments args gives for
// its port.
func startServer(kind, bin, dir string, args func(port int) []string) (*server, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	port, err := testserver.FreePort()
	if err != nil {
		return nil, err
	}
	return testserver.Start(testserver.Spec{
		Kind: kind, Bin: bin, Args: args(port), Addr: testserver.Addr(port), Dir: dir,
		WorkDir: dir, LogFile: filepath.Join(dir, kind+".log"), OwnGroup: true,
		Within: 20 * time.Second, StopWithin: 15 * time.Second,
	})
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
