package commands

import (
	"io"
	"log/slog"
	"strconv"
	"testing"

	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/resp"
)

// onlineDays are user 42's online days over ten years, one bit a day:
// 40 draws of splitmix64 seeded 0, modulo 3650, plus the first and the last
// day. tests/testdata/diff/bitmaps.txt sets the same days.
var onlineDays = []int{0, 129, 313, 441, 492, 630, 740, 994, 1090, 1176, 1403, 1517, 1567, 1614,
	1631, 1749, 1831, 1850, 1915, 2018, 2051, 2057, 2097, 2128, 2187, 2188, 2434, 2551, 2591, 2690,
	2702, 2809, 2865, 3060, 3125, 3183, 3291, 3335, 3342, 3489, 3529, 3649}

// inProcess runs requests through the server's real request path (command
// lookup, arity check, shard locking, handler, reply writer) without a
// network in between.
type inProcess struct {
	srv *Server
	cl  *Client
	w   *resp.Writer
}

func newInProcess() *inProcess {
	eng := engine.New(engine.Config{Databases: 16})
	srv := New(eng, NewConfig(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	return &inProcess{srv: srv, cl: &Client{authed: true}, w: resp.NewWriter(2)}
}

// do executes one request and returns its reply, valid until the next.
func (p *inProcess) do(args ...[]byte) []byte {
	p.w.Reset()
	p.srv.execute(p.cl, p.w, args, p.srv.Eng.Now())
	return p.w.Bytes()
}

func words(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i, w := range s {
		out[i] = []byte(w)
	}
	return out
}

// BenchmarkBitCountVsGet compares BITCOUNT with GET on the same 457-byte
// bitmap (ten years of days): counting the bits a word at a time must cost
// no more than copying the value into the reply.
func BenchmarkBitCountVsGet(b *testing.B) {
	p := newInProcess()
	for _, d := range onlineDays {
		p.do(words("SETBIT", "user:42", strconv.Itoa(d), "1")...)
	}
	if r := string(p.do(words("STRLEN", "user:42")...)); r != ":457\r\n" {
		b.Fatalf("STRLEN: %q", r)
	}
	for _, bc := range []struct {
		name, want string
		args       [][]byte
	}{
		{"GET", "$457\r\n", words("GET", "user:42")},
		{"BITCOUNT", ":42\r\n", words("BITCOUNT", "user:42")},
		{"BITCOUNT-year-BIT", ":6\r\n", words("BITCOUNT", "user:42", "3285", "3649", "BIT")},
		{"BITPOS-last-bytes", ":3529\r\n", words("BITPOS", "user:42", "1", "441")},
	} {
		if r := string(p.do(bc.args...)); len(r) < len(bc.want) || r[:len(bc.want)] != bc.want {
			b.Fatalf("%s: %q", bc.name, r)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p.do(bc.args...)
			}
		})
	}
}

// BenchmarkBitCountVsGetLoopback compares the two over a real connection,
// where the reply is written to the socket and read back: the whole cost a
// client sees. Requests go in pipelined batches so that the round trip's
// system calls are shared and the per-request work shows.
func BenchmarkBitCountVsGetLoopback(b *testing.B) {
	h := newHarness(b)
	for _, d := range onlineDays {
		h.do("SETBIT", "user:42", strconv.Itoa(d), "1")
	}
	const batch = 64
	for _, bc := range []struct {
		name string
		args [][]byte
	}{
		{"GET", words("GET", "user:42")},
		{"BITCOUNT", words("BITCOUNT", "user:42")},
	} {
		var req []byte
		for range batch {
			req = resp.AppendCommand(req, bc.args...)
		}
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				h.send(req)
				for range batch {
					h.read()
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/request")
		})
	}
}
