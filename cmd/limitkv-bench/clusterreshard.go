package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limitkv/limitkv/cluster"
)

// The cluster-reshard scenario: what a reshard costs the rate limit. On
// a 3-master limitkv cluster, -conns goroutines share go-redis's
// ClusterClient and send RL.FIXED on keys in the slots that move, while
// redis-cli --cluster reshard moves -reshard-slots slots from one master
// to another; the same load runs with no reshard in phases of its own,
// in the same run, alternating with the reshards (which move the slots
// back and forth). Each phase gives decisions per second and the server
// CPU per decision, utime+stime of the three nodes from /proc over the
// phase, the reshard's server-side work included; every allowed decision
// of the run is counted per key and window, and none may exceed the
// limit.
//
//	go run ./cmd/limitkv-bench cluster-reshard
//
// It writes cluster-reshard.md and cluster-reshard.json beside the
// other results.

func clusterReshardFlags(fs *flag.FlagSet, c *config) {
	fs.IntVar(&c.reshardSlots, "reshard-slots", 2000, "slots each reshard moves, with their keys")
	fs.IntVar(&c.reshardRounds, "reshard-rounds", 3, "rounds, each a phase without a reshard and one with a reshard")
	fs.DurationVar(&c.reshardSteady, "reshard-steady", 10*time.Second, "measured time of each phase without a reshard")
	fs.DurationVar(&c.reshardWarmup, "reshard-warmup", 2*time.Second, "load before the first phase")
	fs.IntVar(&c.reshardKeys, "reshard-keys", 20_000, "distinct keys, spread over the slots that move and drawn from a Zipf distribution (s = -cluster-zipf)")
}

// reshardPhase is what the load did in one phase.
type reshardPhase struct {
	Round       int     `json:"round"`
	Reshard     bool    `json:"reshard"`
	From        string  `json:"from,omitempty"` // the node the slots left
	Requests    int64   `json:"requests"`
	Seconds     float64 `json:"seconds"`
	RPS         float64 `json:"decisions_per_second"`
	CPUSeconds  float64 `json:"server_cpu_seconds"`
	CPUPerReqUs float64 `json:"server_cpu_per_decision_us"`
	ServerCores float64 `json:"server_cores"`
	P50         float64 `json:"p50_us"`
	P99         float64 `json:"p99_us"`
	Max         float64 `json:"max_us"`
	Errors      int64   `json:"error_replies"`
	FirstError  string  `json:"first_error,omitempty"`
}

// reshardSide is the medians of the phases of one kind.
type reshardSide struct {
	RPS         float64 `json:"median_decisions_per_second"`
	CPUPerReqUs float64 `json:"median_server_cpu_per_decision_us"`
	P50         float64 `json:"median_p50_us"`
	P99         float64 `json:"median_p99_us"`
	Max         float64 `json:"median_max_us"`
	Seconds     float64 `json:"median_seconds"`
}

type reshardResult struct {
	Masters     int            `json:"masters"`
	Conns       int            `json:"conns"`
	Slots       int            `json:"slots_moved_per_reshard"`
	Keys        int            `json:"keys"`
	Zipf        float64        `json:"zipf_s"`
	Command     string         `json:"command"`
	Steady      string         `json:"steady_phase"`
	Warmup      string         `json:"warmup"`
	NodeTimeout string         `json:"cluster_node_timeout"`
	RedisCli    string         `json:"redis_cli"`
	Phases      []reshardPhase `json:"phases"`
	Without     reshardSide    `json:"without_reshard"`
	During      reshardSide    `json:"during_reshard"`
	Check       allowedCheck   `json:"check"`
	Errors      int64          `json:"error_replies"`
}

// runClusterReshard is the scenario: cluster-reshard.md and .json.
func (b *bench) runClusterReshard(ctx context.Context, started time.Time, redisVersion string) (int, error) {
	m := b.meta(started, redisVersion)
	m.Duration, m.Warmup, m.Rounds, m.Users, m.Depths = b.cfg.reshardSteady.String(), b.cfg.reshardWarmup.String(), b.cfg.reshardRounds, b.cfg.reshardKeys, []int{1}
	res, err := b.reshardScenario(ctx)
	if err != nil {
		return 1, err
	}
	finish(&m, started)
	note := fmt.Sprintf("Shared with other builds (%d cores for everything: the three nodes, redis-cli, the load generator and whatever else runs).", runtime.NumCPU())
	rep := newReport("cluster-reshard", fmt.Sprintf("limitkv: rate limits through a %s-slot reshard", commas(float64(res.Slots))), m, note)
	rep.p("- limitkv: %s, commit %s, built with %s. %s.", m.LimitkvVersion, m.Commit, m.GoVersion, res.RedisCli)
	rep.p("")
	section := reshardMarkdown(res)
	b.logf("%s", section)
	rep.body.WriteString(section)
	rep.data = struct {
		Meta    meta           `json:"meta"`
		Reshard *reshardResult `json:"cluster_reshard"`
	}{m, res}
	if err := b.publish(rep, started); err != nil {
		return 1, err
	}
	if res.Errors > 0 || !res.Check.ok() {
		return 3, nil
	}
	return 0, nil
}

// reshardKeyNames are the keys of the load: rank r lives in slot
// r mod slots, which the reshards move.
func reshardKeyNames(keys, slots int) []string {
	tags := make([]string, slots)
	left := slots
	for n := 0; left > 0; n++ {
		t := strconv.Itoa(n)
		if s := cluster.KeySlot([]byte(t)); int(s) < slots && tags[s] == "" {
			tags[s] = t
			left--
		}
	}
	names := make([]string, keys)
	for r := range names {
		names[r] = "rl:{" + tags[r%slots] + "}:" + strconv.Itoa(r)
	}
	return names
}

// reshardWorker is one goroutine's share of the load, by phase.
type reshardWorker struct {
	phases []reshardPhase
	hists  []histogram
	counts map[windowKey]int64
	denied int64
}

func (b *bench) reshardScenario(ctx context.Context) (*reshardResult, error) {
	cfg := b.cfg
	cli, cliVersion, err := findTool("redis-cli", cfg.redisCliBin, "-redis-cli")
	if err != nil {
		return nil, err
	}
	res := &reshardResult{Masters: clusterMasters, Conns: cfg.conns, Slots: cfg.reshardSlots, Keys: cfg.reshardKeys, Zipf: cfg.clusterZipf,
		Command: fmt.Sprintf("RL.FIXED key %d %s", clusterLimit, clusterWindowID), Steady: cfg.reshardSteady.String(), Warmup: cfg.reshardWarmup.String(),
		NodeTimeout: strconv.FormatInt(cfg.clusterNodeTimeout.Milliseconds(), 10), RedisCli: cliVersion}
	b.logf("cluster-reshard: %d limitkv masters; %d goroutines through go-redis's ClusterClient on %s keys in the %s slots that move; %d round(s) of %s without a reshard and one reshard",
		clusterMasters, cfg.conns, commas(float64(cfg.reshardKeys)), commas(float64(cfg.reshardSlots)), cfg.reshardRounds, cfg.reshardSteady)
	c, err := b.startBenchCluster(ctx, cli, kindLimitkv, "--persistence", "no", "--loglevel", "warning")
	if err != nil {
		return nil, err
	}
	defer c.close()
	c.decide = limitkvDecider(c.cc)
	var addrs, ids []string
	for _, n := range c.nodes {
		addrs = append(addrs, n.Addr)
		cl, err := dial(n.Addr)
		if err != nil {
			return nil, err
		}
		v, err := cl.ok("CLUSTER", "MYID")
		cl.close()
		if err != nil {
			return nil, err
		}
		ids = append(ids, string(v.Str))
	}

	// The load runs through every phase; each decision counts in the
	// phase it completed in (-1: between phases, not measured).
	names := reshardKeyNames(cfg.reshardKeys, cfg.reshardSlots)
	nPhases := 2 * cfg.reshardRounds
	var phase atomic.Int32
	phase.Store(-1)
	var stop atomic.Bool
	workers := make([]*reshardWorker, cfg.conns)
	var wg sync.WaitGroup
	for i := range workers {
		w := &reshardWorker{phases: make([]reshardPhase, nPhases), hists: make([]histogram, nPhases), counts: map[windowKey]int64{}}
		workers[i] = w
		rng := rand.New(rand.NewSource(int64(i)))
		zipf := rand.NewZipf(rng, cfg.clusterZipf, 1, uint64(cfg.reshardKeys-1))
		wg.Go(func() {
			for !stop.Load() && ctx.Err() == nil {
				rank := zipf.Uint64()
				t0 := time.Now()
				allowed, window, err := c.decide(ctx, names[rank])
				d := time.Since(t0)
				if p := phase.Load(); p >= 0 {
					ph := &w.phases[p]
					w.hists[p].record(d)
					ph.Requests++
					if err != nil {
						ph.Errors++
						if ph.FirstError == "" {
							ph.FirstError = err.Error()
						}
					}
				}
				switch {
				case err != nil:
				case allowed:
					w.counts[windowKey{rank, window}]++
				default:
					w.denied++
				}
			}
		})
	}
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()
	sleep := func(d time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	}
	serverTicks := func() int64 {
		var t int64
		for _, p := range c.pids() {
			t += cpuTicks(p)
		}
		return t
	}
	if err := sleep(cfg.reshardWarmup); err != nil {
		return nil, err
	}
	type mark struct {
		at    time.Time
		ticks int64
	}
	marks := make([][2]mark, nPhases)
	from := 0
	for p := range nPhases {
		if p%2 == 1 {
			// Nodes agree before each reshard: redis-cli refuses to
			// start otherwise.
			if err := waitClusterAgree(ctx, cli, addrs[0], time.Minute); err != nil {
				return nil, err
			}
		}
		marks[p][0] = mark{time.Now(), serverTicks()}
		phase.Store(int32(p))
		if p%2 == 0 {
			err = sleep(cfg.reshardSteady)
		} else {
			to := 1 - from
			b.logf("  round %d: resharding %d slots from %s to %s", p/2+1, cfg.reshardSlots, addrs[from], addrs[to])
			err = reshard(ctx, cli, addrs[from], ids[from], ids[to], cfg.reshardSlots)
		}
		phase.Store(-1)
		marks[p][1] = mark{time.Now(), serverTicks()}
		if err != nil {
			return nil, err
		}
		if p%2 == 1 {
			res.Phases = append(res.Phases, reshardPhase{Reshard: true, From: addrs[from]})
			from = 1 - from
		} else {
			res.Phases = append(res.Phases, reshardPhase{})
		}
	}
	stop.Store(true)
	wg.Wait()

	counts := map[windowKey]int64{}
	var denied int64
	for _, w := range workers {
		denied += w.denied
		for k, n := range w.counts {
			counts[k] += n
		}
	}
	res.Check = checkAllowed(counts, clusterLimit)
	res.Check.Denied = denied
	var without, during []reshardPhase
	for p := range res.Phases {
		ph := &res.Phases[p]
		ph.Round = p/2 + 1
		var hist histogram
		for _, w := range workers {
			x := w.phases[p]
			hist.merge(&w.hists[p])
			ph.Requests += x.Requests
			ph.Errors += x.Errors
			if ph.FirstError == "" {
				ph.FirstError = x.FirstError
			}
		}
		res.Errors += ph.Errors
		ph.Seconds = marks[p][1].at.Sub(marks[p][0].at).Seconds()
		ph.CPUSeconds = float64(marks[p][1].ticks-marks[p][0].ticks) / clockTick
		ph.RPS = float64(ph.Requests) / ph.Seconds
		ph.CPUPerReqUs = cpuPerOpUs(ph.CPUSeconds, ph.Requests)
		ph.ServerCores = ph.CPUSeconds / ph.Seconds
		ph.P50, ph.P99, ph.Max = us(hist.quantile(0.5)), us(hist.quantile(0.99)), us(hist.quantile(1))
		if ph.Reshard {
			during = append(during, *ph)
		} else {
			without = append(without, *ph)
		}
		kind := "without a reshard"
		if ph.Reshard {
			kind = "resharding from " + ph.From
		}
		b.logf("  round %d, %s: %.1f s, %s decisions/s, server CPU %.1f µs/decision (%.2f cores), p50 %.0f p99 %.0f max %.0f µs, errors %d",
			ph.Round, kind, ph.Seconds, commas(ph.RPS), ph.CPUPerReqUs, ph.ServerCores, ph.P50, ph.P99, ph.Max, ph.Errors)
	}
	if res.Phases[0].Requests == 0 {
		return nil, errors.New("no decision completed in the first phase")
	}
	res.Without, res.During = summarizePhases(without), summarizePhases(during)
	return res, nil
}

func summarizePhases(ps []reshardPhase) reshardSide {
	pick := func(f func(reshardPhase) float64) float64 {
		var v []float64
		for _, p := range ps {
			v = append(v, f(p))
		}
		return median(v)
	}
	return reshardSide{
		RPS:         pick(func(p reshardPhase) float64 { return p.RPS }),
		CPUPerReqUs: pick(func(p reshardPhase) float64 { return p.CPUPerReqUs }),
		P50:         pick(func(p reshardPhase) float64 { return p.P50 }),
		P99:         pick(func(p reshardPhase) float64 { return p.P99 }),
		Max:         pick(func(p reshardPhase) float64 { return p.Max }),
		Seconds:     pick(func(p reshardPhase) float64 { return p.Seconds }),
	}
}

// movingSlotLine is what redis-cli prints as it starts to move a slot.
var movingSlotLine = regexp.MustCompile(`(?m)^Moving slot \d+ from \S+ to \S+: `)

// reshard runs redis-cli --cluster reshard of n slots from one node to
// another, and checks that it moved them all.
func reshard(ctx context.Context, cli, addr, from, to string, n int) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	args := []string{"--cluster", "reshard", addr, "--cluster-from", from, "--cluster-to", to,
		"--cluster-slots", strconv.Itoa(n), "--cluster-yes"}
	out, err := exec.CommandContext(cctx, cli, args...).CombinedOutput()
	if moved := len(movingSlotLine.FindAll(out, -1)); err != nil || moved != n {
		return fmt.Errorf("redis-cli %s: %v, %d slots moved, want %d:\n%s", strings.Join(args, " "), err, moved, n, lastLines(string(out), 20))
	}
	return nil
}

// waitClusterAgree waits until redis-cli --cluster check finds every node
// agreeing and no slot open.
func waitClusterAgree(ctx context.Context, cli, addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		out, err := exec.CommandContext(ctx, cli, "--cluster", "check", addr).CombinedOutput()
		if err == nil && !strings.Contains(string(out), "[WARNING]") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the nodes did not agree within %v:\n%s", within, lastLines(string(out), 20))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// reshardMarkdown is the page's body.
func reshardMarkdown(r *reshardResult) string {
	var b strings.Builder
	p := func(f string, a ...any) { fmt.Fprintf(&b, f+"\n", a...) }
	p("## The rate limit while %s slots move", commas(float64(r.Slots)))
	p("")
	p("One cluster of %d limitkv masters and no replicas on loopback (`--persistence no`), made by `redis-cli --cluster create`; `--cluster-node-timeout` %s. %d goroutines share one go-redis v9 `ClusterClient` (pool of %d connections per node), each sending `%s` one at a time (closed loop) on keys `rl:{tag}:<n>`, n drawn from a Zipf distribution (s = %g) over %s keys spread over the %s slots that move, so that every decision is on a slot a reshard moves and the hottest keys reach their limit.",
		r.Masters, r.NodeTimeout, r.Conns, r.Conns, r.Command, r.Zipf, commas(float64(r.Keys)), commas(float64(r.Slots)))
	p("")
	p("After %s of warmup, phases alternate in one run: %s with no reshard, then `redis-cli --cluster reshard --cluster-slots %d --cluster-yes` (its default pipeline of 10 keys per `MIGRATE`) moving the slots to another master, measured from its start to its end; the next reshard moves them back. Server CPU is utime + stime of the three nodes from `/proc/<pid>/stat` over the phase, divided by the decisions answered in it: during a reshard it includes the nodes' share of the reshard (`CLUSTER SETSLOT`, `GETKEYSINSLOT`, `MIGRATE`, `RESTORE-ASKING`), not redis-cli's. Latency is each decision's round trip through the client, redirections included. Figures are medians of the phases of each kind.",
		r.Warmup, r.Steady, r.Slots)
	p("")
	times := func(a, b float64) string {
		if b == 0 {
			return ""
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	p("| | without a reshard | during a reshard | during / without |")
	p("|---|---:|---:|---:|")
	p("| decisions/s | %s | %s | %s |", commas(r.Without.RPS), commas(r.During.RPS), times(r.During.RPS, r.Without.RPS))
	p("| server CPU per decision (3 nodes) | %.1f µs | %.1f µs | %s |", r.Without.CPUPerReqUs, r.During.CPUPerReqUs, times(r.During.CPUPerReqUs, r.Without.CPUPerReqUs))
	p("| latency p50 | %.0f µs | %.0f µs | %s |", r.Without.P50, r.During.P50, times(r.During.P50, r.Without.P50))
	p("| latency p99 | %.0f µs | %.0f µs | %s |", r.Without.P99, r.During.P99, times(r.During.P99, r.Without.P99))
	p("| latency max | %.0f µs | %.0f µs | %s |", r.Without.Max, r.During.Max, times(r.During.Max, r.Without.Max))
	p("| phase length | %.1f s | %.1f s | |", r.Without.Seconds, r.During.Seconds)
	p("")
	p("### Phases")
	p("")
	p("| round | phase | seconds | decisions/s | server CPU/decision | server cores | p50 | p99 | max | errors |")
	p("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, x := range r.Phases {
		kind := "without a reshard"
		if x.Reshard {
			kind = "reshard from " + x.From
		}
		errs := strconv.FormatInt(x.Errors, 10)
		if x.FirstError != "" {
			errs += " (" + x.FirstError + ")"
		}
		p("| %d | %s | %.1f | %s | %.1f µs | %.2f | %.0f µs | %.0f µs | %.0f µs | %s |", x.Round, kind, x.Seconds, commas(x.RPS), x.CPUPerReqUs, x.ServerCores, x.P50, x.P99, x.Max, errs)
	}
	p("")
	p("### Correctness: allowed decisions per key and window")
	p("")
	p("Every allowed decision of the run, warmup and reshards included, is counted per key and window (windows aligned to the minute, told apart by the reply's `reset_after_ms`); no window may hold more than %d, wherever its key was when each decision was made.", clusterLimit)
	p("")
	p("| allowed / denied decisions | key windows with an allowed decision | of those, at the limit | most allowed in one window | windows over the limit | error replies |")
	p("|---:|---:|---:|---:|---:|---:|")
	p("| %s / %s | %s | %s | %d | %d (%s) | %d |", commas(float64(r.Check.Allowed)), commas(float64(r.Check.Denied)), commas(float64(r.Check.Windows)),
		commas(float64(r.Check.AtLimit)), r.Check.MaxAllowed, r.Check.Over, verdict(r.Check), r.Errors)
	p("")
	p("### Reading")
	p("")
	p("%s", reshardReading(r))
	return b.String()
}

// reshardReading says in words what the figures say.
func reshardReading(r *reshardResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "While %s slots moved (%.1f s a reshard, median), the cluster answered %.2fx the decisions per second it answered with no reshard, at %.2fx the server CPU per decision, p99 %.2fx.",
		commas(float64(r.Slots)), r.During.Seconds, ratio(r.During.RPS, r.Without.RPS), ratio(r.During.CPUPerReqUs, r.Without.CPUPerReqUs), ratio(r.During.P99, r.Without.P99))
	if r.Check.ok() && r.Errors == 0 {
		b.WriteString(" No key's window admitted more than the limit, and every reply was a decision: the redirections (`MOVED`, `ASK`) were the client's to follow.")
	} else {
		fmt.Fprintf(&b, " Windows over the limit: %d; error replies: %d.", r.Check.Over, r.Errors)
	}
	b.WriteString(" The load generator and redis-cli share the machine's cores with the nodes, so the decisions per second are this machine's; the server CPU per decision, read per process, is the figure that carries over.")
	return b.String()
}
