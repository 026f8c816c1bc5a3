package cluster

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// t0 is a clock far enough from zero that no vote, election or retry
// time starts out recent, as with the bus's Unix milliseconds.
const t0 = int64(1_000_000)

var (
	unknownID = strings.Repeat("f", NameLen)
	// More replicas of m3, for ranks, and of m1 and m2, for migrations:
	// r2b < r1b < r1, so that the smallest-ID rule has a choice.
	r3b = strings.Repeat("d", NameLen)
	r3c = strings.Repeat("e", NameLen)
	r1b = strings.Repeat("9", NameLen)
	r2b = strings.Repeat("8", NameLen)
)

// addReplica adds id, replicating master at offset, to s.
func addReplica(s *State, id, master string, offset int64) *Node {
	n := &Node{ID: id, IP: "127.0.0.1", Port: 30100, CPort: 40100, Flags: NodeSlave,
		Master: master, ReplOffset: offset, Linked: true, PongReceived: 1000}
	s.AddNode(n)
	return n
}

// failed marks id FAIL since when.
func failed(s *State, id string, when int64) {
	n := s.Node(id)
	n.Flags = n.Flags&^NodePFail | NodeFail
	n.FailTime = when
}

// voteRequest is the FAILOVER_AUTH_REQUEST id sends under currentEpoch
// epoch, as s knows it: a replica speaks for its master's slots and
// config epoch.
func voteRequest(s *State, id string, epoch uint64) *Msg {
	m := pingFrom(s, id)
	m.Type, m.CurrentEpoch = TypeFailoverAuthRequest, epoch
	return m
}

// voteAck is the FAILOVER_AUTH_ACK id sends under currentEpoch epoch.
func voteAck(s *State, id string, epoch uint64) *Msg {
	m := pingFrom(s, id)
	m.Type, m.CurrentEpoch = TypeFailoverAuthAck, epoch
	return m
}

func wantLog(t *testing.T, c Changes, want ...string) {
	t.Helper()
	if !slices.Equal(c.Log, want) {
		t.Errorf("log %q, want %q", c.Log, want)
	}
}

func TestGrantVoteRefusals(t *testing.T) {
	// Each row's condition refuses the vote; at row i the conditions of
	// rows i and after all hold, so each reason must come before those
	// of the rows after it, as Redis checks them.
	refusals := []struct {
		name  string
		apply func(s *State)
		why   string // "": not a voter, which refuses without a word
	}{
		{"myself serves no slot", func(s *State) {
			for j := range uint16(5461) {
				s.SetOwner(j, "")
			}
		}, ""},
		{"the request's epoch is older than mine", func(s *State) { s.CurrentEpoch = 20 },
			"reqEpoch (7) < curEpoch(20)"},
		{"already voted in this epoch", func(s *State) { s.LastVoteEpoch = 7 },
			"already voted for epoch 7"},
		{"the requester is a master", func(s *State) { s.Node(r3).Flags = NodeMaster },
			"it is a master node"},
		{"its master is unknown", func(s *State) { s.Node(r3).Master = unknownID },
			"I don't know its master"},
		{"its master is up", func(s *State) { s.Node(m3).Flags &^= NodeFail },
			"its master is up"},
		{"voted about its master within two node timeouts", func(s *State) { s.Node(m3).VotedTime = t0 - 2*timeout + 1 },
			"can't vote about this master before 1 milliseconds"},
		{"a claimed slot has an owner with a greater config epoch", func(s *State) {
			s.Node(m2).ConfigEpoch = 9
			s.SetOwner(16000, m2)
			s.SetOwner(16001, m2)
		}, "slot 16000 epoch (9) > reqEpoch (3)"},
	}
	setup := func(t *testing.T) (*State, *Msg) {
		s := sixNodes(t, m1)
		failed(s, m3, t0-timeout)
		return s, voteRequest(s, r3, 7)
	}
	for i, r := range refusals {
		t.Run(r.name, func(t *testing.T) {
			s, m := setup(t)
			for _, later := range refusals[i:] {
				later.apply(s)
			}
			last, voted := s.LastVoteEpoch, s.Node(m3).VotedTime
			c := s.Receive(m, false, t0)
			if c.GrantVote != "" || c.SaveSync || s.LastVoteEpoch != last || s.Node(m3).VotedTime != voted {
				t.Errorf("voted: changes %+v, lastVoteEpoch %d", c, s.LastVoteEpoch)
			}
			if r.why == "" {
				wantLog(t, c)
			} else {
				wantLog(t, c, "Failover auth denied to "+r3+": "+r.why)
			}
		})
	}
	t.Run("the grant", func(t *testing.T) {
		s, m := setup(t)
		c := s.Receive(m, false, t0)
		if c.GrantVote != r3 || !c.SaveSync {
			t.Errorf("changes %+v", c)
		}
		wantLog(t, c, "Failover auth granted to "+r3+" for epoch 7")
		if s.LastVoteEpoch != 7 || s.CurrentEpoch != 7 || s.Node(m3).VotedTime != t0 {
			t.Errorf("lastVoteEpoch %d, currentEpoch %d, m3 voted at %d", s.LastVoteEpoch, s.CurrentEpoch, s.Node(m3).VotedTime)
		}
	})
}

func TestGrantVoteCases(t *testing.T) {
	for _, tc := range []struct {
		name  string
		me    string
		setup func(s *State, m *Msg)
		grant bool
	}{
		{"a replica does not vote", r1, nil, false},
		{"a master with slots votes", m1, nil, true},
		{"FORCEACK gets a vote for a replica whose master is up", m1, func(s *State, m *Msg) {
			s.Node(m3).Flags &^= NodeFail
			m.MFlags[0] |= Flag0ForceAck
		}, true},
		{"a vote about the same master two node timeouts later", m1, func(s *State, m *Msg) {
			s.Node(m3).VotedTime = t0 - 2*timeout
		}, true},
		{"a claimed slot owned at the request's config epoch", m1, func(s *State, m *Msg) {
			s.Node(m2).ConfigEpoch = 3
			s.SetOwner(16000, m2)
		}, true},
		{"a claimed slot unassigned", m1, func(s *State, m *Msg) { s.SetOwner(16000, "") }, true},
		{"a claimed slot whose newer owner stopped claiming it", m1, func(s *State, m *Msg) {
			s.Node(m2).ConfigEpoch = 9
			s.SetOwner(16000, m2)
			p := pingFrom(s, m2)
			p.MySlots = slotBits(SlotRange{5461, 10922})
			s.Receive(p, false, t0-1)
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sixNodes(t, tc.me)
			failed(s, m3, t0-timeout)
			m := voteRequest(s, r3, 7)
			if tc.setup != nil {
				tc.setup(s, m)
			}
			c := s.Receive(m, false, t0)
			if got := c.GrantVote == r3; got != tc.grant {
				t.Errorf("granted %v, want %v: %+v", got, tc.grant, c)
			}
		})
	}

	t.Run("one vote per epoch", func(t *testing.T) {
		s := sixNodes(t, m1)
		failed(s, m2, t0-timeout)
		failed(s, m3, t0-timeout)
		if c := s.Receive(voteRequest(s, r3, 7), false, t0); c.GrantVote != r3 {
			t.Fatalf("first request refused: %+v", c)
		}
		c := s.Receive(voteRequest(s, r2, 7), false, t0+1)
		if c.GrantVote != "" {
			t.Fatal("a second vote in epoch 7")
		}
		wantLog(t, c, "Failover auth denied to "+r2+": already voted for epoch 7")
		if c := s.Receive(voteRequest(s, r2, 8), false, t0+2); c.GrantVote != r2 || s.LastVoteEpoch != 8 {
			t.Errorf("a request in a new epoch refused: %+v", c)
		}
	})
}

func TestFailoverAuthAck(t *testing.T) {
	for _, tc := range []struct {
		name   string
		from   string
		epoch  uint64
		setup  func(s *State)
		counts bool
	}{
		{"a master with slots at the election's epoch", m1, 7, nil, true},
		{"a master with slots at a later epoch", m2, 8, nil, true},
		{"an ack from an earlier epoch", m1, 6, nil, false},
		{"a replica's ack", r1, 7, nil, false},
		{"an ack before the request of a new election is out", m1, 7, func(s *State) {
			s.el = election{time: t0, epoch: 7, count: 1}
		}, false},
		{"a master without slots", m1, 7, func(s *State) {
			for j := range uint16(5461) {
				s.SetOwner(j, m2)
			}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sixNodes(t, r3)
			s.el = election{time: t0, sent: true, epoch: 7, count: 1}
			if tc.setup != nil {
				tc.setup(s)
			}
			c := s.Receive(voteAck(s, tc.from, tc.epoch), false, t0+10)
			want := 1
			if tc.counts {
				want = 2
			}
			if s.el.count != want || c.HandleFailover != tc.counts {
				t.Errorf("count %d, handle failover %v; want %d %v", s.el.count, c.HandleFailover, want, tc.counts)
			}
		})
	}
}

// rnd123 is the random delay: always 123 of the 500 ms asked for.
func rnd123(t *testing.T) func(int64) int64 {
	return func(n int64) int64 {
		if n != 500 {
			t.Errorf("random delay drawn in [0, %d), want [0, 500)", n)
		}
		return 123
	}
}

// electionState is sixNodes seen from r3, whose master m3 failed long
// enough ago that the reasons for waiting are logged.
func electionState(t *testing.T) *State {
	s := sixNodes(t, r3)
	failed(s, m3, t0-100000)
	return s
}

func TestHandleFailoverRank(t *testing.T) {
	for _, tc := range []struct {
		name     string
		siblings map[string]int64 // replica → offset, as last heard
		noFail   string           // a sibling flagged nofailover
		rank     int
	}{
		{"the only replica", nil, "", 0},
		{"a sibling behind", map[string]int64{r3b: 99}, "", 0},
		{"a sibling at the same offset", map[string]int64{r3b: 100}, "", 0},
		{"a sibling ahead", map[string]int64{r3b: 101}, "", 1},
		{"two siblings ahead", map[string]int64{r3b: 200, r3c: 300}, "", 2},
		{"a sibling ahead that may not fail over", map[string]int64{r3b: 200, r3c: 300}, r3c, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := electionState(t)
			for id, off := range tc.siblings {
				addReplica(s, id, m3, off)
			}
			if tc.noFail != "" {
				s.Node(tc.noFail).Flags |= NodeNoFailover
			}
			c := s.HandleFailover(t0, ReplicaInfo{Offset: 100}, rnd123(t))
			delay := 500 + 123 + int64(tc.rank)*1000
			if s.el.time != t0+delay || s.el.rank != tc.rank || s.el.sent {
				t.Errorf("election %+v, want at %d rank %d", s.el, t0+delay, tc.rank)
			}
			if !c.PongReplicas || c.RequestVotes || c.HandleFailover || s.CurrentEpoch != 6 {
				t.Errorf("changes %+v, currentEpoch %d", c, s.CurrentEpoch)
			}
			wantLog(t, c, "Start of election delayed for "+itoa(delay)+" milliseconds (rank #"+itoa(int64(tc.rank))+", offset 100).")
		})
	}

	t.Run("a sibling found ahead before the request delays it a second a rank", func(t *testing.T) {
		s := electionState(t)
		addReplica(s, r3b, m3, 50)
		s.HandleFailover(t0, ReplicaInfo{Offset: 100}, rnd123(t))
		s.HandleFailover(t0+100, ReplicaInfo{Offset: 100}, rnd123(t))
		if s.el.time != t0+623 {
			t.Fatalf("election at %d with no news", s.el.time)
		}
		p := pingFrom(s, r3b)
		p.Type, p.Offset = TypePong, 500
		s.Receive(p, false, t0+200)
		s.HandleFailover(t0+300, ReplicaInfo{Offset: 100}, rnd123(t))
		if s.el.time != t0+1623 || s.el.rank != 1 {
			t.Fatalf("election %+v after a sibling went ahead", s.el)
		}
		c := s.HandleFailover(t0+1623, ReplicaInfo{Offset: 100}, rnd123(t))
		if !c.RequestVotes {
			t.Fatalf("no request at the delayed time: %+v", c)
		}
		addReplica(s, r3c, m3, 900)
		s.HandleFailover(t0+1700, ReplicaInfo{Offset: 100}, rnd123(t))
		if s.el.rank != 1 || s.el.time != t0+1623 {
			t.Errorf("rank changed after the request: %+v", s.el)
		}
	})
}

func TestHandleFailoverNotEligible(t *testing.T) {
	for _, tc := range []struct {
		name  string
		me    string
		setup func(s *State)
	}{
		{"a master", m1, nil},
		{"the master is up", r3, func(s *State) { s.Node(m3).Flags &^= NodeFail }},
		{"the master is only PFAIL", r3, func(s *State) { s.Node(m3).Flags = NodeMaster | NodePFail }},
		{"myself may not fail over", r3, func(s *State) { s.Me().Flags |= NodeNoFailover }},
		{"the master serves no slot", r3, func(s *State) {
			for j := uint16(10923); j < Slots; j++ {
				s.SetOwner(j, m2)
			}
		}},
		{"the master is unknown", r3, func(s *State) { s.Me().Master = unknownID }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sixNodes(t, tc.me)
			failed(s, m3, t0-100000)
			if tc.setup != nil {
				tc.setup(s)
			}
			c := s.HandleFailover(t0, ReplicaInfo{Offset: 100}, rnd123(t))
			if !reflect.DeepEqual(c, Changes{}) || s.el != (election{}) || s.CurrentEpoch != 6 {
				t.Errorf("changes %+v, election %+v", c, s.el)
			}
		})
	}
}

func TestHandleFailoverDataAge(t *testing.T) {
	const tooOld = "Currently unable to failover: Disconnected from master for longer than allowed. Please check the 'cluster-replica-validity-factor' configuration option."
	// The limit: repl-ping-replica-period plus ten node timeouts, past
	// the node timeout it took to find the master failing.
	const limit = 10000 + 10*timeout + timeout
	for _, tc := range []struct {
		name     string
		factor   int64
		age      int64
		failedAt int64
		manual   bool
		refused  bool
		log      bool
	}{
		{"at the limit", 10, limit, t0 - 100000, false, false, false},
		{"past the limit", 10, limit + 1, t0 - 100000, false, true, true},
		{"past the limit, soon after the failure, unlogged", 10, limit + 1, t0 - timeout - 4999, false, true, false},
		{"past the limit, logged from node timeout plus 5 s", 10, limit + 1, t0 - timeout - 5000, false, true, true},
		{"no limit with factor 0", 0, 100 * limit, t0 - 100000, false, false, false},
		{"a manual failover ignores the limit", 10, 100 * limit, t0 - 100000, true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := electionState(t)
			s.Node(m3).FailTime = tc.failedAt
			s.ReplicaValidityFactor, s.ReplPingPeriod = tc.factor, 10000
			if tc.manual {
				if _, err := s.ManualFailover(FailoverForce, t0); err != nil {
					t.Fatal(err)
				}
			}
			c := s.HandleFailover(t0, ReplicaInfo{Offset: 100, DataAge: tc.age}, rnd123(t))
			if scheduled := s.el.time != 0; scheduled == tc.refused {
				t.Errorf("election %+v, refused %v", s.el, tc.refused)
			}
			if tc.refused {
				if tc.log {
					wantLog(t, c, tooOld)
				} else {
					wantLog(t, c)
				}
				// The same reason is not logged again.
				wantLog(t, s.HandleFailover(t0+100, ReplicaInfo{Offset: 100, DataAge: tc.age}, rnd123(t)))
			}
		})
	}
}

func TestElection(t *testing.T) {
	const (
		waitDelay = "Currently unable to failover: Waiting the delay before I can start a new failover."
		waitVotes = "Currently unable to failover: Waiting for votes, but majority still not reached."
	)
	s := electionState(t)
	ri := ReplicaInfo{Offset: 100}
	s.HandleFailover(t0, ri, rnd123(t))
	wantLog(t, s.HandleFailover(t0+622, ri, rnd123(t)), waitDelay)
	if s.el.sent || s.CurrentEpoch != 6 {
		t.Fatal("asked for votes before the delay")
	}
	c := s.HandleFailover(t0+623, ri, rnd123(t))
	if !c.RequestVotes || c.ForceAck || !c.SaveSync || !c.UpdateState || s.CurrentEpoch != 7 || s.el.epoch != 7 {
		t.Fatalf("changes %+v, currentEpoch %d, election %+v", c, s.CurrentEpoch, s.el)
	}
	wantLog(t, c, "Starting a failover election for epoch 7.")
	c = s.HandleFailover(t0+700, ri, rnd123(t))
	if c.RequestVotes {
		t.Fatal("a second request in one election")
	}
	wantLog(t, c, waitVotes)

	// Size is 3: two votes are a majority.
	if c := s.Receive(voteAck(s, m1, 9), false, t0+800); !c.HandleFailover {
		t.Fatalf("first vote not counted: %+v", c)
	}
	if c := s.HandleFailover(t0+800, ri, rnd123(t)); !s.Me().IsSlave() || len(c.Log) != 0 {
		t.Fatalf("one vote of three won, or the wait was logged twice: %+v", c)
	}
	s.Receive(voteAck(s, m2, 7), false, t0+900)
	c = s.HandleFailover(t0+900, ri, rnd123(t))
	wantLog(t, c, "Failover election won: I'm the new master.")
	me := s.Me()
	// The election's epoch, not the currentEpoch a vote brought.
	if !me.IsMaster() || me.Master != "" || me.ConfigEpoch != 7 || s.CurrentEpoch != 9 {
		t.Fatalf("myself %s of %q at epoch %d, currentEpoch %d", FlagsString(me.Flags), me.Master, me.ConfigEpoch, s.CurrentEpoch)
	}
	if me.NumSlots != 5461 || s.Node(m3).NumSlots != 0 || s.Owner[10923] != r3 || s.Owner[16383] != r3 || s.Owner[10922] != m2 {
		t.Fatalf("slots: mine %d, m3's %d", me.NumSlots, s.Node(m3).NumSlots)
	}
	if !c.SaveSync || !c.UpdateState || !c.Announce {
		t.Errorf("changes %+v", c)
	}
	if s.el.count != 0 || s.el.sent {
		t.Errorf("the votes won were kept: %+v", s.el)
	}
}

func TestElectionExpiryAndRetry(t *testing.T) {
	const expired = "Currently unable to failover: Failover attempt expired."
	s := electionState(t)
	ri := ReplicaInfo{Offset: 100}
	zero := func(int64) int64 { return 0 }
	s.HandleFailover(t0, ri, zero)
	start := t0 + 500
	if c := s.HandleFailover(start, ri, zero); !c.RequestVotes {
		t.Fatalf("no request at %d: %+v", start, c)
	}
	// The auth timeout is two node timeouts; votes that come after it
	// win nothing.
	s.Receive(voteAck(s, m1, 7), false, start+2*timeout)
	if c := s.HandleFailover(start+2*timeout, ri, zero); s.Me().IsMaster() || c.RequestVotes {
		t.Fatalf("changes %+v", c)
	}
	s.Receive(voteAck(s, m2, 7), false, start+2*timeout+1)
	c := s.HandleFailover(start+2*timeout+1, ri, zero)
	if s.Me().IsMaster() {
		t.Fatal("an expired election won")
	}
	wantLog(t, c, expired)

	// The retry comes after twice the auth timeout.
	if c := s.HandleFailover(start+4*timeout, ri, zero); c.PongReplicas || s.el.time != start {
		t.Fatalf("rescheduled at the retry time itself: %+v", c)
	}
	c = s.HandleFailover(start+4*timeout+1, ri, zero)
	if !c.PongReplicas || s.el.time != start+4*timeout+501 || s.el.count != 0 || s.el.sent {
		t.Fatalf("changes %+v, election %+v", c, s.el)
	}
	c = s.HandleFailover(start+4*timeout+501, ri, zero)
	if !c.RequestVotes || s.el.epoch != 8 {
		t.Fatalf("the retry asked for %d: %+v", s.el.epoch, c)
	}
}

func TestManualFailoverErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		me    string
		mode  FailoverMode
		setup func(s *State)
		err   string
	}{
		{"a master", m1, FailoverTakeover, nil, "ERR You should send CLUSTER FAILOVER to a replica"},
		{"an unknown master", r3, FailoverForce, func(s *State) { s.Me().Master = unknownID },
			"ERR I'm a replica but my master is unknown to me"},
		{"a failed master", r3, FailoverDefault, func(s *State) { failed(s, m3, t0) },
			"ERR Master is down or failed, please use CLUSTER FAILOVER FORCE"},
		{"an unlinked master", r3, FailoverDefault, func(s *State) { s.Node(m3).Linked = false },
			"ERR Master is down or failed, please use CLUSTER FAILOVER FORCE"},
		{"FORCE with a failed master", r3, FailoverForce, func(s *State) { failed(s, m3, t0) }, ""},
		{"TAKEOVER with a failed unlinked master", r3, FailoverTakeover, func(s *State) {
			failed(s, m3, t0)
			s.Node(m3).Linked = false
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sixNodes(t, tc.me)
			if tc.setup != nil {
				tc.setup(s)
			}
			c, err := s.ManualFailover(tc.mode, t0)
			wantErr(t, err, tc.err)
			if tc.err != "" && (!reflect.DeepEqual(c, Changes{}) || s.ManualFailoverUnderway()) {
				t.Errorf("a refused failover changed things: %+v", c)
			}
		})
	}
}

func TestManualFailoverModes(t *testing.T) {
	t.Run("TAKEOVER takes the slots under a new epoch at once", func(t *testing.T) {
		s := sixNodes(t, r3)
		c, err := s.ManualFailover(FailoverTakeover, t0)
		wantErr(t, err, "")
		me := s.Me()
		if !me.IsMaster() || me.ConfigEpoch != 7 || s.CurrentEpoch != 7 || me.NumSlots != 5461 || s.Owner[16383] != r3 {
			t.Fatalf("myself %s at epoch %d with %d slots, currentEpoch %d", FlagsString(me.Flags), me.ConfigEpoch, me.NumSlots, s.CurrentEpoch)
		}
		if !c.SaveSync || !c.Announce || c.RequestVotes || s.ManualFailoverUnderway() {
			t.Errorf("changes %+v", c)
		}
	})
	t.Run("TAKEOVER with the greatest epoch already keeps it", func(t *testing.T) {
		s := sixNodes(t, r3)
		s.Me().ConfigEpoch = 6
		if _, err := s.ManualFailover(FailoverTakeover, t0); err != nil {
			t.Fatal(err)
		}
		if s.Me().ConfigEpoch != 6 || s.CurrentEpoch != 6 || !s.Me().IsMaster() {
			t.Errorf("epoch %d, currentEpoch %d", s.Me().ConfigEpoch, s.CurrentEpoch)
		}
	})
	t.Run("FORCE holds an election at once, with the master up", func(t *testing.T) {
		s := sixNodes(t, r3)
		addReplica(s, r3b, m3, 900) // ahead, but a manual failover has no rank
		c, err := s.ManualFailover(FailoverForce, t0)
		wantErr(t, err, "")
		if !c.HandleFailover || c.SendMFStart != "" || !s.ManualFailoverUnderway() {
			t.Fatalf("changes %+v", c)
		}
		c = s.HandleFailover(t0, ReplicaInfo{Offset: 100}, rnd123(t))
		if !c.HandleFailover || s.el.time != t0 || s.el.rank != 0 {
			t.Fatalf("changes %+v, election %+v", c, s.el)
		}
		wantLog(t, c, "Start of election delayed for 0 milliseconds (rank #0, offset 100).")
		c = s.HandleFailover(t0, ReplicaInfo{Offset: 100}, rnd123(t))
		if !c.RequestVotes || !c.ForceAck || s.CurrentEpoch != 7 {
			t.Fatalf("changes %+v", c)
		}
	})
	t.Run("the default asks the master to pause", func(t *testing.T) {
		s := sixNodes(t, r3)
		c, err := s.ManualFailover(FailoverDefault, t0)
		wantErr(t, err, "")
		if c.SendMFStart != m3 || c.HandleFailover || !s.ManualFailoverUnderway() {
			t.Fatalf("changes %+v", c)
		}
		if c := s.HandleFailover(t0+1, ReplicaInfo{Offset: 100}, rnd123(t)); !reflect.DeepEqual(c, Changes{}) || s.el.time != 0 {
			t.Errorf("an election before the master paused: %+v", c)
		}
	})
}

func TestManualFailoverMasterSide(t *testing.T) {
	mfstart := func(s *State, from string) *Msg {
		m := pingFrom(s, from)
		m.Type = TypeMFStart
		return m
	}
	s := sixNodes(t, m3)
	if c := s.Receive(mfstart(s, r1), false, t0); c.PauseUntil != 0 || len(c.Log) != 0 || s.ManualFailoverUnderway() {
		t.Fatalf("an MFSTART from another master's replica was taken: %+v", c)
	}
	if s.ConfirmPaused() != "" {
		t.Fatal("a pause confirmed with no manual failover")
	}
	c := s.Receive(mfstart(s, r3), false, t0)
	if c.PauseUntil != t0+2*ManualFailoverTimeout || c.Unpause || !s.ManualFailoverUnderway() {
		t.Fatalf("changes %+v", c)
	}
	wantLog(t, c, "Manual failover requested by replica "+r3+".")
	if s.pausedForFailover() {
		t.Fatal("PAUSED before the server confirmed the pause")
	}
	if got := s.ConfirmPaused(); got != r3 || !s.pausedForFailover() {
		t.Fatalf("confirmed for %q, paused %v", got, s.pausedForFailover())
	}

	// A repeated MFSTART starts over: resume, then pause anew.
	c = s.Receive(mfstart(s, r3), false, t0+1000)
	if !c.Unpause || c.PauseUntil != t0+1000+2*ManualFailoverTimeout || s.pausedForFailover() {
		t.Fatalf("changes %+v", c)
	}
	s.ConfirmPaused()

	if c := s.manualFailoverTick(t0+1000+ManualFailoverTimeout, ReplicaInfo{}); !reflect.DeepEqual(c, Changes{}) {
		t.Fatalf("ended at its deadline: %+v", c)
	}
	c = s.manualFailoverTick(t0+1001+ManualFailoverTimeout, ReplicaInfo{})
	if !c.Unpause || s.pausedForFailover() || s.ManualFailoverUnderway() {
		t.Fatalf("changes %+v", c)
	}
	wantLog(t, c, "Manual failover timed out.")
}

func TestManualFailoverReplicaSide(t *testing.T) {
	paused := func(s *State, from string, offset uint64, flag bool) *Msg {
		m := pingFrom(s, from)
		m.Offset = offset
		if flag {
			m.MFlags[0] |= Flag0Paused
		}
		return m
	}
	start := func(t *testing.T) *State {
		s := sixNodes(t, r3)
		if _, err := s.ManualFailover(FailoverDefault, t0); err != nil {
			t.Fatal(err)
		}
		return s
	}
	t.Run("the offset comes from the master's first PAUSED message", func(t *testing.T) {
		s := start(t)
		for _, m := range []*Msg{paused(s, m3, 400, false), paused(s, m1, 400, true)} {
			if c := s.Receive(m, false, t0+10); c.HandleFailover || s.mf.offsetKnown {
				t.Fatalf("offset taken from %+v", m)
			}
		}
		c := s.Receive(paused(s, m3, 500, true), false, t0+20)
		if !c.HandleFailover || s.mf.masterOffset != 500 {
			t.Fatalf("changes %+v", c)
		}
		wantLog(t, c, "Received replication offset for paused master manual failover: 500")
		if c := s.Receive(paused(s, m3, 600, true), false, t0+30); c.HandleFailover || s.mf.masterOffset != 500 {
			t.Fatalf("a later PAUSED message moved the offset: %+v", c)
		}
	})
	for _, tc := range []struct {
		name   string
		offset int64
		starts bool
	}{
		{"behind the paused offset", 499, false},
		{"at it", 500, true},
		{"past it", 501, true},
	} {
		t.Run("the election waits for the replica's offset: "+tc.name, func(t *testing.T) {
			s := start(t)
			s.Receive(paused(s, m3, 500, true), false, t0+20)
			c := s.manualFailoverTick(t0+30, ReplicaInfo{Offset: tc.offset})
			if c.HandleFailover != tc.starts || s.mf.canStart != tc.starts {
				t.Fatalf("changes %+v", c)
			}
			if !tc.starts {
				return
			}
			wantLog(t, c, "All master replication stream processed, manual failover can start.")
			s.HandleFailover(t0+30, ReplicaInfo{Offset: tc.offset}, rnd123(t))
			c = s.HandleFailover(t0+30, ReplicaInfo{Offset: tc.offset}, rnd123(t))
			if !c.RequestVotes || !c.ForceAck {
				t.Fatalf("changes %+v", c)
			}
		})
	}
	t.Run("the replica gives up after the timeout", func(t *testing.T) {
		s := start(t)
		c := s.manualFailoverTick(t0+ManualFailoverTimeout+1, ReplicaInfo{Offset: 100})
		if c.Unpause || s.ManualFailoverUnderway() {
			t.Fatalf("changes %+v", c)
		}
		wantLog(t, c, "Manual failover timed out.")
		if c := s.HandleFailover(t0+ManualFailoverTimeout+2, ReplicaInfo{Offset: 100}, rnd123(t)); !reflect.DeepEqual(c, Changes{}) {
			t.Errorf("an election after the manual failover ended: %+v", c)
		}
	})
}

func TestReplicaMigration(t *testing.T) {
	// m1 has two working replicas, r1 and r1b; m3 lost its only one, r3.
	for _, tc := range []struct {
		name    string
		me      string
		setup   func(s *State)
		migrate bool
	}{
		{"the smallest ID of the largest shard", r1b, nil, true},
		{"another replica of the largest shard", r1, nil, false},
		{"a replica of a smaller shard", r2, nil, false},
		{"the smallest ID over every largest shard", r1b, func(s *State) { addReplica(s, r2b, m2, 0) }, false},
		{"the smallest ID, of another largest shard", r2b, func(s *State) { addReplica(s, r2b, m2, 0) }, true},
		{"the barrier keeps two replicas", r1b, func(s *State) { s.MigrationBarrier = 2 }, false},
		{"a PFAIL sibling counts against the barrier", r1b, func(s *State) { s.Node(r1).Flags |= NodePFail }, false},
		{"an orphan that never had a replica", r1b, func(s *State) { s.Node(m3).Flags &^= NodeMigrateTo }, false},
		{"a FAIL orphan", r1b, func(s *State) { failed(s, m3, t0) }, false},
		{"replica migration off", r1b, func(s *State) { s.AllowReplicaMigration = false }, false},
		{"the cluster down", r1b, func(s *State) { s.Status = StateFail }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sixNodes(t, r1)
			if s.Status != StateOK {
				t.Fatal("the cluster is down")
			}
			addReplica(s, r1b, m1, 0)
			failed(s, r3, t0-1000)
			s.Node(m3).Flags |= NodeMigrateTo
			s.MigrationBarrier = 1
			if tc.setup != nil {
				tc.setup(s)
			}
			s.Me().Flags &^= NodeMyself
			s.Myself = tc.me
			s.Me().Flags |= NodeMyself
			for _, now := range []int64{t0, t0 + ReplicaMigrationDelay} {
				if c := s.ReplicaMigration(now); !reflect.DeepEqual(c, Changes{}) {
					t.Fatalf("migrated at %d, before the delay: %+v", now, c)
				}
			}
			c := s.ReplicaMigration(t0 + ReplicaMigrationDelay + 1)
			if !tc.migrate {
				if !reflect.DeepEqual(c, Changes{}) {
					t.Errorf("changes %+v", c)
				}
				return
			}
			if c.BecomeReplicaOf != m3 || !c.Save || s.Node(m3).OrphanedTime != t0 {
				t.Errorf("changes %+v, orphaned since %d", c, s.Node(m3).OrphanedTime)
			}
			wantLog(t, c, "Migrating to orphaned master "+m3)
		})
	}
}
