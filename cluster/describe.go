package cluster

import (
	"fmt"
	"strings"
)

// Cluster status timing of clusterUpdateState, in milliseconds.
const (
	// WritableDelay: a master just started stays down this long, giving
	// the cluster a chance to tell it it was failed over.
	WritableDelay = 2000
	// A master back from the minority side stays down for the node
	// timeout, clamped to these, to hear of any new configuration first.
	MinRejoinDelay = 500
	MaxRejoinDelay = 5000
)

// UpdateState decides whether the cluster is up from this node's view,
// as clusterUpdateState does: down when full coverage is required and a
// slot is unowned or its owner FAIL, or when fewer than a majority of
// the slot-owning masters are reachable. It sets Status and Size, and
// reports whether Status changed.
func (s *State) UpdateState(now int64) bool {
	if s.firstUpdate == 0 {
		s.firstUpdate = now
	}
	me := s.Me()
	if me.IsMaster() && s.Status == StateFail && now-s.firstUpdate < WritableDelay {
		return false
	}
	state := uint8(StateOK)
	if s.RequireFullCoverage {
		for _, r := range s.ownerRuns() {
			if n := s.nodes[r.Owner]; n == nil || n.Failed() {
				state = StateFail
				break
			}
		}
	}
	s.Size = 0
	reachable := 0
	for _, n := range s.nodes {
		if n.IsMaster() && n.NumSlots > 0 {
			s.Size++
			if n.Flags&(NodeFail|NodePFail) == 0 {
				reachable++
			}
		}
	}
	if reachable < s.Size/2+1 {
		state = StateFail
		s.amongMinority = now
	}
	if state == s.Status {
		return false
	}
	delay := min(max(s.NodeTimeout, MinRejoinDelay), MaxRejoinDelay)
	if state == StateOK && me.IsMaster() && now-s.amongMinority < delay {
		return false
	}
	s.Status = state
	return true
}

// ClusterNodes is CLUSTER NODES's reply (clusterGenNodesDescription):
// nodes.conf's lines, without the vars line, in the state's node order.
// plaintext: the asking client is not on TLS while the cluster is, so
// nodes are shown with their plaintext ports (use_pport).
func (s *State) ClusterNodes(plaintext bool) string {
	var b []byte
	ranges := s.allRanges()
	for _, n := range s.Nodes() {
		cn := s.describedNode(n, ranges[n.ID], plaintext)
		b = cn.AppendLine(b)
		b = append(b, '\n')
	}
	return string(b)
}

// describedNode is n as CLUSTER NODES and REPLICAS show it: its nodes.conf
// line, with the plaintext port for a plaintext client of a TLS cluster.
func (s *State) describedNode(n *Node, ranges []SlotRange, plaintext bool) ConfNode {
	cn := s.confNode(n, ranges)
	if plaintext && n.PPort != 0 {
		cn.Port = n.PPort
	}
	return cn
}

// SlotNode is a node as CLUSTER SLOTS lists it: the preferred endpoint
// (the IP), the port, the ID, and the other endpoints, hostname when
// set.
type SlotNode struct {
	IP       string
	Port     uint16
	PPort    uint16 // the plaintext port in a TLS cluster, 0 when none
	ID       string
	Hostname string
}

// SlotsEntry is one entry of CLUSTER SLOTS: a maximal range of slots of
// one owner, the owner first and then its replicas that can serve.
type SlotsEntry struct {
	First, Last uint16
	Nodes       []SlotNode
}

// ClusterSlots is CLUSTER SLOTS's data (clusterReplyMultiBulkSlots), in
// slot order. A replica is listed when not FAIL and it has reported a
// replication offset, as isReplicaAvailable requires; myself's offset
// comes from replication, which the caller knows, in myOffset.
func (s *State) ClusterSlots(myOffset int64) []SlotsEntry {
	var out []SlotsEntry
	for j := 0; j < Slots; j++ {
		id := s.Owner[j]
		if id == "" {
			continue
		}
		k := j
		for k+1 < Slots && s.Owner[k+1] == id {
			k++
		}
		e := SlotsEntry{First: uint16(j), Last: uint16(k)}
		e.Nodes = append(e.Nodes, slotNode(s.nodes[id]))
		for _, r := range s.Replicas(id) {
			off := r.ReplOffset
			if r.ID == s.Myself {
				off = myOffset
			}
			if !r.Failed() && off != 0 {
				e.Nodes = append(e.Nodes, slotNode(r))
			}
		}
		out = append(out, e)
		j = k
	}
	return out
}

func slotNode(n *Node) SlotNode {
	return SlotNode{IP: n.IP, Port: n.Port, PPort: n.PPort, ID: n.ID, Hostname: n.Hostname}
}

// ShardNode is one node of a CLUSTER SHARDS shard.
type ShardNode struct {
	ID                string
	Port              uint16 // 0: not printed
	TLSPort           uint16 // 0: not printed
	IP                string
	Endpoint          string
	Hostname          string // "": not printed
	Role              string // "master" or "replica"
	ReplicationOffset int64
	Health            string // "online", "loading" or "fail"
}

// Shard is one CLUSTER SHARDS entry: a master's slot ranges as
// first/last pairs, and its nodes, master first.
type Shard struct {
	Slots []uint16
	Nodes []ShardNode
}

// ClusterShards is CLUSTER SHARDS's data (clusterReplyShards): one shard
// per master, with or without slots, in node order. myOffset is myself's
// replication offset; tlsCluster is tls-cluster, under which a node's
// port is its TLS port and its pport the plaintext one.
func (s *State) ClusterShards(myOffset int64, tlsCluster bool) []Shard {
	var out []Shard
	for _, m := range s.Nodes() {
		if !m.IsMaster() {
			continue
		}
		sh := Shard{Slots: []uint16{}}
		for _, r := range s.Ranges(m.ID) {
			sh.Slots = append(sh.Slots, r.First, r.Last)
		}
		for _, n := range append([]*Node{m}, s.Replicas(m.ID)...) {
			off := n.ReplOffset
			if n.ID == s.Myself {
				off = myOffset
			}
			sn := ShardNode{
				ID: n.ID, Port: n.Port, IP: n.IP, Endpoint: n.IP, Hostname: n.Hostname,
				Role: "master", ReplicationOffset: off, Health: "online",
			}
			if tlsCluster {
				sn.Port, sn.TLSPort = n.PPort, n.Port
			}
			if n.IsSlave() {
				sn.Role = "replica"
			}
			switch {
			case n.Failed():
				sn.Health = "fail"
			case n.IsSlave() && off == 0:
				sn.Health = "loading"
			}
			sh.Nodes = append(sh.Nodes, sn)
		}
		out = append(out, sh)
	}
	return out
}

// Info is CLUSTER INFO's fields.
type Info struct {
	State                                         string
	SlotsAssigned, SlotsOK, SlotsPFail, SlotsFail int
	KnownNodes, Size                              int
	CurrentEpoch, MyEpoch                         uint64
	Sent, Received                                [typeCount]int64
	LinksBufferLimitExceeded                      uint64
}

// ClusterInfo gathers CLUSTER INFO's fields from the state as the last
// UpdateState left it.
func (s *State) ClusterInfo() Info {
	in := Info{
		State:        "ok",
		KnownNodes:   len(s.nodes),
		Size:         s.Size,
		CurrentEpoch: s.CurrentEpoch,
		MyEpoch:      s.epochOf(s.Me()),
		Sent:         s.StatsSent,
		Received:     s.StatsReceived,

		LinksBufferLimitExceeded: s.LinksBufferLimitExceeded,
	}
	if s.Status != StateOK {
		in.State = "fail"
	}
	for _, id := range s.Owner {
		n := s.nodes[id]
		if n == nil {
			continue
		}
		in.SlotsAssigned++
		switch {
		case n.Failed():
			in.SlotsFail++
		case n.TimedOut():
			in.SlotsPFail++
		default:
			in.SlotsOK++
		}
	}
	return in
}

// String is the reply's text, CRLF-terminated lines; message counters
// that are zero are left out, as Redis leaves them out.
func (in Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cluster_state:%s\r\n", in.State)
	fmt.Fprintf(&b, "cluster_slots_assigned:%d\r\n", in.SlotsAssigned)
	fmt.Fprintf(&b, "cluster_slots_ok:%d\r\n", in.SlotsOK)
	fmt.Fprintf(&b, "cluster_slots_pfail:%d\r\n", in.SlotsPFail)
	fmt.Fprintf(&b, "cluster_slots_fail:%d\r\n", in.SlotsFail)
	fmt.Fprintf(&b, "cluster_known_nodes:%d\r\n", in.KnownNodes)
	fmt.Fprintf(&b, "cluster_size:%d\r\n", in.Size)
	fmt.Fprintf(&b, "cluster_current_epoch:%d\r\n", in.CurrentEpoch)
	fmt.Fprintf(&b, "cluster_my_epoch:%d\r\n", in.MyEpoch)
	for _, dir := range []struct {
		name   string
		counts *[typeCount]int64
	}{{"sent", &in.Sent}, {"received", &in.Received}} {
		var total int64
		for t, v := range dir.counts {
			if v != 0 {
				total += v
				fmt.Fprintf(&b, "cluster_stats_messages_%s_%s:%d\r\n", TypeName(uint16(t)), dir.name, v)
			}
		}
		fmt.Fprintf(&b, "cluster_stats_messages_%s:%d\r\n", dir.name, total)
	}
	fmt.Fprintf(&b, "total_cluster_links_buffer_limit_exceeded:%d\r\n", in.LinksBufferLimitExceeded)
	return b.String()
}
