package commands

import (
	"os"
	"strings"
	"testing"

	"github.com/limitkv/limitkv/cmddocs"
)

const (
	commandListBegin = "<!-- commands:begin (generated from the command table; go test ./commands -run TestDocsCommandList -update) -->"
	commandListEnd   = "<!-- commands:end -->"
)

// TestDocsCommandList keeps the command list of docs/command-list.md
// generated from the command table.
func TestDocsCommandList(t *testing.T) {
	path := "../docs/command-list.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i, j := strings.Index(text, commandListBegin), strings.Index(text, commandListEnd)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the command list markers", path)
	}
	want := commandListBegin + "\n" + cmddocs.Load().CommandList(testTable()) + "\n" + commandListEnd
	got := text[i : j+len(commandListEnd)]
	if got == want {
		return
	}
	if *update {
		os.WriteFile(path, []byte(text[:i]+want+text[j+len(commandListEnd):]), 0o644)
		return
	}
	t.Fatalf("%s's command list is out of date: run go test ./commands -run TestDocsCommandList -update", path)
}
