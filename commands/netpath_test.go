package commands

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/limitkv/limitkv/resp"
	"github.com/limitkv/limitkv/tlsconf/tlstest"
)

// The full request path over loopback: a client writes requests, one at a
// time or pipelined 16 deep, and reads the replies; the server reads,
// parses, dispatches, executes and writes. The client allocates nothing,
// so the allocations reported are the server's.

var netPathCases = []struct {
	name  string
	setup [][]string
	args  []string
}{
	{"GET", [][]string{{"SET", "k", "some value"}}, []string{"GET", "k"}},
	{"SET", nil, []string{"SET", "k", "some value"}},
	{"INCR", nil, []string{"INCR", "counter"}},
	{"RL.SLIDE", nil, []string{"RL.SLIDE", "rl:user:42", "100", "60s"}},
	{"RL.FIXED", nil, []string{"RL.FIXED", "rl:user:43", "100", "60s"}},
}

// netClient is a client that allocates nothing per request.
type netClient struct {
	c   net.Conn
	r   *bufio.Reader
	req []byte
	n   int // requests in req
}

func newNetClient(t testing.TB, h *harness, args []string, pipeline int) *netClient {
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	return newNetClientOn(t, c, args, pipeline)
}

func newNetClientOn(t testing.TB, c net.Conn, args []string, pipeline int) *netClient {
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Minute))
	var bs [][]byte
	for _, a := range args {
		bs = append(bs, []byte(a))
	}
	one := resp.AppendCommand(nil, bs...)
	return &netClient{c: c, r: bufio.NewReaderSize(c, 64<<10), req: bytes.Repeat(one, pipeline), n: pipeline}
}

// roundTrip sends the requests and reads their replies.
func (nc *netClient) roundTrip(t testing.TB) {
	if _, err := nc.c.Write(nc.req); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < nc.n; i++ {
		if err := skipReply(nc.r); err != nil {
			t.Fatal(err)
		}
	}
}

// skipReply reads one reply without allocating.
func skipReply(r *bufio.Reader) error {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return err
	}
	switch line[0] {
	case '$':
		n, _ := strconv.Atoi(string(line[1 : len(line)-2]))
		if n >= 0 {
			_, err = r.Discard(n + 2)
		}
	case '*':
		n, _ := strconv.Atoi(string(line[1 : len(line)-2]))
		for i := 0; i < n && err == nil; i++ {
			err = skipReply(r)
		}
	case '-':
		return errorReply(string(line))
	}
	return err
}

type errorReply string

func (e errorReply) Error() string { return string(e) }

func BenchmarkNetPath(b *testing.B) {
	for _, tc := range netPathCases {
		for _, pipeline := range []int{1, 16} {
			b.Run(tc.name+"/P"+strconv.Itoa(pipeline), func(b *testing.B) {
				h := newHarness(b)
				for _, s := range tc.setup {
					h.do(s...)
				}
				nc := newNetClient(b, h, tc.args, pipeline)
				nc.roundTrip(b)
				b.ReportAllocs()
				b.ResetTimer()
				cpu := processCPU()
				for i := 0; i < b.N; i += pipeline {
					nc.roundTrip(b)
				}
				b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// processCPU is the CPU time the process (client and server) used, in ns:
// on a shared machine a steadier figure than the time a round trip takes.
func processCPU() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkNetPathTLS is BenchmarkNetPath over TLS 1.3 (an ECDSA P-256
// certificate, Go's choice of suite): the difference is what TLS costs the
// client and the server together, per request.
func BenchmarkNetPathTLS(b *testing.B) {
	ca := tlstest.NewCA(b, "CA")
	cert := ca.Server(b, "server")
	for _, tc := range netPathCases {
		for _, pipeline := range []int{1, 16} {
			b.Run(tc.name+"/P"+strconv.Itoa(pipeline), func(b *testing.B) {
				h := newHarness(b)
				for _, s := range tc.setup {
					h.do(s...)
				}
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				serverCfg := &tls.Config{Certificates: []tls.Certificate{cert.TLS}}
				go h.srv.Net.ServeTLS(ln, func() *tls.Config { return serverCfg })
				c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
				if err != nil {
					b.Fatal(err)
				}
				nc := newNetClientOn(b, c, tc.args, pipeline)
				nc.roundTrip(b)
				b.ReportAllocs()
				b.ResetTimer()
				cpu := processCPU()
				for i := 0; i < b.N; i += pipeline {
					nc.roundTrip(b)
				}
				b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// TestNetPathNoAllocs: once a connection is warm, serving GET, INCR and
// RL.SLIDE from socket to reply allocates nothing, alone or pipelined.
func TestNetPathNoAllocs(t *testing.T) {
	for _, tc := range netPathCases {
		for _, pipeline := range []int{1, 16} {
			h := newHarness(t)
			for _, s := range tc.setup {
				h.do(s...)
			}
			nc := newNetClient(t, h, tc.args, pipeline)
			for i := 0; i < 10; i++ {
				nc.roundTrip(t)
			}
			if a := testing.AllocsPerRun(200, func() { nc.roundTrip(t) }); a != 0 {
				t.Errorf("%s pipelined %d: %.2f allocations per round trip", tc.name, pipeline, a)
			}
		}
	}
}
