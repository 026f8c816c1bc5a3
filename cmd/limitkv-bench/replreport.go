package main

import (
	"fmt"
	"math"
	"strings"
)

// replSummary is the figures of the run in a few lines, for the log.
func replSummary(r *replResults) []string {
	var out []string
	if l := r.Lag; l != nil {
		for _, s := range l.Replicas {
			out = append(out, fmt.Sprintf("lag, replica %d, at %s writes/s: p50 %s, p99 %s, max %s (medians of %d rounds)",
				s.Replica, commas(l.Rate), usText(s.P50us), usText(s.P99us), usText(s.MaxUs), len(l.Rounds)))
		}
	}
	for _, row := range r.Cost {
		out = append(out, fmt.Sprintf("%s d=%d: %s ops/s alone, %s with 2 replicas (%.2fx); master CPU %.2f µs/req alone, %.2f with replicas (%.2fx)",
			row.Workload, row.Depth, commas(row.None.OpsPerSec), commas(row.Two.OpsPerSec), row.Ratio, row.None.UsPerReq, row.Two.UsPerReq, row.CPURatio))
	}
	if s := r.Sync; s != nil {
		out = append(out, fmt.Sprintf("full sync of %s keys: link up %.0f ms after REPLICAOF, master's log %.0f ms (medians of %d)",
			commas(float64(s.Keys)), s.ToLinkUpMs, s.MasterTookMs, len(s.Rounds)))
	}
	if f := r.Failover; f != nil {
		for _, m := range f.Modes {
			line := fmt.Sprintf("failover, %s: switch %.0f ms, first write %.0f ms", m.Mode, m.ToSwitchMs, m.ToFirstWriteMs)
			if m.ToFirstConfirmedMs > 0 {
				line += fmt.Sprintf(", first confirmed write %.0f ms", m.ToFirstConfirmedMs)
			}
			out = append(out, line+fmt.Sprintf(" (medians of %d); %d of %d acknowledged writes lost", m.Rounds, m.Lost, m.Acked))
		}
	}
	return out
}

// usText renders a duration in µs, or in ms from 10 ms.
func usText(v float64) string {
	if v >= 10_000 {
		return fmt.Sprintf("%.1f ms", v/1000)
	}
	return fmt.Sprintf("%.0f µs", v)
}

// replReport is the page of the replication scenario (replication.md),
// or of its failover rounds alone (failover.md).
func replReport(name, title string, r *replResults) *report {
	m := r.Meta
	rep := newReport(name, title, m, "Every server, the load generator and the sentinels share these cores: a replica's work takes CPU from its master and from the client, which a deployment with a machine per server would not see.")
	rep.data = r
	p := rep.p
	p("- Servers: %s, commit %s, built with %s; memory-only (`persistence no`), each started from a config file of its own, on loopback. `redis-sentinel --version`: %s.",
		m.LimitkvVersion, m.Commit, m.GoVersion, orDash(r.Settings.SentinelVersion))
	if r.Lag != nil || len(r.Cost) > 0 || r.Sync != nil {
		p("- Client: the Go load generator in `cmd/limitkv-bench` (the one of results.md), %d connections, %s warmup then %s measured per run, %d round(s). Figures are medians over the rounds unless said otherwise; on a shared 2-core machine single runs vary by 10%% or more.",
			m.Conns, m.Warmup, m.Duration, m.Rounds)
	}
	p("")

	if l := r.Lag; l != nil {
		p("## Replication lag")
		p("")
		depth := "unpipelined"
		if l.Depth > 1 {
			depth = fmt.Sprintf("in batches of %d", l.Depth)
		}
		p("A master with two replicas takes %s writes/s, open loop (each of the %d connections sends on a fixed schedule, %s), the connections in turn sending `%s`. Meanwhile the benchmark publishes a timestamp on the master %d times a second, and a subscriber on each replica records when it arrives: a `PUBLISH` travels in the replication stream behind every write made before it, so arrival minus send is the replication delay, the master's and the replica's processing and the delivery to the subscriber included (both ends in one process: one monotonic clock). Per replica, the medians over %d round(s) of each round's percentiles:",
			commas(l.Rate), l.Conns, depth, strings.Join(l.Writes, "`, `"), l.ProbeRate, len(l.Rounds))
		p("")
		p("| replica | p50 | p99 | max | worst max of a round | probes received / sent |")
		p("|---|---:|---:|---:|---:|---:|")
		for _, s := range l.Replicas {
			p("| %d | **%s** | **%s** | %s | %s | %d / %d |", s.Replica, usText(s.P50us), usText(s.P99us), usText(s.MaxUs), usText(s.WorstUs), s.Received, s.Sent)
		}
		p("")
		p("| round | writes/s achieved | write p99 on the master | master CPU | replicas' CPU | client CPU | replica 1 p50 / p99 / max | replica 2 p50 / p99 / max |")
		p("|---|---:|---:|---:|---:|---:|---|---|")
		for _, x := range l.Rounds {
			cells := []string{}
			for _, s := range x.Replicas {
				cells = append(cells, fmt.Sprintf("%s / %s / %s", usText(s.P50us), usText(s.P99us), usText(s.MaxUs)))
			}
			for len(cells) < 2 {
				cells = append(cells, "–")
			}
			errs := ""
			if x.WriteErrors > 0 {
				errs = fmt.Sprintf(" **INVALID: %d error replies (%s)**", x.WriteErrors, x.FirstError)
			}
			p("| %d | %s%s | %s | %.2f | %s | %.2f | %s | %s |", x.Round, commas(x.WriteOpsPerSec), errs, usText(x.WriteP99us), x.MasterCores,
				coresList(x.ReplicaCores), x.ClientCores, cells[0], cells[1])
		}
		p("")
		p("After the rounds the replicas' `DEBUG DIGEST` equals the master's: %v.", l.InSync)
		p("")
	}

	if len(r.Cost) > 0 {
		p("## What replicas cost their master")
		p("")
		p("Closed loop (each connection sends its next request or batch of 16 as soon as it has the replies), on two fresh masters with the same history: one alone, one with two replicas attached, alternating run by run (the first of a pair flips from one round to the next). Throughput is the median over the rounds; the master's CPU per request is its utime+stime (`/proc/<pid>/stat`) during the window divided by the requests answered, median over the rounds. The replicas run on the same 2 cores, so their CPU (also shown) is taken from the master and the client: the throughput ratio says what replicas cost *on this machine*, the CPU per request what they cost the master itself. The target: no more than 10%% lower throughput with replicas.")
		p("")
		p("| workload | depth | ops/s alone | ops/s with 2 replicas | with / alone | master CPU µs/req alone | with replicas | with / alone | replicas' CPU (cores) | catch-up after the window |")
		p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, row := range r.Cost {
			p("| `%s` | %d | %s | %s | **%.2f** | %.2f | %.2f | **%.2f** | %.2f | %.0f ms |", row.Command, row.Depth, commas(row.None.OpsPerSec), commas(row.Two.OpsPerSec), row.Ratio,
				row.None.UsPerReq, row.Two.UsPerReq, row.CPURatio, row.Two.ReplicaCores, row.Two.CatchUpMs)
		}
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, row := range r.Cost {
			lo, hi = min(lo, row.Ratio), max(hi, row.Ratio)
		}
		verdict := "met"
		if lo < 0.9 {
			verdict = "not met"
		}
		p("")
		p("The target is **%s** on this machine: with two replicas the master answered %.2f to %.2f times the requests it answered alone.", verdict, lo, hi)
		p("")
		p("Every run (cores busy during the window; *other* is everything else on the machine, the replicas included; *behind* is how far the slower replica was from the master's offset when the window ended):")
		p("")
		p("| round | workload | depth | replicas | ops/s | p99 | master cores | µs/req | replicas' cores | client cores | other cores | behind | load avg before |")
		p("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, x := range r.CostRuns {
			behind := "–"
			if x.Replicas > 0 {
				behind = mib(x.BehindBytes)
			}
			errs := ""
			if x.Errors > 0 {
				errs = fmt.Sprintf(" **INVALID: %d error replies**", x.Errors)
			}
			p("| %d | %s | %d | %d | %s%s | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %s | %.1f |", x.Round, x.Workload, x.Depth, x.Replicas, commas(x.OpsPerSec), errs, usText(x.P99us),
				x.MasterCores, x.MasterUsReq, x.ReplicaCores, x.ClientCores, x.OtherCores, behind, x.Load1)
		}
		p("")
	}

	if s := r.Sync; s != nil {
		p("## Full sync")
		p("")
		p("A master holding %s keys (%s `SET str:<n> <32 bytes>` and %s `RL.FIXED rl:<n> 100 1h` states, loaded by 4 connections pipelining 256 deep in %.1f s; master RSS %s). An empty limitkv is started and sent `REPLICAOF` the master; its `INFO replication` is read every 2 ms from then on.",
			commas(float64(s.Keys)), commas(float64(s.Strings)), commas(float64(s.RateLimits)), s.FillSec, mib(s.MasterRSS))
		if s.LoadRate > 0 {
			p("Meanwhile the master serves %s requests/s, open loop, from %d connections (`%s`), whose latency is compared with a baseline run without a sync: a full sync captures the keyspace shard by shard, each under its lock, so the longest time it held one shard shows as the worst latency of the requests waiting on that shard, together with the wait for a core: the sync's two ends keep more than a core busy (the CPU columns), so on 2 shared cores the load queues too.",
				commas(s.LoadRate), s.LoadConns, strings.Join(s.LoadOps, "`, `"))
		}
		p("")
		p("| round | `master_sync_in_progress:1` seen | sync over (`:0`) | `master_link_status:up` | master's log: keys, took | replica's log: keys, took | replica keys | replica RSS | digest equal | master / replica CPU | load p99 / max during the sync |")
		p("|---:|---:|---:|---:|---|---|---:|---:|---|---|---|")
		for i, x := range s.Rounds {
			load := "–"
			if s.LoadRate > 0 {
				load = fmt.Sprintf("%s / %s", usText(x.LoadP99us), usText(x.LoadMaxUs))
			}
			p("| %d | %.0f ms | %.0f ms | **%.0f ms** | %s, %.0f ms | %s, %.0f ms | %s | %s | %v | %.2f / %.2f | %s |", i+1, x.ToSyncStartMs, x.ToSyncEndMs, x.ToLinkUpMs,
				commas(float64(x.MasterKeys)), x.MasterTookMs, commas(float64(x.ReplicaKeys)), x.ReplicaTookMs, commas(float64(x.ReplicaDBSize)),
				mib(x.ReplicaRSS), x.DigestEqual, x.MasterCores, x.ReplicaCores, load)
		}
		p("")
		p("The replica receives the keys the load's `RL.FIXED` created besides the loaded ones, hence more than %s keys. Medians: link up %.0f ms after `REPLICAOF`; the master's own figure (\"Synchronization with replica ... succeeded\", from `PSYNC` to the end of the copy) %.0f ms.", commas(float64(s.Keys)), s.ToLinkUpMs, s.MasterTookMs)
		if s.LoadRate > 0 {
			p("")
			p("| load on the master (%s req/s) | requests | p50 | p99 | p99.9 | max |", commas(s.LoadRate))
			p("|---|---:|---:|---:|---:|---:|")
			for _, x := range []struct {
				name string
				l    *latencyStats
			}{{"baseline, no sync", s.Baseline}, {"during the syncs", s.During}} {
				p("| %s | %s | %s | %s | %s | %s |", x.name, commas(float64(x.l.Samples)), usText(x.l.P50us), usText(x.l.P99us), usText(x.l.P999us), usText(x.l.MaxUs))
			}
		}
		p("")
		p("The longest time a sync held one shard's lock is kept by the server (`replication.Stats.LastSyncPause`) but not shown by `INFO`; the worst latency above bounds it from above.")
		p("")
	}

	if f := r.Failover; f != nil {
		p("## Failover under redis-sentinel")
		p("")
		p("A master, two replicas and three `redis-sentinel` (quorum 2, `down-after-milliseconds %d`, `failover-timeout 10000`, `parallel-syncs 1`), fresh for every round. %d goroutines write through go-redis's `NewFailoverClient` (`MaxRetries: -1`, 500 ms dial and 1 s read timeouts; a failed write is retried 10 ms later), each write `SET fo:<writer>:<n> <n>` on a key of its own; with WAIT, `SET` and `WAIT 1 100` are pipelined on one connection and a write counts as acknowledged only when `WAIT` answers at least 1. After a second of writes the master is killed with SIGKILL. Times from the kill: the sentinels' events (the first sentinel to publish each), the client's first successful write among those sent after the kill, and the other replica's link up with the new master. Then every acknowledged write is looked for on the new master (`MGET`). How soon a client writes again depends on the client as much as on the server: go-redis's connection pool, once as many dials as its pool size have failed, stops dialing and tries once a second, so a client that kept failing while the old master was gone comes back at the first such try after the switch.",
			f.DownAfterMs, f.Writers)
		p("")
		p("| mode | rounds | to `+switch-master` | to the first write on the new master | to the first write WAIT confirmed | acknowledged writes | lost | most lost in a round |")
		p("|---|---:|---:|---:|---:|---:|---:|---:|")
		for _, x := range f.Modes {
			conf := "–"
			if x.ToFirstConfirmedMs > 0 {
				conf = fmt.Sprintf("%.0f ms", x.ToFirstConfirmedMs)
			}
			p("| %s | %d | **%.0f ms** | **%.0f ms** | %s | %s | **%d** | %d |", x.Mode, x.Rounds, x.ToSwitchMs, x.ToFirstWriteMs, conf, commas(float64(x.Acked)), x.Lost, x.MaxLost)
		}
		p("")
		p("| mode | round | promoted | sentinel events (ms after the kill) | first write | other replica following | acknowledged (before the kill) | failed attempts | lost | unconfirmed (lost) |")
		p("|---|---:|---|---|---:|---:|---:|---:|---:|---:|")
		for _, x := range f.Rounds {
			unconf := "–"
			if x.Mode == modeWait {
				unconf = fmt.Sprintf("%d (%d)", x.Unconfirmed, x.LostUnconfirmed)
			}
			lost := fmt.Sprint(x.Lost)
			switch {
			case x.Lost > 0 && x.LostWindowMs > 0:
				lost += fmt.Sprintf(", the first acknowledged %.1f ms before the kill", x.LostWindowMs)
			case x.Lost > 0:
				lost += fmt.Sprintf(", acknowledged as the master died (read %.1f ms after the kill)", -x.LostWindowMs)
			}
			p("| %s | %d | %s | %s | %.0f ms | %.0f ms | %s (%s) | %d | %s | %s |", x.Mode, x.Round, x.Promoted, eventLine(x.Events), x.ToFirstWriteMs, x.ToReplicaFollowsMs,
				commas(float64(x.Acked)), commas(float64(x.AckedBeforeKill)), x.Failed, lost, unconf)
		}
		p("")
	}
	return rep
}

func coresList(v []float64) string {
	var parts []string
	for _, x := range v {
		parts = append(parts, fmt.Sprintf("%.2f", x))
	}
	return strings.Join(parts, " + ")
}
