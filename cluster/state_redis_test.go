package cluster

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStateAgainstRedis has three redis-server nodes form a cluster,
// loads one node's nodes.conf into a State, and checks that what the
// State prints is what that node prints: CLUSTER NODES line for line
// (the ping and pong times aside, which are the node's own clock),
// CLUSTER SLOTS, and CLUSTER INFO's counts.
func TestStateAgainstRedis(t *testing.T) {
	needRedis(t)
	ctx := context.Background()
	nodes := []*redisNode{startRedis(t), startRedis(t), startRedis(t)}
	ranges := [][2]int{{0, 5460}, {5461, 10922}, {10923, 16383}}
	for i, r := range nodes {
		// Distinct epochs before meeting, so that no collision moves them
		// while the outputs are compared.
		for _, cmd := range [][]any{
			{"cluster", "set-config-epoch", i + 1},
			{"cluster", "addslotsrange", ranges[i][0], ranges[i][1]},
		} {
			if err := r.c.Do(ctx, cmd...).Err(); err != nil {
				t.Fatalf("%v: %v", cmd, err)
			}
		}
	}
	for _, r := range nodes[1:] {
		if err := nodes[0].c.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(r.port)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "the three nodes to agree", func() bool {
		for _, r := range nodes {
			info := r.c.ClusterInfo(ctx).Val()
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:3\r") ||
				!strings.Contains(info, "cluster_current_epoch:3\r") {
				return false
			}
			text := r.c.ClusterNodes(ctx).Val()
			if strings.Count(text, " connected") != 3 || strings.Contains(text, "handshake") {
				return false
			}
		}
		return true
	})

	// Each node's view, myself differing.
	for _, a := range nodes {
		t.Run(strconv.Itoa(a.port), func(t *testing.T) {
			if err := a.c.Do(ctx, "cluster", "saveconfig").Err(); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(filepath.Join(a.dir, "nodes.conf"))
			if err != nil {
				t.Fatal(err)
			}
			redisNodes := a.c.ClusterNodes(ctx).Val()
			redisInfo := a.c.ClusterInfo(ctx).Val()
			redisSlots := a.c.ClusterSlots(ctx).Val()
			t.Logf("nodes.conf:\n%s", raw)

			conf, err := ParseNodesConf(raw)
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now().UnixMilli()
			s, err := FromNodesConf(conf, 15000, now)
			if err != nil {
				t.Fatal(err)
			}
			// The bus, once up, has a link to every node it knows.
			for _, n := range s.Nodes() {
				n.Linked = true
			}
			s.UpdateState(now)
			s.UpdateState(now + WritableDelay)

			if got, want := withoutTimes(s.ClusterNodes(false)), withoutTimes(redisNodes); !slices.Equal(got, want) {
				t.Errorf("CLUSTER NODES\n%s\nredis-server\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}

			field := func(info, name string) string {
				for _, l := range strings.Split(info, "\r\n") {
					if v, ok := strings.CutPrefix(l, name+":"); ok {
						return v
					}
				}
				return "(none)"
			}
			mine := s.ClusterInfo().String()
			for _, name := range []string{
				"cluster_state", "cluster_slots_assigned", "cluster_slots_ok", "cluster_slots_pfail",
				"cluster_slots_fail", "cluster_known_nodes", "cluster_size", "cluster_current_epoch", "cluster_my_epoch",
			} {
				if got, want := field(mine, name), field(redisInfo, name); got != want {
					t.Errorf("%s: %s, redis-server %s", name, got, want)
				}
			}

			entries := s.ClusterSlots(0)
			if len(entries) != len(redisSlots) {
				t.Errorf("CLUSTER SLOTS: %d entries, redis-server %d: %+v", len(entries), len(redisSlots), redisSlots)
				return
			}
			for i, e := range entries {
				r := redisSlots[i]
				if int(e.First) != int(r.Start) || int(e.Last) != int(r.End) || len(e.Nodes) != len(r.Nodes) {
					t.Errorf("CLUSTER SLOTS entry %d: %+v, redis-server %+v", i, e, r)
					continue
				}
				for k, n := range e.Nodes {
					addr := n.IP + ":" + strconv.Itoa(int(n.Port))
					if n.ID != r.Nodes[k].ID || addr != r.Nodes[k].Addr {
						t.Errorf("CLUSTER SLOTS entry %d node %d: %s %s, redis-server %+v", i, k, n.ID, addr, r.Nodes[k])
					}
				}
			}

		})
	}
}

// withoutTimes is a CLUSTER NODES reply's lines, sorted, since Redis
// lists nodes in its hash table's order, with the ping-sent and
// pong-received fields blanked.
func withoutTimes(text string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(l)
		if len(f) > 5 {
			f[4], f[5] = "-", "-"
		}
		out = append(out, strings.Join(f, " "))
	}
	slices.Sort(out)
	return out
}
