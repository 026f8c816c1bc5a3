package commands

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func infoInt(t *testing.T, h *harness, field string) int64 {
	t.Helper()
	v := h.do("INFO", "memory")
	m := regexp.MustCompile(`(?m)^` + field + `:(\d+)`).FindStringSubmatch(string(v.Str))
	if m == nil {
		t.Fatalf("no %s in INFO memory", field)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// TestUsedMemoryLua: used_memory_lua is the Lua state's size: it grows
// with what the state keeps (a big ARGV table, functions of scripts) and
// falls back after SCRIPT FLUSH, which starts a fresh state.
func TestUsedMemoryLua(t *testing.T) {
	h := newHarness(t)
	if got := infoInt(t, h, "used_memory_lua"); got != 0 {
		t.Fatalf("used_memory_lua %d before any script", got)
	}
	h.do("EVAL", "return 1", "0")
	fresh := infoInt(t, h, "used_memory_lua")
	args := []string{"EVAL", "return #ARGV", "0"}
	for i := 0; i < 20000; i++ {
		args = append(args, "argument")
	}
	if v := h.do(args...); v.Int != 20000 {
		t.Fatalf("EVAL answered %v", v)
	}
	for i := 0; i < 50; i++ {
		h.do("EVAL", "return "+strconv.Itoa(i), "0")
	}
	grown := infoInt(t, h, "used_memory_lua")
	scripts := infoInt(t, h, "used_memory_scripts")
	t.Logf("used_memory_lua: fresh %d, after big ARGV and 50 scripts %d; used_memory_scripts %d", fresh, grown, scripts)
	if grown < fresh+20000*16 {
		t.Errorf("used_memory_lua %d after a run with 20000 arguments, fresh %d", grown, fresh)
	}
	if v := h.do("SCRIPT", "FLUSH"); v.String() != "+OK" {
		t.Fatal(v)
	}
	h.do("EVAL", "return 1", "0")
	if got := infoInt(t, h, "used_memory_lua"); got != fresh {
		t.Errorf("used_memory_lua %d after SCRIPT FLUSH and a script, want the fresh state's %d", got, fresh)
	}
	if got := infoInt(t, h, "used_memory_scripts"); got >= scripts {
		t.Errorf("used_memory_scripts %d after SCRIPT FLUSH and one script, %d before", got, scripts)
	}
}

// TestUsedMemoryFollowsTheKeyspace: used_memory counts what the keyspace
// holds as it changes, without waiting for a collection.
func TestUsedMemoryFollowsTheKeyspace(t *testing.T) {
	h := newHarness(t)
	before := infoInt(t, h, "used_memory")
	val := strings.Repeat("x", 2000)
	for i := 0; i < 1000; i++ {
		h.do("SET", "k"+strconv.Itoa(i), val)
	}
	during := infoInt(t, h, "used_memory")
	if d := during - before; d < 2000*1000 || d > 2500*1000 {
		t.Errorf("used_memory grew %d bytes for 1000 values of 2000 bytes", d)
	}
	h.do("FLUSHALL")
	if after := infoInt(t, h, "used_memory"); after != before {
		t.Errorf("used_memory %d after FLUSHALL, %d before the keys", after, before)
	}
}
