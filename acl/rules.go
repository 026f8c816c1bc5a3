// Package acl holds the rules of ACL users, as Redis 7.0 has them
// (src/acl.c): reading them (ACL SETUSER's and the aclfile's syntax),
// describing them (ACL LIST, GETUSER, SAVE), checking a command, its keys
// and its channels against them, and the users' passwords. A user has
// flags (on/off, nopass), SHA-256 hashes of its passwords, and one or
// more selectors. Each selector allows commands (a bit per command.id),
// key patterns (read, write or both) and Pub/Sub channel patterns; a
// command runs if any selector allows all of it. The first selector is
// the root one, the rules given outside parentheses.
//
// Rules name commands by the table's specs (package cmdspec), and also
// Redis's commands that limitkv lacks (Catalog). The package also holds
// what of ACL needs no client: the ACL LOG's entries and their grouping
// (Log), and the users files (the aclfile, the config file's user lines):
// their parsing, their errors as Redis words them, and the aclfile's
// atomic save. The users themselves and the ACL command are package
// commands': they belong to the server and its clients, whose
// connections a change of users may close.
//
// Rules are immutable once sealed: ACL SETUSER builds new ones and swaps
// the pointer, so that a connection checks its command against a
// consistent set without a lock. The default user, whose rules are
// "+@all ~* &*", is checked with one load and one test (Rules.Open).
package acl

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"strings"

	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/resp"
)

// User flags, in the order ACL LIST shows them.
const (
	userOn uint8 = 1 << iota
	userOff
	userNoPass
	userSkipSanitize
	userSanitize
)

var userFlagNames = []struct {
	flag uint8
	name string
}{
	{userOn, "on"}, {userOff, "off"}, {userNoPass, "nopass"},
	{userSkipSanitize, "skip-sanitize-payload"}, {userSanitize, "sanitize-payload"},
}

// Key permissions a pattern grants and a key spec needs.
const (
	permRead  uint8 = 1
	permWrite uint8 = 2
	permRW          = permRead | permWrite
	// needNotKey marks a key spec whose "keys" are not keys (not_key).
	needNotKey uint8 = 0x80
	// needIncomplete marks a key spec that may not find every key
	// (incomplete): Redis then finds the keys with the command's own
	// function instead.
	needIncomplete uint8 = 0x40
)

// needOf derives, as ACLSelectorCheckKey does, what a key spec's keys
// need from its flags: access needs read; insert, delete and update need
// write. A spec with none of these (EXISTS, TOUCH) needs only a pattern
// that matches. It allocates nothing: the flags of SET's and BITFIELD's
// keys are read on each check.
func needOf(flags string) uint8 {
	var need uint8
	for flags != "" {
		var f string
		f, flags, _ = strings.Cut(flags, " ")
		switch f {
		case "access":
			need |= permRead
		case "insert", "delete", "update":
			need |= permWrite
		case "not_key":
			need |= needNotKey
		case "incomplete":
			need |= needIncomplete
		}
	}
	return need
}

// chanSpec locates the channels of a Pub/Sub command, as Redis's
// commands_with_channels table does.
type chanSpec struct {
	flags chanFlag
	start int
	count int // -1: every argument from start on
}

type chanFlag uint8

const (
	chanPublish chanFlag = 1 << iota
	chanSubscribe
	chanUnsubscribe
	chanPattern
)

// channelSpecs are the commands whose channels ACL rules restrict, by full
// name. Commands limitkv does not have are simply never looked up.
var channelSpecs = map[string]chanSpec{
	"subscribe":    {chanSubscribe, 1, -1},
	"ssubscribe":   {chanSubscribe, 1, -1},
	"unsubscribe":  {chanUnsubscribe, 1, -1},
	"sunsubscribe": {chanUnsubscribe, 1, -1},
	"psubscribe":   {chanPattern | chanSubscribe, 1, -1},
	"punsubscribe": {chanPattern | chanUnsubscribe, 1, -1},
	"publish":      {chanPublish, 1, 1},
	"spublish":     {chanPublish, 1, 1},
}

// keyPattern is a key pattern and the permissions it grants.
type keyPattern struct {
	pattern string
	perm    uint8
}

// String is the pattern as a rule: ~p, %R~p or %W~p.
func (k keyPattern) String() string {
	switch k.perm {
	case permRead:
		return "%R~" + k.pattern
	case permWrite:
		return "%W~" + k.pattern
	}
	return "~" + k.pattern
}

// selector is one set of permissions of a user.
type selector struct {
	root        bool
	allKeys     bool
	allChannels bool
	allCommands bool
	// future is Redis's reserved command bit: set by +@all, cleared by
	// -@all only. ACL LIST starts from +@all when it is set.
	future bool
	cmds   []uint64 // a bit per command.id, the absent commands' included
	// firstArgs: for a command whose bit is clear, the first arguments
	// with which it may run anyway (+select|0).
	firstArgs map[int][]string
	keys      []keyPattern
	channels  []string
}

func newSelector(c *Catalog, root, allChannels bool) *selector {
	return &selector{root: root, allChannels: allChannels, cmds: make([]uint64, (c.count()+63)/64)}
}

func (s *selector) clone() *selector {
	c := *s
	c.cmds = append([]uint64(nil), s.cmds...)
	c.keys = append([]keyPattern(nil), s.keys...)
	c.channels = append([]string(nil), s.channels...)
	c.firstArgs = nil
	for id, args := range s.firstArgs {
		if c.firstArgs == nil {
			c.firstArgs = map[int][]string{}
		}
		c.firstArgs[id] = append([]string(nil), args...)
	}
	return &c
}

func (s *selector) bit(id int) bool { return s.cmds[id/64]&(1<<(id%64)) != 0 }

// setBit sets or clears a command's bit; clearing one means the selector
// no longer allows every command.
func (s *selector) setBit(id int, on bool) {
	if on {
		s.cmds[id/64] |= 1 << (id % 64)
		return
	}
	s.cmds[id/64] &^= 1 << (id % 64)
	s.allCommands = false
}

// changePerm allows or denies a command and, for a container, all its
// subcommands, forgetting the command's allowed first arguments.
func (s *selector) changePerm(cmd *command, on bool) {
	s.setBit(cmd.id, on)
	delete(s.firstArgs, cmd.id)
	cmd.subs(func(sub *command) { s.setBit(sub.id, on) })
}

// setCategory allows or denies every command in cat, as Redis's
// ACLSetSelectorCommandBitsForCategory does: a container in the category
// brings all its subcommands along.
func (s *selector) setCategory(c *Catalog, cat cmdspec.Category, on bool) {
	c.commands(func(cmd *command) {
		if cmd.cats&cat != 0 {
			s.changePerm(cmd, on)
		}
	})
}

func (s *selector) setAll(on bool) {
	for i := range s.cmds {
		s.cmds[i] = 0
	}
	if on {
		for i := range s.cmds {
			s.cmds[i] = ^uint64(0)
		}
	}
	s.allCommands, s.future, s.firstArgs = on, on, nil
}

// countCategory counts the commands of cat the selector allows and denies.
func (s *selector) countCategory(c *Catalog, cat cmdspec.Category) (on, off int) {
	c.commands(func(cmd *command) {
		if cmd.cats&cat != 0 {
			if s.bit(cmd.id) {
				on++
			} else {
				off++
			}
		}
	})
	return on, off
}

// Error is what a rule can do wrong; Redis reports it through errno.
type Error int

const (
	ErrNoEnt     Error = iota + 1 // ENOENT
	ErrSyntax                     // EINVAL
	ErrKeysAll                    // EEXIST
	ErrChansAll                   // EISDIR
	ErrNoPass                     // ENODEV
	ErrBadHash                    // EBADMSG
	ErrDupUser                    // EALREADY
	ErrFirstArgs                  // ECHILD
)

// Error is Redis's ACLSetUserStringError.
func (e Error) Error() string {
	switch e {
	case ErrNoEnt:
		return "Unknown command or category name in ACL"
	case ErrSyntax:
		return "Syntax error"
	case ErrKeysAll:
		return "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns"
	case ErrChansAll:
		return "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels"
	case ErrNoPass:
		return "The password you are trying to remove from the user does not exist"
	case ErrBadHash:
		return "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"
	case ErrDupUser:
		return "Duplicate user found. A user can only be defined once in config files"
	case ErrFirstArgs:
		return "Allowing first-arg of a subcommand is not supported"
	}
	return "Wrong format"
}

// HasSpaces reports whether s has white space or NUL, which user names and
// patterns may not contain.
func HasSpaces(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\v', '\f', '\r', 0:
			return true
		}
	}
	return false
}

// set applies one selector rule, as Redis's ACLSetSelector.
func (s *selector) set(c *Catalog, op string) error {
	switch {
	case strings.EqualFold(op, "allkeys") || op == "~*":
		s.allKeys, s.keys = true, nil
	case strings.EqualFold(op, "resetkeys"):
		s.allKeys, s.keys = false, nil
	case strings.EqualFold(op, "allchannels") || op == "&*":
		s.allChannels, s.channels = true, nil
	case strings.EqualFold(op, "resetchannels"):
		s.allChannels, s.channels = false, nil
	case strings.EqualFold(op, "allcommands") || strings.EqualFold(op, "+@all"):
		s.setAll(true)
	case strings.EqualFold(op, "nocommands") || strings.EqualFold(op, "-@all"):
		s.setAll(false)
	case op[0] == '~' || op[0] == '%':
		if s.allKeys {
			return ErrKeysAll
		}
		perm, i := permRW, 1
		if op[0] == '%' {
			perm = 0
			for ; i < len(op); i++ {
				c := op[i]
				if (c == 'R' || c == 'r') && perm&permRead == 0 {
					perm |= permRead
				} else if (c == 'W' || c == 'w') && perm&permWrite == 0 {
					perm |= permWrite
				} else if c == '~' {
					i++
					break
				} else {
					return ErrSyntax
				}
			}
			// Redis 7.0 accepts "%~p", a pattern granting nothing, and
			// then panics when ACL LIST shows it; refuse it instead.
			if perm == 0 {
				return ErrSyntax
			}
		}
		pat := op[i:]
		if HasSpaces(pat) {
			return ErrSyntax
		}
		found := false
		for j := range s.keys {
			if s.keys[j].pattern == pat {
				s.keys[j].perm |= perm
				found = true
				break
			}
		}
		if !found {
			s.keys = append(s.keys, keyPattern{pat, perm})
		}
		s.allKeys = false
	case op[0] == '&':
		if s.allChannels {
			return ErrChansAll
		}
		pat := op[1:]
		if HasSpaces(pat) {
			return ErrSyntax
		}
		found := false
		for _, c := range s.channels {
			if c == pat {
				found = true
				break
			}
		}
		if !found {
			s.channels = append(s.channels, pat)
		}
		s.allChannels = false
	case op[0] == '+' && (len(op) < 2 || op[1] != '@'):
		name := op[1:]
		bar := strings.LastIndexByte(name, '|')
		if bar < 0 {
			cmd := c.lookup(name)
			if cmd == nil {
				return ErrNoEnt
			}
			s.changePerm(cmd, true)
			return nil
		}
		cmd := c.lookup(name[:bar])
		switch {
		case cmd == nil:
			return ErrNoEnt
		case cmd.parent != nil:
			return ErrFirstArgs
		case bar == len(name)-1:
			return ErrSyntax
		case len(cmd.sub) > 0 || len(cmd.absentSub) > 0:
			sub := c.lookup(name)
			if sub == nil {
				return ErrNoEnt
			}
			s.changePerm(sub, true)
		default:
			// A first argument of a command without subcommands, which
			// Redis 7.0 still allows (with a deprecation warning).
			arg := name[bar+1:]
			for _, a := range s.firstArgs[cmd.id] {
				if strings.EqualFold(a, arg) {
					return nil
				}
			}
			if s.firstArgs == nil {
				s.firstArgs = map[int][]string{}
			}
			s.firstArgs[cmd.id] = append(s.firstArgs[cmd.id], arg)
		}
	case op[0] == '-' && (len(op) < 2 || op[1] != '@'):
		cmd := c.lookup(op[1:])
		if cmd == nil {
			return ErrNoEnt
		}
		s.changePerm(cmd, false)
	case op[0] == '+' || op[0] == '-':
		cat := cmdspec.CategoryByName(strings.ToLower(op[2:]))
		if cat == 0 {
			return ErrNoEnt
		}
		s.setCategory(c, cat, op[0] == '+')
	default:
		return ErrSyntax
	}
	return nil
}

// Rules are a user's flags, passwords and selectors at one moment. Once
// sealed they are never changed.
type Rules struct {
	// cat is the commands the rules name, by the ids of the bitmaps.
	cat       *Catalog
	flags     uint8
	passwords []string // SHA-256 of each, 64 lower-case hex digits
	selectors []*selector
	// open: the root selector allows every command, key and channel, so no
	// check is needed (the default user's usual rules).
	open bool
}

// Clone returns a copy of r that may be changed, to be sealed anew.
func (r *Rules) Clone() *Rules {
	c := &Rules{cat: r.cat, flags: r.flags, passwords: append([]string(nil), r.passwords...)}
	for _, s := range r.selectors {
		c.selectors = append(c.selectors, s.clone())
	}
	return c
}

// Seal computes what checks need and returns r, ready to publish.
func (r *Rules) Seal() *Rules {
	root := r.selectors[0]
	r.open = root.allCommands && root.allKeys && root.allChannels
	return r
}

// NewRules are the rules of a new user: off, no password, nothing
// allowed (channels as acl-pubsub-default says).
func NewRules(c *Catalog, allChannels bool) *Rules {
	return &Rules{cat: c, flags: userOff, selectors: []*selector{newSelector(c, true, allChannels)}}
}

// DefaultRules are the default user's at start-up: on nopass ~* &* +@all.
func DefaultRules(c *Catalog) *Rules {
	r := NewRules(c, false)
	root := r.selectors[0]
	root.setAll(true)
	root.allKeys, root.allChannels = true, true
	r.flags = userOn | userNoPass
	return r.Seal()
}

// DeniedRules are given to a deleted user, so that a command of one of
// its clients that runs before the client is gone is refused.
func DeniedRules(c *Catalog) *Rules { return NewRules(c, false).Seal() }

// Open reports whether the rules allow every command, key and channel, so
// that commands need no check.
func (r *Rules) Open() bool { return r.open }

// NoPass reports whether the user needs no password.
func (r *Rules) NoPass() bool { return r.flags&userNoPass != 0 }

// Off reports whether the user is disabled.
func (r *Rules) Off() bool { return r.flags&userOff != 0 }

// FlagNames returns the user's flags as ACL GETUSER shows them.
func (r *Rules) FlagNames() []string {
	var names []string
	for _, f := range userFlagNames {
		if r.flags&f.flag != 0 {
			names = append(names, f.name)
		}
	}
	return names
}

// Passwords returns the SHA-256 hashes of the user's passwords, as ACL
// GETUSER shows them.
func (r *Rules) Passwords() []string { return r.passwords }

// Selectors returns the number of the user's selectors, the root one
// included.
func (r *Rules) Selectors() int { return len(r.selectors) }

// DescribeSelector returns selector i (0 the root one) as ACL GETUSER
// shows it: its commands, keys and channels rules.
func (r *Rules) DescribeSelector(i int) (commands, keys, channels string) {
	s := r.selectors[i]
	return s.describeCommands(r.cat), s.keysRule(), s.channelsRule()
}

// HashPassword is the form passwords are kept in.
func HashPassword(p string) string {
	sum := sha256.Sum256([]byte(p))
	return hex.EncodeToString(sum[:])
}

func validHash(h string) bool {
	if len(h) != 64 {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; (c < 'a' || c > 'f') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// Set applies one rule to the user, as Redis's ACLSetUser. allChannels is
// acl-pubsub-default, for the selectors the rule creates or resets.
func (r *Rules) Set(op string, allChannels bool) error {
	if op == "" {
		return nil
	}
	switch {
	case strings.EqualFold(op, "on"):
		r.flags = r.flags&^userOff | userOn
	case strings.EqualFold(op, "off"):
		r.flags = r.flags&^userOn | userOff
	case strings.EqualFold(op, "skip-sanitize-payload"):
		r.flags = r.flags&^userSanitize | userSkipSanitize
	case strings.EqualFold(op, "sanitize-payload"):
		r.flags = r.flags&^userSkipSanitize | userSanitize
	case strings.EqualFold(op, "nopass"):
		r.flags |= userNoPass
		r.passwords = nil
	case strings.EqualFold(op, "resetpass"):
		r.flags &^= userNoPass
		r.passwords = nil
	case op[0] == '>' || op[0] == '#':
		h := op[1:]
		if op[0] == '>' {
			h = HashPassword(h)
		} else if !validHash(h) {
			return ErrBadHash
		}
		if !containsString(r.passwords, h) {
			r.passwords = append(r.passwords, h)
		}
		r.flags &^= userNoPass
	case op[0] == '<' || op[0] == '!':
		h := op[1:]
		if op[0] == '<' {
			h = HashPassword(h)
		} else if !validHash(h) {
			return ErrBadHash
		}
		i := indexString(r.passwords, h)
		if i < 0 {
			return ErrNoPass
		}
		r.passwords = append(r.passwords[:i:i], r.passwords[i+1:]...)
	case op[0] == '(' && op[len(op)-1] == ')':
		s := newSelector(r.cat, false, allChannels)
		args, ok := resp.SplitArgs([]byte(op[1 : len(op)-1]))
		if !ok {
			args = nil // as sdssplitargs: an empty selector
		}
		for _, a := range args {
			if err := s.set(r.cat, string(a)); err != nil {
				return err
			}
		}
		r.selectors = append(r.selectors, s)
	case strings.EqualFold(op, "clearselectors"):
		r.selectors = r.selectors[:1]
	case strings.EqualFold(op, "reset"):
		root := r.selectors[0]
		r.passwords = nil
		r.flags = userOff | userSanitize
		root.allKeys, root.keys = false, nil
		root.allChannels, root.channels = allChannels, nil
		r.selectors = r.selectors[:1]
		root.setAll(false)
	default:
		return r.selectors[0].set(r.cat, op)
	}
	return nil
}

func containsString(list []string, s string) bool { return indexString(list, s) >= 0 }

func indexString(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

// MergeSelectorArgs joins a selector written over several arguments
// ("(~k:*", "+get)") into one, as Redis's ACLMergeSelectorArguments. It
// returns the index of an opening argument that is never closed.
func MergeSelectorArgs(ops []string) ([]string, int) {
	var out []string
	open := -1
	var cur string
	for j, op := range ops {
		if open < 0 && len(op) > 0 && op[0] == '(' && op[len(op)-1] != ')' {
			cur, open = op, j
			continue
		}
		if open >= 0 {
			cur += " " + op
			if len(op) > 0 && op[len(op)-1] == ')' {
				out = append(out, cur)
				open = -1
			}
			continue
		}
		out = append(out, op)
	}
	if open >= 0 {
		return nil, open
	}
	return out, -1
}

// CategoryOrder is the order in which ACL CAT lists the categories and
// in which ACL LIST tries them when it describes a user: Redis's, then
// limitkv's @ratelimit.
var CategoryOrder = []cmdspec.Category{
	cmdspec.CatKeyspace, cmdspec.CatRead, cmdspec.CatWrite, cmdspec.CatSet, cmdspec.CatSortedSet,
	cmdspec.CatList, cmdspec.CatHash, cmdspec.CatString, cmdspec.CatBitmap, cmdspec.CatHyperLogLog,
	cmdspec.CatGeo, cmdspec.CatStream, cmdspec.CatPubSub, cmdspec.CatAdmin, cmdspec.CatFast,
	cmdspec.CatSlow, cmdspec.CatBlocking, cmdspec.CatDangerous, cmdspec.CatConnection,
	cmdspec.CatTransaction, cmdspec.CatScripting, cmdspec.CatRateLimit,
}

// describeCommands writes the selector's command rules as Redis's
// ACLDescribeSelectorCommandRules does: +@all or -@all, then the
// categories that best approach the bitmap, then single commands to make
// it exact. Single commands come in table order (Redis's follow its hash
// table, which varies from run to run).
func (s *selector) describeCommands(c *Catalog) string {
	var b strings.Builder
	fake := newSelector(c, false, false)
	additive := !s.future
	if additive {
		b.WriteString("-@all ")
	} else {
		b.WriteString("+@all ")
		fake.setAll(true)
	}
	temp := newSelector(c, false, false)
	copy(temp.cmds, s.cmds)
	applied := make([]bool, len(CategoryOrder))
	for {
		best, minDiff, maxSame := -1, int(^uint(0)>>1), 0
		for j, cat := range CategoryOrder {
			if applied[j] {
				continue
			}
			on, off := temp.countCategory(c, cat)
			diff, same := on, off
			if additive {
				diff, same = off, on
			}
			if same > diff && (diff < minDiff || diff == minDiff && same > maxSame) {
				best, minDiff, maxSame = j, diff, same
			}
		}
		if best < 0 {
			break
		}
		cat := CategoryOrder[best]
		name := cat.Names()[0]
		fake.setCategory(c, cat, additive)
		temp.setCategory(c, cat, !additive)
		if additive {
			b.WriteString("+@" + name + " ")
		} else {
			b.WriteString("-@" + name + " ")
		}
		applied[best] = true
	}
	c.commands(func(cmd *command) {
		s.describeSingle(cmd, fake, &b)
		// Only a command without subcommands has first arguments.
		if !s.bit(cmd.id) {
			for _, a := range s.firstArgs[cmd.id] {
				b.WriteString("+" + cmd.fullName() + "|" + a + " ")
			}
		}
	})
	out := b.String()
	return out[:len(out)-1]
}

func (s *selector) describeSingle(cmd *command, fake *selector, b *strings.Builder) {
	user, f := s.bit(cmd.id), fake.bit(cmd.id)
	if user == f {
		return
	}
	if user {
		b.WriteByte('+')
	} else {
		b.WriteByte('-')
	}
	b.WriteString(cmd.fullName())
	b.WriteByte(' ')
	fake.changePerm(cmd, user)
}

// keysRule is the selector's keys as GETUSER shows them.
func (s *selector) keysRule() string {
	if s.allKeys {
		return "~*"
	}
	parts := make([]string, len(s.keys))
	for i, k := range s.keys {
		parts[i] = k.String()
	}
	return strings.Join(parts, " ")
}

// channelsRule is the selector's channels as GETUSER shows them.
func (s *selector) channelsRule() string {
	if s.allChannels {
		return "&*"
	}
	parts := make([]string, len(s.channels))
	for i, c := range s.channels {
		parts[i] = "&" + c
	}
	return strings.Join(parts, " ")
}

// describe is the selector as ACL LIST shows it.
func (s *selector) describe(c *Catalog) string {
	var b strings.Builder
	if s.allKeys {
		b.WriteString("~* ")
	} else {
		for _, k := range s.keys {
			b.WriteString(k.String() + " ")
		}
	}
	if s.allChannels {
		b.WriteString("&* ")
	} else {
		b.WriteString("resetchannels ")
		for _, c := range s.channels {
			b.WriteString("&" + c + " ")
		}
	}
	b.WriteString(s.describeCommands(c))
	return b.String()
}

// Describe is the user's rules as ACL LIST and ACL SAVE write them, which
// ACL SETUSER and ACL LOAD read back to the same rules.
func (r *Rules) Describe() string {
	var b strings.Builder
	for _, f := range userFlagNames {
		if r.flags&f.flag != 0 {
			b.WriteString(f.name + " ")
		}
	}
	for _, p := range r.passwords {
		b.WriteString("#" + p + " ")
	}
	for _, s := range r.selectors {
		if s.root {
			b.WriteString(s.describe(r.cat))
		} else {
			b.WriteString(" (" + s.describe(r.cat) + ")")
		}
	}
	return b.String()
}

// CheckPassword reports whether pass is one of the user's, comparing
// hashes in constant time.
func (r *Rules) CheckPassword(pass []byte) bool {
	if r.flags&userOff != 0 {
		return false
	}
	if r.flags&userNoPass != 0 {
		return true
	}
	sum := sha256.Sum256(pass)
	var h [64]byte
	hex.Encode(h[:], sum[:])
	ok := 0
	for _, p := range r.passwords {
		ok |= subtle.ConstantTimeCompare(h[:], []byte(p))
	}
	return ok == 1
}

// Result is what a check found, in Redis's order of precedence
// (ACL_DENIED_*): the command passes, or what it was denied.
type Result int

const (
	OK            Result = 0
	DeniedCmd     Result = 1
	DeniedKey     Result = 2
	DeniedAuth    Result = 3 // only in ACL LOG
	DeniedChannel Result = 4
)

// keyArg is a key argument and what it needs.
type keyArg struct {
	pos  int
	need uint8
}

// keyArgs finds the keys of a command and what each needs, as Redis's
// getKeysFromCommandWithSpecs does for ACL checks: from the key specs,
// unless their flags vary with the arguments (Spec.KeyFlags: SET with GET
// reads too; BITFIELD with only GETs only reads) or one of them does not
// fit the arguments (then from the command's own key function: EVAL's,
// which reads numkeys as atoi would; other commands have none, and so no
// keys).
func (cmd *command) keyArgs(args [][]byte, out []keyArg) []keyArg {
	spec := cmd.spec
	if spec.KeyFlags != nil {
		need := needOf(spec.KeyFlags(args)) & permRW
		var pos [2]int
		for _, p := range spec.KeyPositions(args, pos[:0]) {
			out = append(out, keyArg{p, need})
		}
		return out
	}
	start := len(out)
	argc := len(args)
	for j, ks := range spec.KeySpecs() {
		if cmd.keyNeed[j]&needNotKey != 0 {
			continue
		}
		first := ks.Begin
		switch {
		case ks.Keyword != "":
			first = 0
			from, end, step := ks.KeywordFrom, argc-1, 1
			if from <= 0 {
				from, end, step = argc+from, 1, -1
			}
			for i := from; i != end && i < argc && i >= 1; i += step {
				if strings.EqualFold(string(args[i]), ks.Keyword) {
					first = i + 1
					break
				}
			}
			if first == 0 {
				continue
			}
		case ks.Begin <= 0:
			return cmd.keyArgsFallback(args, out[:start])
		}
		var last int
		step := ks.KeyStep
		switch {
		case ks.Unknown:
			return cmd.keyArgsFallback(args, out[:start])
		case ks.KeyNum:
			if first+ks.KeyNumIdx >= argc {
				return cmd.keyArgsFallback(args, out[:start])
			}
			n, ok := engine.ParseInt(args[first+ks.KeyNumIdx])
			if !ok || n < 0 || n > int64(argc) {
				return cmd.keyArgsFallback(args, out[:start])
			}
			first += ks.FirstKey
			last = first + int(n) - 1
		case ks.LastKey >= 0:
			last = first + ks.LastKey
		case ks.Limit == 0:
			last = argc + ks.LastKey
		default:
			last = first + ((argc-first)/ks.Limit + ks.LastKey)
		}
		if last >= argc || last < first || first >= argc {
			return cmd.keyArgsFallback(args, out[:start])
		}
		for i := first; i <= last; i += step {
			out = append(out, keyArg{i, cmd.keyNeed[j] & permRW})
		}
		// A spec that found keys but may have missed some: the command's
		// own function finds them all.
		if cmd.keyNeed[j]&needIncomplete != 0 {
			return cmd.keyArgsFallback(args, out[:start])
		}
	}
	return out
}

// keyArgsFallback is Redis's key function for the commands limitkv has
// that have one, EVAL and its kin: numkeys read as atoi would, no keys if
// it is out of range. Other commands have no keys then.
func (cmd *command) keyArgsFallback(args [][]byte, out []keyArg) []keyArg {
	if keys := cmd.spec.Keys; keys != nil {
		var buf [4]cmdspec.KeyRef
		for _, k := range keys(args, buf[:0]) {
			out = append(out, keyArg{k.Pos, cmd.keyNeed[k.Spec] & permRW})
		}
		return out
	}
	specs := cmd.spec.KeySpecs()
	if len(specs) != 1 || !specs[0].KeyNum || len(args) < 3 {
		return out
	}
	n := engine.Atoi(args[2])
	if n < 1 || n > int64(len(args)-3) {
		return out
	}
	for i := 3; i < 3+int(n); i++ {
		out = append(out, keyArg{i, cmd.keyNeed[0] & permRW})
	}
	return out
}

// keyAllowed is ACLSelectorCheckKey.
func (s *selector) keyAllowed(name []byte, need uint8) bool {
	if s.allKeys {
		return true
	}
	for _, k := range s.keys {
		if k.perm&need == need && engine.Match([]byte(k.pattern), name, false) {
			return true
		}
	}
	return false
}

// channelAllowed matches a channel against the selector's patterns: a
// channel by glob, a pattern (PSUBSCRIBE's) only literally.
func (s *selector) channelAllowed(ch []byte, isPattern bool) bool {
	if s.allChannels {
		return true
	}
	for _, p := range s.channels {
		if isPattern && p == string(ch) || !isPattern && engine.Match([]byte(p), ch, false) {
			return true
		}
	}
	return false
}

// check is ACLSelectorCheckCmd: whether the selector allows cmd with args,
// whose keys (cmd.keyArgs) are keys, and if not why and at which argument.
func (s *selector) check(cmd *command, args [][]byte, keys []keyArg) (Result, int) {
	if !s.allCommands && cmd.spec.Flags&cmdspec.NoAuth == 0 && !s.bit(cmd.id) {
		allowed := false
		if len(args) >= 2 {
			idx := 1
			if cmd.parent != nil {
				idx = 2
			}
			if idx < len(args) {
				for _, a := range s.firstArgs[cmd.id] {
					if strings.EqualFold(a, string(args[idx])) {
						allowed = true
						break
					}
				}
			}
		}
		if !allowed {
			return DeniedCmd, 0
		}
	}
	if !s.allKeys {
		for _, k := range keys {
			if !s.keyAllowed(args[k.pos], k.need) {
				return DeniedKey, k.pos
			}
		}
	}
	if cs := cmd.channels; !s.allChannels && cs.flags&(chanPublish|chanSubscribe) != 0 {
		stop := len(args)
		if cs.count >= 0 {
			stop = min(cs.start+cs.count, stop)
		}
		for i := cs.start; i < stop; i++ {
			if !s.channelAllowed(args[i], cs.flags&chanPattern != 0) {
				return DeniedChannel, i
			}
		}
	}
	return OK, 0
}

// Check is ACLCheckAllUserCommandPerm: OK if any selector allows the
// command; otherwise the denial to report: the command, unless some
// selector got past it, then the last key or channel none allowed, and
// that argument's index. spec is a command of the table the rules'
// catalog was made from.
func (r *Rules) Check(spec *cmdspec.Spec, args [][]byte) (Result, int) {
	if r.open {
		return OK, 0
	}
	cmd := r.cat.byID[spec.ID()]
	// The keys are found once for all selectors, and only if one of them
	// restricts keys.
	var buf [8]keyArg
	var keys []keyArg
	found := false
	relevant, last := DeniedCmd, 0
	for _, s := range r.selectors {
		if !found && !s.allKeys {
			keys, found = cmd.keyArgs(args, buf[:0]), true
		}
		res, pos := s.check(cmd, args, keys)
		if res == OK {
			return OK, 0
		}
		if res > relevant || res == relevant && pos > last {
			relevant, last = res, pos
		}
	}
	return relevant, last
}

// ChannelAllowed is ACLUserCheckChannelPerm: whether some selector allows
// one channel (or, isPattern, one PSUBSCRIBE pattern).
func (r *Rules) ChannelAllowed(ch []byte, isPattern bool) bool {
	for _, s := range r.selectors {
		if s.allChannels || s.channelAllowed(ch, isPattern) {
			return true
		}
	}
	return false
}

// allChannelsAllowed reports whether some selector allows every channel.
func (r *Rules) allChannelsAllowed() bool {
	for _, s := range r.selectors {
		if s.allChannels {
			return true
		}
	}
	return false
}

// FullKeyRead is ACLUserCheckCmdWithUnrestrictedKeyAccess for reads:
// whether some selector allows the command with args and reading every
// key (SORT's BY and GET patterns read keys no argument names).
func (r *Rules) FullKeyRead(spec *cmdspec.Spec, args [][]byte) bool {
	var buf [4]keyArg
	cmd := r.cat.byID[spec.ID()]
	keys := cmd.keyArgs(args, buf[:0])
	for _, s := range r.selectors {
		if res, _ := s.check(cmd, args, keys); res != OK {
			continue
		}
		if s.allKeys {
			return true
		}
		for _, k := range s.keys {
			if k.perm&permRead != 0 && k.pattern == "*" {
				return true
			}
		}
	}
	return false
}

// ChannelsShrunk reports whether new allows fewer channels than old, as
// Redis's ACLKillPubsubClientsIfNeeded decides before it disconnects the
// user's subscribers: unless some new selector allows every channel, or
// every channel pattern of the old selectors is among the new ones.
func ChannelsShrunk(old, new *Rules) bool {
	if new.allChannelsAllowed() {
		return false
	}
	var upcoming []string
	for _, s := range new.selectors {
		upcoming = append(upcoming, s.channels...)
	}
	for _, s := range old.selectors {
		if s.allChannels {
			return true
		}
		for _, c := range s.channels {
			if !containsString(upcoming, c) {
				return true
			}
		}
	}
	return false
}
