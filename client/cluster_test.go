package client

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limitkv/limitkv/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// clusterTest is a 3-master limitkv cluster made by redis-cli --cluster
// create, the Client over a ClusterClient seeded with its nodes, a direct
// connection to each master, and for each master a hash tag whose slot it
// serves, so that "{tag}:anything" is a key of that master.
type clusterTest struct {
	c       *Client
	cc      *redis.ClusterClient
	masters []*redis.Client
	tags    []string
}

// TestCluster runs every call whose meaning a cluster changes through a
// ClusterClient, on keys of every master.
func TestCluster(t *testing.T) {
	cl := startClusterTest(t)
	t.Run("Decisions", func(t *testing.T) { clusterDecisions(t, cl) })
	t.Run("Policies", func(t *testing.T) { clusterPolicies(t, cl) })
	t.Run("Top", func(t *testing.T) { clusterTop(t, cl) })
	t.Run("TopReset", func(t *testing.T) { clusterTopReset(t, cl) })
	t.Run("Middleware", func(t *testing.T) { clusterMiddleware(t, cl) })
}

func startClusterTest(t *testing.T) *clusterTest {
	t.Helper()
	cli := testserver.Require(t, "redis-cli")
	testserver.TrackSources()
	nodes := testserver.StartClusterTest(t, testserver.ClusterSpec{
		Kinds:   []string{testserver.Limitkv, testserver.Limitkv, testserver.Limitkv},
		Limitkv: limitkvBin, Dir: t.TempDir(),
	})
	args := []string{"--cluster", "create"}
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr)
	}
	args = append(append(args, addrs...), "--cluster-replicas", "0", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	cl := &clusterTest{}
	for _, a := range addrs {
		rdb := redis.NewClient(&redis.Options{Addr: a})
		t.Cleanup(func() { rdb.Close() })
		cl.masters = append(cl.masters, rdb)
	}
	for i, rdb := range cl.masters {
		waitFor(t, "cluster_state:ok on "+addrs[i], func() bool {
			info, err := rdb.ClusterInfo(context.Background()).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok\r\n")
		})
	}
	cl.cc = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { cl.cc.Close() })
	cl.c = New(cl.cc)
	cl.tags = masterTags(t, cl.masters, addrs)
	return cl
}

// waitFor polls done until it holds, failing the test after a bound far
// above what the cluster needs: a guard against a hang, not a deadline.
func waitFor(t *testing.T, what string, done func() bool) {
	t.Helper()
	for range 1200 {
		if done() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("waited a minute for %s", what)
}

// masterTags finds, for each master, a hash tag of a slot it serves, by
// the cluster's own slot table and CLUSTER KEYSLOT.
func masterTags(t *testing.T, masters []*redis.Client, addrs []string) []string {
	t.Helper()
	ctx := context.Background()
	slots, err := masters[0].ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	var owner [16384]int
	for _, s := range slots {
		i := slices.Index(addrs, s.Nodes[0].Addr)
		if i < 0 {
			t.Fatalf("CLUSTER SLOTS names %s, not one of %v", s.Nodes[0].Addr, addrs)
		}
		for slot := s.Start; slot <= s.End; slot++ {
			owner[slot] = i
		}
	}
	tags := make([]string, len(masters))
	found := 0
	for n := 0; found < len(masters); n++ {
		tag := "client-cluster-" + strconv.Itoa(n)
		slot, err := masters[0].ClusterKeySlot(ctx, tag).Result()
		if err != nil {
			t.Fatal(err)
		}
		if i := owner[slot]; tags[i] == "" {
			tags[i], found = tag, found+1
		}
	}
	return tags
}

// key is a key of master m.
func (cl *clusterTest) key(m int, suffix string) string {
	return "{" + cl.tags[m] + "}:" + suffix
}

// onMaster fails the test unless key is stored on master m itself.
func (cl *clusterTest) onMaster(t *testing.T, m int, key string) {
	t.Helper()
	if n, err := cl.masters[m].Exists(context.Background(), key).Result(); err != nil || n != 1 {
		t.Errorf("%s: EXISTS on master %d = %d, %v; want the key there", key, m, n, err)
	}
}

// clusterDecisions: each command decides exactly on every master, limit 3:
// three allowed, with 2, 1, 0 remaining, then denied.
func clusterDecisions(t *testing.T, cl *clusterTest) {
	ctx := context.Background()
	for m := range cl.masters {
		for _, cmd := range []struct {
			name   string
			decide func(key string) (allowed bool, remaining int64, err error)
		}{
			{"fixed", func(k string) (bool, int64, error) {
				d, err := cl.c.Fixed(ctx, k, []Rule{PerHour(3)})
				return d.Allowed, d.Remaining, err
			}},
			{"slide", func(k string) (bool, int64, error) {
				d, err := cl.c.Slide(ctx, k, []Rule{PerHour(3)})
				return d.Allowed, d.Remaining, err
			}},
			{"throttle", func(k string) (bool, int64, error) {
				d, err := cl.c.Throttle(ctx, k, 2, 1, time.Hour, 1)
				return d.Allowed, d.Remaining, err
			}},
		} {
			k := cl.key(m, t.Name()+":"+cmd.name)
			for i := range 5 {
				allowed, remaining, err := cmd.decide(k)
				if err != nil {
					t.Fatalf("%s on master %d: %v", cmd.name, m, err)
				}
				wantRemaining := max(2-int64(i), 0)
				if allowed != (i < 3) || remaining != wantRemaining {
					t.Errorf("%s on master %d, request %d: allowed %v remaining %d; want %v, %d",
						cmd.name, m, i+1, allowed, remaining, i < 3, wantRemaining)
				}
			}
			cl.onMaster(t, m, k)
		}
	}
}

// clusterPolicies: a policy set through the ClusterClient reaches every
// node over the bus and decides on keys of every master; deleted, it is
// gone from all of them.
func clusterPolicies(t *testing.T, cl *clusterTest) {
	ctx := context.Background()
	const name = "client-cluster-policy"
	if err := cl.c.SetPolicy(ctx, name, FixedPolicy([]Rule{PerHour(2)})); err != nil {
		t.Fatal(err)
	}
	for i, node := range cl.masters {
		waitFor(t, "the policy on master "+strconv.Itoa(i), func() bool {
			words, err := node.Do(ctx, "RL.POLICY", "GET", name).StringSlice()
			return err == nil && strings.Join(words, " ") == "FIXED 2 1h"
		})
	}
	if p, err := cl.c.GetPolicy(ctx, name); err != nil || p.String() != "FIXED 2 1h" {
		t.Errorf("GetPolicy = %q, %v", p.String(), err)
	}
	if names, err := cl.c.ListPolicies(ctx, "client-cluster-*"); err != nil || !slices.Equal(names, []string{name}) {
		t.Errorf("ListPolicies = %v, %v", names, err)
	}
	for m := range cl.masters {
		k := cl.key(m, t.Name())
		for i := range 3 {
			d, err := cl.c.Check(ctx, name, k)
			if err != nil {
				t.Fatalf("Check on master %d: %v", m, err)
			}
			if d.Allowed != (i < 2) || d.Limit != 2 {
				t.Errorf("Check on master %d, request %d: %+v; want allowed %v, limit 2", m, i+1, d, i < 2)
			}
		}
		cl.onMaster(t, m, k)
	}
	if existed, err := cl.c.DelPolicy(ctx, name); err != nil || !existed {
		t.Fatalf("DelPolicy = %v, %v", existed, err)
	}
	for i, node := range cl.masters {
		waitFor(t, "the policy gone from master "+strconv.Itoa(i), func() bool {
			n, err := node.Do(ctx, "RL.POLICY", "LIST", name).StringSlice()
			return err == nil && len(n) == 0
		})
	}
	for m := range cl.masters {
		_, err := cl.c.Check(ctx, name, cl.key(m, t.Name()))
		if err == nil || err.Error() != "ERR no such policy '"+name+"'" {
			t.Errorf("Check on master %d after DelPolicy: %v", m, err)
		}
	}
}

// denyTimes makes key's limit of one an hour deny n requests.
func (cl *clusterTest) denyTimes(t *testing.T, key string, n int) {
	t.Helper()
	for range n + 1 {
		if _, err := cl.c.Slide(context.Background(), key, []Rule{PerHour(1)}); err != nil {
			t.Fatal(err)
		}
	}
}

// nodeTop is RL.TOP on one node alone.
func nodeTop(t *testing.T, node *redis.Client) []Denied {
	t.Helper()
	d, err := top(context.Background(), node, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// clusterTop: denials decided on three masters come back as one list in
// RL.TOP's order (most denied first, ties by key), though each master
// alone knows only its own.
func clusterTop(t *testing.T, cl *clusterTest) {
	ctx := context.Background()
	for _, node := range cl.masters {
		if err := node.Do(ctx, "RL.TOP", "RESET").Err(); err != nil {
			t.Fatal(err)
		}
	}
	a, b := cl.key(1, "top-a"), cl.key(2, "top-b")
	if b < a {
		a, b = b, a
	}
	want := []Denied{
		{Key: a, Denials: 5}, {Key: b, Denials: 5},
		{Key: cl.key(0, "top-c"), Denials: 3}, {Key: cl.key(0, "top-d"), Denials: 1},
	}
	for _, d := range want {
		cl.denyTimes(t, d.Key, int(d.Denials))
	}
	got, err := cl.c.Top(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("Top(10) = %+v\nwant %+v", got, want)
	}
	if got, err := cl.c.Top(ctx, 2); err != nil || !slices.Equal(got, want[:2]) {
		t.Errorf("Top(2) = %+v, %v; want %+v", got, err, want[:2])
	}
	for m, node := range cl.masters {
		for _, d := range nodeTop(t, node) {
			if !strings.HasPrefix(d.Key, "{"+cl.tags[m]+"}") {
				t.Errorf("master %d lists %s, a key of another master", m, d.Key)
			}
		}
	}
}

// clusterTopReset: TopReset clears the lists of every master.
func clusterTopReset(t *testing.T, cl *clusterTest) {
	ctx := context.Background()
	for m, node := range cl.masters {
		cl.denyTimes(t, cl.key(m, t.Name()), 1)
		if len(nodeTop(t, node)) == 0 {
			t.Fatalf("master %d lists no denial", m)
		}
	}
	if err := cl.c.TopReset(ctx); err != nil {
		t.Fatal(err)
	}
	for m, node := range cl.masters {
		if d := nodeTop(t, node); len(d) != 0 {
			t.Errorf("master %d still lists %+v after TopReset", m, d)
		}
	}
	if got, err := cl.c.Top(ctx, 10); err != nil || len(got) != 0 {
		t.Errorf("Top after TopReset = %+v, %v", got, err)
	}
}

// clusterMiddleware: the middleware, unchanged, limits users whose keys
// live on each master: three requests pass, the fourth gets 429.
func clusterMiddleware(t *testing.T, cl *clusterTest) {
	const prefix = "client-cluster-mw:"
	l, err := NewLimiter(cl.c, LimiterConfig{
		Rules:     []Rule{PerHour(3)},
		KeyPrefix: prefix,
		Key:       func(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil },
		OnError:   func(r *http.Request, err error) { t.Errorf("limiter error: %v", err) },
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(l.Handler(okHandler))
	defer srv.Close()
	for m := range cl.masters {
		user := "{" + cl.tags[m] + "}"
		for i := range 4 {
			req, err := http.NewRequest("GET", srv.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-User", user)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := http.StatusOK
			if i == 3 {
				want = http.StatusTooManyRequests
			}
			if resp.StatusCode != want {
				t.Errorf("user of master %d, request %d: status %d (%q); want %d", m, i+1, resp.StatusCode, body, want)
			}
			if want == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
				t.Errorf("user of master %d: 429 without Retry-After", m)
			}
		}
		cl.onMaster(t, m, prefix+user)
	}
}
