package commands

import (
	"os"
	"slices"
	"testing"
	"testing/fstest"

	"github.com/limitkv/limitkv/cmddocs"
	"github.com/limitkv/limitkv/cmdspec"
)

// TestDocsMatchTable checks that the data files parse, that every command
// and subcommand of the table has an entry and every entry a command.
func TestDocsMatchTable(t *testing.T) {
	d := cmddocs.Load()
	if _, _, err := buildTable(commandTable(), d.SpecData()); err != nil {
		t.Fatal(err)
	}
	n := 0
	forEachSpec(t, func(*cmdspec.Spec) { n++ })
	if n != len(d) {
		t.Errorf("%d commands, %d entries", n, len(d))
	}
}

// TestAddCommand follows the recipe of commandTable: a row and its
// entry in the data files are all a new command needs.
func TestAddCommand(t *testing.T) {
	real, err := os.ReadFile("../cmddocs/docs/ratelimit.json")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := cmddocs.Parse(fstest.MapFS{
		"docs/real.json": {Data: real},
		"docs/demo.json": {Data: []byte(`{"rl.demo": {
			"summary": "Demonstrate the recipe", "since": "0.2.0", "group": "ratelimit", "complexity": "O(1)",
			"arguments": "key other_key [WINDOW window:string]",
			"key_specs": [
				{"flags": ["RW", "access", "update"], "begin_search": {"index": {"pos": 1}}, "find_keys": {"range": {"lastkey": 0, "step": 1, "limit": 0}}},
				{"flags": ["RO", "access"], "begin_search": {"index": {"pos": 2}}, "find_keys": {"range": {"lastkey": 0, "step": 1, "limit": 0}}}
			],
			"acl_categories": ["@ratelimit"]
		}}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	rows := []*command{cmd("rl.demo", -3, "write fast", cmdPing)}
	for _, r := range commandTable() {
		if docs[r.Name] != nil {
			rows = append(rows, r)
		}
	}
	tab, cmds, err := buildTable(rows, docs.SpecData())
	if err != nil {
		t.Fatal(err)
	}
	s := tab.Lookup([]byte("RL.DEMO"))
	if s == nil {
		t.Fatal("rl.demo not found")
	}
	if cmds[s.ID()].run == nil {
		t.Error("rl.demo has no handler")
	}
	if first, last, step := s.KeyRange(); first != 1 || last != 2 || step != 1 || s.Flags&cmdspec.Movable != 0 {
		t.Errorf("key range %d %d %d movable %v, want 1 2 1 false", first, last, step, s.Flags&cmdspec.Movable != 0)
	}
	if got := s.Categories().Names(); !slices.Equal(got, []string{"write", "ratelimit", "fast"}) {
		t.Errorf("categories %v", got)
	}
	if got := cmddocs.Syntax(docs["rl.demo"].Args); got != "key other_key [WINDOW window]" {
		t.Errorf("syntax %q", got)
	}
	if got := s.KeyPositions([][]byte{[]byte("rl.demo"), []byte("a"), []byte("b")}, nil); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("keys at %v", got)
	}
}

// TestCategories checks what the ACL work relies on: every command is in
// exactly one of @fast and @slow, and the rate-limit commands are in
// @ratelimit.
func TestCategories(t *testing.T) {
	docs := cmddocs.Load()
	forEachSpec(t, func(s *cmdspec.Spec) {
		c := s.Categories()
		if (c&cmdspec.CatFast != 0) == (c&cmdspec.CatSlow != 0) {
			t.Errorf("%s: categories %v", s.FullName(), c.Names())
		}
		if rl := docs.Group(s) == "ratelimit"; rl != (c&cmdspec.CatRateLimit != 0) {
			t.Errorf("%s: group %s, categories %v", s.FullName(), docs.Group(s), c.Names())
		}
	})
}
