// Command limitkv-bench measures limitkv against redis-server on this
// machine: the rate-limit decisions done natively on limitkv and as Lua
// scripts on Redis, plain GET/SET/INCR and bitmaps on both, memory per key,
// and latency while a snapshot runs. It builds limitkv, starts both servers
// on free loopback ports, drives them with the same Go load generator (and,
// with -loadgen redis-benchmark or both, with redis-benchmark: rbench.go),
// alternating servers over several rounds, and writes results.md,
// results.svg and results.json to bench-results/. Every throughput row
// carries the server's CPU time per request, from /proc.
//
// Throughput is measured at saturation (closed loop: every connection
// sends its next request as soon as the previous one is answered), where
// latency is mostly queueing. The latency targets are measured open loop,
// at a fixed offered rate (-paced-rate) below both servers' capacity.
//
//	go run ./cmd/limitkv-bench            # the full run (about 12 minutes)
//	go run ./cmd/limitkv-bench -loadgen both  # with redis-benchmark too (about 18)
//	go run ./cmd/limitkv-bench -quick     # a smoke test (about a minute)
//	go run ./cmd/limitkv-bench -replication   # replication only (about 5 minutes)
//	go run ./cmd/limitkv-bench -periodic      # periodic snapshots only (about 2 minutes)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type config struct {
	duration, warmup time.Duration
	rounds, conns    int
	users            int
	depths           []int
	only             []string
	skipThroughput   bool
	skipMemory       bool
	skipSnapshot     bool
	bigKeys          bool
	memKeys          int
	snapshotKeys     int
	out              string
	limitkvBin       string
	redisBin         string
	quick            bool
	loadgen          string // go, redis-benchmark or both: who drives the throughput runs
	rbBin            string
	cpuProfile       string
	quietWait        time.Duration
	quietCores       float64
	pacedRate        float64 // requests/s of the open-loop latency runs; 0 skips them
	flood            bool    // run the maxmemory flood alone (flood.go)
	floodKeys        int
	floodMaxMemory   string
	floodPolicy      string
	// The periodic-snapshot scenario (periodic.go): in the full run, or
	// alone with -periodic.
	periodic         bool
	skipPeriodic     bool
	periodicDuration time.Duration
	periodicKeys     float64
	// The replication scenario (-replication), run alone.
	replication  bool
	lagRate      float64
	lagDepth     int
	syncKeys     int
	syncRounds   int
	syncLoadRate float64
	failovers    int
	sentinelBin  string
}

type bench struct {
	cfg        config
	tmp        string
	limitkvBin string
	redisBin   string
	rbBin      string
	log        io.Writer
	res        *results
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	cfg, err := parseFlags(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(os.Stderr, "limitkv-bench:", err)
		return 2
	}
	b := &bench{cfg: cfg, log: os.Stderr}
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "limitkv-bench:", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "limitkv-bench:", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Ctrl-C: the servers run in their own process group and do not see
	// it; stop them by pid, clean up, and leave the previous results alone.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		fmt.Fprintf(os.Stderr, "\nlimitkv-bench: %v: stopping the servers\n", sig)
		cancel()
		stopAll()
		if b.tmp != "" {
			os.RemoveAll(b.tmp)
		}
		os.Exit(130)
	}()

	code, err := b.run(ctx)
	if ctx.Err() != nil {
		select {} // interrupted: the signal handler stops the servers and exits
	}
	stopAll()
	if b.tmp != "" {
		os.RemoveAll(b.tmp)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "limitkv-bench:", err)
		return 1
	}
	return code
}

func parseFlags(args []string) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("limitkv-bench", flag.ContinueOnError)
	fs.DurationVar(&cfg.duration, "duration", 5*time.Second, "measured time of each run")
	fs.DurationVar(&cfg.warmup, "warmup", time.Second, "unmeasured load before each run's window")
	fs.IntVar(&cfg.rounds, "rounds", 3, "rounds of every workload on both servers (and snapshots)")
	fs.IntVar(&cfg.conns, "conns", 50, "client connections")
	fs.IntVar(&cfg.users, "users", 100_000, "distinct users (keys) drawn uniformly per request")
	depths := fs.String("depths", "1,16", "pipeline depths, comma separated")
	only := fs.String("only", "", "comma list of workloads to run: "+strings.Join(workloadIDs(), ","))
	fs.BoolVar(&cfg.skipThroughput, "skip-throughput", false, "skip the throughput runs")
	fs.BoolVar(&cfg.skipMemory, "skip-memory", false, "skip the memory-per-key measurements")
	fs.BoolVar(&cfg.skipSnapshot, "skip-snapshot", false, "skip the snapshot-latency scenario")
	fs.BoolVar(&cfg.skipPeriodic, "skip-periodic", false, "skip the periodic-snapshot scenario")
	fs.BoolVar(&cfg.periodic, "periodic", false, "run only the periodic-snapshot scenario (periodic.go; about 2 minutes): RL.SLIDE at -paced-rate on new keys, persistence on (default snapshot-interval) vs off; writes periodic.md and periodic.json")
	fs.DurationVar(&cfg.periodicDuration, "periodic-duration", 10*time.Second, "measured time of each round of the periodic-snapshot scenario (several 1 s snapshots)")
	fs.Float64Var(&cfg.periodicKeys, "periodic-keys", 50_000, "distinct keys changed per second in the periodic-snapshot scenario: the measured requests each change a new key, and one more connection changes the rest (unmeasured)")
	fs.Float64Var(&cfg.pacedRate, "paced-rate", 40_000, "requests/s, over all connections, of the open-loop latency runs (rate limits at depth 1 on both servers, and the snapshot scenario); 0 skips them")
	fs.BoolVar(&cfg.bigKeys, "big-keys", true, "also measure RSS at 1M and 10M fixed-window keys")
	fs.IntVar(&cfg.memKeys, "mem-keys", 100_000, "keys per memory shape (the 100-request sliding window uses a tenth)")
	fs.IntVar(&cfg.snapshotKeys, "snapshot-keys", 1_000_000, "dirty keys the snapshot scenario saves")
	fs.StringVar(&cfg.out, "out", "bench-results", "directory of results.md, results.svg, results.json")
	fs.StringVar(&cfg.limitkvBin, "limitkv-bin", "", "use this limitkv binary instead of building ./cmd/limitkv")
	fs.StringVar(&cfg.redisBin, "redis-bin", "", "use this redis-server (default: redis-server from PATH)")
	// Both would add about 6 minutes to the 12 of the full run.
	fs.StringVar(&cfg.loadgen, "loadgen", "go", "who drives the throughput runs: go (our load generator), redis-benchmark (-c -conns -r -users -P depth, server CPU per request from /proc; GET, SET, INCR, RL.SLIDE, RL.FIXED), or both (about 6 more minutes)")
	fs.StringVar(&cfg.rbBin, "redis-benchmark-bin", "", "use this redis-benchmark (default: redis-benchmark from PATH)")
	fs.DurationVar(&cfg.quietWait, "quiet-wait", 0, "on a shared machine: wait up to this long for quiet before each run, and measure a run again when others took more than -quiet cores")
	fs.Float64Var(&cfg.quietCores, "quiet", 0.3, "cores other processes may use during a run for it to count as quiet (runs above are marked busy)")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write the load generator's own CPU profile to this file (is the client lean?)")
	fs.BoolVar(&cfg.flood, "flood", false, "run only the maxmemory flood (flood.go): -flood-keys distinct RL.FIXED keys at -paced-rate; writes flood.md")
	fs.IntVar(&cfg.floodKeys, "flood-keys", 5_000_000, "requests of the maxmemory flood, each on a new key")
	fs.StringVar(&cfg.floodMaxMemory, "flood-maxmemory", "64mb", "maxmemory of the flood's server")
	fs.StringVar(&cfg.floodPolicy, "flood-policy", "allkeys-lfu", "maxmemory-policy of the flood's server")
	fs.BoolVar(&cfg.quick, "quick", false, "short runs, small key counts, no big keyspaces: a smoke test")
	fs.BoolVar(&cfg.replication, "replication", false, "run only the replication scenario (about 5 minutes; -quick: about 1): lag, throughput with replicas, full sync, failover under redis-sentinel; writes replication.md and replication.json")
	fs.Float64Var(&cfg.lagRate, "repl-lag-rate", 50_000, "-replication: writes/s on the master while the replicas' lag is measured; 0 skips it")
	// Unpipelined, the client and the master's system calls alone take more
	// than 2 cores at 50k writes/s, beside two replicas: the load could
	// not be offered.
	fs.IntVar(&cfg.lagDepth, "repl-lag-depth", 4, "-replication: pipeline depth of the writes of the lag measurement (the rate is over all connections, each batch sent at once)")
	fs.IntVar(&cfg.syncKeys, "repl-sync-keys", 1_000_000, "-replication: keys on the master of the full-sync rounds; 0 skips them")
	fs.IntVar(&cfg.syncRounds, "repl-sync-rounds", 2, "-replication: full syncs measured")
	// Light: the sync's two ends take about 1.4 of the 2 cores, and a load
	// that saturates the rest measures the queue, not the shard pauses.
	fs.Float64Var(&cfg.syncLoadRate, "repl-sync-load", 5_000, "-replication: requests/s on the master during the full syncs (and a baseline without); 0: none")
	fs.IntVar(&cfg.failovers, "repl-failovers", 3, "-replication: failover rounds without, and as many with, WAIT 1 100; 0 skips them")
	fs.StringVar(&cfg.sentinelBin, "sentinel-bin", "", "-replication: redis-sentinel to use (default: from PATH)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if cfg.quick {
		quick := func(name string, apply func()) {
			if !set[name] {
				apply()
			}
		}
		quick("duration", func() { cfg.duration = 500 * time.Millisecond })
		quick("warmup", func() { cfg.warmup = 200 * time.Millisecond })
		quick("rounds", func() { cfg.rounds = 1 })
		quick("mem-keys", func() { cfg.memKeys = 10_000 })
		quick("snapshot-keys", func() { cfg.snapshotKeys = 100_000 })
		quick("big-keys", func() { cfg.bigKeys = false })
		quick("periodic-duration", func() { cfg.periodicDuration = 3 * time.Second })
		quick("repl-sync-keys", func() { cfg.syncKeys = 100_000 })
		quick("repl-sync-rounds", func() { cfg.syncRounds = 1 })
		quick("repl-failovers", func() { cfg.failovers = 1 })
	}
	for _, d := range strings.Split(*depths, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(d))
		if err != nil || n < 1 || n > 4096 {
			return cfg, fmt.Errorf("-depths: %q is not a depth from 1 to 4096", d)
		}
		cfg.depths = append(cfg.depths, n)
	}
	if *only != "" {
		known := workloadIDs()
		for _, w := range strings.Split(*only, ",") {
			w = strings.TrimSpace(w)
			if !slices.Contains(known, w) {
				return cfg, fmt.Errorf("-only: unknown workload %q (known: %s)", w, strings.Join(known, ","))
			}
			cfg.only = append(cfg.only, w)
		}
	}
	switch cfg.loadgen {
	case "go", "redis-benchmark", "both":
	default:
		return cfg, fmt.Errorf("-loadgen: %q is not go, redis-benchmark or both", cfg.loadgen)
	}
	switch {
	case cfg.duration <= 0 || cfg.warmup < 0:
		return cfg, errors.New("-duration must be positive and -warmup not negative")
	case cfg.rounds < 1 || cfg.conns < 1 || cfg.users < 1:
		return cfg, errors.New("-rounds, -conns and -users must be at least 1")
	case cfg.memKeys < 10 || cfg.snapshotKeys < 1:
		return cfg, errors.New("-mem-keys must be at least 10 and -snapshot-keys at least 1")
	case cfg.pacedRate < 0:
		return cfg, errors.New("-paced-rate must not be negative")
	case cfg.periodicDuration <= 0 || cfg.periodicKeys < 0:
		return cfg, errors.New("-periodic-duration must be positive and -periodic-keys not negative")
	case cfg.periodic && cfg.pacedRate == 0:
		return cfg, errors.New("-periodic needs a -paced-rate")
	case cfg.lagRate < 0 || cfg.syncLoadRate < 0 || cfg.syncKeys < 0 || cfg.syncRounds < 1 || cfg.failovers < 0 || cfg.lagDepth < 1:
		return cfg, errors.New("-repl-lag-rate, -repl-sync-load, -repl-sync-keys and -repl-failovers must not be negative, -repl-sync-rounds at least 1")
	case cfg.syncKeys == 1:
		return cfg, errors.New("-repl-sync-keys must be 0 or at least 2 (half strings, half rate limits)")
	}
	return cfg, nil
}

func (c config) useGo() bool { return c.loadgen == "go" || c.loadgen == "both" }
func (c config) useRB() bool { return c.loadgen == "redis-benchmark" || c.loadgen == "both" }

func workloadIDs() []string {
	var ids []string
	for _, w := range workloads() {
		ids = append(ids, w.id)
	}
	return ids
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.log, format+"\n", args...)
}

// run does the whole benchmark; the code is 0, or 3 when a workload got
// error replies (the results are written, with the workload flagged).
func (b *bench) run(ctx context.Context) (int, error) {
	started := time.Now()
	var err error
	var redisVersion string
	if b.redisBin, redisVersion, err = findRedis(b.cfg.redisBin); err != nil {
		return 1, err
	}
	var rbVersion string
	if b.cfg.useRB() {
		if b.rbBin, rbVersion, err = findRedisBenchmark(b.cfg.rbBin); err != nil {
			return 1, err
		}
	}
	if err := os.MkdirAll(b.cfg.out, 0o755); err != nil {
		return 1, err
	}
	// Server directories go under the output directory, on the disk the
	// snapshot scenario is about (/tmp may be a memory file system).
	if err := os.MkdirAll(filepath.Join(b.cfg.out, "tmp"), 0o755); err != nil {
		return 1, err
	}
	if b.tmp, err = os.MkdirTemp(filepath.Join(b.cfg.out, "tmp"), "run-"); err != nil {
		return 1, err
	}
	// The servers run in their own directories: every path they get is
	// absolute.
	if b.tmp, err = filepath.Abs(b.tmp); err != nil {
		return 1, err
	}
	if b.redisBin, err = filepath.Abs(b.redisBin); err != nil {
		return 1, err
	}
	b.limitkvBin = b.cfg.limitkvBin
	if b.limitkvBin != "" {
		if b.limitkvBin, err = filepath.Abs(b.limitkvBin); err != nil {
			return 1, err
		}
	}
	if b.limitkvBin == "" {
		b.logf("building limitkv...")
		if b.limitkvBin, err = buildLimitkv(b.tmp); err != nil {
			return 1, err
		}
	}
	if b.cfg.flood {
		return 0, b.flood(ctx)
	}
	if b.cfg.replication {
		return b.runReplication(ctx, started, redisVersion)
	}
	if b.cfg.periodic {
		return b.runPeriodic(ctx, started, redisVersion)
	}
	b.res = &results{Meta: b.meta(started, redisVersion)}
	b.logf("machine: %s, %d cores; load average %.2f %.2f %.2f", b.res.Meta.CPU, b.res.Meta.Cores,
		b.res.Meta.LoadStart[0], b.res.Meta.LoadStart[1], b.res.Meta.LoadStart[2])

	if !b.cfg.skipThroughput && b.cfg.useGo() {
		if err := b.throughput(ctx); err != nil {
			return 1, fmt.Errorf("throughput: %v", err)
		}
	}
	if !b.cfg.skipThroughput && b.cfg.useRB() {
		b.res.RB = &rbResults{Version: rbVersion}
		if err := b.redisBenchmark(ctx); err != nil {
			return 1, fmt.Errorf("throughput with redis-benchmark: %v", err)
		}
	}
	if b.cfg.pacedRate > 0 {
		if err := b.paced(ctx); err != nil {
			return 1, fmt.Errorf("latency at a fixed rate: %v", err)
		}
	}
	if !b.cfg.skipMemory {
		if err := b.memory(ctx); err != nil {
			return 1, fmt.Errorf("memory: %v", err)
		}
	}
	if !b.cfg.skipSnapshot {
		b.logf("snapshot scenario: %d dirty keys, GET + RL.SLIDE from %d connections", b.cfg.snapshotKeys, b.cfg.conns)
		snap, err := b.snapshotScenario(ctx)
		if err != nil {
			return 1, fmt.Errorf("snapshot scenario: %v", err)
		}
		b.res.Snapshot = snap
	}
	if !b.cfg.skipPeriodic && b.cfg.pacedRate > 0 {
		if b.res.Periodic, err = b.periodicScenario(ctx); err != nil {
			return 1, fmt.Errorf("periodic snapshots: %v", err)
		}
	}
	b.res.Meta.Finished = time.Now().UTC()
	b.res.Meta.TookSeconds = time.Since(started).Seconds()
	b.res.Meta.LoadEnd = loadAvg()
	b.res.Targets = evaluateTargets(b.res)
	if err := writeResults(b.cfg.out, b.res); err != nil {
		return 1, err
	}
	b.logf("\nwrote %s in %s", strings.Join([]string{
		filepath.Join(b.cfg.out, "results.md"), filepath.Join(b.cfg.out, "results.svg"), filepath.Join(b.cfg.out, "results.json")}, ", "),
		time.Since(started).Round(time.Second))
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

func (b *bench) meta(started time.Time, redisVersion string) meta {
	m := meta{
		Started: started.UTC(), Command: "go run ./cmd/limitkv-bench " + strings.Join(os.Args[1:], " "),
		GoVersion: runtime.Version(), Cores: runtime.NumCPU(), CPU: cpuModel(), Kernel: kernel(),
		RedisVersion: redisVersion, LoadStart: loadAvg(),
		Duration: b.cfg.duration.String(), Warmup: b.cfg.warmup.String(), Rounds: b.cfg.rounds,
		Conns: b.cfg.conns, Users: b.cfg.users, Depths: b.cfg.depths, MemKeys: b.cfg.memKeys,
		SnapshotKeys: b.cfg.snapshotKeys, Quick: b.cfg.quick, PacedRate: b.cfg.pacedRate, LoadGen: b.cfg.loadgen,
	}
	m.QuietCores = b.cfg.quietCores
	if b.cfg.quietWait > 0 {
		m.QuietWait = b.cfg.quietWait.String()
	}
	if out, err := exec.Command(b.limitkvBin, "--version").CombinedOutput(); err == nil {
		m.LimitkvVersion = strings.TrimSpace(string(out))
	}
	if root, err := moduleRoot(); err == nil {
		if out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output(); err == nil {
			m.Commit = strings.TrimSpace(string(out))
		}
		// Changes to the results themselves do not make the code dirty.
		if out, err := exec.Command("git", "-C", root, "status", "--porcelain", "--", ".", ":!bench-results").Output(); err == nil && len(strings.TrimSpace(string(out))) > 0 {
			m.Commit += " (with uncommitted changes)"
		}
	}
	if b.cfg.limitkvBin != "" {
		m.Commit = "binary " + b.cfg.limitkvBin
	}
	return m
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func kernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return runtime.GOOS
	}
	return "Linux " + strings.TrimSpace(string(b))
}

// throughput runs every workload at every depth on both servers, round
// after round, flipping which server goes first from one pair to the next.
func (b *bench) throughput(ctx context.Context) error {
	var selected []*workload
	for _, w := range workloads() {
		if len(b.cfg.only) == 0 || slices.Contains(b.cfg.only, w.id) {
			selected = append(selected, w)
		}
	}
	lk, rd, err := b.startPair("throughput")
	if err != nil {
		return err
	}
	defer lk.stop()
	defer rd.stop()
	servers := []*server{lk, rd}
	for _, s := range servers {
		l, err := newLoader(s.addr, 4, 256)
		if err != nil {
			return err
		}
		_, err = l.pass(ctx, op{cmd("SET", keyArg("key:"), lit(value32))}, 0, b.cfg.users)
		l.close()
		if err != nil {
			return fmt.Errorf("%s: preloading the GET keys: %v", s.kind, err)
		}
		for _, w := range selected {
			if err := verifyWorkload(s, w, b.cfg.users); err != nil {
				return err
			}
		}
	}
	b.logf("preloaded %d 32-byte values and checked one reply of every workload on both servers", b.cfg.users)

	total := b.cfg.rounds * len(selected) * len(b.cfg.depths) * 2
	perRun := b.cfg.warmup + b.cfg.duration
	b.logf("%d runs of %v (%v warmup), about %v", total, perRun, b.cfg.warmup, (time.Duration(total) * perRun).Round(time.Second))
	done := 0
	for round := 1; round <= b.cfg.rounds; round++ {
		pair := 0 // within the round: the same pair flips from round to round
		for _, w := range selected {
			for _, depth := range b.cfg.depths {
				order := servers
				if (round+pair)%2 == 0 {
					order = []*server{rd, lk}
				}
				pair++
				for _, s := range order {
					rec, err := b.oneRun(ctx, s, w, depth, round, 0)
					if err != nil {
						return fmt.Errorf("%s %s depth %d: %v", s.kind, w.id, depth, err)
					}
					done++
					b.logf("[%d/%d] round %d %-6s d=%-2d %-7s %9.0f ops/s  p50 %6.0fµs p99 %6.0fµs  cpu server %.2f client %.2f other %.2f steal %.2f  load %.2f%s",
						done, total, round, w.id, depth, s.kind, rec.OpsPerSec, rec.P50us, rec.P99us,
						rec.CPU.Server, rec.CPU.Client, rec.CPU.Other, rec.CPU.Steal, rec.Load1, errNote(rec))
				}
			}
		}
	}
	b.res.Throughput = summarize(b.res.Runs, selected, b.cfg.depths, b.cfg.quietCores)
	return nil
}

// startPair starts a memory-only limitkv and Redis, with the scripts
// loaded into Redis and the benchmark's policy defined on limitkv.
func (b *bench) startPair(name string) (lk, rd *server, err error) {
	if lk, err = startLimitkv(b.limitkvBin, filepath.Join(b.tmp, name+"-limitkv"), false); err != nil {
		return nil, nil, err
	}
	if rd, err = startRedis(b.redisBin, filepath.Join(b.tmp, name+"-redis")); err != nil {
		lk.stop()
		return nil, nil, err
	}
	if err = loadScripts(rd); err == nil {
		err = definePolicy(lk)
	}
	if err != nil {
		lk.stop()
		rd.stop()
		return nil, nil, err
	}
	return lk, rd, nil
}

// pacedWorkloads are measured open loop: the rate limits, whose latency
// is a target.
var pacedWorkloads = []string{"slide", "fixed", "login"}

// paced measures latency at a fixed offered load instead of at
// saturation: the rate-limit workloads, unpipelined, -paced-rate requests
// per second over -conns connections, on a fresh pair of servers,
// alternating like the throughput runs for -rounds rounds. The rate is
// below both servers' capacity, so the latency is the servers' (and the
// machine's), not a queue's.
func (b *bench) paced(ctx context.Context) error {
	var selected []*workload
	for _, w := range workloads() {
		if slices.Contains(pacedWorkloads, w.id) && (len(b.cfg.only) == 0 || slices.Contains(b.cfg.only, w.id)) {
			selected = append(selected, w)
		}
	}
	if len(selected) == 0 {
		return nil
	}
	lk, rd, err := b.startPair("paced")
	if err != nil {
		return err
	}
	defer lk.stop()
	defer rd.stop()
	for _, s := range []*server{lk, rd} {
		for _, w := range selected {
			if err := verifyWorkload(s, w, b.cfg.users); err != nil {
				return err
			}
		}
	}
	rate := b.cfg.pacedRate
	total := b.cfg.rounds * len(selected) * 2
	perRun := b.cfg.warmup + b.cfg.duration
	b.logf("latency at a fixed rate: %s requests/s over %d connections, depth 1; %d runs of %v, about %v",
		commas(rate), b.cfg.conns, total, perRun, (time.Duration(total) * perRun).Round(time.Second))
	done := 0
	for round := 1; round <= b.cfg.rounds; round++ {
		for i, w := range selected {
			order := []*server{lk, rd}
			if (round+i)%2 == 0 {
				order = []*server{rd, lk}
			}
			for _, s := range order {
				rec, err := b.oneRun(ctx, s, w, 1, round, rate)
				if err != nil {
					return fmt.Errorf("%s %s at %s/s: %v", s.kind, w.id, commas(rate), err)
				}
				done++
				b.logf("[%d/%d] round %d %-6s %-7s at %s/s: achieved %9.0f/s  p50 %6.0fµs p99 %6.0fµs p99.9 %6.0fµs  send lag p99 %5.0fµs, p99 from the send %5.0fµs  cpu server %.2f client %.2f other %.2f%s",
					done, total, round, w.id, s.kind, commas(rate), rec.OpsPerSec, rec.P50us, rec.P99us, rec.P999us, rec.SendLagP99us, rec.SentP99us,
					rec.CPU.Server, rec.CPU.Client, rec.CPU.Other, errNote(rec))
			}
		}
	}
	b.res.Paced = summarize(b.res.PacedRuns, selected, []int{1}, b.cfg.quietCores)
	for i := range b.res.Paced {
		b.res.Paced[i].Rate = rate
	}
	return nil
}

func errNote(r runRecord) string {
	if r.Errors == 0 {
		return ""
	}
	return fmt.Sprintf("  !!! %d ERROR REPLIES (first: %s)", r.Errors, r.FirstError)
}

// oneRun measures one workload on one server at one depth, closed loop
// (rate 0) or paced at rate requests/s. With -quiet-wait it first waits
// for the machine to be quiet, and measures again (twice at most) when
// other processes took more than -quiet cores during the window; the runs
// set aside stay in results.json.
func (b *bench) oneRun(ctx context.Context, s *server, w *workload, depth, round int, rate float64) (runRecord, error) {
	for attempt := 1; ; attempt++ {
		if b.cfg.quietWait > 0 {
			b.waitQuiet(ctx)
		}
		rec, err := b.measureRun(ctx, s, w, depth, round, rate)
		if err != nil {
			return rec, err
		}
		if b.cfg.quietWait == 0 || rec.CPU.Other <= b.cfg.quietCores || attempt == 3 {
			if rate > 0 {
				b.res.PacedRuns = append(b.res.PacedRuns, rec)
			} else {
				b.res.Runs = append(b.res.Runs, rec)
			}
			return rec, nil
		}
		b.res.SetAside = append(b.res.SetAside, rec)
		b.logf("        set aside: other processes took %.2f cores during %s %s d=%d %s (%.0f ops/s); measuring again",
			rec.CPU.Other, s.kind, w.id, depth, offeredLoad(rate), rec.OpsPerSec)
	}
}

// waitQuiet waits, up to -quiet-wait, for a second in which the machine's
// busy time (the benchmark's idle servers included) stays under -quiet.
func (b *bench) waitQuiet(ctx context.Context) {
	deadline := time.Now().Add(b.cfg.quietWait)
	for ctx.Err() == nil {
		a := markCPU(0)
		time.Sleep(time.Second)
		busy := cpuBetween(a, markCPU(0))
		other := busy.Other + busy.Client + busy.Server // pid 0: all of it is other
		if other <= b.cfg.quietCores {
			return
		}
		if time.Now().After(deadline) {
			b.logf("        the machine is still busy (%.2f cores) after %v: measuring anyway", other, b.cfg.quietWait)
			return
		}
	}
}

func (b *bench) measureRun(ctx context.Context, s *server, w *workload, depth, round int, rate float64) (runRecord, error) {
	// A short pause lets the previous run's connections close and the
	// server settle (Go's GC, Redis's cron) before this one starts.
	time.Sleep(100 * time.Millisecond)
	load1 := loadAvg()[0]
	spec := loadSpec{
		addr: s.addr, pid: s.pid(), conns: b.cfg.conns, depth: depth, warmup: b.cfg.warmup,
		plans:   []plan{{name: w.id, op: w.opFor(s.kind), users: b.cfg.users, decision: w.decision}},
		measure: sleepFor(b.cfg.duration),
		seed:    uint64(round*1000 + depth),
		rate:    rate,
	}
	if rate > 0 {
		spec.seed += 500
	}
	lr, err := runLoad(ctx, spec)
	if err != nil {
		return runRecord{}, err
	}
	p := lr.plans[0]
	rec := runRecord{
		Round: round, Workload: w.id, Server: s.kind, Depth: depth, Rate: rate,
		Ops: p.ops, WindowSec: lr.window.Seconds(), OpsPerSec: float64(p.ops) / lr.window.Seconds(),
		Errors: p.errors, FirstError: p.firstErr, Allowed: p.allowed, Denied: p.denied,
		P50us: us(p.hist.quantile(0.5)), P99us: us(p.hist.quantile(0.99)), P999us: us(p.hist.quantile(0.999)),
		MaxUs: us(time.Duration(p.hist.max)), MeanUs: us(p.hist.mean()), Samples: p.hist.n,
		CPU: lr.cpu, Load1: load1, hist: p.hist, lag: p.lag, sent: p.sent,
	}
	rec.CPUPerOpUs = cpuPerOpUs(lr.cpu.Server*lr.window.Seconds(), p.ops)
	if rate > 0 {
		rec.SendLagP99us = us(p.lag.quantile(0.99))
		rec.SentP99us = us(p.sent.quantile(0.99))
	}
	return rec, nil
}

func (b *bench) memory(ctx context.Context) error {
	shapes := memShapes(b.cfg.memKeys)
	for _, sh := range shapes {
		m := memResult{Shape: sh.id, Name: sh.name, Keys: sh.keys}
		var err error
		if m.Limitkv, err = b.measureShape(ctx, sh, kindLimitkv); err != nil {
			return err
		}
		if m.Redis, err = b.measureShape(ctx, sh, kindRedis); err != nil {
			return err
		}
		b.res.Memory = append(b.res.Memory, m)
		b.logf("memory %-6s %7d keys: limitkv %6.1f B/key used, %6.1f B/key RSS; redis %6.1f B/key used, %6.1f B/key RSS",
			sh.id, sh.keys, m.Limitkv.UsedPerKey, m.Limitkv.RSSPerKey, m.Redis.UsedPerKey, m.Redis.RSSPerKey)
	}
	if b.cfg.bigKeys {
		b.logf("large keyspaces: 1M then 10M fixed-window keys on each server")
		for _, kind := range []string{kindLimitkv, kindRedis} {
			r, err := b.measureBig(ctx, kind, []int{1_000_000, 10_000_000})
			if err != nil {
				return err
			}
			b.res.BigKeys = append(b.res.BigKeys, r)
		}
	}
	return nil
}

// cpuPerOpUs is CPU seconds spread over ops, in µs; 0 without ops.
func cpuPerOpUs(cpuSeconds float64, ops int64) float64 {
	if ops <= 0 {
		return 0
	}
	return cpuSeconds * 1e6 / float64(ops)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
