package commands

import (
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/limitkv/limitkv/cmdspec"
)

// TestDocsMatchTable checks that the data files parse, that every command
// and subcommand of the table has an entry and every entry a command.
func TestDocsMatchTable(t *testing.T) {
	d, err := loadDocs()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := buildTable(commandTable(), specData(d)); err != nil {
		t.Fatal(err)
	}
	n := 0
	forEachSpec(t, func(*cmdspec.Spec) { n++ })
	if n != len(d) {
		t.Errorf("%d commands, %d entries", n, len(d))
	}
}

const demoEntry = `"summary": "Demo", "since": "0.1.0", "group": "ratelimit", "complexity": "O(1)"`

// TestDocsErrors checks that a malformed file is refused with a message
// naming the problem.
func TestDocsErrors(t *testing.T) {
	files := []struct{ name, file, want string }{
		{"not json", `{"x": {"summary": }}`, "x: invalid character"},
		{"not an object", `[]`, "not a JSON object"},
		{"trailing", `{} {}`, "data after the object"},
		{"unknown field", `{"x": {` + demoEntry + `, "sumary": "typo"}}`, `unknown field "sumary"`},
		{"twice", `{"x": {` + demoEntry + `}, "x": {` + demoEntry + `}}`, "x: entered twice"},
		{"no summary", `{"x": {"since": "1", "group": "g", "complexity": "O(1)"}}`, "summary and since are required"},
		{"no group", `{"x": {"summary": "s", "since": "1", "complexity": "O(1)"}}`, "group is required"},
		{"sub with group", `{"x|y": {` + demoEntry + `}}`, "takes its container's group"},
		{"category", `{"x": {` + demoEntry + `, "acl_categories": ["@nosuch"]}}`, `unknown ACL category "@nosuch"`},
		{"category without @", `{"x": {` + demoEntry + `, "acl_categories": ["string"]}}`, `unknown ACL category "string"`},
		{"doc flag", `{"x": {` + demoEntry + `, "doc_flags": ["old"]}}`, `unknown doc flag "old"`},
		{"key flag", `{"x": {` + demoEntry + `, "key_specs": [{"flags": ["rw"], "begin_search": {"index": {"pos": 1}}, "find_keys": {"range": {"lastkey": 0, "step": 1, "limit": 0}}}]}}`, `key spec 0: unknown flag "rw"`},
		{"two begins", `{"x": {` + demoEntry + `, "key_specs": [{"flags": ["RW"], "begin_search": {"index": {"pos": 1}, "unknown": {}}, "find_keys": {"range": {"lastkey": 0, "step": 1, "limit": 0}}}]}}`, "begin_search needs exactly one"},
		{"no find", `{"x": {` + demoEntry + `, "key_specs": [{"flags": ["RW"], "begin_search": {"index": {"pos": 1}}}]}}`, "find_keys needs exactly one"},
		{"index 0", `{"x": {` + demoEntry + `, "key_specs": [{"flags": ["RW"], "begin_search": {"index": {"pos": 0}}, "find_keys": {"range": {"lastkey": 0, "step": 1, "limit": 0}}}]}}`, "begin_search index below 1"},
		{"step 0", `{"x": {` + demoEntry + `, "key_specs": [{"flags": ["RW"], "begin_search": {"index": {"pos": 1}}, "find_keys": {"range": {"lastkey": 0, "step": 0, "limit": 0}}}]}}`, "find_keys step below 1"},
		{"bad syntax", `{"y": {` + demoEntry + `, "arguments": "key ["}}`, "y: syntax"},
	}
	for _, c := range files {
		_, err := parseDocs(fstest.MapFS{"docs/x.json": {Data: []byte(c.file)}})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "commands/docs/x.json") {
			t.Errorf("%s: got error %v, want one naming the file and saying %q", c.name, err, c.want)
		}
	}
	if _, err := parseDocs(fstest.MapFS{}); err == nil {
		t.Error("no data files: no error")
	}
	twoFiles := fstest.MapFS{
		"docs/a.json": {Data: []byte(`{"x": {` + demoEntry + `}}`)},
		"docs/b.json": {Data: []byte(`{"x": {` + demoEntry + `}}`)},
	}
	if _, err := parseDocs(twoFiles); err == nil || !strings.Contains(err.Error(), "x: entered twice") {
		t.Errorf("an entry in two files: got %v", err)
	}

}

// TestAddCommand follows the recipe at the top of table.go: a row and its
// entry in the data files are all a new command needs.
func TestAddCommand(t *testing.T) {
	docs, err := parseDocs(fstest.MapFS{
		"docs/real.json": {Data: mustRead(t, "docs/ratelimit.json")},
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
	rows := []*command{{
		Name:  "rl.demo",
		Arity: -3,
		Flags: cmdspec.Write | cmdspec.Fast,
		Run:   cmdPing,
	}}
	for _, r := range commandTable() {
		if docs[r.Name] != nil {
			rows = append(rows, r)
		}
	}
	tab, cmds, err := buildTable(rows, specData(docs))
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
	if got := renderSyntax(docs["rl.demo"].Args); got != "key other_key [WINDOW window]" {
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
	forEachSpec(t, func(s *cmdspec.Spec) {
		c := s.Categories()
		if (c&cmdspec.CatFast != 0) == (c&cmdspec.CatSlow != 0) {
			t.Errorf("%s: categories %v", s.FullName(), c.Names())
		}
		if rl := group(s) == "ratelimit"; rl != (c&cmdspec.CatRateLimit != 0) {
			t.Errorf("%s: group %s, categories %v", s.FullName(), group(s), c.Names())
		}
	})
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	data, err := docFiles.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
