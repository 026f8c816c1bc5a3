package commands

import (
	"os"
	"strings"
	"testing"
)

const (
	listBegin = "<!-- commands:begin (generated from commands/table.go; go test ./commands -run TestReadmeCommandList -update) -->"
	listEnd   = "<!-- commands:end -->"
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
	i, j := strings.Index(text, listBegin), strings.Index(text, listEnd)
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the command list markers")
	}
	want := listBegin + "\n" + CommandList() + "\n" + listEnd
	got := text[i : j+len(listEnd)]
	if got == want {
		return
	}
	if *update {
		os.WriteFile(path, []byte(text[:i]+want+text[j+len(listEnd):]), 0o644)
		return
	}
	t.Fatal("README.md's command list is out of date: run go test ./commands -run TestReadmeCommandList -update")
}
