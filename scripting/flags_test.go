package scripting

import (
	"testing"

	"github.com/limitkv/limitkv/cmdspec"
)

// TestParseShebang: the flags a first line declares, how much of the body
// the compiler skips (the line without its line feed, so that line
// numbers stay the body's), and Redis's texts for the lines it refuses.
func TestParseShebang(t *testing.T) {
	for _, c := range []struct {
		body  string
		flags Flags
		skip  int
		msg   string
	}{
		{"return 1", Compat, 0, ""},
		{"#!lua\nreturn 1", 0, 5, ""},
		{"#!lua flags=no-writes,allow-oom\nreturn 1", NoWrites | AllowOOM, 31, ""},
		{"#!lua flags=\nreturn 1", 0, 12, ""},
		{"#!lua", 0, 0, "Invalid script shebang"},
		{"#!luajit\nreturn 1", 0, 0, "Unexpected engine in script shebang: #!luajit"},
		{"#!lua name=x\nreturn 1", 0, 0, "Unknown lua shebang option: name=x"},
		{"#!lua flags=no-writes,NO-WRITES\nreturn 1", 0, 0, "Unexpected flag in script shebang: NO-WRITES"},
	} {
		flags, skip, msg := ParseShebang([]byte(c.body))
		if flags != c.flags || skip != c.skip || msg != c.msg {
			t.Errorf("%q: %v %d %q, want %v %d %q", c.body, flags, skip, msg, c.flags, c.skip, c.msg)
		}
	}
}

// TestCommandFlags: a script that declared flags is admitted by them, one
// without a shebang by its command's.
func TestCommandFlags(t *testing.T) {
	own := cmdspec.Write | cmdspec.DenyOOM | cmdspec.MayReplicate | cmdspec.RunsScript
	for _, c := range []struct {
		declared Flags
		want     cmdspec.Flag
	}{
		{Compat, own},
		{0, cmdspec.Write | cmdspec.DenyOOM | cmdspec.RunsScript},
		{NoWrites, cmdspec.RunsScript},
		{AllowOOM, cmdspec.Write | cmdspec.RunsScript},
		{NoWrites | AllowStale, cmdspec.Stale | cmdspec.RunsScript},
	} {
		if got := c.declared.CommandFlags(own); got != c.want {
			t.Errorf("declared %v: %v, want %v", c.declared, got, c.want)
		}
	}
	if got := (NoWrites | AllowOOM | AllowCrossSlot).Names(); len(got) != 3 || got[0] != "no-writes" || got[2] != "allow-cross-slot-keys" {
		t.Errorf("Names: %v", got)
	}
}
