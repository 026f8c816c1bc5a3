package commands

import (
	"errors"
	"math"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/limitkv/limitkv/engine"
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
	// Movable: key positions depend on the arguments. NewTable derives it
	// from the key specs; rows do not state it.
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
	// AsIs: replicated as the command itself rather than as the states
	// of the keys it changed (replication.go): a command whose result
	// depends only on its keys' values, not on the time or chance, and
	// whose keys may be large (LPUSH on a long list). COMMAND does not
	// show it.
	AsIs
	// TTLOnly: changes only its keys' expiry (EXPIRE and its kin), which
	// is all it replicates: PEXPIREAT, PERSIST or the key's deletion.
	TTLOnly
	// MayWait: may wait for something other than a shard's lock (the
	// disk, a timer, another client, the network), so it never runs on an
	// event loop, where it would hold up every connection of the loop
	// (Server.Inline). Blocking commands, scripts, pub/sub and the
	// commands that need no authentication (AUTH's penalty sleeps) are
	// counted as waiting without saying so. So are commands whose run
	// time a client drives (SORT of a million elements). COMMAND does not
	// show it.
	MayWait
	// MayReplicate: not a write, but may send something to replicas:
	// PFCOUNT (it caches the count in the string), PUBLISH and SPUBLISH
	// (the message), EVAL, EVALSHA and FCALL (their scripts may write).
	// As Redis's CMD_MAY_REPLICATE: a WRITE pause holds them back with
	// the writes, and read-only scripts refuse them as writes. A script
	// or function that declares its flags loses it (commandFlags).
	// COMMAND does not show it.
	MayReplicate
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
// A row of table.go states the fields a Go reader needs; NewTable attaches
// the command's entry in the data files (docs.go) and derives the rest.
type Spec struct {
	Name  string // lower case; a subcommand's is its own word ("setname")
	Arity int    // as Redis: n exactly n arguments, -n at least n (name included)
	Flags Flag   // Movable is derived from the key specs, not stated
	Run   func(*Ctx)
	// Prepare, if set, reads and checks the request's arguments before
	// dispatch takes the shard locks of its keys, keeping what Run needs
	// in the client's scratch; Run then replies, a refusal included. Work
	// that may be slow (RL.FIXED's TZ loads a zone's rules the first time)
	// so never runs under a lock that other clients, and the other
	// connections of an event loop, wait for. Inside EXEC and scripts,
	// where the locks are held already, it runs just before Run.
	Prepare func(*Ctx)
	Sub     []*Spec
	// Keys, for a command some of whose keys no key spec can find (SORT's
	// STORE), is Redis's getkeys_proc: it finds every key of args, for
	// dispatch's locks, ACL checks and COMMAND GETKEYS.
	Keys func(args [][]byte, out []KeyRef) []KeyRef
	// LockAll, if set, tells whether a request reads keys that no
	// argument names (SORT's BY and GET patterns): dispatch then locks
	// every shard.
	LockAll func(args [][]byte) bool

	parent *Spec
	doc    *cmdDoc
	args   []*argDoc
	// first, last, step: the legacy key range COMMAND reports, derived
	// from the key specs.
	first, last, step int
	// keyed: some key spec finds keys, not only not_key arguments.
	keyed bool
	acl   Category
	// id numbers the spec within its table (subcommands and containers
	// included), for the users' bitmaps of allowed commands.
	id int
	// keyNeed is, per key spec, the permission ACL rules must grant for
	// the keys it finds (aclRead, aclWrite: see aclNeedOf).
	keyNeed []uint8
	// channels tells which arguments are Pub/Sub channels that ACL rules
	// restrict (PUBLISH, SUBSCRIBE, ...); zero for other commands.
	channels chanSpec
	calls    callCounter
	failed   atomic.Int64
	reject   atomic.Int64
	hist     latencyHist

	// absentSub are the subcommands Redis has and limitkv does not, for
	// ACL rules only (aclabsent.go).
	absentSub []*Spec
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
	// all holds every spec, subcommands included, by id: top-level
	// commands in name order, each followed by its subcommands.
	all []*Spec
	// absent are the Redis commands limitkv does not implement, for ACL
	// rules only, with ids after all's (aclabsent.go).
	absent       []*Spec
	absentByName map[string]*Spec
}

// NewTable indexes specs, attaching each its entry in the data files and
// parsing its syntax. It panics on a malformed table or data file, or on a
// command without data or data without a command: programming errors the
// tests catch.
func NewTable(specs []*Spec) *Table {
	d, err := loadDocs()
	if err == nil {
		var t *Table
		if t, err = newTable(specs, d); err == nil {
			return t
		}
	}
	panic(err)
}

func newTable(specs []*Spec, docs map[string]*cmdDoc) (*Table, error) {
	t := &Table{byName: make(map[string]*Spec, len(specs))}
	used := map[string]bool{}
	for _, s := range specs {
		if _, dup := t.byName[s.Name]; dup {
			return nil, errors.New("duplicate command " + s.Name)
		}
		if err := s.prepare(nil, docs, used); err != nil {
			return nil, err
		}
		t.byName[s.Name] = s
		t.sorted = append(t.sorted, s)
	}
	if len(used) < len(docs) {
		var extra []string
		for name := range docs {
			if !used[name] {
				extra = append(extra, name)
			}
		}
		sort.Strings(extra)
		return nil, errors.New("commands/docs has entries for commands the table lacks: " + strings.Join(extra, ", "))
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
	t.addAbsent()
	return t, nil
}

// Count returns the number of specs, subcommands and containers included.
func (t *Table) Count() int { return len(t.all) }

func (s *Spec) prepare(parent *Spec, docs map[string]*cmdDoc, used map[string]bool) error {
	if s.Name != strings.ToLower(s.Name) {
		return errors.New("command names are lower case: " + s.Name)
	}
	s.parent = parent
	name := s.FullName()
	if used[name] {
		return errors.New("duplicate command " + name)
	}
	s.doc = docs[name]
	if s.doc == nil {
		return errors.New("command " + name + " has no entry in commands/docs/*.json")
	}
	used[name] = true
	if s.Flags&Movable != 0 {
		return errors.New("command " + name + ": movablekeys is derived from the key specs, not stated")
	}
	args, err := parseSyntax(s.doc.Syntax)
	if err != nil {
		return errors.New("command " + name + ": " + err.Error())
	}
	s.args = args
	var movable bool
	s.first, s.last, s.step, movable = legacyKeyRange(s.doc.KeySpecs)
	if movable {
		s.Flags |= Movable
	}
	for _, ks := range s.doc.KeySpecs {
		if !slices.Contains(strings.Fields(ks.Flags), "not_key") {
			s.keyed = true
		}
	}
	s.acl = implicitCategories(s.Flags, s.doc.ACL)
	s.keyNeed = nil
	for _, ks := range s.doc.KeySpecs {
		s.keyNeed = append(s.keyNeed, aclNeedOf(ks.Flags))
	}
	s.channels = channelSpecs[name]
	for _, sub := range s.Sub {
		if err := sub.prepare(s, docs, used); err != nil {
			return err
		}
	}
	return nil
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
// begin index (Begin; -1 when the search starts at Keyword or is unknown),
// then either a range (LastKey relative to Begin, negative from the end), a
// count argument (KeyNum) or nothing known (Unknown). Flags are as COMMAND
// shows them, separated by spaces.
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

// keySpecs returns the spec's key specs.
func (s *Spec) keySpecs() []KeySpec { return s.doc.KeySpecs }

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

// keyPositions returns the argument indexes of the keys in args. Key specs
// flagged not_key (the shard channels of SPUBLISH) find no keys, as in
// Redis's COMMAND GETKEYS, and take no lock.
func (s *Spec) keyPositions(args [][]byte, out []int) []int {
	if !s.keyed {
		return out
	}
	if s.Keys != nil {
		var buf [4]KeyRef
		for _, k := range s.Keys(args, buf[:0]) {
			out = append(out, k.Pos)
		}
		return out
	}
	return keysOf(s.keySpecs(), args, out)
}

// KeyRef is a key a Spec.Keys function found: its argument, and the index
// of the key spec that describes it.
type KeyRef struct{ Pos, Spec int }

// hasKeys reports whether any of the command's key specs finds keys, not
// only not_key arguments.
func (s *Spec) hasKeys() bool { return s.keyed }

// keysOf appends the argument indexes that specs find in args.
func keysOf(specs []KeySpec, args [][]byte, out []int) []int {
	for _, ks := range specs {
		if ks.Keyword != "" {
			ks.Begin = keywordBegin(ks, args)
		}
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

// keywordBegin finds where a key spec that begins at a keyword finds its
// keys (GEORADIUS's STORE): after the keyword, searched for from
// KeywordFrom as Redis's getKeysUsingKeySpecs does, forwards or, when
// negative, backwards from the end; 0 when it is not there.
func keywordBegin(ks KeySpec, args [][]byte) int {
	from, end := ks.KeywordFrom, len(args)-1
	if from <= 0 {
		from, end = len(args)+from, 1
	}
	for i := from; i != end; {
		if i >= len(args) || i < 1 {
			break
		}
		if strings.EqualFold(string(args[i]), ks.Keyword) {
			return i + 1
		}
		if from <= end {
			i++
		} else {
			i--
		}
	}
	return 0
}

// Categories returns the command's ACL categories: those its entry in the
// data files states and those its flags imply.
func (s *Spec) Categories() Category { return s.acl }

// group is the command's group; a subcommand's is its container's.
func (s *Spec) group() string {
	if s.doc.Group == "" && s.parent != nil {
		return s.parent.doc.Group
	}
	return s.doc.Group
}
