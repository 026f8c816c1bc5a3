package resp

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/redcon"
)

// memConn is a net.Conn that serves a fixed input in chunks of a given
// size, so the guard sees requests split at every possible place.
type memConn struct {
	in    []byte
	chunk int
	out   bytes.Buffer
}

func (c *memConn) Read(p []byte) (int, error) {
	if len(c.in) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), c.chunk, len(c.in))
	copy(p, c.in[:n])
	c.in = c.in[n:]
	return n, nil
}
func (c *memConn) Write(p []byte) (int, error)        { return c.out.Write(p) }
func (c *memConn) Close() error                       { return nil }
func (c *memConn) LocalAddr() net.Addr                { return &net.TCPAddr{} }
func (c *memConn) RemoteAddr() net.Addr               { return &net.TCPAddr{} }
func (c *memConn) SetDeadline(t time.Time) error      { return nil }
func (c *memConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(t time.Time) error { return nil }

// readAll runs input through the guard and redcon's reader and returns the
// commands redcon parsed and the error that ended the stream.
func readAll(t testing.TB, input []byte, chunk int, lim *Limits) ([][][]byte, error, string) {
	srv := &Server{Limits: lim}
	mc := &memConn{in: input, chunk: max(chunk, 1)}
	g := newGuard(mc, srv)
	rd := redcon.NewReader(g)
	var cmds [][][]byte
	for {
		cmd, err := rd.ReadCommand()
		if err != nil {
			return cmds, err, mc.out.String()
		}
		var args [][]byte
		for _, a := range cmd.Args {
			args = append(args, append([]byte(nil), a...))
		}
		cmds = append(cmds, args)
	}
}

func TestGuardSplitsAnywhere(t *testing.T) {
	input := "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\nPING\r\n*0\r\nset 'a b' \"c\\x41\"\r\n*1\r\n$4\r\nPING\r\n"
	want := "[SET k hello] [PING] [set a b cA] [PING]"
	for chunk := 1; chunk <= len(input); chunk++ {
		cmds, err, _ := readAll(t, []byte(input), chunk, NewLimits())
		if err != io.EOF {
			t.Fatalf("chunk %d: %v", chunk, err)
		}
		var got []string
		for _, c := range cmds {
			var s []string
			for _, a := range c {
				s = append(s, string(a))
			}
			got = append(got, "["+strings.Join(s, " ")+"]")
		}
		if strings.Join(got, " ") != want {
			t.Fatalf("chunk %d: got %s", chunk, strings.Join(got, " "))
		}
	}
}

func TestGuardLimits(t *testing.T) {
	lim := NewLimits()
	lim.MaxBulkLen.Store(1 << 20)
	lim.QueryBufLimit.Store(2 << 20)
	cases := []struct {
		in, reply string
	}{
		{"*1\r\n$9223372036854775807\r\nabc\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"*1\r\n$1048577\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"*3\r\n$1048576\r\n" + strings.Repeat("x", 1048576) + "\r\n$1048576\r\n" + strings.Repeat("x", 1048576) + "\r\n", ""},
		{"*1\r\n$3\r\nabcXY", ""},
	}
	for _, c := range cases {
		_, err, out := readAll(t, []byte(c.in), 4096, lim)
		if c.reply != out {
			t.Errorf("%.40q: reply %q, want %q (err %v)", c.in, out, c.reply, err)
		}
	}
	// Redis skips the two bytes after a payload whatever they are.
	cmds, _, _ := readAll(t, []byte("*1\r\n$3\r\nabcXY*1\r\n$4\r\nPING\r\n"), 3, lim)
	if len(cmds) != 2 || string(cmds[0][0]) != "abc" || string(cmds[1][0]) != "PING" {
		t.Fatalf("payload CRLF: %q", cmds)
	}
}

// FuzzGuard feeds arbitrary bytes, split into arbitrary chunks, through the
// guard and redcon's reader. Nothing may panic, and the stream may only end
// at EOF or with one of the guard's own protocol errors: redcon never sees
// a malformed request.
func FuzzGuard(f *testing.F) {
	for _, seed := range []string{
		"*1\r\n$9223372036854775807\r\nabc\r\n",
		"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n",
		"PING\r\n", "set \"a\\x41\" 'b'\r\n", "*0\r\n*-1\r\n\r\n",
		"*1\r\n$-1\r\n", "*2\r\n$1\r\na\r\n:1\r\n", "*1\r\n$3\r\nabcXY", "\"unbalanced\r\n",
		"*2147483648\r\n", "*1\r\n$01\r\na\r\n", "*+1\r\n$1\r\na\r\n", "$5\r\nhello\r\n",
	} {
		f.Add([]byte(seed), uint8(1))
		f.Add([]byte(seed), uint8(7))
	}
	f.Fuzz(func(t *testing.T, input []byte, chunk uint8) {
		lim := NewLimits()
		lim.MaxBulkLen.Store(1 << 16)
		lim.QueryBufLimit.Store(1 << 20)
		cmds, err, _ := readAll(t, input, int(chunk), lim)
		var pe *ProtocolError
		if err != io.EOF && !errors.As(err, &pe) {
			t.Fatalf("stream ended with %v (not EOF nor a guard error)", err)
		}
		for _, c := range cmds {
			if len(c) == 0 {
				t.Fatal("empty command reached the handler")
			}
		}
	})
}
