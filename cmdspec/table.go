package cmdspec

import (
	"errors"
	"sort"
	"strings"
)

// Data is what the data files say of a command beyond its spec's fields
// (package cmddocs reads them): where its keys are, the ACL categories
// its flags do not imply, and its tips.
type Data struct {
	KeySpecs   []KeySpec
	Categories Category // as stated; Spec.Categories adds the implied ones
	Tips       []string
}

// Table is a set of commands: the server's, or a test's.
type Table struct {
	byName map[string]*Spec
	sorted []*Spec
	// all holds every spec, subcommands included, by id: top-level
	// commands in name order, each followed by its subcommands.
	all []*Spec
}

// NewTable indexes specs, attaching each, by full name, its data. It fails
// on a malformed spec, on a command without data, or on data without a
// command.
func NewTable(specs []*Spec, data map[string]*Data) (*Table, error) {
	t := &Table{byName: make(map[string]*Spec, len(specs))}
	used := map[string]bool{}
	for _, s := range specs {
		if _, dup := t.byName[s.Name]; dup {
			return nil, errors.New("duplicate command " + s.Name)
		}
		if err := s.prepare(nil, data, used); err != nil {
			return nil, err
		}
		t.byName[s.Name] = s
		t.sorted = append(t.sorted, s)
	}
	if len(used) < len(data) {
		var extra []string
		for name := range data {
			if !used[name] {
				extra = append(extra, name)
			}
		}
		sort.Strings(extra)
		return nil, errors.New("the data files have entries for commands the table lacks: " + strings.Join(extra, ", "))
	}
	sort.Slice(t.sorted, func(i, j int) bool { return t.sorted[i].Name < t.sorted[j].Name })
	for _, s := range t.sorted {
		s.id = len(t.all)
		t.all = append(t.all, s)
		for _, sub := range s.Sub {
			sub.id = len(t.all)
			t.all = append(t.all, sub)
		}
	}
	return t, nil
}

// Count returns the number of specs, subcommands and containers included.
func (t *Table) Count() int { return len(t.all) }

// ByID returns the spec whose id is id.
func (t *Table) ByID(id int) *Spec { return t.all[id] }

// Lookup finds a command by name, in any case, without allocating.
func (t *Table) Lookup(name []byte) *Spec {
	if len(name) > 32 {
		return nil
	}
	var buf [32]byte
	for i, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return t.byName[string(buf[:len(name)])]
}

// Specs returns every top-level command, sorted by name.
func (t *Table) Specs() []*Spec { return t.sorted }
