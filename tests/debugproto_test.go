package tests

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/limitkv/limitkv/resp"
)

// TestDebugProtocol: DEBUG PROTOCOL's sample of each RESP type is, byte
// for byte, redis-server's, in RESP2 and RESP3: clients test their
// parsers (attributes and pushes among them) against it. DEBUG ERROR and
// DEBUG LOG, which clients' tests use too, behave as Redis's.
func TestDebugProtocol(t *testing.T) {
	kv := startLimitkv(t, "--persistence", "no", "--enable-debug-command", "yes")
	rs := startRedis(t, "--enable-debug-command", "yes")
	types := []string{"string", "integer", "double", "bignum", "null", "array", "set", "map",
		"attrib", "push", "verbatim", "true", "false", "nosuch", "STRING"}
	for name, s := range map[string]*server{"limitkv": kv, "redis-server": rs} {
		c := dialRaw(t, s.Addr)
		// DEBUG ERROR: the text as the error, line breaks made spaces, no
		// code added, and outside the error counters.
		for _, e := range []string{"MYERR boom", "lower case", "ERR two\nlines\r"} {
			if got := string(rawReply(t, c, "DEBUG", "ERROR", e)); got != "-"+strings.NewReplacer("\n", " ", "\r", " ").Replace(e)+"\r\n" {
				t.Errorf("%s: DEBUG ERROR %q: %q", name, e, got)
			}
		}
		if v := c.do("INFO", "errorstats").String(); strings.Contains(v, "MYERR") {
			t.Errorf("%s counted DEBUG ERROR's reply: %s", name, v)
		}
		if v := c.do("DEBUG", "LOG", "a line for the log"); v.String() != "+OK" {
			t.Errorf("%s: DEBUG LOG: %s", name, v)
		}
	}
	// The log reaches the test through a pipe read on its own goroutine:
	// the line may trail the reply.
	logged := false
	for i := 0; i < 500 && !logged; i++ {
		if logged = strings.Contains(kv.Output(), "DEBUG LOG: a line for the log"); !logged {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if !logged {
		t.Errorf("DEBUG LOG's line is not in limitkv's log:\n%s", kv.Output())
	}
	for _, proto := range []string{"2", "3"} {
		raw := map[string][][]byte{}
		for name, s := range map[string]*server{"limitkv": kv, "redis-server": rs} {
			c := dialRaw(t, s.Addr)
			c.do("HELLO", proto)
			for _, ty := range types {
				raw[name] = append(raw[name], rawReply(t, c, "DEBUG", "PROTOCOL", ty))
			}
		}
		for i, ty := range types {
			if got, want := raw["limitkv"][i], raw["redis-server"][i]; !bytes.Equal(got, want) {
				t.Errorf("RESP%s DEBUG PROTOCOL %s: limitkv sent %q, redis-server %q", proto, ty, got, want)
			}
		}
	}
}

// rawReply sends a command followed by a PING and returns the bytes that
// came before the PING's PONG: the command's reply as sent, whatever it
// holds (attributes and pushes included).
func rawReply(t *testing.T, c *rawConn, args ...string) []byte {
	t.Helper()
	var bs [][]byte
	for _, a := range args {
		bs = append(bs, []byte(a))
	}
	req := resp.AppendCommand(nil, bs...)
	req = resp.AppendCommand(req, []byte("PING"))
	c.send(req)
	c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer c.c.SetReadDeadline(time.Now().Add(2 * time.Minute))
	var got []byte
	for !bytes.HasSuffix(got, []byte("+PONG\r\n")) {
		b, err := c.r.ReadByte()
		if err != nil {
			t.Fatalf("%v: %v after %q", args, err, got)
		}
		got = append(got, b)
	}
	return got[:len(got)-len("+PONG\r\n")]
}
