package acl

import (
	"strings"

	"github.com/limitkv/limitkv/cmdspec"
)

// The commands of Redis 7.0 that limitkv does not implement (see
// docs/differences.md) keep their place in ACL rules, as in Redis: a rule
// may name them (-failover, +module|list) and their categories hold them,
// so that users written for Redis load, and their rules read back (ACL
// GETUSER, ACL LIST, ACL SAVE) as Redis writes them: "+@all
// -@dangerous" keeps FAILOVER out. ACL CAT lists them. Dispatch,
// COMMAND and the reference never see them: a client that sends one is
// told it is unknown.

// absentCommands are those commands with their ACL categories, as Redis
// 7.0's COMMAND INFO gives them; a subcommand follows its container.
var absentCommands = []struct {
	name string
	cats cmdspec.Category
}{
	{"bgrewriteaof", cmdspec.CatAdmin | cmdspec.CatSlow | cmdspec.CatDangerous},
	{"failover", cmdspec.CatAdmin | cmdspec.CatSlow | cmdspec.CatDangerous},
	{"lolwut", cmdspec.CatRead | cmdspec.CatFast},
	{"module", cmdspec.CatSlow},
	{"module|help", cmdspec.CatSlow},
	{"module|list", cmdspec.CatAdmin | cmdspec.CatSlow | cmdspec.CatDangerous},
	{"module|load", cmdspec.CatAdmin | cmdspec.CatSlow | cmdspec.CatDangerous},
	{"module|loadex", cmdspec.CatAdmin | cmdspec.CatSlow | cmdspec.CatDangerous},
	{"module|unload", cmdspec.CatAdmin | cmdspec.CatSlow | cmdspec.CatDangerous},
	{"pfdebug", cmdspec.CatWrite | cmdspec.CatHyperLogLog | cmdspec.CatAdmin | cmdspec.CatSlow | cmdspec.CatDangerous},
	{"pfselftest", cmdspec.CatHyperLogLog | cmdspec.CatAdmin | cmdspec.CatSlow | cmdspec.CatDangerous},
	{"substr", cmdspec.CatRead | cmdspec.CatString | cmdspec.CatSlow},
}

// command is a command as ACL rules know it: one of the table's, or one of
// Redis's that limitkv lacks.
type command struct {
	// id is the command's bit in the users' bitmaps: its spec's id, or
	// for an absent command one after the table's.
	id   int
	name string // its own name, as Spec.Name
	cats cmdspec.Category
	// spec is the table's spec, nil for an absent command.
	spec   *cmdspec.Spec
	parent *command
	// sub are the subcommands: the table's, or an absent container's
	// absent ones. absentSub are the absent subcommands of one of the
	// table's commands, kept apart as dispatch never sees them.
	sub, absentSub []*command
	// keyNeed is, per key spec, the permission ACL rules must grant for
	// the keys it finds (permRead, permWrite: see needOf).
	keyNeed []uint8
	// channels tells which arguments are Pub/Sub channels that ACL rules
	// restrict (PUBLISH, SUBSCRIBE, ...); zero for other commands.
	channels chanSpec
}

// inTable reports whether the table has the command of full name
// ("xinfo|stream").
func (c *Catalog) inTable(name string) bool {
	base, sub, isSub := strings.Cut(name, "|")
	s := c.table.Lookup([]byte(base))
	if s == nil || !isSub {
		return s != nil
	}
	for _, x := range s.Sub {
		if x.Name == sub {
			return true
		}
	}
	return false
}

// fullName is the name Redis uses: "get", "client|list".
func (cmd *command) fullName() string {
	if cmd.parent != nil {
		return cmd.parent.name + "|" + cmd.name
	}
	return cmd.name
}

// Catalog is every command ACL rules know, for one table: its own, and
// the absent ones with ids after its own.
type Catalog struct {
	table *cmdspec.Table
	byID  []*command
	// sorted are the table's top-level commands, in its order; absent
	// the absent commands, in absentCommands' order.
	sorted, absent []*command
	absentByName   map[string]*command
}

// NewCatalog indexes t's commands and the absent ones for ACL rules.
func NewCatalog(t *cmdspec.Table) *Catalog {
	c := &Catalog{table: t, byID: make([]*command, t.Count(), t.Count()+len(absentCommands))}
	var add func(s *cmdspec.Spec, parent *command) *command
	add = func(s *cmdspec.Spec, parent *command) *command {
		cmd := &command{id: s.ID(), name: s.Name, cats: s.Categories(), spec: s, parent: parent,
			channels: channelSpecs[s.FullName()]}
		for _, ks := range s.KeySpecs() {
			cmd.keyNeed = append(cmd.keyNeed, needOf(ks.Flags))
		}
		c.byID[cmd.id] = cmd
		for _, sub := range s.Sub {
			cmd.sub = append(cmd.sub, add(sub, cmd))
		}
		return cmd
	}
	for _, s := range t.Specs() {
		c.sorted = append(c.sorted, add(s, nil))
	}
	c.addAbsent()
	return c
}

// addAbsent gives the absent commands ids after the table's own, for the
// ACL bitmaps. An absent subcommand of a command limitkv has (client|
// tracking) is kept apart from the command's subcommands, which dispatch
// reads.
func (c *Catalog) addAbsent() {
	c.absentByName = make(map[string]*command, len(absentCommands))
	for _, a := range absentCommands {
		if c.inTable(a.name) {
			continue // implemented since (the list follows the table)
		}
		cmd := &command{name: a.name, cats: a.cats, id: c.count()}
		if base, sub, ok := strings.Cut(a.name, "|"); ok {
			cmd.name = sub
			if cmd.parent = c.absentByName[base]; cmd.parent != nil {
				cmd.parent.sub = append(cmd.parent.sub, cmd)
			} else if s := c.table.Lookup([]byte(base)); s != nil {
				cmd.parent = c.byID[s.ID()]
				cmd.parent.absentSub = append(cmd.parent.absentSub, cmd)
			} else {
				continue // a test's table without the container
			}
		}
		c.absent = append(c.absent, cmd)
		c.byID = append(c.byID, cmd)
		c.absentByName[a.name] = cmd
	}
}

// count is the number of commands ACL bitmaps hold: the table's and the
// absent ones.
func (c *Catalog) count() int { return len(c.byID) }

// commands calls fn for every command ACL rules know, containers before
// their subcommands: the table's in its order, then the absent ones.
func (c *Catalog) commands(fn func(cmd *command)) {
	for _, cmd := range c.sorted {
		fn(cmd)
		for _, sub := range cmd.sub {
			fn(sub)
		}
		for _, sub := range cmd.absentSub {
			fn(sub)
		}
	}
	for _, cmd := range c.absent {
		if cmd.parent == nil || c.absentByName[cmd.parent.name] != nil {
			fn(cmd) // not a subcommand of one of the table's, seen above
		}
	}
}

// subs calls fn for every subcommand of cmd that ACL rules know.
func (cmd *command) subs(fn func(sub *command)) {
	for _, sub := range cmd.sub {
		fn(sub)
	}
	for _, sub := range cmd.absentSub {
		fn(sub)
	}
}

// lookupSub finds a subcommand of cmd by name, in any case, as
// Spec.LookupSub does.
func (cmd *command) lookupSub(name string) *command {
	for _, sub := range cmd.sub {
		if len(sub.name) == len(name) && strings.EqualFold(sub.name, name) {
			return sub
		}
	}
	return nil
}

// lookup finds a command for a rule: "get" or "client|list", in any
// case, and nothing deeper; Redis's commands that limitkv lacks are found
// too (absentCommands).
func (c *Catalog) lookup(name string) *command {
	parts := strings.Split(name, "|")
	if len(parts) > 2 {
		return nil
	}
	var base *command
	if s := c.table.Lookup([]byte(parts[0])); s != nil {
		base = c.byID[s.ID()]
	} else {
		base = c.absentByName[strings.ToLower(parts[0])]
	}
	if base == nil || len(parts) == 1 {
		return base
	}
	if sub := base.lookupSub(parts[1]); sub != nil {
		return sub
	}
	for _, sub := range base.absentSub {
		if strings.EqualFold(sub.name, parts[1]) {
			return sub
		}
	}
	return nil
}

// InCategory returns the full names of the commands in cat, as ACL CAT
// lists them.
func (c *Catalog) InCategory(cat cmdspec.Category) []string {
	var names []string
	c.commands(func(cmd *command) {
		if cmd.cats&cat != 0 {
			names = append(names, cmd.fullName())
		}
	})
	return names
}
