package cluster

import (
	"fmt"
	"slices"
)

// Multipliers of the node timeout that Redis 7.0 (cluster.h) fixes.
const (
	// FailReportValidityMult: a failure report older than this many node
	// timeouts no longer counts towards the FAIL quorum.
	FailReportValidityMult = 2
	// FailUndoTimeMult: a master that still owns slots keeps its FAIL
	// flag this many node timeouts after it was set, even if reachable,
	// so that a replica has the time to take over.
	FailUndoTimeMult = 2
)

// Node is what a node knows of one cluster node (clusterNode), times in
// milliseconds of the caller's clock.
type Node struct {
	ID       string
	IP       string
	Port     uint16
	CPort    uint16
	PPort    uint16 // the plaintext port in a TLS cluster, 0 when none
	Hostname string
	Flags    uint16
	Master   string // the ID of the master it replicates, "" for none

	PingSent     int64 // when the ping awaiting its pong was sent, 0 for none
	PongReceived int64
	DataReceived int64 // any bus traffic proves liveness as a pong does
	FailTime     int64 // when FAIL was set
	ConfigEpoch  uint64
	ReplOffset   int64
	// VotedTime is when myself last voted for a replica of this master;
	// OrphanedTime when this master was last found orphaned, 0 when not.
	VotedTime, OrphanedTime int64
	// Linked is whether a bus link to the node is up: CLUSTER NODES
	// prints "connected" only then.
	Linked bool

	// NumSlots counts the slots the owner table gives the node.
	NumSlots int
	// FailReports holds, per reporting master, when it last reported
	// the node as PFAIL or FAIL, oldest first as Redis keeps them.
	FailReports []FailReport
}

// FailReport is one master's opinion that a node is failing.
type FailReport struct {
	Sender string
	Time   int64
}

func (n *Node) IsMaster() bool  { return n.Flags&NodeMaster != 0 }
func (n *Node) IsSlave() bool   { return n.Flags&NodeSlave != 0 }
func (n *Node) TimedOut() bool  { return n.Flags&NodePFail != 0 }
func (n *Node) Failed() bool    { return n.Flags&NodeFail != 0 }
func (n *Node) Handshake() bool { return n.Flags&NodeHandshake != 0 }

// State is one node's view of the cluster (clusterState). It is plain
// data driven by the caller: messages and clock ticks go in, and what
// they changed comes out, so that the bus, the CLUSTER command and the
// tests share one deterministic model.
type State struct {
	Myself        string
	CurrentEpoch  uint64
	LastVoteEpoch uint64

	// NodeTimeout is cluster-node-timeout in milliseconds.
	NodeTimeout int64
	// RequireFullCoverage is cluster-require-full-coverage: the cluster
	// is down while any slot is unowned or owned by a FAIL node.
	RequireFullCoverage bool
	// AllowReplicaMigration is cluster-allow-replica-migration.
	AllowReplicaMigration bool
	// MigrationBarrier is cluster-migration-barrier: a replica leaves
	// its master for an orphaned one only if more than this many working
	// replicas stay.
	MigrationBarrier int64
	// ReplicaValidityFactor is cluster-replica-validity-factor: a replica
	// that has not heard from its master for longer than ReplPingPeriod
	// plus this many node timeouts (0: no limit) does not fail over.
	ReplicaValidityFactor int64
	// ReplPingPeriod is repl-ping-replica-period in milliseconds.
	ReplPingPeriod int64

	el           election
	mf           manualFailover
	cantFailover string // the reason last logged for not failing over

	// Owner gives each slot's owner's ID, "" when unassigned; only
	// SetOwner changes it.
	Owner [Slots]string
	// runs are Owner as maximal runs of one owner, made when first asked
	// for after a change (ownerRuns): the passes the bus makes after every
	// event (coverage, routing, saving) walk a few runs, not every slot.
	runs []ownerRun
	// notClaiming marks the slots whose owner stopped claiming them
	// without anyone else taking them: Redis keeps the binding, to keep
	// the cluster up, but lets any claim take the slot and sends no
	// UPDATE about it.
	notClaiming [SlotBytes]byte
	Migrating   map[uint16]string // slot → the node it is migrating to
	Importing   map[uint16]string // slot → the node it is importing from

	// blacklist holds the nodes FORGET removed, until when (ms) gossip
	// may not add them back (nodes_black_list).
	blacklist map[string]int64

	nodes map[string]*Node
	// order is the nodes' insertion order, for output that does not
	// change from one call to the next.
	order []string

	// Status is StateOK or StateFail, as UpdateState last decided.
	Status uint8
	// Size is the number of masters that own slots, as UpdateState
	// last counted them; the FAIL quorum is a majority of it.
	Size int

	firstUpdate   int64
	amongMinority int64

	StatsSent     [typeCount]int64
	StatsReceived [typeCount]int64
	// LinksBufferLimitExceeded counts the links dropped for holding more
	// unsent bytes than cluster-link-sendbuf-limit.
	LinksBufferLimitExceeded uint64
}

// NewState is a fresh node's state: only myself, a master without
// slots, and the cluster down until UpdateState finds otherwise, as
// Redis starts.
func NewState(myself *Node, nodeTimeout int64) *State {
	s := &State{
		NodeTimeout:           nodeTimeout,
		RequireFullCoverage:   true,
		AllowReplicaMigration: true,
		Status:                StateFail,
	}
	n := *myself
	n.Flags |= NodeMyself
	if n.Flags&(NodeMaster|NodeSlave) == 0 {
		n.Flags |= NodeMaster
	}
	s.Myself = n.ID
	s.AddNode(&n)
	return s
}

// Node returns the node with the ID, nil when unknown.
func (s *State) Node(id string) *Node { return s.nodes[id] }

// Me is myself's node.
func (s *State) Me() *Node { return s.nodes[s.Myself] }

// Nodes are all known nodes, in the order they became known.
func (s *State) Nodes() []*Node {
	out := make([]*Node, 0, len(s.order))
	for _, id := range s.order {
		out = append(out, s.nodes[id])
	}
	return out
}

// AddNode adds n, replacing any node of its ID.
func (s *State) AddNode(n *Node) {
	if s.nodes == nil {
		s.nodes = map[string]*Node{}
	}
	if _, ok := s.nodes[n.ID]; !ok {
		s.order = append(s.order, n.ID)
	}
	s.nodes[n.ID] = n
}

// DelNode forgets a node as clusterDelNode does: its slots become
// unassigned, slot moves involving it end, and its failure reports on
// other nodes are dropped.
func (s *State) DelNode(id string) {
	if s.nodes[id] == nil || id == s.Myself {
		return
	}
	for j := range s.Owner {
		if s.Owner[j] == id {
			s.SetOwner(uint16(j), "")
		}
	}
	for slot, to := range s.Migrating {
		if to == id {
			delete(s.Migrating, slot)
		}
	}
	for slot, from := range s.Importing {
		if from == id {
			delete(s.Importing, slot)
		}
	}
	for _, n := range s.nodes {
		n.FailReports = slices.DeleteFunc(n.FailReports, func(r FailReport) bool { return r.Sender == id })
	}
	delete(s.nodes, id)
	s.order = slices.DeleteFunc(s.order, func(o string) bool { return o == id })
}

// SetOwner binds slot to the node id, or unbinds it for "".
func (s *State) SetOwner(slot uint16, id string) {
	if old := s.nodes[s.Owner[slot]]; old != nil {
		old.NumSlots--
	}
	s.Owner[slot] = id
	if n := s.nodes[id]; n != nil {
		n.NumSlots++
	}
	s.runs = s.runs[:0]
	s.notClaiming[slot>>3] &^= 1 << (slot & 7)
}

// SlotsOf is the bitmap of the slots the owner table gives id, as a
// master's PING carries it.
func (s *State) SlotsOf(id string) (b [SlotBytes]byte) {
	for j := range s.Owner {
		if s.Owner[j] == id {
			SetSlot(&b, uint16(j))
		}
	}
	return b
}

// Replicas are the known nodes that replicate id, in insertion order.
func (s *State) Replicas(id string) []*Node {
	var out []*Node
	for _, oid := range s.order {
		if n := s.nodes[oid]; n.Master == id && n.IsSlave() {
			out = append(out, n)
		}
	}
	return out
}

func (s *State) unclaimed(slot uint16) bool {
	return s.Owner[slot] == "" || s.notClaiming[slot>>3]&(1<<(slot&7)) != 0
}

// epochOf is the config epoch Redis shows for n: a replica has its
// master's.
func (s *State) epochOf(n *Node) uint64 {
	if n.IsSlave() && n.Master != "" {
		if m := s.nodes[n.Master]; m != nil {
			return m.ConfigEpoch
		}
	}
	return n.ConfigEpoch
}

// MaxEpoch is the greatest config epoch known, or currentEpoch when
// greater (clusterGetMaxEpoch).
func (s *State) MaxEpoch() uint64 {
	max := s.CurrentEpoch
	for _, n := range s.nodes {
		max = maxU64(max, n.ConfigEpoch)
	}
	return max
}

func maxU64(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// FromNodesConf builds the state a node starts with from its nodes.conf,
// as clusterLoadConfig does: a master named only as some node's master
// is known by its ID alone, a non-zero ping or pong time becomes now
// (the file's clock is not this run's), a replica takes its master's
// config epoch rather than its own, and currentEpoch is raised to the
// greatest config epoch. Links are all down: none exists yet.
func FromNodesConf(c *NodesConf, nodeTimeout, now int64) (*State, error) {
	s := &State{
		NodeTimeout:           nodeTimeout,
		RequireFullCoverage:   true,
		AllowReplicaMigration: true,
		Status:                StateFail,
		CurrentEpoch:          c.CurrentEpoch,
		LastVoteEpoch:         c.LastVoteEpoch,
	}
	get := func(id string) *Node {
		n := s.nodes[id]
		if n == nil {
			n = &Node{ID: id}
			s.AddNode(n)
		}
		return n
	}
	for i := range c.Nodes {
		cn := &c.Nodes[i]
		n := get(cn.ID)
		n.IP, n.Port, n.CPort, n.Hostname = cn.IP, cn.Port, cn.CPort, cn.Hostname
		n.Flags = cn.Flags
		if cn.Flags&NodeMyself != 0 {
			s.Myself = n.ID
		}
		if cn.Flags&NodeFail != 0 {
			n.FailTime = now
		}
		if cn.Master != "" {
			get(cn.Master).Flags |= NodeMigrateTo
			n.Master = cn.Master
		}
		if cn.PingSent != 0 {
			n.PingSent = now
		}
		if cn.PongRecv != 0 {
			n.PongReceived = now
		}
		if n.IsSlave() && n.Master != "" {
			n.ConfigEpoch = 0
		} else {
			n.ConfigEpoch = cn.ConfigEpoch
		}
		for _, r := range cn.Slots {
			for j := int(r.First); j <= int(r.Last); j++ {
				s.SetOwner(uint16(j), n.ID)
			}
		}
		for _, mv := range cn.Moves {
			get(mv.Node)
			if mv.Importing {
				if s.Importing == nil {
					s.Importing = map[uint16]string{}
				}
				s.Importing[mv.Slot] = mv.Node
			} else {
				if s.Migrating == nil {
					s.Migrating = map[uint16]string{}
				}
				s.Migrating[mv.Slot] = mv.Node
			}
		}
	}
	if s.Myself == "" {
		return nil, fmt.Errorf("nodes.conf: no node is flagged myself")
	}
	s.nodes[s.Myself].Linked = true
	s.CurrentEpoch = s.MaxEpoch()
	return s, nil
}

// NodesConf is the nodes.conf that saves s, as clusterSaveConfig writes
// it: every node, handshakes included, with its slots as ranges of the
// owner table and myself's slot moves.
func (s *State) NodesConf() *NodesConf {
	c := &NodesConf{CurrentEpoch: s.CurrentEpoch, LastVoteEpoch: s.LastVoteEpoch}
	ranges := s.allRanges()
	for _, n := range s.Nodes() {
		c.Nodes = append(c.Nodes, s.confNode(n, ranges[n.ID]))
	}
	return c
}

// ownerRun is First to Last inclusive, all owned by Owner ("" for none).
type ownerRun struct {
	First, Last uint16
	Owner       string
}

// ownerRuns are the maximal runs of slots of one owner, in slot order.
func (s *State) ownerRuns() []ownerRun {
	if len(s.runs) > 0 {
		return s.runs
	}
	for j := 0; j < Slots; {
		id := s.Owner[j]
		k := j
		for k+1 < Slots && s.Owner[k+1] == id {
			k++
		}
		s.runs = append(s.runs, ownerRun{uint16(j), uint16(k), id})
		j = k + 1
	}
	return s.runs
}

// allRanges is Ranges of every owner: the bus saves the state after
// every change, a reshard's thousands of them included.
func (s *State) allRanges() map[string][]SlotRange {
	out := map[string][]SlotRange{}
	for _, r := range s.ownerRuns() {
		if r.Owner != "" {
			out[r.Owner] = append(out[r.Owner], SlotRange{r.First, r.Last})
		}
	}
	return out
}

func (s *State) confNode(n *Node, ranges []SlotRange) ConfNode {
	cn := ConfNode{
		ID:          n.ID,
		IP:          n.IP,
		Port:        n.Port,
		CPort:       n.CPort,
		Hostname:    n.Hostname,
		Flags:       n.Flags,
		PingSent:    n.PingSent,
		PongRecv:    n.PongReceived,
		ConfigEpoch: s.epochOf(n),
		Connected:   n.Linked || n.Flags&NodeMyself != 0,
		Slots:       ranges,
	}
	if s.nodes[n.Master] != nil {
		cn.Master = n.Master
	}
	if n.ID == s.Myself && len(s.Migrating)+len(s.Importing) > 0 {
		// In slot order, a slot both migrating and importing shown
		// migrating, as Redis lists them.
		open := make([]uint16, 0, len(s.Migrating)+len(s.Importing))
		for j := range s.Migrating {
			open = append(open, j)
		}
		for j := range s.Importing {
			if _, ok := s.Migrating[j]; !ok {
				open = append(open, j)
			}
		}
		slices.Sort(open)
		for _, j := range open {
			if to, ok := s.Migrating[j]; ok {
				cn.Moves = append(cn.Moves, SlotMove{Slot: j, Node: to})
			} else {
				cn.Moves = append(cn.Moves, SlotMove{Slot: j, Importing: true, Node: s.Importing[j]})
			}
		}
	}
	return cn
}

// Ranges are the slots the owner table gives id, as maximal ranges.
func (s *State) Ranges(id string) []SlotRange {
	var out []SlotRange
	for j := 0; j < Slots; j++ {
		if s.Owner[j] != id {
			continue
		}
		k := j
		for k+1 < Slots && s.Owner[k+1] == id {
			k++
		}
		out = append(out, SlotRange{uint16(j), uint16(k)})
		j = k
	}
	return out
}
