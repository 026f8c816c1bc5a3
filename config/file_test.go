package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeConf(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Config files read as Redis reads them: include reads another file (or
// the files a pattern matches) in place, and save lines add up; flags
// (more start-up lines) add to them too, CONFIG SET replaces them.
func TestConfigFileIncludeAndSaveLines(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "limitkv.conf")
	writeConf(t, filepath.Join(dir, "conf.d", "a.conf"), "maxclients 77\nsave 60 5\n")
	writeConf(t, filepath.Join(dir, "conf.d", "b.conf"), "maxclients 78\n")
	writeConf(t, filepath.Join(dir, "late.conf"), "timeout 9\n")
	writeConf(t, main, "save 900 1\nsave  300   10\ntimeout 5\n"+
		"include "+filepath.Join(dir, "conf.d", "*.conf")+"\n"+
		"include "+filepath.Join(dir, "empty.d", "*.conf")+"\n"+ // matches nothing: nothing to read
		"include "+filepath.Join(dir, "late.conf")+"\n")
	c := New(nil)
	if err := c.LoadFile(main); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"save":       "900 1 300 10 60 5",
		"maxclients": "78", // b.conf after a.conf
		"timeout":    "9",  // late.conf after the main file's line
	} {
		if got := c.Get(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	// Flags are start-up lines too.
	if err := c.Set([][2]string{{"save", "10 2"}}, true); err != nil {
		t.Fatal(err)
	}
	if got := c.Get("save"); got != "900 1 300 10 60 5 10 2" {
		t.Errorf("save after a flag: %q", got)
	}
	// CONFIG REWRITE writes one save line per pair where the first was,
	// and keeps the include lines.
	if err := c.Rewrite(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(main)
	if !strings.Contains(string(data), "save 900 1\nsave 300 10\nsave 60 5\nsave 10 2\ntimeout 9\ninclude ") ||
		strings.Count(string(data), "save ") != 4 {
		t.Errorf("rewritten:\n%s", data)
	}
	again := New(nil)
	if err := again.LoadFile(main); err != nil {
		t.Fatal(err)
	}
	if got := again.Get("save"); got != "900 1 300 10 60 5 10 2 60 5" {
		// The included save line comes after the rewritten ones, as it
		// does in Redis after CONFIG REWRITE.
		t.Errorf("save read back from the rewritten file: %q", got)
	}
	// At run time CONFIG SET replaces the value.
	if err := c.Set([][2]string{{"save", "3600 1"}}, false); err != nil || c.Get("save") != "3600 1" {
		t.Errorf("CONFIG SET save 3600 1: %v, %q", err, c.Get("save"))
	}
}

func TestSaveLines(t *testing.T) {
	for _, tc := range []struct {
		lines []string
		want  string
		err   bool
	}{
		{[]string{"900 1"}, "900 1", false},
		{[]string{"900 1", "300 10"}, "900 1 300 10", false},
		{[]string{"900 1", `""`, "60 5"}, "60 5", false}, // "" empties what came before
		{[]string{"900 1", `""`}, "", false},
		{[]string{"900"}, "", true},
		{[]string{"0 1"}, "", true},
		{[]string{"10 -1"}, "", true},
		{[]string{"ten 1"}, "", true},
	} {
		dir := t.TempDir()
		var text strings.Builder
		for _, l := range tc.lines {
			text.WriteString("save " + l + "\n")
		}
		path := filepath.Join(dir, "c.conf")
		writeConf(t, path, text.String())
		c := New(nil)
		err := c.LoadFile(path)
		if tc.err {
			if err == nil || !strings.Contains(err.Error(), "Invalid save parameters") {
				t.Errorf("%q: %v, want Invalid save parameters", tc.lines, err)
			}
			continue
		}
		if err != nil || c.Get("save") != tc.want {
			t.Errorf("%q: save = %q (%v), want %q", tc.lines, c.Get("save"), err, tc.want)
		}
	}
}

// A missing file is an error, a file that includes itself is refused
// instead of being read forever, and the error names the line.
func TestIncludeErrors(t *testing.T) {
	dir := t.TempDir()
	loop := filepath.Join(dir, "loop.conf")
	writeConf(t, loop, "maxclients 5\ninclude "+loop+"\n")
	if err := New(nil).LoadFile(loop); err == nil || !strings.Contains(err.Error(), "include") {
		t.Errorf("a file including itself: %v", err)
	}
	missing := filepath.Join(dir, "missing.conf")
	writeConf(t, missing, "\ninclude "+filepath.Join(dir, "nosuch.conf")+"\n")
	if err := New(nil).LoadFile(missing); err == nil || !strings.Contains(err.Error(), "missing.conf:2") || !strings.Contains(err.Error(), "nosuch.conf") {
		t.Errorf("including a missing file: %v", err)
	}
}
