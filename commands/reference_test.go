package commands

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/limitkv/limitkv/cmdspec"
)

const (
	readmeListBegin = "<!-- commands:begin (generated from commands/table.go; go test ./commands -run TestReadmeCommandList -update) -->"
	readmeListEnd   = "<!-- commands:end -->"
)

// TestReadmeCommandList keeps the README's command list generated from the
// command table.
func TestReadmeCommandList(t *testing.T) {
	path := "../README.md"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	i, j := strings.Index(text, readmeListBegin), strings.Index(text, readmeListEnd)
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the command list markers")
	}
	want := readmeListBegin + "\n" + CommandList() + "\n" + readmeListEnd
	got := text[i : j+len(readmeListEnd)]
	if got == want {
		return
	}
	if *update {
		os.WriteFile(path, []byte(text[:i]+want+text[j+len(readmeListEnd):]), 0o644)
		return
	}
	t.Fatal("README.md's command list is out of date: run go test ./commands -run TestReadmeCommandList -update")
}

// The README command list is rendered only by TestReadmeCommandList (with
// -update), so its generator lives here, not in the server.

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
	{"generic", "Keys"},
	{"transactions", "Transactions"},
	{"scripting", "Scripting"},
	{"connection", "Connection"},
	{"pubsub", "Pub/sub"},
	{"server", "Server"},
}

// CommandList renders the supported commands, grouped, as Markdown: one
// line per command with its syntax and summary. README.md embeds it between
// markers and a test keeps the copy in step with the table.
func CommandList() string {
	tab, cmds := newTable(commandTable())
	byGroup := map[string][]*cmdspec.Spec{}
	for _, s := range tab.Specs() {
		byGroup[group(s)] = append(byGroup[group(s)], s)
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
			writeCommandLine(&b, s, cmds)
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

func writeCommandLine(b *strings.Builder, s *cmdspec.Spec, cmds []cmdState) {
	if len(s.Sub) > 0 {
		for _, sub := range s.Sub {
			writeCommandLine(b, sub, cmds)
		}
		if cmds[s.ID()].run == nil {
			return
		}
	}
	name := strings.ToUpper(strings.ReplaceAll(s.FullName(), "|", " "))
	syntax := renderSyntax(docOf(s).Args)
	if syntax != "" {
		syntax = " " + syntax
	}
	fmt.Fprintf(b, "- `%s%s` — %s\n", name, syntax, docOf(s).Summary)
}

// renderSyntax writes args back as Redis's documentation shows them, without the
// type marks: "key value [NX | XX]".
func renderSyntax(args []*argDoc) string {
	var parts []string
	for _, a := range args {
		parts = append(parts, renderArg(a))
	}
	return strings.Join(parts, " ")
}

func renderArg(a *argDoc) string {
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
