package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The snapshot scenario: limitkv with persistence on and only
// forced snapshots, K small keys all changed since the last snapshot, and
// GET plus RL.SLIDE traffic at depth 1 from 50 connections. The latency of
// the requests completed while a BGSAVE writes the K dirty keys is
// compared with a run without a snapshot. The traffic comes two ways, each
// with its own baseline and snapshots: at saturation (closed loop), and
// paced at -paced-rate requests/s (open loop), on which the target is
// judged: at saturation the latency is mostly the queue of 50 connections
// on a server sharing 2 cores with its client.

func snapshotFlags(fs *flag.FlagSet, c *config) {
	fs.IntVar(&c.snapshotKeys, "snapshot-keys", 1_000_000, "dirty keys the snapshot scenario saves")
}

// runSnapshot is the scenario alone: snapshot.md and .json.
func (b *bench) runSnapshot(ctx context.Context, started time.Time, redisVersion string) (int, error) {
	return b.runResults(ctx, started, redisVersion, "snapshot", "limitkv: latency during a snapshot", resultParts{snapshot: true})
}

type latencyStats struct {
	Ops       int64   `json:"ops"`             // answered in the window
	Samples   uint64  `json:"latency_samples"` // paced: due in the window
	OpsPerSec float64 `json:"ops_per_sec"`
	P50us     float64 `json:"p50_us"`
	P99us     float64 `json:"p99_us"`
	P999us    float64 `json:"p999_us"`
	MaxUs     float64 `json:"max_us"`
	Errors    int64   `json:"errors"`
	// Paced only, for diagnosis: the p99 of how late requests were sent
	// after their intended time (included in the latencies), and the p99
	// latency from the actual send instead of the intended time.
	SendLagP99us float64 `json:"send_lag_p99_us,omitempty"`
	SentP99us    float64 `json:"p99_from_actual_send_us,omitempty"`
	hist         histogram
	lag, sent    histogram
	window       time.Duration
}

func (l *latencyStats) fill() {
	l.P50us = us(l.hist.quantile(0.50))
	l.P99us = us(l.hist.quantile(0.99))
	l.P999us = us(l.hist.quantile(0.999))
	l.MaxUs = us(time.Duration(l.hist.max))
	l.Samples = l.hist.n
	if l.window > 0 {
		l.OpsPerSec = float64(l.Ops) / l.window.Seconds()
	}
	if l.lag.n > 0 {
		l.SendLagP99us = us(l.lag.quantile(0.99))
		l.SentP99us = us(l.sent.quantile(0.99))
	}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

type snapshotRound struct {
	WindowMs      float64 `json:"window_ms"`      // load measured while the snapshot ran
	SnapshotMs    float64 `json:"snapshot_ms"`    // INFO snapshot_last_duration_ms
	SnapshotKeys  int64   `json:"snapshot_keys"`  // INFO snapshot_last_keys
	SnapshotBytes int64   `json:"snapshot_bytes"` // INFO snapshot_last_bytes
}

// snapshotLoad is the scenario under one kind of traffic: closed loop
// (Rate 0) or paced.
type snapshotLoad struct {
	Rate        float64                  `json:"paced_rate,omitempty"` // requests/s over GET and RL.SLIDE
	Baseline    map[string]*latencyStats `json:"baseline"`
	During      map[string]*latencyStats `json:"during_snapshot"`
	Rounds      []snapshotRound          `json:"rounds"`
	CPU         []cpuUse                 `json:"cpu_during_snapshot"`
	BaselineCPU cpuUse                   `json:"cpu_baseline"`
}

type snapshotResult struct {
	Keys         int           `json:"keys"`
	Users        int           `json:"slide_users"`
	Conns        int           `json:"conns"`
	LoadSec      float64       `json:"load_seconds"`
	snapshotLoad               // at saturation
	Paced        *snapshotLoad `json:"paced,omitempty"` // at -paced-rate
}

func newSnapshotLoad(rate float64, plans []plan) *snapshotLoad {
	ld := &snapshotLoad{Rate: rate, Baseline: map[string]*latencyStats{}, During: map[string]*latencyStats{}}
	for _, p := range plans {
		ld.Baseline[p.name] = &latencyStats{}
		ld.During[p.name] = &latencyStats{}
	}
	return ld
}

const (
	snapGet   = "GET"
	snapSlide = "RL.SLIDE"
)

func (b *bench) snapshotScenario(ctx context.Context) (*snapshotResult, error) {
	keys := b.cfg.snapshotKeys
	res := &snapshotResult{Keys: keys, Users: b.cfg.users, Conns: b.cfg.conns}
	dir := filepath.Join(b.tmp, fmt.Sprintf("snapshot-%d", time.Now().UnixNano()))
	s, err := startLimitkv(b.limitkvBin, dir, true)
	if err != nil {
		return nil, err
	}
	defer s.Stop()
	c, err := dial(s.Addr)
	if err != nil {
		return nil, err
	}
	defer c.close()
	l, err := newLoader(s.Addr, 4, 256)
	if err != nil {
		return nil, err
	}
	defer l.close()
	setOp := op{cmd("SET", keyArg("key:"), lit(value32))}
	start := time.Now()
	if _, err := l.pass(ctx, setOp, 0, keys); err != nil {
		return nil, err
	}
	res.LoadSec = time.Since(start).Seconds()
	b.logf("  loaded %d keys in %.1f s", keys, res.LoadSec)

	plans := []plan{
		{name: snapGet, op: op{cmd("GET", keyArg("key:"))}, users: keys},
		{name: snapSlide, op: op{cmd("RL.SLIDE", keyArg("slide:"), lit("100"), lit("60s"))}, users: b.cfg.users, decision: true},
	}
	res.snapshotLoad = *newSnapshotLoad(0, plans)
	loads := []*snapshotLoad{&res.snapshotLoad}
	if rate := b.cfg.pacedRate; rate > 0 {
		// The rate is over all connections, so GET and RL.SLIDE get it in
		// the proportion of their connections.
		res.Paced = newSnapshotLoad(rate, plans)
		loads = append(loads, res.Paced)
	}
	spec := func(ld *snapshotLoad, measure func(context.Context) error) loadSpec {
		return loadSpec{addr: s.Addr, pid: s.Pid(), conns: b.cfg.conns, depth: 1, plans: plans, warmup: b.cfg.warmup, seed: 5,
			rate: ld.Rate, measure: measure}
	}

	// Baselines: the same traffic, no snapshot running.
	for _, ld := range loads {
		if b.cfg.quietWait > 0 {
			b.waitQuiet(ctx)
		}
		lr, err := runLoad(ctx, spec(ld, sleepFor(b.cfg.duration)))
		if err != nil {
			return nil, err
		}
		addLatency(ld.Baseline, lr)
		ld.BaselineCPU = lr.cpu
		b.logf("  baseline, %s: %s", offeredLoad(ld.Rate), snapLine(lr))
	}

	// Snapshots, every key dirty before each; the kind of traffic that
	// goes first flips from one round to the next.
	dirty := false
	for round := 0; round < b.cfg.rounds; round++ {
		order := loads
		if round%2 == 1 {
			order = slices.Clone(loads)
			slices.Reverse(order)
		}
		for _, ld := range order {
			if dirty { // make every key dirty again
				if _, err := l.pass(ctx, setOp, 0, keys); err != nil {
					return nil, err
				}
			}
			dirty = true
			var sr snapshotRound
			if b.cfg.quietWait > 0 {
				b.waitQuiet(ctx)
			}
			lr, err := runLoad(ctx, spec(ld, func(ctx context.Context) error {
				return b.forceSnapshot(ctx, c, &sr)
			}))
			if err != nil {
				return nil, err
			}
			sr.WindowMs = float64(lr.window) / float64(time.Millisecond)
			ld.Rounds = append(ld.Rounds, sr)
			ld.CPU = append(ld.CPU, lr.cpu)
			addLatency(ld.During, lr)
			b.logf("  snapshot %d, %s: %d keys in %.0f ms (INFO), load measured over %.0f ms: %s", round+1, offeredLoad(ld.Rate),
				sr.SnapshotKeys, sr.SnapshotMs, sr.WindowMs, snapLine(lr))
		}
	}
	for _, ld := range loads {
		for _, m := range []map[string]*latencyStats{ld.Baseline, ld.During} {
			for _, l := range m {
				l.fill()
			}
		}
	}
	return res, nil
}

// snapLine summarizes a run of the scenario's traffic for the log.
func snapLine(lr *loadResult) string {
	var parts []string
	for _, p := range lr.plans {
		parts = append(parts, fmt.Sprintf("%s %.0f/s p99 %.0fµs", p.name, float64(p.ops)/lr.window.Seconds(), us(p.hist.quantile(0.99))))
	}
	return strings.Join(parts, ", ")
}

// forceSnapshot sends BGSAVE and returns once INFO says it has finished.
func (b *bench) forceSnapshot(ctx context.Context, c *client, sr *snapshotRound) error {
	before, err := c.info("persistence")
	if err != nil {
		return err
	}
	count, _ := strconv.ParseInt(before["snapshot_count"], 10, 64)
	errs, _ := strconv.ParseInt(before["snapshot_errors"], 10, 64)
	if v, err := c.ok("BGSAVE"); err != nil {
		return err
	} else if string(v.Str) != "Background saving started" {
		return fmt.Errorf("BGSAVE answered %v", v)
	}
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
		f, err := c.info("persistence")
		if err != nil {
			return err
		}
		n, _ := strconv.ParseInt(f["snapshot_count"], 10, 64)
		if n <= count || f["rdb_bgsave_in_progress"] != "0" {
			continue
		}
		if e, _ := strconv.ParseInt(f["snapshot_errors"], 10, 64); e != errs {
			return fmt.Errorf("the snapshot failed: %s", f["snapshot_last_error"])
		}
		sr.SnapshotMs, _ = strconv.ParseFloat(f["snapshot_last_duration_ms"], 64)
		sr.SnapshotKeys, _ = strconv.ParseInt(f["snapshot_last_keys"], 10, 64)
		sr.SnapshotBytes, _ = strconv.ParseInt(f["snapshot_last_bytes"], 10, 64)
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("the snapshot did not finish in 10 minutes")
}

func addLatency(into map[string]*latencyStats, lr *loadResult) {
	for _, p := range lr.plans {
		l := into[p.name]
		l.Ops += p.ops
		l.Errors += p.errors
		l.hist.merge(&p.hist)
		l.lag.merge(&p.lag)
		l.sent.merge(&p.sent)
		l.window += lr.window
	}
}

func sleepFor(d time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
		return nil
	}
}
