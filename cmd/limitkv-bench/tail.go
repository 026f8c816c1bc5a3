package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/limitkv/limitkv/internal/testserver"
)

// The tail scenario, the latency regression benchmark: redis-benchmark
// drives limitkv and redis-server alike,
//
//	redis-benchmark -h 127.0.0.1 -p PORT -c 50 -r 100000 -n N -P DEPTH -q --csv COMMAND...
//
// and every run gives its p50, p99 and max latency and the server's CPU
// per request (utime+stime from /proc over N). The workloads are GET, SET
// and INCR on both servers, and RL.FIXED and RL.SLIDE on limitkv only:
// a decision is judged against Redis's INCR, the cost of a counter, run
// in the same round. The matrix is persistence off and on (each server
// with its own default) by pinned or not, each configuration on fresh
// servers. A limitkv change is measured before and after in one run with
// -baseline-bin: the old binary runs as a third server in the same
// rounds, since figures from two runs differ by more than most changes.

// tailDepths are the pipeline depths of every workload: one request at a
// time, where latency is the server's turnaround, and 16, where the
// per-request cost dominates.
var tailDepths = []int{1, 16}

// The servers of a tail run, by the name the page gives them.
const (
	tailLimitkv  = "limitkv"
	tailBaseline = "baseline"
	tailRedis    = "redis"
)

func tailFlags(fs *flag.FlagSet, c *config) {
	c.tailRequests = [2]int64{200_000, 1_000_000}
	fs.Func("requests", "requests per run at depth 1 and at depth 16, comma separated (default 200000,1000000: about 2 s each on 2 cores; -quick takes a 20th)", func(s string) error {
		parts := strings.Split(s, ",")
		if len(parts) != len(c.tailRequests) {
			return fmt.Errorf("%q is not two counts (depth 1, depth 16)", s)
		}
		for i, p := range parts {
			n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 64)
			if err != nil || n < 1 {
				return fmt.Errorf("%q is not a positive count", p)
			}
			c.tailRequests[i] = n
		}
		return nil
	})
	c.tailPin = "no"
	oneOfFlag(fs, &c.tailPin, "pin", "no: servers and redis-benchmark run on any core (the default); yes: the server under taskset -c 0 and redis-benchmark under taskset -c 1, one core each, the fair comparison with single-threaded Redis; both: the matrix both ways", "no", "yes", "both")
	c.tailPersistence = "both"
	oneOfFlag(fs, &c.tailPersistence, "persistence", "off (limitkv --persistence no, Redis --save '' --appendonly no), on (each server's default persistence, in a fresh directory) or both (the default)", "off", "on", "both")
	fs.Func("limitkv-args", "extra limitkv arguments, split at spaces, to measure a setting (say, \"--event-loops no\")", func(s string) error {
		c.limitkvArgs = strings.Fields(s)
		return nil
	})
	fs.StringVar(&c.baselineBin, "baseline-bin", "", "a second limitkv binary (say, main's) run as a third server, \"baseline\", in the same rounds: before and after in one run (default: the limitkv binary, when only -baseline-args is given)")
	fs.Func("baseline-args", "extra arguments of the baseline limitkv, split at spaces; given alone, the baseline is the limitkv binary with these arguments", func(s string) error {
		c.baselineArgs = strings.Fields(s)
		return nil
	})
}

// A tailConfig is one configuration of the matrix, run on fresh servers.
type tailConfig struct {
	Persistence bool `json:"persistence"`
	Pinned      bool `json:"pinned"`
}

func (c tailConfig) name() string {
	s := "persistence off"
	if c.Persistence {
		s = "persistence on"
	}
	if c.Pinned {
		return s + ", pinned"
	}
	return s + ", unpinned"
}

// dir names the configuration's server directories.
func (c tailConfig) dir() string {
	return strings.NewReplacer(" ", "-", ",", "").Replace(c.name())
}

// tailConfigs is the matrix -persistence and -pin ask for: persistence
// off before on, unpinned before pinned.
func tailConfigs(persistence, pin string) []tailConfig {
	var out []tailConfig
	for _, p := range []bool{false, true} {
		if persistence == "off" && p || persistence == "on" && !p {
			continue
		}
		for _, pinned := range []bool{false, true} {
			if pin == "no" && pinned || pin == "yes" && !pinned {
				continue
			}
			out = append(out, tailConfig{Persistence: p, Pinned: pinned})
		}
	}
	return out
}

// tailWorkload is a row of the tail table: one command line, the same on
// every server that runs it.
type tailWorkload struct {
	id, name string // id: the Go workload whose reply check it uses
	args     []string
	onRedis  bool // the rate limits have no Redis run: Redis's INCR is their reference
}

// tailWorkloads are the counters before the rate limits, whose reference
// they are, with the command lines of the redis-benchmark throughput runs.
func tailWorkloads() []tailWorkload {
	byID := map[string]*rbWorkload{}
	for _, w := range rbWorkloads() {
		byID[w.id] = w
	}
	var out []tailWorkload
	for _, id := range []string{"get", "set", "incr", "fixed", "slide"} {
		w := byID[id]
		out = append(out, tailWorkload{id: id, name: rbCmdName[id], args: w.limitkv, onRedis: id != "fixed" && id != "slide"})
	}
	return out
}

// tailStep is one workload at one depth in a round: one run on each of
// its servers, in this order.
type tailStep struct {
	Workload string
	Depth    int
	Servers  []string
	Requests int64
}

// tailPlan is a round's runs. The server that goes first rotates from one
// step to the next and from one round to the next, so that none is always
// measured just after another's run, or always first.
func tailPlan(round int, ws []tailWorkload, requests [2]int64, baseline bool) []tailStep {
	var out []tailStep
	k := 0
	for _, w := range ws {
		for i, d := range tailDepths {
			servers := []string{tailLimitkv}
			if baseline {
				servers = append(servers, tailBaseline)
			}
			if w.onRedis {
				servers = append(servers, tailRedis)
			}
			r := (round + k) % len(servers)
			k++
			out = append(out, tailStep{Workload: w.id, Depth: d, Servers: append(servers[r:], servers[:r]...), Requests: requests[i]})
		}
	}
	return out
}

// tailRun is one redis-benchmark process of a configuration.
type tailRun struct {
	tailConfig
	rbRun
}

// tailSummary is a server's medians over the rounds.
type tailSummary struct {
	Server      string  `json:"server"`
	Command     string  `json:"command"`
	Requests    int64   `json:"requests_per_run"`
	Rounds      int     `json:"rounds"`
	OpsPerSec   float64 `json:"median_ops_per_sec"`
	CPUPerReqUs float64 `json:"median_server_cpu_us_per_request"`
	P50Ms       float64 `json:"median_p50_latency_ms"`
	P99Ms       float64 `json:"median_p99_latency_ms"`
	MaxMs       float64 `json:"median_max_latency_ms"`
}

// tailMark is one target judged on a row.
type tailMark struct {
	Name   string  `json:"name"` // p99, max, CPU vs Redis, CPU vs limitkv's INCR
	Want   float64 `json:"at_most"`
	Got    float64 `json:"got"`
	Status string  `json:"status"` // PASS or FAIL
}

type tailRow struct {
	Workload string       `json:"workload"`
	Name     string       `json:"name"`
	Depth    int          `json:"depth"`
	Limitkv  *tailSummary `json:"limitkv"`
	Baseline *tailSummary `json:"baseline,omitempty"`
	// Redis is Redis running the same command, or INCR for the rate
	// limits.
	Redis    *tailSummary `json:"redis"`
	P99Ratio float64      `json:"p99_limitkv_over_redis"`
	MaxRatio float64      `json:"max_limitkv_over_redis"`
	CPURatio float64      `json:"cpu_per_request_limitkv_over_redis"`
	// The rate limits: limitkv's CPU per request over its own INCR's.
	CPUOverOwnINCR float64 `json:"cpu_per_request_over_limitkv_incr,omitempty"`
	// With a baseline: limitkv over the baseline, the change's effect.
	P99OverBaseline float64    `json:"p99_limitkv_over_baseline,omitempty"`
	MaxOverBaseline float64    `json:"max_limitkv_over_baseline,omitempty"`
	CPUOverBaseline float64    `json:"cpu_per_request_limitkv_over_baseline,omitempty"`
	Marks           []tailMark `json:"targets"`
}

type tailConfigResult struct {
	tailConfig
	Name string    `json:"name"`
	Rows []tailRow `json:"rows"`
}

type tailResults struct {
	Meta         meta               `json:"meta"`
	RBVersion    string             `json:"redis_benchmark_version"`
	Command      string             `json:"command"` // the redis-benchmark command line, with the parts that vary as words
	Requests     map[string]int64   `json:"requests_per_run_by_depth"`
	LimitkvArgs  []string           `json:"limitkv_args,omitempty"`
	BaselineBin  string             `json:"baseline_bin,omitempty"`
	BaselineArgs []string           `json:"baseline_args,omitempty"`
	Configs      []tailConfigResult `json:"configurations"`
	Runs         []tailRun          `json:"runs"`
}

// summarizeTail gives a configuration's rows: every workload at every
// depth, each server's medians over the rounds, the ratios and the
// targets' marks. A row whose limitkv or Redis reference did not run is
// left out.
func summarizeTail(runs []tailRun, c tailConfig, ws []tailWorkload) []tailRow {
	sum := func(id, server string, depth int) *tailSummary {
		var s tailSummary
		var rps, cpu, p50, p99, mx []float64
		for _, r := range runs {
			if r.tailConfig != c || r.Workload != id || r.Server != server || r.Depth != depth {
				continue
			}
			s.Requests = r.Requests
			rps, cpu = append(rps, r.OpsPerSec), append(cpu, r.CPUPerReqUs)
			p50, p99, mx = append(p50, r.P50Ms), append(p99, r.P99Ms), append(mx, r.MaxMs)
		}
		if len(rps) == 0 {
			return nil
		}
		s.Server, s.Rounds = server, len(rps)
		s.OpsPerSec, s.CPUPerReqUs = median(rps), median(cpu)
		s.P50Ms, s.P99Ms, s.MaxMs = median(p50), median(p99), median(mx)
		return &s
	}
	command := map[string]string{}
	for _, w := range ws {
		command[w.id] = strings.Join(w.args, " ")
	}
	var rows []tailRow
	for _, w := range ws {
		for _, d := range tailDepths {
			row := tailRow{Workload: w.id, Name: w.name, Depth: d, Limitkv: sum(w.id, tailLimitkv, d), Baseline: sum(w.id, tailBaseline, d)}
			ref := w.id
			if !w.onRedis {
				ref = "incr"
			}
			row.Redis = sum(ref, tailRedis, d)
			if row.Limitkv == nil || row.Redis == nil {
				continue
			}
			row.Limitkv.Command = command[w.id]
			row.Redis.Command = command[ref]
			if row.Baseline != nil {
				row.Baseline.Command = command[w.id]
				row.P99OverBaseline = div(row.Limitkv.P99Ms, row.Baseline.P99Ms)
				row.MaxOverBaseline = div(row.Limitkv.MaxMs, row.Baseline.MaxMs)
				row.CPUOverBaseline = div(row.Limitkv.CPUPerReqUs, row.Baseline.CPUPerReqUs)
			}
			row.P99Ratio = div(row.Limitkv.P99Ms, row.Redis.P99Ms)
			row.MaxRatio = div(row.Limitkv.MaxMs, row.Redis.MaxMs)
			row.CPURatio = div(row.Limitkv.CPUPerReqUs, row.Redis.CPUPerReqUs)
			if !w.onRedis {
				if own := sum("incr", tailLimitkv, d); own != nil {
					row.CPUOverOwnINCR = div(row.Limitkv.CPUPerReqUs, own.CPUPerReqUs)
				}
			}
			row.Marks = tailMarks(&row)
			rows = append(rows, row)
		}
	}
	return rows
}

// The targets on the tail: limitkv's p99 and max against Redis's
// (for a rate limit, Redis's INCR).
const (
	tailP99Target float64 = 1.5
	tailMaxTarget float64 = 2
)

// tailCPUTargets are the CPU per request targets of a workload at a
// depth: over Redis's (GET, SET, INCR: the same command; the rate limits:
// INCR), and, for the rate limits, over limitkv's own INCR; 0 is no
// target. The rate limits are judged at depth 16, where the per-request
// cost is not buried under the system calls of one request per read.
func tailCPUTargets(workload string, depth int) (overRedis, overOwnINCR float64) {
	switch {
	case (workload == "get" || workload == "set" || workload == "incr") && depth == 1:
		return 1.1, 0
	case (workload == "get" || workload == "set" || workload == "incr") && depth == 16:
		return 1.0, 0
	case workload == "fixed" && depth == 16:
		return 1.25, 1.15
	case workload == "slide" && depth == 16:
		return 1.4, 1.25
	}
	return 0, 0
}

// tailMarks judges a row against the targets that apply to it. A ratio
// that could not be had (a figure of 0) is not judged.
func tailMarks(r *tailRow) []tailMark {
	var out []tailMark
	mark := func(name string, want, got float64) {
		if want > 0 && got > 0 {
			out = append(out, tailMark{Name: name, Want: want, Got: got, Status: status(got <= want)})
		}
	}
	mark("p99", tailP99Target, r.P99Ratio)
	mark("max", tailMaxTarget, r.MaxRatio)
	overRedis, overOwn := tailCPUTargets(r.Workload, r.Depth)
	mark("CPU vs Redis", overRedis, r.CPURatio)
	mark("CPU vs limitkv's INCR", overOwn, r.CPUOverOwnINCR)
	return out
}

// runTail runs the matrix and writes tail.md and tail.json.
func (b *bench) runTail(ctx context.Context, started time.Time, redisVersion string) (int, error) {
	configs := tailConfigs(b.cfg.tailPersistence, b.cfg.tailPin)
	for _, c := range configs {
		if !c.Pinned {
			continue
		}
		if runtime.NumCPU() < 2 {
			return 1, errors.New("-pin needs 2 cores: the server on one, redis-benchmark on the other")
		}
		var err error
		if b.taskset, err = exec.LookPath("taskset"); err != nil {
			return 1, fmt.Errorf("-pin: %v (util-linux has it)", err)
		}
		break
	}
	baselineBin := ""
	if b.cfg.tailBaseline {
		baselineBin = b.limitkvBin
		if b.cfg.baselineBin != "" {
			var err error
			if baselineBin, err = filepath.Abs(b.cfg.baselineBin); err != nil {
				return 1, err
			}
		}
	}
	res := &tailResults{
		Meta: b.meta(started, redisVersion), RBVersion: b.rbVersion,
		Command:  fmt.Sprintf("redis-benchmark -h 127.0.0.1 -p PORT -c %d -r %d -n N -P DEPTH -q --csv COMMAND...", b.cfg.conns, b.cfg.users),
		Requests: map[string]int64{}, LimitkvArgs: b.cfg.limitkvArgs, BaselineBin: baselineBin, BaselineArgs: b.cfg.baselineArgs,
	}
	for i, d := range tailDepths {
		res.Requests[strconv.Itoa(d)] = b.cfg.tailRequests[i]
	}
	// The settings of the Go generator's runs do not apply: runs here are
	// sized by -requests.
	res.Meta.Duration, res.Meta.Warmup, res.Meta.PacedRate, res.Meta.MemKeys, res.Meta.SnapshotKeys = "", "", 0, 0, 0
	res.Meta.Depths, res.Meta.LoadGen = tailDepths, "redis-benchmark"
	ws := tailWorkloads()
	runs := 0
	for _, st := range tailPlan(1, ws, b.cfg.tailRequests, baselineBin != "") {
		runs += len(st.Servers)
	}
	b.logf("tail: %d configuration(s) × %d round(s) × %d redis-benchmark runs of about 2 s (N = %s at depth 1, %s at depth 16)",
		len(configs), b.cfg.rounds, runs, commas(float64(b.cfg.tailRequests[0])), commas(float64(b.cfg.tailRequests[1])))
	for _, c := range configs {
		if err := b.tailConfig(ctx, c, ws, baselineBin, res); err != nil {
			return 1, fmt.Errorf("tail, %s: %v", c.name(), err)
		}
		res.Configs = append(res.Configs, tailConfigResult{tailConfig: c, Name: c.name(), Rows: summarizeTail(res.Runs, c, ws)})
	}
	finish(&res.Meta, started)
	if err := b.publish(tailReport(res), started); err != nil {
		return 1, err
	}
	for _, c := range res.Configs {
		for _, r := range c.Rows {
			for _, m := range r.Marks {
				if m.Status != "PASS" {
					b.logf("  FAIL  %s: %s depth %d %s %.2fx (at most %.2fx)", c.Name, r.Name, r.Depth, m.Name, m.Got, m.Want)
				}
			}
		}
	}
	return 0, nil
}

// tailStart starts one server of a configuration in a fresh directory.
func (b *bench) tailStart(c tailConfig, name, baselineBin string) (*server, error) {
	dir := filepath.Join(b.tmp, "tail-"+c.dir()+"-"+name)
	kind, bin := kindLimitkv, b.limitkvBin
	var extra []string
	switch name {
	case tailLimitkv:
		extra = b.cfg.limitkvArgs
	case tailBaseline:
		bin, extra = baselineBin, b.cfg.baselineArgs
	case tailRedis:
		kind, bin = kindRedis, b.redisBin
	}
	run := bin
	if c.Pinned {
		run = b.taskset
	}
	return startServer(kind, run, dir, func(port int) []string {
		var args []string
		switch {
		case kind == kindRedis && !c.Persistence:
			args = testserver.RedisArgs(port, dir)
		case kind == kindRedis:
			// No --save: Redis's default save rules, as a Redis installed
			// without a config file runs.
			args = []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--appendonly", "no", "--dir", dir, "--daemonize", "no"}
		default:
			persistence := "no"
			if c.Persistence {
				// --snapshot-interval is left at limitkv's default.
				persistence = "yes"
			}
			args = testserver.LimitkvArgs(port, filepath.Join(dir, "data"),
				append([]string{"--bind", "127.0.0.1", "--loglevel", "warning", "--persistence", persistence}, extra...)...)
		}
		if c.Pinned {
			// taskset execs the server: its pid, whose CPU time is read,
			// is the server's.
			return append([]string{"-c", "0", bin}, args...)
		}
		return args
	})
}

// tailConfig runs one configuration's rounds on fresh servers, adding its
// runs to res.
func (b *bench) tailConfig(ctx context.Context, c tailConfig, ws []tailWorkload, baselineBin string, res *tailResults) error {
	names := []string{tailLimitkv}
	if baselineBin != "" {
		names = append(names, tailBaseline)
	}
	names = append(names, tailRedis)
	servers := map[string]*server{}
	for _, name := range names {
		s, err := b.tailStart(c, name, baselineBin)
		if err != nil {
			return err
		}
		defer s.Stop()
		servers[name] = s
	}
	b.rbPin = ""
	if c.Pinned {
		b.rbPin = "1"
	}
	defer func() { b.rbPin = "" }()

	checks := map[string]*workload{}
	for _, w := range workloads() {
		checks[w.id] = w
	}
	warmN := max(int64(b.cfg.conns*16), b.cfg.tailRequests[1]/10)
	for _, name := range names {
		s := servers[name]
		if err := preloadGetKeys(ctx, s, b.cfg.users); err != nil {
			return fmt.Errorf("%s: %v", name, err)
		}
		// Checked once and warmed: redis-benchmark looks at no reply but
		// errors, and a fresh server's first requests grow its tables.
		for _, w := range ws {
			if s.Kind == kindRedis && !w.onRedis {
				continue
			}
			rw := &rbWorkload{id: w.id, limitkv: w.args, redis: w.args}
			if err := verifyRB(s, rw, checks[w.id], b.cfg.users); err != nil {
				return err
			}
			if _, err := b.rbExec(ctx, s, w.args, 16, warmN); err != nil {
				return fmt.Errorf("%s %s: warming up: %v", name, w.id, err)
			}
		}
	}
	b.logf("tail, %s: servers %s started, %d GET keys preloaded, every command checked and warmed up",
		c.name(), strings.Join(names, ", "), b.cfg.users)
	byID := map[string]tailWorkload{}
	for _, w := range ws {
		byID[w.id] = w
	}
	for round := 1; round <= b.cfg.rounds; round++ {
		for _, st := range tailPlan(round, ws, b.cfg.tailRequests, baselineBin != "") {
			for _, name := range st.Servers {
				// As in rbOneRun: the previous run's connections close and
				// the server settles first.
				time.Sleep(100 * time.Millisecond)
				rec, err := b.rbExec(ctx, servers[name], byID[st.Workload].args, st.Depth, st.Requests)
				if err != nil {
					return fmt.Errorf("%s %s depth %d: %v", name, st.Workload, st.Depth, err)
				}
				rec.Round, rec.Workload, rec.Server = round, st.Workload, name
				res.Runs = append(res.Runs, tailRun{tailConfig: c, rbRun: rec})
				b.logf("tail, %s, round %d: %-5s d=%-2d %-8s %9.0f req/s  CPU %5.2f µs/req  p50 %6.3f p99 %6.3f max %7.3f ms  cpu server %.2f client %.2f other %.2f",
					c.name(), round, st.Workload, st.Depth, name, rec.OpsPerSec, rec.CPUPerReqUs, rec.P50Ms, rec.P99Ms, rec.MaxMs,
					rec.CPU.Server, rec.CPU.Client, rec.CPU.Other)
			}
		}
	}
	return nil
}

// oneOfFlag defines a flag whose value must be one of choices, kept in dst.
func oneOfFlag(fs *flag.FlagSet, dst *string, name, usage string, choices ...string) {
	fs.Func(name, usage, func(s string) error {
		if !slices.Contains(choices, s) {
			return fmt.Errorf("%q is not %s or %s", s, strings.Join(choices[:len(choices)-1], ", "), choices[len(choices)-1])
		}
		*dst = s
		return nil
	})
}
