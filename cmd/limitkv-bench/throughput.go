package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"time"
)

// The throughput scenario: every workload at every depth on both servers
// at saturation (closed loop), round after round, and the rate limits at
// -paced-rate (open loop), where their latency is the servers' and not a
// queue's. With -loadgen redis-benchmark or both, redis-benchmark drives
// the saturating runs too (rbench.go).

func throughputFlags(fs *flag.FlagSet, c *config) {
	// Both would add about 6 minutes to the 12 of the full run.
	fs.StringVar(&c.loadgen, "loadgen", "go", "who drives the throughput runs: go (our load generator), redis-benchmark (-c -conns -r -users -P depth, server CPU per request from /proc; GET, SET, INCR, RL.SLIDE, RL.FIXED), or both (about 6 more minutes)")
	rbBinFlags(fs, c)
}

// rbBinFlags name the redis-benchmark of every scenario that runs it.
func rbBinFlags(fs *flag.FlagSet, c *config) {
	fs.StringVar(&c.rbBin, "redis-benchmark-bin", "", "use this redis-benchmark (default: redis-benchmark from PATH)")
}

// useGo and useRB say who drives the saturating runs (-loadgen).
func (c config) useGo() bool { return c.loadgen == "go" || c.loadgen == "both" }
func (c config) useRB() bool { return c.loadgen == "redis-benchmark" || c.loadgen == "both" }

// runThroughput is the scenario alone: throughput.md, .svg and .json.
func (b *bench) runThroughput(ctx context.Context, started time.Time, redisVersion string) (int, error) {
	return b.runResults(ctx, started, redisVersion, "throughput", "limitkv vs Redis: throughput and latency", resultParts{throughput: true, paced: true})
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
	defer lk.Stop()
	defer rd.Stop()
	servers := []*server{lk, rd}
	for _, s := range servers {
		l, err := newLoader(s.Addr, 4, 256)
		if err != nil {
			return err
		}
		_, err = l.pass(ctx, op{cmd("SET", keyArg("key:"), lit(value32))}, 0, b.cfg.users)
		l.close()
		if err != nil {
			return fmt.Errorf("%s: preloading the GET keys: %v", s.Kind, err)
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
						return fmt.Errorf("%s %s depth %d: %v", s.Kind, w.id, depth, err)
					}
					done++
					b.logf("[%d/%d] round %d %-6s d=%-2d %-7s %9.0f ops/s  p50 %6.0fµs p99 %6.0fµs  cpu server %.2f client %.2f other %.2f steal %.2f  load %.2f%s",
						done, total, round, w.id, depth, s.Kind, rec.OpsPerSec, rec.P50us, rec.P99us,
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
		lk.Stop()
		return nil, nil, err
	}
	if err = loadScripts(rd); err == nil {
		err = definePolicy(lk)
	}
	if err != nil {
		lk.Stop()
		rd.Stop()
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
	defer lk.Stop()
	defer rd.Stop()
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
					return fmt.Errorf("%s %s at %s/s: %v", s.Kind, w.id, commas(rate), err)
				}
				done++
				b.logf("[%d/%d] round %d %-6s %-7s at %s/s: achieved %9.0f/s  p50 %6.0fµs p99 %6.0fµs p99.9 %6.0fµs  send lag p99 %5.0fµs, p99 from the send %5.0fµs  cpu server %.2f client %.2f other %.2f%s",
					done, total, round, w.id, s.Kind, commas(rate), rec.OpsPerSec, rec.P50us, rec.P99us, rec.P999us, rec.SendLagP99us, rec.SentP99us,
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
			rec.CPU.Other, s.Kind, w.id, depth, offeredLoad(rate), rec.OpsPerSec)
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
		addr: s.Addr, pid: s.Pid(), conns: b.cfg.conns, depth: depth, warmup: b.cfg.warmup,
		plans:   []plan{{name: w.id, op: w.opFor(s.Kind), users: b.cfg.users, decision: w.decision}},
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
		Round: round, Workload: w.id, Server: s.Kind, Depth: depth, Rate: rate,
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
