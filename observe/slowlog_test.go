package observe

import (
	"fmt"
	"strings"
	"testing"
)

// TestSlowlogRing: newest first, ids going on across resets, and the
// length bound applied as entries come and when it shrinks.
func TestSlowlogRing(t *testing.T) {
	var l SlowLog
	add := func(i, maxLen int) {
		l.Add(SlowEntry{Micros: int64(i), Args: [][]byte{[]byte("GET"), []byte(fmt.Sprint(i))}}, maxLen)
	}
	ids := func(n int) string {
		var s []string
		for _, e := range l.Newest(n) {
			s = append(s, fmt.Sprintf("%d:%s", e.ID, e.Args[1]))
		}
		return strings.Join(s, " ")
	}
	for i := 0; i < 20; i++ {
		add(i, 5)
	}
	if got := ids(10); got != "19:19 18:18 17:17 16:16 15:15" {
		t.Errorf("newest: %s", got)
	}
	if l.Len() != 5 || ids(2) != "19:19 18:18" {
		t.Errorf("len %d, newest 2: %s", l.Len(), ids(2))
	}
	add(20, 100)
	if l.Len() != 6 || ids(1) != "20:20" {
		t.Errorf("grown: len %d, newest %s", l.Len(), ids(1))
	}
	l.Trim(2)
	if ids(10) != "20:20 19:19" {
		t.Errorf("trimmed: %s", ids(10))
	}
	add(21, 0)
	if l.Len() != 0 {
		t.Errorf("max-len 0 keeps %d", l.Len())
	}
	l.Reset()
	add(22, 3)
	if ids(10) != "22:22" {
		t.Errorf("after a reset: %s", ids(10))
	}
	if e := l.Newest(1)[0]; e.Micros != 22 {
		t.Errorf("entry %+v", e)
	}
}

// TestSlowlogArgs: Redis's limits on what an entry keeps of the
// arguments, secrets replaced, and nothing shared with the request's
// bytes, which the connection reuses.
func TestSlowlogArgs(t *testing.T) {
	words := func(n int) [][]byte {
		out := [][]byte{[]byte("RPUSH"), []byte("l")}
		for i := 2; i < n; i++ {
			out = append(out, []byte(fmt.Sprint(i)))
		}
		return out
	}
	show := func(bs [][]byte) string {
		var s []string
		for _, b := range bs {
			s = append(s, string(b))
		}
		return strings.Join(s, " ")
	}
	none := func(int) bool { return false }
	long := strings.Repeat("x", 130)
	for _, c := range []struct {
		args   [][]byte
		secret func(int) bool
		want   string
	}{
		{[][]byte{[]byte("SET"), []byte("k"), []byte(long)}, none, "SET k " + long[:128] + "... (2 more bytes)"},
		{words(42), none, show(words(31)) + " ... (11 more arguments)"},
		{words(32), none, show(words(32))},
		{words(40), func(j int) bool { return j == 1 || j == 31 }, "RPUSH (redacted) " + show(words(31)[2:]) + " ... (9 more arguments)"},
	} {
		if got := show(SlowlogArgs(c.args, c.secret)); got != c.want {
			t.Errorf("\n got %s\nwant %s", got, c.want)
		}
	}
	args := [][]byte{[]byte("GET"), []byte("k")}
	kept := SlowlogArgs(args, none)
	args[1][0] = 'x'
	if string(kept[1]) != "k" {
		t.Errorf("the entry shares the request's bytes: %q", kept[1])
	}
}
