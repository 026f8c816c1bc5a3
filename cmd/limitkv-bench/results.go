package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// resultParts are the parts of the full run a command runs.
type resultParts struct {
	throughput, paced, memory, snapshot, periodic bool
}

// runAll is the full run: results.md, results.svg, results.json.
func (b *bench) runAll(ctx context.Context, started time.Time, redisVersion string) (int, error) {
	return b.runResults(ctx, started, redisVersion, "results", "limitkv vs Redis: benchmark results", resultParts{
		throughput: !b.cfg.skipThroughput, paced: true, memory: !b.cfg.skipMemory,
		snapshot: !b.cfg.skipSnapshot, periodic: !b.cfg.skipPeriodic,
	})
}

// runResults runs the parts asked for and writes their page, name.md (and
// .svg, .json), with the targets they judge.
func (b *bench) runResults(ctx context.Context, started time.Time, redisVersion, name, title string, parts resultParts) (int, error) {
	b.res = &results{Meta: b.meta(started, redisVersion)}
	b.logf("machine: %s, %d cores; load average %.2f %.2f %.2f", b.res.Meta.CPU, b.res.Meta.Cores,
		b.res.Meta.LoadStart[0], b.res.Meta.LoadStart[1], b.res.Meta.LoadStart[2])

	if parts.throughput && b.cfg.useGo() {
		if err := b.throughput(ctx); err != nil {
			return 1, fmt.Errorf("throughput: %v", err)
		}
	}
	if parts.throughput && b.cfg.useRB() {
		b.res.RB = &rbResults{Version: b.rbVersion}
		if err := b.redisBenchmark(ctx); err != nil {
			return 1, fmt.Errorf("throughput with redis-benchmark: %v", err)
		}
	}
	if parts.paced && b.cfg.pacedRate > 0 {
		if err := b.paced(ctx); err != nil {
			return 1, fmt.Errorf("latency at a fixed rate: %v", err)
		}
	}
	if parts.memory {
		if err := b.memory(ctx); err != nil {
			return 1, fmt.Errorf("memory: %v", err)
		}
	}
	if parts.snapshot {
		b.logf("snapshot scenario: %d dirty keys, GET + RL.SLIDE from %d connections", b.cfg.snapshotKeys, b.cfg.conns)
		snap, err := b.snapshotScenario(ctx)
		if err != nil {
			return 1, fmt.Errorf("snapshot scenario: %v", err)
		}
		b.res.Snapshot = snap
	}
	if parts.periodic && b.cfg.pacedRate > 0 {
		var err error
		if b.res.Periodic, err = b.periodicScenario(ctx); err != nil {
			return 1, fmt.Errorf("periodic snapshots: %v", err)
		}
	}
	finish(&b.res.Meta, started)
	b.res.Targets = evaluateTargets(b.res)
	if err := b.publish(resultsReport(name, title, b.res), started); err != nil {
		return 1, err
	}
	for _, t := range b.res.Targets {
		b.logf("  %-4s  %s: %s", t.Status, t.Name, t.Got)
	}
	invalid := 0
	for _, rows := range [][]rowSummary{b.res.Throughput, b.res.Paced} {
		for _, row := range rows {
			for _, s := range []*serverSummary{row.Limitkv, row.Redis} {
				if s != nil && s.Errors > 0 {
					invalid++
					b.logf("!!! INVALID: %s at depth %d on %s (%s) got %d error replies (first: %s)", row.Workload, row.Depth, s.Server,
						offeredLoad(row.Rate), s.Errors, s.FirstError)
				}
			}
		}
	}
	if sn := b.res.Snapshot; sn != nil {
		loads := []*snapshotLoad{&sn.snapshotLoad}
		if sn.Paced != nil {
			loads = append(loads, sn.Paced)
		}
		for _, ld := range loads {
			for name, l := range ld.During {
				if l.Errors > 0 {
					invalid++
					b.logf("!!! INVALID: %s during the snapshot (%s) got %d error replies", name, offeredLoad(ld.Rate), l.Errors)
				}
			}
		}
	}
	if pr := b.res.Periodic; pr != nil {
		for _, s := range []*periodicSide{pr.On, pr.Off} {
			if s.Errors > 0 {
				invalid++
				b.logf("!!! INVALID: RL.SLIDE with %s (periodic snapshots) got %d error replies", s.Server, s.Errors)
			}
		}
	}
	if invalid > 0 {
		return 3, nil
	}
	return 0, nil
}

type results struct {
	Meta       meta            `json:"meta"`
	Targets    []targetResult  `json:"targets"`
	Throughput []rowSummary    `json:"throughput"`                // at saturation (closed loop)
	RB         *rbResults      `json:"redis_benchmark,omitempty"` // throughput with redis-benchmark as the client
	Paced      []rowSummary    `json:"paced"`                     // at a fixed rate (open loop)
	Memory     []memResult     `json:"memory"`
	BigKeys    []bigResult     `json:"big_keys"`
	Snapshot   *snapshotResult `json:"snapshot"`
	Periodic   *periodicResult `json:"periodic_snapshots,omitempty"`
	Runs       []runRecord     `json:"runs"`
	PacedRuns  []runRecord     `json:"paced_runs"`
	SetAside   []runRecord     `json:"runs_set_aside"` // measured while others loaded the machine (-quiet-wait)
}

type meta struct {
	Started        time.Time  `json:"started"`
	Finished       time.Time  `json:"finished"`
	TookSeconds    float64    `json:"took_seconds"`
	Command        string     `json:"command"`
	CPU            string     `json:"cpu"`
	Cores          int        `json:"cores"`
	Kernel         string     `json:"kernel"`
	GoVersion      string     `json:"go_version"`
	RedisVersion   string     `json:"redis_version"`
	LimitkvVersion string     `json:"limitkv_version"`
	Commit         string     `json:"limitkv_commit"`
	LoadStart      [3]float64 `json:"load_average_start"`
	LoadEnd        [3]float64 `json:"load_average_end"`
	Duration       string     `json:"duration"`
	Warmup         string     `json:"warmup"`
	Rounds         int        `json:"rounds"`
	Conns          int        `json:"conns"`
	Users          int        `json:"users"`
	Depths         []int      `json:"depths"`
	MemKeys        int        `json:"mem_keys"`
	SnapshotKeys   int        `json:"snapshot_keys"`
	Quick          bool       `json:"quick"`
	PacedRate      float64    `json:"paced_rate"` // requests/s of the open-loop runs; 0: none
	LoadGen        string     `json:"loadgen"`    // go, redis-benchmark or both
	QuietWait      string     `json:"quiet_wait,omitempty"`
	QuietCores     float64    `json:"quiet_cores"` // other processes' CPU above which a run is marked busy
}

// otherCores formats the cores other processes kept busy during a run,
// marked *busy* above QuietCores, for the tables of every run.
func (m meta) otherCores(other float64) string {
	s := fmt.Sprintf("%.2f", other)
	if other > m.QuietCores {
		s += " *busy*"
	}
	return s
}

// runRecord is one measured run: one workload, one server, one depth.
type runRecord struct {
	Round      int     `json:"round"`
	Workload   string  `json:"workload"`
	Server     string  `json:"server"`
	Depth      int     `json:"depth"`
	Rate       float64 `json:"paced_rate,omitempty"` // requests/s asked for; 0: closed loop
	Ops        int64   `json:"ops"`
	WindowSec  float64 `json:"window_seconds"`
	OpsPerSec  float64 `json:"ops_per_sec"`
	Errors     int64   `json:"error_replies"`
	FirstError string  `json:"first_error,omitempty"`
	Allowed    int64   `json:"allowed"`
	Denied     int64   `json:"denied"`
	P50us      float64 `json:"p50_us"`
	P99us      float64 `json:"p99_us"`
	P999us     float64 `json:"p999_us"`
	MaxUs      float64 `json:"max_us"`
	MeanUs     float64 `json:"mean_us"`
	Samples    uint64  `json:"latency_samples"`
	// Paced runs only, for diagnosis: the p99 of how late requests were
	// sent after their intended time (backlog and client lateness), and the
	// p99 latency from the actual send, without the backlog.
	SendLagP99us float64 `json:"send_lag_p99_us,omitempty"`
	SentP99us    float64 `json:"p99_from_actual_send_us,omitempty"`
	CPU          cpuUse  `json:"cpu"`
	// The server's CPU time in the window (utime+stime from /proc) over
	// the operations answered in it: the fair figure when the client
	// takes a core of the two, which caps throughput for both servers.
	CPUPerOpUs float64   `json:"server_cpu_us_per_op"`
	Load1      float64   `json:"load_average_1m_before"`
	hist       histogram // merged into the summary's percentiles
	lag, sent  histogram
}

type serverSummary struct {
	Server      string    `json:"server"`
	Command     string    `json:"command"`
	OpsPerSec   float64   `json:"median_ops_per_sec"`
	PerRound    []float64 `json:"ops_per_sec_per_round"`
	Spread      float64   `json:"spread"` // (max-min)/median over the rounds
	P50us       float64   `json:"p50_us"` // over all rounds' latencies
	P99us       float64   `json:"p99_us"`
	P999us      float64   `json:"p999_us"`
	MaxUs       float64   `json:"max_us"`
	SendLagP99  float64   `json:"send_lag_p99_us,omitempty"`         // paced runs: see runRecord
	SentP99us   float64   `json:"p99_from_actual_send_us,omitempty"` // paced runs: see runRecord
	Errors      int64     `json:"error_replies"`
	FirstError  string    `json:"first_error,omitempty"`
	DeniedPct   float64   `json:"denied_pct"`
	CPUPerOpUs  float64   `json:"median_server_cpu_us_per_op"`
	ServerCores float64   `json:"median_server_cores"`
	ClientCores float64   `json:"median_client_cores"`
	OtherCores  float64   `json:"median_other_cores"`
	StealCores  float64   `json:"median_steal_cores"`
	BusyRuns    int       `json:"busy_runs"` // rounds during which other processes took more than quiet_cores
	// Medians over the rounds of each run's own percentiles, as the
	// redis-benchmark rows give them: one run's stall moves the max over
	// all rounds, not these.
	MedianP50us float64 `json:"median_p50_us"`
	MedianP99us float64 `json:"median_p99_us"`
	MedianMaxUs float64 `json:"median_max_us"`
}

type rowSummary struct {
	Workload string         `json:"workload"`
	Name     string         `json:"name"`
	Depth    int            `json:"depth"`
	Decision bool           `json:"decision"`
	Rate     float64        `json:"paced_rate,omitempty"` // requests/s asked for; 0: closed loop
	Limitkv  *serverSummary `json:"limitkv"`
	Redis    *serverSummary `json:"redis"`
	Ratio    float64        `json:"limitkv_over_redis"`
	CPURatio float64        `json:"cpu_per_op_limitkv_over_redis"` // server CPU per operation
	// Of the medians over the rounds: the tail beside the cost.
	P99Ratio float64 `json:"median_p99_limitkv_over_redis"`
	MaxRatio float64 `json:"median_max_limitkv_over_redis"`
}

func summarize(runs []runRecord, selected []*workload, depths []int, quietCores float64) []rowSummary {
	var rows []rowSummary
	for _, w := range selected {
		for _, d := range depths {
			row := rowSummary{Workload: w.id, Name: w.name, Depth: d, Decision: w.decision}
			for _, kind := range []string{kindLimitkv, kindRedis} {
				s := &serverSummary{Server: kind, Command: describe(w.opFor(kind))}
				if o := w.opFor(kind); scriptName(o) != "" {
					s.Command = "EVALSHA " + scriptName(o)
					if len(o) > 1 {
						s.Command += " + " + describe(o[1:])
					}
				}
				var hist, lag, sent histogram
				var srv, cli, oth, st, perOp, p50, p99, mx []float64
				var allowed, denied int64
				for _, r := range runs {
					if r.Workload != w.id || r.Depth != d || r.Server != kind {
						continue
					}
					s.PerRound = append(s.PerRound, r.OpsPerSec)
					hist.merge(&r.hist)
					lag.merge(&r.lag)
					sent.merge(&r.sent)
					s.Errors += r.Errors
					if s.FirstError == "" {
						s.FirstError = r.FirstError
					}
					allowed += r.Allowed
					denied += r.Denied
					if r.CPU.Other > quietCores {
						s.BusyRuns++
					}
					srv, cli = append(srv, r.CPU.Server), append(cli, r.CPU.Client)
					oth, st = append(oth, r.CPU.Other), append(st, r.CPU.Steal)
					perOp = append(perOp, r.CPUPerOpUs)
					p50, p99, mx = append(p50, r.P50us), append(p99, r.P99us), append(mx, r.MaxUs)
				}
				if len(s.PerRound) == 0 {
					continue
				}
				s.OpsPerSec = median(s.PerRound)
				lo, hi := s.PerRound[0], s.PerRound[0]
				for _, v := range s.PerRound {
					lo, hi = math.Min(lo, v), math.Max(hi, v)
				}
				if s.OpsPerSec > 0 {
					s.Spread = (hi - lo) / s.OpsPerSec
				}
				s.P50us, s.P99us, s.P999us = us(hist.quantile(0.5)), us(hist.quantile(0.99)), us(hist.quantile(0.999))
				s.MaxUs = us(time.Duration(hist.max))
				s.MedianP50us, s.MedianP99us, s.MedianMaxUs = median(p50), median(p99), median(mx)
				if lag.n > 0 {
					s.SendLagP99 = us(lag.quantile(0.99))
					s.SentP99us = us(sent.quantile(0.99))
				}
				if allowed+denied > 0 {
					s.DeniedPct = 100 * float64(denied) / float64(allowed+denied)
				}
				s.ServerCores, s.ClientCores, s.OtherCores, s.StealCores = median(srv), median(cli), median(oth), median(st)
				s.CPUPerOpUs = median(perOp)
				if kind == kindLimitkv {
					row.Limitkv = s
				} else {
					row.Redis = s
				}
			}
			if row.Limitkv == nil || row.Redis == nil {
				continue
			}
			if row.Redis.OpsPerSec > 0 {
				row.Ratio = row.Limitkv.OpsPerSec / row.Redis.OpsPerSec
			}
			if row.Redis.CPUPerOpUs > 0 {
				row.CPURatio = row.Limitkv.CPUPerOpUs / row.Redis.CPUPerOpUs
			}
			row.P99Ratio = div(row.Limitkv.MedianP99us, row.Redis.MedianP99us)
			row.MaxRatio = div(row.Limitkv.MedianMaxUs, row.Redis.MedianMaxUs)
			rows = append(rows, row)
		}
	}
	return rows
}

type targetResult struct {
	Name   string `json:"name"`
	Want   string `json:"want"`
	Got    string `json:"got"`
	Status string `json:"status"` // PASS, FAIL, INVALID (error replies), NOT MEASURED
}

func status(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

func evaluateTargets(r *results) []targetResult {
	var out []targetResult
	row := func(w string, d int) *rowSummary {
		for i := range r.Throughput {
			if r.Throughput[i].Workload == w && r.Throughput[i].Depth == d {
				return &r.Throughput[i]
			}
		}
		return nil
	}
	ratio := func(name, w string, d int, want float64) {
		t := targetResult{Name: name, Want: fmt.Sprintf("≥ %.1fx Redis", want), Status: "NOT MEASURED"}
		if x := row(w, d); x != nil {
			t.Got = fmt.Sprintf("%.2fx (%s vs %s ops/s)", x.Ratio, commas(x.Limitkv.OpsPerSec), commas(x.Redis.OpsPerSec))
			t.Status = status(x.Ratio >= want)
			if x.Limitkv.Errors+x.Redis.Errors > 0 {
				t.Status = "INVALID"
			}
		}
		out = append(out, t)
	}
	ratio("RL.SLIDE vs Lua sliding window, unpipelined", "slide", 1, 2)
	ratio("RL.SLIDE vs Lua sliding window, pipeline 16", "slide", 16, 8)
	ratio("RL.FIXED vs Lua fixed window, unpipelined", "fixed", 1, 1.3)
	ratio("RL.FIXED vs Lua fixed window, pipeline 16", "fixed", 16, 3)
	for _, w := range []string{"get", "set", "incr"} {
		for _, d := range []int{1, 16} {
			ratio(fmt.Sprintf("%s, depth %d", strings.ToUpper(w), d), w, d, 0.9)
		}
	}
	out = append(out, rbTargets(r.RB)...)
	// The latency target: judged at a fixed rate (open loop), where the
	// latency is the server's; at saturation (closed loop) it is mostly
	// the queue of 50 connections on 2 shared cores, shown for reference.
	pacedRow := func(w string) *rowSummary {
		for i := range r.Paced {
			if r.Paced[i].Workload == w && r.Paced[i].Depth == 1 {
				return &r.Paced[i]
			}
		}
		return nil
	}
	for _, w := range []struct{ id, cmd string }{{"slide", "RL.SLIDE"}, {"fixed", "RL.FIXED"}, {"login", "RL.LOGIN"}} {
		name := fmt.Sprintf("%s p99 latency, unpipelined, %d connections", w.cmd, r.Meta.Conns)
		if r.Meta.PacedRate > 0 {
			t := targetResult{Name: name + ", " + commas(r.Meta.PacedRate) + " req/s", Want: "< 1 ms", Status: "NOT MEASURED"}
			if x := pacedRow(w.id); x != nil {
				t.Got = fmt.Sprintf("%.0f µs at %s req/s achieved, client send lag p99 %.0f µs (Redis's Lua script: %.0f µs at %s req/s, send lag p99 %.0f µs)",
					x.Limitkv.P99us, commas(x.Limitkv.OpsPerSec), x.Limitkv.SendLagP99, x.Redis.P99us, commas(x.Redis.OpsPerSec), x.Redis.SendLagP99)
				t.Status = status(x.Limitkv.P99us < 1000)
				if x.Limitkv.Errors > 0 {
					t.Status = "INVALID"
				}
			}
			out = append(out, t)
		}
		t := targetResult{Name: name + ", at saturation", Want: "< 1 ms", Status: "NOT MEASURED"}
		if x := row(w.id, 1); x != nil {
			t.Got = fmt.Sprintf("%.0f µs at %s ops/s (Redis's Lua script: %.0f µs at %s ops/s)",
				x.Limitkv.P99us, commas(x.Limitkv.OpsPerSec), x.Redis.P99us, commas(x.Redis.OpsPerSec))
			t.Status = status(x.Limitkv.P99us < 1000)
			if x.Limitkv.Errors > 0 {
				t.Status = "INVALID"
			}
		}
		out = append(out, t)
	}
	mem := func(shape string) *memResult {
		for i := range r.Memory {
			if r.Memory[i].Shape == shape {
				return &r.Memory[i]
			}
		}
		return nil
	}
	t := targetResult{Name: "fixed-window key, with its name and expiry (used_memory growth)", Want: "≤ 64 B", Status: "NOT MEASURED"}
	if m := mem("fixed"); m != nil {
		t.Got = fmt.Sprintf("%.1f B (RSS growth %.1f B)", m.Limitkv.UsedPerKey, m.Limitkv.RSSPerKey)
		t.Status = status(m.Limitkv.UsedPerKey <= 64)
	}
	out = append(out, t)
	memRatio := func(name, shape string, want float64, wantText string) {
		t := targetResult{Name: name, Want: wantText, Status: "NOT MEASURED"}
		if m := mem(shape); m != nil && m.Redis.UsedPerKey > 0 {
			x := m.Limitkv.UsedPerKey / m.Redis.UsedPerKey
			t.Got = fmt.Sprintf("%.2f (%.0f B vs %.0f B; RSS %.0f B vs %.0f B)", x, m.Limitkv.UsedPerKey, m.Redis.UsedPerKey, m.Limitkv.RSSPerKey, m.Redis.RSSPerKey)
			t.Status = status(x <= want)
		}
		out = append(out, t)
	}
	memRatio("full 100-request sliding window vs Redis's zset (used_memory)", "slide", 0.2, "≤ 1/5 of Redis")
	memRatio("5-entry login list vs Redis's list (used_memory)", "login", 0.5, "≤ 1/2 of Redis")
	// The snapshot target: judged at the fixed rate too, with the
	// saturating numbers for reference.
	snap := func(name, label string, ld *snapshotLoad) {
		t := targetResult{Name: name + " p99 latency while a snapshot of the dirty keys runs, " + label, Want: "< 2 ms", Status: "NOT MEASURED"}
		if ld != nil && ld.During[name] != nil {
			l := ld.During[name]
			t.Got = fmt.Sprintf("%.0f µs over %s requests at %s req/s (without snapshot %.0f µs)", l.P99us, commas(float64(l.Samples)), commas(l.OpsPerSec), ld.Baseline[name].P99us)
			if ld.Rate > 0 {
				t.Got += fmt.Sprintf("; client send lag p99 %.0f µs", l.SendLagP99us)
			}
			t.Status = status(l.P99us < 2000)
			if l.Errors > 0 {
				t.Status = "INVALID"
			}
		}
		out = append(out, t)
	}
	for _, name := range []string{snapGet, snapSlide} {
		if rate := r.Meta.PacedRate; rate > 0 {
			var ld *snapshotLoad
			if r.Snapshot != nil && r.Snapshot.Paced != nil {
				ld = r.Snapshot.Paced
			}
			snap(name, fmt.Sprintf("%d connections, %s req/s over GET and RL.SLIDE", r.Meta.Conns, commas(rate)), ld)
		}
		var ld *snapshotLoad
		if r.Snapshot != nil {
			ld = &r.Snapshot.snapshotLoad
		}
		snap(name, fmt.Sprintf("%d connections, at saturation", r.Meta.Conns), ld)
	}
	if r.Meta.PacedRate > 0 {
		out = append(out, periodicTarget(r.Periodic, r.Meta.Conns, r.Meta.PacedRate))
	}
	return out
}

// offeredLoad names how a run loaded the server.
func offeredLoad(rate float64) string {
	if rate > 0 {
		return commas(rate) + " req/s"
	}
	return "at saturation"
}

// commas formats a count with thousands separators.
func commas(v float64) string {
	n := int64(math.Round(v))
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func latencyCell(s *serverSummary) string {
	return fmt.Sprintf("%.0f / %.0f / %.0f", s.P50us, s.P99us, s.P999us)
}

// tailCell is a server's medians over the rounds, as the saturation
// table compares them.
func tailCell(s *serverSummary) string {
	return fmt.Sprintf("%.0f / %.0f / %.0f", s.MedianP50us, s.MedianP99us, s.MedianMaxUs)
}

func opsCell(s *serverSummary) string {
	c := commas(s.OpsPerSec)
	if s.Errors > 0 {
		c += fmt.Sprintf(" **INVALID: %d error replies**", s.Errors)
	}
	return c
}

// resultsReport is the page of the full run (results.md), or of one of
// its scenarios run alone (name.md): the sections of what was measured.
func resultsReport(name, title string, r *results) *report {
	m := r.Meta
	rep := newReport(name, title, m, "")
	rep.data = r
	if name == "results" || len(r.Throughput) > 0 || len(r.Memory) > 0 || r.RB != nil {
		rep.svg = chart(r)
	}
	b := &rep.body
	p := rep.p
	p("- Servers: %s; %s, commit %s, built with %s. Redis runs with `--save '' --appendonly no`, limitkv with `--persistence no` (both memory-only) except in the snapshot scenario.", m.RedisVersion, m.LimitkvVersion, m.Commit, m.GoVersion)
	p("- Client: the Go load generator in `cmd/limitkv-bench`, on the same machine: %d connections, keys of %s users drawn uniformly per request, %s warmup then %s measured per run, %d round(s), servers alternating (the first server of a pair flips from one round to the next).",
		m.Conns, commas(float64(m.Users)), m.Warmup, m.Duration, m.Rounds)
	if r.RB != nil {
		p("- Second client: %s, on the same machine, for the throughput of GET, SET, INCR, RL.SLIDE and RL.FIXED (see [its section](#throughput-and-cpu-per-request-with-redis-benchmark)).", r.RB.Version)
	}
	if m.PacedRate > 0 {
		p("- Two kinds of load. *At saturation* (closed loop): each connection sends its next request as soon as the previous reply arrives; this finds the throughput, and its latency is mostly queueing (%d connections, client and server sharing %d cores). *At a fixed rate* (open loop, %s requests/s over the %d connections, below both servers' capacity): each connection sends on a fixed schedule, evenly staggered with the others, and a request's latency runs from its send plus the time it waited for a late previous reply, so a stall of the server is counted for every request it delays (no coordinated omission) while the client's own late wake-ups are not. The latency targets are judged at the fixed rate.",
			m.Conns, m.Cores, commas(m.PacedRate), m.Conns)
	}
	if m.QuietWait != "" {
		p("- Shared machine: before each run the benchmark waited (up to %s) for a second with under %.2f cores busy, and measured a run again (at most twice) when other processes took more than %.2f cores during its window. %d run(s) were set aside that way; they are listed in results.json (`runs_set_aside`).",
			m.QuietWait, m.QuietCores, m.QuietCores, len(r.SetAside))
	}
	p("")
	if rep.svg != "" {
		p("![throughput and memory per key](%s.svg)", name)
		p("")
	}

	p("## Targets")
	p("")
	p("| target | wanted | measured | |")
	p("|---|---|---|---|")
	for _, t := range r.Targets {
		p("| %s | %s | %s | **%s** |", t.Name, t.Want, orDash(t.Got), t.Status)
	}
	p("")

	if len(r.Throughput) > 0 {
		p("## Throughput and latency at saturation")
		p("")
		p("With the Go load generator. Closed loop: every connection sends its next request (or batch) as soon as the previous one is answered. Throughput: the median over the rounds of operations completed in the measured window / window. Server CPU per operation: the server's utime+stime (`/proc/<pid>/stat`) during the window / the operations answered in it, median over the rounds; on 2 cores the client takes about one, so throughput is capped by the client for both servers and CPU per operation is what tells them apart. Latency (µs) **per request at depth 1, per batch of 16 at depth 16** (the time to send the batch and read all its replies): p50, p99 and max are medians over the rounds of each run's own, p99.9 is over every round's operations together. The bitmap operation is the `SETBIT` + `BITCOUNT` pair, sent together.")
		p("")
		p("| workload | depth (latency of) | limitkv ops/s | Redis ops/s | limitkv / Redis | server CPU µs/op limitkv / Redis | CPU limitkv / Redis | limitkv p50 / p99 / max µs | Redis p50 / p99 / max µs | p99 limitkv / Redis | max limitkv / Redis | p99.9 µs limitkv / Redis |")
		p("|---|---|---:|---:|---:|---:|---:|---|---|---:|---:|---|")
		for _, row := range r.Throughput {
			unit := "request"
			if row.Depth > 1 {
				unit = fmt.Sprintf("batch of %d", row.Depth)
			}
			p("| %s | %d (%s) | %s | %s | **%.2fx** | %.2f / %.2f | **%.2fx** | %s | %s | **%.2fx** | **%.2fx** | %.0f / %.0f |", row.Name, row.Depth, unit, opsCell(row.Limitkv), opsCell(row.Redis),
				row.Ratio, row.Limitkv.CPUPerOpUs, row.Redis.CPUPerOpUs, row.CPURatio, tailCell(row.Limitkv), tailCell(row.Redis),
				row.P99Ratio, row.MaxRatio, row.Limitkv.P999us, row.Redis.P999us)
		}
		p("")
		p("What each workload sends (`<n>` is the user, `<id>` a request id unique in the run, `<day>` a random day of ten years):")
		p("")
		p("| workload | limitkv | Redis |")
		p("|---|---|---|")
		seen := map[string]bool{}
		for _, row := range r.Throughput {
			if seen[row.Workload] {
				continue
			}
			seen[row.Workload] = true
			p("| %s | `%s` | `%s` |", row.Name, row.Limitkv.Command, row.Redis.Command)
		}
		p("")
		p("### Conditions of the runs")
		p("")
		p("Medians over the rounds, in cores busy during the measured window (2 = the whole machine): the server, the load generator, everything else on the machine (other users' processes; the idle server of the pair), and time stolen by the hypervisor. Busy rounds are those in which everything else took more than %.2f cores: their numbers are lower than the machine gives. Spread is (max − min) / median of the rounds' throughputs. Denied is the share of decisions refused.", m.QuietCores)
		p("")
		p("| workload | depth | server | busy rounds | spread | denied | server CPU | server CPU µs/op | client CPU | other CPU | steal |")
		p("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, row := range r.Throughput {
			for _, s := range []*serverSummary{row.Limitkv, row.Redis} {
				denied := "–"
				if row.Decision {
					denied = fmt.Sprintf("%.1f%%", s.DeniedPct)
				}
				p("| %s | %d | %s | %d of %d | %.1f%% | %s | %.2f | %.2f | %.2f | %.2f | %.2f |", row.Workload, row.Depth, s.Server, s.BusyRuns, len(s.PerRound), 100*s.Spread, denied,
					s.ServerCores, s.CPUPerOpUs, s.ClientCores, s.OtherCores, s.StealCores)
			}
		}
		p("")
	}

	if r.RB != nil {
		rbMarkdown(b, r)
	}

	if len(r.Paced) > 0 {
		p("## Latency at a fixed rate")
		p("")
		p("Open loop, unpipelined: the %d connections together send %s requests/s, each on a fixed schedule (every %s, offset by its share of that interval from the others), on a fresh pair of servers, alternating, %d round(s) of %s warmup + %s measured. A request is timed from its send to its reply, plus its backlog: when the previous reply comes after a request's intended send time, the request is sent at once (never two to catch up) and the wait from its intended time to that reply counts, so a stall shows in every request that should have gone during it (no coordinated omission). The client's own lateness is left out: Go's `time.Sleep` can wake up to 1 ms late when the client is idle, and the client's goroutines wait for a core the server is using. The requests measured are those due in the window, whenever their replies come. Achieved rate: the median over the rounds of requests completed / window; below the requested rate, the server (or the client) did not keep up. Latency percentiles (µs) over every round's requests; CPU in cores, medians over the rounds. For diagnosis: *send lag*, the p99 of how late requests left the client after their intended time (backlog and the client's lateness together), and *from the send*, the p99 without the backlog.",
			m.Conns, commas(m.PacedRate), time.Duration(float64(time.Second)*float64(m.Conns)/m.PacedRate).Round(time.Microsecond), m.Rounds, m.Warmup, m.Duration)
		p("")
		p("| workload | server | command | requested req/s | achieved req/s | p50 / p99 / p99.9 µs | max µs | send lag p99 µs | p99 from the send µs | server CPU | server CPU µs/req | client CPU | other CPU | busy rounds | denied |")
		p("|---|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, row := range r.Paced {
			for _, s := range []*serverSummary{row.Limitkv, row.Redis} {
				p("| %s | %s | `%s` | %s | %s | **%s** | %.0f | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f | %d of %d | %.1f%% |", row.Name, s.Server, s.Command, commas(row.Rate), opsCell(s),
					latencyCell(s), s.MaxUs, s.SendLagP99, s.SentP99us, s.ServerCores, s.CPUPerOpUs, s.ClientCores, s.OtherCores, s.BusyRuns, len(s.PerRound), s.DeniedPct)
			}
		}
		p("")
	}

	if len(r.Memory) > 0 {
		p("## Memory per key")
		p("")
		p("Growth of a fresh server's memory while N keys of the shape are loaded, divided by N: INFO `used_memory` (Redis: what jemalloc holds for live data; limitkv: its own count of what it holds, the figure `maxmemory` limits, without the arena's free space or garbage) and the process's RSS from `/proc/<pid>/statm`. Both servers get `MEMORY PURGE` before each reading: on limitkv it runs Go's garbage collector, so garbage is not counted; on Redis it returns jemalloc's dirty pages. Every shape is checked on a loaded key before the reading (last column).")
		p("")
		p("| key shape | N | limitkv used_memory | Redis used_memory | limitkv / Redis | limitkv RSS | Redis RSS | limitkv / Redis (RSS) |")
		p("|---|---:|---:|---:|---:|---:|---:|---:|")
		for _, x := range r.Memory {
			n := commas(float64(x.Keys))
			if x.Unit == "entry" {
				n += " entries of 1 key"
			}
			p("| %s | %s | %.1f B | %.1f B | %.2f | %.1f B | %.1f B | %.2f |", x.Name, n,
				x.Limitkv.UsedPerKey, x.Redis.UsedPerKey, div(x.Limitkv.UsedPerKey, x.Redis.UsedPerKey),
				x.Limitkv.RSSPerKey, x.Redis.RSSPerKey, div(x.Limitkv.RSSPerKey, x.Redis.RSSPerKey))
		}
		p("")
		p("How each shape is loaded, the check made on a loaded key, and the server's own estimate for that key (`MEMORY USAGE user:0`, a per-key estimate that does not see memory the allocator keeps around the key: free blocks, fragmentation, table slack):")
		p("")
		p("| key shape | limitkv loads with | check | MEMORY USAGE | Redis loads with | check | MEMORY USAGE |")
		p("|---|---|---|---:|---|---|---:|")
		for _, x := range r.Memory {
			usage := func(m memReading) string {
				if x.Unit == "entry" {
					return fmt.Sprintf("%d B (%.1f B per entry)", m.KeyUsage, m.KeyUsagePer)
				}
				return fmt.Sprintf("%d B", m.KeyUsage)
			}
			p("| %s | `%s` | %s | %s | `%s` | %s | %s |", x.Name, x.Limitkv.Command, x.Limitkv.Verified, usage(x.Limitkv),
				x.Redis.Command, x.Redis.Verified, usage(x.Redis))
		}
		p("")
		if slices.ContainsFunc(r.Memory, func(m memResult) bool { return m.Unit == "entry" }) {
			p("The stream shape is one key filled with N entries (automatic IDs, one field each): its figures are per entry, and its MEMORY USAGE is of the whole stream with `SAMPLES 0`, every node counted (Redis's default samples five nodes and extrapolates).")
			p("")
		}
		p("The sliding-window shape uses N/10 keys: its 100 passes must end within the 60 s window, and 100 script calls on 100k keys would take Redis minutes. The passes are at least 2 ms apart, so a key's 100 requests fall in 100 different milliseconds (limitkv keeps one log entry per millisecond).")
		p("")
	}
	if len(r.BigKeys) > 0 {
		p("### Large keyspaces")
		p("")
		p("Fixed-window keys loaded by pipelined commands (4 connections, 512 deep) into one fresh server; RSS and used_memory after `MEMORY PURGE`; per key = growth from the empty server / keys.")
		p("")
		p("| server | loads with | keys | RSS | RSS per key | used_memory | used_memory per key | load time |")
		p("|---|---|---:|---:|---:|---:|---:|---:|")
		for _, x := range r.BigKeys {
			for _, pt := range x.Points {
				p("| %s | `%s` | %s | %s | %.1f B | %s | %.1f B | %.1f s |", x.Server, x.Command, commas(float64(pt.Keys)), mib(pt.RSS), pt.RSSPerKey,
					mib(pt.Used), pt.UsedPerKey, pt.LoadSeconds)
			}
		}
		p("")
	}
	if s := r.Snapshot; s != nil {
		loads := []*snapshotLoad{&s.snapshotLoad}
		paced := ""
		if s.Paced != nil {
			loads = []*snapshotLoad{s.Paced, &s.snapshotLoad}
			paced = fmt.Sprintf(" The traffic comes two ways, each with its own baseline and snapshots: at a fixed rate of %s requests/s over the %d connections (open loop, timed with the backlog, as above; GET and RL.SLIDE get half each), on which the target is judged, and at saturation (closed loop). The kind of traffic that goes first flips from one round to the next. The window during a snapshot is only as long as the snapshot: the table gives the requests it holds.",
				commas(s.Paced.Rate), s.Conns)
		}
		p("## Latency during a snapshot")
		p("")
		p("limitkv with persistence on (`--snapshot-interval 1h`: only forced snapshots), %s keys `SET key:<i> <32 bytes>` all changed since the last snapshot, and traffic at depth 1 from %d connections: half send `GET key:<random of the %s>`, half `RL.SLIDE slide:<random of %s> 100 60s`. The baseline measures the same traffic for %s without a snapshot; then a `BGSAVE` is sent and the latency of the requests completed (at a fixed rate: due) until INFO shows the snapshot finished is recorded, %d time(s), every key made dirty again before each.%s",
			commas(float64(s.Keys)), s.Conns, commas(float64(s.Keys)), commas(float64(s.Users)), m.Duration, len(s.Rounds), paced)
		p("")
		p("| | traffic | GET requests | GET req/s | GET p50 / p99 / p99.9 / max µs | RL.SLIDE requests | RL.SLIDE req/s | RL.SLIDE p50 / p99 / p99.9 / max µs | send lag p99 µs (GET, RL.SLIDE) | p99 from the send µs (GET, RL.SLIDE) |")
		p("|---|---|---:|---:|---|---:|---:|---|---|---|")
		for _, ld := range loads {
			for _, x := range []struct {
				name string
				m    map[string]*latencyStats
			}{{"without snapshot", ld.Baseline}, {"during the snapshot", ld.During}} {
				g, sl := x.m[snapGet], x.m[snapSlide]
				lag, sent := "–", "–"
				if ld.Rate > 0 {
					lag = fmt.Sprintf("%.0f, %.0f", g.SendLagP99us, sl.SendLagP99us)
					sent = fmt.Sprintf("%.0f, %.0f", g.SentP99us, sl.SentP99us)
				}
				p("| %s | %s | %s | %s | %.0f / %.0f / %.0f / %.0f | %s | %s | %.0f / %.0f / %.0f / %.0f | %s | %s |", x.name, offeredLoad(ld.Rate),
					commas(float64(g.Samples)), commas(g.OpsPerSec), g.P50us, g.P99us, g.P999us, g.MaxUs,
					commas(float64(sl.Samples)), commas(sl.OpsPerSec), sl.P50us, sl.P99us, sl.P999us, sl.MaxUs, lag, sent)
			}
		}
		p("")
		p("Requests: those measured (at a fixed rate, those due in the window, answered during it or after); req/s: those answered in the window, per second.")
		for _, ld := range loads {
			for _, name := range []string{snapGet, snapSlide} {
				if n := ld.During[name].Samples; n < 1000 {
					p("")
					p("**%s during the snapshot (%s): only %d requests; their p99 rests on the %d slowest, a rough figure.** More rounds (`-rounds`) or keys (`-snapshot-keys`) give more.", name, offeredLoad(ld.Rate), n, n-uint64(math.Ceil(0.99*float64(n)))+1)
				}
			}
		}
		p("")
		p("| snapshot | traffic | keys written (INFO snapshot_last_keys) | bytes | duration (INFO snapshot_last_duration_ms) | traffic measured over | limitkv CPU | client CPU | other CPU |")
		p("|---|---|---:|---:|---:|---:|---:|---:|---:|")
		for _, ld := range loads {
			for i, x := range ld.Rounds {
				c := ld.CPU[i]
				p("| %d | %s | %s | %s | %.0f ms | %.0f ms | %.2f | %.2f | %.2f |", i+1, offeredLoad(ld.Rate), commas(float64(x.SnapshotKeys)), mib(x.SnapshotBytes), x.SnapshotMs, x.WindowMs, c.Server, c.Client, c.Other)
			}
		}
		p("")
		p("Loading the %s keys took %.1f s.", commas(float64(s.Keys)), s.LoadSec)
		for _, ld := range loads {
			p("CPU during the baseline %s: limitkv %.2f, client %.2f, other %.2f cores.", offeredLoad(ld.Rate),
				ld.BaselineCPU.Server, ld.BaselineCPU.Client, ld.BaselineCPU.Other)
		}
		p("")
	}
	if r.Periodic != nil {
		periodicMarkdown(b, r.Periodic)
	}
	if len(r.Runs)+len(r.PacedRuns) > 0 {
		p("## Every run")
		p("")
		p("A run marked *busy* had other processes take more than %.2f cores during its window. Load: at saturation (closed loop) or the requests/s asked for (open loop; ops/s is then the achieved rate).", m.QuietCores)
		p("")
		p("| round | workload | depth | server | load | ops/s | p50 µs | p99 µs | p99.9 µs | max µs | errors | denied | server CPU | server CPU µs/op | client CPU | other CPU | load (1 min) |")
		p("|---:|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, x := range append(slices.Clone(r.Runs), r.PacedRuns...) {
			other := m.otherCores(x.CPU.Other)
			denied := "–"
			if x.Allowed+x.Denied > 0 {
				denied = fmt.Sprintf("%.1f%%", 100*float64(x.Denied)/float64(x.Allowed+x.Denied))
			}
			p("| %d | %s | %d | %s | %s | %s | %.0f | %.0f | %.0f | %.0f | %d | %s | %.2f | %.2f | %.2f | %s | %.2f |", x.Round, x.Workload, x.Depth, x.Server,
				offeredLoad(x.Rate), commas(x.OpsPerSec), x.P50us, x.P99us, x.P999us, x.MaxUs, x.Errors, denied, x.CPU.Server, x.CPUPerOpUs, x.CPU.Client, other, x.Load1)
		}
		p("")
	}
	p("## The Lua scripts run on Redis")
	p("")
	for _, name := range []string{"slide", "fixed", "login", "lease"} {
		p("`%s.lua` (SHA1 %s):", name, scriptSHA(scripts[name]))
		p("")
		p("```lua")
		b.WriteString(scripts[name])
		p("```")
		p("")
	}
	return rep
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func div(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
