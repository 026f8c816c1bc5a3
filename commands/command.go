package commands

import (
	"sort"
	"strings"

	"github.com/limitkv/limitkv/cmddocs"
	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/engine"
)

// introspectionCommands: COMMAND and its subcommands, read from the
// table itself.
func introspectionCommands() []*command {
	return []*command{
		cmd("command", -1, "loading stale", cmdCommand).withSub(
			cmd("count", 2, "loading stale", cmdCommandCount),
			cmd("docs", -2, "loading stale", cmdCommandDocs),
			cmd("getkeys", -4, "loading stale", cmdCommandGetKeys),
			cmd("getkeysandflags", -4, "loading stale", cmdCommandGetKeysAndFlags),
			cmd("help", 2, "loading stale", cmdHelp),
			cmd("info", -2, "loading stale", cmdCommandInfo),
			cmd("list", -2, "loading stale", cmdCommandList),
		),
	}
}

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
			c.W.Null()
		}
	}
}

// lookupFull finds "get" or "client|list".
func (s *Server) lookupFull(name []byte) *cmdspec.Spec {
	base, sub, hasSub := strings.Cut(string(name), "|")
	spec := s.Table.Lookup([]byte(base))
	if spec == nil || !hasSub {
		return spec
	}
	return spec.LookupSub([]byte(sub))
}

func writeCommandInfo(c *Ctx, s *cmdspec.Spec) {
	w := c.W
	w.Array(10)
	w.BulkString(s.FullName())
	w.Int(int64(s.Arity))
	flags := s.Flags.Names()
	w.Set(len(flags))
	for _, f := range flags {
		w.Simple(f)
	}
	first, last, step := s.KeyRange()
	w.Int(int64(first))
	w.Int(int64(last))
	w.Int(int64(step))
	cats := s.Categories().Names()
	w.Set(len(cats))
	for _, cat := range cats {
		w.Simple("@" + cat)
	}
	tips := s.Tips()
	w.Set(len(tips))
	for _, t := range tips {
		w.BulkString(t)
	}
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

// writeKeySpecs describes where the keys are, in Redis 7's key-spec form.
func writeKeySpecs(c *Ctx, s *cmdspec.Spec) {
	w := c.W
	specs := s.KeySpecs()
	w.Set(len(specs))
	for _, ks := range specs {
		n := 3
		if ks.Notes != "" {
			n++
		}
		w.Map(n)
		if ks.Notes != "" {
			w.BulkString("notes")
			w.BulkString(ks.Notes)
		}
		w.BulkString("flags")
		flags := strings.Fields(ks.Flags)
		w.Set(len(flags))
		for _, f := range flags {
			w.Simple(f)
		}
		w.BulkString("begin_search")
		w.Map(2)
		w.BulkString("type")
		switch {
		case ks.Begin > 0:
			w.BulkString("index")
			w.BulkString("spec")
			w.Map(1)
			w.BulkString("index")
			w.Int(int64(ks.Begin))
		case ks.Keyword != "":
			w.BulkString("keyword")
			w.BulkString("spec")
			w.Map(2)
			w.BulkString("keyword")
			w.BulkString(ks.Keyword)
			w.BulkString("startfrom")
			w.Int(int64(ks.KeywordFrom))
		default:
			w.BulkString("unknown")
			w.BulkString("spec")
			w.Map(0)
		}
		w.BulkString("find_keys")
		w.Map(2)
		w.BulkString("type")
		switch {
		case ks.Unknown:
			w.BulkString("unknown")
			w.BulkString("spec")
			w.Map(0)
		case ks.KeyNum:
			w.BulkString("keynum")
			w.BulkString("spec")
			w.Map(3)
			w.BulkString("keynumidx")
			w.Int(int64(ks.KeyNumIdx))
			w.BulkString("firstkey")
			w.Int(int64(ks.FirstKey))
			w.BulkString("keystep")
			w.Int(int64(ks.KeyStep))
		default:
			w.BulkString("range")
			w.BulkString("spec")
			w.Map(3)
			w.BulkString("lastkey")
			w.Int(int64(ks.LastKey))
			w.BulkString("keystep")
			w.Int(int64(ks.KeyStep))
			w.BulkString("limit")
			w.Int(int64(ks.Limit))
		}
	}
}

func cmdCommandDocs(c *Ctx) {
	var specs []*cmdspec.Spec
	if len(c.Args) == 2 {
		specs = c.Srv.Table.Specs()
	} else {
		for _, n := range c.Args[2:] {
			if s := c.Srv.lookupFull(n); s != nil {
				specs = append(specs, s)
			}
		}
	}
	docs := cmddocs.Load()
	c.W.Map(len(specs))
	for _, s := range specs {
		c.W.BulkString(s.FullName())
		docs.Write(c.W, s)
	}
}

func cmdCommandList(c *Ctx) {
	var names []string
	filter := func(s *cmdspec.Spec) bool { return true }
	if len(c.Args) > 2 {
		if len(c.Args) != 5 || !is(c.Args[2], "FILTERBY") {
			c.W.Error(msgSyntax)
			return
		}
		v := c.Args[4]
		switch {
		case is(c.Args[3], "MODULE"):
			filter = func(*cmdspec.Spec) bool { return false }
		case is(c.Args[3], "ACLCAT"):
			cat := cmdspec.CategoryByName(strings.ToLower(string(v)))
			filter = func(s *cmdspec.Spec) bool { return s.Categories()&cat != 0 }
		case is(c.Args[3], "PATTERN"):
			filter = func(s *cmdspec.Spec) bool { return engine.Match(v, []byte(s.FullName()), true) }
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

func cmdCommandGetKeys(c *Ctx) { getKeys(c, false) }

func cmdCommandGetKeysAndFlags(c *Ctx) { getKeys(c, true) }

// getKeys answers COMMAND GETKEYS and GETKEYSANDFLAGS, checking in Redis's
// order: a known command, one that has keys, the arity, then the keys the
// arguments give.
func getKeys(c *Ctx, withFlags bool) {
	args := c.Args[2:]
	spec := c.Srv.findSpec(args)
	switch {
	case spec == nil:
		c.W.Error("Invalid command specified")
		return
	case !spec.HasKeys():
		c.W.Error("The command has no key arguments")
		return
	case !spec.ArityOK(len(args)):
		c.W.Error("Invalid number of arguments specified for command")
		return
	}
	pos := spec.KeyPositions(args, nil)
	if len(pos) == 0 {
		if spec.Flags&cmdspec.NoMandatoryKeys != 0 {
			c.W.Array(0) // EVAL with numkeys 0
		} else {
			c.W.Error("Invalid arguments specified for command")
		}
		return
	}
	c.W.Array(len(pos))
	for _, i := range pos {
		if !withFlags {
			c.W.Bulk(args[i])
			continue
		}
		c.W.Array(2)
		c.W.Bulk(args[i])
		flags := strings.Fields(spec.KeyFlagsAt(args, i))
		c.W.Set(len(flags))
		for _, f := range flags {
			c.W.Simple(f)
		}
	}
}
