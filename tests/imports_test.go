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
// acl, cmddocs -> cmdspec -> engine; commands -> resp and the subsystems
// it drives (config, observe, scripting, ...); persist -> engine; engine ->
// ratelimit; the engine knows nothing of the wire or the disk, the wire
// nothing of commands, what describes a command (cmdspec, acl, cmddocs)
// nothing of the server that runs it, a subsystem nothing of requests,
// and the rate-limit core nothing of the keyspace that stores its states.
// Each package lists the packages of this module its non-test files may
// import; stdOnly packages may import nothing outside the standard
// library at all.
var allowedImports = map[string]struct {
	ours    []string
	stdOnly bool
}{
	// ratelimit is the rate-limit core: pure decisions and their state
	// encodings, which the engine calls under its shard locks.
	"ratelimit": {stdOnly: true},
	"engine":    {ours: []string{"ratelimit"}, stdOnly: true},
	"resp":      {},
	"lua51":     {ours: []string{"resp"}},
	"persist":   {ours: []string{"engine"}},
	"tlsconf":   {stdOnly: true},
	"commands":  {ours: []string{"cmdspec", "acl", "cmddocs", "engine", "ratelimit", "resp", "lua51", "tlsconf", "replication", "rdb", "observe", "config", "scripting", "blocking", "pubsub", "tracking", "migrate", "cluster"}},
	// config is what a setting is and how files, flags and CONFIG read and
	// write it; what a setting does to the server, commands hands it as
	// callbacks. CONFIG GET's patterns match as the keyspace's globs do
	// (engine.Match); a config-file line splits as an inline request does
	// (resp.SplitArgs), and client-output-buffer-limit is the wire's
	// syntax (resp.ParseOutputLimits).
	"config": {ours: []string{"engine", "resp"}, stdOnly: true},
	// scripting is the script runtime of EVAL and FCALL: the script
	// cache, the function libraries, the Lua states that run both, the
	// run in progress and the combiner. It reaches the server only
	// through the interfaces commands implements, so that the runtime can
	// be read and changed without the command layer. It may import lua51
	// (Lua itself), cmdspec (the spec of a command a script calls, and
	// the flags a script's declaration gives its request), resp (the
	// replies of those commands, and a shebang split as an inline request
	// is) and rdb (FUNCTION DUMP's payload is RDB's envelope).
	"scripting": {ours: []string{"lua51", "cmdspec", "resp", "rdb"}},
	// blocking is the clients blocked on keys, their order and who ends a
	// wait; what a served waiter does is commands'. Keys are strings and
	// kinds numbers to it: it needs nothing of ours.
	"blocking": {stdOnly: true},
	// pubsub is the subscriptions: who listens on which channel, shard
	// channel and pattern, and the messages' framing; writing to a
	// connection and the commands are commands'. Patterns match channels
	// as the keyspace's globs match keys (engine).
	"pubsub": {ours: []string{"engine"}, stdOnly: true},
	// tracking is client-side caching's table: which clients read which
	// keys, the BCAST prefixes and their changed keys; clients are IDs to
	// it, and sending an invalidation is commands'.
	"tracking": {stdOnly: true},
	// migrate is MIGRATE's client: the connections to other nodes, kept
	// for reuse, and the exchange on them; what keys go and what becomes
	// of them is commands'. It frames AUTH, SELECT and RESTORE as
	// requests are framed on the wire (resp.AppendCommand), and needs
	// nothing else of ours.
	"migrate": {ours: []string{"resp"}},
	// cmdspec is what a command is (name, arity, flags, key specs,
	// categories), below commands so that what needs a spec and not a
	// request (ACL rules, the command docs) need not import commands. The
	// engine's integer parsing is how key counts are read (string2ll).
	"cmdspec": {ours: []string{"engine"}, stdOnly: true},
	// acl is the users' rules, over the specs, the ACL LOG and the users
	// files; the users, their clients and the ACL command are commands'. Key patterns match as the
	// keyspace's globs do (engine), and a selector's text splits as an
	// inline request does (resp.SplitArgs).
	"acl": {ours: []string{"cmdspec", "engine", "resp"}, stdOnly: true},
	// cmddocs is the data files (key specs for cmdspec, documentation
	// for COMMAND DOCS and docs/command-list.md), written through an interface that
	// resp's Writer fills, not resp itself.
	"cmddocs": {ours: []string{"cmdspec"}, stdOnly: true},
	// observe is what the server observes about itself, as data
	// structures below commands, which records into them and answers the
	// commands that read them, and the process's memory and CPU figures.
	// They need no request, spec or key: the standard library only.
	"observe": {stdOnly: true},
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
	// cluster is the cluster bus, its messages, nodes.conf and the
	// cluster's state, byte for byte as Redis 7.0 has them; commands drive
	// it. It takes key slots from the engine, which shards a cluster
	// node's keys by them, and nothing else of ours.
	"cluster": {ours: []string{"engine"}},
	// internal/testserver builds and runs the servers for the tests and
	// the benchmark; who may import it is TestTestserverImporters's rule.
	"internal/testserver": {stdOnly: true},
}

// testserverImporters are the only packages that may import
// internal/testserver: the harness is for tests and the benchmark, and
// Go's internal/ rule alone would let every package of the module, the
// server's included, import it. In client only the tests may: client is
// what users go get.
var testserverImporters = []struct {
	dir       string
	testsOnly bool
}{
	{"tests", false},
	{"client", true},
	{"cmd/limitkv-bench", false},
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
	// So must every package under internal/.
	internal, _ := os.ReadDir(filepath.Join(root, "internal"))
	for _, e := range internal {
		if _, listed := allowedImports["internal/"+e.Name()]; e.IsDir() && !listed {
			t.Errorf("package internal/%s has no entry in allowedImports: add one stating what it may import", e.Name())
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

func TestTestserverImporters(t *testing.T) {
	const harness = module + "internal/testserver"
	root := ".."
	filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == harness && !mayImportTestserver(path) {
				t.Errorf("%s imports %s, which only %v may", path, harness, testserverImporters)
			}
		}
		return nil
	})
}

// mayImportTestserver says whether the file at path, relative to the
// tests directory, may import internal/testserver.
func mayImportTestserver(path string) bool {
	rel, err := filepath.Rel("..", path)
	if err != nil {
		return false
	}
	dir := filepath.ToSlash(filepath.Dir(rel))
	for _, p := range testserverImporters {
		if dir == p.dir && (!p.testsOnly || strings.HasSuffix(path, "_test.go")) {
			return true
		}
	}
	return false
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
		{"engine", "github.com/limitkv/limitkv/persist"},
		{"engine", "github.com/tidwall/redcon"},
		{"ratelimit", "github.com/limitkv/limitkv/engine"},
		{"ratelimit", "github.com/limitkv/limitkv/commands"},
		{"ratelimit", "github.com/limitkv/limitkv/resp"},
		{"ratelimit", "golang.org/x/exp/slices"},
		{"cmdspec", "github.com/limitkv/limitkv/commands"},
		{"cmdspec", "github.com/limitkv/limitkv/resp"},
		{"cmdspec", "github.com/limitkv/limitkv/acl"},
		{"acl", "github.com/limitkv/limitkv/commands"},
		{"acl", "github.com/limitkv/limitkv/replication"},
		{"cmddocs", "github.com/limitkv/limitkv/commands"},
		{"cmddocs", "github.com/limitkv/limitkv/resp"},
		{"cmdspec", "github.com/limitkv/limitkv/cmddocs"},
		{"resp", "github.com/limitkv/limitkv/commands"},
		{"scripting", "github.com/limitkv/limitkv/commands"},
		{"scripting", "github.com/limitkv/limitkv/engine"},
		{"scripting", "github.com/limitkv/limitkv/replication"},
		{"lua51", "github.com/limitkv/limitkv/scripting"},
		{"persist", "github.com/limitkv/limitkv/resp"},
		{"persist", "github.com/limitkv/limitkv/commands"},
		{"commands", "github.com/limitkv/limitkv/persist"},
		{"commands", "github.com/limitkv/limitkv/metrics"},
		{"metrics", "github.com/limitkv/limitkv/engine"},
		{"metrics", "github.com/limitkv/limitkv/persist"},
		{"replication", "github.com/limitkv/limitkv/commands"},
		{"replication", "github.com/limitkv/limitkv/persist"},
		{"observe", "github.com/limitkv/limitkv/commands"},
		{"observe", "github.com/limitkv/limitkv/cmdspec"},
		{"observe", "github.com/limitkv/limitkv/resp"},
		{"observe", "github.com/limitkv/limitkv/engine"},
		{"observe", "github.com/prometheus/client_golang/prometheus"},
		{"rdb", "github.com/limitkv/limitkv/engine"},
		{"rdb", "github.com/limitkv/limitkv/commands"},
		{"config", "github.com/limitkv/limitkv/commands"},
		{"config", "github.com/limitkv/limitkv/replication"},
		{"config", "github.com/limitkv/limitkv/tlsconf"},
		{"blocking", "github.com/limitkv/limitkv/commands"},
		{"blocking", "github.com/limitkv/limitkv/engine"},
		{"blocking", "github.com/limitkv/limitkv/resp"},
		{"pubsub", "github.com/limitkv/limitkv/commands"},
		{"pubsub", "github.com/limitkv/limitkv/resp"},
		{"pubsub", "github.com/limitkv/limitkv/replication"},
		{"migrate", "github.com/limitkv/limitkv/commands"},
		{"migrate", "github.com/limitkv/limitkv/engine"},
		{"migrate", "github.com/limitkv/limitkv/rdb"},
		{"client", "github.com/limitkv/limitkv/engine"},
		{"client", "github.com/limitkv/limitkv/resp"},
		{"internal/testserver", "github.com/limitkv/limitkv/engine"},
	} {
		r := allowedImports[c.pkg]
		if importAllowed(c.path, r.ours, r.stdOnly) {
			t.Errorf("%s may import %s, but the boundaries forbid it", c.pkg, c.path)
		}
	}
	for _, path := range []string{"../commands/server.go", "../cmd/limitkv/main.go", "../client/client.go", "../engine/engine_test.go"} {
		if mayImportTestserver(path) {
			t.Errorf("%s may import internal/testserver, but only tests and the benchmark may", path)
		}
	}
	for _, path := range []string{"../tests/acl_test.go", "../client/server_test.go", "../cmd/limitkv-bench/main.go"} {
		if !mayImportTestserver(path) {
			t.Errorf("%s may not import internal/testserver, but it is one of those the harness is for", path)
		}
	}
}
