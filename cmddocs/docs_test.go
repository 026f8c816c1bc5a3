package cmddocs

import (
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/limitkv/limitkv/cmdspec"
)

// TestLoad checks that the embedded data files parse and that every
// subcommand's entry has its container's.
func TestLoad(t *testing.T) {
	d := Load()
	for name := range d {
		if base, _, ok := strings.Cut(name, "|"); ok && d[base] == nil {
			t.Errorf("%s: no entry for %s", name, base)
		}
	}
	if len(d) < 200 || d["get"] == nil || d["client|list"] == nil {
		t.Errorf("%d entries", len(d))
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
		_, err := Parse(fstest.MapFS{"docs/x.json": {Data: []byte(c.file)}})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "cmddocs/docs/x.json") {
			t.Errorf("%s: got error %v, want one naming the file and saying %q", c.name, err, c.want)
		}
	}
	if _, err := Parse(fstest.MapFS{}); err == nil {
		t.Error("no data files: no error")
	}
	twoFiles := fstest.MapFS{
		"docs/a.json": {Data: []byte(`{"x": {` + demoEntry + `}}`)},
		"docs/b.json": {Data: []byte(`{"x": {` + demoEntry + `}}`)},
	}
	if _, err := Parse(twoFiles); err == nil || !strings.Contains(err.Error(), "x: entered twice") {
		t.Errorf("an entry in two files: got %v", err)
	}
}

// recorder is a Writer that spells out what it is given.
type recorder struct{ strings.Builder }

func (r *recorder) Map(n int)           { fmt.Fprintf(r, "%%%d ", n) }
func (r *recorder) Array(n int)         { fmt.Fprintf(r, "*%d ", n) }
func (r *recorder) Set(n int)           { fmt.Fprintf(r, "~%d ", n) }
func (r *recorder) BulkString(s string) { fmt.Fprintf(r, "%q ", s) }
func (r *recorder) Simple(s string)     { fmt.Fprintf(r, "+%s ", s) }
func (r *recorder) Int(n int64)         { fmt.Fprintf(r, ":%d ", n) }

// TestWrite checks a COMMAND DOCS entry made from an entry's fields and
// its argument syntax, and the reference line of the same command.
func TestWrite(t *testing.T) {
	docs, err := Parse(fstest.MapFS{"docs/x.json": {Data: []byte(`{
		"x.set": {"summary": "Set", "since": "1.0.0", "group": "string", "complexity": "O(1)",
			"history": [["2.0.0", "Added GET."]],
			"arguments": "key value [condition=NX|XX] [GET@2.0.0] [EX seconds]"},
		"x.cont": {"summary": "Container", "since": "1.0.0", "group": "server"},
		"x.cont|help": {"summary": "Help", "since": "1.0.0", "doc_flags": ["syscmd"]}
	}`)}})
	if err != nil {
		t.Fatal(err)
	}
	tab, err := cmdspec.NewTable([]*cmdspec.Spec{
		{Name: "x.set", Arity: -3},
		{Name: "x.cont", Arity: -2, Sub: []*cmdspec.Spec{{Name: "help", Arity: 2}}},
	}, docs.SpecData())
	if err != nil {
		t.Fatal(err)
	}
	var r recorder
	docs.Write(&r, tab.Lookup([]byte("x.set")))
	want := `%6 "summary" "Set" "since" "1.0.0" "group" "string" "complexity" "O(1)" ` +
		`"history" *1 *2 "2.0.0" "Added GET." ` +
		`"arguments" *5 %3 "name" "key" "type" "key" "key_spec_index" :0 %2 "name" "value" "type" "string" ` +
		`%4 "name" "condition" "type" "oneof" "flags" ~1 +optional "arguments" *2 ` +
		`%3 "name" "nx" "type" "pure-token" "token" "NX" %3 "name" "xx" "type" "pure-token" "token" "XX" ` +
		`%5 "name" "get" "type" "pure-token" "token" "GET" "since" "2.0.0" "flags" ~1 +optional ` +
		`%4 "name" "seconds" "type" "integer" "token" "EX" "flags" ~1 +optional `
	if got := r.String(); got != want {
		t.Errorf("COMMAND DOCS x.set:\n got %s\nwant %s", got, want)
	}
	r.Reset()
	docs.Write(&r, tab.Lookup([]byte("x.cont")))
	want = `%4 "summary" "Container" "since" "1.0.0" "group" "server" "subcommands" %1 ` +
		`"x.cont|help" %4 "summary" "Help" "since" "1.0.0" "group" "server" "doc_flags" ~1 +syscmd `
	if got := r.String(); got != want {
		t.Errorf("COMMAND DOCS x.cont:\n got %s\nwant %s", got, want)
	}
	if got, want := Syntax(docs["x.set"].Args), "key value [NX | XX] [GET] [EX seconds]"; got != want {
		t.Errorf("syntax %q, want %q", got, want)
	}
}
