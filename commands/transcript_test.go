package commands

import (
	"bufio"
	"context"
	"flag"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/resp"
)

var update = flag.Bool("update", false, "rewrite transcript replies with what the server answers")

// harness runs a Server in-process on a loopback port with a manual clock.
type harness struct {
	t     testing.TB
	srv   *Server
	clock *engine.ManualClock
	addr  string
	conns map[string]*testConn
	cur   *testConn
}

type testConn struct {
	c net.Conn
	r *bufio.Reader
}

const transcriptEpoch = 1_700_000_000_000

func newHarness(t testing.TB, settings ...string) *harness {
	t.Helper()
	clock := engine.NewManualClock(transcriptEpoch)
	eng := engine.New(engine.Config{Databases: 16, Clock: clock})
	cfg := NewConfig()
	var pairs [][2]string
	for i := 0; i+1 < len(settings); i += 2 {
		pairs = append(pairs, [2]string{settings[i], settings[i+1]})
	}
	if err := cfg.Set(pairs, true); err != nil {
		t.Fatal(err)
	}
	srv := New(eng, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Net.Serve(ln)
	h := &harness{t: t, srv: srv, clock: clock, addr: ln.Addr().String(), conns: map[string]*testConn{}}
	t.Cleanup(func() {
		for _, c := range h.conns {
			c.c.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Net.Shutdown(ctx)
	})
	h.use("main")
	return h
}

// use switches to the named connection, opening it if needed.
func (h *harness) use(name string) {
	if c, ok := h.conns[name]; ok {
		h.cur = c
		return
	}
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		h.t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(time.Minute))
	tc := &testConn{c: c, r: bufio.NewReader(c)}
	h.conns[name] = tc
	h.cur = tc
}

// send writes raw bytes on the current connection.
func (h *harness) send(raw []byte) {
	if _, err := h.cur.c.Write(raw); err != nil {
		h.t.Fatal(err)
	}
}

// read reads one reply from the current connection.
func (h *harness) read() resp.Value {
	v, err := resp.ReadValue(h.cur.r)
	if err != nil {
		h.t.Fatalf("reading reply: %v", err)
	}
	return v
}

// do sends one command and returns its reply.
func (h *harness) do(args ...string) resp.Value {
	var bs [][]byte
	for _, a := range args {
		bs = append(bs, []byte(a))
	}
	h.send(resp.AppendCommand(nil, bs...))
	return h.read()
}

// runTranscript executes a transcript file: "> CMD args" lines followed by
// the expected reply on one line, "@name" to switch connection, "!clock
// +ms" or "!clock =ms" to move the server clock, "#" comments.
func runTranscript(t *testing.T, path string, settings ...string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, settings...)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	var out []string
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		out = append(out, line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "@"):
			h.use(strings.TrimSpace(line[1:]))
		case strings.HasPrefix(line, "!clock "):
			arg := strings.TrimSpace(line[len("!clock "):])
			n, err := strconv.ParseInt(arg[1:], 10, 64)
			if err != nil {
				t.Fatalf("%s:%d: bad clock directive", path, i+1)
			}
			if arg[0] == '+' {
				h.clock.Advance(n)
			} else {
				h.clock.Set(n)
			}
		case strings.HasPrefix(line, "> "):
			args, ok := resp.SplitArgs([]byte(line[2:]))
			if !ok {
				t.Fatalf("%s:%d: unbalanced quotes", path, i+1)
			}
			h.send(resp.AppendCommand(nil, args...))
			got := h.read().String()
			if i+1 >= len(lines) {
				t.Fatalf("%s:%d: command without an expected reply", path, i+1)
			}
			i++
			want := lines[i]
			out = append(out, got)
			if got != want && !*update {
				t.Errorf("%s:%d: %s\n got: %s\nwant: %s", filepath.Base(path), i, line, got, want)
			}
		default:
			t.Fatalf("%s:%d: unexpected line %q", path, i+1, line)
		}
	}
	if *update {
		os.WriteFile(path, []byte(strings.Join(out, "\n")+"\n"), 0o644)
	}
}

func TestTranscripts(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no transcripts")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			var settings []string
			if strings.HasPrefix(filepath.Base(f), "auth") {
				settings = []string{"requirepass", "s3cret"}
			}
			settings = append(settings, "enable-debug-command", "yes")
			runTranscript(t, f, settings...)
		})
	}
}
