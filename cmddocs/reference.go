package cmddocs

import (
	"fmt"
	"sort"
	"strings"

	"github.com/limitkv/limitkv/cmdspec"
)

// groupTitles orders and names the command groups in the reference.
var groupTitles = []struct{ group, title string }{
	{"ratelimit", "Rate limiting (limitkv)"},
	{"string", "Strings"},
	{"bitmap", "Bitmaps"},
	{"hyperloglog", "HyperLogLog"},
	{"list", "Lists"},
	{"hash", "Hashes"},
	{"set", "Sets"},
	{"sorted-set", "Sorted sets"},
	{"geo", "Geo"},
	{"stream", "Streams"},
	{"generic", "Keys"},
	{"transactions", "Transactions"},
	{"scripting", "Scripting"},
	{"connection", "Connection"},
	{"pubsub", "Pub/sub"},
	{"server", "Server"},
	{"cluster", "Cluster"},
}

// CommandList renders the commands of t, a table made with d's SpecData,
// grouped, as Markdown: one line per command with its syntax and summary.
// docs/command-list.md embeds it between markers and a test of package commands
// keeps the copy in step with the table.
func (d Docs) CommandList(t *cmdspec.Table) string {
	byGroup := map[string][]*cmdspec.Spec{}
	for _, s := range t.Specs() {
		byGroup[d.Group(s)] = append(byGroup[d.Group(s)], s)
	}
	var b strings.Builder
	for _, g := range groupTitles {
		specs := byGroup[g.group]
		if len(specs) == 0 {
			continue
		}
		delete(byGroup, g.group)
		fmt.Fprintf(&b, "\n**%s**\n\n", g.title)
		for _, s := range specs {
			d.writeCommandLine(&b, s)
		}
	}
	if len(byGroup) > 0 {
		var left []string
		for g := range byGroup {
			left = append(left, g)
		}
		sort.Strings(left)
		panic("CommandList: no title for groups " + strings.Join(left, ", "))
	}
	return b.String()
}

// writeCommandLine writes the line of s, or the lines of its subcommands
// and its own if it may be called alone (COMMAND).
func (d Docs) writeCommandLine(b *strings.Builder, s *cmdspec.Spec) {
	if len(s.Sub) > 0 {
		for _, sub := range s.Sub {
			d.writeCommandLine(b, sub)
		}
		if !s.ArityOK(1) {
			return
		}
	}
	name := strings.ToUpper(strings.ReplaceAll(s.FullName(), "|", " "))
	syntax := Syntax(d.Of(s).Args)
	if syntax != "" {
		syntax = " " + syntax
	}
	fmt.Fprintf(b, "- `%s%s` — %s\n", name, syntax, d.Of(s).Summary)
}

// Syntax writes args back as Redis's documentation shows them, without the
// type marks: "key value [NX | XX]".
func Syntax(args []*Arg) string {
	var parts []string
	for _, a := range args {
		parts = append(parts, renderArg(a))
	}
	return strings.Join(parts, " ")
}

func renderArg(a *Arg) string {
	var s string
	switch a.Type {
	case "pure-token":
		s = a.Token
	case "oneof":
		var alts []string
		for _, x := range a.Args {
			alts = append(alts, renderArg(x))
		}
		s = strings.Join(alts, " | ")
		if !a.Optional || a.Token != "" {
			s = "<" + s + ">"
		}
		if a.Token != "" {
			s = a.Token + " " + s // ZUNION's "AGGREGATE <SUM | MIN | MAX>"
		}
	case "block":
		var inner []string
		if a.Token != "" {
			inner = append(inner, a.Token)
		}
		for _, x := range a.Args {
			inner = append(inner, renderArg(x))
		}
		s = strings.Join(inner, " ")
	default:
		s = a.Name
		if a.Token != "" && a.Multiple {
			// The token once, then the arguments: "WEIGHTS weight [weight ...]".
			s = a.Token + " " + s + " [" + s + " ...]"
			if a.Optional {
				s = "[" + s + "]"
			}
			return s
		}
		if a.Token != "" {
			s = a.Token + " " + s
		}
	}
	if a.Multiple {
		s += " [" + strings.TrimSuffix(strings.TrimPrefix(s, "<"), ">") + " ...]"
	}
	if a.Optional {
		s = "[" + s + "]"
	}
	return s
}
