package acl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The aclfile's save writes what its load reads back, and a missing
// file is reported in C's words.
func TestFileSaveLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.acl")
	if _, err := LoadFile(path, testCatalog, false); err == nil ||
		err.Error() != "Error loading ACLs, opening file '"+path+"': No such file or directory" {
		t.Fatalf("missing file: %v", err)
	}
	r := NewRules(testCatalog, false)
	for _, op := range []string{"on", ">secret", "~k*", "+get"} {
		if err := r.Set(op, false); err != nil {
			t.Fatal(err)
		}
	}
	users := []FileUser{{"default", DefaultRules(testCatalog)}, {"u", r.Seal()}}
	if err := SaveFile(path, users); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 2 || lines[1] != UserLine("u", r) || !strings.HasPrefix(lines[1], "user u on ") {
		t.Fatalf("saved %q", data)
	}
	back, err := LoadFile(path, testCatalog, false)
	if err != nil || len(back) != 2 || back[1].Name != "u" || UserLine("u", back[1].Rules) != lines[1] {
		t.Fatalf("read back %v %v", back, err)
	}
	if left, _ := filepath.Glob(path + ".tmp-*"); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

// A config file's user line: its name and selectors are checked before
// any rule, and a failing rule names the line.
func TestConfigUser(t *testing.T) {
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"a b", "on"}, "f.conf:3: Spaces not allowed in ACL usernames"},
		{[]string{"u", "on", "(+get"}, "f.conf:3: Error in user declaration '(+get': Unmatched parenthesis in acl selector"},
		{[]string{"u", "on", "bogus"}, "f.conf:3: Error loading ACL rule 'bogus' for the user named 'u': Syntax error"},
		{[]string{"u", "on", "(+get", "~k)"}, ""},
	} {
		l := ConfigUser{Args: c.args, File: "f.conf", Line: 3}
		name, ops, err := l.Ops()
		if err == nil {
			err = l.Apply(NewRules(testCatalog, false), ops, false)
		}
		if got := ""; err != nil {
			got = err.Error()
			if got != c.err {
				t.Errorf("%q: %q, want %q", c.args, got, c.err)
			}
		} else if c.err != "" || name != "u" {
			t.Errorf("%q: no error, name %q, want %q", c.args, name, c.err)
		}
	}
}
