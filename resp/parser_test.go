package resp

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// memConn is a net.Conn that serves a fixed input in chunks of a given
// size, so the parser sees requests split at every possible place.
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

// parseAll runs input through the parser in chunks and returns the
// requests it yielded (copied), and the protocol error that ended the
// stream, if any. Between requests it scribbles over the bytes of the
// request just served, as later input would, so that a request that
// pointed at freed bytes shows.
func parseAll(t testing.TB, input []byte, chunk int, lim *Limits, noAuth bool) ([][][]byte, *ProtocolError) {
	mc := &memConn{in: input, chunk: max(chunk, 1)}
	p := newParser(lim)
	p.noAuth = noAuth
	var reqs [][][]byte
	for {
		args, perr := p.next()
		if perr != nil {
			return reqs, perr
		}
		if args != nil {
			var req [][]byte
			for _, a := range args {
				req = append(req, append([]byte(nil), a...))
			}
			reqs = append(reqs, req)
			for i := p.pos; i < p.scan; i++ {
				p.buf[i] = '#'
			}
			p.done()
			continue
		}
		if _, err := p.readFrom(mc); err != nil {
			if err != io.EOF {
				t.Fatal(err)
			}
			return reqs, nil
		}
	}
}

func render(reqs [][][]byte) string {
	var out []string
	for _, r := range reqs {
		var s []string
		for _, a := range r {
			s = append(s, string(a))
		}
		out = append(out, "["+strings.Join(s, " ")+"]")
	}
	return strings.Join(out, " ")
}

func TestParserSplitsAnywhere(t *testing.T) {
	input := "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\nPING\r\n*0\r\nset 'a b' \"c\\x41\"\r\n*1\r\n$4\r\nPING\r\n\r\n*-1\r\n  \r\nECHO \"\"\r\n"
	want := "[SET k hello] [PING] [set a b cA] [PING] [ECHO ]"
	for chunk := 1; chunk <= len(input); chunk++ {
		reqs, perr := parseAll(t, []byte(input), chunk, NewLimits(), false)
		if perr != nil {
			t.Fatalf("chunk %d: %v", chunk, perr)
		}
		if got := render(reqs); got != want {
			t.Fatalf("chunk %d: got %s", chunk, got)
		}
	}
}

// TestParserLimits covers Redis's protocol errors: every request before
// the bad one is served, then the error.
func TestParserLimits(t *testing.T) {
	lim := NewLimits()
	lim.MaxBulkLen.Store(1 << 20)
	lim.QueryBufLimit.Store(2 << 20)
	big := strings.Repeat("x", 1048576)
	cases := []struct {
		in     string
		noAuth bool
		reqs   string
		err    string // "" none, "-" the query buffer limit
	}{
		{in: "*1\r\n$9223372036854775807\r\nabc\r\n", err: "Protocol error: invalid bulk length"},
		{in: "*1\r\n$1048577\r\n", err: "Protocol error: invalid bulk length"},
		{in: "*3\r\n$1048576\r\n" + big + "\r\n$1048576\r\n" + big + "\r\n", err: "-"},
		{in: "*1\r\n$3\r\nabcXY", reqs: "[abc]"},
		{in: "*1\r\n$-2\r\n", err: "Protocol error: invalid bulk length"},
		{in: "*1\r\n$-1\r\n", err: "Protocol error: invalid bulk length"},
		{in: "*2147483648\r\n", err: "Protocol error: invalid multibulk length"},
		{in: "*9223372036854775807\r\n$3\r\nabc\r\n", err: "Protocol error: invalid multibulk length"},
		{in: "*1\r\n$-9223372036854775808\r\nabc\r\n", err: "Protocol error: invalid bulk length"},
		{in: "*1\r\n$99999999999999999999999\r\nabc\r\n", err: "Protocol error: invalid bulk length"},
		{in: "*1\r\n:1\r\n", err: "Protocol error: expected '$', got ':'"},
		{in: "*abc\r\n", err: "Protocol error: invalid multibulk length"},
		{in: "*+1\r\n$1\r\na\r\n", err: "Protocol error: invalid multibulk length"},
		{in: "*01\r\n$1\r\na\r\n", err: "Protocol error: invalid multibulk length"},
		{in: "*1\r\n$01\r\na\r\n", err: "Protocol error: invalid bulk length"},
		{in: "*1\r\n$abc\r\n", err: "Protocol error: invalid bulk length"},
		{in: "*" + strings.Repeat("1", 70000), err: "Protocol error: too big mbulk count string"},
		{in: "*1\r\n$" + strings.Repeat("1", 70000), err: "Protocol error: too big bulk count string"},
		{in: strings.Repeat("a", 70000), err: "Protocol error: too big inline request"},
		{in: "SET a \"b\r\n", err: "Protocol error: unbalanced quotes in request"},
		{in: "SET a 'b'c\r\n", err: "Protocol error: unbalanced quotes in request"},
		{in: "PING\r\n*1\r\n$x\r\n", reqs: "[PING]", err: "Protocol error: invalid bulk length"},
		{in: "PING\r\n*2\r\n$1\r\na\r\n:1\r\n", reqs: "[PING]", err: "Protocol error: expected '$', got ':'"},
		{in: "*11\r\n", noAuth: true, err: "Protocol error: unauthenticated multibulk length"},
		{in: "*10\r\n", noAuth: true},
		{in: "*1\r\n$16385\r\n", noAuth: true, err: "Protocol error: unauthenticated bulk length"},
		{in: "*1\r\n$16384\r\n" + strings.Repeat("y", 16384) + "\r\n", noAuth: true, reqs: "[" + strings.Repeat("y", 16384) + "]"},
		// A request of many small arguments counts against the limit too.
		{in: "*3000\r\n" + strings.Repeat("$1000\r\n"+strings.Repeat("z", 1000)+"\r\n", 3000), err: "-"},
	}
	for _, c := range cases {
		for _, chunk := range []int{1 << 20, 4096, 7} {
			if chunk == 7 && len(c.in) > 100000 {
				continue
			}
			reqs, perr := parseAll(t, []byte(c.in), chunk, lim, c.noAuth)
			got := ""
			if perr != nil {
				got = perr.Msg
				if got == "" {
					got = "-"
				}
			}
			if got != c.err || render(reqs) != c.reqs {
				t.Errorf("%.40q (chunk %d): requests %.60s, error %q; want %.60s, %q", c.in, chunk, render(reqs), got, c.reqs, c.err)
			}
		}
	}
	// Redis skips the two bytes after a payload whatever they are.
	reqs, _ := parseAll(t, []byte("*1\r\n$3\r\nabcXY*1\r\n$4\r\nPING\r\n"), 3, lim, false)
	if render(reqs) != "[abc] [PING]" {
		t.Fatalf("payload CRLF: %s", render(reqs))
	}
}

// TestParserBigArguments checks that arguments of BigArg bytes or more
// land in allocations of their own, exactly sized, whatever the chunking,
// and that the read buffer goes back to its usual size afterwards.
func TestParserBigArguments(t *testing.T) {
	for _, n := range []int{BigArg - 1, BigArg, 100000, 1 << 20} {
		val := bytes.Repeat([]byte{'v'}, n)
		for i := range val {
			val[i] = byte('a' + i%26)
		}
		in := AppendCommand(nil, []byte("SET"), []byte("key"), val)
		in = append(in, "PING\r\n"...)
		for _, chunk := range []int{1, 1000, 16 * 1024, 1 << 21} {
			if chunk == 1 && n > 100000 {
				continue
			}
			mc := &memConn{in: in, chunk: chunk}
			p := newParser(NewLimits())
			var got [][][]byte
			for len(got) < 2 {
				args, perr := p.next()
				if perr != nil {
					t.Fatal(perr)
				}
				if args == nil {
					if _, err := p.readFrom(mc); err != nil {
						t.Fatalf("n %d chunk %d: %v", n, chunk, err)
					}
					continue
				}
				if len(got) == 0 {
					if !bytes.Equal(args[2], val) {
						t.Fatalf("n %d chunk %d: value differs", n, chunk)
					}
					isBig := len(p.bigs) == 1 && &p.bigs[0].b[p.bigs[0].head] == &args[2][0]
					if isBig != (n >= BigArg) {
						t.Fatalf("n %d: in its own allocation: %v", n, isBig)
					}
					if isBig && len(p.bigs[0].b) != p.bigs[0].head+n+2 {
						t.Fatalf("n %d: allocation of %d bytes", n, len(p.bigs[0].b))
					}
					if isBig && len(p.buf) > initialReadBuf {
						t.Fatalf("n %d chunk %d: read buffer grew to %d", n, chunk, len(p.buf))
					}
				}
				var req [][]byte
				for _, a := range args {
					req = append(req, append([]byte(nil), a...))
				}
				got = append(got, req)
				p.done()
			}
			if string(got[1][0]) != "PING" {
				t.Fatalf("n %d chunk %d: second request %q", n, chunk, got[1])
			}
		}
	}
}

// TestParserBufferShrinks checks that a request that needed a big read
// buffer does not leave it behind.
func TestParserBufferShrinks(t *testing.T) {
	var args [][]byte
	for i := 0; i < 2000; i++ {
		args = append(args, bytes.Repeat([]byte{'a'}, 100))
	}
	in := AppendCommand(nil, args...)
	in = append(in, AppendCommand(nil, []byte("PING"))...)
	mc := &memConn{in: in, chunk: 4096}
	p := newParser(NewLimits())
	grown := 0
	for served := 0; served < 2; {
		a, perr := p.next()
		if perr != nil {
			t.Fatal(perr)
		}
		if a == nil {
			p.readFrom(mc)
			grown = max(grown, len(p.buf))
			continue
		}
		served++
		p.done()
	}
	p.readFrom(mc)
	if grown <= initialReadBuf || len(p.buf) != initialReadBuf || cap(p.argv) > keepArgs {
		t.Fatalf("read buffer grew to %d and is now %d; args slice cap %d", grown, len(p.buf), cap(p.argv))
	}
}

// TestParserNoAllocs checks that parsing pipelined requests allocates
// nothing once the connection's buffers exist.
func TestParserNoAllocs(t *testing.T) {
	var in []byte
	for i := 0; i < 16; i++ {
		in = AppendCommand(in, []byte("GET"), []byte("key:000042"))
		in = append(in, "INCR counter\r\n"...)
	}
	p := newParser(NewLimits())
	mc := &memConn{}
	allocs := testing.AllocsPerRun(200, func() {
		mc.in, mc.chunk = in, len(in)
		for {
			args, perr := p.next()
			if perr != nil {
				t.Fatal(perr)
			}
			if args == nil {
				if _, err := p.readFrom(mc); err == io.EOF {
					return
				}
				continue
			}
			p.done()
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per pipeline of 32 requests", allocs)
	}
}

func TestSplitArgs(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string
		ok   bool
	}{
		{`set "a b" 'c d'`, "[set] [a b] [c d]", true},
		{`"\x41\n\r\t\b\a\q"`, "[A\n\r\t\b\a" + "q]", true},
		{`'it\'s' ""`, "[it's] []", true},
		{"a\x00b c", "[a]", true},
		{`"a"b`, "", false},
		{`'a`, "", false},
		{"  ", "", true},
	} {
		line := []byte(c.in)
		args, ok := SplitArgs(line)
		var s []string
		for _, a := range args {
			s = append(s, "["+string(a)+"]")
		}
		if ok != c.ok || strings.Join(s, " ") != c.want || string(line) != c.in {
			t.Errorf("%q: %q %v (line now %q)", c.in, s, ok, line)
		}
	}
}

// TestSplitArgsComment: a '#' that begins an argument outside quotes
// ends the line; anywhere else it is data. What ends an argument is
// SplitArgs's rule: a tab does, a vertical tab does not.
func TestSplitArgsComment(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string
		ok   bool
	}{
		{`a b # c d`, "[a] [b]", true},
		{`a b#c`, "[a] [b#c]", true},
		{`a '#' "#" # x`, "[a] [#] [#]", true},
		{`"a #b" c`, "[a #b] [c]", true},
		{`"a\"#" #c`, `[a"#]`, true},
		{`'it\'s' #x`, "[it's]", true},
		{"a\t#c", "[a]", true},
		{"a \v#c", "[a]", true},
		{"a\v#c", "[a\v#c]", true},
		{`# all of it`, "", true},
		{`#`, "", true},
		{`a # 'a quote in a comment is not one`, "[a]", true},
		{`"a"#`, "", false},
		{`'a #`, "", false},
	} {
		args, ok := SplitArgsComment([]byte(c.in))
		var s []string
		for _, a := range args {
			s = append(s, "["+string(a)+"]")
		}
		if ok != c.ok || strings.Join(s, " ") != c.want {
			t.Errorf("%q: %q %v, want %s %v", c.in, s, ok, c.want, c.ok)
		}
	}
}

// FuzzParser feeds arbitrary bytes, split into arbitrary chunks, through
// the parser. Nothing may panic, allocate without bound or yield an empty
// request, and the stream ends at EOF or with one of Redis's errors.
func FuzzParser(f *testing.F) {
	for _, seed := range []string{
		"*1\r\n$-2\r\n", "*1\r\n$9223372036854775807\r\nabc\r\n",
		"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n",
		"PING\r\n", "set \"a\\x41\" 'b'\r\n", "*0\r\n*-1\r\n\r\n", "*-5\r\n",
		"*1\r\n$-1\r\n", "*2\r\n$1\r\na\r\n:1\r\n", "*1\r\n$3\r\nabcXY", "\"unbalanced\r\n",
		"*2147483648\r\n", "*2147483647\r\n", "*1\r\n$01\r\na\r\n", "*+1\r\n$1\r\na\r\n", "$5\r\nhello\r\n",
		"*1\r\n$32768\r\n", "*1\r\n$65536\r\nxy", "*99999999999999999999\r\n", "a 'b\\'c' \"\\xZZ\"\r\n",
		"*1\r\n$0\r\n\r\n", "\x00\r\n", "*1\r$1\ra\r",
	} {
		f.Add([]byte(seed), uint8(1))
		f.Add([]byte(seed), uint8(7))
	}
	f.Fuzz(func(t *testing.T, input []byte, chunk uint8) {
		lim := NewLimits()
		lim.MaxBulkLen.Store(1 << 17)
		lim.QueryBufLimit.Store(1 << 18)
		mc := &memConn{in: input, chunk: max(int(chunk), 1)}
		p := newParser(lim)
		for {
			args, perr := p.next()
			if perr != nil {
				if perr.Msg != "" && !strings.HasPrefix(perr.Msg, "Protocol error: ") {
					t.Fatalf("error %q", perr.Msg)
				}
				return
			}
			if args != nil {
				if len(args) == 0 {
					t.Fatal("empty request")
				}
				p.done()
				continue
			}
			if len(p.buf) > 4<<20 {
				t.Fatalf("read buffer of %d bytes for %d bytes of input", len(p.buf), len(input))
			}
			if _, err := p.readFrom(mc); err != nil {
				return
			}
		}
	})
}
