package commands

import (
	"math"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	"limitkv/engine"
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
	// RunsScript: EVAL and its kin, which take every shard lock themselves
	// once no other command is in flight. COMMAND does not show it.
	RunsScript
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
	Sub    []*Spec

	// Metadata COMMAND reports, as Redis 7.0 has it for its commands: ACL
	// categories and tips (space separated), key specs (which, when given,
	// also locate the keys of movable-key commands), and documentation
	// history and flags.
	ACL             string
	Tips            string
	KeySpecs        []KeySpec
	History         [][2]string
	DocFlags        string
	DeprecatedSince string
	ReplacedBy      string

	parent *Spec
	args   []*argDoc
	calls  stripedCounter
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

// KeySpec tells where a command's keys are, as Redis 7 key specs do: a
// begin index (-1: unknown), then either a range (LastKey relative to
// Begin, negative from the end) or a count argument (KeyNum).
type KeySpec struct {
	Flags, Notes        string
	Begin               int
	Keyword             string
	KeywordFrom         int
	LastKey, Limit      int
	KeyNum              bool
	KeyNumIdx, FirstKey int
	KeyStep             int
	Unknown             bool
}

// keySpecs returns the spec's key specs, deriving one from First, Last and
// Step for commands that give none.
func (s *Spec) keySpecs() []KeySpec {
	if len(s.KeySpecs) > 0 || s.First <= 0 {
		return s.KeySpecs
	}
	last := s.Last
	if last >= 0 {
		last -= s.First
	}
	flags := "RO access"
	if s.Flags&Write != 0 {
		flags = "RW access update"
	}
	return []KeySpec{{Flags: flags, Begin: s.First, LastKey: last, KeyStep: max(s.Step, 1)}}
}

// legacyKeyRange derives the first, last and step COMMAND reports from key
// specs, and whether the command has movable keys, as Redis 7.0's
// populateCommandLegacyRangeSpec does. A lone spec that begins at an index
// and finds a range is the range, whatever its step. Otherwise the range
// covers the specs of that kind which have a step of 1 and each begin just
// after the previous one ends; any other spec makes the keys movable, and
// so does an incomplete one. last counts from the end when negative.
func legacyKeyRange(specs []KeySpec) (first, last, step int, movable bool) {
	isRange := func(ks KeySpec) bool { return ks.Begin > 0 && !ks.KeyNum && !ks.Unknown }
	incomplete := func(ks KeySpec) bool { return slices.Contains(strings.Fields(ks.Flags), "incomplete") }
	abs := func(ks KeySpec) int { // the last key's index, or negative from the end
		if ks.LastKey >= 0 {
			return ks.Begin + ks.LastKey
		}
		return ks.LastKey
	}
	if len(specs) == 1 && isRange(specs[0]) {
		return specs[0].Begin, abs(specs[0]), specs[0].KeyStep, incomplete(specs[0])
	}
	first = math.MaxInt
	prevLast := 0
	for _, ks := range specs {
		if !isRange(ks) || ks.KeyStep != 1 || prevLast != 0 && prevLast != ks.Begin-1 {
			movable = true
			continue
		}
		if incomplete(ks) {
			movable = true
		}
		first = min(first, ks.Begin)
		// Compared unsigned, as Redis does: a last key counted from the
		// end is beyond any counted from the start.
		if uint(abs(ks)) > uint(last) {
			last = abs(ks)
		}
		prevLast = last
	}
	if first == math.MaxInt {
		return 0, 0, 0, movable
	}
	return first, last, 1, movable
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
	return keysOf(s.keySpecs(), args, out)
}

// keysOf appends the argument indexes that specs find in args.
func keysOf(specs []KeySpec, args [][]byte, out []int) []int {
	for _, ks := range specs {
		if ks.Unknown || ks.Begin <= 0 || ks.Begin >= len(args) {
			continue
		}
		step := max(ks.KeyStep, 1)
		if ks.KeyNum {
			at := ks.Begin + ks.KeyNumIdx
			if at >= len(args) {
				continue
			}
			n, ok := engine.ParseInt(args[at])
			first := ks.Begin + ks.FirstKey
			if !ok || n <= 0 || n > int64(len(args)-first) {
				continue
			}
			for i := 0; i < int(n); i++ {
				if p := first + i*step; p < len(args) {
					out = append(out, p)
				}
			}
			continue
		}
		last := ks.Begin + ks.LastKey
		if ks.LastKey < 0 {
			last = len(args) + ks.LastKey
		}
		for i := ks.Begin; i <= last && i < len(args); i += step {
			out = append(out, i)
		}
	}
	return out
}

// aclCategories returns the ACL categories COMMAND reports: Redis's own for
// its commands, derived from flags and group for limitkv's.
func (s *Spec) aclCategories() []string {
	if s.ACL != "" {
		return strings.Fields(s.ACL)
	}
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
	"sorted-set": "@sortedset", "set": "@set", "bitmap": "@bitmap",
	"connection": "@connection", "transactions": "@transaction",
	"scripting": "@scripting", "ratelimit": "@ratelimit",
}
