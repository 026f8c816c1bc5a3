package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limitkv/limitkv/resp"
)

// The replication scenario: how far behind two replicas are under a
// steady write load, what replicas cost their master, how long a full
// sync of a large keyspace takes and what it
// does to the master's latency, and what a failover under redis-sentinel
// costs in time and in acknowledged writes. Every server is limitkv,
// memory-only, started from a config file of its own (Sentinel rewrites
// it) with DEBUG on, so that a replica's keyspace can be compared with its
// master's by DEBUG DIGEST. It writes replication.md and replication.json.

type replResults struct {
	Meta     meta            `json:"meta"`
	Settings replSettings    `json:"settings"`
	Lag      *lagResult      `json:"lag,omitempty"`
	Cost     []costRow       `json:"throughput,omitempty"`
	CostRuns []costRun       `json:"throughput_runs,omitempty"`
	SetAside []costRun       `json:"throughput_runs_set_aside,omitempty"` // others loaded the machine (-quiet-wait)
	Sync     *syncResult     `json:"full_sync,omitempty"`
	Failover *failoverResult `json:"failover,omitempty"`
}

type replSettings struct {
	LagRate         float64  `json:"lag_write_rate"`
	LagDepth        int      `json:"lag_write_depth"`
	ProbeRate       int      `json:"lag_probes_per_second"`
	Workloads       []string `json:"throughput_workloads"`
	SyncKeys        int      `json:"full_sync_keys"`
	SyncRounds      int      `json:"full_sync_rounds"`
	SyncLoadRate    float64  `json:"full_sync_load_rate"`
	Failovers       int      `json:"failover_rounds_per_mode"`
	SentinelVersion string   `json:"sentinel_version"`
}

// lagChannel carries the probes: a PUBLISH is replicated in the stream's
// order, behind every write the master made before it.
const lagChannel = "limitkv-bench:lag"

func replicationFlags(fs *flag.FlagSet, c *config) {
	fs.Float64Var(&c.lagRate, "repl-lag-rate", 50_000, "writes/s on the master while the replicas' lag is measured; 0 skips it")
	// Unpipelined, the client and the master's system calls alone take more
	// than 2 cores at 50k writes/s, beside two replicas: the load could
	// not be offered.
	fs.IntVar(&c.lagDepth, "repl-lag-depth", 4, "pipeline depth of the writes of the lag measurement (the rate is over all connections, each batch sent at once)")
	fs.IntVar(&c.syncKeys, "repl-sync-keys", 1_000_000, "keys on the master of the full-sync rounds; 0 skips them")
	fs.IntVar(&c.syncRounds, "repl-sync-rounds", 2, "full syncs measured")
	// Light: the sync's two ends take about 1.4 of the 2 cores, and a load
	// that saturates the rest measures the queue, not the shard pauses.
	fs.Float64Var(&c.syncLoadRate, "repl-sync-load", 5_000, "requests/s on the master during the full syncs (and a baseline without); 0: none")
}

// runReplication is the scenario: replication.md and .json.
func (b *bench) runReplication(ctx context.Context, started time.Time, redisVersion string) (int, error) {
	sentinel, sentinelVersion, err := findSentinel(b.cfg.sentinelBin)
	if err != nil && b.cfg.failovers > 0 {
		return 1, err
	}
	res := &replResults{Meta: b.meta(started, redisVersion)}
	res.Settings = replSettings{
		LagRate: b.cfg.lagRate, LagDepth: b.cfg.lagDepth, ProbeRate: probeRate, Workloads: b.costWorkloadIDs(),
		SyncKeys: b.cfg.syncKeys, SyncRounds: b.cfg.syncRounds, SyncLoadRate: b.cfg.syncLoadRate,
		Failovers: b.cfg.failovers, SentinelVersion: sentinelVersion,
	}
	b.logf("machine: %s, %d cores; load average %.2f %.2f %.2f", res.Meta.CPU, res.Meta.Cores,
		res.Meta.LoadStart[0], res.Meta.LoadStart[1], res.Meta.LoadStart[2])
	errs := 0
	if b.cfg.lagRate > 0 {
		if res.Lag, err = b.lagScenario(ctx); err != nil {
			return 1, fmt.Errorf("replication lag: %v", err)
		}
		for _, r := range res.Lag.Rounds {
			errs += int(r.WriteErrors)
		}
	}
	if !b.cfg.skipThroughput {
		if res.Cost, res.CostRuns, res.SetAside, err = b.costScenario(ctx); err != nil {
			return 1, fmt.Errorf("throughput with replicas: %v", err)
		}
		for _, r := range res.CostRuns {
			errs += int(r.Errors)
		}
	}
	if b.cfg.syncKeys > 0 {
		if res.Sync, err = b.syncScenario(ctx); err != nil {
			return 1, fmt.Errorf("full sync: %v", err)
		}
	}
	if b.cfg.failovers > 0 {
		if res.Failover, err = b.failoverScenario(ctx, sentinel); err != nil {
			return 1, fmt.Errorf("failover: %v", err)
		}
	}
	finish(&res.Meta, started)
	if err := b.publish(replReport("replication", "limitkv replication: benchmark results", res), started); err != nil {
		return 1, err
	}
	for _, line := range replSummary(res) {
		b.logf("  %s", line)
	}
	if errs > 0 {
		b.logf("!!! INVALID: %d error replies during the measured loads (see replication.md)", errs)
		return 3, nil
	}
	return 0, nil
}

// findSentinel resolves redis-sentinel and returns its version line.
func findSentinel(flagValue string) (string, string, error) {
	return findTool("redis-sentinel", flagValue, "-sentinel-bin (or -repl-failovers 0 to skip the failover rounds)")
}

// nodeSeq numbers the nodes' directories.
var nodeSeq atomic.Int64

// startNode starts a memory-only limitkv from a config file of its own,
// logging at notice (the full syncs' lines), with DEBUG on; lines are
// added to its config (replicaof ...).
func (b *bench) startNode(name string, lines ...string) (*server, error) {
	dir := filepath.Join(b.tmp, fmt.Sprintf("%s-%d", name, nodeSeq.Add(1)))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "limitkv.conf")
	return startServer(kindLimitkv, b.limitkvBin, dir, func(port int) []string {
		body := fmt.Sprintf("# written by limitkv-bench\nbind 127.0.0.1\nport %d\ndir %s\npersistence no\nloglevel notice\nenable-debug-command yes\n%s\n",
			port, filepath.Join(dir, "data"), strings.Join(lines, "\n"))
		// A file that cannot be written makes the server exit at start,
		// which startServer reports with its log.
		os.WriteFile(conf, []byte(body), 0o644)
		return []string{"--config", conf}
	})
}

func replicaOfLine(master *server) string {
	host, port, _ := strings.Cut(master.Addr, ":")
	return "replicaof " + host + " " + port
}

// startGroup starts a master and n replicas of it, and waits until the
// replicas are in sync.
func (b *bench) startGroup(name string, n int) (*server, []*server, error) {
	m, err := b.startNode(name + "-master")
	if err != nil {
		return nil, nil, err
	}
	var reps []*server
	stop := func() {
		for _, r := range reps {
			r.Stop()
		}
		m.Stop()
	}
	for i := range n {
		r, err := b.startNode(fmt.Sprintf("%s-replica%d", name, i+1), replicaOfLine(m))
		if err != nil {
			stop()
			return nil, nil, err
		}
		reps = append(reps, r)
	}
	if _, err := waitInSync(m, reps, 30*time.Second); err != nil {
		stop()
		return nil, nil, err
	}
	return m, reps, nil
}

// waitInSync waits until every replica's link is up and it has applied
// the master's whole stream (no write may run meanwhile), and returns how
// long that took.
func waitInSync(m *server, reps []*server, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	mc, err := dial(m.Addr)
	if err != nil {
		return 0, err
	}
	defer mc.close()
	rcs := make([]*client, len(reps))
	for i, r := range reps {
		if rcs[i], err = dial(r.Addr); err != nil {
			return 0, err
		}
		defer rcs[i].close()
	}
	for {
		mi, err := mc.info("replication")
		if err != nil {
			return 0, err
		}
		synced := mi["connected_slaves"] == strconv.Itoa(len(reps))
		var states []string
		for _, rc := range rcs {
			ri, err := rc.info("replication")
			if err != nil {
				return 0, err
			}
			states = append(states, fmt.Sprintf("link %s at %s", ri["master_link_status"], ri["slave_repl_offset"]))
			if ri["master_link_status"] != "up" || ri["slave_repl_offset"] != mi["master_repl_offset"] {
				synced = false
			}
		}
		if synced {
			return time.Since(start), nil
		}
		if time.Since(start) > limit {
			return 0, fmt.Errorf("replicas not in sync after %v: master at %s with %s replicas; %s", limit,
				mi["master_repl_offset"], mi["connected_slaves"], strings.Join(states, ", "))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sameDigest compares the replicas' DEBUG DIGEST with their master's
// (after waitInSync, with no write running).
func sameDigest(m *server, reps []*server) (bool, error) {
	digest := func(s *server) (string, error) {
		c, err := dial(s.Addr)
		if err != nil {
			return "", err
		}
		defer c.close()
		v, err := c.ok("DEBUG", "DIGEST")
		return string(v.Str), err
	}
	want, err := digest(m)
	if err != nil {
		return false, err
	}
	if want == strings.Repeat("0", 40) {
		return false, errors.New("the master's keyspace is empty: nothing to compare")
	}
	for _, r := range reps {
		got, err := digest(r)
		if err != nil || got != want {
			return false, err
		}
	}
	return true, nil
}

// procCPU measures the CPU time of a set of processes over a window.
type procCPU struct {
	pids  []int
	at    time.Time
	ticks []int64
}

func markProcs(servers []*server) procCPU {
	p := procCPU{at: time.Now()}
	for _, s := range servers {
		p.pids = append(p.pids, s.Pid())
		p.ticks = append(p.ticks, cpuTicks(s.Pid()))
	}
	return p
}

// cores returns each process's CPU, in cores, since the mark.
func (p procCPU) cores() []float64 {
	secs := time.Since(p.at).Seconds() * clockTick
	out := make([]float64, len(p.pids))
	for i, pid := range p.pids {
		if secs > 0 {
			out[i] = float64(cpuTicks(pid)-p.ticks[i]) / secs
		}
	}
	return out
}

func sum(v []float64) float64 {
	t := 0.0
	for _, x := range v {
		t += x
	}
	return t
}

// ---- Replication lag ------------------------------------------------

type lagResult struct {
	Rate      float64    `json:"write_rate"` // requested, over all connections
	Depth     int        `json:"write_depth"`
	Conns     int        `json:"conns"`
	ProbeRate int        `json:"probes_per_second"`
	Writes    []string   `json:"writes"`
	Rounds    []lagRound `json:"rounds"`
	// Per replica, the medians of the rounds' figures.
	Replicas []lagSummary `json:"replicas"`
	InSync   bool         `json:"digests_equal_after"` // DEBUG DIGEST of both replicas = the master's
}

type lagRound struct {
	Round          int        `json:"round"`
	WriteOpsPerSec float64    `json:"write_ops_per_sec"` // achieved
	WriteP99us     float64    `json:"write_p99_us"`      // open loop, on the master
	WriteErrors    int64      `json:"write_errors"`
	FirstError     string     `json:"first_error,omitempty"`
	MasterCores    float64    `json:"master_cores"`
	ReplicaCores   []float64  `json:"replica_cores"`
	ClientCores    float64    `json:"client_cores"`
	OtherCores     float64    `json:"other_cores"` // includes the replicas
	Replicas       []lagStats `json:"replicas"`
}

type lagStats struct {
	Sent     int     `json:"probes_sent"`
	Received int     `json:"probes_received"`
	P50us    float64 `json:"p50_us"`
	P99us    float64 `json:"p99_us"`
	MaxUs    float64 `json:"max_us"`
	hist     histogram
}

type lagSummary struct {
	Replica  int     `json:"replica"`
	P50us    float64 `json:"median_p50_us"`
	P99us    float64 `json:"median_p99_us"`
	MaxUs    float64 `json:"median_max_us"`
	WorstUs  float64 `json:"max_us"` // over every round
	Sent     int     `json:"probes_sent"`
	Received int     `json:"probes_received"`
}

// probeRate is how many timestamps a second the master publishes.
const probeRate = 100

// lagWrites are the writes of the lag scenario, one plan per connection
// in turn: deterministic commands (replicated as they are) and a
// rate-limit decision (replicated as its effect).
func lagWrites() []plan {
	return []plan{
		{name: "SET", op: op{cmd("SET", keyArg("key:"), lit(value32))}, users: 100_000},
		{name: "INCR", op: op{cmd("INCR", keyArg("counter:"))}, users: 100_000},
		{name: "RL.FIXED", op: op{cmd("RL.FIXED", keyArg("fixed:"), lit("100"), lit("60s"))}, users: 100_000, decision: true},
	}
}

func (b *bench) lagScenario(ctx context.Context) (*lagResult, error) {
	m, reps, err := b.startGroup("lag", 2)
	if err != nil {
		return nil, err
	}
	defer m.Stop()
	defer func() {
		for _, r := range reps {
			r.Stop()
		}
	}()
	plans := lagWrites()
	res := &lagResult{Rate: b.cfg.lagRate, Depth: b.cfg.lagDepth, Conns: b.cfg.conns, ProbeRate: probeRate}
	for _, p := range plans {
		res.Writes = append(res.Writes, describe(p.op))
	}
	b.logf("replication lag: %s writes/s (%s) over %d connections, %d deep, on a master with 2 replicas; %d PUBLISH/s of a timestamp, received by a subscriber on each replica; %d round(s) of %v + %v",
		commas(b.cfg.lagRate), strings.Join(res.Writes, ", "), b.cfg.conns, b.cfg.lagDepth, probeRate, b.cfg.rounds, b.cfg.warmup, b.cfg.duration)
	for round := 1; round <= b.cfg.rounds; round++ {
		if b.cfg.quietWait > 0 {
			b.waitQuiet(ctx)
		}
		lr := lagRound{Round: round}
		var probes []*lagStats
		var repCPU procCPU
		load, err := runLoad(ctx, loadSpec{
			addr: m.Addr, pid: m.Pid(), conns: b.cfg.conns, depth: b.cfg.lagDepth, warmup: b.cfg.warmup, plans: plans,
			seed: uint64(round), rate: b.cfg.lagRate,
			measure: func(ctx context.Context) error {
				repCPU = markProcs(reps)
				var err error
				probes, err = probeLag(ctx, m, reps, b.cfg.duration)
				lr.ReplicaCores = repCPU.cores()
				return err
			},
		})
		if err != nil {
			return nil, err
		}
		var writes histogram
		for _, p := range load.plans {
			lr.WriteErrors += p.errors
			if lr.FirstError == "" {
				lr.FirstError = p.firstErr
			}
			lr.WriteOpsPerSec += float64(p.ops) / load.window.Seconds()
			writes.merge(&p.hist)
		}
		lr.WriteP99us = us(writes.quantile(0.99))
		lr.MasterCores, lr.ClientCores, lr.OtherCores = load.cpu.Server, load.cpu.Client, load.cpu.Other
		for _, p := range probes {
			p.P50us, p.P99us, p.MaxUs = us(p.hist.quantile(0.5)), us(p.hist.quantile(0.99)), us(time.Duration(p.hist.max))
			lr.Replicas = append(lr.Replicas, *p)
		}
		res.Rounds = append(res.Rounds, lr)
		line := fmt.Sprintf("  round %d: writes %9.0f/s (p99 %5.0fµs)%s; cpu master %.2f replicas %.2f+%.2f client %.2f;",
			round, lr.WriteOpsPerSec, lr.WriteP99us, errNote(runRecord{Errors: lr.WriteErrors, FirstError: lr.FirstError}),
			lr.MasterCores, lr.ReplicaCores[0], lr.ReplicaCores[1], lr.ClientCores)
		for i, p := range lr.Replicas {
			line += fmt.Sprintf(" replica %d lag p50 %.0fµs p99 %.0fµs max %.0fµs (%d/%d probes)", i+1, p.P50us, p.P99us, p.MaxUs, p.Received, p.Sent)
		}
		b.logf("%s", line)
		if _, err := waitInSync(m, reps, 60*time.Second); err != nil {
			return nil, err
		}
	}
	for i := range reps {
		s := lagSummary{Replica: i + 1}
		var p50, p99, mx []float64
		for _, r := range res.Rounds {
			x := r.Replicas[i]
			p50, p99, mx = append(p50, x.P50us), append(p99, x.P99us), append(mx, x.MaxUs)
			s.WorstUs = max(s.WorstUs, x.MaxUs)
			s.Sent += x.Sent
			s.Received += x.Received
		}
		s.P50us, s.P99us, s.MaxUs = median(p50), median(p99), median(mx)
		res.Replicas = append(res.Replicas, s)
	}
	if res.InSync, err = sameDigest(m, reps); err != nil {
		return nil, err
	}
	if !res.InSync {
		return nil, errors.New("after the lag rounds the replicas' DEBUG DIGEST differs from the master's")
	}
	return res, nil
}

// probeLag publishes a timestamp on the master probeRate times a second
// for d, while a subscriber on each replica records when each arrives:
// the difference is the replication delay, the master's processing and
// the replica's delivery included. Both ends are in this process, so the
// timestamps are readings of one monotonic clock. A last message, "end",
// tells the subscribers that every probe before it has come.
func probeLag(ctx context.Context, m *server, reps []*server, d time.Duration) ([]*lagStats, error) {
	base := time.Now()
	stats := make([]*lagStats, len(reps))
	subs := make([]*client, len(reps))
	done := make([]chan struct{}, len(reps))
	var wg sync.WaitGroup
	defer func() {
		for _, s := range subs {
			if s != nil {
				s.conn.SetReadDeadline(time.Now())
			}
		}
		wg.Wait()
		for _, s := range subs {
			if s != nil {
				s.close()
			}
		}
	}()
	for i, r := range reps {
		stats[i] = &lagStats{}
		c, err := dial(r.Addr)
		if err != nil {
			return nil, err
		}
		subs[i] = c
		v, err := c.do("SUBSCRIBE", lagChannel)
		if err != nil || v.Type != '*' || len(v.Elems) != 3 {
			return nil, fmt.Errorf("SUBSCRIBE on replica %d: %v %v", i+1, v, err)
		}
		done[i] = make(chan struct{})
		c.conn.SetReadDeadline(time.Now().Add(d + time.Minute))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				v, err := resp.ReadValue(c.r)
				at := time.Since(base)
				if err != nil {
					return
				}
				if v.Type != '*' || len(v.Elems) != 3 || string(v.Elems[0].Str) != "message" {
					continue
				}
				if string(v.Elems[2].Str) == "end" {
					close(done[i])
					return
				}
				sent, err := strconv.ParseInt(string(v.Elems[2].Str), 10, 64)
				if err != nil {
					continue
				}
				stats[i].hist.record(at - time.Duration(sent))
				stats[i].Received++
			}
		}()
	}
	pub, err := dial(m.Addr)
	if err != nil {
		return nil, err
	}
	defer pub.close()
	tick := time.NewTicker(time.Second / probeRate)
	defer tick.Stop()
	end := time.After(d)
	sent := 0
publish:
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-end:
			break publish
		case <-tick.C:
		}
		stamp := strconv.FormatInt(int64(time.Since(base)), 10)
		if _, err := pub.ok("PUBLISH", lagChannel, stamp); err != nil {
			return nil, err
		}
		sent++
	}
	if _, err := pub.ok("PUBLISH", lagChannel, "end"); err != nil {
		return nil, err
	}
	// "end" comes behind every write before it; a replica that has not
	// delivered it in 30 s shows in its count of probes received.
	for _, ch := range done {
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
		}
	}
	for _, s := range stats {
		s.Sent = sent
	}
	return stats, nil
}

// ---- Throughput with and without replicas ---------------------------

type costRun struct {
	Round        int     `json:"round"`
	Workload     string  `json:"workload"`
	Depth        int     `json:"depth"`
	Replicas     int     `json:"replicas"`
	OpsPerSec    float64 `json:"ops_per_sec"`
	P50us        float64 `json:"p50_us"`
	P99us        float64 `json:"p99_us"`
	Errors       int64   `json:"error_replies"`
	FirstError   string  `json:"first_error,omitempty"`
	MasterCores  float64 `json:"master_cores"`
	ReplicaCores float64 `json:"replica_cores"` // both replicas together
	ClientCores  float64 `json:"client_cores"`
	OtherCores   float64 `json:"other_cores"`   // the replicas included
	ForeignCores float64 `json:"foreign_cores"` // other, less the replicas: other processes
	MasterUsReq  float64 `json:"master_cpu_us_per_request"`
	// With replicas: how far behind the slower replica was when the
	// window ended, and how long it took to catch up.
	BehindBytes int64   `json:"replica_behind_bytes,omitempty"`
	CatchUpMs   float64 `json:"replica_catch_up_ms,omitempty"`
	Load1       float64 `json:"load_average_1m_before"`
}

type costSide struct {
	OpsPerSec    float64   `json:"median_ops_per_sec"`
	PerRound     []float64 `json:"ops_per_sec_per_round"`
	UsPerReq     float64   `json:"median_master_cpu_us_per_request"`
	MasterCores  float64   `json:"median_master_cores"`
	ReplicaCores float64   `json:"median_replica_cores"`
	ClientCores  float64   `json:"median_client_cores"`
	P99us        float64   `json:"median_p99_us"`
	CatchUpMs    float64   `json:"median_replica_catch_up_ms,omitempty"`
}

type costRow struct {
	Workload string   `json:"workload"`
	Command  string   `json:"command"`
	Depth    int      `json:"depth"`
	None     costSide `json:"no_replicas"`
	Two      costSide `json:"two_replicas"`
	Ratio    float64  `json:"throughput_two_over_none"`
	CPURatio float64  `json:"cpu_per_request_two_over_none"`
}

func (b *bench) costWorkloads() []*workload {
	ids := b.cfg.only
	if len(ids) == 0 {
		ids = []string{"set", "fixed"}
	}
	var out []*workload
	for _, w := range workloads() {
		if slices.Contains(ids, w.id) {
			out = append(out, w)
		}
	}
	return out
}

func (b *bench) costWorkloadIDs() []string {
	var ids []string
	for _, w := range b.costWorkloads() {
		ids = append(ids, w.id)
	}
	return ids
}

// costScenario measures a master alone and a master with two replicas
// (both fresh, the same preload), alternating, closed loop: the same
// runs as the main throughput table, with the master's CPU per request.
func (b *bench) costScenario(ctx context.Context) (rows []costRow, runs, setAside []costRun, err error) {
	alone, err := b.startNode("alone")
	if err != nil {
		return nil, nil, nil, err
	}
	defer alone.Stop()
	m, reps, err := b.startGroup("cost", 2)
	if err != nil {
		return nil, nil, nil, err
	}
	defer m.Stop()
	defer func() {
		for _, r := range reps {
			r.Stop()
		}
	}()
	selected := b.costWorkloads()
	for _, s := range []*server{alone, m} {
		for _, w := range selected {
			if err := verifyWorkload(s, w, b.cfg.users); err != nil {
				return nil, nil, nil, err
			}
		}
	}
	if _, err := waitInSync(m, reps, 30*time.Second); err != nil {
		return nil, nil, nil, err
	}
	syncs, err := fullSyncs(m)
	if err != nil {
		return nil, nil, nil, err
	}
	total := b.cfg.rounds * len(selected) * len(b.cfg.depths) * 2
	b.logf("throughput with and without replicas: %d runs of %v + %v, closed loop, %d connections, alternating a master alone and a master with 2 replicas",
		total, b.cfg.warmup, b.cfg.duration, b.cfg.conns)
	done := 0
	for round := 1; round <= b.cfg.rounds; round++ {
		pair := 0
		for _, w := range selected {
			for _, depth := range b.cfg.depths {
				order := []int{0, 2}
				if (round+pair)%2 == 0 {
					order = []int{2, 0}
				}
				pair++
				for _, n := range order {
					target, attached := alone, []*server(nil)
					if n == 2 {
						target, attached = m, reps
					}
					run, aside, err := b.quietCostRun(ctx, target, attached, w, depth, round)
					setAside = append(setAside, aside...)
					if err != nil {
						return nil, nil, nil, fmt.Errorf("%s depth %d with %d replicas: %v", w.id, depth, n, err)
					}
					runs = append(runs, run)
					done++
					catch := ""
					if n > 0 {
						catch = fmt.Sprintf("  replicas %.2f cores, %s behind at the end, caught up in %.0f ms", run.ReplicaCores, mib(run.BehindBytes), run.CatchUpMs)
					}
					b.logf("[%d/%d] round %d %-6s d=%-2d replicas %d %9.0f ops/s  p99 %6.0fµs  master %.2f cores = %.2f µs/req  client %.2f other %.2f%s%s",
						done, total, round, w.id, depth, n, run.OpsPerSec, run.P99us, run.MasterCores, run.MasterUsReq,
						run.ClientCores, run.OtherCores, catch, errNote(runRecord{Errors: run.Errors, FirstError: run.FirstError}))
				}
			}
		}
	}
	// The replicas must have stayed attached all along: a full sync
	// during the runs would mean one was dropped and measured nothing.
	if after, err := fullSyncs(m); err != nil {
		return nil, nil, nil, err
	} else if after != syncs {
		return nil, nil, nil, fmt.Errorf("%d full sync(s) during the runs: a replica was dropped (see %s)", after-syncs, m.LogFile)
	}
	if ok, err := sameDigest(m, reps); err != nil || !ok {
		return nil, nil, nil, fmt.Errorf("after the runs the replicas' DEBUG DIGEST differs from the master's (%v)", err)
	}
	for _, w := range selected {
		for _, depth := range b.cfg.depths {
			row := costRow{Workload: w.id, Command: describe(w.limitkv), Depth: depth}
			for _, n := range []int{0, 2} {
				side := &row.None
				if n == 2 {
					side = &row.Two
				}
				var master, replica, client, p99, usReq, catch []float64
				for _, r := range runs {
					if r.Workload == w.id && r.Depth == depth && r.Replicas == n {
						side.PerRound = append(side.PerRound, r.OpsPerSec)
						master, replica, client = append(master, r.MasterCores), append(replica, r.ReplicaCores), append(client, r.ClientCores)
						p99, usReq, catch = append(p99, r.P99us), append(usReq, r.MasterUsReq), append(catch, r.CatchUpMs)
					}
				}
				side.OpsPerSec, side.MasterCores, side.ReplicaCores, side.ClientCores = median(side.PerRound), median(master), median(replica), median(client)
				side.P99us, side.UsPerReq = median(p99), median(usReq)
				if n > 0 {
					side.CatchUpMs = median(catch)
				}
			}
			row.Ratio = div(row.Two.OpsPerSec, row.None.OpsPerSec)
			row.CPURatio = div(row.Two.UsPerReq, row.None.UsPerReq)
			rows = append(rows, row)
		}
	}
	return rows, runs, setAside, nil
}

// quietCostRun is costRun with -quiet-wait: it waits for the machine to
// be quiet first, and measures again (twice at most) when other processes
// took more than -quiet cores during the window, returning the runs set
// aside.
func (b *bench) quietCostRun(ctx context.Context, m *server, reps []*server, w *workload, depth, round int) (costRun, []costRun, error) {
	var aside []costRun
	for attempt := 1; ; attempt++ {
		if b.cfg.quietWait > 0 {
			b.waitQuiet(ctx)
		}
		run, err := b.costRun(ctx, m, reps, w, depth, round)
		if err != nil || b.cfg.quietWait == 0 || run.ForeignCores <= b.cfg.quietCores || attempt == 3 {
			return run, aside, err
		}
		aside = append(aside, run)
		b.logf("        set aside: other processes took %.2f cores during %s d=%d with %d replicas (%.0f ops/s); measuring again",
			run.ForeignCores, w.id, depth, len(reps), run.OpsPerSec)
	}
}

func fullSyncs(m *server) (int64, error) {
	c, err := dial(m.Addr)
	if err != nil {
		return 0, err
	}
	defer c.close()
	return c.infoInt("stats", "sync_full")
}

func (b *bench) costRun(ctx context.Context, m *server, reps []*server, w *workload, depth, round int) (costRun, error) {
	time.Sleep(100 * time.Millisecond)
	run := costRun{Round: round, Workload: w.id, Depth: depth, Replicas: len(reps), Load1: loadAvg()[0]}
	var repCPU procCPU
	var behind int64
	lr, err := runLoad(ctx, loadSpec{
		addr: m.Addr, pid: m.Pid(), conns: b.cfg.conns, depth: depth, warmup: b.cfg.warmup,
		plans: []plan{{name: w.id, op: w.limitkv, users: b.cfg.users, decision: w.decision}},
		seed:  uint64(round*1000 + depth),
		measure: func(ctx context.Context) error {
			repCPU = markProcs(reps)
			if err := sleepFor(b.cfg.duration)(ctx); err != nil {
				return err
			}
			run.ReplicaCores = sum(repCPU.cores())
			if len(reps) > 0 {
				var err error
				behind, err = replicasBehind(m, reps)
				return err
			}
			return nil
		},
	})
	if err != nil {
		return run, err
	}
	p := lr.plans[0]
	run.OpsPerSec = float64(p.ops) / lr.window.Seconds()
	run.P50us, run.P99us = us(p.hist.quantile(0.5)), us(p.hist.quantile(0.99))
	run.Errors, run.FirstError = p.errors, p.firstErr
	run.MasterCores, run.ClientCores, run.OtherCores = lr.cpu.Server, lr.cpu.Client, lr.cpu.Other
	run.ForeignCores = max(0, run.OtherCores-run.ReplicaCores)
	if run.OpsPerSec > 0 {
		run.MasterUsReq = run.MasterCores * 1e6 / run.OpsPerSec
	}
	if len(reps) > 0 {
		run.BehindBytes = behind
		// The next run starts with the replicas caught up, so that none
		// pays for the one before.
		d, err := waitInSync(m, reps, 2*time.Minute)
		if err != nil {
			return run, err
		}
		run.CatchUpMs = float64(d) / float64(time.Millisecond)
	}
	return run, nil
}

// replicasBehind returns how many bytes of the stream the slowest replica
// has yet to apply, as the master and the replicas tell now.
func replicasBehind(m *server, reps []*server) (int64, error) {
	mc, err := dial(m.Addr)
	if err != nil {
		return 0, err
	}
	defer mc.close()
	end, err := mc.infoInt("replication", "master_repl_offset")
	if err != nil {
		return 0, err
	}
	var worst int64
	for _, r := range reps {
		rc, err := dial(r.Addr)
		if err != nil {
			return 0, err
		}
		off, err := rc.infoInt("replication", "slave_repl_offset")
		rc.close()
		if err != nil {
			return 0, err
		}
		worst = max(worst, end-off)
	}
	return worst, nil
}

// ---- Full sync of a large keyspace ----------------------------------

type syncResult struct {
	Keys       int     `json:"keys"`
	Strings    int     `json:"string_keys"`
	RateLimits int     `json:"ratelimit_keys"`
	FillSec    float64 `json:"fill_seconds"`
	MasterRSS  int64   `json:"master_rss_bytes"`
	LoadRate   float64 `json:"load_rate"` // requests/s on the master during the syncs
	LoadConns  int     `json:"load_conns"`
	LoadOps    []string
	Rounds     []syncRound   `json:"rounds"`
	Baseline   *latencyStats `json:"load_baseline"`
	During     *latencyStats `json:"load_during_syncs"`
	// Medians over the rounds.
	ToSyncEndMs  float64 `json:"median_to_sync_end_ms"`
	ToLinkUpMs   float64 `json:"median_to_link_up_ms"`
	MasterTookMs float64 `json:"median_master_took_ms"`
}

type syncRound struct {
	// From REPLICAOF sent to the empty replica:
	ToSyncStartMs float64 `json:"to_sync_in_progress_ms"` // INFO master_sync_in_progress:1 first seen
	ToSyncEndMs   float64 `json:"to_sync_end_ms"`         // master_sync_in_progress back to 0
	ToLinkUpMs    float64 `json:"to_link_up_ms"`          // master_link_status:up
	// The master's log: "Synchronization with replica ... succeeded".
	MasterKeys   int64   `json:"master_log_keys"`
	MasterTookMs float64 `json:"master_log_took_ms"`
	// The replica's log: "MASTER <-> REPLICA sync: Finished with success".
	ReplicaKeys   int64   `json:"replica_log_keys"`
	ReplicaTookMs float64 `json:"replica_log_took_ms"`
	ReplicaDBSize int64   `json:"replica_dbsize"`
	ReplicaRSS    int64   `json:"replica_rss_bytes"`
	DigestEqual   bool    `json:"digest_equal"`
	LoadP99us     float64 `json:"load_p99_us"`
	LoadMaxUs     float64 `json:"load_max_us"`
	MasterCores   float64 `json:"master_cores"`
	ReplicaCores  float64 `json:"replica_cores"`
}

// syncLoad is the traffic on the master while replicas synchronize: reads
// of the loaded strings and rate-limit decisions on keys of their own.
func syncLoad(keys int) []plan {
	return []plan{
		{name: "GET", op: op{cmd("GET", keyArg("str:"))}, users: keys / 2},
		{name: "RL.FIXED", op: op{cmd("RL.FIXED", keyArg("probe:"), lit("100"), lit("60s"))}, users: 100_000, decision: true},
	}
}

func (b *bench) syncScenario(ctx context.Context) (*syncResult, error) {
	keys := b.cfg.syncKeys
	res := &syncResult{Keys: keys, Strings: keys / 2, RateLimits: keys - keys/2, LoadRate: b.cfg.syncLoadRate, LoadConns: b.cfg.conns}
	m, err := b.startNode("sync-master")
	if err != nil {
		return nil, err
	}
	defer m.Stop()
	l, err := newLoader(m.Addr, 4, 256)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if _, err := l.pass(ctx, op{cmd("SET", keyArg("str:"), lit(value32))}, 0, res.Strings); err != nil {
		l.close()
		return nil, err
	}
	if _, err := l.pass(ctx, op{cmd("RL.FIXED", keyArg("rl:"), lit("100"), lit("1h"))}, 0, res.RateLimits); err != nil {
		l.close()
		return nil, err
	}
	l.close()
	res.FillSec = time.Since(start).Seconds()
	res.MasterRSS, _ = rssBytes(m.Pid())
	b.logf("full sync: loaded %s keys (%s SET str:<n> of 32 bytes, %s RL.FIXED rl:<n> 100 1h) in %.1f s; master RSS %s",
		commas(float64(keys)), commas(float64(res.Strings)), commas(float64(res.RateLimits)), res.FillSec, mib(res.MasterRSS))
	plans := syncLoad(keys)
	for _, p := range plans {
		res.LoadOps = append(res.LoadOps, describe(p.op))
	}
	res.Baseline, res.During = &latencyStats{}, &latencyStats{}
	spec := func(measure func(context.Context) error) loadSpec {
		return loadSpec{addr: m.Addr, pid: m.Pid(), conns: b.cfg.conns, depth: 1, plans: plans, warmup: b.cfg.warmup,
			seed: 13, rate: b.cfg.syncLoadRate, measure: measure}
	}
	if b.cfg.syncLoadRate > 0 {
		lr, err := runLoad(ctx, spec(sleepFor(b.cfg.duration)))
		if err != nil {
			return nil, err
		}
		mergeLoad(res.Baseline, lr)
		b.logf("  baseline without a sync, %s req/s: p99 %.0fµs max %.0fµs", commas(b.cfg.syncLoadRate),
			us(res.Baseline.hist.quantile(0.99)), us(time.Duration(res.Baseline.hist.max)))
	}
	for round := 1; round <= b.cfg.syncRounds; round++ {
		if b.cfg.quietWait > 0 {
			b.waitQuiet(ctx)
		}
		rep, err := b.startNode("sync-replica")
		if err != nil {
			return nil, err
		}
		var sr syncRound
		var repCPU procCPU
		sync := func(ctx context.Context) error {
			repCPU = markProcs([]*server{rep})
			err := timeSync(ctx, m, rep, &sr)
			sr.ReplicaCores = repCPU.cores()[0]
			return err
		}
		if b.cfg.syncLoadRate > 0 {
			var during latencyStats
			lr, err := runLoad(ctx, spec(sync))
			if err != nil {
				rep.Stop()
				return nil, err
			}
			mergeLoad(&during, lr)
			mergeLoad(res.During, lr)
			sr.LoadP99us, sr.LoadMaxUs = us(during.hist.quantile(0.99)), us(time.Duration(during.hist.max))
			sr.MasterCores = lr.cpu.Server
		} else {
			mark := markProcs([]*server{m})
			if err := sync(ctx); err != nil {
				rep.Stop()
				return nil, err
			}
			sr.MasterCores = mark.cores()[0]
		}
		if _, err := waitInSync(m, []*server{rep}, time.Minute); err != nil {
			rep.Stop()
			return nil, err
		}
		if sr.DigestEqual, err = sameDigest(m, []*server{rep}); err != nil {
			rep.Stop()
			return nil, err
		}
		sr.ReplicaRSS, _ = rssBytes(rep.Pid())
		if c, err := dial(rep.Addr); err == nil {
			if v, err := c.ok("DBSIZE"); err == nil {
				sr.ReplicaDBSize = v.Int
			}
			c.close()
		}
		// The log lines are written as the sync ends; the replica's
		// comes after its link is up.
		mk, mt, merr := syncLogLine(m.LogFile, "Synchronization with replica", round)
		rk, rt, rerr := syncLogLine(rep.LogFile, "MASTER <-> REPLICA sync: Finished with success", 1)
		rep.Stop()
		if merr != nil || rerr != nil {
			return nil, errors.Join(merr, rerr)
		}
		sr.MasterKeys, sr.MasterTookMs = mk, ms(mt)
		sr.ReplicaKeys, sr.ReplicaTookMs = rk, ms(rt)
		res.Rounds = append(res.Rounds, sr)
		b.logf("  sync %d: REPLICAOF -> sync in progress %.0f ms -> sync over %.0f ms -> link up %.0f ms; master log: %d keys took %.0f ms; replica log: %d keys took %.0f ms; replica has %d keys, digest equal %v, RSS %s; master %.2f cores, replica %.2f; load p99 %.0fµs max %.0fµs",
			round, sr.ToSyncStartMs, sr.ToSyncEndMs, sr.ToLinkUpMs, sr.MasterKeys, sr.MasterTookMs, sr.ReplicaKeys, sr.ReplicaTookMs,
			sr.ReplicaDBSize, sr.DigestEqual, mib(sr.ReplicaRSS), sr.MasterCores, sr.ReplicaCores, sr.LoadP99us, sr.LoadMaxUs)
		if !sr.DigestEqual {
			return nil, errors.New("after the full sync the replica's DEBUG DIGEST differs from the master's")
		}
	}
	res.Baseline.fill()
	res.During.fill()
	var end, up, took []float64
	for _, r := range res.Rounds {
		end, up, took = append(end, r.ToSyncEndMs), append(up, r.ToLinkUpMs), append(took, r.MasterTookMs)
	}
	res.ToSyncEndMs, res.ToLinkUpMs, res.MasterTookMs = median(end), median(up), median(took)
	return res, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func mergeLoad(into *latencyStats, lr *loadResult) {
	for _, p := range lr.plans {
		into.Ops += p.ops
		into.Errors += p.errors
		into.hist.merge(&p.hist)
		into.lag.merge(&p.lag)
		into.sent.merge(&p.sent)
	}
	into.window += lr.window
}

// timeSync makes the empty rep a replica of m and times, from the
// REPLICAOF, its INFO replication's sync flag rising and falling and its
// link coming up, polling every 2 ms.
func timeSync(ctx context.Context, m, rep *server, sr *syncRound) error {
	c, err := dial(rep.Addr)
	if err != nil {
		return err
	}
	defer c.close()
	host, port, _ := strings.Cut(m.Addr, ":")
	start := time.Now()
	if _, err := c.ok("REPLICAOF", host, port); err != nil {
		return err
	}
	seen := false
	for ctx.Err() == nil {
		f, err := c.info("replication")
		if err != nil {
			return err
		}
		at := ms(time.Since(start))
		if f["master_sync_in_progress"] == "1" && !seen {
			seen = true
			sr.ToSyncStartMs = at
		}
		if f["master_sync_in_progress"] == "0" && seen && sr.ToSyncEndMs == 0 {
			sr.ToSyncEndMs = at
		}
		if f["master_link_status"] == "up" {
			sr.ToLinkUpMs = at
			if sr.ToSyncEndMs == 0 {
				sr.ToSyncEndMs = at
			}
			return nil
		}
		if time.Since(start) > 10*time.Minute {
			return errors.New("the replica's link is not up after 10 minutes")
		}
		time.Sleep(2 * time.Millisecond)
	}
	return ctx.Err()
}

// syncLogLine finds the nth line (from 1) of a limitkv log holding msg
// and returns its keys= and took= fields, waiting a little for a line the
// server may be writing as its peer already reports the sync over.
func syncLogLine(path, msg string, nth int) (int64, time.Duration, error) {
	deadline := time.Now().Add(2 * time.Second)
	for {
		keys, took, err := readLogLine(path, msg, nth)
		if !errors.Is(err, errNoLine) || time.Now().After(deadline) {
			return keys, took, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var errNoLine = errors.New("no such line")

func readLogLine(path, msg string, nth int) (int64, time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	seen := 0
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, msg) {
			continue
		}
		if seen++; seen < nth {
			continue
		}
		return parseSyncLog(line)
	}
	return 0, 0, fmt.Errorf("%s: line %d with %q: %w", path, nth, msg, errNoLine)
}

// parseSyncLog reads the keys= and took= fields of a log line in slog's
// text format.
func parseSyncLog(line string) (int64, time.Duration, error) {
	var keys int64 = -1
	var took time.Duration = -1
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, "keys="); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("keys in %q: %v", line, err)
			}
			keys = n
		}
		if v, ok := strings.CutPrefix(f, "took="); ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				return 0, 0, fmt.Errorf("took in %q: %v", line, err)
			}
			took = d
		}
	}
	if keys < 0 || took < 0 {
		return 0, 0, fmt.Errorf("no keys= and took= in %q", line)
	}
	return keys, took, nil
}
