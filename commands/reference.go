package commands

import (
	"fmt"
	"sort"
	"strings"
)

// groupTitles orders and names the command groups in the reference.
var groupTitles = []struct{ group, title string }{
	{"ratelimit", "Rate limiting (limitkv)"},
	{"string", "Strings"},
	{"bitmap", "Bitmaps"},
	{"list", "Lists"},
	{"hash", "Hashes"},
	{"sorted-set", "Sorted sets"},
	{"generic", "Keys"},
	{"transactions", "Transactions"},
	{"scripting", "Scripting"},
	{"connection", "Connection"},
	{"server", "Server"},
}

// CommandList renders the supported commands, grouped, as Markdown: one
// line per command with its syntax and summary. README.md embeds it between
// markers and a test keeps the copy in step with the table.
func CommandList() string {
	tab := NewTable(commandTable())
	byGroup := map[string][]*Spec{}
	for _, s := range tab.Specs() {
		byGroup[s.group()] = append(byGroup[s.group()], s)
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
			writeCommandLine(&b, s)
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

func writeCommandLine(b *strings.Builder, s *Spec) {
	if len(s.Sub) > 0 {
		for _, sub := range s.Sub {
			writeCommandLine(b, sub)
		}
		if s.Run == nil {
			return
		}
	}
	name := strings.ToUpper(strings.ReplaceAll(s.FullName(), "|", " "))
	syntax := renderSyntax(s.args)
	if syntax != "" {
		syntax = " " + syntax
	}
	fmt.Fprintf(b, "- `%s%s` — %s\n", name, syntax, s.doc.Summary)
}
