// Package cmdspec holds what a command is, apart from the code that runs
// it: its name, arity, flags and subcommands, where its keys are among
// its arguments (key specs, and the functions some commands find their
// keys with), its ACL categories, and an id within its table. The table
// of specs is what dispatch looks commands up in, what the arity check,
// ACL rules and cluster routing read, and what COMMAND and the command
// reference are generated from.
//
// A spec is made of a row of Go (package commands' command table, where
// each row also names the handler that runs the command) and the
// command's entry in the data files (Data). It knows nothing of requests,
// replies or the server: the handlers and the per-command statistics are
// package commands', kept by spec id.
package cmdspec

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"

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
	// from the key specs; specs do not state it.
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
	// of the keys it changed: a command whose result
	// depends only on its keys' values, not on the time or chance, and
	// whose keys may be large (LPUSH on a long list). COMMAND does not
	// show it.
	AsIs
	// TTLOnly: changes only its keys' expiry (EXPIRE and its kin), which
	// is all it replicates: PEXPIREAT, PERSIST or the key's deletion.
	TTLOnly
	// MayWait: may wait for something other than a shard's lock (the
	// disk, a timer, another client, the network), so it never runs on an
	// event loop, where it would hold up every connection of the loop.
	// Blocking commands, scripts, pub/sub and the
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
	// or function that declares its flags loses it.
	// COMMAND does not show it.
	MayReplicate
	// Asking: runs in an importing slot as if the client had sent ASKING
	// (RESTORE-ASKING, which MIGRATE sends in cluster mode).
	Asking
	// NoKeyspace: reads nothing of the keyspace (CLUSTER NODES and the
	// other views of the cluster), so it is served while a full sync
	// loads the keyspace. Redis loads a small copy without serving anyone
	// and so never answers these LOADING; limitkv serves others meanwhile
	// and must not either. COMMAND does not show it.
	NoKeyspace
)

// flagNames lists the flags COMMAND shows, in the order Redis shows them.
var flagNames = []struct {
	f    Flag
	name string
}{
	{Write, "write"}, {ReadOnly, "readonly"}, {DenyOOM, "denyoom"}, {Admin, "admin"},
	{PubSub, "pubsub"}, {NoScript, "noscript"}, {Blocking, "blocking"}, {Loading, "loading"},
	{Stale, "stale"}, {SkipMonitor, "skip_monitor"}, {SkipSlowlog, "skip_slowlog"},
	{Asking, "asking"}, {Fast, "fast"}, {NoAuth, "no_auth"}, {NoMandatoryKeys, "no_mandatory_keys"},
	{NoAsyncLoading, "no_async_loading"}, {NoMulti, "no_multi"}, {Movable, "movablekeys"},
	{AllowBusy, "allow_busy"},
}

// internalFlagNames are the flags COMMAND does not show, by the names a
// command row states them with.
var internalFlagNames = []struct {
	f    Flag
	name string
}{
	{SelfLock, "selflock"}, {Protected, "protected"}, {RunsScript, "runs_script"},
	{AsIs, "as_is"}, {TTLOnly, "ttl_only"}, {MayWait, "may_wait"}, {MayReplicate, "may_replicate"},
	{NoKeyspace, "no_keyspace"},
}

// ParseFlags reads a row's flags: names separated by spaces, COMMAND's
// ("write denyoom fast") and the internal ones ("selflock", "as_is",
// ...), as Redis's own command table once stated them and kvrocks's still
// does, so that a command's row fits on one line. Movablekeys is derived
// from the key specs, never stated.
func ParseFlags(s string) (Flag, error) {
	var f Flag
next:
	for _, w := range strings.Fields(s) {
		for _, n := range flagNames {
			if n.name == w && n.f != Movable {
				f |= n.f
				continue next
			}
		}
		for _, n := range internalFlagNames {
			if n.name == w {
				f |= n.f
				continue next
			}
		}
		return 0, errors.New("unknown command flag " + strconv.Quote(w))
	}
	return f, nil
}

// Names returns the names of the flags in f that COMMAND shows, in the
// order Redis shows them.
func (f Flag) Names() []string {
	var names []string
	for _, n := range flagNames {
		if f&n.f != 0 {
			names = append(names, n.name)
		}
	}
	return names
}

// Spec describes one command or subcommand. A spec states the fields a Go
// reader needs; NewTable attaches what the data files say of it (Data)
// and derives the rest.
type Spec struct {
	Name  string // lower case; a subcommand's is its own word ("setname")
	Arity int    // as Redis: n exactly n arguments, -n at least n (name included)
	Flags Flag   // Movable is derived from the key specs, not stated
	Sub   []*Spec
	// Keys, for a command some of whose keys no key spec can find (SORT's
	// STORE), is Redis's getkeys_proc: it finds every key of args, for
	// dispatch's locks, ACL checks and COMMAND GETKEYS.
	Keys func(args [][]byte, out []KeyRef) []KeyRef
	// LockAll, if set, tells whether a request reads keys that no
	// argument names (SORT's BY and GET patterns): dispatch then locks
	// every shard.
	LockAll func(args [][]byte) bool
	// KeyFlags, for a command whose key spec has variable_flags (SET,
	// BITFIELD), gives the flags its keys have with these arguments, as
	// Redis's getkeys_proc narrows them: for COMMAND GETKEYSANDFLAGS and
	// for what ACL rules require of the keys.
	KeyFlags func(args [][]byte) string

	parent   *Spec
	keySpecs []KeySpec
	tips     []string
	// first, last, step: the legacy key range COMMAND reports, derived
	// from the key specs.
	first, last, step int
	// keyed: some key spec finds keys, not only not_key arguments.
	keyed bool
	cats  Category
	// id numbers the spec within its table (subcommands and containers
	// included), so that others keep what they hold per command in a
	// slice: the server its handlers and statistics, ACL rules their
	// bitmaps of allowed commands.
	id int
}

// FullName is the name Redis uses in errors and stats: "get", "client|list".
func (s *Spec) FullName() string {
	if s.parent != nil {
		return s.parent.Name + "|" + s.Name
	}
	return s.Name
}

// Parent is a subcommand's container, nil for a command.
func (s *Spec) Parent() *Spec { return s.parent }

// ID is the spec's index in its table, from 0 to Table.Count()-1.
func (s *Spec) ID() int { return s.id }

// Categories returns the command's ACL categories: those its entry in the
// data files states and those its flags imply.
func (s *Spec) Categories() Category { return s.cats }

// KeySpecs returns the command's key specs.
func (s *Spec) KeySpecs() []KeySpec { return s.keySpecs }

// Tips returns the command's tips, as COMMAND shows them.
func (s *Spec) Tips() []string { return s.tips }

// KeyRange returns the legacy key range COMMAND reports: the first and
// last key's indexes (last negative when counted from the end) and the
// step, derived from the key specs.
func (s *Spec) KeyRange() (first, last, step int) { return s.first, s.last, s.step }

// LookupSub finds a subcommand of s by name, in any case.
func (s *Spec) LookupSub(name []byte) *Spec {
	for _, sub := range s.Sub {
		if len(sub.Name) == len(name) && strings.EqualFold(sub.Name, string(name)) {
			return sub
		}
	}
	return nil
}

// prepare checks a spec and its subcommands and attaches their data.
func (s *Spec) prepare(parent *Spec, data map[string]*Data, used map[string]bool) error {
	if s.Name != strings.ToLower(s.Name) {
		return errors.New("command names are lower case: " + s.Name)
	}
	s.parent = parent
	name := s.FullName()
	if used[name] {
		return errors.New("duplicate command " + name)
	}
	d := data[name]
	if d == nil {
		return errors.New("command " + name + " has no entry in the data files")
	}
	used[name] = true
	if s.Flags&Movable != 0 {
		return errors.New("command " + name + ": movablekeys is derived from the key specs, not stated")
	}
	s.keySpecs, s.tips = d.KeySpecs, d.Tips
	var movable bool
	s.first, s.last, s.step, movable = legacyKeyRange(s.keySpecs)
	if movable {
		s.Flags |= Movable
	}
	s.keyed = false
	for _, ks := range s.keySpecs {
		if !slices.Contains(strings.Fields(ks.Flags), "not_key") {
			s.keyed = true
		}
	}
	s.cats = implicitCategories(s.Flags, d.Categories)
	for _, sub := range s.Sub {
		if err := sub.prepare(s, data, used); err != nil {
			return err
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

// ArityOK checks the number of arguments, name included.
func (s *Spec) ArityOK(n int) bool {
	if s.Arity >= 0 {
		return n == s.Arity
	}
	return n >= -s.Arity
}

// KeyPositions returns the argument indexes of the keys in args. Key specs
// flagged not_key (the shard channels of SPUBLISH) find no keys, as in
// Redis's COMMAND GETKEYS, and take no lock.
func (s *Spec) KeyPositions(args [][]byte, out []int) []int {
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
	return keysOf(s.keySpecs, args, out)
}

// KeyRef is a key a Spec.Keys function found: its argument, and the index
// of the key spec that describes it.
type KeyRef struct{ Pos, Spec int }

// HasKeys reports whether any of the command's key specs finds keys, not
// only not_key arguments.
func (s *Spec) HasKeys() bool { return s.keyed }

// KeyFlagsAt returns the flags of the key spec that covers argument i of
// args, narrowed by KeyFlags for a command whose keys' flags vary.
func (s *Spec) KeyFlagsAt(args [][]byte, i int) string {
	if s.KeyFlags != nil {
		return s.KeyFlags(args)
	}
	if s.Keys != nil {
		for _, k := range s.Keys(args, nil) {
			if k.Pos == i {
				return s.keySpecs[k.Spec].Flags
			}
		}
		return ""
	}
	for _, ks := range s.keySpecs {
		for _, p := range keysOf([]KeySpec{ks}, args, nil) {
			if p == i {
				return ks.Flags
			}
		}
	}
	return ""
}

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
