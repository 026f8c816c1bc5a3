package commands

import (
	"limitkv/engine"
	"sort"
	"strings"
	"sync/atomic"
)

// Flag is a command attribute, as COMMAND reports it.
type Flag uint32

const (
	Write Flag = 1 << iota
	ReadOnly
	DenyOOM
	Admin
	NoScript
	Loading
	Stale
	Fast
	NoAuth
	NoMulti
	AllowBusy
	SkipSlowlog
	// Movable: key positions depend on the arguments (Spec.Keys finds them).
	Movable
	// SelfLock: dispatch takes no shard lock; the handler locks what it
	// needs (whole-keyspace commands, WATCH, EXEC, scripts).
	SelfLock
	// Protected: refused unless enabled at start-up (DEBUG).
	Protected
	PubSub
	Blocking
	SkipMonitor
	NoMandatoryKeys
	NoAsyncLoading
)

// flagNames lists the flags COMMAND shows, in the order Redis shows them.
var flagNames = []struct {
	f    Flag
	name string
}{
	{Write, "write"}, {ReadOnly, "readonly"}, {DenyOOM, "denyoom"}, {Admin, "admin"},
	{PubSub, "pubsub"}, {NoScript, "noscript"}, {Blocking, "blocking"}, {Loading, "loading"},
	{Stale, "stale"}, {SkipMonitor, "skip_monitor"}, {SkipSlowlog, "skip_slowlog"},
	{Fast, "fast"}, {NoAuth, "no_auth"}, {NoMandatoryKeys, "no_mandatory_keys"},
	{NoAsyncLoading, "no_async_loading"}, {NoMulti, "no_multi"}, {Movable, "movablekeys"},
	{AllowBusy, "allow_busy"},
}

// Spec describes one command or subcommand. The table of Specs drives
// dispatch, the arity check, COMMAND's replies and the command reference.
type Spec struct {
	Name  string // lower case; a subcommand's is its own word ("setname")
	Arity int    // as Redis: n exactly n arguments, -n at least n (name included)
	Flags Flag
	// Key positions: first and last argument index holding a key (last -1
	// for "to the end") and the step between keys.
	First, Last, Step int
	Group             string // "string", "generic", "connection", ...
	Since             string
	Summary           string
	Complexity        string
	// Syntax lists the arguments after the name, in Redis's documentation
	// style; COMMAND DOCS and redis-cli's hints are generated from it.
	Syntax string
	Run    func(*Ctx)
	// NumKeysAt is the index of a "numkeys" argument followed by that many
	// keys (EVAL, ZUNIONSTORE), for commands flagged Movable.
	NumKeysAt int
	Sub       []*Spec

	parent *Spec
	args   []*argDoc
	calls  atomic.Int64
	failed atomic.Int64
	reject atomic.Int64
}

// FullName is the name Redis uses in errors and stats: "get", "client|list".
func (s *Spec) FullName() string {
	if s.parent != nil {
		return s.parent.Name + "|" + s.Name
	}
	return s.Name
}

// Table is the set of commands the server knows.
type Table struct {
	byName map[string]*Spec
	sorted []*Spec
}

// NewTable indexes specs, parsing their syntax. It panics on a malformed
// table, which is a programming error caught by the tests.
func NewTable(specs []*Spec) *Table {
	t := &Table{byName: make(map[string]*Spec, len(specs))}
	for _, s := range specs {
		if _, dup := t.byName[s.Name]; dup {
			panic("duplicate command " + s.Name)
		}
		s.prepare(nil)
		t.byName[s.Name] = s
		t.sorted = append(t.sorted, s)
	}
	sort.Slice(t.sorted, func(i, j int) bool { return t.sorted[i].Name < t.sorted[j].Name })
	return t
}

func (s *Spec) prepare(parent *Spec) {
	if s.Name != strings.ToLower(s.Name) {
		panic("command names are lower case: " + s.Name)
	}
	s.parent = parent
	args, err := parseSyntax(s.Syntax)
	if err != nil {
		panic("command " + s.FullName() + ": " + err.Error())
	}
	s.args = args
	for _, sub := range s.Sub {
		sub.prepare(s)
	}
}

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

// lookupSub finds a subcommand of s by name, in any case.
func (s *Spec) lookupSub(name []byte) *Spec {
	for _, sub := range s.Sub {
		if len(sub.Name) == len(name) && strings.EqualFold(sub.Name, string(name)) {
			return sub
		}
	}
	return nil
}

// arityOK checks the number of arguments, name included.
func (s *Spec) arityOK(n int) bool {
	if s.Arity >= 0 {
		return n == s.Arity
	}
	return n >= -s.Arity
}

// keyPositions returns the argument indexes of the keys in args.
func (s *Spec) keyPositions(args [][]byte, out []int) []int {
	if s.First > 0 {
		last := s.Last
		if last < 0 {
			last = len(args) + last
		}
		step := max(s.Step, 1)
		for i := s.First; i <= last && i < len(args); i += step {
			out = append(out, i)
		}
	}
	if at := s.NumKeysAt; at > 0 && at < len(args) {
		n, ok := engine.ParseInt(args[at])
		if ok && n > 0 && n < int64(len(args)-at) {
			for i := 1; i <= int(n); i++ {
				out = append(out, at+i)
			}
		}
	}
	return out
}

// aclCategories derives the ACL categories COMMAND reports.
func (s *Spec) aclCategories() []string {
	var cats []string
	if s.Flags&Write != 0 {
		cats = append(cats, "@write")
	}
	if s.Flags&ReadOnly != 0 {
		cats = append(cats, "@read")
	}
	if c, ok := groupCategory[s.group()]; ok {
		cats = append(cats, c)
	}
	if s.Flags&Admin != 0 {
		cats = append(cats, "@admin", "@dangerous")
	}
	if s.Flags&Fast != 0 {
		cats = append(cats, "@fast")
	} else {
		cats = append(cats, "@slow")
	}
	return cats
}

func (s *Spec) group() string {
	if s.Group == "" && s.parent != nil {
		return s.parent.Group
	}
	return s.Group
}

var groupCategory = map[string]string{
	"string": "@string", "generic": "@keyspace", "list": "@list", "hash": "@hash",
	"sorted_set": "@sortedset", "set": "@set", "bitmap": "@bitmap",
	"connection": "@connection", "transactions": "@transaction",
	"scripting": "@scripting", "ratelimit": "@ratelimit",
}
