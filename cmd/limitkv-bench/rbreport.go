package main

import (
	"fmt"
	"strings"
)

// rbCmdName names a redis-benchmark row's limitkv command in a target.
var rbCmdName = map[string]string{"slide": "RL.SLIDE", "fixed": "RL.FIXED", "get": "GET", "set": "SET", "incr": "INCR"}

// rbTargets judges the per-request cost targets on the redis-benchmark
// medians: GET, SET and INCR cost at most what Redis's do; a rate-limit
// decision costs about what Redis's INCR does, and beats the Lua scripts'
// throughput with redis-benchmark as the client too.
func rbTargets(rb *rbResults) []targetResult {
	if rb == nil {
		// One line, not fourteen, says they were not measured.
		return []targetResult{{Name: "redis-benchmark: CPU per request of GET, SET, INCR, RL.SLIDE, RL.FIXED; the rate limits' throughput vs the Lua scripts",
			Want: "GET, SET, INCR ≤ 1.1x (depth 1) and 1.0x (depth 16) Redis's CPU; RL.SLIDE, RL.FIXED ≤ 1.25x Redis's INCR, ≥ 1.5x and 4x the scripts' throughput", Got: "not run: -loadgen redis-benchmark or both", Status: "NOT MEASURED"}}
	}
	var out []targetResult
	row := func(w string, d int) *rbRow {
		for i := range rb.Rows {
			if rb.Rows[i].Workload == w && rb.Rows[i].Depth == d {
				return &rb.Rows[i]
			}
		}
		return nil
	}
	add := func(name, want string, measure func() (string, bool, bool)) {
		t := targetResult{Name: "redis-benchmark: " + name, Want: want, Status: "NOT MEASURED"}
		if got, ok, measured := measure(); measured {
			t.Got, t.Status = got, status(ok)
		}
		out = append(out, t)
	}
	for _, w := range []string{"get", "set", "incr"} {
		for _, x := range []struct {
			depth int
			max   float64
		}{{1, 1.1}, {16, 1.0}} {
			add(fmt.Sprintf("%s server CPU per request, depth %d", rbCmdName[w], x.depth), fmt.Sprintf("≤ %.2fx Redis's", x.max), func() (string, bool, bool) {
				r := row(w, x.depth)
				if r == nil {
					return "", false, false
				}
				return fmt.Sprintf("%.2fx (%.2f vs %.2f µs)", r.CPURatio, r.Limitkv.CPUPerReqUs, r.Redis.CPUPerReqUs), r.CPURatio <= x.max, true
			})
		}
	}
	for _, w := range []string{"slide", "fixed"} {
		for _, d := range []int{1, 16} {
			add(fmt.Sprintf("%s (one rule) server CPU per request vs Redis's INCR, depth %d", rbCmdName[w], d), "≤ 1.25x Redis's INCR", func() (string, bool, bool) {
				r, incr := row(w, d), row("incr", d)
				if r == nil || incr == nil {
					return "", false, false
				}
				return fmt.Sprintf("%.2fx (%.2f vs %.2f µs)", r.CPUOverINCR, r.Limitkv.CPUPerReqUs, incr.Redis.CPUPerReqUs), r.CPUOverINCR <= 1.25, true
			})
		}
		for _, x := range []struct {
			depth int
			min   float64
		}{{1, 1.5}, {16, 4}} {
			add(fmt.Sprintf("%s throughput vs the Lua script, depth %d", rbCmdName[w], x.depth), fmt.Sprintf("≥ %.1fx Redis", x.min), func() (string, bool, bool) {
				r := row(w, x.depth)
				if r == nil {
					return "", false, false
				}
				return fmt.Sprintf("%.2fx (%s vs %s req/s)", r.Ratio, commas(r.Limitkv.OpsPerSec), commas(r.Redis.OpsPerSec)), r.Ratio >= x.min, true
			})
		}
	}
	return out
}

func rbMarkdown(b *strings.Builder, r *results) {
	rb, m := r.RB, r.Meta
	p := func(format string, args ...any) { fmt.Fprintf(b, format+"\n", args...) }
	p("## Throughput and CPU per request with redis-benchmark")
	p("")
	p("The same servers' throughput with Redis's own client, %s, instead of ours: each run is one process, `%s`, where `__rand_int__` in the command becomes a random number of 12 digits below %s on every request (the GET keys are preloaded under those names). Every command was checked once on both servers before the runs (redis-benchmark looks at no reply but errors, and stops at the first). On a fresh pair of servers, every workload at every depth runs on both, %d round(s), the server that goes first flipping from one pair to the next. N is sized once per workload, server and depth so that a run lasts about %s: a short probe, then a warmup of %s at the probe's rate, whose rate times %s is N.",
		rb.Version, rb.Command, commas(float64(m.Users)), m.Rounds, m.Duration, m.Warmup, m.Duration)
	p("")
	p("- Throughput: redis-benchmark's requests per second (the median over the rounds). On %d cores redis-benchmark takes about one, so at depth 1 the client caps both servers alike.", m.Cores)
	p("- Server CPU per request: the server's utime+stime from `/proc/<pid>/stat` after the redis-benchmark process minus before, / N; the median over the rounds. It is the fair figure here, and the one the CPU targets judge. The 50 connections' set-up is in it, spread over N requests.")
	p("- Latency (ms): redis-benchmark's own, per request, timed from the send of the request's batch; medians over the rounds of each run's p50, p99 and max, and limitkv's p99 and max over Redis's.")
	p("- The rate limits: one rule each, natively on limitkv and as the Lua scripts on Redis (`EVALSHA`, loaded with `SCRIPT LOAD`; the sliding window's request id is `__rand_int__`, so two requests to one key in the same µs collide with a chance of 1 in %s), and compared with Redis's `INCR`, the cost of a counter. redis-benchmark does not tell allowed from denied; the Go generator's runs show the share of denials.", commas(float64(m.Users)))
	p("")
	var targets []targetResult
	for _, t := range r.Targets {
		if strings.HasPrefix(t.Name, "redis-benchmark: ") {
			targets = append(targets, t)
		}
	}
	if len(targets) > 0 {
		p("| target | wanted | measured | |")
		p("|---|---|---|---|")
		for _, t := range targets {
			p("| %s | %s | %s | **%s** |", strings.TrimPrefix(t.Name, "redis-benchmark: "), t.Want, orDash(t.Got), t.Status)
		}
		p("")
	}
	p("| workload | depth | limitkv req/s | Redis req/s | limitkv / Redis | server CPU µs/req limitkv / Redis | CPU limitkv / Redis | CPU limitkv / Redis's INCR | limitkv p50 / p99 / max ms | Redis p50 / p99 / max ms | p99 limitkv / Redis | max limitkv / Redis |")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|")
	for _, x := range rb.Rows {
		vsIncr := "–"
		if x.CPUOverINCR > 0 {
			vsIncr = fmt.Sprintf("**%.2fx**", x.CPUOverINCR)
		}
		p("| %s | %d | %s | %s | **%.2fx** | %.2f / %.2f | **%.2fx** | %s | %.3f / %.3f / %.3f | %.3f / %.3f / %.3f | **%.2fx** | **%.2fx** |", x.Name, x.Depth, commas(x.Limitkv.OpsPerSec), commas(x.Redis.OpsPerSec), x.Ratio,
			x.Limitkv.CPUPerReqUs, x.Redis.CPUPerReqUs, x.CPURatio, vsIncr, x.Limitkv.P50Ms, x.Limitkv.P99Ms, x.Limitkv.MaxMs, x.Redis.P50Ms, x.Redis.P99Ms, x.Redis.MaxMs,
			x.P99Ratio, x.MaxRatio)
	}
	p("")
	p("What each workload sends:")
	p("")
	p("| workload | limitkv | Redis |")
	p("|---|---|---|")
	seen := map[string]bool{}
	for _, x := range rb.Rows {
		if !seen[x.Workload] {
			seen[x.Workload] = true
			p("| %s | `%s` | `%s` |", x.Name, x.Limitkv.Command, x.Redis.Command)
		}
	}
	p("")
	p("Conditions, medians over the rounds, in cores busy during the redis-benchmark process's life: the server, redis-benchmark (from its rusage), and everything else (the benchmark itself, the idle server of the pair, other users). Busy rounds had everything else above %.2f cores. Spread is (max − min) / median of the rounds' throughputs.", m.QuietCores)
	p("")
	p("| workload | depth | server | N (requests per run) | busy rounds | spread | server CPU | client CPU | other CPU | CPU µs/req per round |")
	p("|---|---:|---|---:|---:|---:|---:|---:|---:|---|")
	for _, x := range rb.Rows {
		for _, s := range []*rbSummary{x.Limitkv, x.Redis} {
			var per []string
			for _, v := range s.CPUPerRound {
				per = append(per, fmt.Sprintf("%.2f", v))
			}
			p("| %s | %d | %s | %s | %d of %d | %.1f%% | %.2f | %.2f | %.2f | %s |", x.Workload, x.Depth, s.Server, commas(float64(s.Requests)), s.BusyRuns, len(s.PerRound),
				100*s.Spread, s.ServerCores, s.ClientCores, s.OtherCores, strings.Join(per, ", "))
		}
	}
	p("")
	p("Every redis-benchmark run:")
	p("")
	p("| round | workload | depth | server | requests | seconds | req/s | server CPU s | server CPU µs/req | p50 ms | p99 ms | max ms | server CPU | client CPU | other CPU | load (1 min) |")
	p("|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, x := range rb.Runs {
		other := m.otherCores(x.CPU.Other)
		p("| %d | %s | %d | %s | %s | %.2f | %s | %.2f | %.2f | %.3f | %.3f | %.3f | %.2f | %.2f | %s | %.2f |", x.Round, x.Workload, x.Depth, x.Server, commas(float64(x.Requests)),
			x.Seconds, commas(x.OpsPerSec), x.ServerCPUSec, x.CPUPerReqUs, x.P50Ms, x.P99Ms, x.MaxMs, x.CPU.Server, x.CPU.Client, other, x.Load1)
	}
	p("")
}
