package commands

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/observe"
)

func TestSlowlogArgs(t *testing.T) {
	tab := testTable()
	spec := func(name string) *cmdspec.Spec {
		s := tab.Lookup([]byte(strings.Split(name, "|")[0]))
		if _, sub, ok := strings.Cut(name, "|"); ok {
			s = s.LookupSub([]byte(sub))
		}
		return s
	}
	args := func(ws ...string) [][]byte {
		var out [][]byte
		for _, w := range ws {
			out = append(out, []byte(w))
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
	long := strings.Repeat("x", 130)
	many := []string{"rpush", "l"}
	for i := 0; i < 40; i++ {
		many = append(many, fmt.Sprint(i))
	}
	for _, c := range []struct {
		cmd  string
		args [][]byte
		want string
	}{
		{"set", args("SET", "k", long), "SET k " + long[:128] + "... (2 more bytes)"},
		{"rpush", args(many...), strings.Join(many[:31], " ") + " ... (11 more arguments)"},
		{"rpush", args(many[:32]...), strings.Join(many[:32], " ")},
		{"auth", args("AUTH", "pw"), "AUTH (redacted)"},
		{"auth", args("AUTH", "user", "pw"), "AUTH (redacted) (redacted)"},
		{"auth", args("AUTH", "a", "b", "c"), "AUTH a b c"},
		{"hello", args("HELLO", "3", "SETNAME", "n", "AUTH", "u", "p"), "HELLO 3 SETNAME n AUTH (redacted) (redacted)"},
		{"hello", args("HELLO", "4", "AUTH", "u", "p"), "HELLO 4 AUTH u p"},
		{"hello", args("HELLO", "3", "BAD", "AUTH", "u", "p"), "HELLO 3 BAD AUTH u p"},
		{"config|set", args("CONFIG", "SET", "maxclients", "5", "REQUIREPASS", "pw"), "CONFIG SET maxclients 5 REQUIREPASS (redacted)"},
		{"config|set", args("CONFIG", "SET", "requirepass"), "CONFIG SET requirepass"},
	} {
		if got := show(observe.SlowlogArgs(c.args, secretArgs(spec(c.cmd), c.args))); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.cmd, got, c.want)
		}
	}
}

// TestSlowlogEntry: an entry holds a copy of what the client sent, and
// a script's client, which has no connection, shows as "?:0".
func TestSlowlogEntry(t *testing.T) {
	srv := New(engine.New(engine.Config{Databases: 1}), NewConfig(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	cl := &Client{srv: srv}
	args := [][]byte{[]byte("GET"), []byte("k")}
	srv.logSlow(&Ctx{Client: cl, Spec: srv.Table.Lookup([]byte("get")), Args: args}, 22, 10)
	args[1][0] = 'x'
	e := srv.slowlog.Newest(1)[0]
	if e.Addr != "?:0" || e.Micros != 22 || string(e.Args[1]) != "k" || e.Unix == 0 {
		t.Errorf("entry %+v", e)
	}
}

// TestLatencyEvent: events from outside the package (snapshots) are kept
// only with the monitor on and at its threshold or above.
func TestLatencyEvent(t *testing.T) {
	srv := New(engine.New(engine.Config{Databases: 1}), NewConfig(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv.LatencyEvent("snapshot", time.Second)
	if len(srv.latency.Views()) != 0 {
		t.Fatal("recorded with the monitor off")
	}
	if err := srv.Cfg.Set([][2]string{{"latency-monitor-threshold", "5"}}, false); err != nil {
		t.Fatal(err)
	}
	srv.LatencyEvent("snapshot", 4*time.Millisecond)
	if len(srv.latency.Views()) != 0 {
		t.Fatal("recorded below the threshold")
	}
	srv.LatencyEvent("snapshot", 7*time.Millisecond)
	if v, ok := srv.latency.View("snapshot"); !ok || v.Max != 7 {
		t.Fatalf("view %+v", v)
	}
}
