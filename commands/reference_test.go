package commands

import (
	"os"
	"strings"
	"testing"

	"github.com/limitkv/limitkv/cmddocs"
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
	want := readmeListBegin + "\n" + cmddocs.Load().CommandList(testTable()) + "\n" + readmeListEnd
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
