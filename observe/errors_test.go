package observe

import (
	"fmt"
	"strings"
	"testing"
)

func TestErrorCode(t *testing.T) {
	for _, c := range []struct{ reply, code string }{
		{"-ERR unknown command\r\n", "ERR"},
		{"-WRONGTYPE Operation against a key\r\n", "WRONGTYPE"},
		{"-NOSPACE\r\n", "ERR"},
		{"-" + strings.Repeat("A", 31) + " x\r\n", "ERR"},
		{"-" + strings.Repeat("A", 30) + " x\r\n", strings.Repeat("A", 30)},
		{"- leading space\r\n", ""},
		{"-EXECABORT Transaction discarded", "EXECABORT"},
		{"ERR", "ERR"},
	} {
		if got := string(ErrorCode([]byte(c.reply))); got != c.code {
			t.Errorf("%q: code %q, want %q", c.reply, got, c.code)
		}
	}
}

// TestErrorStatsCap: distinct codes stop being counted at 128, as Redis
// 7.4 stops them, until a reset; the total goes on.
func TestErrorStatsCap(t *testing.T) {
	var e ErrorStats
	for i := 0; i < MaxErrorCodes; i++ {
		if e.Count([]byte(fmt.Sprintf("-E%d x\r\n", i))) != nil {
			t.Fatalf("overflow at %d codes", i)
		}
	}
	e.Count([]byte("-E0 again\r\n"))
	overflow := e.Count([]byte("-ONEMORE x\r\n"))
	if len(overflow) != MaxErrorCodes {
		t.Fatalf("overflow reported %d codes", len(overflow))
	}
	for i := 0; i < 1000; i++ {
		e.Count([]byte(fmt.Sprintf("-X%d y\r\n", i)))
	}
	if got := fmt.Sprint(e.Snapshot()); got != "[{ERRORSTATS_DISABLED 1}]" {
		t.Errorf("after the cap: %s", got)
	}
	if n := e.Total(); n != MaxErrorCodes+2+1000 {
		t.Errorf("total %d", n)
	}
	e.Reset()
	e.Count([]byte("-WRONGTYPE x\r\n"))
	if got := fmt.Sprint(e.Snapshot()); got != "[{WRONGTYPE 1}]" {
		t.Errorf("after a reset: %s", got)
	}
}

// TestCountNoAllocs: an error reply is counted on the request path, which
// allocates nothing once its code is in the table.
func TestCountNoAllocs(t *testing.T) {
	var e ErrorStats
	reply := []byte("-WRONGTYPE Operation against a key holding the wrong kind of value\r\n")
	e.Count(reply)
	if a := testing.AllocsPerRun(100, func() { e.Count(reply) }); a != 0 {
		t.Errorf("%.1f allocations per error counted", a)
	}
}
