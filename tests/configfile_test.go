package tests

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/limitkv/limitkv/internal/testserver"
)

// TestConfigFileAsRedis: the config file named first (limitkv
// /etc/limitkv.conf, as redis-server /etc/redis.conf), its include lines
// and its save lines, which add up with each other and with --save flags,
// read as redis-server 7.0 reads them.
func TestConfigFileAsRedis(t *testing.T) {
	dir := t.TempDir()
	inc := filepath.Join(dir, "inc.conf")
	os.WriteFile(inc, []byte("maxclients 77\nsave 60 5\n"), 0o644)
	// An include, then no more save lines: after an include Redis 7.0
	// replaces save lines instead of adding them (see docs/differences.md).
	withInclude := filepath.Join(dir, "include.conf")
	os.WriteFile(withInclude, []byte("save 900 1\nsave 300 10\ninclude "+inc+"\n"), 0o644)
	plain := filepath.Join(dir, "plain.conf")
	os.WriteFile(plain, []byte("save 900 1\nsave 300 10\nmaxclients 66\n"), 0o644)

	start := map[string]func(conf string, flags ...string) *server{
		"limitkv": func(conf string, flags ...string) *server {
			port := freePort(t)
			args := append([]string{conf, "--port", strconv.Itoa(port), "--dir", t.TempDir()}, flags...)
			return startProcess(t, testserver.Spec{Kind: testserver.Limitkv, Bin: limitkvBin, Addr: testserver.Addr(port), Args: args})
		},
	}
	if testserver.Available("redis-server") {
		start["redis"] = func(conf string, flags ...string) *server {
			port := freePort(t)
			args := append([]string{conf, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--appendonly", "no",
				"--dir", t.TempDir(), "--daemonize", "no"}, flags...)
			return startProcess(t, testserver.Spec{Kind: testserver.Redis, Bin: redisServerPath(t), Addr: testserver.Addr(port), Args: args})
		}
	}
	for name, start := range start {
		for _, tc := range []struct {
			conf       string
			flags      []string
			save, maxc string
		}{
			{withInclude, nil, "900 1 300 10 60 5", "77"},
			{plain, []string{"--save", "10", "2", "--save", "20", "3"}, "900 1 300 10 10 2 20 3", "66"},
			{plain, []string{"--save", ""}, "", "66"},
		} {
			s := start(tc.conf, tc.flags...)
			c := dialRaw(t, s.Addr)
			want := fmt.Sprintf(`["save", %q]`, tc.save)
			if got := c.do("CONFIG", "GET", "save").String(); got != want {
				t.Errorf("%s %s %q: CONFIG GET save %s, want %s", name, filepath.Base(tc.conf), tc.flags, got, want)
			}
			want = fmt.Sprintf(`["maxclients", %q]`, tc.maxc)
			if got := c.do("CONFIG", "GET", "maxclients").String(); got != want {
				t.Errorf("%s %s: CONFIG GET maxclients %s, want %s", name, filepath.Base(tc.conf), got, want)
			}
			s.Stop()
		}
	}
	// Both a first argument and --config: which one was meant?
	if out, err := runBinary(t, plain, "--config", withInclude); err == nil || !strings.Contains(out, "two config files") {
		t.Errorf("a config file named twice: %v\n%s", err, out)
	}
}

// TestRequirepassKeptAsRedisKeepsIt: requirepass is a setting like any
// other, kept in plain text: CONFIG GET shows it and CONFIG REWRITE
// writes it, as redis-server does (docs/operations.md says so); only the
// ACL shows the default user's password as its SHA-256.
func TestRequirepassKeptAsRedisKeepsIt(t *testing.T) {
	const pass = "pa ss"
	sum := sha256.Sum256([]byte(pass))
	hash := "#" + hex.EncodeToString(sum[:])
	kinds := map[string]string{"limitkv": limitkvBin}
	if testserver.Available("redis-server") {
		kinds["redis"] = redisServerPath(t)
	}
	for name, bin := range kinds {
		dir, data := t.TempDir(), t.TempDir()
		conf := filepath.Join(dir, "server.conf")
		port := freePort(t)
		os.WriteFile(conf, []byte(fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nrequirepass %q\n", port, data, pass)), 0o644)
		s := startProcess(t, testserver.Spec{Kind: name, Bin: bin, Addr: testserver.Addr(port), Args: []string{conf}})
		c := dialRaw(t, s.Addr)
		if v := c.do("AUTH", pass); v.String() != "+OK" {
			t.Fatalf("%s: AUTH: %s", name, v)
		}
		if got, want := c.do("CONFIG", "GET", "requirepass").String(), fmt.Sprintf(`["requirepass", %q]`, pass); got != want {
			t.Errorf("%s: CONFIG GET requirepass %s, want %s", name, got, want)
		}
		if got := c.do("ACL", "LIST").String(); !strings.Contains(got, hash) || strings.Contains(got, pass) {
			t.Errorf("%s: ACL LIST %s, want the password as %s only", name, got, hash)
		}
		c.do("CONFIG", "SET", "timeout", "7")
		if v := c.do("CONFIG", "REWRITE"); v.String() != "+OK" {
			t.Fatalf("%s: CONFIG REWRITE: %s", name, v)
		}
		if data, _ := os.ReadFile(conf); !strings.Contains(string(data), `requirepass "pa ss"`) {
			t.Errorf("%s: the rewritten file lacks the password in plain text:\n%s", name, data)
		}
		s.Stop()
	}
}
