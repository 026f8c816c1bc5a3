package cmdspec

import "testing"

// TestLegacyKeyRange runs legacyKeyRange over key specs shaped like those
// of Redis commands, with the range and movablekeys flag Redis 7.0.15's
// COMMAND INFO shows for each.
func TestLegacyKeyRange(t *testing.T) {
	rng := func(begin, last, step int, flags string) KeySpec {
		return KeySpec{Flags: flags, Begin: begin, LastKey: last, KeyStep: step}
	}
	keynum := func(begin int) KeySpec {
		return KeySpec{Flags: "RO access", Begin: begin, KeyNum: true, FirstKey: 1, KeyStep: 1}
	}
	cases := []struct {
		name              string
		specs             []KeySpec
		first, last, step int
		movable           bool
	}{
		{"ping", nil, 0, 0, 0, false},
		{"get", []KeySpec{rng(1, 0, 1, "RO")}, 1, 1, 1, false},
		{"mset", []KeySpec{rng(1, -1, 2, "OW")}, 1, -1, 2, false},
		{"blpop", []KeySpec{rng(1, -2, 1, "RW")}, 1, -2, 1, false},
		{"smove", []KeySpec{rng(1, 0, 1, "RW"), rng(2, 0, 1, "RW")}, 1, 2, 1, false},
		{"bitop", []KeySpec{rng(2, 0, 1, "OW"), rng(3, -1, 1, "RO")}, 2, -1, 1, false},
		{"eval", []KeySpec{keynum(2)}, 0, 0, 0, true},
		{"zunionstore", []KeySpec{rng(1, 0, 1, "OW"), keynum(2)}, 1, 1, 1, true},
		{"sort", []KeySpec{rng(1, 0, 1, "RO"), {Flags: "OW update", Begin: -1, Unknown: true}}, 1, 1, 1, true},
		{"xread", []KeySpec{{Flags: "RO", Begin: -1, Keyword: "STREAMS", KeywordFrom: 1, LastKey: -1, KeyStep: 1}}, 0, 0, 0, true},
		{"migrate", []KeySpec{rng(3, 0, 1, "RW incomplete")}, 3, 3, 1, true},
		{"not contiguous", []KeySpec{rng(1, 0, 1, "RO"), rng(3, 0, 1, "RO")}, 1, 1, 1, true},
		{"after the end", []KeySpec{rng(1, -1, 1, "RO"), rng(2, 0, 1, "RO")}, 1, -1, 1, true},
		{"step 2 of two", []KeySpec{rng(1, 0, 1, "RO"), rng(2, -1, 2, "RO")}, 1, 1, 1, true},
	}
	for _, c := range cases {
		first, last, step, movable := legacyKeyRange(c.specs)
		if first != c.first || last != c.last || step != c.step || movable != c.movable {
			t.Errorf("%s: got %d %d %d movable %v, want %d %d %d movable %v", c.name,
				first, last, step, movable, c.first, c.last, c.step, c.movable)
		}
	}
}

func TestParseFlags(t *testing.T) {
	f, err := ParseFlags("write denyoom fast  as_is")
	if err != nil || f != Write|DenyOOM|Fast|AsIs {
		t.Fatalf("ParseFlags = %b, %v", f, err)
	}
	if f, err := ParseFlags(""); err != nil || f != 0 {
		t.Fatalf("empty: %b, %v", f, err)
	}
	for _, bad := range []string{"movablekeys", "Write", "deny-oom", "fast,write"} {
		if _, err := ParseFlags(bad); err == nil {
			t.Errorf("ParseFlags(%q) accepted", bad)
		}
	}
	// Every flag has a name a row can state, but Movable, and the names
	// read back.
	for b := Flag(1); b != 0 && b <= MayReplicate; b <<= 1 {
		if b == Movable {
			continue
		}
		var name string
		for _, n := range append(append([]struct {
			f    Flag
			name string
		}{}, flagNames...), internalFlagNames...) {
			if n.f == b {
				name = n.name
			}
		}
		if got, err := ParseFlags(name); name == "" || err != nil || got != b {
			t.Errorf("flag %b: name %q parses to %b, %v", b, name, got, err)
		}
	}
}
