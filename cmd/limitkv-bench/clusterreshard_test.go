package main

import (
	"strings"
	"testing"

	"github.com/limitkv/limitkv/cluster"
)

// TestReshardKeyNames: the load's keys are all in the slots that move,
// and every one of those slots holds some.
func TestReshardKeyNames(t *testing.T) {
	const slots = 2000
	names := reshardKeyNames(5000, slots)
	seen := make([]int, slots)
	for r, k := range names {
		s := int(cluster.KeySlot([]byte(k)))
		if s >= slots {
			t.Fatalf("key %d, %s, is in slot %d, which does not move", r, k, s)
		}
		if s != r%slots {
			t.Fatalf("key %d, %s, is in slot %d, want %d", r, k, s, r%slots)
		}
		seen[s]++
	}
	for s, n := range seen {
		if n == 0 {
			t.Fatalf("slot %d holds no key", s)
		}
	}
}

// TestReshardMarkdown: the page carries the medians of each kind of
// phase, their ratio and the check's verdict as they are.
func TestReshardMarkdown(t *testing.T) {
	phases := []reshardPhase{
		{Round: 1, Seconds: 10, RPS: 50_000, CPUPerReqUs: 10, P99: 1000},
		{Round: 1, Reshard: true, From: "127.0.0.1:7000", Seconds: 20, RPS: 20_000, CPUPerReqUs: 40, P99: 5000},
		{Round: 2, Seconds: 10, RPS: 40_000, CPUPerReqUs: 12, P99: 1000},
		{Round: 2, Reshard: true, From: "127.0.0.1:7001", Seconds: 22, RPS: 30_000, CPUPerReqUs: 30, P99: 3000, Errors: 2, FirstError: "MOVED 1 127.0.0.1:7000"},
	}
	r := &reshardResult{Masters: 3, Conns: 24, Slots: 2000, Keys: 20_000, Zipf: 1.1, Command: "RL.FIXED key 100 1m",
		Steady: "10s", Warmup: "2s", NodeTimeout: "5000", Phases: phases, Errors: 2,
		Without: summarizePhases([]reshardPhase{phases[0], phases[2]}), During: summarizePhases([]reshardPhase{phases[1], phases[3]}),
		Check: allowedCheck{Windows: 10, AtLimit: 3, MaxAllowed: 100, Allowed: 500, Denied: 20}}
	md := reshardMarkdown(r)
	for _, want := range []string{
		"| decisions/s | 45,000 | 25,000 | 0.56 |",
		"| server CPU per decision (3 nodes) | 11.0 µs | 35.0 µs | 3.18 |",
		"| 2 | reshard from 127.0.0.1:7001 | 22.0 | 30,000 |",
		"2 (MOVED 1 127.0.0.1:7000) |",
		"| 500 / 20 | 10 | 3 | 100 | 0 (ok) | 2 |",
		"Windows over the limit: 0; error replies: 2.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the page lacks %q:\n%s", want, md)
		}
	}
}
