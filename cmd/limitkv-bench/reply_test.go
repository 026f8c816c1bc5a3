package main

import (
	"errors"
	"strings"
	"testing"
)

func TestSkipReplyWhole(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		errs    int
		flag    int64
		hasFlag bool
	}{
		{"simple", "+OK\r\n", 0, 0, false},
		{"error", "-ERR unknown command 'evalsha'\r\n", 1, 0, false},
		{"integer", ":1\r\n", 0, 1, true},
		{"negative integer", ":-1\r\n", 0, -1, true},
		{"bulk", "$5\r\nhello\r\n", 0, 0, false},
		{"bulk holding CRLF", "$4\r\n\r\n\r\n\r\n", 0, 0, false},
		{"empty bulk", "$0\r\n\r\n", 0, 0, false},
		{"null bulk", "$-1\r\n", 0, 0, false},
		{"null array", "*-1\r\n", 0, 0, false},
		{"empty array", "*0\r\n", 0, 0, false},
		{"RL decision allowed", "*5\r\n:1\r\n:100\r\n:99\r\n:-1\r\n:60000\r\n", 0, 1, true},
		{"RL decision denied", "*5\r\n:0\r\n:100\r\n:0\r\n:1234\r\n:60000\r\n", 0, 0, true},
		{"array led by a bulk", "*2\r\n$1\r\n1\r\n:7\r\n", 0, 0, false},
		{"nested", "*2\r\n*2\r\n:5\r\n$1\r\na\r\n*1\r\n-ERR x\r\n", 1, 0, false},
		{"errors inside an array", "*3\r\n-ERR a\r\n:2\r\n-WRONGTYPE b\r\n", 2, 0, false},
		{"max int64", ":9223372036854775807\r\n", 0, 9223372036854775807, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A following reply must not be consumed.
			buf := []byte(c.in + "+NEXT\r\n")
			n, info, err := skipReply(buf)
			if err != nil {
				t.Fatalf("skipReply(%q): %v", c.in, err)
			}
			if n != len(c.in) {
				t.Fatalf("consumed %d bytes, want %d", n, len(c.in))
			}
			if info.errors != c.errs {
				t.Errorf("errors = %d, want %d", info.errors, c.errs)
			}
			if info.hasFlag != c.hasFlag || info.flag != c.flag {
				t.Errorf("flag = %d (%v), want %d (%v)", info.flag, info.hasFlag, c.flag, c.hasFlag)
			}
			if c.errs > 0 {
				if info.firstErr < 0 || buf[info.firstErr] != '-' {
					t.Errorf("firstErr = %d does not point at an error line", info.firstErr)
				}
			} else if info.firstErr != -1 {
				t.Errorf("firstErr = %d, want -1", info.firstErr)
			}
		})
	}
}

// Every proper prefix of a reply must say "incomplete", never succeed or
// fail: the reader gets replies in arbitrary pieces from the socket.
func TestSkipReplyEveryPrefix(t *testing.T) {
	replies := []string{
		"+OK\r\n",
		":12345\r\n",
		"$32\r\n0123456789abcdef0123456789abcdef\r\n",
		"$-1\r\n",
		"*5\r\n:1\r\n:100\r\n:99\r\n:-1\r\n:60000\r\n",
		"*2\r\n*2\r\n:5\r\n$3\r\nabc\r\n-ERR x\r\n",
	}
	for _, r := range replies {
		for i := 0; i < len(r); i++ {
			_, _, err := skipReply([]byte(r[:i]))
			if !errors.Is(err, errShort) {
				t.Errorf("prefix %q of %q: err = %v, want errShort", r[:i], r, err)
			}
		}
	}
}

func TestSkipReplyStream(t *testing.T) {
	// 16 pipelined decisions as a server sends them, split at every
	// offset into two reads, as the reader would see them.
	one := "*5\r\n:1\r\n:100\r\n:99\r\n:-1\r\n:60000\r\n"
	stream := strings.Repeat(one, 15) + "-ERR max number of clients reached\r\n"
	for split := 0; split <= len(stream); split++ {
		buf := []byte(stream[:split])
		pos, replies, errs, allowed := 0, 0, 0, 0
		for {
			n, info, err := skipReply(buf[pos:])
			if errors.Is(err, errShort) {
				if len(buf) == len(stream) {
					break
				}
				buf = []byte(stream) // the second read arrives
				continue
			}
			if err != nil {
				t.Fatalf("split %d: %v", split, err)
			}
			pos += n
			replies++
			errs += info.errors
			if info.hasFlag && info.flag == 1 {
				allowed++
			}
			if pos == len(stream) {
				break
			}
		}
		if replies != 16 || errs != 1 || allowed != 15 {
			t.Fatalf("split %d: %d replies, %d errors, %d allowed; want 16, 1, 15", split, replies, errs, allowed)
		}
	}
}

func TestSkipReplyMalformed(t *testing.T) {
	bad := []string{
		"+OK\n",              // LF without CR
		":12a\r\n",           // not a number
		":\r\n",              // empty number
		"$-2\r\n",            // negative length
		"$3\r\nabcd\r\n",     // bulk longer than announced
		"*x\r\n",             // bad count
		"%1\r\n:1\r\n:2\r\n", // RESP3 map: the generator never says HELLO 3
		"!3\r\nabc\r\n",
		":99999999999999999999\r\n", // past int64
	}
	for _, b := range bad {
		_, _, err := skipReply([]byte(b))
		if err == nil || errors.Is(err, errShort) {
			t.Errorf("skipReply(%q): err = %v, want a protocol error", b, err)
		}
	}
	deep := strings.Repeat("*1\r\n", maxNesting+2) + ":1\r\n"
	if _, _, err := skipReply([]byte(deep)); err == nil || errors.Is(err, errShort) {
		t.Errorf("reply nested %d deep: err = %v, want an error", maxNesting+2, err)
	}
}

func TestSkipReplyDoesNotAllocate(t *testing.T) {
	buf := []byte("*5\r\n:1\r\n:100\r\n:99\r\n:-1\r\n:60000\r\n$32\r\n0123456789abcdef0123456789abcdef\r\n")
	allocs := testing.AllocsPerRun(1000, func() {
		n, _, _ := skipReply(buf)
		skipReply(buf[n:])
	})
	if allocs != 0 {
		t.Fatalf("skipReply allocates %.1f times per call", allocs)
	}
}
