package cluster

import (
	"slices"
	"strings"
	"testing"
)

func TestEpochAdoption(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		msgCurrent, msgConfig uint64
		handshake             bool
		wantCurrent, wantCfg  uint64
		wantSave              bool
	}{
		{"older epochs change nothing", 3, 1, false, 6, 2, false},
		{"a newer currentEpoch is adopted", 9, 2, false, 9, 2, false},
		{"a newer configEpoch is adopted and saved", 9, 8, false, 9, 8, true},
		{"a node in handshake is not believed", 9, 8, true, 6, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sixNodes(t, m1)
			if tc.handshake {
				s.Node(m2).Flags |= NodeHandshake
			}
			m := pingFrom(s, m2)
			m.CurrentEpoch, m.ConfigEpoch = tc.msgCurrent, tc.msgConfig
			c := s.Receive(m, false, 5000)
			if s.CurrentEpoch != tc.wantCurrent || s.Node(m2).ConfigEpoch != tc.wantCfg || c.Save != tc.wantSave {
				t.Errorf("currentEpoch %d, m2's configEpoch %d, save %v; want %d %d %v",
					s.CurrentEpoch, s.Node(m2).ConfigEpoch, c.Save, tc.wantCurrent, tc.wantCfg, tc.wantSave)
			}
		})
	}
}

func TestSlotClaims(t *testing.T) {
	for _, tc := range []struct {
		name      string
		setup     func(s *State)
		epoch     uint64
		wantOwner string
	}{
		{"a greater epoch takes the slot", nil, 4, m2},
		{"an equal epoch does not", nil, 3, m3},
		{"a lower epoch does not", nil, 1, m3},
		{"an unassigned slot goes to any claim", func(s *State) { s.SetOwner(16000, "") }, 1, m2},
		{"an imported slot is left alone", func(s *State) { s.Importing = map[uint16]string{16000: m3} }, 9, m3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sixNodes(t, m1)
			if tc.setup != nil {
				tc.setup(s)
			}
			m := pingFrom(s, m2)
			m.ConfigEpoch = tc.epoch
			SetSlot(&m.MySlots, 16000)
			c := s.Receive(m, false, 5000)
			if got := s.Owner[16000]; got != tc.wantOwner {
				t.Errorf("slot 16000 owned by %.4s, want %.4s", got, tc.wantOwner)
			}
			if s.Owner[16001] != m3 {
				t.Error("an unclaimed slot moved")
			}
			if (tc.wantOwner == m2) != c.UpdateState {
				t.Errorf("update state %v", c.UpdateState)
			}
		})
	}
}

func TestLosingAllSlots(t *testing.T) {
	for _, tc := range []struct {
		name, me, want string
		lost           int
	}{
		{"a master left without slots replicates the new owner", m3, m2, 0},
		{"a replica whose master lost all follows the new owner", r3, m2, 0},
		{"a master that keeps some slots stays, its lost slots reported", m1, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sixNodes(t, tc.me)
			m := pingFrom(s, m2)
			m.ConfigEpoch = 7
			claim := SlotRange{10923, 16383}
			if tc.me == m1 {
				claim = SlotRange{0, 99}
			}
			m.MySlots = slotBits(SlotRange{5461, 10922}, claim)
			c := s.Receive(m, false, 5000)
			if c.BecomeReplicaOf != tc.want {
				t.Errorf("become replica of %.4q, want %.4q", c.BecomeReplicaOf, tc.want)
			}
			if tc.me == m1 && len(c.LostSlots) != 100 {
				t.Errorf("lost %d slots, want 100", len(c.LostSlots))
			}
			if s.Owner[claim.First] != m2 || s.Owner[claim.Last] != m2 {
				t.Error("the claim was not applied")
			}
		})
	}
}

func TestEpochCollision(t *testing.T) {
	for _, tc := range []struct {
		name        string
		me, sender  string
		senderRole  uint16
		wantEpoch   uint64
		wantCurrent uint64
	}{
		{"the smaller ID moves on", m1, m2, NodeMaster, 7, 7},
		{"the greater ID stays", m2, m1, NodeMaster, 2, 6},
		{"a replica sender is no collision", m1, r1, NodeSlave, 2, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sixNodes(t, tc.me)
			s.Node(m1).ConfigEpoch, s.Node(m2).ConfigEpoch = 2, 2
			m := pingFrom(s, tc.sender)
			m.ConfigEpoch = 2
			c := s.Receive(m, false, 5000)
			if got := s.Me().ConfigEpoch; got != tc.wantEpoch || s.CurrentEpoch != tc.wantCurrent {
				t.Errorf("my epoch %d, current %d; want %d %d", got, s.CurrentEpoch, tc.wantEpoch, tc.wantCurrent)
			}
			if tc.wantCurrent != 6 && !c.Save {
				t.Error("a new epoch of my own not saved")
			}
		})
	}
}

func TestUpdateDetection(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(s *State)
		epoch  uint64
		wantTo string
	}{
		{"a claim on a newer owner's slot", nil, 2, m3},
		{"a claim at the owner's epoch or later", nil, 3, ""},
		{"a claim on a slot its owner stopped claiming", func(s *State) {
			p := pingFrom(s, m3)
			p.MySlots = slotBits(SlotRange{10923, 15999}, SlotRange{16001, 16383})
			s.Receive(p, false, 4000)
		}, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sixNodes(t, m1)
			if tc.setup != nil {
				tc.setup(s)
			}
			m := pingFrom(s, m2)
			m.ConfigEpoch = tc.epoch
			SetSlot(&m.MySlots, 16000)
			c := s.Receive(m, false, 5000)
			if c.SendUpdate != tc.wantTo {
				t.Errorf("UPDATE about %.4q, want %.4q", c.SendUpdate, tc.wantTo)
			}
		})
	}

	t.Run("an UPDATE rebinds the slots and promotes", func(t *testing.T) {
		s := sixNodes(t, m1)
		m := &Msg{Type: TypeUpdate, Sender: NameOf(m2), ConfigEpoch: 2, CurrentEpoch: 6,
			Update: &Update{ConfigEpoch: 8, Node: NameOf(r3), Slots: slotBits(SlotRange{10923, 16383})}}
		c := s.Receive(m, false, 5000)
		if !c.Save || !s.Node(r3).IsMaster() || s.Owner[16383] != r3 || s.Node(r3).ConfigEpoch != 8 {
			t.Errorf("changes %+v, r3 flags %s epoch %d, slot owner %.4s", c,
				FlagsString(s.Node(r3).Flags), s.Node(r3).ConfigEpoch, s.Owner[16383])
		}
		if c := s.Receive(m, false, 5001); c.Save {
			t.Error("a repeated UPDATE changed the state")
		}
	})
}

// gossipAbout is a PING from sender whose one gossip entry gives
// about's flags.
func gossipAbout(s *State, sender, about string, flags uint16) *Msg {
	m := pingFrom(s, sender)
	n := s.Node(about)
	m.Gossip = []Gossip{{Name: NameOf(about), IP: IPOf(n.IP), Port: n.Port, CPort: n.CPort, Flags: flags}}
	return m
}

func TestFailureQuorum(t *testing.T) {
	for _, tc := range []struct {
		name     string
		me       string
		reporter []string
		wantFail bool
	}{
		{"myself and one master are a majority of 3", m1, []string{m2}, true},
		{"a replica's own view does not count", r1, []string{m2}, false},
		{"two masters make it without myself", r1, []string{m1, m2}, true},
		{"reports from replicas are ignored", r1, []string{r2, r3}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sixNodes(t, tc.me)
			s.Node(m3).Flags |= NodePFail
			var c Changes
			for i, from := range tc.reporter {
				c.merge(s.Receive(gossipAbout(s, from, m3, NodeMaster|NodePFail), false, int64(5000+i)))
			}
			if got := s.Node(m3).Failed(); got != tc.wantFail {
				t.Fatalf("m3 flags %s", FlagsString(s.Node(m3).Flags))
			}
			if tc.wantFail != slices.Equal(c.Failed, []string{m3}) || tc.wantFail && !c.Save {
				t.Errorf("changes %+v", c)
			}
		})
	}

	t.Run("without local PFAIL reports are only stored", func(t *testing.T) {
		s := sixNodes(t, m1)
		s.Receive(gossipAbout(s, m2, m3, NodeMaster|NodeFail), false, 5000)
		if s.Node(m3).Flags&(NodeFail|NodePFail) != 0 || len(s.Node(m3).FailReports) != 1 {
			t.Errorf("flags %s, reports %v", FlagsString(s.Node(m3).Flags), s.Node(m3).FailReports)
		}
		s.Receive(gossipAbout(s, m2, m3, NodeMaster), false, 5100)
		if len(s.Node(m3).FailReports) != 0 {
			t.Error("a sender seeing the node up did not withdraw its report")
		}
	})
}

func TestFailureReportAgeing(t *testing.T) {
	for _, tc := range []struct {
		name     string
		later    int64 // when the second report arrives, after the first at 0
		wantFail bool
	}{
		{"within 2 node timeouts both count", 2 * timeout, true},
		{"after 2 node timeouts the first is gone", 2*timeout + 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sixNodes(t, r1) // a replica: two master reports are needed
			s.Node(m3).Flags |= NodePFail
			base := int64(100000)
			s.Receive(gossipAbout(s, m1, m3, NodeMaster|NodePFail), false, base)
			s.Receive(gossipAbout(s, m2, m3, NodeMaster|NodePFail), false, base+tc.later)
			if s.Node(m3).Failed() != tc.wantFail {
				t.Errorf("m3 flags %s, reports %v", FlagsString(s.Node(m3).Flags), s.Node(m3).FailReports)
			}
		})
	}
	t.Run("a refresh keeps one report per sender", func(t *testing.T) {
		s := sixNodes(t, r1)
		s.Receive(gossipAbout(s, m1, m3, NodeMaster|NodePFail), false, 1000)
		s.Receive(gossipAbout(s, m1, m3, NodeMaster|NodePFail), false, 2000)
		if got := s.Node(m3).FailReports; !slices.Equal(got, []FailReport{{m1, 2000}}) {
			t.Errorf("reports %v", got)
		}
	})
}

func TestPFailTiming(t *testing.T) {
	for _, tc := range []struct {
		name      string
		pingSent  int64
		data      int64
		now       int64
		wantPFail bool
	}{
		{"no ping outstanding", 0, 0, 100000, false},
		{"at the timeout", 1000, 0, 1000 + timeout, false},
		{"past the timeout", 1000, 0, 1001 + timeout, true},
		{"recent traffic counts as a pong", 1000, 10000, 1001 + timeout, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sixNodes(t, m1)
			n := s.Node(m2)
			n.PingSent, n.DataReceived = tc.pingSent, tc.data
			c := s.Tick(tc.now)
			if n.TimedOut() != tc.wantPFail || c.UpdateState != tc.wantPFail {
				t.Errorf("flags %s, changes %+v", FlagsString(n.Flags), c)
			}
		})
	}
	t.Run("a pong on the outbound link clears PFAIL", func(t *testing.T) {
		s := sixNodes(t, m1)
		s.Node(m2).PingSent = 1000
		s.Tick(1001 + timeout)
		pong := pingFrom(s, m2)
		pong.Type = TypePong
		s.Receive(pong, true, 20000)
		if n := s.Node(m2); n.TimedOut() || n.PingSent != 0 || n.PongReceived != 20000 {
			t.Errorf("flags %s ping %d pong %d", FlagsString(n.Flags), n.PingSent, n.PongReceived)
		}
	})
}

func TestClearFail(t *testing.T) {
	for _, tc := range []struct {
		name      string
		node      string
		since     int64 // how long FAIL has been set
		wantClear bool
	}{
		{"a replica at once", r2, 0, true},
		{"a master with slots not yet", m2, 2 * timeout, false},
		{"a master with slots after 2 node timeouts", m2, 2*timeout + 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sixNodes(t, m1)
			n := s.Node(tc.node)
			n.Flags |= NodeFail
			n.FailTime = 100000
			pong := pingFrom(s, tc.node)
			pong.Type = TypePong
			s.Receive(pong, true, 100000+tc.since)
			if n.Failed() == tc.wantClear {
				t.Errorf("flags %s", FlagsString(n.Flags))
			}
		})
	}
}

func TestFailMessage(t *testing.T) {
	s := sixNodes(t, m1)
	s.Node(m3).Flags |= NodePFail
	c := s.Receive(&Msg{Type: TypeFail, Sender: NameOf(m2), About: NameOf(m3)}, false, 5000)
	if !s.Node(m3).Failed() || s.Node(m3).TimedOut() || !c.UpdateState {
		t.Fatalf("flags %s", FlagsString(s.Node(m3).Flags))
	}
	if s.UpdateState(6000); s.Status != StateFail {
		t.Error("a slot owner in FAIL left the cluster up with full coverage required")
	}
	s.RequireFullCoverage = false
	if s.UpdateState(7000); s.Status != StateOK {
		t.Error("two of three masters reachable left the cluster down")
	}
	c = s.Receive(&Msg{Type: TypeFail, Sender: NameOf(m2), About: NameOf(m1)}, false, 5000)
	if s.Me().Failed() || c.Save {
		t.Error("a FAIL about myself was taken")
	}
}

func TestGossipIntroducesNodes(t *testing.T) {
	s := sixNodes(t, m1)
	m := pingFrom(s, m2)
	x, y := strings.Repeat("d", NameLen), strings.Repeat("e", NameLen)
	m.Gossip = []Gossip{
		{Name: NameOf(x), IP: IPOf("10.0.0.9"), Port: 7000, CPort: 17000, Flags: NodeMaster},
		{Name: NameOf(y), Flags: NodeMaster | NodeNoAddr},
	}
	c := s.Receive(m, false, 5000)
	if !slices.Equal(c.NewNodes, []string{x}) || s.Node(y) != nil {
		t.Fatalf("new nodes %v", c.NewNodes)
	}
	if n := s.Node(x); n.IP != "10.0.0.9" || n.Port != 7000 || n.CPort != 17000 || n.Flags != NodeMaster {
		t.Errorf("node %+v", n)
	}
}
