// Command limitkv-bench measures limitkv against redis-server on this
// machine, one scenario per subcommand, each in a file of its own with the
// flags it reads:
//
//	throughput   the rate-limit decisions done natively on limitkv and as
//	             Lua scripts on Redis, plain GET/SET/INCR and bitmaps on
//	             both, at saturation and at a fixed rate (throughput.go;
//	             with -loadgen redis-benchmark or both, rbench.go)
//	memory       memory per key of each shape (memory.go)
//	snapshot     latency while a snapshot runs (snapshot.go)
//	periodic     latency with periodic snapshots (periodic.go)
//	replication  replicas' lag and cost, full syncs, and failover
//	             (replication.go, failover.go)
//	failover     the failover rounds alone (failover.go)
//	flood        a maxmemory-limited server flooded with new keys (flood.go)
//	cluster      the rate limit on a 3-master limitkv cluster and a
//	             redis-server one through go-redis's ClusterClient
//	             (cluster.go)
//	cluster-reshard  the rate limit on a limitkv cluster while slots
//	             move, against the same load without (clusterreshard.go)
//	tail         the latency regression benchmark: p50, p99, max and CPU
//	             per request of GET, SET, INCR and the rate limits with
//	             redis-benchmark, persistence off and on, optionally
//	             pinned and beside a baseline limitkv (tail.go)
//	all          throughput, memory, snapshot and periodic: results.md
//	             (results.go; the default)
//
// It builds limitkv, starts the servers on free loopback ports
// (internal/testserver), drives them with its own load generator
// (loadgen.go), alternating servers over several rounds, and writes each
// scenario's page through one report writer (report.go) to bench-results/:
// Markdown, JSON, and a chart for the throughput and memory pages. Every
// throughput row carries the server's CPU time per request, from /proc,
// with the p99 and max latency beside it: a cheaper request is no gain
// if some requests stall longer.
//
// Throughput is measured at saturation (closed loop: every connection
// sends its next request as soon as the previous one is answered), where
// latency is mostly queueing. The latency targets are measured open loop,
// at a fixed offered rate (-paced-rate) below both servers' capacity.
//
//	go run ./cmd/limitkv-bench                     # the full run (about 12 minutes)
//	go run ./cmd/limitkv-bench -loadgen both       # with redis-benchmark too (about 18)
//	go run ./cmd/limitkv-bench -quick              # a smoke test (about a minute)
//	go run ./cmd/limitkv-bench replication         # replication only (about 5 minutes)
//	go run ./cmd/limitkv-bench periodic            # periodic snapshots only (about 2 minutes)
//	go run ./cmd/limitkv-bench tail                # tail latency with redis-benchmark (about 4 minutes)
//	go run ./cmd/limitkv-bench -h                  # the scenarios and their flags
//
// The command lines from before the subcommands still work: without a
// scenario every flag is taken, and -replication, -periodic and -flood run
// those scenarios.
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
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/limitkv/limitkv/internal/testserver"
)

// config is every scenario's settings; each scenario's flags set its part.
type config struct {
	// commonFlags
	out        string
	limitkvBin string
	redisBin   string
	quick      bool
	cpuProfile string
	// runFlags, connFlags, pacedFlags, workloadFlags
	duration, warmup time.Duration
	rounds, conns    int
	users            int
	quietWait        time.Duration
	quietCores       float64
	pacedRate        float64 // requests/s of the open-loop latency runs; 0 skips them
	depths           []int
	only             []string
	// throughputFlags (throughput.go)
	loadgen string // go, redis-benchmark or both: who drives the throughput runs
	rbBin   string
	// memoryFlags (memory.go)
	bigKeys       bool
	memKeys       int
	streamEntries int
	memOnly       []string // shapes to measure; nil: all
	// snapshotFlags (snapshot.go)
	snapshotKeys int
	// periodicFlags (periodic.go)
	periodicDuration time.Duration
	periodicKeys     float64
	// skipThroughputFlags, skipFlags: parts left out of the full run
	skipThroughput bool
	skipMemory     bool
	skipSnapshot   bool
	skipPeriodic   bool
	// replicationFlags (replication.go)
	lagRate      float64
	lagDepth     int
	syncKeys     int
	syncRounds   int
	syncLoadRate float64
	// failoverFlags (failover.go)
	failovers   int
	sentinelBin string
	// floodFlags (flood.go)
	floodKeys      int
	floodMaxMemory string
	floodPolicy    string
	// clusterFlags (cluster.go)
	clusterDuration, clusterWarmup time.Duration
	clusterRounds, clusterKeys     int
	clusterZipf                    float64
	clusterNodeTimeout             time.Duration
	redisCliBin                    string
	// clusterReshardFlags (clusterreshard.go)
	reshardSlots, reshardRounds, reshardKeys int
	reshardSteady, reshardWarmup             time.Duration
	// tailFlags (tail.go)
	tailRequests    [2]int64 // per run at depths 1 and 16
	tailPin         string   // no, yes or both
	tailPersistence string   // off, on or both
	limitkvArgs     []string
	baselineBin     string
	baselineArgs    []string
	tailBaseline    bool // a baseline limitkv runs: -baseline-bin or -baseline-args was given
	// legacyFlags: the scenario chosen without a subcommand
	legacyReplication, legacyPeriodic, legacyFlood bool
}

type bench struct {
	cfg        config
	tmp        string
	limitkvBin string
	redisBin   string
	rbBin      string
	rbVersion  string
	log        io.Writer
	res        *results
	// rbPin is the CPU list redis-benchmark runs on (taskset -c), empty
	// for wherever the kernel puts it; taskset is the tool's path.
	rbPin, taskset string
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	sc, cfg, err := parseArgs(args, os.Stderr)
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
		testserver.StopAll()
		if b.tmp != "" {
			os.RemoveAll(b.tmp)
		}
		os.Exit(130)
	}()

	code, err := b.run(ctx, sc)
	if ctx.Err() != nil {
		select {} // interrupted: the signal handler stops the servers and exits
	}
	testserver.StopAll()
	if err != nil {
		fmt.Fprintln(os.Stderr, "limitkv-bench:", err)
		if b.tmp != "" {
			// A failed run keeps its servers' directories: their logs
			// are what tells a crash from a dropped connection.
			fmt.Fprintln(os.Stderr, "limitkv-bench: the servers' logs and data are kept in", b.tmp)
		}
		return 1
	}
	if b.tmp != "" {
		os.RemoveAll(b.tmp)
	}
	return code
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.log, format+"\n", args...)
}

// run finds the servers, builds limitkv, and runs the scenario; the code
// is 0, or 3 when a workload got error replies (the results are written,
// with the workload flagged).
func (b *bench) run(ctx context.Context, sc *scenario) (int, error) {
	started := time.Now()
	var err error
	var redisVersion string
	if b.redisBin, redisVersion, err = findRedis(b.cfg.redisBin); err != nil {
		return 1, err
	}
	if b.cfg.useRB() || sc.redisBenchmark {
		if b.rbBin, b.rbVersion, err = findRedisBenchmark(b.cfg.rbBin, !sc.redisBenchmark); err != nil {
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
		if b.limitkvBin, err = testserver.Build(b.tmp); err != nil {
			return 1, err
		}
	}
	return sc.run(b, ctx, started, redisVersion)
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
	if root, err := testserver.ModuleRoot(); err == nil {
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
