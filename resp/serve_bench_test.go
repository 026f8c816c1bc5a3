package resp

import (
	"io"
	"strconv"
	"syscall"
	"testing"
)

// BenchmarkServe measures the wire layer's own share of a request over
// loopback, with a handler that does almost nothing (ECHO of 10 bytes):
// the read, the parse, the call, the reply's write, on a connection's
// goroutine and on an event loop, one request at a time and 16 pipelined.
// cpu-ns/op is the process's CPU (client and server) per request, steadier
// than the time on a shared machine; allocs/op are the server's, as the
// client allocates nothing.
func BenchmarkServe(b *testing.B) {
	for _, mode := range []struct {
		name  string
		loops bool
	}{{"goroutine", false}, {"loop", true}} {
		for _, pipeline := range []int{1, 16} {
			b.Run(mode.name+"/P"+strconv.Itoa(pipeline), func(b *testing.B) {
				ts := startServer(b, &testHandler{}, mode.loops)
				c := ts.dial(b)
				c.do("PING")
				var req []byte
				for range pipeline {
					req = AppendCommand(req, []byte("ECHO"), []byte("0123456789"))
				}
				reply := make([]byte, len("$10\r\n0123456789\r\n")*pipeline)
				roundTrip := func() {
					if _, err := c.c.Write(req); err != nil {
						b.Fatal(err)
					}
					if _, err := io.ReadFull(c.c, reply); err != nil {
						b.Fatal(err)
					}
				}
				roundTrip()
				b.ReportAllocs()
				b.ResetTimer()
				cpu := processCPU()
				for i := 0; i < b.N; i += pipeline {
					roundTrip()
				}
				b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// processCPU is the CPU time the process has used, in ns.
func processCPU() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
