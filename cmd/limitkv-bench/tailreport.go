package main

import (
	"fmt"
	"strconv"
	"strings"
)

// tailReport is the tail scenario's page, tail.md and tail.json.
func tailReport(r *tailResults) *report {
	m := r.Meta
	rep := newReport("tail", "limitkv vs Redis: tail latency and CPU per request", m, "")
	rep.data = r
	p := rep.p
	p("- Servers: %s; %s, commit %s, built with %s.", m.RedisVersion, m.LimitkvVersion, m.Commit, m.GoVersion)
	if len(r.LimitkvArgs) > 0 {
		p("- limitkv's extra arguments: `%s`.", strings.Join(r.LimitkvArgs, " "))
	}
	if r.BaselineBin != "" {
		args := "none"
		if len(r.BaselineArgs) > 0 {
			args = "`" + strings.Join(r.BaselineArgs, " ") + "`"
		}
		p("- Baseline: a second limitkv, `%s` (extra arguments: %s), run as a third server in the same rounds: the before of a change whose after is limitkv.", r.BaselineBin, args)
	}
	p("- Client: %s, on the same machine.", r.RBVersion)
	p("")
	p("Run as `%s`; `go run ./cmd/limitkv-bench tail` runs it again. **The timings are comparable only within one run**: the machine's load, clock and neighbours change from one run to the next by more than most changes move a figure, so compare limitkv with Redis (and the baseline) on this page, not with another page's figures.", strings.TrimSpace(m.Command))
	p("")
	p("Each run is one redis-benchmark process, `%s`, with N = %s at depth 1 and %s at depth 16 (the defaults, 200,000 and 1,000,000, last about 2 s each on 2 cores); `__rand_int__` becomes a random number of 12 digits below %s on every request, and the GET keys are preloaded under those names. Every configuration starts fresh servers, checks one reply of every command on each, warms each up with one unmeasured run of every command, then runs %d round(s): every workload at both depths on every server that runs it, the server that goes first rotating from one workload to the next and from one round to the next.",
		r.Command, commas(float64(r.Requests["1"])), commas(float64(r.Requests["16"])), commas(float64(m.Users)), m.Rounds)
	p("")
	p("- Persistence off: limitkv `--persistence no`; Redis `--save '' --appendonly no`. Persistence on: each server's default, in a fresh directory: limitkv `--persistence yes` with its default snapshot interval; Redis with its default save rules (no `--save`) and `--appendonly no`.")
	p("- Pinned: the server under `taskset -c 0`, redis-benchmark under `taskset -c 1`, a core each, the fair comparison with single-threaded Redis. Unpinned: wherever the kernel puts them.")
	p("- Latency (ms): redis-benchmark's own, per request, from the send of the request's batch; p50, p99 and max are medians over the rounds of each run's own. req/s: redis-benchmark's, the median over the rounds.")
	p("- CPU µs/req: the server process's utime+stime from `/proc/<pid>/stat` after the run minus before, over N; the median over the rounds. A forked child's time is not in it: Redis's `BGSAVE`, with persistence on, runs in one, while limitkv's snapshots run in its own process.")
	p("- RL.FIXED (`RL.FIXED fixed:__rand_int__ 100 60s`) and RL.SLIDE (`RL.SLIDE slide:__rand_int__ 100 60s`) run on limitkv only: their Redis columns are Redis's INCR of the same round, a counter's cost, and they are also compared with limitkv's own INCR.")
	p("- Targets: p99 ≤ %.1fx Redis's and max ≤ %.0fx, on every row; CPU per request: GET, SET, INCR ≤ 1.1x Redis's at depth 1 and ≤ 1.0x at depth 16; at depth 16, RL.FIXED ≤ 1.15x limitkv's INCR and ≤ 1.25x Redis's INCR, RL.SLIDE ≤ 1.25x and ≤ 1.4x.",
		tailP99Target, tailMaxTarget)
	p("")
	for _, c := range r.Configs {
		tailConfigMarkdown(rep, c, r.BaselineBin != "")
	}
	p("## Every run")
	p("")
	p("Server, client and other CPU: cores busy during the run (the server; redis-benchmark, from its rusage; everything else: the idle servers, the benchmark, other users). *busy*: everything else above %.2f cores.", m.QuietCores)
	p("")
	p("| configuration | round | workload | depth | server | requests | seconds | req/s | CPU µs/req | p50 ms | p99 ms | max ms | server CPU | client CPU | other CPU | load (1 min) |")
	p("|---|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, x := range r.Runs {
		other := m.otherCores(x.CPU.Other)
		p("| %s | %d | %s | %d | %s | %s | %.2f | %s | %.2f | %.3f | %.3f | %.3f | %.2f | %.2f | %s | %.2f |", x.tailConfig.name(), x.Round, x.Workload, x.Depth, x.Server,
			commas(float64(x.Requests)), x.Seconds, commas(x.OpsPerSec), x.CPUPerReqUs, x.P50Ms, x.P99Ms, x.MaxMs, x.CPU.Server, x.CPU.Client, other, x.Load1)
	}
	p("")
	return rep
}

// tailConfigMarkdown is one configuration's table.
func tailConfigMarkdown(rep *report, c tailConfigResult, baseline bool) {
	p := rep.p
	title := c.Name
	p("## %s", strings.ToUpper(title[:1])+title[1:])
	p("")
	pass, all := 0, 0
	for _, r := range c.Rows {
		for _, mk := range r.Marks {
			all++
			if mk.Status == "PASS" {
				pass++
			}
		}
	}
	p("%d of %d targets met.", pass, all)
	p("")
	head := "| workload | depth | limitkv req/s | Redis req/s | limitkv p50 / p99 / max ms | Redis p50 / p99 / max ms | CPU µs/req limitkv / Redis | p99 limitkv / Redis | max limitkv / Redis | CPU limitkv / Redis | CPU limitkv / own INCR |"
	align := "|---|---:|---:|---:|---|---|---|---:|---:|---:|---:|"
	if baseline {
		head += " baseline req/s | baseline p50 / p99 / max ms | baseline CPU µs/req | p99 / max / CPU limitkv / baseline |"
		align += "---:|---|---:|---|"
	}
	p("%s targets |", head)
	p("%s---|", align)
	for _, r := range c.Rows {
		name := r.Name
		own := "–"
		if r.CPUOverOwnINCR > 0 {
			name += " (Redis: INCR)"
			own = fmt.Sprintf("**%.2fx**", r.CPUOverOwnINCR)
		}
		line := fmt.Sprintf("| %s | %d | %s | %s | %s | %s | %.2f / %.2f | **%.2fx** | **%.2fx** | **%.2fx** | %s |", name, r.Depth, commas(r.Limitkv.OpsPerSec), commas(r.Redis.OpsPerSec),
			tailLatency(r.Limitkv), tailLatency(r.Redis), r.Limitkv.CPUPerReqUs, r.Redis.CPUPerReqUs, r.P99Ratio, r.MaxRatio, r.CPURatio, own)
		if baseline {
			if b := r.Baseline; b != nil {
				line += fmt.Sprintf(" %s | %s | %.2f | %.2fx / %.2fx / %.2fx |", commas(b.OpsPerSec), tailLatency(b), b.CPUPerReqUs, r.P99OverBaseline, r.MaxOverBaseline, r.CPUOverBaseline)
			} else {
				line += " – | – | – | – |"
			}
		}
		p("%s %s |", line, tailMarksCell(r.Marks))
	}
	p("")
}

func tailLatency(s *tailSummary) string {
	return fmt.Sprintf("%.3f / %.3f / %.3f", s.P50Ms, s.P99Ms, s.MaxMs)
}

// tailMarksCell names each target judged on a row with its verdict.
func tailMarksCell(marks []tailMark) string {
	if len(marks) == 0 {
		return "–"
	}
	var parts []string
	for _, mk := range marks {
		parts = append(parts, fmt.Sprintf("%s ≤ %sx: **%s**", mk.Name, strconv.FormatFloat(mk.Want, 'f', -1, 64), mk.Status))
	}
	return strings.Join(parts, "; ")
}
