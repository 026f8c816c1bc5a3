package cmdspec

import (
	"slices"
	"strings"
	"testing"
)

// TestTableErrors checks that a table and data that do not match, or a
// malformed spec, are refused with a message naming the problem.
func TestTableErrors(t *testing.T) {
	data := map[string]*Data{"x": {}, "y": {}}
	row := func(name string, f Flag) *Spec { return &Spec{Name: name, Arity: 2, Flags: f} }
	for _, c := range []struct {
		name  string
		specs []*Spec
		want  string
	}{
		{"no data", []*Spec{row("x", 0), row("y", 0), row("z", 0)}, "command z has no entry"},
		{"no command", []*Spec{row("x", 0)}, "entries for commands the table lacks: y"},
		{"movable stated", []*Spec{row("x", Movable), row("y", 0)}, "movablekeys is derived"},
		{"upper case", []*Spec{row("X", 0)}, "lower case"},
		{"duplicate", []*Spec{row("x", 0), row("x", 0)}, "duplicate command x"},
	} {
		_, err := NewTable(c.specs, data)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got error %v, want %q", c.name, err, c.want)
		}
	}
}

// TestTableDerives checks what NewTable derives from a spec and its data:
// ids in name order with subcommands after their container, the legacy
// key range and movablekeys, the implied categories, and where the keys
// are.
func TestTableDerives(t *testing.T) {
	rng := func(begin, last int, flags string) KeySpec {
		return KeySpec{Flags: flags, Begin: begin, LastKey: last, KeyStep: 1}
	}
	data := map[string]*Data{
		"copy":       {KeySpecs: []KeySpec{rng(1, 0, "RO access"), rng(2, 0, "OW update")}, Categories: CatKeyspace},
		"eval":       {KeySpecs: []KeySpec{{Flags: "RW access update", Begin: 2, KeyNum: true, FirstKey: 1, KeyStep: 1}}, Categories: CatScripting},
		"ping":       {Categories: CatConnection, Tips: []string{"request_policy:all_shards"}},
		"spublish":   {KeySpecs: []KeySpec{{Flags: "not_key", Begin: 1, KeyStep: 1}}},
		"client":     {},
		"client|id":  {Categories: CatConnection},
		"client|foo": {},
	}
	tab, err := NewTable([]*Spec{
		{Name: "ping", Arity: -1, Flags: Fast},
		{Name: "copy", Arity: -3, Flags: Write | DenyOOM},
		{Name: "client", Arity: -2, Sub: []*Spec{{Name: "id", Arity: 2}, {Name: "foo", Arity: 2, Flags: Admin}}},
		{Name: "eval", Arity: -3, Flags: NoScript},
		{Name: "spublish", Arity: 3, Flags: PubSub | Fast},
	}, data)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for id := range tab.Count() {
		s := tab.ByID(id)
		if s.ID() != id {
			t.Errorf("%s: id %d at %d", s.FullName(), s.ID(), id)
		}
		names = append(names, s.FullName())
	}
	if want := []string{"client", "client|id", "client|foo", "copy", "eval", "ping", "spublish"}; !slices.Equal(names, want) {
		t.Errorf("ids %v, want %v", names, want)
	}
	get := func(name string) *Spec { return tab.Lookup([]byte(strings.ToUpper(name))) }
	if sub := get("client").LookupSub([]byte("FOO")); sub == nil || sub.Parent() != get("client") || sub.FullName() != "client|foo" {
		t.Errorf("client|foo: %v", sub)
	}
	if first, last, step := get("copy").KeyRange(); first != 1 || last != 2 || step != 1 || get("copy").Flags&Movable != 0 {
		t.Errorf("copy: key range %d %d %d, flags %v", first, last, step, get("copy").Flags.Names())
	}
	if get("eval").Flags&Movable == 0 || !slices.Equal(get("eval").Flags.Names(), []string{"noscript", "movablekeys"}) {
		t.Errorf("eval: flags %v", get("eval").Flags.Names())
	}
	for _, c := range []struct {
		name string
		want []string
	}{
		{"ping", []string{"fast", "connection"}},
		{"copy", []string{"keyspace", "write", "slow"}},
		{"client|foo", []string{"admin", "slow", "dangerous"}},
		{"spublish", []string{"pubsub", "fast"}},
	} {
		base, sub, _ := strings.Cut(c.name, "|")
		s := get(base)
		if sub != "" {
			s = s.LookupSub([]byte(sub))
		}
		if got := s.Categories().Names(); !slices.Equal(got, c.want) {
			t.Errorf("%s: categories %v, want %v", c.name, got, c.want)
		}
	}
	if !slices.Equal(get("ping").Tips(), []string{"request_policy:all_shards"}) {
		t.Errorf("ping: tips %v", get("ping").Tips())
	}
	args := func(s string) [][]byte {
		var out [][]byte
		for _, f := range strings.Fields(s) {
			out = append(out, []byte(f))
		}
		return out
	}
	for _, c := range []struct {
		cmd  string
		want []int
	}{
		{"copy a b", []int{1, 2}},
		{"eval s 2 a b c", []int{3, 4}},
		{"eval s 02 a b c", nil}, // numkeys is read as Redis's string2ll does
		{"eval s 3 a b", nil},
		{"spublish ch msg", nil}, // not_key: no key, no lock
		{"ping", nil},
	} {
		a := args(c.cmd)
		if got := get(string(a[0])).KeyPositions(a, nil); !slices.Equal(got, c.want) {
			t.Errorf("%s: keys at %v, want %v", c.cmd, got, c.want)
		}
	}
	if get("spublish").HasKeys() || !get("copy").HasKeys() {
		t.Error("HasKeys")
	}
	if got := get("copy").KeyFlagsAt(args("copy a b"), 2); got != "OW update" {
		t.Errorf("copy's second key: flags %q", got)
	}
}
