package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limitkv/limitkv/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// The cluster scenario: the rate limit as a cluster-aware client sends it
// to a 3-master Redis Cluster, of limitkv nodes (RL.FIXED) and of
// redis-server nodes (the INCR + PEXPIRE script users write), both made by
// redis-cli --cluster create and driven by go-redis's ClusterClient from
// -conns goroutines. The keys are drawn from a Zipf distribution over
// -cluster-keys keys, so that the hot keys reach their limit and the
// denials are part of the load, as they are for a rate limiter under
// abuse; every allowed decision is counted per key and window, and no
// window may hold more than the limit.
//
//	go run ./cmd/limitkv-bench cluster
//
// It writes cluster.md and cluster.json beside the other results.

func clusterFlags(fs *flag.FlagSet, c *config) {
	fs.DurationVar(&c.clusterDuration, "cluster-duration", 15*time.Second, "measured time of each round on each cluster")
	fs.DurationVar(&c.clusterWarmup, "cluster-warmup", 2*time.Second, "unmeasured load before each round's window")
	fs.IntVar(&c.clusterRounds, "cluster-rounds", 3, "rounds, each measuring both clusters, their order alternating")
	fs.IntVar(&c.clusterKeys, "cluster-keys", 100_000, "distinct keys, drawn from a Zipf distribution")
}

// clusterNodeFlags are read by both cluster scenarios: how the nodes run
// and how the keys are drawn.
func clusterNodeFlags(fs *flag.FlagSet, c *config) {
	fs.Float64Var(&c.clusterZipf, "cluster-zipf", 1.1, "the Zipf exponent s (> 1) of the keys' draw: larger is hotter")
	fs.DurationVar(&c.clusterNodeTimeout, "cluster-node-timeout", 5*time.Second, "cluster-node-timeout of every node")
	fs.StringVar(&c.redisCliBin, "redis-cli", "", "use this redis-cli (default: redis-cli from PATH)")
}

const (
	clusterLimit    = 100
	clusterWindow   = time.Minute
	clusterWindowID = "1m"
	clusterMasters  = 3
)

// clusterFixedLua is the fixed window as users write it for Redis: the
// count, with the TTL set by the request that created it; the decision is
// the caller's.
const clusterFixedLua = `local c = redis.call('INCR', KEYS[1])
if c == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return c`

type clusterResult struct {
	Masters     int             `json:"masters"`
	Conns       int             `json:"conns"`
	Keys        int             `json:"keys"`
	Zipf        float64         `json:"zipf_s"`
	Limit       int             `json:"limit"`
	Window      string          `json:"window"`
	Duration    string          `json:"duration"`
	Warmup      string          `json:"warmup"`
	NodeTimeout string          `json:"cluster_node_timeout"`
	RedisCli    string          `json:"redis_cli"`
	Limitkv     clusterSide     `json:"limitkv"`
	Redis       clusterSide     `json:"redis"`
	Ratios      clusterRatios   `json:"limitkv_over_redis"`
	Order       []string        `json:"order"` // which cluster ran first in each round
	RoundsRaw   []clusterRoundP `json:"rounds"`
}

// clusterSide is one cluster's medians over the rounds and its check.
type clusterSide struct {
	Command     string         `json:"command"`
	RPS         float64        `json:"median_rps"`
	CPUPerReqUs float64        `json:"median_server_cpu_per_request_us"`
	P50         float64        `json:"median_p50_us"`
	P99         float64        `json:"median_p99_us"`
	Max         float64        `json:"median_max_us"`
	Errors      int64          `json:"error_replies"`
	FirstError  string         `json:"first_error,omitempty"`
	Check       allowedCheck   `json:"check"`
	Rounds      []clusterRound `json:"rounds"`
}

type clusterRatios struct {
	RPS         float64 `json:"rps"`
	CPUPerReqUs float64 `json:"server_cpu_per_request"`
	P50         float64 `json:"p50"`
	P99         float64 `json:"p99"`
	Max         float64 `json:"max"`
}

// clusterRound is what one cluster did in one round's measured window.
type clusterRound struct {
	Round       int     `json:"round"`
	Requests    int64   `json:"requests"`
	Seconds     float64 `json:"seconds"`
	RPS         float64 `json:"rps"`
	CPUSeconds  float64 `json:"server_cpu_seconds"`
	CPUPerReqUs float64 `json:"server_cpu_per_request_us"`
	ServerCores float64 `json:"server_cores"`
	ClientCores float64 `json:"client_cores"`
	P50         float64 `json:"p50_us"`
	P99         float64 `json:"p99_us"`
	Max         float64 `json:"max_us"`
	Allowed     int64   `json:"allowed"`
	Denied      int64   `json:"denied"`
}

// clusterRoundP names a round's pair for the JSON's order of events.
type clusterRoundP struct {
	Round int    `json:"round"`
	Kind  string `json:"kind"`
}

// windowKey is one key's window: the allowed decisions of each are
// counted and none may exceed the limit.
type windowKey struct {
	rank   uint64
	window int64
}

// allowedCheck is the outcome of counting the allowed decisions per key
// and window.
type allowedCheck struct {
	Windows    int   `json:"key_windows"`          // keys' windows with an allowed decision
	AtLimit    int   `json:"key_windows_at_limit"` // of those, windows that used all of the limit
	Over       int   `json:"key_windows_over_limit"`
	MaxAllowed int64 `json:"most_allowed_in_a_window"`
	Allowed    int64 `json:"allowed"`
	Denied     int64 `json:"denied"`
}

func (a allowedCheck) ok() bool { return a.Over == 0 }

// add merges the check of another round.
func (a *allowedCheck) add(o allowedCheck) {
	a.Windows += o.Windows
	a.AtLimit += o.AtLimit
	a.Over += o.Over
	a.MaxAllowed = max(a.MaxAllowed, o.MaxAllowed)
	a.Allowed += o.Allowed
	a.Denied += o.Denied
}

// checkAllowed counts the windows that used all of limit and those that
// went over it.
func checkAllowed(counts map[windowKey]int64, limit int64) allowedCheck {
	var a allowedCheck
	for _, n := range counts {
		a.Windows++
		a.Allowed += n
		a.MaxAllowed = max(a.MaxAllowed, n)
		switch {
		case n > limit:
			a.Over++
		case n == limit:
			a.AtLimit++
		}
	}
	return a
}

// windowOf names the window of an RL.FIXED decision: windows are aligned
// to multiples of their length since the epoch, and the reply's
// reset_after_ms says when the current one ends, so the end, rounded to
// the nearest boundary, is the window's index whatever the reply's delay.
func windowOf(nowMs, resetAfterMs int64, window time.Duration) int64 {
	w := window.Milliseconds()
	return (nowMs + resetAfterMs + w/2) / w
}

// clusterDecider makes one decision on a key: whether it was allowed, and
// the window it counts in.
type clusterDecider func(ctx context.Context, key string) (allowed bool, window int64, err error)

func limitkvDecider(cc *redis.ClusterClient) clusterDecider {
	return func(ctx context.Context, key string) (bool, int64, error) {
		v, err := cc.Do(ctx, "RL.FIXED", key, clusterLimit, clusterWindowID).Int64Slice()
		if err != nil {
			return false, 0, err
		}
		if len(v) != 5 {
			return false, 0, fmt.Errorf("RL.FIXED answered %d integers, want 5", len(v))
		}
		return v[0] == 1, windowOf(time.Now().UnixMilli(), v[4], clusterWindow), nil
	}
}

// redisDecider runs the script through go-redis's Script, which sends
// EVALSHA and falls back to EVAL. Its window is the key's only one: the
// keys of a round are new and a round is shorter than the window, which
// starts at the key's first INCR.
func redisDecider(cc *redis.ClusterClient, script *redis.Script) clusterDecider {
	windowMs := clusterWindow.Milliseconds()
	return func(ctx context.Context, key string) (bool, int64, error) {
		c, err := script.Run(ctx, cc, []string{key}, windowMs).Int64()
		if err != nil {
			return false, 0, err
		}
		return c <= clusterLimit, 0, nil
	}
}

// runCluster is the scenario: cluster.md and .json.
func (b *bench) runCluster(ctx context.Context, started time.Time, redisVersion string) (int, error) {
	m := b.meta(started, redisVersion)
	m.Duration, m.Warmup, m.Rounds, m.Users, m.Depths = b.cfg.clusterDuration.String(), b.cfg.clusterWarmup.String(), b.cfg.clusterRounds, b.cfg.clusterKeys, []int{1}
	res, err := b.clusterScenario(ctx)
	if err != nil {
		return 1, err
	}
	finish(&m, started)
	note := fmt.Sprintf("Shared with other builds (%d cores for everything: the six nodes, the load generator and whatever else runs).", runtime.NumCPU())
	rep := newReport("cluster", "limitkv: Redis Cluster, RL.FIXED against the INCR + PEXPIRE script", m, note)
	rep.p("- limitkv: %s, commit %s, built with %s. Redis: %s. %s.", m.LimitkvVersion, m.Commit, m.GoVersion, m.RedisVersion, res.RedisCli)
	rep.p("")
	section := clusterMarkdown(res)
	b.logf("%s", section)
	rep.body.WriteString(section)
	rep.data = struct {
		Meta    meta           `json:"meta"`
		Cluster *clusterResult `json:"cluster"`
	}{m, res}
	if err := b.publish(rep, started); err != nil {
		return 1, err
	}
	if res.Limitkv.Errors > 0 || res.Redis.Errors > 0 || !res.Limitkv.Check.ok() || !res.Redis.Check.ok() {
		return 3, nil
	}
	return 0, nil
}

// benchCluster is one running cluster and its client.
type benchCluster struct {
	kind   string
	nodes  []*server
	cc     *redis.ClusterClient
	decide clusterDecider
}

func (c *benchCluster) pids() []int {
	var p []int
	for _, n := range c.nodes {
		p = append(p, n.Pid())
	}
	return p
}

func (c *benchCluster) close() {
	if c.cc != nil {
		c.cc.Close()
	}
	for _, n := range c.nodes {
		n.Stop()
	}
}

func (b *bench) clusterScenario(ctx context.Context) (*clusterResult, error) {
	cfg := b.cfg
	cli, cliVersion, err := findTool("redis-cli", cfg.redisCliBin, "-redis-cli")
	if err != nil {
		return nil, err
	}
	res := &clusterResult{Masters: clusterMasters, Conns: cfg.conns, Keys: cfg.clusterKeys, Zipf: cfg.clusterZipf, Limit: clusterLimit,
		Window: clusterWindowID, Duration: cfg.clusterDuration.String(), Warmup: cfg.clusterWarmup.String(),
		NodeTimeout: strconv.FormatInt(cfg.clusterNodeTimeout.Milliseconds(), 10), RedisCli: cliVersion}
	res.Limitkv.Command = fmt.Sprintf("RL.FIXED key %d %s", clusterLimit, clusterWindowID)
	res.Redis.Command = "EVALSHA of the INCR + PEXPIRE script, allowed when the count <= limit"
	b.logf("cluster: two clusters of %d masters, limitkv and redis-server; %d goroutines through go-redis's ClusterClient; %s keys, Zipf s=%g; %d round(s) of %s (+%s warmup) each",
		clusterMasters, cfg.conns, commas(float64(cfg.clusterKeys)), cfg.clusterZipf, cfg.clusterRounds, cfg.clusterDuration, cfg.clusterWarmup)

	lk, err := b.startBenchCluster(ctx, cli, kindLimitkv, "--persistence", "no", "--loglevel", "warning")
	if err != nil {
		return nil, err
	}
	defer lk.close()
	lk.decide = limitkvDecider(lk.cc)
	rd, err := b.startBenchCluster(ctx, cli, kindRedis, "--loglevel", "warning")
	if err != nil {
		return nil, err
	}
	defer rd.close()
	script := redis.NewScript(clusterFixedLua)
	// Loaded on every master up front, so that no measured request pays
	// for the fallback to EVAL.
	if err := rd.cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		return script.Load(ctx, c).Err()
	}); err != nil {
		return nil, fmt.Errorf("SCRIPT LOAD: %v", err)
	}
	rd.decide = redisDecider(rd.cc, script)

	sides := map[string]*clusterSide{kindLimitkv: &res.Limitkv, kindRedis: &res.Redis}
	for round := 1; round <= cfg.clusterRounds; round++ {
		order := []*benchCluster{lk, rd}
		if round%2 == 0 {
			order = []*benchCluster{rd, lk}
		}
		res.Order = append(res.Order, order[0].kind+" first")
		for _, c := range order {
			side := sides[c.kind]
			r, check, errs, firstErr, err := b.clusterRound(ctx, c, round)
			if err != nil {
				return nil, fmt.Errorf("%s, round %d: %v", c.kind, round, err)
			}
			side.Rounds = append(side.Rounds, r)
			side.Check.add(check)
			side.Errors += errs
			if side.FirstError == "" {
				side.FirstError = firstErr
			}
			res.RoundsRaw = append(res.RoundsRaw, clusterRoundP{Round: round, Kind: c.kind})
			b.logf("  %-7s round %d: %s req/s, server CPU %.1f µs/request (%.2f cores, client %.2f), p50 %.0f p99 %.0f max %.0f µs; %s allowed, %s denied, most allowed in a window %d, windows over the limit %d, errors %d",
				c.kind, round, commas(r.RPS), r.CPUPerReqUs, r.ServerCores, r.ClientCores, r.P50, r.P99, r.Max,
				commas(float64(check.Allowed)), commas(float64(check.Denied)), check.MaxAllowed, check.Over, errs)
		}
	}
	for _, s := range sides {
		s.summarize()
	}
	res.Ratios = clusterRatios{
		RPS: ratio(res.Limitkv.RPS, res.Redis.RPS), CPUPerReqUs: ratio(res.Limitkv.CPUPerReqUs, res.Redis.CPUPerReqUs),
		P50: ratio(res.Limitkv.P50, res.Redis.P50), P99: ratio(res.Limitkv.P99, res.Redis.P99), Max: ratio(res.Limitkv.Max, res.Redis.Max),
	}
	return res, nil
}

// summarize takes the medians of the rounds.
func (s *clusterSide) summarize() {
	pick := func(f func(clusterRound) float64) float64 {
		var v []float64
		for _, r := range s.Rounds {
			v = append(v, f(r))
		}
		return median(v)
	}
	s.RPS = pick(func(r clusterRound) float64 { return r.RPS })
	s.CPUPerReqUs = pick(func(r clusterRound) float64 { return r.CPUPerReqUs })
	s.P50 = pick(func(r clusterRound) float64 { return r.P50 })
	s.P99 = pick(func(r clusterRound) float64 { return r.P99 })
	s.Max = pick(func(r clusterRound) float64 { return r.Max })
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// startBenchCluster starts three nodes of kind, makes them a cluster with
// redis-cli --cluster create, waits until every node says the cluster is
// ok, and connects a ClusterClient to it.
func (b *bench) startBenchCluster(ctx context.Context, cli, kind string, extra ...string) (*benchCluster, error) {
	kinds := make([]string, clusterMasters)
	for i := range kinds {
		kinds[i] = kind
	}
	nodes, err := testserver.StartCluster(testserver.ClusterSpec{Kinds: kinds, Limitkv: b.limitkvBin, Redis: b.redisBin,
		Dir: filepath.Join(b.tmp, "cluster-"+kind), NodeTimeout: b.cfg.clusterNodeTimeout, Extra: extra})
	if err != nil {
		return nil, fmt.Errorf("%s cluster: %v", kind, err)
	}
	c := &benchCluster{kind: kind, nodes: nodes}
	args := []string{"--cluster", "create"}
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr)
	}
	args = append(append(args, addrs...), "--cluster-replicas", "0", "--cluster-yes")
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(cctx, cli, args...).CombinedOutput(); err != nil {
		c.close()
		return nil, fmt.Errorf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if err := waitClusterOK(ctx, addrs, time.Minute); err != nil {
		c.close()
		return nil, fmt.Errorf("%s cluster: %v", kind, err)
	}
	b.logf("  %s cluster up: %s", kind, strings.Join(addrs, " "))
	c.cc = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, PoolSize: b.cfg.conns, DialTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second})
	if err := c.cc.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return n.Ping(ctx).Err() }); err != nil {
		c.close()
		return nil, fmt.Errorf("%s cluster: %v", kind, err)
	}
	return c, nil
}

// waitClusterOK waits until every node knows all the others, sees every
// slot served and says cluster_state:ok.
func waitClusterOK(ctx context.Context, addrs []string, within time.Duration) error {
	deadline := time.Now().Add(within)
	want := map[string]string{"cluster_state": "ok", "cluster_slots_ok": "16384", "cluster_known_nodes": strconv.Itoa(len(addrs))}
	last := ""
	for {
		ok := true
		for _, a := range addrs {
			if miss := clusterInfoMisses(a, want); miss != "" {
				ok, last = false, a+": "+miss
				break
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ok within %v: %s", within, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// clusterInfoMisses says which of the wanted CLUSTER INFO fields a node
// does not show, or "" if it shows them all.
func clusterInfoMisses(addr string, want map[string]string) string {
	c, err := dial(addr)
	if err != nil {
		return err.Error()
	}
	defer c.close()
	v, err := c.ok("CLUSTER", "INFO")
	if err != nil {
		return err.Error()
	}
	got := map[string]string{}
	for _, line := range strings.Split(string(v.Str), "\r\n") {
		if k, val, ok := strings.Cut(line, ":"); ok {
			got[k] = val
		}
	}
	var miss []string
	for k, w := range want {
		if got[k] != w {
			miss = append(miss, fmt.Sprintf("%s is %q, want %q", k, got[k], w))
		}
	}
	return strings.Join(miss, ", ")
}

// clusterWorker is one goroutine's share of a round.
type clusterWorker struct {
	hist     histogram
	ops      int64 // completed in the measured window
	denied   int64
	errors   int64
	firstErr string
	counts   map[windowKey]int64
}

// clusterRound runs one round on one cluster: warmup, the measured
// window, then the check of the allowed decisions of the whole round, on
// keys no earlier round used.
func (b *bench) clusterRound(ctx context.Context, c *benchCluster, round int) (clusterRound, allowedCheck, int64, string, error) {
	cfg := b.cfg
	prefix := fmt.Sprintf("rl:%d:", round)
	var phase atomic.Int32
	workers := make([]*clusterWorker, cfg.conns)
	var wg sync.WaitGroup
	for i := range workers {
		w := &clusterWorker{counts: map[windowKey]int64{}}
		workers[i] = w
		// The same seeds on both clusters: both see the same keys in the
		// same order from each goroutine.
		rng := rand.New(rand.NewSource(int64(round)<<20 + int64(i)))
		zipf := rand.NewZipf(rng, cfg.clusterZipf, 1, uint64(cfg.clusterKeys-1))
		wg.Go(func() {
			for {
				ph := phase.Load()
				if ph == phaseStop || ctx.Err() != nil {
					return
				}
				rank := zipf.Uint64()
				t0 := time.Now()
				allowed, window, err := c.decide(ctx, prefix+strconv.FormatUint(rank, 10))
				d := time.Since(t0)
				if phase.Load() == phaseMeasure {
					w.hist.record(d)
					w.ops++
				}
				switch {
				case err != nil:
					w.errors++
					if w.firstErr == "" {
						w.firstErr = err.Error()
					}
				case allowed:
					w.counts[windowKey{rank, window}]++
				default:
					w.denied++
				}
			}
		})
	}
	sleep := func(d time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	}
	pids := c.pids()
	serverTicks := func() int64 {
		var t int64
		for _, p := range pids {
			t += cpuTicks(p)
		}
		return t
	}
	err := sleep(cfg.clusterWarmup)
	var start time.Time
	var s0, c0 int64
	if err == nil {
		start, s0, c0 = time.Now(), serverTicks(), cpuTicks(os.Getpid())
		phase.Store(phaseMeasure)
		err = sleep(cfg.clusterDuration)
	}
	phase.Store(phaseDrain)
	s1, c1 := serverTicks(), cpuTicks(os.Getpid())
	secs := time.Since(start).Seconds()
	phase.Store(phaseStop)
	wg.Wait()
	if err != nil {
		return clusterRound{}, allowedCheck{}, 0, "", err
	}
	var hist histogram
	counts := map[windowKey]int64{}
	var ops, denied, errs int64
	firstErr := ""
	for _, w := range workers {
		hist.merge(&w.hist)
		ops, denied, errs = ops+w.ops, denied+w.denied, errs+w.errors
		if firstErr == "" {
			firstErr = w.firstErr
		}
		for k, n := range w.counts {
			counts[k] += n
		}
	}
	if ops == 0 {
		return clusterRound{}, allowedCheck{}, errs, firstErr, errors.New("no request completed in the window")
	}
	check := checkAllowed(counts, clusterLimit)
	check.Denied = denied
	cpuSecs := float64(s1-s0) / clockTick
	q := func(x float64) float64 { return us(hist.quantile(x)) }
	r := clusterRound{Round: round, Requests: ops, Seconds: secs, RPS: float64(ops) / secs,
		CPUSeconds: cpuSecs, CPUPerReqUs: cpuPerOpUs(cpuSecs, ops),
		ServerCores: cpuSecs / secs, ClientCores: float64(c1-c0) / clockTick / secs,
		P50: q(0.5), P99: q(0.99), Max: q(1), Allowed: check.Allowed, Denied: denied}
	return r, check, errs, firstErr, nil
}

// clusterMarkdown is the page's body.
func clusterMarkdown(r *clusterResult) string {
	var b strings.Builder
	p := func(f string, a ...any) { fmt.Fprintf(&b, f+"\n", a...) }
	p("## Rate limits on a 3-master Redis Cluster")
	p("")
	p("Two clusters of %d masters and no replicas on loopback, one of limitkv nodes (`--persistence no`) and one of redis-server nodes (no RDB, no AOF), each made by `redis-cli --cluster create ... --cluster-replicas 0 --cluster-yes` and waited for until every node said `cluster_state:ok`; `--cluster-node-timeout` %s. Both run side by side; the rounds alternate them (%s). In each round, on keys no earlier round used, %d goroutines share one go-redis v9 `ClusterClient` (pool of %d connections per node), each sending one request at a time (closed loop), for %s of warmup and %s measured. Keys are `rl:<round>:<n>`, n drawn from a Zipf distribution (s = %g) over %s keys, so they fall on slots all over the cluster while the hottest keys reach their limit and are denied.",
		clusterMasters, r.NodeTimeout, strings.Join(r.Order, ", "), r.Conns, r.Conns, r.Warmup, r.Duration, r.Zipf, commas(float64(r.Keys)))
	p("")
	p("- limitkv: `%s`, allowed when the reply's first integer is 1.", r.Limitkv.Command)
	p("- redis-server: `EVALSHA` (go-redis's `Script.Run`, loaded on every master with `SCRIPT LOAD` first) of")
	p("")
	p("  ```lua")
	for _, line := range strings.Split(clusterFixedLua, "\n") {
		p("  %s", line)
	}
	p("  ```")
	p("")
	p("  with `ARGV[1]` = %d, allowed when the count is at most %d.", clusterWindow.Milliseconds(), r.Limit)
	p("")
	p("Server CPU is utime + stime of the three nodes from `/proc/<pid>/stat` over the window, divided by the requests done in it. Latency is each request's round trip through the client, from one histogram per round. Figures are medians of the rounds.")
	p("")
	p("| | limitkv | redis-server | limitkv / redis |")
	p("|---|---:|---:|---:|")
	p("| requests/s | %s | %s | %.2f |", commas(r.Limitkv.RPS), commas(r.Redis.RPS), r.Ratios.RPS)
	p("| server CPU per request (3 nodes) | %.1f µs | %.1f µs | %.2f |", r.Limitkv.CPUPerReqUs, r.Redis.CPUPerReqUs, r.Ratios.CPUPerReqUs)
	p("| latency p50 | %.0f µs | %.0f µs | %.2f |", r.Limitkv.P50, r.Redis.P50, r.Ratios.P50)
	p("| latency p99 | %.0f µs | %.0f µs | %.2f |", r.Limitkv.P99, r.Redis.P99, r.Ratios.P99)
	p("| latency max | %.0f µs | %.0f µs | %.2f |", r.Limitkv.Max, r.Redis.Max, r.Ratios.Max)
	p("| error replies | %d %s | %d %s | |", r.Limitkv.Errors, r.Limitkv.FirstError, r.Redis.Errors, r.Redis.FirstError)
	p("")
	p("### Rounds")
	p("")
	p("| round | server | requests/s | server CPU/request | server cores | client cores | p50 | p99 | max |")
	p("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
	for i := range r.Limitkv.Rounds {
		for _, s := range []struct {
			name string
			side *clusterSide
		}{{"limitkv", &r.Limitkv}, {"redis", &r.Redis}} {
			if i >= len(s.side.Rounds) {
				continue
			}
			x := s.side.Rounds[i]
			p("| %d | %s | %s | %.1f µs | %.2f | %.2f | %.0f µs | %.0f µs | %.0f µs |", x.Round, s.name, commas(x.RPS), x.CPUPerReqUs, x.ServerCores, x.ClientCores, x.P50, x.P99, x.Max)
		}
	}
	p("")
	p("### Correctness: allowed decisions per key and window")
	p("")
	p("Every allowed decision of every round (warmup included) is counted per key and window; no window may hold more than %d. limitkv's windows are aligned to the minute and told apart by the reply's `reset_after_ms`; the script's window starts at a key's first `INCR`, and a round (%s + %s) is shorter than the window on keys of its own, so each key has one window per round.",
		r.Limit, r.Warmup, r.Duration)
	p("")
	p("| | limitkv | redis-server |")
	p("|---|---:|---:|")
	p("| allowed / denied decisions | %s / %s | %s / %s |", commas(float64(r.Limitkv.Check.Allowed)), commas(float64(r.Limitkv.Check.Denied)), commas(float64(r.Redis.Check.Allowed)), commas(float64(r.Redis.Check.Denied)))
	p("| key windows with an allowed decision | %s | %s |", commas(float64(r.Limitkv.Check.Windows)), commas(float64(r.Redis.Check.Windows)))
	p("| of those, at the limit | %s | %s |", commas(float64(r.Limitkv.Check.AtLimit)), commas(float64(r.Redis.Check.AtLimit)))
	p("| most allowed in one window | %d | %d |", r.Limitkv.Check.MaxAllowed, r.Redis.Check.MaxAllowed)
	p("| windows over the limit | %d (%s) | %d (%s) |", r.Limitkv.Check.Over, verdict(r.Limitkv.Check), r.Redis.Check.Over, verdict(r.Redis.Check))
	p("")
	p("### Reading")
	p("")
	p("%s", clusterReading(r))
	return b.String()
}

func verdict(a allowedCheck) string {
	if a.ok() {
		return "ok"
	}
	return "VIOLATED"
}

// clusterReading says in words what the figures say.
func clusterReading(r *clusterResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The limitkv cluster answered %.2fx the requests per second of the redis-server cluster, at %.2fx the server CPU per decision, with p50 and p99 at %.2fx and %.2fx.",
		r.Ratios.RPS, r.Ratios.CPUPerReqUs, r.Ratios.P50, r.Ratios.P99)
	switch {
	case r.Limitkv.Check.ok() && r.Redis.Check.ok():
		b.WriteString(" Neither allowed more than the limit in any key's window.")
	default:
		fmt.Fprintf(&b, " Windows over the limit: limitkv %d, redis-server %d.", r.Limitkv.Check.Over, r.Redis.Check.Over)
	}
	b.WriteString(" The load generator shares the machine's cores with the nodes, so the requests per second are this machine's, not a cluster's capacity; the server CPU per request, read per process, is the figure that carries over. With one request per goroutine at a time the latency is mostly queueing at saturation.")
	return b.String()
}
