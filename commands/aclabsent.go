package commands

import "strings"

// The commands of Redis 7.0 that limitkv does not implement (see
// docs/differences.md) keep their place in ACL rules, as in Redis: a rule
// may name them (-monitor, +cluster|info) and their categories hold them,
// so that users written for Redis load, and their rules read back (ACL
// GETUSER, ACL LIST, ACL SAVE) as Redis writes them: "+@all -@stream"
// stays so, though limitkv has no stream command. ACL CAT lists them.
// Dispatch, COMMAND and the reference never see them: a client that sends
// one is told it is unknown.

// absentCommands are those commands with their ACL categories, as Redis
// 7.0's COMMAND INFO gives them; a subcommand follows its container.
var absentCommands = []struct {
	name string
	cats Category
}{
	{"asking", CatFast | CatConnection},
	{"bgrewriteaof", CatAdmin | CatSlow | CatDangerous},
	{"client|caching", CatSlow | CatConnection},
	{"client|getredir", CatSlow | CatConnection},
	{"client|reply", CatSlow | CatConnection},
	{"client|tracking", CatSlow | CatConnection},
	{"client|trackinginfo", CatSlow | CatConnection},
	{"cluster", CatSlow},
	{"cluster|addslots", CatAdmin | CatSlow | CatDangerous},
	{"cluster|addslotsrange", CatAdmin | CatSlow | CatDangerous},
	{"cluster|bumpepoch", CatAdmin | CatSlow | CatDangerous},
	{"cluster|count-failure-reports", CatAdmin | CatSlow | CatDangerous},
	{"cluster|countkeysinslot", CatSlow},
	{"cluster|delslots", CatAdmin | CatSlow | CatDangerous},
	{"cluster|delslotsrange", CatAdmin | CatSlow | CatDangerous},
	{"cluster|failover", CatAdmin | CatSlow | CatDangerous},
	{"cluster|flushslots", CatAdmin | CatSlow | CatDangerous},
	{"cluster|forget", CatAdmin | CatSlow | CatDangerous},
	{"cluster|getkeysinslot", CatSlow},
	{"cluster|help", CatSlow},
	{"cluster|info", CatSlow},
	{"cluster|keyslot", CatSlow},
	{"cluster|links", CatSlow},
	{"cluster|meet", CatAdmin | CatSlow | CatDangerous},
	{"cluster|myid", CatSlow},
	{"cluster|nodes", CatSlow},
	{"cluster|replicas", CatAdmin | CatSlow | CatDangerous},
	{"cluster|replicate", CatAdmin | CatSlow | CatDangerous},
	{"cluster|reset", CatAdmin | CatSlow | CatDangerous},
	{"cluster|saveconfig", CatAdmin | CatSlow | CatDangerous},
	{"cluster|set-config-epoch", CatAdmin | CatSlow | CatDangerous},
	{"cluster|setslot", CatAdmin | CatSlow | CatDangerous},
	{"cluster|shards", CatSlow},
	{"cluster|slaves", CatAdmin | CatSlow | CatDangerous},
	{"cluster|slots", CatSlow},
	{"failover", CatAdmin | CatSlow | CatDangerous},
	{"lolwut", CatRead | CatFast},
	{"module", CatSlow},
	{"module|help", CatSlow},
	{"module|list", CatAdmin | CatSlow | CatDangerous},
	{"module|load", CatAdmin | CatSlow | CatDangerous},
	{"module|loadex", CatAdmin | CatSlow | CatDangerous},
	{"module|unload", CatAdmin | CatSlow | CatDangerous},
	{"monitor", CatAdmin | CatSlow | CatDangerous},
	{"pfdebug", CatWrite | CatHyperLogLog | CatAdmin | CatSlow | CatDangerous},
	{"pfselftest", CatHyperLogLog | CatAdmin | CatSlow | CatDangerous},
	{"readonly", CatFast | CatConnection},
	{"readwrite", CatFast | CatConnection},
	{"restore-asking", CatKeyspace | CatWrite | CatSlow | CatDangerous},
	{"substr", CatRead | CatString | CatSlow},
	{"xack", CatWrite | CatStream | CatFast},
	{"xadd", CatWrite | CatStream | CatFast},
	{"xautoclaim", CatWrite | CatStream | CatFast},
	{"xclaim", CatWrite | CatStream | CatFast},
	{"xdel", CatWrite | CatStream | CatFast},
	{"xgroup", CatSlow},
	{"xgroup|create", CatWrite | CatStream | CatSlow},
	{"xgroup|createconsumer", CatWrite | CatStream | CatSlow},
	{"xgroup|delconsumer", CatWrite | CatStream | CatSlow},
	{"xgroup|destroy", CatWrite | CatStream | CatSlow},
	{"xgroup|help", CatStream | CatSlow},
	{"xgroup|setid", CatWrite | CatStream | CatSlow},
	{"xinfo", CatSlow},
	{"xinfo|consumers", CatRead | CatStream | CatSlow},
	{"xinfo|groups", CatRead | CatStream | CatSlow},
	{"xinfo|help", CatStream | CatSlow},
	{"xinfo|stream", CatRead | CatStream | CatSlow},
	{"xlen", CatRead | CatStream | CatFast},
	{"xpending", CatRead | CatStream | CatSlow},
	{"xrange", CatRead | CatStream | CatSlow},
	{"xread", CatRead | CatStream | CatSlow | CatBlocking},
	{"xreadgroup", CatWrite | CatStream | CatSlow | CatBlocking},
	{"xrevrange", CatRead | CatStream | CatSlow},
	{"xsetid", CatWrite | CatStream | CatFast},
	{"xtrim", CatWrite | CatStream | CatSlow},
}

// addAbsent gives the absent commands ids after the table's own, for the
// ACL bitmaps. An absent subcommand of a command limitkv has (client|
// tracking) is kept apart from the command's Sub, which dispatch reads.
func (t *Table) addAbsent() {
	t.absentByName = make(map[string]*Spec, len(absentCommands))
	for _, a := range absentCommands {
		s := &Spec{Name: a.name, acl: a.cats, id: t.aclCount()}
		if base, sub, ok := strings.Cut(a.name, "|"); ok {
			s.Name = sub
			if s.parent = t.absentByName[base]; s.parent != nil {
				s.parent.Sub = append(s.parent.Sub, s)
			} else if s.parent = t.byName[base]; s.parent != nil {
				s.parent.absentSub = append(s.parent.absentSub, s)
			} else {
				continue // a test's table without the container
			}
		}
		t.absent = append(t.absent, s)
		t.absentByName[a.name] = s
	}
}

// aclCount is the number of commands ACL bitmaps hold: the table's and
// the absent ones.
func (t *Table) aclCount() int { return len(t.all) + len(t.absent) }

// aclCommands calls fn for every command ACL rules know, containers
// before their subcommands: the table's in its order, then the absent
// ones.
func (t *Table) aclCommands(fn func(cmd *Spec)) {
	for _, cmd := range t.sorted {
		fn(cmd)
		for _, sub := range cmd.Sub {
			fn(sub)
		}
		for _, sub := range cmd.absentSub {
			fn(sub)
		}
	}
	for _, cmd := range t.absent {
		if cmd.parent == nil || t.absentByName[cmd.parent.Name] != nil {
			fn(cmd) // not a subcommand of one of the table's, seen above
		}
	}
}

// aclSubs calls fn for every subcommand of cmd that ACL rules know.
func (cmd *Spec) aclSubs(fn func(sub *Spec)) {
	for _, sub := range cmd.Sub {
		fn(sub)
	}
	for _, sub := range cmd.absentSub {
		fn(sub)
	}
}
