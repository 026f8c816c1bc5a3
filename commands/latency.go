package commands

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/config"
	"github.com/limitkv/limitkv/observe"
)

// latencyCommands: the latency monitor.
func latencyCommands() []*command {
	return []*command{
		cmd("latency", -2, "", nil).withSub(
			cmd("doctor", 2, "admin noscript loading stale", cmdLatencyDoctor),
			cmd("graph", 3, "admin noscript loading stale", cmdLatencyGraph),
			cmd("help", 2, "loading stale", cmdHelp),
			cmd("histogram", -2, "admin noscript loading stale", cmdLatencyHistogram),
			cmd("history", 3, "admin noscript loading stale", cmdLatencyHistory),
			cmd("latest", 2, "admin noscript loading stale", cmdLatencyLatest),
			cmd("reset", -2, "admin noscript loading stale", cmdLatencyReset),
		),
	}
}

// LATENCY, as Redis 7.0's latency.c: with latency-monitor-threshold set
// (milliseconds), every event that lasts at least that long is recorded
// in the latency monitor (observe.LatencyMonitor). Events: "command" and
// "fast-command" (a command, by its fast flag, as Redis samples them),
// "expire-cycle" (a round of active expiry), "snapshot" (the longest time
// a snapshot held one shard while capturing it) and whatever else reports
// through LatencyEvent. LATENCY HISTOGRAM reads the per-command histograms
// instead (observe.Histogram).

// LatencyEvent records that event lasted d, if the latency monitor is on
// and d reaches its threshold. Parts of the server outside this package
// (snapshots) report through it.
func (s *Server) LatencyEvent(event string, d time.Duration) {
	if t := s.Cfg.latencyThreshold.Load(); t > 0 && d.Milliseconds() >= t {
		s.latency.Add(event, d.Milliseconds())
	}
}

// LATENCY LATEST: every event's last sample and all-time worst.
func cmdLatencyLatest(c *Ctx) {
	views := c.Srv.latency.Views()
	c.W.Array(len(views))
	for _, v := range views {
		c.W.Array(4)
		c.W.BulkString(v.Event)
		c.W.Int(v.Last.Unix)
		c.W.Int(v.Last.MS)
		c.W.Int(v.Max)
	}
}

// LATENCY HISTORY event: the event's samples, oldest first.
func cmdLatencyHistory(c *Ctx) {
	v, _ := c.Srv.latency.View(string(c.Args[2]))
	c.W.Array(len(v.Samples))
	for _, s := range v.Samples {
		c.W.Array(2)
		c.W.Int(s.Unix)
		c.W.Int(s.MS)
	}
}

// LATENCY RESET [event ...]
func cmdLatencyReset(c *Ctx) {
	c.W.Int(int64(c.Srv.latency.Reset(c.Args[2:])))
}

// LATENCY GRAPH event: the event's samples as an ASCII chart, one column
// per sample, labelled with how long ago it was.
func cmdLatencyGraph(c *Ctx) {
	v, ok := c.Srv.latency.View(string(c.Args[2]))
	if !ok {
		c.W.Error("No samples available for event '" + string(c.Args[2]) + "'")
		return
	}
	c.W.Verbatim("txt", observe.LatencyGraph(v, time.Now().Unix()))
}

// LATENCY DOCTOR: a report on the events recorded, with advice.
func cmdLatencyDoctor(c *Ctx) {
	cfg := c.Srv.Cfg
	c.W.Verbatim("txt", observe.LatencyDoctor(c.Srv.latency.Views(), time.Now().Unix(), observe.DoctorFacts{
		Threshold:     cfg.latencyThreshold.Load(),
		SlowlogSlower: cfg.slowlogSlower.Load(),
		Hz:            cfg.Hz(),
		HugePages:     observe.AnonHugePages() > 0,
	}))
}

// LATENCY HISTOGRAM [command ...]: each command's calls and cumulative
// distribution of durations; all commands timed so far when none is named.
// Unknown names are skipped; a container's name covers its subcommands.
func cmdLatencyHistogram(c *Ctx) {
	var specs []*cmdspec.Spec
	if len(c.Args) == 2 {
		for _, spec := range c.Srv.Table.Specs() {
			specs = append(specs, spec)
			specs = append(specs, spec.Sub...)
		}
	} else {
		for _, name := range c.Args[2:] {
			spec := c.Srv.lookupName(name)
			if spec == nil {
				continue
			}
			specs = append(specs, spec)
			if spec.Parent() == nil {
				specs = append(specs, spec.Sub...)
			}
		}
	}
	type row struct {
		name string
		snap *observe.HistogramSnapshot
	}
	var rows []row
	for _, spec := range specs {
		snap := new(observe.HistogramSnapshot)
		if c.Srv.cmd(spec).hist.Snapshot(snap) {
			rows = append(rows, row{spec.FullName(), snap})
		}
	}
	c.W.Map(len(rows))
	for _, r := range rows {
		c.W.BulkString(r.name)
		c.W.Map(2)
		c.W.BulkString("calls")
		c.W.Int(int64(r.snap.Total))
		c.W.BulkString("histogram_usec")
		levels := r.snap.CDF()
		c.W.Map(len(levels))
		for _, l := range levels {
			c.W.Int(l.Usec)
			c.W.Int(int64(l.Count))
		}
	}
}

// lookupName finds a command by its full name ("get", "config|set").
func (s *Server) lookupName(name []byte) *cmdspec.Spec {
	if i := bytes.IndexByte(name, '|'); i >= 0 {
		spec := s.Table.Lookup(name[:i])
		if spec == nil {
			return nil
		}
		return spec.LookupSub(name[i+1:])
	}
	return s.Table.Lookup(name)
}

func infoLatencyStats(s *Server, b *strings.Builder) {
	if !s.Cfg.latencyTracking.Load() {
		return
	}
	var pcts []float64
	if p := s.Cfg.percentiles.Load(); p != nil {
		pcts = *p
	}
	snap := new(observe.HistogramSnapshot)
	for _, spec := range s.sortedSpecs() {
		if !s.cmd(spec).hist.Snapshot(snap) {
			continue
		}
		b.WriteString("latency_percentiles_usec_")
		b.WriteString(infoSafe(spec.FullName()))
		b.WriteByte(':')
		for i, p := range pcts {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(b, "p%s=%.3f", config.FormatPercentile(p), float64(snap.Percentile(p))/1000)
		}
		b.WriteString("\r\n")
	}
}

// sortedSpecs returns every command and subcommand, sorted by full name.
func (s *Server) sortedSpecs() []*cmdspec.Spec {
	var specs []*cmdspec.Spec
	for _, spec := range s.Table.Specs() {
		specs = append(specs, spec)
		specs = append(specs, spec.Sub...)
	}
	sort.Slice(specs, func(i, j int) bool { return specs[i].FullName() < specs[j].FullName() })
	return specs
}
