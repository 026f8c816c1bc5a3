package scripting

import (
	"bytes"

	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/resp"
)

// Flags are what a script declares in its shebang line, or a function
// when it registers.
type Flags uint8

const (
	// Compat: no shebang; Redis's backward-compatible mode, in which a
	// script may write unless it is run with EVAL_RO.
	Compat Flags = 1 << iota
	NoWrites
	AllowOOM
	AllowStale
	NoCluster
	AllowCrossSlot
)

// flagNames are the flags' names, in the order FUNCTION LIST shows them.
var flagNames = []struct {
	name string
	flag Flags
}{
	{"no-writes", NoWrites}, {"allow-oom", AllowOOM}, {"allow-stale", AllowStale},
	{"no-cluster", NoCluster}, {"allow-cross-slot-keys", AllowCrossSlot},
}

// Names returns the names of the flags set, in Redis's order.
func (f Flags) Names() []string {
	var names []string
	for _, n := range flagNames {
		if f&n.flag != 0 {
			names = append(names, n.name)
		}
	}
	return names
}

// ParseShebang reads the "#!lua flags=..." line a script may start with.
// It returns the flags and how many bytes to skip before compiling: the
// line without its line feed, so that line numbers stay those of the
// body; or Redis's error text for a line it refuses.
func ParseShebang(body []byte) (Flags, int, string) {
	if !bytes.HasPrefix(body, []byte("#!")) {
		return Compat, 0, ""
	}
	end := bytes.IndexByte(body, '\n')
	if end < 0 {
		return 0, 0, "Invalid script shebang"
	}
	parts, ok := resp.SplitArgs(body[:end])
	if !ok || len(parts) == 0 {
		return 0, 0, "Invalid engine in script shebang"
	}
	if string(parts[0]) != "#!lua" {
		return 0, 0, "Unexpected engine in script shebang: " + string(parts[0])
	}
	var flags Flags
	for _, p := range parts[1:] {
		list, ok := bytes.CutPrefix(p, []byte("flags="))
		if !ok {
			return 0, 0, "Unknown lua shebang option: " + string(p)
		}
		if len(list) == 0 {
			continue
		}
		for _, name := range bytes.Split(list, []byte(",")) {
			known := false
			for _, f := range flagNames {
				if string(name) == f.name {
					flags |= f.flag
					known = true
					break
				}
			}
			if !known {
				return 0, 0, "Unexpected flag in script shebang: " + string(name)
			}
		}
	}
	return flags, end, ""
}

// CommandFlags returns the flags a request of EVAL or FCALL, whose own
// flags are own, is admitted by when its script or function declared f,
// as Redis's getCommandFlags: a script that declared flags writes, may
// run over maxmemory or on a stale replica by what it declared, not by
// the command's flags. So a no-writes script runs during CLIENT PAUSE
// WRITE and without enough replicas, and one that may write is refused
// as a write before it starts. A script without a shebang keeps the
// command's flags.
func (f Flags) CommandFlags(own cmdspec.Flag) cmdspec.Flag {
	if f&Compat != 0 {
		return own
	}
	flags := own &^ (cmdspec.Write | cmdspec.DenyOOM | cmdspec.Stale | cmdspec.MayReplicate)
	if f&NoWrites == 0 {
		flags |= cmdspec.Write
		if f&AllowOOM == 0 {
			flags |= cmdspec.DenyOOM
		}
	}
	if f&AllowStale != 0 {
		flags |= cmdspec.Stale
	}
	return flags
}
