package observe

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// LatencyMonitor is the latency monitor, as Redis 7.0's latency.c: every
// event the server reports (those at least latency-monitor-threshold
// long: the server checks) is recorded in its event's series, one sample
// per second (the worst), 160 samples per event, plus the event's
// all-time worst. The server's events: "command" and "fast-command" (a
// command, by its fast flag, as Redis samples them), "expire-cycle" (a
// round of active expiry), "eviction-cycle", and "snapshot" (the longest
// time a snapshot held one shard while capturing it). The zero value is
// empty and ready.
type LatencyMonitor struct {
	mu     sync.Mutex
	events map[string]*latencySeries
	// clock gives the second a sample belongs to; nil is the wall clock.
	// Tests set it, so that samples land in the seconds they mean to.
	clock func() int64
}

const latencySeriesLen = 160

// LatencySample is the worst duration of an event within one second.
type LatencySample struct {
	Unix, MS int64
}

type latencySeries struct {
	samples [latencySeriesLen]LatencySample
	idx     int
	max     int64
}

// Add records that event lasted ms milliseconds.
func (m *LatencyMonitor) Add(event string, ms int64) {
	now := time.Now().Unix()
	if m.clock != nil {
		now = m.clock()
	}
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
	if prev.Unix == now {
		prev.MS = max(prev.MS, ms)
		return
	}
	ts.samples[ts.idx] = LatencySample{now, ms}
	ts.idx = (ts.idx + 1) % latencySeriesLen
}

// Reset forgets the named events (all of them when none is named; names
// match in any case) and returns how many it forgot.
func (m *LatencyMonitor) Reset(names [][]byte) int {
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

// LatencyView is a copy of one event's series, oldest sample first.
type LatencyView struct {
	Event   string
	Samples []LatencySample
	Last    LatencySample
	Max     int64 // the all-time worst, ms
}

func (ts *latencySeries) view(event string) LatencyView {
	v := LatencyView{Event: event, Max: ts.max, Last: ts.samples[(ts.idx+latencySeriesLen-1)%latencySeriesLen]}
	for j := 0; j < latencySeriesLen; j++ {
		if s := ts.samples[(ts.idx+j)%latencySeriesLen]; s.Unix != 0 {
			v.Samples = append(v.Samples, s)
		}
	}
	return v
}

// Views returns every event's series, sorted by event name.
func (m *LatencyMonitor) Views() []LatencyView {
	m.mu.Lock()
	out := make([]LatencyView, 0, len(m.events))
	for ev, ts := range m.events {
		out = append(out, ts.view(ev))
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Event < out[j].Event })
	return out
}

// View returns one event's series, and false when it has none.
func (m *LatencyMonitor) View(event string) (LatencyView, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ts := m.events[event]
	if ts == nil {
		return LatencyView{}, false
	}
	return ts.view(event), true
}

const latencyGraphCols, latencyGraphRows = 80, 4

// LatencyGraph draws an event's samples as LATENCY GRAPH does: an ASCII
// chart, one column per sample, labelled with how long before now (Unix
// seconds) it was.
func LatencyGraph(v LatencyView, now int64) string {
	var b strings.Builder
	lo, hi := int64(0), int64(0)
	for i, s := range v.Samples {
		if i == 0 || s.MS < lo {
			lo = s.MS
		}
		hi = max(hi, s.MS)
	}
	fmt.Fprintf(&b, "%s - high %d ms, low %d ms (all time high %d ms)\n", v.Event, hi, lo, v.Max)
	b.WriteString(strings.Repeat("-", latencyGraphCols))
	b.WriteByte('\n')
	for start := 0; start < len(v.Samples); start += latencyGraphCols {
		if start > 0 {
			b.WriteByte('\n')
		}
		part := v.Samples[start:min(start+latencyGraphCols, len(v.Samples))]
		// Bars: a sample's height is its place between the low and the
		// high, in rows of latencyGraphRows.
		for row := latencyGraphRows; row >= 1; row-- {
			for _, s := range part {
				h := latencyGraphRows
				if hi > lo {
					h = 1 + int((s.MS-lo)*(latencyGraphRows-1)/(hi-lo))
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
			labels[i] = agoLabel(now - s.Unix)
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

// DoctorFacts are what LATENCY DOCTOR's advice depends on besides the
// events: the server's settings and the process's memory.
type DoctorFacts struct {
	Threshold     int64 // latency-monitor-threshold, ms; 0: the monitor is off
	SlowlogSlower int64 // slowlog-log-slower-than, µs; negative: no slow log
	Hz            int
	HugePages     bool // the process uses transparent huge pages (AnonHugePages)
}

// LatencyDoctor writes LATENCY DOCTOR's report on the events recorded
// (views, as of now in Unix seconds), with advice.
func LatencyDoctor(views []LatencyView, now int64, f DoctorFacts) string {
	threshold := f.Threshold
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
		for _, sm := range v.Samples {
			sum += sm.MS
			if oldest == 0 || sm.Unix < oldest {
				oldest = sm.Unix
			}
		}
		n := int64(len(v.Samples))
		var avg, mad, period int64
		if n > 0 {
			avg = sum / n
			period = max(now-oldest, 1)
			var dev int64
			for _, sm := range v.Samples {
				dev += abs64(avg - sm.MS)
			}
			mad = dev / n
		}
		fmt.Fprintf(&b, "%d. %s: %d latency spikes (average %dms, mean deviation %dms, period %.2f sec). Worst all time event %dms.\n",
			i+1, v.Event, n, avg, mad, float64(period)/float64(max(n, 1)), v.Max)
		switch v.Event {
		case "command":
			slower := f.SlowlogSlower
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
	if f.HugePages {
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
			if f.Hz < 100 {
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

// AnonHugePages returns the bytes of transparent huge pages the process
// uses, from /proc (0 where there is none).
func AnonHugePages() int64 {
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
