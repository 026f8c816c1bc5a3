package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLoadEnv(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(secret, []byte("from-file\n"), 0o600)
	env := map[string]string{
		"LIMITKV_MAXCLIENTS":       "77",
		"LIMITKV_REQUIREPASS_FILE": secret,
		"LIMITKV_UNRELATED":        "x",
	}
	cfg := New(nil)
	if err := cfg.LoadEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if got := cfg.Get("maxclients"); got != "77" {
		t.Errorf("maxclients = %q", got)
	}
	if got := cfg.Get("requirepass"); got != "from-file" {
		t.Errorf("requirepass = %q", got)
	}
	env["LIMITKV_REQUIREPASS"] = "both"
	if err := New(nil).LoadEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err == nil {
		t.Error("both LIMITKV_REQUIREPASS and its _FILE accepted")
	}
	bad := map[string]string{"LIMITKV_MAXCLIENTS": "lots"}
	if err := New(nil).LoadEnv(func(k string) (string, bool) { v, ok := bad[k]; return v, ok }); err == nil || !strings.Contains(err.Error(), "LIMITKV_MAXCLIENTS") {
		t.Errorf("a bad value's error does not name the variable: %v", err)
	}
}

// The words after a setting's flag are its value, as redis-server reads
// them.
func TestJoinMultiWordFlags(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"--replicaof", "h", "6379", "--port", "1"}, []string{"--replicaof", "h 6379", "--port", "1"}},
		{[]string{"--slaveof", "h", "6379"}, []string{"--slaveof", "h 6379"}},
		{[]string{"--save", "900", "1", "--save", "60", "5"}, []string{"--save", "900 1", "--save", "60 5"}},
		{[]string{"--save", ""}, []string{"--save", ""}},
		{[]string{"--slowlog-log-slower-than", "-1", "--port", "1"}, []string{"--slowlog-log-slower-than", "-1", "--port", "1"}},
		{[]string{"--client-output-buffer-limit", "normal", "1gb", "512mb", "20"}, []string{"--client-output-buffer-limit", "normal 1gb 512mb 20"}},
		{[]string{"--bind", "127.0.0.1", "::1", "--port", "1"}, []string{"--bind", "127.0.0.1 ::1", "--port", "1"}},
		{[]string{"--save=900 1", "x"}, []string{"--save=900 1", "x"}},
		{[]string{"--dir", "/data", "/etc/x.conf"}, []string{"--dir", "/data", "/etc/x.conf"}},
		{[]string{"--config", "a", "b"}, []string{"--config", "a", "b"}},
	} {
		if got := joinMultiWordFlags(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q, want %q", tc.in, got, tc.want)
		}
	}
}

// The config file comes first or after --config, not both; settings keep
// their command-line order; a stray word is refused with its reason.
func TestParseArgs(t *testing.T) {
	var errs strings.Builder
	a, err := New(nil).ParseArgs([]string{"/etc/l.conf", "--save", "900", "1", "--port", "1", "--save", "60", "5"}, &errs)
	if err != nil || a.File != "/etc/l.conf" ||
		!slices.Equal(a.Sets, [][2]string{{"save", "900 1"}, {"port", "1"}, {"save", "60 5"}}) {
		t.Errorf("positional file: %+v, %v", a, err)
	}
	if a, err := New(nil).ParseArgs([]string{"--config", "x.conf"}, &errs); err != nil || a.File != "x.conf" {
		t.Errorf("--config: %+v, %v", a, err)
	}
	for _, args := range [][]string{{"a.conf", "--config", "b.conf"}, {"--dir", "/data", "/etc/x.conf"}} {
		errs.Reset()
		if _, err := New(nil).ParseArgs(args, &errs); err == nil || !strings.HasPrefix(errs.String(), "limitkv: ") {
			t.Errorf("%q: %v, stderr %q", args, err, errs.String())
		}
	}
}
