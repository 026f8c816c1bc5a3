package commands

import (
	"reflect"
	"testing"

	"github.com/limitkv/limitkv/cmddocs"
	"github.com/limitkv/limitkv/cmdspec"
)

// testTable is the real command table, without a server.
func testTable() *cmdspec.Table {
	t, _ := newTable(commandTable())
	return t
}

func forEachSpec(t *testing.T, f func(*cmdspec.Spec)) {
	t.Helper()
	for _, s := range testTable().Specs() {
		f(s)
		for _, sub := range s.Sub {
			f(sub)
		}
	}
}

// TestTableIsComplete checks that every command that can be called has a
// handler: subcommands always, containers when their arity lets them run
// without a subcommand (COMMAND).
func TestTableIsComplete(t *testing.T) {
	tab, cmds := newTable(commandTable())
	for _, s := range tab.Specs() {
		if len(s.Sub) == 0 || s.ArityOK(1) {
			if cmds[s.ID()].run == nil {
				t.Errorf("%s has no handler", s.FullName())
			}
		}
		for _, sub := range s.Sub {
			if cmds[sub.ID()].run == nil {
				t.Errorf("%s has no handler", sub.FullName())
			}
			if sub.Arity > 0 && sub.Arity < 2 || sub.Arity < 0 && sub.Arity > -2 {
				t.Errorf("%s: a subcommand's arity counts the container and itself", sub.FullName())
			}
		}
	}
}

// TestRunsScript checks that the rows of the script commands, and only
// they, carry RunsScript, which dispatch reads instead of their names.
func TestRunsScript(t *testing.T) {
	want := map[string]bool{"eval": true, "evalsha": true, "eval_ro": true, "evalsha_ro": true, "fcall": true, "fcall_ro": true}
	for _, s := range testTable().Specs() {
		if got := s.Flags&cmdspec.RunsScript != 0; got != want[s.Name] {
			t.Errorf("%s: RunsScript %v, want %v", s.Name, got, want[s.Name])
		}
		for _, sub := range s.Sub {
			if sub.Flags&cmdspec.RunsScript != 0 {
				t.Errorf("%s: RunsScript on a subcommand", sub.FullName())
			}
		}
	}
}

// TestHelpFromData checks that every container's HELP answers from the
// data files, and that only HELP entries hold help text. CLUSTER HELP
// answers from them once it has checked that cluster mode is on.
func TestHelpFromData(t *testing.T) {
	docs := cmddocs.Load()
	tab, cmds := newTable(commandTable())
	for _, s := range tab.Specs() {
		for _, sub := range s.Sub {
			run := reflect.ValueOf(cmds[sub.ID()].run).Pointer()
			fromData := run == reflect.ValueOf(cmdHelp).Pointer() || run == reflect.ValueOf(cmdClusterHelp).Pointer()
			if n := len(docs[sub.FullName()].Help); fromData != (n > 0) {
				t.Errorf("%s: answered from the data files %v, with %d lines of help there", sub.FullName(), fromData, n)
			}
		}
	}
}
