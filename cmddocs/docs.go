// Package cmddocs holds the data files: what Redis publishes about each
// command beyond its name, arity and flags, for limitkv's commands. Part
// of it is the command's specification, which package cmdspec takes (key
// specs, ACL categories, tips: COMMAND INFO); the rest is documentation,
// which this package renders (COMMAND DOCS, and the command list of
// docs/command-list.md). It knows the commands only through their specs.
package cmddocs

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"sync"

	"github.com/limitkv/limitkv/cmdspec"
)

// The data files cmddocs/docs/*.json hold what Redis publishes about each
// command apart from its name, arity and flags: the documentation COMMAND
// DOCS returns, and the key specs, ACL categories and tips COMMAND INFO
// returns. The Go rows of package commands' families hold the rest. (They
// are not the hand-written pages of the repository's docs/ directory.)
//
// Each file is one JSON object whose keys are full command names ("get",
// "client|list") and whose values have these fields, in COMMAND DOCS's
// order (optional ones may be left out):
//
//	summary, since, complexity    strings
//	group                         string; a subcommand has none and takes
//	                              its container's
//	doc_flags                     optional, e.g. ["deprecated"]
//	deprecated_since, replaced_by optional strings
//	history                       optional [[version, text], ...]
//	arguments                     optional, the argument syntax in the
//	                              notation syntax.go describes
//	key_specs                     optional, as Redis's command JSON files
//	                              have them, flags as COMMAND shows them:
//	                              {"notes": "...", "flags": ["RW", "access"],
//	                               "begin_search": {"index": {"pos": 1}}
//	                                 or {"keyword": {"keyword": "STORE", "startfrom": 1}}
//	                                 or {"unknown": {}},
//	                               "find_keys": {"range": {"lastkey": 0, "step": 1, "limit": 0}}
//	                                 or {"keynum": {"keynumidx": 0, "firstkey": 1, "step": 1}}
//	                                 or {"unknown": {}}}
//	acl_categories                optional, only the categories the flags
//	                              do not imply (see cmdspec's
//	                              implicitCategories), e.g. ["@string"]
//	tips                          optional, e.g. ["nondeterministic_output"]
//	help                          a container's HELP entry only: the lines
//	                              HELP answers between Redis's header and
//	                              footer
//
// The files are grouped as the rows are: a row registered in
// commands/strings.go has its entry in docs/strings.json. COMMAND's legacy key
// range (first, last, step) and the movablekeys flag are derived from the
// key specs (cmdspec's legacyKeyRange); a command's full ACL categories
// from these and its flags.
//
//go:embed docs/*.json
var docFiles embed.FS

// Doc is one command's entry in the data files.
type Doc struct {
	Summary         string
	Since           string
	Group           string
	Complexity      string
	DocFlags        []string
	DeprecatedSince string
	ReplacedBy      string
	History         [][2]string
	Args            []*Arg // the arguments, parsed
	// Help is the text a container's HELP subcommand answers, between
	// Redis's header and footer; the data files give it only on HELP's
	// entry ("client|help").
	Help []string
	// Spec is what the command's spec takes from the entry: key specs,
	// ACL categories, tips.
	Spec cmdspec.Data
}

// docJSON is an entry as the files spell it.
type docJSON struct {
	Summary         string        `json:"summary"`
	Since           string        `json:"since"`
	Group           string        `json:"group"`
	Complexity      string        `json:"complexity"`
	DocFlags        []string      `json:"doc_flags"`
	DeprecatedSince string        `json:"deprecated_since"`
	ReplacedBy      string        `json:"replaced_by"`
	History         [][2]string   `json:"history"`
	Arguments       string        `json:"arguments"`
	KeySpecs        []keySpecJSON `json:"key_specs"`
	ACLCategories   []string      `json:"acl_categories"`
	Tips            []string      `json:"tips"`
	Help            []string      `json:"help"`
}

type keySpecJSON struct {
	Notes       string   `json:"notes"`
	Flags       []string `json:"flags"`
	BeginSearch struct {
		Index *struct {
			Pos int `json:"pos"`
		} `json:"index"`
		Keyword *struct {
			Keyword   string `json:"keyword"`
			StartFrom int    `json:"startfrom"`
		} `json:"keyword"`
		Unknown *struct{} `json:"unknown"`
	} `json:"begin_search"`
	FindKeys struct {
		Range *struct {
			LastKey int `json:"lastkey"`
			Step    int `json:"step"`
			Limit   int `json:"limit"`
		} `json:"range"`
		KeyNum *struct {
			KeyNumIdx int `json:"keynumidx"`
			FirstKey  int `json:"firstkey"`
			Step      int `json:"step"`
		} `json:"keynum"`
		Unknown *struct{} `json:"unknown"`
	} `json:"find_keys"`
}

// keySpecFlags are the key-spec flags Redis 7.0 defines, as COMMAND shows
// them.
var keySpecFlags = []string{"RO", "RW", "OW", "RM", "access", "update", "insert",
	"delete", "not_key", "incomplete", "variable_flags"}

// Docs are the entries of the data files, by full command name ("get",
// "client|list").
type Docs map[string]*Doc

// load parses the embedded data files, once.
var load = sync.OnceValues(func() (Docs, error) { return Parse(docFiles) })

// Load returns the entries of the embedded data files. It panics if they
// are malformed: a programming error, which the tests catch.
func Load() Docs {
	d, err := load()
	if err != nil {
		panic(err)
	}
	return d
}

// SpecData returns what the commands' specs take from the entries, by
// full name, for cmdspec.NewTable.
func (d Docs) SpecData() map[string]*cmdspec.Data {
	data := make(map[string]*cmdspec.Data, len(d))
	for name, e := range d {
		data[name] = &e.Spec
	}
	return data
}

// Of returns the entry of s, a command of a table made with d's SpecData.
func (d Docs) Of(s *cmdspec.Spec) *Doc { return d[s.FullName()] }

// Group is the command's group; a subcommand's is its container's.
func (d Docs) Group(s *cmdspec.Spec) string {
	if g := d.Of(s).Group; g != "" || s.Parent() == nil {
		return g
	}
	return d.Of(s.Parent()).Group
}

// Parse reads every docs/*.json of fsys into entries by full name.
func Parse(fsys fs.FS) (Docs, error) {
	names, err := fs.Glob(fsys, "docs/*.json")
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, errors.New("no docs/*.json")
	}
	out := Docs{}
	for _, name := range names {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		if err := parseDocFile(data, out); err != nil {
			return nil, fmt.Errorf("cmddocs/%s: %w", name, err)
		}
	}
	return out, nil
}

// parseDocFile adds the entries of one file to out. Unknown fields,
// duplicate names and anything after the object are errors.
func parseDocFile(data []byte, out Docs) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return errors.New("not a JSON object")
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		name := t.(string)
		if _, dup := out[name]; dup {
			return fmt.Errorf("%s: entered twice", name)
		}
		var j docJSON
		if err := dec.Decode(&j); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		d, err := j.doc(strings.Contains(name, "|"))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		out[name] = d
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the object")
	}
	return nil
}

// doc checks an entry and converts it.
func (j *docJSON) doc(sub bool) (*Doc, error) {
	switch {
	case j.Summary == "" || j.Since == "":
		// Complexity may be left out, as Redis leaves it out for PSYNC
		// and SYNC.
		return nil, errors.New("summary and since are required")
	case sub && j.Group != "":
		return nil, errors.New("a subcommand takes its container's group")
	case !sub && j.Group == "":
		return nil, errors.New("group is required")
	case !sub && j.Help != nil:
		return nil, errors.New("help is a HELP subcommand's")
	}
	for _, f := range j.DocFlags {
		if f != "deprecated" && f != "syscmd" {
			return nil, fmt.Errorf("unknown doc flag %q", f)
		}
	}
	args, err := parseSyntax(j.Arguments)
	if err != nil {
		return nil, err
	}
	d := &Doc{Summary: j.Summary, Since: j.Since, Group: j.Group, Complexity: j.Complexity,
		DocFlags: j.DocFlags, DeprecatedSince: j.DeprecatedSince, ReplacedBy: j.ReplacedBy,
		History: j.History, Args: args, Help: j.Help, Spec: cmdspec.Data{Tips: j.Tips}}
	for _, name := range j.ACLCategories {
		c := cmdspec.CategoryByName(strings.TrimPrefix(name, "@"))
		if c == 0 || !strings.HasPrefix(name, "@") {
			return nil, fmt.Errorf("unknown ACL category %q", name)
		}
		d.Spec.Categories |= c
	}
	for i, ks := range j.KeySpecs {
		k, err := ks.keySpec()
		if err != nil {
			return nil, fmt.Errorf("key spec %d: %w", i, err)
		}
		d.Spec.KeySpecs = append(d.Spec.KeySpecs, k)
	}
	return d, nil
}

func (j *keySpecJSON) keySpec() (cmdspec.KeySpec, error) {
	if len(j.Flags) == 0 {
		return cmdspec.KeySpec{}, errors.New("no flags")
	}
	for _, f := range j.Flags {
		if !slices.Contains(keySpecFlags, f) {
			return cmdspec.KeySpec{}, fmt.Errorf("unknown flag %q", f)
		}
	}
	k := cmdspec.KeySpec{Flags: strings.Join(j.Flags, " "), Notes: j.Notes, Begin: -1}
	bs, fk := &j.BeginSearch, &j.FindKeys
	if count(bs.Index != nil, bs.Keyword != nil, bs.Unknown != nil) != 1 {
		return cmdspec.KeySpec{}, errors.New("begin_search needs exactly one of index, keyword, unknown")
	}
	if count(fk.Range != nil, fk.KeyNum != nil, fk.Unknown != nil) != 1 {
		return cmdspec.KeySpec{}, errors.New("find_keys needs exactly one of range, keynum, unknown")
	}
	switch {
	case bs.Index != nil:
		if bs.Index.Pos < 1 {
			return cmdspec.KeySpec{}, errors.New("begin_search index below 1")
		}
		k.Begin = bs.Index.Pos
	case bs.Keyword != nil:
		if bs.Keyword.Keyword == "" {
			return cmdspec.KeySpec{}, errors.New("begin_search keyword without a keyword")
		}
		k.Keyword, k.KeywordFrom = bs.Keyword.Keyword, bs.Keyword.StartFrom
	}
	switch {
	case fk.Range != nil:
		k.LastKey, k.KeyStep, k.Limit = fk.Range.LastKey, fk.Range.Step, fk.Range.Limit
	case fk.KeyNum != nil:
		k.KeyNum = true
		k.KeyNumIdx, k.FirstKey, k.KeyStep = fk.KeyNum.KeyNumIdx, fk.KeyNum.FirstKey, fk.KeyNum.Step
	default:
		k.Unknown = true
	}
	if !k.Unknown && k.KeyStep < 1 {
		return cmdspec.KeySpec{}, errors.New("find_keys step below 1")
	}
	return k, nil
}

func count(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
