package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
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
	// replaces save lines instead of adding them (see README).
	withInclude := filepath.Join(dir, "include.conf")
	os.WriteFile(withInclude, []byte("save 900 1\nsave 300 10\ninclude "+inc+"\n"), 0o644)
	plain := filepath.Join(dir, "plain.conf")
	os.WriteFile(plain, []byte("save 900 1\nsave 300 10\nmaxclients 66\n"), 0o644)

	start := map[string]func(conf string, flags ...string) *server{
		"limitkv": func(conf string, flags ...string) *server {
			port := freePort(t)
			args := append([]string{conf, "--port", strconv.Itoa(port), "--dir", t.TempDir()}, flags...)
			s := &server{t: t, addr: fmt.Sprintf("127.0.0.1:%d", port), args: args}
			s.start(limitkvBin, args)
			return s
		},
	}
	if _, err := os.Stat("/usr/bin/redis-server"); err == nil || os.Getenv("CI") == "true" {
		start["redis"] = func(conf string, flags ...string) *server {
			port := freePort(t)
			args := append([]string{conf, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--appendonly", "no",
				"--dir", t.TempDir(), "--daemonize", "no"}, flags...)
			s := &server{t: t, addr: fmt.Sprintf("127.0.0.1:%d", port), args: args}
			s.start(redisServerPath(t), args)
			return s
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
			c := dialRaw(t, s.addr)
			want := fmt.Sprintf(`["save", %q]`, tc.save)
			if got := c.do("CONFIG", "GET", "save").String(); got != want {
				t.Errorf("%s %s %q: CONFIG GET save %s, want %s", name, filepath.Base(tc.conf), tc.flags, got, want)
			}
			want = fmt.Sprintf(`["maxclients", %q]`, tc.maxc)
			if got := c.do("CONFIG", "GET", "maxclients").String(); got != want {
				t.Errorf("%s %s: CONFIG GET maxclients %s, want %s", name, filepath.Base(tc.conf), got, want)
			}
			s.stop()
		}
	}
	// Both a first argument and --config: which one was meant?
	if out, err := runBinary(t, plain, "--config", withInclude); err == nil || !strings.Contains(out, "two config files") {
		t.Errorf("a config file named twice: %v\n%s", err, out)
	}
}

