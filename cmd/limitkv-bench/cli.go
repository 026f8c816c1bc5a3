package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/limitkv/limitkv/cluster"
)

// A scenario is one thing the benchmark measures, run as a subcommand
// (limitkv-bench throughput ...) with the flags it reads and no others.
type scenario struct {
	name    string
	summary string // for -h: what it measures, how long it takes, what it writes
	flags   []flagGroup
	// redisBenchmark: it always drives load with redis-benchmark, which is
	// then looked for before limitkv is built, not after.
	redisBenchmark bool
	run            func(b *bench, ctx context.Context, started time.Time, redisVersion string) (int, error)
}

// A flagGroup registers flags on a flag set. Flags that several scenarios
// read (-conns, -paced-rate, ...) are in groups of their own, so that a
// scenario made of several registers each flag once.
type flagGroup func(fs *flag.FlagSet, c *config)

// scenarios are the subcommands, in the order -h lists them. all is the
// full run of results.md; the others run one scenario each.
func scenarios() []*scenario {
	return []*scenario{
		{name: "all", summary: "the full run (the default; about 12 minutes, -loadgen both about 18, -quick about 1): throughput, latency at a fixed rate, memory, snapshot and periodic snapshots; writes results.md, results.svg and results.json",
			flags: []flagGroup{runFlags, connFlags, pacedFlags, workloadFlags, throughputFlags, memoryFlags, snapshotFlags, periodicFlags, skipThroughputFlags, skipFlags},
			run:   (*bench).runAll},
		{name: "throughput", summary: "GET/SET/INCR, bitmaps and the rate limits on both servers at saturation, then the rate limits at -paced-rate; writes throughput.md, .svg and .json",
			flags: []flagGroup{runFlags, connFlags, pacedFlags, workloadFlags, throughputFlags},
			run:   (*bench).runThroughput},
		{name: "memory", summary: "memory per key of each key shape on both servers, and RSS at 1M and 10M keys; writes memory.md, .svg and .json",
			flags: []flagGroup{memoryFlags},
			run:   (*bench).runMemory},
		{name: "snapshot", summary: "limitkv's latency while a snapshot of many dirty keys runs; writes snapshot.md and .json",
			flags: []flagGroup{runFlags, connFlags, pacedFlags, snapshotFlags},
			run:   (*bench).runSnapshot},
		{name: "periodic", summary: "latency with periodic snapshots (persistence on, its default interval) against persistence off (about 2 minutes); writes periodic.md and .json",
			flags: []flagGroup{runFlags, connFlags, pacedFlags, periodicFlags},
			run:   (*bench).runPeriodic},
		{name: "replication", summary: "replicas' lag, their cost to the master, full syncs, and failover under redis-sentinel (about 5 minutes, -quick about 1); writes replication.md and .json",
			flags: []flagGroup{runFlags, connFlags, workloadFlags, skipThroughputFlags, replicationFlags, failoverFlags},
			run:   (*bench).runReplication},
		{name: "failover", summary: "only the failover rounds of replication: a master killed under three redis-sentinels; writes failover.md and .json",
			flags: []flagGroup{failoverFlags},
			run:   (*bench).runFailover},
		{name: "flood", summary: "a maxmemory-limited limitkv flooded with new RL.FIXED keys at -paced-rate; writes flood.md and .json",
			flags: []flagGroup{connFlags, pacedFlags, floodFlags},
			run:   (*bench).runFlood},
		{name: "cluster", summary: "RL.FIXED on a 3-master limitkv cluster against the INCR + PEXPIRE script on a 3-master redis-server cluster, through go-redis's ClusterClient, with a check of the allowed decisions (about 2.5 minutes); writes cluster.md and .json",
			flags: []flagGroup{connFlags, clusterFlags, clusterNodeFlags},
			run:   (*bench).runCluster},
		{name: "cluster-reshard", summary: "RL.FIXED through go-redis's ClusterClient on a 3-master limitkv cluster while redis-cli --cluster reshard moves 2,000 slots back and forth, against the same load without a reshard, with a check of the allowed decisions (about 2 minutes); writes cluster-reshard.md and .json",
			flags: []flagGroup{connFlags, clusterNodeFlags, clusterReshardFlags},
			run:   (*bench).runClusterReshard},
		{name: "tail", summary: "the latency regression benchmark: redis-benchmark's p50, p99 and max and the server's CPU per request of GET, SET, INCR (both servers), RL.FIXED and RL.SLIDE (limitkv, against Redis's INCR), at depths 1 and 16, with persistence off and on (each server's default), optionally pinned to a core, optionally beside a -baseline-bin limitkv (about 4 minutes, -pin both about 8, -quick well under 1); writes tail.md and .json",
			flags: []flagGroup{roundsFlags, connFlags, rbBinFlags, tailFlags}, redisBenchmark: true,
			run: (*bench).runTail},
	}
}

// commonFlags are read by every scenario: where to write, which servers.
func commonFlags(fs *flag.FlagSet, c *config) {
	fs.StringVar(&c.out, "out", "bench-results", "directory of the results (results.md, replication.md, ...)")
	fs.StringVar(&c.limitkvBin, "limitkv-bin", "", "use this limitkv binary instead of building ./cmd/limitkv")
	fs.StringVar(&c.redisBin, "redis-bin", "", "use this redis-server (default: redis-server from PATH)")
	fs.BoolVar(&c.quick, "quick", false, "short runs, small key counts, no big keyspaces: a smoke test")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write the load generator's own CPU profile to this file (is the client lean?)")
}

// runFlags shape the measured runs of the scenarios that drive load.
func runFlags(fs *flag.FlagSet, c *config) {
	fs.DurationVar(&c.duration, "duration", 5*time.Second, "measured time of each run")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "unmeasured load before each run's window")
	roundsFlags(fs, c)
	fs.IntVar(&c.users, "users", 100_000, "distinct users (keys) drawn uniformly per request")
	fs.DurationVar(&c.quietWait, "quiet-wait", 0, "on a shared machine: wait up to this long for quiet before each run, and measure a run again when others took more than -quiet cores")
	fs.Float64Var(&c.quietCores, "quiet", 0.3, "cores other processes may use during a run for it to count as quiet (runs above are marked busy)")
}

// roundsFlags is runFlags' -rounds alone, for a scenario whose runs are
// sized otherwise.
func roundsFlags(fs *flag.FlagSet, c *config) {
	fs.IntVar(&c.rounds, "rounds", 3, "rounds of every workload on both servers (and snapshots)")
}

func connFlags(fs *flag.FlagSet, c *config) {
	fs.IntVar(&c.conns, "conns", 50, "client connections")
}

func pacedFlags(fs *flag.FlagSet, c *config) {
	fs.Float64Var(&c.pacedRate, "paced-rate", 40_000, "requests/s, over all connections, of the open-loop runs (the rate limits at depth 1 on both servers, the snapshot, periodic and flood scenarios); 0 skips the open-loop runs")
}

// workloadFlags select the workloads of the throughput runs (and of
// replication's runs with replicas).
func workloadFlags(fs *flag.FlagSet, c *config) {
	fs.Func("depths", "pipeline depths, comma separated (default 1,16)", func(s string) error {
		c.depths = nil
		for _, d := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(d))
			if err != nil || n < 1 || n > 4096 {
				return fmt.Errorf("%q is not a depth from 1 to 4096", d)
			}
			c.depths = append(c.depths, n)
		}
		return nil
	})
	fs.Func("only", "comma list of workloads to run: "+strings.Join(workloadIDs(), ","), func(s string) error {
		known := workloadIDs()
		c.only = nil
		for _, w := range strings.Split(s, ",") {
			w = strings.TrimSpace(w)
			if !slices.Contains(known, w) {
				return fmt.Errorf("unknown workload %q (known: %s)", w, strings.Join(known, ","))
			}
			c.only = append(c.only, w)
		}
		return nil
	})
}

// skipThroughputFlags leave the throughput runs out of the full run, and
// the runs with replicas out of replication.
func skipThroughputFlags(fs *flag.FlagSet, c *config) {
	fs.BoolVar(&c.skipThroughput, "skip-throughput", false, "skip the throughput runs (in replication: the runs with replicas)")
}

// skipFlags leave the other parts out of the full run.
func skipFlags(fs *flag.FlagSet, c *config) {
	fs.BoolVar(&c.skipMemory, "skip-memory", false, "skip the memory-per-key measurements")
	fs.BoolVar(&c.skipSnapshot, "skip-snapshot", false, "skip the snapshot-latency scenario")
	fs.BoolVar(&c.skipPeriodic, "skip-periodic", false, "skip the periodic-snapshot scenario")
}

// legacyFlags are the mode switches of the command line before the
// subcommands: limitkv-bench -replication still runs the replication
// scenario, as the commands recorded in bench-results/ say.
func legacyFlags(fs *flag.FlagSet, c *config) {
	fs.BoolVar(&c.legacyReplication, "replication", false, "the same as the replication subcommand")
	fs.BoolVar(&c.legacyPeriodic, "periodic", false, "the same as the periodic subcommand")
	fs.BoolVar(&c.legacyFlood, "flood", false, "the same as the flood subcommand")
}

// allGroups is every flag, for the command line without a subcommand.
func allGroups() []flagGroup {
	return []flagGroup{runFlags, connFlags, pacedFlags, workloadFlags, throughputFlags, memoryFlags, snapshotFlags, periodicFlags,
		skipThroughputFlags, skipFlags, replicationFlags, failoverFlags, floodFlags, clusterFlags, clusterNodeFlags,
		clusterReshardFlags, tailFlags, legacyFlags}
}

// parseArgs reads the command line: a scenario's name and its flags, or
// flags alone (the full run, or the scenario a legacy switch names).
func parseArgs(args []string, stderr io.Writer) (*scenario, config, error) {
	var cfg config
	// Every field gets its default, whichever flags the scenario takes.
	defaults := flag.NewFlagSet("", flag.ContinueOnError)
	commonFlags(defaults, &cfg)
	for _, g := range allGroups() {
		g(defaults, &cfg)
	}
	cfg.depths = []int{1, 16}

	all := scenarios()
	var sc *scenario
	groups := allGroups()
	name := "limitkv-bench"
	if len(args) > 0 && args[0] == "help" {
		usage(stderr, all)
		return nil, cfg, flag.ErrHelp
	}
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		for _, s := range all {
			if s.name == args[0] {
				sc = s
			}
		}
		if sc == nil {
			usage(stderr, all)
			return nil, cfg, fmt.Errorf("unknown scenario %q", args[0])
		}
		groups, name, args = sc.flags, "limitkv-bench "+sc.name, args[1:]
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	commonFlags(fs, &cfg)
	for _, g := range groups {
		g(fs, &cfg)
	}
	if sc == nil {
		fs.Usage = func() {
			usage(stderr, all)
			fmt.Fprintf(stderr, "\nWithout a scenario, the flags of every scenario are taken, and -replication, -periodic or -flood choose one:\n\n")
			fs.PrintDefaults()
		}
	} else {
		fs.Usage = func() {
			fmt.Fprintf(stderr, "usage: limitkv-bench %s [flags]\n\n%s.\n\nflags:\n", sc.name, sc.summary)
			fs.PrintDefaults()
		}
	}
	if err := fs.Parse(args); err != nil {
		return nil, cfg, err
	}
	if fs.NArg() > 0 {
		return nil, cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if sc == nil {
		chosen := "all"
		switch {
		case cfg.legacyFlood:
			chosen = "flood"
		case cfg.legacyReplication:
			chosen = "replication"
		case cfg.legacyPeriodic:
			chosen = "periodic"
		}
		for _, s := range all {
			if s.name == chosen {
				sc = s
			}
		}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	cfg.tailBaseline = set["baseline-bin"] || set["baseline-args"]
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
		quick("stream-entries", func() { cfg.streamEntries = 100_000 })
		quick("snapshot-keys", func() { cfg.snapshotKeys = 100_000 })
		quick("big-keys", func() { cfg.bigKeys = false })
		quick("periodic-duration", func() { cfg.periodicDuration = 3 * time.Second })
		quick("repl-sync-keys", func() { cfg.syncKeys = 100_000 })
		quick("repl-sync-rounds", func() { cfg.syncRounds = 1 })
		quick("repl-failovers", func() { cfg.failovers = 1 })
		quick("cluster-duration", func() { cfg.clusterDuration = time.Second })
		quick("cluster-warmup", func() { cfg.clusterWarmup = 200 * time.Millisecond })
		quick("cluster-rounds", func() { cfg.clusterRounds = 1 })
		quick("reshard-slots", func() { cfg.reshardSlots = 200 })
		quick("reshard-rounds", func() { cfg.reshardRounds = 1 })
		quick("reshard-steady", func() { cfg.reshardSteady = time.Second })
		quick("reshard-warmup", func() { cfg.reshardWarmup = 200 * time.Millisecond })
		quick("reshard-keys", func() { cfg.reshardKeys = 2000 })
		quick("requests", func() {
			for i := range cfg.tailRequests {
				cfg.tailRequests[i] /= 20
			}
		})
	}
	return sc, cfg, cfg.check(sc.name)
}

// check refuses settings no scenario can run with.
func (c config) check(scenario string) error {
	switch c.loadgen {
	case "go", "redis-benchmark", "both":
	default:
		return fmt.Errorf("-loadgen: %q is not go, redis-benchmark or both", c.loadgen)
	}
	switch {
	case c.duration <= 0 || c.warmup < 0:
		return errors.New("-duration must be positive and -warmup not negative")
	case c.rounds < 1 || c.conns < 1 || c.users < 1:
		return errors.New("-rounds, -conns and -users must be at least 1")
	case c.memKeys < 10 || c.snapshotKeys < 1 || c.streamEntries < 10:
		return errors.New("-mem-keys and -stream-entries must be at least 10 and -snapshot-keys at least 1")
	case c.pacedRate < 0:
		return errors.New("-paced-rate must not be negative")
	case c.periodicDuration <= 0 || c.periodicKeys < 0:
		return errors.New("-periodic-duration must be positive and -periodic-keys not negative")
	case scenario == "periodic" && c.pacedRate == 0:
		return errors.New("the periodic scenario needs a -paced-rate")
	case c.lagRate < 0 || c.syncLoadRate < 0 || c.syncKeys < 0 || c.syncRounds < 1 || c.failovers < 0 || c.lagDepth < 1:
		return errors.New("-repl-lag-rate, -repl-sync-load, -repl-sync-keys and -repl-failovers must not be negative, -repl-sync-rounds at least 1")
	case c.syncKeys == 1:
		return errors.New("-repl-sync-keys must be 0 or at least 2 (half strings, half rate limits)")
	case scenario == "failover" && c.failovers < 1:
		return errors.New("-repl-failovers must be at least 1")
	case c.clusterDuration <= 0 || c.clusterWarmup < 0 || c.clusterRounds < 1 || c.clusterKeys < 2 || c.clusterNodeTimeout <= 0:
		return errors.New("-cluster-duration and -cluster-node-timeout must be positive, -cluster-warmup not negative, -cluster-rounds at least 1 and -cluster-keys at least 2")
	case c.clusterWarmup+c.clusterDuration >= clusterWindow:
		// The script's window starts at a key's first INCR: a round on
		// keys of its own counts in one window only while it is shorter.
		return fmt.Errorf("-cluster-warmup plus -cluster-duration must be shorter than the rate limit's window, %v", clusterWindow)
	case !(c.clusterZipf > 1):
		return errors.New("-cluster-zipf must be above 1")
	case c.reshardSlots < 1 || c.reshardSlots > cluster.Slots/clusterMasters:
		return fmt.Errorf("-reshard-slots must be from 1 to %d, the slots of one master", cluster.Slots/clusterMasters)
	case c.reshardRounds < 1 || c.reshardSteady <= 0 || c.reshardWarmup < 0:
		return errors.New("-reshard-rounds must be at least 1, -reshard-steady positive and -reshard-warmup not negative")
	case c.reshardKeys < c.reshardSlots || c.reshardKeys < 2:
		return errors.New("-reshard-keys must be at least -reshard-slots (a key in every slot that moves) and at least 2")
	}
	return nil
}

// usage explains the scenarios.
func usage(w io.Writer, all []*scenario) {
	fmt.Fprintf(w, `limitkv-bench measures limitkv against redis-server on this machine. It
builds ./cmd/limitkv, starts the servers on free loopback ports in
directories of their own, drives them with its own load generator, and
writes Markdown and JSON results to -out (bench-results).

usage: limitkv-bench [scenario] [flags]

scenarios:
`)
	for _, s := range all {
		fmt.Fprintf(w, "  %-12s %s\n", s.name, s.summary)
	}
	fmt.Fprintf(w, `
limitkv-bench SCENARIO -h lists a scenario's flags. Examples:

  go run ./cmd/limitkv-bench                      # the full run
  go run ./cmd/limitkv-bench -quick               # the full run as a smoke test
  go run ./cmd/limitkv-bench throughput -loadgen both -only slide,fixed
  go run ./cmd/limitkv-bench replication -quick
  go run ./cmd/limitkv-bench tail -pin both -baseline-bin /tmp/limitkv-main
`)
}
