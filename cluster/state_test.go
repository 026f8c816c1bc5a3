package cluster

import (
	"reflect"
	"strings"
	"testing"
)

// Six nodes, IDs ordered m1 < m2 < m3 < r1 < r2 < r3 as the collision
// rule compares them.
var (
	m1 = strings.Repeat("1", NameLen)
	m2 = strings.Repeat("2", NameLen)
	m3 = strings.Repeat("3", NameLen)
	r1 = strings.Repeat("a", NameLen)
	r2 = strings.Repeat("b", NameLen)
	r3 = strings.Repeat("c", NameLen)
)

const timeout = 15000

// sixNodes is a 3-master 3-replica cluster seen from me: m1 owns
// 0-5460, m2 5461-10922, m3 10923-16383, at config epochs 1, 2, 3; rN
// replicates mN.
func sixNodes(t *testing.T, me string) *State {
	t.Helper()
	s := &State{NodeTimeout: timeout, RequireFullCoverage: true, AllowReplicaMigration: true, Status: StateFail, CurrentEpoch: 6}
	for i, id := range []string{m1, m2, m3, r1, r2, r3} {
		n := &Node{ID: id, IP: "127.0.0.1", Port: uint16(30001 + i), CPort: uint16(40001 + i), Linked: true, PongReceived: 1000}
		if i < 3 {
			n.Flags = NodeMaster
			n.ConfigEpoch = uint64(i + 1)
		} else {
			n.Flags = NodeSlave
			n.Master = []string{m1, m2, m3}[i-3]
			n.ReplOffset = 100
		}
		if id == me {
			n.Flags |= NodeMyself
		}
		s.AddNode(n)
	}
	s.Myself = me
	for j := range uint16(Slots) {
		switch {
		case j <= 5460:
			s.SetOwner(j, m1)
		case j <= 10922:
			s.SetOwner(j, m2)
		default:
			s.SetOwner(j, m3)
		}
	}
	s.UpdateState(1)
	s.UpdateState(1 + WritableDelay)
	return s
}

// pingFrom is the PING id would send given what s knows of it.
func pingFrom(s *State, id string) *Msg {
	n := s.Node(id)
	m := &Msg{Type: TypePing, Sender: NameOf(id), ConfigEpoch: s.epochOf(n), CurrentEpoch: s.CurrentEpoch,
		Port: n.Port, CPort: n.CPort, MyIP: IPOf(n.IP), Flags: n.Flags &^ NodeMyself}
	if n.Master != "" {
		m.SlaveOf = NameOf(n.Master)
		m.MySlots = s.SlotsOf(n.Master)
	} else {
		m.MySlots = s.SlotsOf(id)
	}
	return m
}

func slotBits(ranges ...SlotRange) (b [SlotBytes]byte) {
	for _, r := range ranges {
		for j := int(r.First); j <= int(r.Last); j++ {
			SetSlot(&b, uint16(j))
		}
	}
	return b
}

func TestStateRoundTrip(t *testing.T) {
	s := sixNodes(t, r1)
	s.Node(m2).Hostname = "m2.example"
	s.Node(r3).Flags |= NodePFail | NodeNoFailover
	s.SetOwner(100, "")
	s.LastVoteEpoch = 4
	now := int64(123456)
	for _, n := range s.Nodes() {
		n.PongReceived, n.ReplOffset, n.Linked = now, 0, false
	}
	s.Node(m3).PingSent = now
	s.Migrating = map[uint16]string{7: m2}
	s.Importing = map[uint16]string{9000: m3}

	text := s.NodesConf().Append(nil)
	c, err := ParseNodesConf(text)
	if err != nil {
		t.Fatal(err)
	}
	back, err := FromNodesConf(c, timeout, now)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.NodesConf().Append(nil); string(got) != string(text) {
		t.Errorf("file after the round trip\n%s\nwant\n%s", got, text)
	}
	back.Status, back.Size, back.firstUpdate, back.amongMinority = s.Status, s.Size, s.firstUpdate, s.amongMinority
	back.Me().Linked = false
	for _, id := range []string{r1, r2, r3} {
		s.Node(id).ConfigEpoch = 0 // a replica's epoch is its master's
		// A master with a replica may be given another one (the flag is
		// not saved: loading restores it).
		s.Node(s.Node(id).Master).Flags |= NodeMigrateTo
	}
	if !reflect.DeepEqual(back, s) {
		for _, n := range s.Nodes() {
			if b := back.Node(n.ID); !reflect.DeepEqual(b, n) {
				t.Errorf("node\n%+v\nwant\n%+v", b, n)
			}
		}
		t.Error("the state changed in the round trip")
	}
}

func TestClusterNodesOutput(t *testing.T) {
	s := sixNodes(t, m1)
	s.Node(m2).Hostname = "m2.example"
	s.Node(r3).Linked = false
	s.Node(r3).Flags |= NodeFail
	s.Migrating = map[uint16]string{5460: m2}
	s.SetOwner(0, "")
	want := m1 + " 127.0.0.1:30001@40001 myself,master - 0 1000 1 connected 1-5460 [5460->-" + m2 + "]\n" +
		m2 + " 127.0.0.1:30002@40002,m2.example master - 0 1000 2 connected 5461-10922\n" +
		m3 + " 127.0.0.1:30003@40003 master - 0 1000 3 connected 10923-16383\n" +
		r1 + " 127.0.0.1:30004@40004 slave " + m1 + " 0 1000 1 connected\n" +
		r2 + " 127.0.0.1:30005@40005 slave " + m2 + " 0 1000 2 connected\n" +
		r3 + " 127.0.0.1:30006@40006 slave,fail " + m3 + " 0 1000 3 disconnected\n"
	if got := s.ClusterNodes(false); got != want {
		t.Errorf("CLUSTER NODES\n%s\nwant\n%s", got, want)
	}
}
