package replication

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/limitkv/limitkv/resp"
)

func entries(t *testing.T, r io.Reader) (args []string, raws int64, err error) {
	t.Helper()
	er := newEntryReader(r)
	for {
		a, raw, err := er.entry()
		if err != nil {
			return args, raws, err
		}
		raws += int64(len(raw))
		var parts []string
		for _, x := range a {
			parts = append(parts, string(x))
		}
		args = append(args, strings.Join(parts, " "))
	}
}

// Entries arrive whole, whatever the reads cut them into, and their raw
// bytes add up to the stream's length (the replication offset).
func TestEntryReaderCuts(t *testing.T) {
	var stream []byte
	stream = appendSelect(stream, 3)
	stream = resp.AppendCommand(stream, []byte("LKV.SET"), []byte("k\r\n"), bytes.Repeat([]byte{0}, 200_000))
	stream = append(stream, entryMulti...)
	stream = resp.AppendCommand(stream, []byte("LKV.DEL"), []byte(""), []byte("b"))
	stream = append(stream, entryExec...)
	stream = append(stream, entryPing...)
	for _, r := range []io.Reader{bytes.NewReader(stream), iotest.OneByteReader(bytes.NewReader(stream)), iotest.HalfReader(bytes.NewReader(stream))} {
		got, n, err := entries(t, r)
		if !errors.Is(err, io.EOF) {
			t.Fatalf("err = %v", err)
		}
		if n != int64(len(stream)) {
			t.Fatalf("raw bytes %d, stream %d", n, len(stream))
		}
		if len(got) != 6 || got[0] != "SELECT 3" || !strings.HasPrefix(got[1], "LKV.SET k\r\n ") || got[3] != "LKV.DEL  b" || got[5] != "PING" {
			t.Fatalf("entries %q", got)
		}
	}
}

// A damaged or hostile stream is an error, never a huge allocation.
func TestEntryReaderRefuses(t *testing.T) {
	for _, bad := range []string{
		"+OK\r\n",
		"*2\r\n:1\r\n",
		"*99999999999\r\n",
		"*1\r\n$999999999999\r\n",
		"*1\r\n$-1\r\n",
		"*x\r\n",
		"*1\r\n$3\r\nabcd",
	} {
		_, _, err := entries(t, strings.NewReader(bad))
		if err == nil || (errors.Is(err, io.EOF) && !strings.HasSuffix(bad, "abcd")) {
			t.Errorf("%q: err = %v", bad, err)
		}
	}
}

func TestEntryReaderReplies(t *testing.T) {
	er := newEntryReader(strings.NewReader("\n\n+FULLRESYNC abc 12\r\n*1\r\n$4\r\nPING\r\n"))
	l, err := er.reply()
	if err != nil || l != "+FULLRESYNC abc 12" {
		t.Fatalf("reply %q, %v", l, err)
	}
	a, _, err := er.entry()
	if err != nil || string(a[0]) != "PING" {
		t.Fatalf("entry after the reply: %q, %v", a, err)
	}
}
