package cluster

import (
	"reflect"
	"slices"
	"testing"
)

func TestClusterSlotsAndShards(t *testing.T) {
	s := sixNodes(t, m1)
	s.Node(m2).Hostname = "m2.example"
	s.Node(r3).Flags |= NodeFail
	s.Node(r2).ReplOffset = 0
	node := func(id string, port uint16, host string) SlotNode {
		return SlotNode{IP: "127.0.0.1", Port: port, ID: id, Hostname: host}
	}
	want := []SlotsEntry{
		{0, 5460, []SlotNode{node(m1, 30001, ""), node(r1, 30004, "")}},
		{5461, 10922, []SlotNode{node(m2, 30002, "m2.example")}},
		{10923, 16383, []SlotNode{node(m3, 30003, "")}},
	}
	if got := s.ClusterSlots(0); !reflect.DeepEqual(got, want) {
		t.Errorf("CLUSTER SLOTS %+v\nwant %+v", got, want)
	}

	sh := s.ClusterShards(555, false)
	if len(sh) != 3 || !slices.Equal(sh[1].Slots, []uint16{5461, 10922}) || len(sh[1].Nodes) != 2 {
		t.Fatalf("CLUSTER SHARDS %+v", sh)
	}
	if n := sh[0].Nodes[0]; n.ID != m1 || n.ReplicationOffset != 555 || n.Role != "master" || n.Health != "online" {
		t.Errorf("myself in its shard: %+v", n)
	}
	if n := sh[1].Nodes[1]; n.Role != "replica" || n.Health != "loading" {
		t.Errorf("a replica without an offset: %+v", n)
	}
	if n := sh[2].Nodes[1]; n.Health != "fail" {
		t.Errorf("a failed replica: %+v", n)
	}
	// In a TLS cluster a node's port is its TLS port, its pport the
	// plaintext one: SHARDS shows both by name.
	s.Node(m1).PPort = 7000
	if n := s.ClusterShards(555, true)[0].Nodes[0]; n.Port != 7000 || n.TLSPort != s.Node(m1).Port {
		t.Errorf("myself in a TLS cluster: port %d, tls-port %d", n.Port, n.TLSPort)
	}
}

func TestClusterInfo(t *testing.T) {
	s := sixNodes(t, r2)
	s.Node(m3).Flags |= NodePFail
	s.SetOwner(16383, "")
	s.Node(m1).Flags |= NodeFail
	s.StatsSent[TypePing] = 5
	s.StatsReceived[TypePong] = 4
	s.StatsReceived[TypeFail] = 1
	s.UpdateState(100000)
	want := "cluster_state:fail\r\n" +
		"cluster_slots_assigned:16383\r\n" +
		"cluster_slots_ok:5462\r\n" +
		"cluster_slots_pfail:5460\r\n" +
		"cluster_slots_fail:5461\r\n" +
		"cluster_known_nodes:6\r\n" +
		"cluster_size:3\r\n" +
		"cluster_current_epoch:6\r\n" +
		"cluster_my_epoch:2\r\n" +
		"cluster_stats_messages_ping_sent:5\r\n" +
		"cluster_stats_messages_sent:5\r\n" +
		"cluster_stats_messages_pong_received:4\r\n" +
		"cluster_stats_messages_fail_received:1\r\n" +
		"cluster_stats_messages_received:5\r\n" +
		"total_cluster_links_buffer_limit_exceeded:0\r\n"
	if got := s.ClusterInfo().String(); got != want {
		t.Errorf("CLUSTER INFO\n%s\nwant\n%s", got, want)
	}
}

func TestUpdateStateRules(t *testing.T) {
	for _, tc := range []struct {
		name         string
		setup        func(s *State)
		fullCoverage bool
		want         uint8
	}{
		{"all covered and reachable", nil, true, StateOK},
		{"an unassigned slot with full coverage", func(s *State) { s.SetOwner(5, "") }, true, StateFail},
		{"an unassigned slot without", func(s *State) { s.SetOwner(5, "") }, false, StateOK},
		{"one of three masters PFAIL", func(s *State) { s.Node(m2).Flags |= NodePFail }, true, StateOK},
		{"two of three masters PFAIL", func(s *State) {
			s.Node(m2).Flags |= NodePFail
			s.Node(m3).Flags |= NodePFail
		}, false, StateFail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sixNodes(t, r1) // a replica: no rejoin delay
			s.RequireFullCoverage = tc.fullCoverage
			if tc.setup != nil {
				tc.setup(s)
			}
			s.UpdateState(10000)
			if s.Status != tc.want {
				t.Errorf("status %d", s.Status)
			}
		})
	}
	t.Run("a master waits before going up", func(t *testing.T) {
		s := sixNodes(t, m1)
		s.Status = StateFail
		s.firstUpdate = 0
		if s.UpdateState(50000); s.Status != StateFail {
			t.Error("up within the writable delay")
		}
		if s.UpdateState(50000 + WritableDelay); s.Status != StateOK {
			t.Error("still down after it")
		}
	})
}
