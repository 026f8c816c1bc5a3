package main

import (
	"context"
	"math"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/limitkv/limitkv/internal/testserver"
)

const rbHeader = `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"`

func TestParseRBCSV(t *testing.T) {
	tests := []struct {
		name, out string
		want      rbOutput
	}{
		{
			name: "redis-benchmark 7.0.15 --csv",
			out:  rbHeader + "\n" + `"INCR counter:__rand_int__","131752.31","4.917","0.432","3.591","10.959","19.743","67.519"` + "\n",
			want: rbOutput{title: "INCR counter:__rand_int__", rps: 131752.31, avgMs: 4.917, minMs: 0.432, p50Ms: 3.591, p95Ms: 10.959, p99Ms: 19.743, maxMs: 67.519},
		},
		{
			// A warning first, CRLF line ends, and a title with the
			// quotes and commas redis-benchmark does not escape.
			name: "warning, CRLF, title with quotes and commas",
			out: "WARNING: Could not fetch server CONFIG\r\n" + rbHeader + "\r\n" +
				`"EVAL "return {1,2}" 0 a","0.50","1","2","3","4","5","6"` + "\r\n",
			want: rbOutput{title: `EVAL "return {1,2}" 0 a`, rps: 0.5, avgMs: 1, minMs: 2, p50Ms: 3, p95Ms: 4, p99Ms: 5, maxMs: 6},
		},
		{
			// A column a later version might add is skipped; the order of
			// the columns comes from the header.
			name: "extra column, other order",
			out: `"test","p99_latency_ms","rps","extra","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","max_latency_ms"` + "\n" +
				`"GET key:__rand_int__","0.9","250000.00","x","0.1","0.2","0.3","0.4","1.5"` + "\n",
			want: rbOutput{title: "GET key:__rand_int__", rps: 250000, avgMs: 0.1, minMs: 0.2, p50Ms: 0.3, p95Ms: 0.4, p99Ms: 0.9, maxMs: 1.5},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseRBCSV([]byte(tt.out))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseRBCSVRejects(t *testing.T) {
	tests := []struct{ name, out, wantErr string }{
		{"nothing", "", "no CSV header"},
		{"quiet output, not CSV", "INCR key:__rand_int__: 12362.47 requests per second, p50=1.575 msec\n", "no CSV header"},
		{"header only (redis-benchmark stopped on an error)", rbHeader + "\n", "no result line"},
		{"short line", rbHeader + "\n" + `"GET","1","2"` + "\n", "has 3 fields"},
		{"not a number", rbHeader + "\n" + `"GET k","fast","1","1","1","1","1","1"` + "\n", `rps is "fast"`},
		{"a column missing", `"test","rps","avg_latency_ms"` + "\n" + `"GET k","10","1"` + "\n", "no min_latency_ms, p50_latency_ms"},
		{"no throughput", rbHeader + "\n" + `"GET k","0.00","0","0","0","0","0","0"` + "\n", "0 requests per second"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseRBCSV([]byte(tt.out))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestRBServerError(t *testing.T) {
	stderr := "Error from server: NOSCRIPT No matching script. Please use EVAL.\n"
	if got := rbServerError([]byte(stderr), []byte(rbHeader+"\n")); got != "NOSCRIPT No matching script. Please use EVAL." {
		t.Fatalf("got %q", got)
	}
	progress := "\rEVALSHA x 1 k: rps=0.0 (overall: 0.0) avg_msec=-nan (overall: -nan)\rError from server: ERR boom\n"
	if got := rbServerError(nil, []byte(progress)); got != "ERR boom" {
		t.Fatalf("got %q", got)
	}
	if got := rbServerError([]byte("WARNING: something\n"), []byte(rbHeader+"\n")); got != "" {
		t.Fatalf("no error reply, got %q", got)
	}
}

func TestRBExpand(t *testing.T) {
	got := rbExpand([]string{"EVALSHA", "abc", "1", "slide:" + rbRand, "100", "60000", rbRand}, 12345)
	want := []string{"EVALSHA", "abc", "1", "slide:000000012345", "100", "60000", "000000012345"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("got %q, want %q", got, want)
	}
	e := newEncoder(0, 1, 1)
	req := string(e.appendOp(nil, op{cmd("GET", padKeyArg("key:"))}, 7))
	if want := "*2\r\n$3\r\nGET\r\n$16\r\nkey:000000000007\r\n"; req != want {
		t.Fatalf("padded key request %q, want %q", req, want)
	}
}

func TestSummarizeRBAndTargets(t *testing.T) {
	run := func(round int, w, server string, depth int, rps, cpu float64) rbRun {
		return rbRun{Round: round, Workload: w, Server: server, Depth: depth, Requests: 1000, OpsPerSec: rps, CPUPerReqUs: cpu,
			P50Ms: 0.1 * float64(round), P99Ms: cpu / 10, MaxMs: cpu}
	}
	var runs []rbRun
	for round, x := range []struct{ lk, rd float64 }{{10, 10}, {12, 9}, {11, 30}} { // medians 11 and 10
		runs = append(runs, run(round+1, "incr", kindLimitkv, 1, 100_000, x.lk), run(round+1, "incr", kindRedis, 1, 100_000, x.rd))
	}
	for round := 1; round <= 3; round++ {
		runs = append(runs,
			run(round, "fixed", kindLimitkv, 1, 150_000, 12.5), run(round, "fixed", kindRedis, 1, 101_000, 20),
			run(round, "get", kindLimitkv, 16, 900_000, 2.1), run(round, "get", kindRedis, 16, 900_000, 2))
	}
	var sel []*rbWorkload
	for _, w := range rbWorkloads() {
		if w.id != "slide" && w.id != "set" {
			sel = append(sel, w)
		}
	}
	rows := summarizeRB(runs, sel, []int{1, 16}, 0.3)
	if len(rows) != 3 {
		t.Fatalf("%d rows, want fixed d1, get d16, incr d1: %+v", len(rows), rows)
	}
	// incr d1: limitkv's p99 medians 1.1 ms, max 11 ms; Redis's 1.0, 10.
	if r := rows[2]; r.Workload != "incr" || r.Limitkv.P50Ms != 0.2 || r.Limitkv.MaxMs != 11 || r.Redis.P99Ms != 1 ||
		math.Abs(r.P99Ratio-1.1) > 1e-9 || math.Abs(r.MaxRatio-1.1) > 1e-9 {
		t.Fatalf("incr row %+v, limitkv %+v, redis %+v", r, r.Limitkv, r.Redis)
	}
	rb := &rbResults{Rows: rows}
	byName := map[string]targetResult{}
	for _, tr := range rbTargets(rb) {
		byName[strings.TrimPrefix(tr.Name, "redis-benchmark: ")] = tr
	}
	check := func(name, status, got string) {
		t.Helper()
		tr, ok := byName[name]
		if !ok {
			t.Fatalf("no target %q", name)
		}
		if tr.Status != status || !strings.HasPrefix(tr.Got, got) {
			t.Fatalf("%s: %s %q, want %s %q", name, tr.Status, tr.Got, status, got)
		}
	}
	check("INCR server CPU per request, depth 1", "PASS", "1.10x (11.00 vs 10.00 µs)")
	check("GET server CPU per request, depth 16", "FAIL", "1.05x (2.10 vs 2.00 µs)")
	check("RL.FIXED (one rule) server CPU per request vs Redis's INCR, depth 1", "PASS", "1.25x (12.50 vs 10.00 µs)")
	check("RL.FIXED throughput vs the Lua script, depth 1", "FAIL", "1.49x (150,000 vs 101,000 req/s)")
	check("RL.SLIDE throughput vs the Lua script, depth 16", "NOT MEASURED", "")
	check("RL.FIXED (one rule) server CPU per request vs Redis's INCR, depth 16", "NOT MEASURED", "")

	if trs := rbTargets(nil); len(trs) != 1 || trs[0].Status != "NOT MEASURED" || !strings.Contains(trs[0].Got, "-loadgen") {
		t.Fatalf("without redis-benchmark runs: %+v", trs)
	}
}

// The 1.5x throughput target at depth 1 is judged on the medians.
func TestRBThroughputTargetPasses(t *testing.T) {
	rows := []rbRow{{Workload: "slide", Depth: 1, Ratio: 1.5,
		Limitkv: &rbSummary{OpsPerSec: 150}, Redis: &rbSummary{OpsPerSec: 100}}}
	for _, tr := range rbTargets(&rbResults{Rows: rows}) {
		if tr.Name == "redis-benchmark: RL.SLIDE throughput vs the Lua script, depth 1" {
			if tr.Status != "PASS" {
				t.Fatalf("%+v", tr)
			}
			return
		}
	}
	t.Fatal("no RL.SLIDE depth 1 throughput target")
}

// TestRBExecAgainstRedis runs the real redis-benchmark against a real
// redis-server: the CSV is parsed, the server's CPU is read, the keys are
// the 12-digit names the GET preload writes, and an error reply stops the
// run with its message.
func TestRBExecAgainstRedis(t *testing.T) {
	rbBin := testserver.Require(t, "redis-benchmark")
	redisBin := testserver.Require(t, "redis-server")
	rd, err := startRedis(redisBin, filepath.Join(t.TempDir(), "redis"))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Stop()
	b := &bench{cfg: config{conns: 5, users: 20, duration: time.Second}, rbBin: rbBin}
	ctx := context.Background()
	rec, err := b.rbExec(ctx, rd, []string{"SET", "key:" + rbRand, value32}, 4, 2000)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Requests != 2000 || rec.OpsPerSec <= 0 || rec.Seconds <= 0 || rec.P99Ms < rec.P50Ms || rec.ServerCPUSec < 0 || rec.CPUPerReqUs < 0 {
		t.Fatalf("run %+v", rec)
	}
	c, err := dial(rd.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	keys, err := c.ok("KEYS", "*")
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`^key:0000000000[01][0-9]$`)
	if len(keys.Elems) == 0 || len(keys.Elems) > 20 {
		t.Fatalf("%d keys after 2000 SETs on 20 users", len(keys.Elems))
	}
	for _, k := range keys.Elems {
		n := string(k.Str)
		if !name.MatchString(n) {
			t.Fatalf("key %q is not a 12-digit user below 20", n)
		}
		var user int
		for _, ch := range n[len("key:"):] {
			user = user*10 + int(ch-'0')
		}
		if want := "key:" + string(appendPadded(nil, user)); n != want {
			t.Fatalf("key %q, the preload writes %q", n, want)
		}
	}

	_, err = b.rbExec(ctx, rd, []string{"EVALSHA", scriptSHA(fixedLua), "1", "fixed:" + rbRand, "100", "60000"}, 1, 100)
	if err == nil || !strings.Contains(err.Error(), "NOSCRIPT") {
		t.Fatalf("EVALSHA of a script not loaded: error %v, want the NOSCRIPT reply", err)
	}
}

// The Go generator's rows carry the server's CPU per operation, the
// median of the rounds, and limitkv's over Redis's.
func TestSummarizeCPUPerOp(t *testing.T) {
	var runs []runRecord
	for i, x := range []struct{ lk, rd float64 }{{3, 2}, {5, 4}, {4, 100}} {
		runs = append(runs,
			runRecord{Round: i + 1, Workload: "incr", Server: kindLimitkv, Depth: 1, OpsPerSec: 1, CPUPerOpUs: x.lk},
			runRecord{Round: i + 1, Workload: "incr", Server: kindRedis, Depth: 1, OpsPerSec: 1, CPUPerOpUs: x.rd})
	}
	var incr []*workload
	for _, w := range workloads() {
		if w.id == "incr" {
			incr = append(incr, w)
		}
	}
	rows := summarize(runs, incr, []int{1}, 0.3)
	if len(rows) != 1 || rows[0].Limitkv.CPUPerOpUs != 4 || rows[0].Redis.CPUPerOpUs != 4 || rows[0].CPURatio != 1 {
		t.Fatalf("rows %+v", rows)
	}
	// The latencies' medians are each run's own, and one round's stall
	// (the 50 ms max) does not move the median max.
	for i, x := range []struct{ p50, p99, max float64 }{{100, 900, 2000}, {120, 1000, 50_000}, {110, 800, 3000}} {
		runs[2*i].P50us, runs[2*i].P99us, runs[2*i].MaxUs = x.p50, x.p99, x.max
		runs[2*i+1].P50us, runs[2*i+1].P99us, runs[2*i+1].MaxUs = 100, 500, 1500
	}
	rows = summarize(runs, incr, []int{1}, 0.3)
	if lk := rows[0].Limitkv; lk.MedianP50us != 110 || lk.MedianP99us != 900 || lk.MedianMaxUs != 3000 {
		t.Fatalf("limitkv medians p50 %v p99 %v max %v, want 110, 900, 3000", lk.MedianP50us, lk.MedianP99us, lk.MedianMaxUs)
	}
	if rows[0].P99Ratio != 1.8 || rows[0].MaxRatio != 2 {
		t.Fatalf("p99 ratio %v, max ratio %v, want 1.8 and 2", rows[0].P99Ratio, rows[0].MaxRatio)
	}
	r := &results{Meta: meta{Rounds: 3, Cores: 2}, Throughput: rows}
	md := resultsReport("throughput", "t", r).body.String()
	if want := "| INCR | 1 (request) | 1 | 1 | **1.00x** | 4.00 / 4.00 | **1.00x** | 110 / 900 / 3000 | 100 / 500 / 1500 | **1.80x** | **2.00x** |"; !strings.Contains(md, want) {
		t.Errorf("the saturation table lacks %q:\n%s", want, md)
	}
	if got := cpuPerOpUs(0.5, 100_000); got != 5 {
		t.Fatalf("0.5 s over 100,000 operations: %v µs, want 5", got)
	}
	if got := cpuPerOpUs(0.5, 0); got != 0 {
		t.Fatalf("no operations: %v", got)
	}
}

// The report shows the redis-benchmark section, its targets and runs, and
// the chart its two groups with Redis's INCR beside the rate limits.
func TestRBReport(t *testing.T) {
	var runs []rbRun
	for _, w := range []string{"slide", "incr"} {
		for _, kind := range []string{kindLimitkv, kindRedis} {
			for _, d := range []int{1, 16} {
				runs = append(runs, rbRun{Round: 1, Workload: w, Server: kind, Depth: d, Requests: 1000, OpsPerSec: 50_000, CPUPerReqUs: 7,
					P50Ms: 0.25, P99Ms: 1.5, MaxMs: 4})
			}
		}
	}
	var sel []*rbWorkload
	for _, w := range rbWorkloads() {
		if w.id == "slide" || w.id == "incr" {
			sel = append(sel, w)
		}
	}
	r := &results{Meta: meta{Depths: []int{1, 16}, Rounds: 1, Users: 100_000, Cores: 2, LoadGen: "redis-benchmark"}}
	r.RB = &rbResults{Version: "redis-benchmark 7.0.15", Command: "redis-benchmark ...", Runs: runs, Rows: summarizeRB(runs, sel, []int{1, 16}, 0.3)}
	r.Targets = evaluateTargets(r)
	md := resultsReport("results", "limitkv vs Redis: benchmark results", r).body.String()
	for _, want := range []string{
		"## Throughput and CPU per request with redis-benchmark",
		"| RL.SLIDE (one rule) server CPU per request vs Redis's INCR, depth 16 | ≤ 1.25x Redis's INCR | 1.00x (7.00 vs 7.00 µs) | **PASS** |",
		"| RL.SLIDE throughput vs the Lua script, depth 1 | ≥ 1.5x Redis | 1.00x (50,000 vs 50,000 req/s) | **FAIL** |",
		"`EVALSHA <slide.lua sha> 1 slide:__rand_int__ 100 60000 __rand_int__`",
		"| 1 | incr | 16 | redis | 1,000 |",
		"| INCR | 16 | 50,000 | 50,000 | **1.00x** | 7.00 / 7.00 | **1.00x** | – | 0.250 / 1.500 / 4.000 | 0.250 / 1.500 / 4.000 | **1.00x** | **1.00x** |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("results.md lacks %q", want)
		}
	}
	svg := chart(r)
	for _, want := range []string{"redis-benchmark: median requests/s", "redis-benchmark: server CPU µs per request", "7.00 µs  (Redis INCR, depth 16)"} {
		if !strings.Contains(svg, want) {
			t.Errorf("results.svg lacks %q", want)
		}
	}
}
