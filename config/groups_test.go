package config

import "testing"

// Every parameter is in one of --help's sections, and has a description.
func TestParamGroups(t *testing.T) {
	seen := map[string]string{}
	for _, g := range Groups() {
		for _, n := range g.Names {
			if prev, ok := seen[n]; ok {
				t.Errorf("%s is in %q and %q", n, prev, g.Title)
			}
			seen[n] = g.Title
		}
	}
	names := map[string]bool{}
	for _, p := range New(nil).Params() {
		names[p.Name] = true
		if p.Group == "" {
			t.Errorf("%s is in no section of --help (groups.go)", p.Name)
		}
		if p.Help == "" {
			t.Errorf("%s has no description", p.Name)
		}
	}
	for n := range seen {
		if !names[n] {
			t.Errorf("--help's section %q lists %s, which is no parameter", seen[n], n)
		}
	}
}
