package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The maxmemory flood: a rate-limit-only server under a memory limit,
// flooded with distinct keys it can never all hold (a scan of user ids, a
// botnet of source addresses). RL.FIXED on a new key each time, at a fixed
// rate (-paced-rate) over -conns connections, until -flood-keys requests
// were sent; every second INFO's used_memory and the process's RSS are
// read. What it shows: that used_memory stays at maxmemory (the policy
// evicts) and RSS near it (the Go collector is kept in line), and the
// latency of the decisions meanwhile:
//
//	go run ./cmd/limitkv-bench flood -flood-keys 5000000 -flood-maxmemory 64mb -flood-policy allkeys-lfu
//
// It writes flood.md and flood.json beside the other results.

func floodFlags(fs *flag.FlagSet, c *config) {
	fs.IntVar(&c.floodKeys, "flood-keys", 5_000_000, "requests of the maxmemory flood, each on a new key")
	fs.StringVar(&c.floodMaxMemory, "flood-maxmemory", "64mb", "maxmemory of the flood's server")
	fs.StringVar(&c.floodPolicy, "flood-policy", "allkeys-lfu", "maxmemory-policy of the flood's server")
}

type floodResult struct {
	Keys        int           `json:"keys"`
	Rate        float64       `json:"rate"`
	Conns       int           `json:"conns"`
	MaxMemory   int64         `json:"maxmemory"`
	Policy      string        `json:"policy"`
	Seconds     float64       `json:"seconds"`
	Achieved    float64       `json:"achieved_rate"`
	Errors      int64         `json:"error_replies"`
	FirstError  string        `json:"first_error,omitempty"`
	P50         float64       `json:"p50_us"`
	P99         float64       `json:"p99_us"`
	P999        float64       `json:"p999_us"`
	Max         float64       `json:"max_us"`
	UsedMax     int64         `json:"used_memory_max"`
	UsedLast    int64         `json:"used_memory_last"`
	RSSMax      int64         `json:"rss_max"`
	RSSLast     int64         `json:"rss_last"`
	Evicted     int64         `json:"evicted_keys"`
	KeysLeft    int64         `json:"keys_left"`
	CPU         cpuUse        `json:"cpu"`
	Samples     []floodSample `json:"samples"`
	UsedOverPct float64       `json:"used_memory_max_over_maxmemory_pct"`
	RSSRatio    float64       `json:"rss_max_over_maxmemory"`
}

type floodSample struct {
	T    float64 `json:"t"`
	Used int64   `json:"used_memory"`
	RSS  int64   `json:"rss"`
}

// runFlood is the scenario: flood.md and .json.
func (b *bench) runFlood(ctx context.Context, started time.Time, redisVersion string) (int, error) {
	m := b.meta(started, redisVersion)
	res, err := b.flood(ctx)
	if err != nil {
		return 1, err
	}
	finish(&m, started)
	rep := newReport("flood", "limitkv: maxmemory flood", m, "")
	rep.p("- Server: %s, commit %s, built with %s.", m.LimitkvVersion, m.Commit, m.GoVersion)
	rep.p("")
	section := floodMarkdown(res)
	b.logf("%s", section)
	rep.body.WriteString(section)
	rep.data = struct {
		Meta  meta         `json:"meta"`
		Flood *floodResult `json:"flood"`
	}{m, res}
	if err := b.publish(rep, started); err != nil {
		return 1, err
	}
	return 0, nil
}

func (b *bench) flood(ctx context.Context) (*floodResult, error) {
	cfg := b.cfg
	rate := cfg.pacedRate
	if rate <= 0 {
		return nil, fmt.Errorf("the flood needs a -paced-rate")
	}
	maxmem, err := parseBytes(cfg.floodMaxMemory)
	if err != nil {
		return nil, fmt.Errorf("-flood-maxmemory: %v", err)
	}
	dir := filepath.Join(b.tmp, "flood")
	s, err := startServer(kindLimitkv, b.limitkvBin, dir, func(port int) []string {
		return []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", filepath.Join(dir, "data"),
			"--loglevel", "warning", "--persistence", "no",
			"--maxmemory", cfg.floodMaxMemory, "--maxmemory-policy", cfg.floodPolicy}
	})
	if err != nil {
		return nil, err
	}
	defer s.Stop()
	c, err := dial(s.Addr)
	if err != nil {
		return nil, err
	}
	defer c.close()
	secs := float64(cfg.floodKeys) / rate
	res := &floodResult{Keys: cfg.floodKeys, Rate: rate, Conns: cfg.conns, MaxMemory: maxmem, Policy: cfg.floodPolicy, Seconds: secs}
	b.logf("maxmemory flood: %s distinct RL.FIXED keys at %s/s over %d connections (%.0f s), maxmemory %s, %s",
		commas(float64(cfg.floodKeys)), commas(rate), cfg.conns, secs, cfg.floodMaxMemory, cfg.floodPolicy)
	// Users drawn from 2^40: a repeat is rare, so nearly every request
	// creates a key.
	plans := []plan{{name: "RL.FIXED", op: op{cmd("RL.FIXED", keyArg("flood:"), lit("100"), lit("1h"))}, users: 1 << 40, decision: true}}
	start := time.Now()
	lr, err := runLoad(ctx, loadSpec{addr: s.Addr, pid: s.Pid(), conns: cfg.conns, depth: 1, plans: plans, warmup: 0, seed: 11, rate: rate,
		measure: func(ctx context.Context) error {
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			end := time.After(time.Duration(secs * float64(time.Second)))
			for {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-end:
					return nil
				case <-tick.C:
					used, err := c.infoInt("memory", "used_memory")
					if err != nil {
						return err
					}
					rss, err := rssBytes(s.Pid())
					if err != nil {
						return err
					}
					res.Samples = append(res.Samples, floodSample{T: time.Since(start).Seconds(), Used: used, RSS: rss})
					res.UsedMax, res.RSSMax = max(res.UsedMax, used), max(res.RSSMax, rss)
					if len(res.Samples)%10 == 0 {
						b.logf("  %3.0f s: used_memory %s, RSS %s", time.Since(start).Seconds(), mib(used), mib(rss))
					}
				}
			}
		}})
	if err != nil {
		return nil, err
	}
	p := lr.plans[0]
	res.Achieved = float64(p.ops) / lr.window.Seconds()
	res.Errors, res.FirstError = p.errors, p.firstErr
	res.CPU = lr.cpu
	q := func(x float64) float64 { return us(p.hist.quantile(x)) }
	res.P50, res.P99, res.P999, res.Max = q(0.5), q(0.99), q(0.999), q(1)
	if res.UsedLast, err = c.infoInt("memory", "used_memory"); err != nil {
		return nil, err
	}
	if res.RSSLast, err = rssBytes(s.Pid()); err != nil {
		return nil, err
	}
	if res.Evicted, err = c.infoInt("stats", "evicted_keys"); err != nil {
		return nil, err
	}
	v, err := c.ok("DBSIZE")
	if err != nil {
		return nil, err
	}
	res.KeysLeft = v.Int
	if maxmem > 0 {
		res.UsedOverPct = 100 * (float64(res.UsedMax) - float64(maxmem)) / float64(maxmem)
		res.RSSRatio = float64(res.RSSMax) / float64(maxmem)
	}
	return res, nil
}

func floodMarkdown(r *floodResult) string {
	var b strings.Builder
	p := func(f string, a ...any) { fmt.Fprintf(&b, f+"\n", a...) }
	p("## maxmemory flood")
	p("")
	p("`RL.FIXED flood:<random of 2^40> 100 1h` at %s requests/s over %d connections (open loop, depth 1), %s requests, on a limitkv with `--maxmemory %s --maxmemory-policy %s --persistence no`. used_memory from INFO and RSS from /proc every second.",
		commas(r.Rate), r.Conns, commas(float64(r.Keys)), mib(r.MaxMemory), r.Policy)
	p("")
	p("| | |")
	p("|---|---|")
	p("| achieved rate | %s/s |", commas(r.Achieved))
	p("| CPU, in cores: server / client / rest of the machine | %.2f / %.2f / %.2f |", r.CPU.Server, r.CPU.Client, r.CPU.Other)
	p("| latency p50 / p99 / p99.9 / max | %.0f / %.0f / %.0f / %.0f µs |", r.P50, r.P99, r.P999, r.Max)
	p("| used_memory, highest sample | %s (%+.1f%% of maxmemory) |", mib(r.UsedMax), r.UsedOverPct)
	p("| RSS, highest sample | %s (%.2fx maxmemory) |", mib(r.RSSMax), r.RSSRatio)
	p("| at the end: used_memory, RSS | %s, %s |", mib(r.UsedLast), mib(r.RSSLast))
	p("| evicted_keys, keys left | %s, %s |", commas(float64(r.Evicted)), commas(float64(r.KeysLeft)))
	p("| error replies | %d %s |", r.Errors, r.FirstError)
	return b.String()
}

// parseBytes reads a memory size as Redis's config does: 64mb, 1gb, 1000.
func parseBytes(s string) (int64, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1000}, {"m", 1000_000}, {"g", 1000_000_000}, {"b", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.m
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a memory size", s)
	}
	return n * mult, nil
}
