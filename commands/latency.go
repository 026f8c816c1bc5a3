package commands

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/limitkv/limitkv/cmdspec"
)

// The latency monitor, as Redis 7.0's latency.c: with
// latency-monitor-threshold set (milliseconds), every event that lasts at
// least that long is recorded in its event's series, one sample per
// second (the worst), 160 samples per event, plus the event's all-time
// worst. Events: "command" and "fast-command" (a command, by its fast
// flag, as Redis samples them), "expire-cycle" (a round of active expiry),
// "snapshot" (the longest time a snapshot held one shard while capturing
// it) and whatever else reports through LatencyEvent. LATENCY HISTOGRAM
// reads the per-command histograms instead (latencyhist.go).

const latencySeriesLen = 160

type latencySample struct {
	unix, ms int64
}

type latencySeries struct {
	samples [latencySeriesLen]latencySample
	idx     int
	max     int64
}

type latencyMonitor struct {
	mu     sync.Mutex
	events map[string]*latencySeries
}

// LatencyEvent records that event lasted d, if the latency monitor is on
// and d reaches its threshold. Parts of the server outside this package
// (snapshots) report through it.
func (s *Server) LatencyEvent(event string, d time.Duration) {
	if t := s.Cfg.latencyThreshold.Load(); t > 0 && d.Milliseconds() >= t {
		s.latency.add(event, d.Milliseconds())
	}
}

func (m *latencyMonitor) add(event string, ms int64) {
	now := time.Now().Unix()
	m.mu.Lock()
	defer m.mu.Unlock()
	ts := m.events[event]
	if ts == nil {
		if m.events == nil {
			m.events = map[string]*latencySeries{}
		}
		ts = &latencySeries{}
		m.events[event] = ts
	}
	ts.max = max(ts.max, ms)
	prev := &ts.samples[(ts.idx+latencySeriesLen-1)%latencySeriesLen]
	if prev.unix == now {
		prev.ms = max(prev.ms, ms)
		return
	}
	ts.samples[ts.idx] = latencySample{now, ms}
	ts.idx = (ts.idx + 1) % latencySeriesLen
}

// reset forgets the named events (all of them when none is named; names
// match in any case) and returns how many it forgot.
func (m *latencyMonitor) reset(names [][]byte) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for ev := range m.events {
		match := len(names) == 0
		for _, name := range names {
			if strings.EqualFold(ev, string(name)) {
				match = true
			}
		}
		if match {
			delete(m.events, ev)
			n++
		}
	}
	return n
}

// latencyView is a copy of one event's series, oldest sample first.
type latencyView struct {
	event   string
	samples []latencySample
	last    latencySample
	max     int64
}

func (ts *latencySeries) view(event string) latencyView {
	v := latencyView{event: event, max: ts.max, last: ts.samples[(ts.idx+latencySeriesLen-1)%latencySeriesLen]}
	for j := 0; j < latencySeriesLen; j++ {
		if s := ts.samples[(ts.idx+j)%latencySeriesLen]; s.unix != 0 {
			v.samples = append(v.samples, s)
		}
	}
	return v
}

// views returns every event's series, sorted by event name.
func (m *latencyMonitor) views() []latencyView {
	m.mu.Lock()
	out := make([]latencyView, 0, len(m.events))
	for ev, ts := range m.events {
		out = append(out, ts.view(ev))
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].event < out[j].event })
	return out
}

func (m *latencyMonitor) view(event string) (latencyView, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ts := m.events[event]
	if ts == nil {
		return latencyView{}, false
	}
	return ts.view(event), true
}

// LATENCY LATEST: every event's last sample and all-time worst.
func cmdLatencyLatest(c *Ctx) {
	views := c.Srv.latency.views()
	c.W.Array(len(views))
	for _, v := range views {
		c.W.Array(4)
		c.W.BulkString(v.event)
		c.W.Int(v.last.unix)
		c.W.Int(v.last.ms)
		c.W.Int(v.max)
	}
}

// LATENCY HISTORY event: the event's samples, oldest first.
func cmdLatencyHistory(c *Ctx) {
	v, _ := c.Srv.latency.view(string(c.Args[2]))
	c.W.Array(len(v.samples))
	for _, s := range v.samples {
		c.W.Array(2)
		c.W.Int(s.unix)
		c.W.Int(s.ms)
	}
}

// LATENCY RESET [event ...]
func cmdLatencyReset(c *Ctx) {
	c.W.Int(int64(c.Srv.latency.reset(c.Args[2:])))
}

// LATENCY GRAPH event: the event's samples as an ASCII chart, one column
// per sample, labelled with how long ago it was.
func cmdLatencyGraph(c *Ctx) {
	v, ok := c.Srv.latency.view(string(c.Args[2]))
	if !ok {
		c.W.Error("No samples available for event '" + string(c.Args[2]) + "'")
		return
	}
	c.W.Verbatim("txt", latencyGraph(v, time.Now().Unix()))
}

const latencyGraphCols, latencyGraphRows = 80, 4

func latencyGraph(v latencyView, now int64) string {
	var b strings.Builder
	lo, hi := int64(0), int64(0)
	for i, s := range v.samples {
		if i == 0 || s.ms < lo {
			lo = s.ms
		}
		hi = max(hi, s.ms)
	}
	fmt.Fprintf(&b, "%s - high %d ms, low %d ms (all time high %d ms)\n", v.event, hi, lo, v.max)
	b.WriteString(strings.Repeat("-", latencyGraphCols))
	b.WriteByte('\n')
	for start := 0; start < len(v.samples); start += latencyGraphCols {
		if start > 0 {
			b.WriteByte('\n')
		}
		part := v.samples[start:min(start+latencyGraphCols, len(v.samples))]
		// Bars: a sample's height is its place between the low and the
		// high, in rows of latencyGraphRows.
		for row := latencyGraphRows; row >= 1; row-- {
			for _, s := range part {
				h := latencyGraphRows
				if hi > lo {
					h = 1 + int((s.ms-lo)*(latencyGraphRows-1)/(hi-lo))
				}
				if h >= row {
					b.WriteByte('#')
				} else {
					b.WriteByte(' ')
				}
			}
			b.WriteByte('\n')
		}
		// Labels, written downwards: how long ago each sample was.
		labels := make([]string, len(part))
		longest := 0
		for i, s := range part {
			labels[i] = agoLabel(now - s.unix)
			longest = max(longest, len(labels[i]))
		}
		b.WriteByte('\n')
		for r := 0; r < longest; r++ {
			for _, l := range labels {
				if r < len(l) {
					b.WriteByte(l[r])
				} else {
					b.WriteByte(' ')
				}
			}
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func agoLabel(sec int64) string {
	switch {
	case sec < 60:
		return strconv.FormatInt(sec, 10) + "s"
	case sec < 3600:
		return strconv.FormatInt(sec/60, 10) + "m"
	case sec < 86400:
		return strconv.FormatInt(sec/3600, 10) + "h"
	}
	return strconv.FormatInt(sec/86400, 10) + "d"
}

// LATENCY DOCTOR: a report on the events recorded, with advice.
func cmdLatencyDoctor(c *Ctx) {
	c.W.Verbatim("txt", latencyReport(c.Srv, c.Srv.latency.views(), time.Now().Unix()))
}

func latencyReport(s *Server, views []latencyView, now int64) string {
	threshold := s.Cfg.latencyThreshold.Load()
	if len(views) == 0 && threshold == 0 {
		return "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. " +
			"You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. " +
			"If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n"
	}
	var b strings.Builder
	advice := map[string]bool{}
	var order []string
	advise := func(key string) {
		if !advice[key] {
			advice[key] = true
			order = append(order, key)
		}
	}
	for i, v := range views {
		if i == 0 {
			b.WriteString("Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n")
		}
		var sum, oldest int64
		for _, sm := range v.samples {
			sum += sm.ms
			if oldest == 0 || sm.unix < oldest {
				oldest = sm.unix
			}
		}
		n := int64(len(v.samples))
		var avg, mad, period int64
		if n > 0 {
			avg = sum / n
			period = max(now-oldest, 1)
			var dev int64
			for _, sm := range v.samples {
				dev += abs64(avg - sm.ms)
			}
			mad = dev / n
		}
		fmt.Fprintf(&b, "%d. %s: %d latency spikes (average %dms, mean deviation %dms, period %.2f sec). Worst all time event %dms.\n",
			i+1, v.event, n, avg, mad, float64(period)/float64(max(n, 1)), v.max)
		switch v.event {
		case "command":
			slower := s.Cfg.slowlogSlower.Load()
			if slower < 0 {
				advise("slowlog-enable")
			} else if slower/1000 > threshold {
				advise("slowlog-tune")
			}
			advise("slowlog-inspect")
			advise("big-values")
		case "fast-command":
			advise("scheduler")
		case "expire-cycle":
			advise("hz")
			advise("big-values")
		case "eviction-cycle":
			advise("eviction")
		case "snapshot":
			advise("snapshot")
		}
	}
	if anonHugePages() > 0 {
		advise("thp")
	}
	switch {
	case len(views) == 0 && len(order) == 0:
		b.WriteString("Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. " +
			"I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n")
		return b.String()
	case len(order) == 0:
		b.WriteString("\nWhile there are latency events logged, I'm not able to suggest any easy fix. " +
			"Please use the Redis community to get some help, providing this report in your help request.\n")
		return b.String()
	}
	b.WriteString("\nI have a few advices for you:\n\n")
	for _, key := range order {
		switch key {
		case "slowlog-enable":
			fmt.Fprintf(&b, "- Commands were slow, but the slow log is off: 'CONFIG SET slowlog-log-slower-than %d' keeps those slower than the latency threshold, so that SLOWLOG GET shows which they were.\n", threshold*1000)
		case "slowlog-tune":
			fmt.Fprintf(&b, "- The slow log keeps only commands slower than it is set for, which is more than the latency threshold: 'CONFIG SET slowlog-log-slower-than %d' makes it keep the ones the latency monitor sees.\n", threshold*1000)
		case "slowlog-inspect":
			b.WriteString("- SLOWLOG GET shows the slowest commands with their arguments; LATENCY HISTOGRAM and INFO latencystats show which commands are slow in general.\n")
		case "big-values":
			b.WriteString("- Commands on big values (long lists, big sorted sets and hashes, whole-keyspace commands such as KEYS or FLUSHALL) take time in proportion to their size, and so do deleting or expiring such values: split them into smaller keys.\n")
		case "scheduler":
			b.WriteString("- Fast commands took long: the machine does not give limitkv the CPU it needs, or its threads waited for each other. Lower the load on the machine, look for noisy neighbours, and check that GOMAXPROCS matches the CPUs the process may use.\n")
		case "hz":
			if s.Cfg.Hz() < 100 {
				b.WriteString("- Active expiry ran long rounds: 'CONFIG SET hz 100' makes it run more often, in smaller steps.\n")
			}
		case "eviction":
			b.WriteString("- Evicting keys for maxmemory took long: a sudden drop of maxmemory, or a burst of writes of big values, forces many evictions at once.\n")
		case "snapshot":
			b.WriteString("- A snapshot held a shard long while capturing its changes: the commands on that shard waited. Very big values and very many changes between snapshots make the capture longer; a shorter snapshot-interval makes each smaller.\n")
		case "thp":
			b.WriteString("- The process uses transparent huge pages, which can stall it when memory is touched for the first time. 'echo never > /sys/kernel/mm/transparent_hugepage/enabled' turns them off (restart limitkv afterwards).\n")
		}
	}
	return b.String()
}

func abs64(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// anonHugePages returns the bytes of transparent huge pages the process
// uses, from /proc (0 where there is none).
func anonHugePages() int64 {
	data, err := os.ReadFile("/proc/self/smaps_rollup")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "AnonHugePages:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
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
		snap *histSnapshot
	}
	var rows []row
	for _, spec := range specs {
		snap := new(histSnapshot)
		if c.Srv.cmd(spec).hist.snapshot(snap) {
			rows = append(rows, row{spec.FullName(), snap})
		}
	}
	c.W.Map(len(rows))
	for _, r := range rows {
		c.W.BulkString(r.name)
		c.W.Map(2)
		c.W.BulkString("calls")
		c.W.Int(int64(r.snap.total))
		c.W.BulkString("histogram_usec")
		levels := r.snap.cdf()
		c.W.Map(len(levels))
		for _, l := range levels {
			c.W.Int(l.usec)
			c.W.Int(int64(l.count))
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

func cmdLatencyHelp(c *Ctx) {
	help(c, "LATENCY", []string{
		"DOCTOR", "    Return a human readable latency analysis report.",
		"GRAPH <event>", "    Return an ASCII latency graph for the <event> class.",
		"HISTORY <event>", "    Return time-latency samples for the <event> class.",
		"LATEST", "    Return the latest latency samples for all events.",
		"RESET [<event> ...]", "    Reset latency data of one or more <event> classes.",
		"    (default: reset all data for all event classes)",
		"HISTOGRAM [COMMAND ...]", "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
		"    If no commands are specified then all histograms are replied.",
	})
}

func infoLatencyStats(s *Server, b *strings.Builder) {
	if !s.Cfg.latencyTracking.Load() {
		return
	}
	var pcts []float64
	if p := s.Cfg.percentiles.Load(); p != nil {
		pcts = *p
	}
	snap := new(histSnapshot)
	for _, spec := range s.sortedSpecs() {
		if !s.cmd(spec).hist.snapshot(snap) {
			continue
		}
		b.WriteString("latency_percentiles_usec_")
		b.WriteString(infoSafe(spec.FullName()))
		b.WriteByte(':')
		for i, p := range pcts {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(b, "p%s=%.3f", formatPercentile(p), float64(snap.percentile(p))/1000)
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

// parsePercentiles reads latency-tracking-info-percentiles as Redis does:
// numbers from 0 to 100 separated by single spaces; "" is none.
func parsePercentiles(v string) ([]float64, error) {
	if v == "" {
		return nil, nil
	}
	var out []float64
	for _, f := range strings.Split(v, " ") {
		p, err := strconv.ParseFloat(f, 64)
		if err != nil || f == "" || math.IsNaN(p) {
			return nil, errors.New("Invalid latency-tracking-info-percentiles parameters")
		}
		if p < 0 || p > 100 {
			return nil, errors.New("latency-tracking-info-percentiles parameters should sit between [0.0,100.0]")
		}
		out = append(out, p)
	}
	return out, nil
}

func formatPercentiles(p []float64) string {
	var b strings.Builder
	for i, f := range p {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(formatPercentile(f))
	}
	return b.String()
}

// formatPercentile writes a percentile as Redis does: "%f" without its
// trailing zeros (99.9, 50, 12.345678).
func formatPercentile(f float64) string {
	s := strconv.FormatFloat(f, 'f', 6, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}
