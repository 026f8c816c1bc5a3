package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestEncoderWritesTheTemplate(t *testing.T) {
	e := newEncoder(3, 50, 1)
	o := op{
		cmd("SETBIT", keyArg("online:"), dayArg(), lit("1")),
		cmd("BITCOUNT", keyArg("online:")),
	}
	got := string(e.appendOp(nil, o, 42))
	// The day is random: check the frame around it, and that it is a day.
	prefix := "*4\r\n$6\r\nSETBIT\r\n$9\r\nonline:42\r\n$"
	if !strings.HasPrefix(got, prefix) {
		t.Fatalf("request %q does not start with %q", got, prefix)
	}
	rest := strings.TrimPrefix(got, prefix)
	_, rest, _ = strings.Cut(rest, "\r\n")
	day, rest, _ := strings.Cut(rest, "\r\n")
	if d, err := strconv.Atoi(day); err != nil || d < 0 || d >= 3650 {
		t.Fatalf("day %q is not in [0,3650)", day)
	}
	if want := "$1\r\n1\r\n*2\r\n$8\r\nBITCOUNT\r\n$9\r\nonline:42\r\n"; rest != want {
		t.Fatalf("rest of the request %q, want %q", rest, want)
	}

	// Request ids: connection 3 of 50 numbers its requests 3, 53, 103...
	s := newEncoder(3, 50, 1)
	slide := op{evalsha("slide", "slide:", lit("100"), lit("60000"), nonceArg())}
	ids := map[string]bool{}
	for i := range 3 {
		req := string(s.appendOp(nil, slide, 7))
		want := strconv.FormatUint(uint64(i*50+3), 36)
		if !strings.HasSuffix(req, "$"+strconv.Itoa(len(want))+"\r\n"+want+"\r\n") {
			t.Fatalf("request %d %q does not end with id %q", i, req, want)
		}
		ids[want] = true
	}
	if len(ids) != 3 {
		t.Fatal("request ids repeat")
	}

	// The stream shape: one key, the user number as the value.
	xadd := op{cmd("XADD", lit("stream"), lit("*"), lit("f"), numArg())}
	if got, want := string(s.appendOp(nil, xadd, 1234)), "*5\r\n$4\r\nXADD\r\n$6\r\nstream\r\n$1\r\n*\r\n$1\r\nf\r\n$4\r\n1234\r\n"; got != want {
		t.Fatalf("XADD request %q, want %q", got, want)
	}
	if got := describe(xadd); got != "XADD stream * f <n>" {
		t.Fatalf("described as %q", got)
	}
}

func TestEncoderDoesNotAllocate(t *testing.T) {
	e := newEncoder(0, 1, 1)
	w := workloads()
	buf := make([]byte, 0, 1<<16)
	allocs := testing.AllocsPerRun(1000, func() {
		buf = buf[:0]
		for _, x := range w {
			buf = e.appendOp(buf, x.limitkv, e.rng.IntN(100_000))
			buf = e.appendOp(buf, x.redis, e.rng.IntN(100_000))
		}
	})
	if allocs != 0 {
		t.Fatalf("encoding allocates %.1f times per round of workloads", allocs)
	}
}

// fakeServer answers every command with ":1", ":0" or an error, chosen by
// the user number at the end of the command's second argument, and counts
// the commands it saw. It serves over memory (pipeNet), and takes
// fakeService of the bubble's fake clock to answer what it has read, so
// that a closed loop moves the clock on.
type fakeServer struct {
	pipeNet
	commands atomic.Int64
}

const fakeService = 100 * time.Microsecond

func startFake(t *testing.T) *fakeServer {
	f := &fakeServer{}
	f.pipeNet.serve = f.serve
	t.Cleanup(f.wg.Wait)
	return f
}

func (f *fakeServer) serve(c net.Conn) {
	r := bufio.NewReader(c)
	w := bufio.NewWriter(c)
	for {
		if r.Buffered() == 0 && w.Buffered() > 0 {
			time.Sleep(fakeService)
			if err := w.Flush(); err != nil {
				return
			}
		}
		args, err := readCommand(r)
		if err != nil {
			return
		}
		f.commands.Add(1)
		user, _ := strconv.Atoi(strings.TrimLeft(args[1], "abcdefghijklmnopqrstuvwxyz:"))
		switch {
		case user%10 == 7:
			w.WriteString("-ERR seven\r\n")
		case user%2 == 0:
			w.WriteString(":1\r\n")
		default:
			w.WriteString("*2\r\n:0\r\n$2\r\nno\r\n")
		}
	}
}

func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
	args := make([]string, n)
	for i := range args {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		size, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		args[i] = string(buf[:size])
	}
	return args, nil
}

// The generator must count what it measured, flag the errors it got and
// split decisions by the allow flag, whether it comes as an integer or
// leads an array.
func TestRunLoadCounts(t *testing.T) {
	synctest.Test(t, testRunLoadCounts)
}

func testRunLoadCounts(t *testing.T) {
	f := startFake(t)
	spec := loadSpec{
		dial: f.dial, pid: 0, conns: 4, depth: 8,
		plans:   []plan{{name: "x", op: op{cmd("RL.X", keyArg("user:"), lit("1"))}, users: 1000, decision: true}},
		warmup:  50 * time.Millisecond,
		measure: sleepFor(300 * time.Millisecond),
		seed:    1,
	}
	res, err := runLoad(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	p := res.plans[0]
	if p.ops == 0 || p.ops%8 != 0 {
		t.Fatalf("ops = %d, want a positive multiple of the depth", p.ops)
	}
	if p.hist.n != uint64(p.ops/8) {
		t.Errorf("%d latencies for %d batches: latency is per batch", p.hist.n, p.ops/8)
	}
	if int64(f.commands.Load()) < p.ops {
		t.Errorf("server saw %d commands, generator counted %d completed", f.commands.Load(), p.ops)
	}
	// Users ending in 7 (a tenth) get errors; of the rest, even users are
	// allowed (5/9) and odd ones denied (4/9).
	decided := p.allowed + p.denied
	if p.errors == 0 || p.firstErr != "-ERR seven" {
		t.Errorf("errors = %d, first %q: error replies not flagged", p.errors, p.firstErr)
	}
	if frac := float64(p.errors) / float64(p.errors+decided); frac < 0.07 || frac > 0.13 {
		t.Errorf("error share %.3f, want about 0.1 (errors are counted over warmup too, so allow slack)", frac)
	}
	if frac := float64(p.allowed) / float64(decided); frac < 0.5 || frac > 0.61 {
		t.Errorf("allowed share %.3f, want about 5/9", frac)
	}
	// On the fake clock the window is what was asked.
	if res.window != 300*time.Millisecond {
		t.Errorf("window %v, want 300ms", res.window)
	}
}

// A server that dies mid-run is an error, not a short result.
func TestRunLoadServerGone(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				buf := make([]byte, 4096)
				c.Read(buf)
				c.Close() // answers nothing, hangs up
			}()
		}
	}()
	defer ln.Close()
	spec := loadSpec{
		addr: ln.Addr().String(), conns: 2, depth: 1,
		plans:   []plan{{name: "x", op: op{cmd("GET", keyArg("k"))}, users: 10}},
		warmup:  10 * time.Millisecond,
		measure: sleepFor(100 * time.Millisecond),
	}
	if _, err := runLoad(context.Background(), spec); err == nil {
		t.Fatal("runLoad against a server that hangs up returned no error")
	}
}
