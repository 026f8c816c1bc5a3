package tests

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The package boundaries, checked rather than hoped for (as Pebble's
// TestForbiddenImports does). Imports point one way: cmd -> commands ->
// acl, cmddocs -> cmdspec -> engine; commands -> resp; persist -> engine;
// the engine knows nothing of the wire or the disk, the wire nothing of
// commands, and what describes a command (cmdspec, acl, cmddocs) nothing
// of the server that runs it. Each package lists the packages of this
// module its non-test files may import; stdOnly packages may import
// nothing outside the standard library at all.
var allowedImports = map[string]struct {
	ours    []string
	stdOnly bool
}{
	"engine":   {stdOnly: true},
	"resp":     {},
	"lua51":    {ours: []string{"resp"}},
	"persist":  {ours: []string{"engine"}},
	"tlsconf":  {stdOnly: true},
	"commands": {ours: []string{"cmdspec", "acl", "cmddocs", "engine", "resp", "lua51", "tlsconf", "replication", "rdb"}},
	// cmdspec is what a command is (name, arity, flags, key specs,
	// categories), below commands so that what needs a spec and not a
	// request (ACL rules, the command docs) need not import commands. The
	// engine's integer parsing is how key counts are read (string2ll).
	"cmdspec": {ours: []string{"engine"}, stdOnly: true},
	// acl is the users' rules, over the specs; the users, their clients
	// and the ACL command are commands'. Key patterns match as the
	// keyspace's globs do (engine), and a selector's text splits as an
	// inline request does (resp.SplitArgs).
	"acl": {ours: []string{"cmdspec", "engine", "resp"}, stdOnly: true},
	// cmddocs is the data files (key specs for cmdspec, documentation
	// for COMMAND DOCS and the README), written through an interface that
	// resp's Writer fills, not resp itself.
	"cmddocs": {ours: []string{"cmdspec"}, stdOnly: true},
	// rdb is Redis's RDB value format over plain Go values (DUMP, RESTORE,
	// MIGRATE, FUNCTION DUMP); commands translates to and from the engine.
	"rdb": {stdOnly: true},
	// replication runs the links and the stream; commands drive it.
	"replication": {ours: []string{"engine", "resp"}},
	// metrics reads the server's counters through commands' exported
	// stats; commands knows nothing of it.
	"metrics": {ours: []string{"commands"}},
	// client is what users go get: go-redis and the standard library,
	// nothing of the server.
	"client": {},
}

const module = "github.com/limitkv/limitkv/"

func TestForbiddenImports(t *testing.T) {
	root := ".."
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if _, listed := allowedImports[e.Name()]; listed {
			continue
		}
		// A new top-level package must say where it stands.
		if files, _ := filepath.Glob(filepath.Join(root, e.Name(), "*.go")); len(files) > 0 && e.Name() != "tests" {
			t.Errorf("package %s has no entry in allowedImports: add one stating what it may import", e.Name())
		}
	}
	for pkg, rule := range allowedImports {
		files, err := filepath.Glob(filepath.Join(root, pkg, "*.go"))
		if err != nil || len(files) == 0 {
			t.Errorf("package %s: no Go files", pkg)
			continue
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range parsed.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				if !importAllowed(path, rule.ours, rule.stdOnly) {
					t.Errorf("%s imports %q, which the package boundaries forbid", f, path)
				}
			}
		}
	}
}

func importAllowed(path string, ours []string, stdOnly bool) bool {
	if own, ok := strings.CutPrefix(path, module); ok {
		for _, o := range ours {
			if own == o {
				return true
			}
		}
		return false
	}
	first, _, _ := strings.Cut(path, "/")
	isStd := !strings.Contains(first, ".")
	return isStd || !stdOnly
}

// TestForbiddenImportsCatches keeps the check honest: it must reject the
// imports the boundaries exist to prevent.
func TestForbiddenImportsCatches(t *testing.T) {
	for _, c := range []struct {
		pkg, path string
	}{
		{"engine", "github.com/limitkv/limitkv/resp"},
		{"engine", "github.com/tidwall/redcon"},
		{"resp", "github.com/limitkv/limitkv/commands"},
		{"persist", "github.com/limitkv/limitkv/resp"},
		{"persist", "github.com/limitkv/limitkv/commands"},
		{"commands", "github.com/limitkv/limitkv/persist"},
		{"commands", "github.com/limitkv/limitkv/metrics"},
		{"cmdspec", "github.com/limitkv/limitkv/commands"},
		{"cmdspec", "github.com/limitkv/limitkv/resp"},
		{"cmdspec", "github.com/limitkv/limitkv/acl"},
		{"acl", "github.com/limitkv/limitkv/commands"},
		{"acl", "github.com/limitkv/limitkv/replication"},
		{"cmddocs", "github.com/limitkv/limitkv/commands"},
		{"cmddocs", "github.com/limitkv/limitkv/resp"},
		{"cmdspec", "github.com/limitkv/limitkv/cmddocs"},
		{"metrics", "github.com/limitkv/limitkv/engine"},
		{"metrics", "github.com/limitkv/limitkv/persist"},
		{"replication", "github.com/limitkv/limitkv/commands"},
		{"replication", "github.com/limitkv/limitkv/persist"},
		{"rdb", "github.com/limitkv/limitkv/engine"},
		{"rdb", "github.com/limitkv/limitkv/commands"},
		{"client", "github.com/limitkv/limitkv/engine"},
		{"client", "github.com/limitkv/limitkv/resp"},
	} {
		r := allowedImports[c.pkg]
		if importAllowed(c.path, r.ours, r.stdOnly) {
			t.Errorf("%s may import %s, but the boundaries forbid it", c.pkg, c.path)
		}
	}
}
