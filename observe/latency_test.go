package observe

import (
	"strings"
	"testing"
)

// TestLatencyMonitor: one sample a second, the worst; LATEST shows the
// last and the all-time worst; RESET matches names in any case.
func TestLatencyMonitor(t *testing.T) {
	sec := int64(1_700_000_000)
	m := LatencyMonitor{clock: func() int64 { return sec }}
	m.Add("command", 5)
	m.Add("command", 3)
	m.Add("command", 9)
	m.Add("fast-command", 1)
	v, ok := m.View("command")
	if !ok || len(v.Samples) != 1 || v.Samples[0].MS != 9 || v.Max != 9 || v.Last.MS != 9 {
		t.Fatalf("view %+v", v)
	}
	// The next second is a sample of its own; the all-time high stays.
	sec++
	m.Add("command", 4)
	if v, _ := m.View("command"); len(v.Samples) != 2 || v.Last != (LatencySample{sec, 4}) || v.Max != 9 {
		t.Fatalf("next second: view %+v", v)
	}
	if vs := m.Views(); len(vs) != 2 || vs[0].Event != "command" || vs[1].Event != "fast-command" {
		t.Fatalf("views %+v", vs)
	}
	if n := m.Reset([][]byte{[]byte("COMMAND"), []byte("nosuch")}); n != 1 {
		t.Errorf("reset %d", n)
	}
	if _, ok := m.View("command"); ok {
		t.Error("command still there after its reset")
	}
	if n := m.Reset(nil); n != 1 {
		t.Errorf("reset all: %d", n)
	}
}

// TestLatencyGraph: bars scaled between the low and the high, and the
// labels, how long ago each sample was, written downwards.
func TestLatencyGraph(t *testing.T) {
	const now = 1_700_000_000
	rule := strings.Repeat("-", 80) + "\n"
	v := LatencyView{Event: "command", Max: 77, Samples: []LatencySample{
		{now - 5285, 5}, {now - 4288, 42}, {now - 3291, 29}, {now - 2294, 16}, {now - 1297, 10},
	}}
	want := "command - high 42 ms, low 5 ms (all time high 77 ms)\n" + rule +
		" #   \n" +
		" #   \n" +
		" ##  \n" +
		"#####\n" +
		"\n" +
		"11532\n" +
		"hh481\n" +
		"  mmm\n"
	if got := LatencyGraph(v, now); got != want {
		t.Errorf("graph\n%s\nwant\n%s", got, want)
	}
	flat := LatencyView{Event: "flat", Max: 4, Samples: []LatencySample{{now - 5, 4}, {now - 3, 4}}}
	want = "flat - high 4 ms, low 4 ms (all time high 4 ms)\n" + rule + "##\n##\n##\n##\n\n53\nss\n"
	if got := LatencyGraph(flat, now); got != want {
		t.Errorf("flat graph\n%s\nwant\n%s", got, want)
	}
}

// TestLatencyDoctor: the report's three endings (monitor off, nothing
// seen, events without advice) and the advice each event and setting
// calls for, each given once.
func TestLatencyDoctor(t *testing.T) {
	const now = 1_700_000_000
	if got := LatencyDoctor(nil, now, DoctorFacts{}); !strings.HasPrefix(got, "I'm sorry, Dave, I can't do that. Latency monitoring is disabled") {
		t.Errorf("monitor off: %q", got)
	}
	f := DoctorFacts{Threshold: 10, SlowlogSlower: 10000, Hz: 10}
	if got := LatencyDoctor(nil, now, f); !strings.HasPrefix(got, "Dave, no latency spike was observed") {
		t.Errorf("nothing seen: %q", got)
	}
	flat := LatencyView{Event: "flat", Max: 4, Samples: []LatencySample{{now - 5, 4}, {now - 3, 4}}}
	want := "Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n" +
		"1. flat: 2 latency spikes (average 4ms, mean deviation 0ms, period 2.50 sec). Worst all time event 4ms.\n\n" +
		"While there are latency events logged, I'm not able to suggest any easy fix. " +
		"Please use the Redis community to get some help, providing this report in your help request.\n"
	if got := LatencyDoctor([]LatencyView{flat}, now, f); got != want {
		t.Errorf("no advice:\n%q\nwant\n%q", got, want)
	}
	views := []LatencyView{
		{Event: "command", Max: 9, Samples: []LatencySample{{now - 10, 6}, {now - 4, 9}}},
		{Event: "expire-cycle", Max: 7, Samples: []LatencySample{{now - 2, 7}}},
	}
	for _, c := range []struct {
		f         DoctorFacts
		has, hasn []string
	}{
		{f, []string{"2. expire-cycle: 1 latency spikes", "- SLOWLOG GET shows", "'CONFIG SET hz 100'"}, []string{"slowlog-log-slower-than", "transparent huge pages"}},
		{DoctorFacts{Threshold: 5, SlowlogSlower: -1, Hz: 100, HugePages: true}, []string{"the slow log is off: 'CONFIG SET slowlog-log-slower-than 5000'", "transparent huge pages"}, []string{"'CONFIG SET hz 100'"}},
		{DoctorFacts{Threshold: 5, SlowlogSlower: 100000, Hz: 10}, []string{"which is more than the latency threshold: 'CONFIG SET slowlog-log-slower-than 5000'"}, nil},
	} {
		got := LatencyDoctor(views, now, c.f)
		for _, s := range c.has {
			if !strings.Contains(got, s) {
				t.Errorf("%+v: no %q in\n%s", c.f, s, got)
			}
		}
		for _, s := range c.hasn {
			if strings.Contains(got, s) {
				t.Errorf("%+v: %q in\n%s", c.f, s, got)
			}
		}
		if n := strings.Count(got, "- Commands on big values"); n != 1 {
			t.Errorf("%+v: big values advised %d times", c.f, n)
		}
	}
}
