package commands

import (
	"sort"
	"strings"

	"limitkv/engine"
)

// COMMAND and its subcommands, generated from the command table.

func cmdCommand(c *Ctx) {
	specs := c.Srv.Table.Specs()
	c.W.Array(len(specs))
	for _, s := range specs {
		writeCommandInfo(c, s)
	}
}

func cmdCommandCount(c *Ctx) { c.W.Int(int64(len(c.Srv.Table.Specs()))) }

func cmdCommandInfo(c *Ctx) {
	names := c.Args[2:]
	if len(names) == 0 {
		cmdCommand(c)
		return
	}
	c.W.Array(len(names))
	for _, n := range names {
		if s := c.Srv.lookupFull(n); s != nil {
			writeCommandInfo(c, s)
		} else {
			c.W.NullArray()
		}
	}
}

// lookupFull finds "get" or "client|list".
func (s *Server) lookupFull(name []byte) *Spec {
	base, sub, hasSub := strings.Cut(string(name), "|")
	spec := s.Table.Lookup([]byte(base))
	if spec == nil || !hasSub {
		return spec
	}
	return spec.lookupSub([]byte(sub))
}

func writeCommandInfo(c *Ctx, s *Spec) {
	w := c.W
	w.Array(10)
	w.BulkString(s.FullName())
	w.Int(int64(s.Arity))
	var flags []string
	for _, f := range flagNames {
		if s.Flags&f.f != 0 {
			flags = append(flags, f.name)
		}
	}
	w.Set(len(flags))
	for _, f := range flags {
		w.Simple(f)
	}
	w.Int(int64(s.First))
	w.Int(int64(s.Last))
	w.Int(int64(s.Step))
	cats := s.aclCategories()
	w.Set(len(cats))
	for _, cat := range cats {
		w.Simple(cat)
	}
	w.Set(0) // tips
	writeKeySpecs(c, s)
	if len(s.Sub) == 0 {
		w.Set(0)
		return
	}
	w.Array(len(s.Sub))
	for _, sub := range s.Sub {
		writeCommandInfo(c, sub)
	}
}

// writeKeySpecs describes where the keys are, in Redis 7's key-spec form:
// a range spec for fixed positions, a keynum spec for "numkeys key ...".
func writeKeySpecs(c *Ctx, s *Spec) {
	w := c.W
	n := 0
	if s.First > 0 {
		n++
	}
	if s.NumKeysAt > 0 {
		n++
	}
	w.Set(n)
	if s.First > 0 {
		last := s.Last
		if last >= 0 {
			last -= s.First
		}
		writeKeySpec(c, s, s.First, "range", "lastkey", int64(last), "keystep", int64(max(s.Step, 1)), "limit", 0)
	}
	if s.NumKeysAt > 0 {
		writeKeySpec(c, s, s.NumKeysAt, "keynum", "keynumidx", 0, "firstkey", 1, "keystep", 1)
	}
}

func writeKeySpec(c *Ctx, s *Spec, begin int, kind string, k1 string, v1 int64, k2 string, v2 int64, k3 string, v3 int64) {
	w := c.W
	w.Map(3)
	w.BulkString("flags")
	flags := keySpecFlags(s)
	w.Set(len(flags))
	for _, f := range flags {
		w.Simple(f)
	}
	w.BulkString("begin_search")
	w.Map(2)
	w.BulkString("type")
	w.BulkString("index")
	w.BulkString("spec")
	w.Map(1)
	w.BulkString("index")
	w.Int(int64(begin))
	w.BulkString("find_keys")
	w.Map(2)
	w.BulkString("type")
	w.BulkString(kind)
	w.BulkString("spec")
	w.Map(3)
	w.BulkString(k1)
	w.Int(v1)
	w.BulkString(k2)
	w.Int(v2)
	w.BulkString(k3)
	w.Int(v3)
}

func cmdCommandDocs(c *Ctx) {
	var specs []*Spec
	if len(c.Args) == 2 {
		specs = c.Srv.Table.Specs()
	} else {
		for _, n := range c.Args[2:] {
			if s := c.Srv.lookupFull(n); s != nil {
				specs = append(specs, s)
			}
		}
	}
	c.W.Map(len(specs))
	for _, s := range specs {
		c.W.BulkString(s.FullName())
		writeDocs(c, s)
	}
}

func writeDocs(c *Ctx, s *Spec) {
	w := c.W
	n := 4
	if len(s.args) > 0 {
		n++
	}
	if len(s.Sub) > 0 {
		n++
	}
	w.Map(n)
	w.BulkString("summary")
	w.BulkString(s.Summary)
	w.BulkString("since")
	w.BulkString(s.Since)
	w.BulkString("group")
	w.BulkString(s.group())
	w.BulkString("complexity")
	w.BulkString(s.Complexity)
	if len(s.args) > 0 {
		w.BulkString("arguments")
		writeArgDocs(c, s.args)
	}
	if len(s.Sub) > 0 {
		w.BulkString("subcommands")
		w.Map(len(s.Sub))
		for _, sub := range s.Sub {
			w.BulkString(sub.FullName())
			writeDocs(c, sub)
		}
	}
}

func writeArgDocs(c *Ctx, args []*argDoc) {
	w := c.W
	w.Array(len(args))
	for _, a := range args {
		n := 2
		if a.Type == "key" {
			n++
		}
		if a.Token != "" {
			n++
		}
		var flags []string
		if a.Optional {
			flags = append(flags, "optional")
		}
		if a.Multiple {
			flags = append(flags, "multiple")
		}
		if len(flags) > 0 {
			n++
		}
		if len(a.Args) > 0 {
			n++
		}
		w.Map(n)
		w.BulkString("name")
		w.BulkString(a.Name)
		w.BulkString("type")
		w.BulkString(a.Type)
		if a.Type == "key" {
			w.BulkString("key_spec_index")
			w.Int(0)
		}
		if a.Token != "" {
			w.BulkString("token")
			w.BulkString(a.Token)
		}
		if len(flags) > 0 {
			w.BulkString("flags")
			w.Set(len(flags))
			for _, f := range flags {
				w.Simple(f)
			}
		}
		if len(a.Args) > 0 {
			w.BulkString("arguments")
			writeArgDocs(c, a.Args)
		}
	}
}

func cmdCommandList(c *Ctx) {
	var names []string
	filter := func(s *Spec) bool { return true }
	if len(c.Args) > 2 {
		if len(c.Args) != 5 || !is(c.Args[2], "FILTERBY") {
			c.W.Error(msgSyntax)
			return
		}
		v := c.Args[4]
		switch {
		case is(c.Args[3], "MODULE"):
			filter = func(*Spec) bool { return false }
		case is(c.Args[3], "ACLCAT"):
			cat := "@" + strings.ToLower(string(v))
			filter = func(s *Spec) bool {
				for _, x := range s.aclCategories() {
					if x == cat {
						return true
					}
				}
				return false
			}
		case is(c.Args[3], "PATTERN"):
			filter = func(s *Spec) bool { return engine.Match(v, []byte(s.FullName()), true) }
		default:
			c.W.Error(msgSyntax)
			return
		}
	}
	for _, s := range c.Srv.Table.Specs() {
		if filter(s) {
			names = append(names, s.FullName())
		}
		for _, sub := range s.Sub {
			if filter(sub) {
				names = append(names, sub.FullName())
			}
		}
	}
	sort.Strings(names)
	c.W.Array(len(names))
	for _, n := range names {
		c.W.BulkString(n)
	}
}

func cmdCommandGetKeys(c *Ctx) {
	args := c.Args[2:]
	spec, errMsg := c.Srv.resolve(args)
	if spec == nil {
		if strings.HasPrefix(errMsg, "ERR wrong number") {
			c.W.Error("ERR Invalid number of arguments specified for command")
		} else {
			c.W.Error("ERR Invalid command specified")
		}
		return
	}
	pos := spec.keyPositions(args, nil)
	if len(pos) == 0 {
		if spec.First <= 0 && spec.NumKeysAt <= 0 {
			c.W.Error("ERR The command has no key arguments")
		} else {
			c.W.Error("ERR Invalid arguments specified for command")
		}
		return
	}
	c.W.Array(len(pos))
	for _, i := range pos {
		c.W.Bulk(args[i])
	}
}

func cmdCommandHelp(c *Ctx) {
	help(c, "COMMAND", []string{
		"(no subcommand)", "    Return details about all Redis commands.",
		"COUNT", "    Return the total number of commands in this Redis server.",
		"LIST", "    Return a list of all commands in this Redis server.",
		"INFO [<command-name> ...]", "    Return details about multiple Redis commands.",
		"    If no command names are given, documentation details for all", "    commands are returned.",
		"DOCS [<command-name> ...]", "    Return documentation details about multiple Redis commands.",
		"    If no command names are given, documentation details for all", "    commands are returned.",
		"GETKEYS <full-command>", "    Return the keys from a full Redis command.",
		"LIST [FILTERBY (MODULE <module-name>|ACLCAT <category>|PATTERN <pattern>)]", "    Return a list of all commands in this Redis server.",
	})
}

func cmdCommandGetKeysAndFlags(c *Ctx) {
	args := c.Args[2:]
	spec, errMsg := c.Srv.resolve(args)
	if spec == nil {
		if strings.HasPrefix(errMsg, "ERR wrong number") {
			c.W.Error("ERR Invalid number of arguments specified for command")
		} else {
			c.W.Error("ERR Invalid command specified")
		}
		return
	}
	pos := spec.keyPositions(args, nil)
	if len(pos) == 0 {
		c.W.Error("ERR The command has no key arguments")
		return
	}
	flags := keySpecFlags(spec)
	c.W.Array(len(pos))
	for _, i := range pos {
		c.W.Array(2)
		c.W.Bulk(args[i])
		c.W.Set(len(flags))
		for _, f := range flags {
			c.W.Simple(f)
		}
	}
}

// keySpecFlags is the access description of a command's keys.
func keySpecFlags(s *Spec) []string {
	if s.Flags&Write == 0 {
		return []string{"RO", "access"}
	}
	return []string{"RW", "access", "update"}
}
