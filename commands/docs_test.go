package commands

import (
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// TestDocsMatchTable checks that the data files parse, that every command
// and subcommand of the table has an entry and every entry a command.
func TestDocsMatchTable(t *testing.T) {
	d, err := loadDocs()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newTable(commandTable(), d); err != nil {
		t.Fatal(err)
	}
	n := 0
	forEachSpec(t, func(*Spec) { n++ })
	if n != len(d) {
		t.Errorf("%d commands, %d entries", n, len(d))
	}
}

const demoEntry = `"summary": "Demo", "since": "0.1.0", "group": "ratelimit", "complexity": "O(1)"`

// TestDocsErrors checks that a malformed file, or a table and data that
// do not match, are refused with a message naming the problem.
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

	docs, err := parseDocs(fstest.MapFS{"docs/x.json": {Data: []byte(`{
		"x": {` + demoEntry + `, "arguments": "key [COUNT count]"},
		"y": {` + demoEntry + `, "arguments": "key ["}
	}`)}})
	if err != nil {
		t.Fatal(err)
	}
	row := func(name string, f Flag) *Spec { return &Spec{Name: name, Arity: 2, Flags: f, Run: cmdPing} }
	tables := []struct {
		name  string
		specs []*Spec
		want  string
	}{
		{"no data", []*Spec{row("x", 0), row("z", 0)}, "command z has no entry"},
		{"no command", []*Spec{row("x", 0)}, "entries for commands the table lacks: y"},
		{"bad syntax", []*Spec{row("y", 0), row("x", 0)}, "command y: syntax"},
		{"movable stated", []*Spec{row("x", Movable), row("y", 0)}, "movablekeys is derived"},
		{"upper case", []*Spec{row("X", 0)}, "lower case"},
		{"duplicate", []*Spec{row("x", 0), row("x", 0)}, "duplicate command x"},
	}
	for _, c := range tables {
		_, err := newTable(c.specs, docs)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got error %v, want %q", c.name, err, c.want)
		}
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
	specs := []*Spec{{
		Name:  "rl.demo",
		Arity: -3,
		Flags: Write | Fast,
		Run:   cmdPing,
	}}
	for _, s := range commandTable() {
		if docs[s.Name] != nil {
			specs = append(specs, s)
		}
	}
	tab, err := newTable(specs, docs)
	if err != nil {
		t.Fatal(err)
	}
	s := tab.Lookup([]byte("RL.DEMO"))
	if s == nil {
		t.Fatal("rl.demo not found")
	}
	if s.first != 1 || s.last != 2 || s.step != 1 || s.Flags&Movable != 0 {
		t.Errorf("key range %d %d %d movable %v, want 1 2 1 false", s.first, s.last, s.step, s.Flags&Movable != 0)
	}
	if got := s.Categories().Names(); !slices.Equal(got, []string{"write", "ratelimit", "fast"}) {
		t.Errorf("categories %v", got)
	}
	if got := renderSyntax(s.args); got != "key other_key [WINDOW window]" {
		t.Errorf("syntax %q", got)
	}
	if got := s.keyPositions([][]byte{[]byte("rl.demo"), []byte("a"), []byte("b")}, nil); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("keys at %v", got)
	}
}

// TestCategories checks the category names and what the ACL work will rely
// on: every command is in exactly one of @fast and @slow, and the
// rate-limit commands are in @ratelimit.
func TestCategories(t *testing.T) {
	for i, name := range categoryNames {
		// The array has a slot for every category: a missing name is "".
		if name == "" {
			t.Fatalf("category bit %d has no name", i)
		}
		if c := CategoryByName(name); c != 1<<i || !slices.Equal(c.Names(), []string{name}) {
			t.Errorf("%s: bit %b", name, c)
		}
	}
	if CategoryByName("@read") != 0 || CategoryByName("nosuch") != 0 {
		t.Error("CategoryByName takes bare lower-case names only")
	}
	forEachSpec(t, func(s *Spec) {
		c := s.Categories()
		if (c&CatFast != 0) == (c&CatSlow != 0) {
			t.Errorf("%s: categories %v", s.FullName(), c.Names())
		}
		if rl := s.group() == "ratelimit"; rl != (c&CatRateLimit != 0) {
			t.Errorf("%s: group %s, categories %v", s.FullName(), s.group(), c.Names())
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
