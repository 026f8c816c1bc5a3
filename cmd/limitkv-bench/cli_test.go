package main

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

// TestParseArgs: a subcommand takes its scenario's flags and no others,
// and the command lines from before the subcommands choose the same
// scenarios they ran then.
func TestParseArgs(t *testing.T) {
	for _, c := range []struct {
		args     string
		scenario string
		err      string
	}{
		{"", "all", ""},
		{"-quick -skip-memory", "all", ""},
		{"-replication -quiet-wait 30s", "replication", ""},
		{"-periodic -paced-rate 20000 -out /tmp/b2", "periodic", ""},
		{"-flood -flood-policy allkeys-lfu", "flood", ""},
		{"-loadgen both -skip-memory -skip-snapshot -skip-periodic -big-keys=false -out /tmp/b8", "all", ""},
		{"throughput -loadgen both -only slide,fixed -depths 1", "throughput", ""},
		{"memory -mem-keys 1000 -big-keys=false", "memory", ""},
		{"memory -mem-only stream,fixed -stream-entries 1000", "memory", ""},
		{"memory -mem-only nosuch", "", "unknown memory shape"},
		{"memory -stream-entries 5", "", "-stream-entries must be at least 10"},
		{"snapshot -snapshot-keys 10", "snapshot", ""},
		{"replication -repl-failovers 0 -skip-throughput", "replication", ""},
		{"failover -repl-failovers 1", "failover", ""},
		{"flood -flood-keys 10", "flood", ""},
		{"cluster -conns 20 -cluster-rounds 1 -cluster-zipf 1.3", "cluster", ""},
		{"cluster -cluster-duration 59s -cluster-warmup 1s", "", "shorter than the rate limit's window"},
		{"cluster -cluster-zipf 1", "", "-cluster-zipf must be above 1"},
		{"cluster -paced-rate 1", "", "flag provided but not defined"},
		{"cluster-reshard -conns 24 -reshard-slots 2000 -cluster-zipf 1.2 -reshard-steady 5s", "cluster-reshard", ""},
		{"cluster-reshard -reshard-slots 6000", "", "-reshard-slots must be from 1 to 5461"},
		{"cluster-reshard -reshard-keys 10", "", "-reshard-keys must be at least -reshard-slots"},
		{"cluster-reshard -cluster-duration 1s", "", "flag provided but not defined"},
		{"memory -conns 3", "", "flag provided but not defined: -conns"},
		{"flood -repl-lag-rate 1", "", "flag provided but not defined"},
		{"failover -repl-failovers 0", "", "-repl-failovers must be at least 1"},
		{"periodic -paced-rate 0", "", "needs a -paced-rate"},
		{"throughput -depths 0", "", "not a depth"},
		{"throughput -only nosuch", "", "unknown workload"},
		{"nosuch", "", "unknown scenario"},
		{"memory extra", "", "unexpected argument"},
	} {
		sc, _, err := parseArgs(strings.Fields(c.args), io.Discard)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want one with %q", c.args, err, c.err)
			}
		case err != nil:
			t.Errorf("%q: %v", c.args, err)
		case sc.name != c.scenario:
			t.Errorf("%q runs %s, want %s", c.args, sc.name, c.scenario)
		}
	}
}

// TestParseArgsDefaults: every setting has its default whichever flags the
// scenario registers, and -quick shortens what was not set.
func TestParseArgsDefaults(t *testing.T) {
	_, cfg, err := parseArgs([]string{"memory"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.duration != 5*time.Second || cfg.conns != 50 || cfg.pacedRate != 40_000 || len(cfg.depths) != 2 || cfg.loadgen != "go" || cfg.failovers != 3 {
		t.Errorf("defaults %+v", cfg)
	}
	_, cfg, err = parseArgs([]string{"replication", "-quick", "-repl-sync-rounds", "2"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.duration != 500*time.Millisecond || cfg.syncKeys != 100_000 || cfg.syncRounds != 2 || cfg.failovers != 1 {
		t.Errorf("-quick: %+v", cfg)
	}
}

// TestUsageNamesScenarios: -h explains every scenario.
func TestUsageNamesScenarios(t *testing.T) {
	var out strings.Builder
	if _, _, err := parseArgs([]string{"-h"}, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	for _, s := range scenarios() {
		if !strings.Contains(out.String(), "  "+s.name+" ") {
			t.Errorf("-h does not explain %s:\n%s", s.name, out.String())
		}
	}
}
