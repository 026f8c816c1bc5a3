package main

import (
	"bytes"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/limitkv/limitkv/commands"
)

func TestLoadEnv(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(secret, []byte("from-file\n"), 0o600)
	env := map[string]string{
		"LIMITKV_MAXCLIENTS":       "77",
		"LIMITKV_REQUIREPASS_FILE": secret,
		"LIMITKV_UNRELATED":        "x",
	}
	cfg := commands.NewConfig()
	if err := loadEnv(cfg, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if got := cfg.Get("maxclients"); got != "77" {
		t.Errorf("maxclients = %q", got)
	}
	if got := cfg.Get("requirepass"); got != "from-file" {
		t.Errorf("requirepass = %q", got)
	}
	env["LIMITKV_REQUIREPASS"] = "both"
	if err := loadEnv(commands.NewConfig(), func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err == nil {
		t.Error("both LIMITKV_REQUIREPASS and its _FILE accepted")
	}
	bad := map[string]string{"LIMITKV_MAXCLIENTS": "lots"}
	if err := loadEnv(commands.NewConfig(), func(k string) (string, bool) { v, ok := bad[k]; return v, ok }); err == nil || !strings.Contains(err.Error(), "LIMITKV_MAXCLIENTS") {
		t.Errorf("a bad value's error does not name the variable: %v", err)
	}
}

func TestWarnIfOpen(t *testing.T) {
	public := []net.Addr{&net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 6379}}
	loop := []net.Addr{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 6379}}
	for _, c := range []struct {
		name     string
		addrs    []net.Addr
		settings [][2]string
		want     string
	}{
		{"loopback only", loop, nil, ""},
		{"exposed, protected", public, nil, "protected mode"},
		{"exposed, open", public, [][2]string{{"protected-mode", "no"}}, "anyone who can reach"},
		{"exposed, password", public, [][2]string{{"requirepass", "pw"}}, ""},
	} {
		cfg := commands.NewConfig()
		if err := cfg.Set(c.settings, true); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		warnIfOpen(c.addrs, cfg, cfg.Get("requirepass") == "", slog.New(slog.NewTextHandler(&out, nil)))
		if got := out.String(); c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s: logged %q, want %q", c.name, got, c.want)
		}
	}
}
