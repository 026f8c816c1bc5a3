package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/limitkv/limitkv/resp"
)

// The redis-benchmark load generator (-loadgen redis-benchmark or both):
// the throughput runs again, with Redis's own client driving both servers,
// so that no figure rests on our generator alone. Each run is one
// redis-benchmark process,
//
//	redis-benchmark -h 127.0.0.1 -p PORT -c 50 -r 100000 -n N -P depth -q --csv CMD ARGS...
//
// with the keys drawn from -users by __rand_int__. Its throughput is
// redis-benchmark's own requests per second; the server's CPU per request
// is its utime+stime from /proc/PID/stat, after the process minus before,
// over the N requests. On 2 cores the client takes one, and both servers
// hit the same client-bound ceiling: CPU per request is the figure that
// still tells them apart.

// rbRand is what redis-benchmark replaces by a random number of 12 digits
// below -r.
const rbRand = "__rand_int__"

// rbWorkload is a row of the redis-benchmark runs: one command line per
// server, the same as the Go generator's workload of the same id.
type rbWorkload struct {
	id      string // the Go workload it mirrors, whose reply check it uses
	name    string
	limitkv []string
	redis   []string
}

func (w *rbWorkload) argsFor(kind string) []string {
	if kind == kindLimitkv {
		return w.limitkv
	}
	return w.redis
}

// rbWorkloads are the rate limits with one rule (natively on limitkv, the
// Lua scripts on Redis) and GET, SET, INCR on both. Redis's INCR is also
// the reference of the rate limits' CPU per request: a decision should
// cost what a counter does. The counters have their own prefix: INCR on
// the GET keys' 32-byte values would be an error.
//
// The sliding-window script takes a request id to make its zset members
// unique; redis-benchmark can only give a random number below -r, so two
// requests on one key in one µs of TIME collide with probability 1/-r,
// a negligible help to Redis.
func rbWorkloads() []*rbWorkload {
	return []*rbWorkload{
		{
			id: "slide", name: "sliding window 100/60s",
			limitkv: []string{"RL.SLIDE", "slide:" + rbRand, "100", "60s"},
			redis:   []string{"EVALSHA", scriptSHA(slideLua), "1", "slide:" + rbRand, "100", "60000", rbRand},
		},
		{
			id: "fixed", name: "fixed window 100/60s",
			limitkv: []string{"RL.FIXED", "fixed:" + rbRand, "100", "60s"},
			redis:   []string{"EVALSHA", scriptSHA(fixedLua), "1", "fixed:" + rbRand, "100", "60000"},
		},
		{
			id: "get", name: "GET (32-byte values)",
			limitkv: []string{"GET", "key:" + rbRand},
			redis:   []string{"GET", "key:" + rbRand},
		},
		{
			id: "set", name: "SET (32-byte values)",
			limitkv: []string{"SET", "key:" + rbRand, value32},
			redis:   []string{"SET", "key:" + rbRand, value32},
		},
		{
			id: "incr", name: "INCR",
			limitkv: []string{"INCR", "counter:" + rbRand},
			redis:   []string{"INCR", "counter:" + rbRand},
		},
	}
}

// rbCommandText renders a command line as the report shows it: the
// script's digest is long and says nothing.
func rbCommandText(args []string) string {
	if len(args) > 1 && args[0] == "EVALSHA" {
		for name, src := range scripts {
			if scriptSHA(src) == args[1] {
				return strings.Join(append([]string{"EVALSHA", "<" + name + ".lua sha>"}, args[2:]...), " ")
			}
		}
	}
	return strings.Join(args, " ")
}

// rbOutput is what redis-benchmark --csv printed for one test.
type rbOutput struct {
	title                                    string
	rps                                      float64
	avgMs, minMs, p50Ms, p95Ms, p99Ms, maxMs float64
}

var rbColumns = []string{"rps", "avg_latency_ms", "min_latency_ms", "p50_latency_ms", "p95_latency_ms", "p99_latency_ms", "max_latency_ms"}

// parseRBCSV reads redis-benchmark's --csv output: a header line, then
// one line per test, every field in double quotes. The test's title is a
// custom command's words joined by spaces, written without escaping, so
// it may hold commas and quotes: the numbers are read from the right.
// Lines before the header (warnings) are skipped.
func parseRBCSV(out []byte) (rbOutput, error) {
	var res rbOutput
	var header []string
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimRight(line, "\r")
		if !strings.HasPrefix(line, `"`) || !strings.HasSuffix(line, `"`) || len(line) < 2 {
			continue
		}
		fields := strings.Split(line[1:len(line)-1], `","`)
		if header == nil {
			if fields[0] == "test" {
				header = fields
			}
			continue
		}
		if len(fields) < len(header) {
			return res, fmt.Errorf("redis-benchmark CSV line %q has %d fields, the header %d", line, len(fields), len(header))
		}
		// The title takes whatever fields the header's numbers leave.
		nums := fields[len(fields)-(len(header)-1):]
		res.title = strings.Join(fields[:len(fields)-len(nums)], `","`)
		dest := map[string]*float64{
			"rps": &res.rps, "avg_latency_ms": &res.avgMs, "min_latency_ms": &res.minMs, "p50_latency_ms": &res.p50Ms,
			"p95_latency_ms": &res.p95Ms, "p99_latency_ms": &res.p99Ms, "max_latency_ms": &res.maxMs,
		}
		for i, name := range header[1:] {
			p := dest[name]
			if p == nil {
				continue // a column a later redis-benchmark adds
			}
			v, err := strconv.ParseFloat(nums[i], 64)
			if err != nil {
				return res, fmt.Errorf("redis-benchmark CSV: %s is %q, not a number", name, nums[i])
			}
			*p = v
			delete(dest, name)
		}
		if len(dest) > 0 {
			var missing []string
			for _, c := range rbColumns {
				if dest[c] != nil {
					missing = append(missing, c)
				}
			}
			return res, fmt.Errorf("redis-benchmark CSV has no %s column", strings.Join(missing, ", "))
		}
		if res.rps <= 0 {
			return res, fmt.Errorf("redis-benchmark reported %v requests per second", res.rps)
		}
		return res, nil
	}
	if header == nil {
		return res, errors.New("no CSV header in redis-benchmark's output")
	}
	return res, errors.New("no result line after the CSV header in redis-benchmark's output")
}

// rbServerError returns the first error reply redis-benchmark reported
// ("Error from server: ..."); redis-benchmark 7 stops at the first one.
func rbServerError(out ...[]byte) string {
	for _, o := range out {
		for _, line := range strings.Split(string(o), "\n") {
			if _, msg, ok := strings.Cut(line, "Error from server: "); ok {
				return strings.TrimSpace(msg)
			}
		}
	}
	return ""
}

// rbRun is one redis-benchmark process: one workload, one server, one
// depth.
type rbRun struct {
	Round     int     `json:"round"`
	Workload  string  `json:"workload"`
	Server    string  `json:"server"`
	Depth     int     `json:"depth"`
	Requests  int64   `json:"requests"`
	Seconds   float64 `json:"seconds"`     // the redis-benchmark process's wall time
	OpsPerSec float64 `json:"ops_per_sec"` // redis-benchmark's requests per second
	AvgMs     float64 `json:"avg_latency_ms"`
	P50Ms     float64 `json:"p50_latency_ms"`
	P95Ms     float64 `json:"p95_latency_ms"`
	P99Ms     float64 `json:"p99_latency_ms"`
	MaxMs     float64 `json:"max_latency_ms"`
	// The server's utime+stime over the process's life, and per request.
	ServerCPUSec float64 `json:"server_cpu_seconds"`
	CPUPerReqUs  float64 `json:"server_cpu_us_per_request"`
	CPU          cpuUse  `json:"cpu"` // client: the redis-benchmark process
	Load1        float64 `json:"load_average_1m_before"`
}

type rbSummary struct {
	Server      string    `json:"server"`
	Command     string    `json:"command"`
	Requests    int64     `json:"requests_per_run"`
	OpsPerSec   float64   `json:"median_ops_per_sec"`
	PerRound    []float64 `json:"ops_per_sec_per_round"`
	Spread      float64   `json:"spread"` // (max-min)/median of the rounds' throughputs
	CPUPerReqUs float64   `json:"median_server_cpu_us_per_request"`
	CPUPerRound []float64 `json:"server_cpu_us_per_request_per_round"`
	P50Ms       float64   `json:"median_p50_latency_ms"`
	P99Ms       float64   `json:"median_p99_latency_ms"`
	MaxMs       float64   `json:"median_max_latency_ms"`
	ServerCores float64   `json:"median_server_cores"`
	ClientCores float64   `json:"median_client_cores"`
	OtherCores  float64   `json:"median_other_cores"`
	BusyRuns    int       `json:"busy_runs"`
}

type rbRow struct {
	Workload string     `json:"workload"`
	Name     string     `json:"name"`
	Depth    int        `json:"depth"`
	Limitkv  *rbSummary `json:"limitkv"`
	Redis    *rbSummary `json:"redis"`
	Ratio    float64    `json:"limitkv_over_redis"`                 // throughput
	CPURatio float64    `json:"cpu_per_request_limitkv_over_redis"` // server CPU per request
	// The tail beside the cost: a server cheaper per request may still
	// stall some requests for longer.
	P99Ratio float64 `json:"p99_latency_limitkv_over_redis"`
	MaxRatio float64 `json:"max_latency_limitkv_over_redis"`
	// Rate-limit rows: limitkv's CPU per request over Redis's INCR's at
	// the same depth.
	CPUOverINCR float64 `json:"cpu_per_request_over_redis_incr,omitempty"`
}

type rbResults struct {
	Version  string  `json:"redis_benchmark_version"`
	Command  string  `json:"command"` // the command line, with the parts that vary as words
	Rows     []rbRow `json:"rows"`
	Runs     []rbRun `json:"runs"`
	SetAside []rbRun `json:"runs_set_aside"` // measured while others loaded the machine (-quiet-wait)
}

// findRedisBenchmark resolves redis-benchmark and returns its version;
// optional says -loadgen go does without it.
func findRedisBenchmark(flagValue string, optional bool) (string, string, error) {
	hint := "-redis-benchmark-bin"
	if optional {
		hint += " (or use -loadgen go)"
	}
	return findTool("redis-benchmark", flagValue, hint)
}

// selectedRB returns the redis-benchmark workloads -only selects. The
// rate limits bring INCR along: Redis's INCR is their reference.
func (b *bench) selectedRB() []*rbWorkload {
	var out []*rbWorkload
	all := rbWorkloads()
	want := func(id string) bool { return len(b.cfg.only) == 0 || slices.Contains(b.cfg.only, id) }
	needIncr := want("slide") || want("fixed")
	for _, w := range all {
		if want(w.id) || w.id == "incr" && needIncr {
			out = append(out, w)
		}
	}
	return out
}

// redisBenchmark runs the redis-benchmark throughput runs on a fresh
// pair of servers: every workload at every depth on both servers, for
// -rounds rounds, the first server of a pair flipping like the Go
// generator's runs.
func (b *bench) redisBenchmark(ctx context.Context) error {
	selected := b.selectedRB()
	if len(selected) == 0 {
		b.logf("redis-benchmark: none of the -only workloads has a redis-benchmark run (%s)", strings.Join(rbIDs(), ","))
		b.res.RB = nil
		return nil
	}
	lk, rd, err := b.startPair("rbench")
	if err != nil {
		return err
	}
	defer lk.Stop()
	defer rd.Stop()
	checks := map[string]*workload{}
	for _, w := range workloads() {
		checks[w.id] = w
	}
	for _, s := range []*server{lk, rd} {
		if err := preloadGetKeys(ctx, s, b.cfg.users); err != nil {
			return fmt.Errorf("%s: %v", s.Kind, err)
		}
		for _, w := range selected {
			if err := verifyRB(s, w, checks[w.id], b.cfg.users); err != nil {
				return err
			}
		}
	}
	b.res.RB.Command = fmt.Sprintf("%s -h 127.0.0.1 -p PORT -c %d -r %d -n N -P DEPTH -q --csv COMMAND...", "redis-benchmark", b.cfg.conns, b.cfg.users)
	total := b.cfg.rounds * len(selected) * len(b.cfg.depths) * 2
	b.logf("redis-benchmark: preloaded %d 32-byte values and checked one reply of every command on both servers; %d runs of about %v (each sized by a calibration run and a %v warmup the first time), about %v",
		b.cfg.users, total, b.cfg.duration, b.cfg.warmup,
		(time.Duration(total)*(b.cfg.duration+200*time.Millisecond) + time.Duration(len(selected)*len(b.cfg.depths)*2)*(b.cfg.warmup+300*time.Millisecond)).Round(time.Second))
	requests := map[string]int64{}
	done := 0
	for round := 1; round <= b.cfg.rounds; round++ {
		pair := 0
		for _, w := range selected {
			for _, depth := range b.cfg.depths {
				order := []*server{lk, rd}
				if (round+pair)%2 == 0 {
					order = []*server{rd, lk}
				}
				pair++
				for _, s := range order {
					key := fmt.Sprintf("%s/%s/%d", w.id, s.Kind, depth)
					if requests[key] == 0 {
						n, err := b.rbCalibrate(ctx, s, w, depth)
						if err != nil {
							return fmt.Errorf("%s %s depth %d: calibrating: %v", s.Kind, w.id, depth, err)
						}
						requests[key] = n
					}
					rec, err := b.rbOneRun(ctx, s, w, depth, round, requests[key])
					if err != nil {
						return fmt.Errorf("%s %s depth %d: %v", s.Kind, w.id, depth, err)
					}
					done++
					b.logf("[%d/%d] redis-benchmark round %d %-5s d=%-2d %-7s %9.0f req/s  server CPU %5.2f µs/req  p50 %6.3f p99 %6.3f ms  cpu server %.2f client %.2f other %.2f  load %.2f",
						done, total, round, w.id, depth, s.Kind, rec.OpsPerSec, rec.CPUPerReqUs, rec.P50Ms, rec.P99Ms,
						rec.CPU.Server, rec.CPU.Client, rec.CPU.Other, rec.Load1)
				}
			}
		}
	}
	b.res.RB.Rows = summarizeRB(b.res.RB.Runs, selected, b.cfg.depths, b.cfg.quietCores)
	return nil
}

// preloadGetKeys writes the 32-byte values redis-benchmark's GET reads,
// under the 12-digit names __rand_int__ gives: a GET of a missing key
// would cost less than a real one.
func preloadGetKeys(ctx context.Context, s *server, users int) error {
	l, err := newLoader(s.Addr, 4, 256)
	if err != nil {
		return err
	}
	defer l.close()
	if _, err := l.pass(ctx, op{cmd("SET", padKeyArg("key:"), lit(value32))}, 0, users); err != nil {
		return fmt.Errorf("preloading the GET keys: %v", err)
	}
	return nil
}

func rbIDs() []string {
	var ids []string
	for _, w := range rbWorkloads() {
		ids = append(ids, w.id)
	}
	return ids
}

// rbExpand fills __rand_int__ the way redis-benchmark does, with user.
func rbExpand(args []string, user int) []string {
	out := make([]string, len(args))
	num := string(appendPadded(nil, user))
	for i, a := range args {
		out[i] = strings.ReplaceAll(a, rbRand, num)
	}
	return out
}

// verifyRB sends one command of w, expanded as redis-benchmark would, on
// a connection of its own, and checks the reply with the Go workload's
// check: redis-benchmark does not look at replies other than errors.
func verifyRB(s *server, w *rbWorkload, check *workload, users int) error {
	c, err := dial(s.Addr)
	if err != nil {
		return err
	}
	defer c.close()
	v, err := c.do(rbExpand(w.argsFor(s.Kind), check.checkUser(users))...)
	if err != nil {
		return err
	}
	if err := check.check(s.Kind, []resp.Value{v}); err != nil {
		return fmt.Errorf("redis-benchmark %s %s (%s): %v", s.Kind, w.id, rbCommandText(w.argsFor(s.Kind)), err)
	}
	return nil
}

// rbCalibrate sizes a workload's runs: a short probe gives a rate, a
// warmup of -warmup at that rate gives a better one (and warms the
// server, as the Go generator's warmup does), and the runs get that rate
// times -duration requests.
func (b *bench) rbCalibrate(ctx context.Context, s *server, w *rbWorkload, depth int) (int64, error) {
	floor := int64(b.cfg.conns * depth * 20)
	probe, err := b.rbExec(ctx, s, w.argsFor(s.Kind), depth, floor)
	if err != nil {
		return 0, err
	}
	rate := probe.OpsPerSec
	if b.cfg.warmup > 0 {
		warm, err := b.rbExec(ctx, s, w.argsFor(s.Kind), depth, max(floor, int64(rate*b.cfg.warmup.Seconds())))
		if err != nil {
			return 0, err
		}
		rate = warm.OpsPerSec
	}
	return max(floor, int64(rate*b.cfg.duration.Seconds())), nil
}

// rbOneRun measures one run; with -quiet-wait it waits for quiet first and
// measures again (twice at most) when others took more than -quiet cores.
func (b *bench) rbOneRun(ctx context.Context, s *server, w *rbWorkload, depth, round int, n int64) (rbRun, error) {
	for attempt := 1; ; attempt++ {
		if b.cfg.quietWait > 0 {
			b.waitQuiet(ctx)
		}
		// As in measureRun: the previous run's connections close and the
		// server settles first.
		time.Sleep(100 * time.Millisecond)
		rec, err := b.rbExec(ctx, s, w.argsFor(s.Kind), depth, n)
		if err != nil {
			return rec, err
		}
		rec.Round, rec.Workload = round, w.id
		if b.cfg.quietWait == 0 || rec.CPU.Other <= b.cfg.quietCores || attempt == 3 {
			b.res.RB.Runs = append(b.res.RB.Runs, rec)
			return rec, nil
		}
		b.res.RB.SetAside = append(b.res.RB.SetAside, rec)
		b.logf("        set aside: other processes took %.2f cores during redis-benchmark %s %s d=%d (%.0f req/s); measuring again",
			rec.CPU.Other, s.Kind, w.id, depth, rec.OpsPerSec)
	}
}

// rbExec runs redis-benchmark once: n requests of args at depth, and
// reads the server's CPU time before and after the process.
func (b *bench) rbExec(ctx context.Context, s *server, args []string, depth int, n int64) (rbRun, error) {
	host, port, err := net.SplitHostPort(s.Addr)
	if err != nil {
		return rbRun{}, err
	}
	argv := append([]string{"-h", host, "-p", port, "-c", strconv.Itoa(b.cfg.conns), "-r", strconv.Itoa(b.cfg.users),
		"-n", strconv.FormatInt(n, 10), "-P", strconv.Itoa(depth), "-q", "--csv"}, args...)
	// A server that stops answering must not hang the benchmark; a run is
	// sized for -duration, so this leaves room for a rate far off.
	limit := max(2*time.Minute, 30*(b.cfg.duration+b.cfg.warmup))
	rctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	bin, full := b.rbBin, argv
	if b.rbPin != "" {
		bin, full = b.taskset, append([]string{"-c", b.rbPin, b.rbBin}, argv...)
	}
	cmd := exec.CommandContext(rctx, bin, full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	load1 := loadAvg()[0]
	before := markCPU(s.Pid())
	if err := cmd.Start(); err != nil {
		return rbRun{}, fmt.Errorf("starting %s: %v", b.rbBin, err)
	}
	runErr := cmd.Wait()
	after := markCPU(s.Pid())
	line := "redis-benchmark " + strings.Join(argv, " ")
	if msg := rbServerError(stderr.Bytes(), stdout.Bytes()); msg != "" {
		return rbRun{}, fmt.Errorf("%s: error reply: %s", line, msg)
	}
	if rctx.Err() != nil && ctx.Err() == nil {
		return rbRun{}, fmt.Errorf("%s: still running after %v", line, limit)
	}
	if runErr != nil {
		return rbRun{}, fmt.Errorf("%s: %v\n%s", line, runErr, strings.TrimSpace(stderr.String()))
	}
	out, err := parseRBCSV(stdout.Bytes())
	if err != nil {
		return rbRun{}, fmt.Errorf("%s: %v\n%s", line, err, stdout.String())
	}
	st := cmd.ProcessState
	child := (st.UserTime() + st.SystemTime()).Seconds()
	rec := rbRun{
		Server: s.Kind, Depth: depth, Requests: n, Seconds: after.at.Sub(before.at).Seconds(),
		OpsPerSec: out.rps, AvgMs: out.avgMs, P50Ms: out.p50Ms, P95Ms: out.p95Ms, P99Ms: out.p99Ms, MaxMs: out.maxMs,
		ServerCPUSec: float64(after.server-before.server) / clockTick,
		CPU:          rbCPU(before, after, child), Load1: load1,
	}
	rec.CPUPerReqUs = cpuPerOpUs(rec.ServerCPUSec, n)
	return rec, nil
}

// rbCPU is cpuBetween with the client being a child process, whose CPU
// time comes from its rusage: the benchmark's own (idle) time counts as
// other.
func rbCPU(a, b cpuMark, childSec float64) cpuUse {
	secs := b.at.Sub(a.at).Seconds()
	if secs <= 0 {
		return cpuUse{}
	}
	server := float64(b.server-a.server) / clockTick
	busy := float64(b.busy-a.busy) / clockTick
	return cpuUse{
		Server: server / secs,
		Client: childSec / secs,
		Other:  max(0, busy-server-childSec) / secs,
		Steal:  float64(b.steal-a.steal) / clockTick / secs,
	}
}

func summarizeRB(runs []rbRun, selected []*rbWorkload, depths []int, quietCores float64) []rbRow {
	var rows []rbRow
	incrCPU := map[int]float64{} // Redis INCR's median CPU per request by depth
	for _, w := range selected {
		for _, d := range depths {
			row := rbRow{Workload: w.id, Name: w.name, Depth: d}
			for _, kind := range []string{kindLimitkv, kindRedis} {
				s := &rbSummary{Server: kind, Command: rbCommandText(w.argsFor(kind))}
				var p50, p99, mx, srv, cli, oth []float64
				for _, r := range runs {
					if r.Workload != w.id || r.Depth != d || r.Server != kind {
						continue
					}
					s.Requests = r.Requests
					s.PerRound = append(s.PerRound, r.OpsPerSec)
					s.CPUPerRound = append(s.CPUPerRound, r.CPUPerReqUs)
					p50, p99, mx = append(p50, r.P50Ms), append(p99, r.P99Ms), append(mx, r.MaxMs)
					srv, cli, oth = append(srv, r.CPU.Server), append(cli, r.CPU.Client), append(oth, r.CPU.Other)
					if r.CPU.Other > quietCores {
						s.BusyRuns++
					}
				}
				if len(s.PerRound) == 0 {
					continue
				}
				s.OpsPerSec, s.CPUPerReqUs = median(s.PerRound), median(s.CPUPerRound)
				if s.OpsPerSec > 0 {
					s.Spread = (slices.Max(s.PerRound) - slices.Min(s.PerRound)) / s.OpsPerSec
				}
				s.P50Ms, s.P99Ms, s.MaxMs = median(p50), median(p99), median(mx)
				s.ServerCores, s.ClientCores, s.OtherCores = median(srv), median(cli), median(oth)
				if kind == kindLimitkv {
					row.Limitkv = s
				} else {
					row.Redis = s
				}
			}
			if row.Limitkv == nil || row.Redis == nil {
				continue
			}
			row.Ratio = div(row.Limitkv.OpsPerSec, row.Redis.OpsPerSec)
			row.CPURatio = div(row.Limitkv.CPUPerReqUs, row.Redis.CPUPerReqUs)
			row.P99Ratio = div(row.Limitkv.P99Ms, row.Redis.P99Ms)
			row.MaxRatio = div(row.Limitkv.MaxMs, row.Redis.MaxMs)
			if w.id == "incr" {
				incrCPU[d] = row.Redis.CPUPerReqUs
			}
			rows = append(rows, row)
		}
	}
	for i := range rows {
		if r := &rows[i]; r.Workload == "slide" || r.Workload == "fixed" {
			r.CPUOverINCR = div(r.Limitkv.CPUPerReqUs, incrCPU[r.Depth])
		}
	}
	return rows
}
