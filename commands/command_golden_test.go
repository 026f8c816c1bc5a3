package commands

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/limitkv/limitkv/resp"
)

// TestCommandGolden pins, byte for byte, what COMMAND and its subcommands
// answer for every command of the table, in RESP2 and RESP3: the full
// COMMAND and COMMAND DOCS, COMMAND INFO and COMMAND DOCS of each command
// and subcommand, COMMAND COUNT, COMMAND LIST with each filter, and COMMAND
// GETKEYS and GETKEYSANDFLAGS over a spread of argument lists. The files
// under testdata/command were generated from the table before it was split
// into Go rows and a data file; the refactor must not change a byte.
// Regenerate (only for an intended change) with
//
//	go test ./commands -run TestCommandGolden -update
func TestCommandGolden(t *testing.T) {
	for _, proto := range []string{"2", "3"} {
		t.Run("resp"+proto, func(t *testing.T) {
			path := filepath.Join("testdata", "command", "resp"+proto+".golden")
			got := commandGolden(t, proto)
			want, err := os.ReadFile(path)
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatal(goldenDiff(got, want))
			}
		})
	}
}

// goldenDiff names the first request whose reply differs and, since many
// replies are only hashed, the first whose text differs.
func goldenDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	first, text := -1, -1
	for i := range min(len(g), len(w)) {
		if g[i] == w[i] {
			continue
		}
		if first < 0 {
			first = i
		}
		if len(w[i]) != 64 || strings.Trim(w[i], "0123456789abcdef") != "" {
			text = i
			break
		}
	}
	if first < 0 {
		return fmt.Sprintf("lengths differ: got %d lines, want %d", len(g), len(w))
	}
	describe := func(i int) string {
		req := ""
		for k := i; k >= 0 && req == ""; k-- {
			if strings.HasPrefix(w[k], "> ") {
				req = w[k]
			}
		}
		return fmt.Sprintf("line %d, reply to %q:\n got: %.300s\nwant: %.300s\n", i+1, req, g[i], w[i])
	}
	msg := describe(first)
	if text > first {
		msg += describe(text)
	}
	return msg
}

// commandGolden runs the requests on a fresh server and returns, for each
// request, a line "> request" and a line with the SHA-256 of the raw reply
// (so that equal files mean equal bytes), then, where a person may want to
// read it, the reply as one line of text. The GETKEYS replies of one
// command, many and mostly errors, share one hash.
func commandGolden(t *testing.T, proto string) []byte {
	h := newHarness(t)
	var rec bytes.Buffer
	h.cur.r = bufio.NewReader(io.TeeReader(h.cur.c, &rec))
	var out bytes.Buffer
	send := func(args ...string) resp.Value {
		rec.Reset()
		var bs [][]byte
		for _, a := range args {
			bs = append(bs, []byte(a))
		}
		h.send(resp.AppendCommand(nil, bs...))
		v := h.read()
		if h.cur.r.Buffered() != 0 {
			t.Fatalf("%v: more than one reply", args)
		}
		return v
	}
	record := func(text bool, args ...string) {
		v := send(args...)
		fmt.Fprintf(&out, "> %s\n%x\n", strings.Join(args, " "), sha256.Sum256(rec.Bytes()))
		if text {
			fmt.Fprintf(&out, "%s\n", v.String())
		}
	}
	record(true, "HELLO", proto)
	record(false, "COMMAND")
	record(true, "COMMAND", "COUNT")
	record(false, "COMMAND", "INFO")
	record(false, "COMMAND", "DOCS")
	record(true, "COMMAND", "INFO", "nosuch", "get", "client|list", "client|nosuch")
	record(true, "COMMAND", "DOCS", "nosuch", "get", "client|list")
	record(true, "COMMAND", "LIST")
	for _, cat := range []string{"keyspace", "read", "write", "set", "sortedset", "list", "hash",
		"string", "bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow",
		"blocking", "dangerous", "connection", "transaction", "scripting", "ratelimit", "nosuch", "WRITE"} {
		record(true, "COMMAND", "LIST", "FILTERBY", "ACLCAT", cat)
	}
	for _, p := range []string{"*", "c*", "*|*", "client|*", "rl.*", "nosuch"} {
		record(true, "COMMAND", "LIST", "FILTERBY", "PATTERN", p)
	}
	record(true, "COMMAND", "LIST", "FILTERBY", "MODULE", "redisbloom")

	var names [][]string // each command as it is called: ["client", "list"]
	for _, s := range h.srv.Table.Specs() {
		names = append(names, []string{s.Name})
		for _, sub := range s.Sub {
			names = append(names, []string{s.Name, sub.Name})
		}
	}
	for _, n := range names {
		record(true, "COMMAND", "INFO", strings.Join(n, "|"))
		record(true, "COMMAND", "DOCS", strings.Join(n, "|"))
	}
	// Argument lists that exercise every kind of key spec: all keys, a key
	// count first or second (valid, zero, too large, negative).
	patterns := [][]string{
		{"k1", "k2", "k3", "k4", "k5", "k6"},
		{"2", "k1", "k2", "k3", "k4", "k5"},
		{"x", "2", "k1", "k2", "k3", "k4"},
		{"x", "0", "k1", "k2", "k3", "k4"},
		{"x", "9", "k1", "k2", "k3", "k4"},
		{"x", "-1", "k1", "k2", "k3", "k4"},
	}
	for _, n := range names {
		sum := sha256.New()
		for _, p := range patterns {
			for l := 0; l <= len(p); l++ {
				args := append(append([]string{}, n...), p[:l]...)
				for _, sub := range []string{"GETKEYS", "GETKEYSANDFLAGS"} {
					send(append([]string{"COMMAND", sub}, args...)...)
					fmt.Fprintf(sum, "%q\n", args)
					sum.Write(rec.Bytes())
				}
			}
		}
		fmt.Fprintf(&out, "> COMMAND GETKEYS[ANDFLAGS] %s ...\n%x\n", strings.Join(n, " "), sum.Sum(nil))
	}
	return out.Bytes()
}
