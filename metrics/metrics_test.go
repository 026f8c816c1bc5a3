package metrics

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/limitkv/limitkv/commands"
	"github.com/limitkv/limitkv/engine"
)

func newServer(t *testing.T) *commands.Server {
	t.Helper()
	eng := engine.New(engine.Config{Databases: 16})
	return commands.New(eng, commands.NewConfig(), slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// TestCollectorLint runs Prometheus's own checks of names, types and help
// texts over everything the collector exports.
func TestCollectorLint(t *testing.T) {
	srv := newServer(t)
	srv.Hooks.Persistence = func() commands.PersistenceInfo {
		return commands.PersistenceInfo{LastSave: 1, LastOK: true, Snapshots: 1}
	}
	problems, err := testutil.CollectAndLint(NewCollector(srv))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	// Describe and Names agree, and every name is limitkv's.
	ch := make(chan *prometheus.Desc, 100)
	c := NewCollector(srv)
	c.Describe(ch)
	close(ch)
	n := 0
	for range ch {
		n++
	}
	if n != len(c.Names()) {
		t.Errorf("Describe sends %d descriptors, Names lists %d", n, len(c.Names()))
	}
	for _, name := range c.Names() {
		if !strings.HasPrefix(name, "limitkv_") {
			t.Errorf("%s is not prefixed limitkv_", name)
		}
	}
}

// TestDashboard checks dashboards/limitkv.json: valid JSON, a query in
// every panel, and only metrics that exist in its queries.
func TestDashboard(t *testing.T) {
	data, err := os.ReadFile("../dashboards/limitkv.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("not valid JSON: %v", err)
	}
	if dash.UID == "" || len(dash.Panels) == 0 {
		t.Fatalf("no uid or no panels")
	}
	names := NewCollector(nil).Names()
	histograms := []string{"limitkv_command_duration_seconds"}
	metric := regexp.MustCompile(`\blimitkv_[a-z_]+\b`)
	used := map[string]bool{}
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if strings.Count(tg.Expr, "(") != strings.Count(tg.Expr, ")") {
				t.Errorf("panel %q: unbalanced parentheses in %s", p.Title, tg.Expr)
			}
			for _, m := range metric.FindAllString(tg.Expr, -1) {
				base := m
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if b, ok := strings.CutSuffix(m, suffix); ok && slices.Contains(histograms, b) {
						base = b
					}
				}
				if !slices.Contains(names, base) {
					t.Errorf("panel %q queries %s, which limitkv does not export", p.Title, m)
				}
				used[base] = true
			}
		}
	}
	for _, want := range []string{
		"limitkv_commands_total", "limitkv_command_duration_seconds", "limitkv_ratelimit_decisions_total",
		"limitkv_memory_used_bytes", "limitkv_memory_max_bytes", "limitkv_evicted_keys_total",
		"limitkv_snapshot_last_success_age_seconds", "limitkv_replication_lag_seconds", "limitkv_connected_clients",
	} {
		if !used[want] {
			t.Errorf("the dashboard does not show %s", want)
		}
	}
}

// TestDocsNameEveryLabelValue: the metrics table of docs/operations.md
// names every command and decision the rate-limit counters are labelled
// with.
func TestDocsNameEveryLabelValue(t *testing.T) {
	const doc = "../docs/operations.md"
	data, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if m := regexp.MustCompile("^\\| `(limitkv_[a-z_]+)`").FindStringSubmatch(line); m != nil {
			rows[m[1]] = line
		}
	}
	srv := newServer(t)
	policies := t.TempDir() + "/policies"
	os.WriteFile(policies, []byte("RL.POLICY SET api SLIDE 10 1m\n"), 0o644)
	if _, err := srv.LoadPolicyFile(policies); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(srv))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	checked := map[string]bool{}
	for _, f := range fams {
		if f.GetName() != "limitkv_ratelimit_decisions_total" && f.GetName() != "limitkv_ratelimit_policy_decisions_total" {
			continue
		}
		row, ok := rows[f.GetName()]
		if !ok {
			t.Errorf("%s's metrics table has no row for %s", doc, f.GetName())
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "policy" {
					continue // the users' own names
				}
				if checked[f.GetName()+l.GetValue()] {
					continue
				}
				checked[f.GetName()+l.GetValue()] = true
				if !strings.Contains(row, "`"+l.GetValue()+"`") {
					t.Errorf("%s's row for %s does not name %s `%s`:\n%s", doc, f.GetName(), l.GetName(), l.GetValue(), row)
				}
			}
		}
	}
	if len(checked) == 0 {
		t.Fatal("no rate-limit decision series to check")
	}
}
