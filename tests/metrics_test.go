package tests

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/limitkv/limitkv/resp"
)

// scrape fetches the metrics endpoint and parses it with Prometheus's own
// text parser.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	res, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, res.Status)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("content type %q", ct)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("parsing the metrics: %v", err)
	}
	return fams
}

// sample finds the metric of a family with the given labels ("k=v"
// pairs) and returns its value; a histogram's is its count.
func sample(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	v, ok := lookupSample(fams, name, labels...)
	if !ok {
		t.Fatalf("no %s%v in the metrics", name, labels)
	}
	return v
}

func lookupSample(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	fam := fams[name]
	if fam == nil {
		return 0, false
	}
next:
	for _, m := range fam.Metric {
		for _, l := range labels {
			k, v, _ := strings.Cut(l, "=")
			found := false
			for _, lp := range m.Label {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// TestMetricsEndpoint scrapes a server with --metrics-addr, checks the
// families and their types, and that the values follow the traffic:
// rate-limit decisions allowed and denied, commands, errors, keys.
func TestMetricsEndpoint(t *testing.T) {
	mport := freePort(t)
	kv := startLimitkv(t, "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", mport))
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", mport)
	c := dialRaw(t, kv.Addr)
	for _, args := range [][]string{
		{"RL.FIXED", "user:1", "2", "1m"}, {"RL.FIXED", "user:1", "2", "1m"}, {"RL.FIXED", "user:1", "2", "1m"},
		{"RL.SLIDE", "user:2", "1", "1m"}, {"RL.SLIDE", "user:2", "1", "1m"},
		{"SET", "k", "v"}, {"GET", "k"}, {"INCR", "k"}, {"NOSUCH"}, {"GET"},
		{"CONFIG", "GET", "maxmemory"},
	} {
		c.do(args...)
	}
	if v := c.do("SAVE"); v.String() != "+OK" {
		t.Fatalf("SAVE: %s", v)
	}
	fams := scrape(t, url)

	types := map[string]dto.MetricType{
		"limitkv_commands_total":                    dto.MetricType_COUNTER,
		"limitkv_commands_failed_total":             dto.MetricType_COUNTER,
		"limitkv_commands_rejected_total":           dto.MetricType_COUNTER,
		"limitkv_command_duration_seconds":          dto.MetricType_HISTOGRAM,
		"limitkv_ratelimit_decisions_total":         dto.MetricType_COUNTER,
		"limitkv_errors_total":                      dto.MetricType_COUNTER,
		"limitkv_error_replies_total":               dto.MetricType_COUNTER,
		"limitkv_connected_clients":                 dto.MetricType_GAUGE,
		"limitkv_rejected_connections_total":        dto.MetricType_COUNTER,
		"limitkv_memory_used_bytes":                 dto.MetricType_GAUGE,
		"limitkv_memory_rss_bytes":                  dto.MetricType_GAUGE,
		"limitkv_memory_max_bytes":                  dto.MetricType_GAUGE,
		"limitkv_keys":                              dto.MetricType_GAUGE,
		"limitkv_expired_keys_total":                dto.MetricType_COUNTER,
		"limitkv_evicted_keys_total":                dto.MetricType_COUNTER,
		"limitkv_snapshots_total":                   dto.MetricType_COUNTER,
		"limitkv_snapshot_errors_total":             dto.MetricType_COUNTER,
		"limitkv_snapshot_last_duration_seconds":    dto.MetricType_GAUGE,
		"limitkv_snapshot_last_success_age_seconds": dto.MetricType_GAUGE,
		"limitkv_snapshot_in_progress":              dto.MetricType_GAUGE,
		"limitkv_replication_role":                  dto.MetricType_GAUGE,
		"limitkv_replication_lag_seconds":           dto.MetricType_GAUGE,
		"limitkv_replication_connected_replicas":    dto.MetricType_GAUGE,
		"limitkv_build_info":                        dto.MetricType_GAUGE,
		"go_goroutines":                             dto.MetricType_GAUGE,
		"process_resident_memory_bytes":             dto.MetricType_GAUGE,
	}
	for name, typ := range types {
		fam := fams[name]
		if fam == nil {
			t.Errorf("no %s", name)
			continue
		}
		if fam.GetType() != typ {
			t.Errorf("%s is a %s, want %s", name, fam.GetType(), typ)
		}
	}

	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"limitkv_ratelimit_decisions_total", []string{"command=rl.fixed", "decision=allowed"}, 2},
		{"limitkv_ratelimit_decisions_total", []string{"command=rl.fixed", "decision=denied"}, 1},
		{"limitkv_ratelimit_decisions_total", []string{"command=rl.slide", "decision=allowed"}, 1},
		{"limitkv_ratelimit_decisions_total", []string{"command=rl.slide", "decision=denied"}, 1},
		{"limitkv_commands_total", []string{"command=rl.fixed"}, 3},
		{"limitkv_commands_total", []string{"command=config|get"}, 1},
		{"limitkv_commands_failed_total", []string{"command=incr"}, 1},
		{"limitkv_commands_rejected_total", []string{"command=get"}, 1},
		{"limitkv_commands_rejected_total", []string{"command=(unknown)"}, 1},
		{"limitkv_command_duration_seconds", []string{"command=rl.fixed"}, 3},
		{"limitkv_errors_total", []string{"code=ERR"}, 3},
		{"limitkv_error_replies_total", nil, 3},
		{"limitkv_keys", []string{"db=0"}, 3},
		{"limitkv_keys_expiring", []string{"db=0"}, 2},
		{"limitkv_persistence_enabled", nil, 1},
		{"limitkv_snapshot_last_ok", nil, 1},
		{"limitkv_replication_role", []string{"role=master"}, 1},
		{"limitkv_connected_clients", nil, 1},
	} {
		if got := sample(t, fams, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// The histogram's buckets are cumulative and end with every call.
	for _, m := range fams["limitkv_command_duration_seconds"].Metric {
		h := m.Histogram
		var prev uint64
		for _, b := range h.Bucket {
			if b.GetCumulativeCount() < prev {
				t.Errorf("%v: buckets not cumulative", m.Label)
			}
			prev = b.GetCumulativeCount()
		}
		if prev != h.GetSampleCount() || h.GetSampleSum() <= 0 {
			t.Errorf("%v: last bucket %d, count %d, sum %v", m.Label, prev, h.GetSampleCount(), h.GetSampleSum())
		}
	}
	if age := sample(t, fams, "limitkv_snapshot_last_success_age_seconds"); age < 0 || age > 60 {
		t.Errorf("snapshot age %v", age)
	}

	// Values move.
	c.do("RL.FIXED", "user:1", "2", "1m")
	c.do("RL.FIXED", "user:3", "2", "1m")
	c.do("SET", "tmp", "v", "PX", "1")
	time.Sleep(5 * time.Millisecond)
	c.do("GET", "tmp")
	fams = scrape(t, url)
	if got := sample(t, fams, "limitkv_ratelimit_decisions_total", "command=rl.fixed", "decision=allowed"); got != 3 {
		t.Errorf("allowed after one more: %v", got)
	}
	if got := sample(t, fams, "limitkv_ratelimit_decisions_total", "command=rl.fixed", "decision=denied"); got != 2 {
		t.Errorf("denied after one more: %v", got)
	}
	if got := sample(t, fams, "limitkv_expired_keys_total"); got != 1 {
		t.Errorf("expired keys: %v", got)
	}
	if got := sample(t, fams, "limitkv_commands_total", "command=rl.fixed"); got != 5 {
		t.Errorf("rl.fixed calls: %v", got)
	}

	// Evictions: past maxmemory, allkeys-random evicts every key.
	keys := c.do("DBSIZE").Int
	c.do("CONFIG", "SET", "maxmemory-policy", "allkeys-random")
	c.do("CONFIG", "SET", "maxmemory", "1")
	if v := c.do("SET", "x", "y"); !strings.HasPrefix(v.String(), "-OOM") {
		t.Errorf("SET past maxmemory with nothing left to evict: %s", v)
	}
	c.do("CONFIG", "SET", "maxmemory", "0")
	if got := sample(t, scrape(t, url), "limitkv_evicted_keys_total"); got != float64(keys) || keys == 0 {
		t.Errorf("evicted keys: %v, want the %d keys there were", got, keys)
	}

	// Anything but GET /metrics (and the index) is refused.
	client := &http.Client{Timeout: 5 * time.Second}
	if res, err := client.Post(url, "text/plain", nil); err != nil || res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics: %v %v", res.Status, err)
	}
	if res, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/other", mport)); err != nil || res.StatusCode != http.StatusNotFound {
		t.Errorf("GET /other: %v %v", res.Status, err)
	}
}

// TestMetricsCardinality floods the server with distinct keys, commands
// that fail with them and error codes scripts invent: the number of
// series stays where one call of each command put it, and error codes
// stop at Redis's cap.
func TestMetricsCardinality(t *testing.T) {
	mport := freePort(t)
	kv := startLimitkv(t, "--persistence", "no", "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", mport))
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", mport)
	c := dialRaw(t, kv.Addr)
	round := func(key string) [][]string {
		return [][]string{
			{"RL.FIXED", key, "1", "1m"}, {"RL.SLIDE", key, "1", "1m"}, {"CL.THROTTLE", key, "1", "1", "60"},
			{"SET", key, "v"}, {"GET", key}, {"INCR", key}, {"LPUSH", key, "x"},
			{"HSET", "h:" + key, "f", "v"}, {"EXPIRE", key, "100"},
			{"UNKNOWN:" + key}, {"GET", key, "extra"},
		}
	}
	send := func(cmds [][]string) {
		var req []byte
		for _, args := range cmds {
			var bs [][]byte
			for _, a := range args {
				bs = append(bs, []byte(a))
			}
			req = resp.AppendCommand(req, bs...)
		}
		c.send(req)
		for range cmds {
			c.read()
		}
	}
	series := func() map[string]int {
		out := map[string]int{}
		for name, fam := range scrape(t, url) {
			if strings.HasPrefix(name, "limitkv_") && name != "limitkv_errors_total" {
				out[name] = len(fam.Metric)
			}
		}
		return out
	}
	send(round("warm"))
	before := series()
	var cmds [][]string
	for i := 0; i < 5000; i++ {
		cmds = append(cmds, round(fmt.Sprintf("user:%d", i))...)
		if len(cmds) >= 2000 {
			send(cmds)
			cmds = cmds[:0]
		}
	}
	send(cmds)
	after := series()
	if fmt.Sprint(before) != fmt.Sprint(after) {
		var names []string
		for n := range after {
			if before[n] != after[n] {
				names = append(names, fmt.Sprintf("%s: %d -> %d", n, before[n], after[n]))
			}
		}
		sort.Strings(names)
		t.Errorf("series changed with distinct keys:\n%s", strings.Join(names, "\n"))
	}
	if total := sum(after); total > 200 {
		t.Errorf("%d series after the flood", total)
	}

	// Scripts can answer with any error code: the codes are capped.
	cmds = cmds[:0]
	for i := 0; i < 500; i++ {
		cmds = append(cmds, []string{"EVAL", fmt.Sprintf("return redis.error_reply('CODE%d failure')", i), "0"})
	}
	send(cmds)
	fams := scrape(t, url)
	if n := len(fams["limitkv_errors_total"].Metric); n > 128 {
		t.Errorf("%d error code series", n)
	}
	if v, ok := lookupSample(fams, "limitkv_errors_total", "code=ERRORSTATS_DISABLED"); !ok || v != 1 {
		t.Errorf("ERRORSTATS_DISABLED = %v (%v)", v, ok)
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
