package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"
)

// The matrix is what -persistence and -pin ask for, persistence off
// first, unpinned first.
func TestTailConfigs(t *testing.T) {
	off, on := tailConfig{}, tailConfig{Persistence: true}
	offPinned, onPinned := tailConfig{Pinned: true}, tailConfig{Persistence: true, Pinned: true}
	for _, c := range []struct {
		persistence, pin string
		want             []tailConfig
	}{
		{"both", "no", []tailConfig{off, on}},
		{"both", "yes", []tailConfig{offPinned, onPinned}},
		{"both", "both", []tailConfig{off, offPinned, on, onPinned}},
		{"off", "no", []tailConfig{off}},
		{"on", "both", []tailConfig{on, onPinned}},
	} {
		if got := tailConfigs(c.persistence, c.pin); !reflect.DeepEqual(got, c.want) {
			t.Errorf("-persistence %s -pin %s: %+v, want %+v", c.persistence, c.pin, got, c.want)
		}
	}
	if got := onPinned.name(); got != "persistence on, pinned" {
		t.Errorf("name %q", got)
	}
	if got := onPinned.dir(); got != "persistence-on-pinned" {
		t.Errorf("dir %q", got)
	}
}

// A round runs every workload at both depths: the counters on every
// server, the rate limits on the limitkv servers only, the first server
// rotating from step to step and from round to round.
func TestTailPlan(t *testing.T) {
	ws := tailWorkloads()
	var ids []string
	for _, w := range ws {
		ids = append(ids, w.id)
		if w.onRedis != (w.id == "get" || w.id == "set" || w.id == "incr") {
			t.Errorf("%s on Redis: %v", w.id, w.onRedis)
		}
	}
	if want := []string{"get", "set", "incr", "fixed", "slide"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("workloads %v, want %v", ids, want)
	}
	if got := strings.Join(ws[3].args, " "); got != "RL.FIXED fixed:__rand_int__ 100 60s" {
		t.Errorf("RL.FIXED sends %q", got)
	}
	if got := strings.Join(ws[4].args, " "); got != "RL.SLIDE slide:__rand_int__ 100 60s" {
		t.Errorf("RL.SLIDE sends %q", got)
	}

	plan := tailPlan(1, ws, [2]int64{200, 1000}, false)
	if len(plan) != 10 {
		t.Fatalf("%d steps, want 5 workloads × 2 depths", len(plan))
	}
	want := []tailStep{
		{"get", 1, []string{tailRedis, tailLimitkv}, 200},
		{"get", 16, []string{tailLimitkv, tailRedis}, 1000},
		{"set", 1, []string{tailRedis, tailLimitkv}, 200},
	}
	if !reflect.DeepEqual(plan[:3], want) {
		t.Errorf("first steps %+v, want %+v", plan[:3], want)
	}
	if s := plan[6]; s.Workload != "fixed" || s.Depth != 1 || !reflect.DeepEqual(s.Servers, []string{tailLimitkv}) {
		t.Errorf("RL.FIXED step %+v: limitkv only", s)
	}
	if next := tailPlan(2, ws, [2]int64{200, 1000}, false); !reflect.DeepEqual(next[0].Servers, []string{tailLimitkv, tailRedis}) {
		t.Errorf("round 2 starts with %v: the order flips", next[0].Servers)
	}

	// With a baseline, each of the three servers goes first once in three
	// steps, and the rate limits alternate limitkv and baseline.
	plan = tailPlan(1, ws, [2]int64{200, 1000}, true)
	first := map[string]int{}
	for _, s := range plan[:3] {
		if len(s.Servers) != 3 {
			t.Fatalf("step %+v: three servers", s)
		}
		first[s.Servers[0]]++
	}
	if len(first) != 3 {
		t.Errorf("first servers of three steps %v, want each once", first)
	}
	if s := plan[6]; !reflect.DeepEqual(s.Servers, []string{tailBaseline, tailLimitkv}) && !reflect.DeepEqual(s.Servers, []string{tailLimitkv, tailBaseline}) {
		t.Errorf("RL.FIXED step with a baseline %+v", s)
	}
}

// The rows are the medians over the rounds, the rate limits against
// Redis's INCR and limitkv's own, and the marks the targets.
func TestSummarizeTail(t *testing.T) {
	c := tailConfig{Persistence: true}
	run := func(round int, w, server string, depth int, rps, cpu, p99, max float64) tailRun {
		return tailRun{tailConfig: c, rbRun: rbRun{Round: round, Workload: w, Server: server, Depth: depth, Requests: 1000,
			OpsPerSec: rps, CPUPerReqUs: cpu, P50Ms: p99 / 4, P99Ms: p99, MaxMs: max}}
	}
	var runs []tailRun
	// INCR d16: limitkv medians CPU 2, p99 1.2, max 3 (round 2's 40 ms
	// stall is not the median); Redis CPU 2.5, p99 1, max 2.
	for i, x := range []struct{ cpu, p99, max float64 }{{2, 1.2, 3}, {1.9, 1.3, 40}, {2.1, 1.1, 2.9}} {
		runs = append(runs, run(i+1, "incr", tailLimitkv, 16, 800_000, x.cpu, x.p99, x.max))
		runs = append(runs, run(i+1, "incr", tailRedis, 16, 700_000, 2.5, 1, 2))
	}
	// RL.FIXED d16: CPU 2.4 = 1.2x limitkv's INCR (over 1.15), 0.96x
	// Redis's; max 5 = 2.5x Redis's INCR.
	for i := 1; i <= 3; i++ {
		runs = append(runs, run(i, "fixed", tailLimitkv, 16, 600_000, 2.4, 1.4, 5))
		runs = append(runs, run(i, "fixed", tailBaseline, 16, 500_000, 3, 2, 5))
	}
	// GET d1: limitkv only, no Redis run: no row. A run of another
	// configuration is not counted.
	runs = append(runs, run(1, "get", tailLimitkv, 1, 100_000, 5, 1, 2))
	other := run(1, "incr", tailRedis, 16, 1, 1000, 1000, 1000)
	other.Pinned = true
	runs = append(runs, other)

	rows := summarizeTail(runs, c, tailWorkloads())
	if len(rows) != 2 {
		t.Fatalf("%d rows, want INCR and RL.FIXED at depth 16: %+v", len(rows), rows)
	}
	incr, fixed := rows[0], rows[1]
	if incr.Workload != "incr" || incr.Limitkv.CPUPerReqUs != 2 || incr.Limitkv.P99Ms != 1.2 || incr.Limitkv.MaxMs != 3 || incr.Limitkv.Rounds != 3 ||
		incr.Redis.CPUPerReqUs != 2.5 || incr.Baseline != nil {
		t.Fatalf("INCR row %+v, limitkv %+v, redis %+v", incr, incr.Limitkv, incr.Redis)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if !near(incr.P99Ratio, 1.2) || !near(incr.MaxRatio, 1.5) || !near(incr.CPURatio, 0.8) || incr.CPUOverOwnINCR != 0 {
		t.Errorf("INCR ratios p99 %v max %v CPU %v own %v", incr.P99Ratio, incr.MaxRatio, incr.CPURatio, incr.CPUOverOwnINCR)
	}
	if got := marksText(incr.Marks); got != "p99 1.20/1.5 PASS, max 1.50/2 PASS, CPU vs Redis 0.80/1 PASS" {
		t.Errorf("INCR marks %s", got)
	}
	if fixed.Redis.Command != "INCR counter:__rand_int__" || fixed.Limitkv.Command != "RL.FIXED fixed:__rand_int__ 100 60s" {
		t.Errorf("RL.FIXED commands %q against %q", fixed.Limitkv.Command, fixed.Redis.Command)
	}
	if !near(fixed.CPUOverOwnINCR, 1.2) || !near(fixed.CPURatio, 0.96) || !near(fixed.MaxRatio, 2.5) || !near(fixed.P99Ratio, 1.4) {
		t.Errorf("RL.FIXED ratios own %v redis %v max %v p99 %v", fixed.CPUOverOwnINCR, fixed.CPURatio, fixed.MaxRatio, fixed.P99Ratio)
	}
	if got := marksText(fixed.Marks); got != "p99 1.40/1.5 PASS, max 2.50/2 FAIL, CPU vs Redis 0.96/1.25 PASS, CPU vs limitkv's INCR 1.20/1.15 FAIL" {
		t.Errorf("RL.FIXED marks %s", got)
	}
	if !near(fixed.CPUOverBaseline, 0.8) || !near(fixed.P99OverBaseline, 0.7) || !near(fixed.MaxOverBaseline, 1) || fixed.Baseline.OpsPerSec != 500_000 {
		t.Errorf("RL.FIXED over the baseline: CPU %v p99 %v max %v", fixed.CPUOverBaseline, fixed.P99OverBaseline, fixed.MaxOverBaseline)
	}
}

func marksText(ms []tailMark) string {
	var parts []string
	for _, m := range ms {
		parts = append(parts, fmt.Sprintf("%s %.2f/%g %s", m.Name, m.Got, m.Want, m.Status))
	}
	return strings.Join(parts, ", ")
}

// The CPU targets are the issue's: the counters at both depths, the rate
// limits at depth 16; p99 and max everywhere; a ratio that could not be
// had is not judged.
func TestTailTargets(t *testing.T) {
	for _, c := range []struct {
		w           string
		depth       int
		redis, own  float64
		wantMarkLen int
	}{
		{"get", 1, 1.1, 0, 3}, {"set", 16, 1.0, 0, 3}, {"incr", 1, 1.1, 0, 3},
		{"fixed", 16, 1.25, 1.15, 4}, {"slide", 16, 1.4, 1.25, 4},
		{"fixed", 1, 0, 0, 2}, {"slide", 1, 0, 0, 2},
	} {
		redis, own := tailCPUTargets(c.w, c.depth)
		if redis != c.redis || own != c.own {
			t.Errorf("%s depth %d: targets %v, %v, want %v, %v", c.w, c.depth, redis, own, c.redis, c.own)
		}
		r := tailRow{Workload: c.w, Depth: c.depth, P99Ratio: 1, MaxRatio: 1, CPURatio: 1, CPUOverOwnINCR: 1}
		if marks := tailMarks(&r); len(marks) != c.wantMarkLen {
			t.Errorf("%s depth %d: marks %+v", c.w, c.depth, marks)
		}
	}
	// At the target is a pass; a missing ratio (Redis's max of 0) is not
	// judged.
	marks := tailMarks(&tailRow{Workload: "set", Depth: 16, P99Ratio: 1.5, CPURatio: 1})
	if len(marks) != 2 || marks[0].Status != "PASS" || marks[1].Name != "CPU vs Redis" || marks[1].Status != "PASS" {
		t.Errorf("marks %+v", marks)
	}
}

// The page has a table per configuration with the baseline's columns when
// one ran, the marks, the command line, and every run.
func TestTailReport(t *testing.T) {
	c := tailConfig{Pinned: true}
	var runs []tailRun
	for _, server := range []string{tailLimitkv, tailBaseline, tailRedis} {
		runs = append(runs, tailRun{tailConfig: c, rbRun: rbRun{Round: 1, Workload: "get", Server: server, Depth: 16, Requests: 1000,
			OpsPerSec: 900_000, CPUPerReqUs: 2, P50Ms: 0.5, P99Ms: 1.5, MaxMs: 3}})
	}
	res := &tailResults{
		Meta:    meta{Command: "go run ./cmd/limitkv-bench tail -pin yes -baseline-bin /tmp/old", Rounds: 1, Users: 100_000, Cores: 2, QuietCores: 0.3},
		Command: "redis-benchmark -h 127.0.0.1 -p PORT -c 50 -r 100000 -n N -P DEPTH -q --csv COMMAND...", Requests: map[string]int64{"1": 200_000, "16": 1_000_000},
		BaselineBin: "/tmp/old", Runs: runs,
		Configs: []tailConfigResult{{tailConfig: c, Name: c.name(), Rows: summarizeTail(runs, c, tailWorkloads())}},
	}
	rep := tailReport(res)
	md := rep.body.String()
	for _, want := range []string{
		"Run as `go run ./cmd/limitkv-bench tail -pin yes -baseline-bin /tmp/old`",
		"comparable only within one run",
		"## Persistence off, pinned",
		"3 of 3 targets met.",
		"| workload | depth | limitkv req/s | Redis req/s | limitkv p50 / p99 / max ms | Redis p50 / p99 / max ms | CPU µs/req limitkv / Redis | p99 limitkv / Redis | max limitkv / Redis | CPU limitkv / Redis | CPU limitkv / own INCR | baseline req/s |",
		"| GET | 16 | 900,000 | 900,000 | 0.500 / 1.500 / 3.000 | 0.500 / 1.500 / 3.000 | 2.00 / 2.00 | **1.00x** | **1.00x** | **1.00x** | – | 900,000 | 0.500 / 1.500 / 3.000 | 2.00 | 1.00x / 1.00x / 1.00x | p99 ≤ 1.5x: **PASS**; max ≤ 2x: **PASS**; CPU vs Redis ≤ 1x: **PASS** |",
		"| persistence off, pinned | 1 | get | 16 | baseline | 1,000 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("tail.md lacks %q:\n%s", want, md)
		}
	}
	if i := strings.Index(md, "%!"); i >= 0 {
		t.Errorf("tail.md has a formatting error: %q", md[i:min(len(md), i+40)])
	}
	if !strings.Contains(md, "p99 ≤ 1.5x Redis's and max ≤ 2x") {
		t.Errorf("tail.md does not state the targets")
	}
	if rep.name != "tail" || rep.svg != "" {
		t.Errorf("report %q with svg %v", rep.name, rep.svg != "")
	}
	js, err := json.Marshal(rep.data)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"configurations":[{"persistence":false,"pinned":true,"name":"persistence off, pinned"`, `"p99_limitkv_over_redis":1`, `"pinned":true,"round":1`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("tail.json lacks %s:\n%s", want, js)
		}
	}
}

// The tail's flags: its matrix, its sizes, -quick's 20th, the baseline.
func TestParseTailArgs(t *testing.T) {
	_, cfg, err := parseArgs([]string{"tail"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.rounds != 3 || cfg.conns != 50 || cfg.users != 100_000 || cfg.tailRequests != [2]int64{200_000, 1_000_000} ||
		cfg.tailPin != "no" || cfg.tailPersistence != "both" || cfg.tailBaseline {
		t.Errorf("defaults %+v", cfg)
	}
	_, cfg, err = parseArgs(strings.Fields("tail -quick -rounds 2 -pin both -persistence on -limitkv-args --event-loops=no -baseline-args --event-loops=yes"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.rounds != 2 || cfg.tailRequests != [2]int64{10_000, 50_000} || cfg.tailPin != "both" || cfg.tailPersistence != "on" ||
		!reflect.DeepEqual(cfg.limitkvArgs, []string{"--event-loops=no"}) || !cfg.tailBaseline || cfg.baselineBin != "" {
		t.Errorf("-quick and the rest: %+v", cfg)
	}
	_, cfg, err = parseArgs(strings.Fields("tail -quick -requests 7,9"), io.Discard)
	if err != nil || cfg.tailRequests != [2]int64{7, 9} {
		t.Errorf("-requests given with -quick: %v, %v", cfg.tailRequests, err)
	}
	for _, bad := range []string{"-pin maybe", "-persistence always", "-requests 5", "-requests 0,5", "-duration 1s"} {
		if _, _, err := parseArgs(append([]string{"tail"}, strings.Fields(bad)...), io.Discard); err == nil {
			t.Errorf("tail %s: no error", bad)
		}
	}
}
