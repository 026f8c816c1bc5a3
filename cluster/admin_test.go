package cluster

import (
	"strings"
	"testing"
)

func wantErr(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" && err != nil || want != "" && (err == nil || err.Error() != want) {
		t.Fatalf("error %v, want %q", err, want)
	}
}

func fresh(id string) *State { return NewState(&Node{ID: id, IP: "127.0.0.1", Port: 7000}, timeout) }

func TestAddDelSlots(t *testing.T) {
	s := fresh(m1)
	wantErr(t, s.AddSlots([]SlotRange{{1, 1}, {2, 2}, {1, 1}}), "ERR Slot 1 specified multiple times")
	if s.Me().NumSlots != 0 {
		t.Fatal("a refused ADDSLOTS assigned slots")
	}
	s.Importing = map[uint16]string{5: m2}
	wantErr(t, s.AddSlots([]SlotRange{{0, 10}}), "")
	if s.Me().NumSlots != 11 || s.Owner[10] != m1 || len(s.Importing) != 0 {
		t.Fatalf("after ADDSLOTSRANGE 0 10: %d slots, importing %v", s.Me().NumSlots, s.Importing)
	}
	wantErr(t, s.AddSlots([]SlotRange{{11, 11}, {10, 10}}), "ERR Slot 10 is already busy")
	wantErr(t, s.DelSlots([]SlotRange{{10, 12}}), "ERR Slot 11 is already unassigned")
	wantErr(t, s.DelSlots([]SlotRange{{0, 3}, {3, 3}}), "ERR Slot 3 specified multiple times")
	wantErr(t, s.DelSlots([]SlotRange{{0, 3}}), "")
	if got := s.Ranges(m1); len(got) != 1 || got[0] != (SlotRange{4, 10}) {
		t.Fatalf("ranges %v", got)
	}
	s.FlushSlots()
	if s.Me().NumSlots != 0 || s.Owner[7] != "" {
		t.Fatal("FLUSHSLOTS left slots")
	}
}

func TestSetSlot(t *testing.T) {
	s := sixNodes(t, m1)
	none := func(uint16) int { return 0 }
	unknown := strings.Repeat("f", NameLen)
	cases := []struct {
		slot uint16
		args []string
		want string
	}{
		{6000, []string{"migrating", m2}, "ERR I'm not the owner of hash slot 6000"},
		{1, []string{"MIGRATING", unknown}, "ERR I don't know about node " + unknown},
		{1, []string{"migrating", r2}, "ERR Target node is not a master"},
		{1, []string{"importing", m2}, "ERR I'm already the owner of hash slot 1"},
		{6000, []string{"importing", unknown}, "ERR I don't know about node " + unknown},
		{1, []string{"node", unknown}, "ERR Unknown node " + unknown},
		{1, []string{"node", r1}, "ERR Target node is not a master"},
		{1, []string{"stable", "x"}, "ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP"},
		{1, []string{"move", m2}, "ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP"},
		{1, []string{"node"}, "ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP"},
	}
	for _, c := range cases {
		_, err := s.SetSlot(c.slot, c.args, none)
		wantErr(t, err, c.want)
	}
	if _, err := s.SetSlot(1, []string{"migrating", m2}, none); err != nil || s.Migrating[1] != m2 {
		t.Fatalf("MIGRATING: %v, %v", err, s.Migrating)
	}
	if _, err := s.SetSlot(6000, []string{"importing", m2}, none); err != nil || s.Importing[6000] != m2 {
		t.Fatalf("IMPORTING: %v, %v", err, s.Importing)
	}
	s.SetSlot(6000, []string{"stable"}, none)
	if _, ok := s.Importing[6000]; ok {
		t.Fatal("STABLE left the slot importing")
	}

	// Keys hold a slot; without keys NODE moves it and ends its migration.
	_, err := s.SetSlot(1, []string{"node", m2}, func(uint16) int { return 3 })
	wantErr(t, err, "ERR Can't assign hashslot 1 to a different node while I still hold keys for this hash slot.")
	c, err := s.SetSlot(1, []string{"node", m2}, none)
	if err != nil || s.Owner[1] != m2 || s.Migrating[1] != "" || c.BecomeReplicaOf != "" || c.Announce {
		t.Fatalf("NODE: %v, owner %s, changes %+v", err, s.Owner[1], c)
	}

	// NODE to myself on an importing slot bumps the epoch at once.
	s.SetSlot(6000, []string{"importing", m2}, none)
	epoch := s.CurrentEpoch
	c, err = s.SetSlot(6000, []string{"node", m1}, none)
	if err != nil || !c.Announce || s.Me().ConfigEpoch != epoch+1 || s.CurrentEpoch != epoch+1 || len(s.Importing) != 0 {
		t.Fatalf("NODE to myself: %v %+v epoch %d/%d", err, c, s.Me().ConfigEpoch, s.CurrentEpoch)
	}

	// Giving away the last slot makes myself a replica of the taker.
	s.FlushSlots()
	s.SetOwner(0, m1)
	c, _ = s.SetSlot(0, []string{"node", m3}, none)
	if c.BecomeReplicaOf != m3 {
		t.Fatalf("losing the last slot: %+v", c)
	}

	r := sixNodes(t, r1)
	_, err = r.SetSlot(1, []string{"stable"}, none)
	wantErr(t, err, "ERR Please use SETSLOT only with masters.")
}

func TestBumpAndSetEpoch(t *testing.T) {
	s := fresh(m1)
	wantErr(t, s.SetConfigEpoch(-1), "ERR Invalid config epoch specified: -1")
	wantErr(t, s.SetConfigEpoch(7), "")
	if s.Me().ConfigEpoch != 7 || s.CurrentEpoch != 7 {
		t.Fatalf("epochs %d %d", s.Me().ConfigEpoch, s.CurrentEpoch)
	}
	wantErr(t, s.SetConfigEpoch(8), "ERR Node config epoch is already non-zero")
	if bumped, e := s.BumpEpoch(); bumped || e != 7 {
		t.Fatalf("BUMPEPOCH at the greatest epoch: %v %d", bumped, e)
	}
	s.AddNode(&Node{ID: m2, Flags: NodeMaster, ConfigEpoch: 9})
	wantErr(t, s.SetConfigEpoch(1), "ERR The user can assign a config epoch only when the node does not know any other node.")
	if bumped, e := s.BumpEpoch(); !bumped || e != 8 {
		t.Fatalf("BUMPEPOCH below another's epoch: %v %d", bumped, e)
	}
	z := fresh(m3)
	if bumped, e := z.BumpEpoch(); !bumped || e != 1 {
		t.Fatalf("BUMPEPOCH at 0: %v %d", bumped, e)
	}
}

func TestForget(t *testing.T) {
	s := sixNodes(t, r1)
	unknown := strings.Repeat("f", NameLen)
	wantErr(t, s.Forget(unknown, 0), "ERR Unknown node "+unknown)
	wantErr(t, s.Forget(r1, 0), "ERR I tried hard but I can't forget myself...")
	wantErr(t, s.Forget(m1, 0), "ERR Can't forget my master!")
	wantErr(t, s.Forget(m3, 1000), "")
	if s.Node(m3) != nil || s.Owner[16383] != "" {
		t.Fatal("FORGET left the node or its slots")
	}
	// Gossip about the forgotten node is ignored for the blacklist's TTL.
	g := pingFrom(s, m2)
	g.Gossip = []Gossip{{Name: NameOf(m3), IP: IPOf("127.0.0.1"), Port: 30003, CPort: 40003, Flags: NodeMaster}}
	s.Receive(g, false, 1000+BlacklistTTL)
	if s.Node(m3) != nil {
		t.Fatal("gossip re-added a forgotten node within the TTL")
	}
	s.Receive(g, false, 1001+BlacklistTTL)
	if s.Node(m3) == nil {
		t.Fatal("gossip did not re-add the node after the TTL")
	}
}

func TestReplicate(t *testing.T) {
	s := sixNodes(t, m1)
	unknown := strings.Repeat("f", NameLen)
	wantErr(t, s.Replicate(unknown, false), "ERR Unknown node "+unknown)
	wantErr(t, s.Replicate(m1, false), "ERR Can't replicate myself")
	wantErr(t, s.Replicate(r2, false), "ERR I can only replicate a master, not a replica.")
	wantErr(t, s.Replicate(m2, false), "ERR To set a master the node must be empty and without assigned slots.")
	s.FlushSlots()
	wantErr(t, s.Replicate(m2, true), "ERR To set a master the node must be empty and without assigned slots.")
	s.Migrating = map[uint16]string{1: m2}
	wantErr(t, s.Replicate(m2, false), "")
	if me := s.Me(); !me.IsSlave() || me.IsMaster() || me.Master != m2 || s.Migrating != nil {
		t.Fatalf("after REPLICATE: flags %s master %s migrating %v", FlagsString(me.Flags), me.Master, s.Migrating)
	}
	// A replica switches masters even with keys.
	wantErr(t, s.Replicate(m3, true), "")
	if s.Me().Master != m3 {
		t.Fatal("the replica did not switch masters")
	}
	reps, err := s.ReplicasOf(m3)
	if err != nil || len(reps) != 2 || reps[0].ID != m1 || reps[1].ID != r3 {
		t.Fatalf("REPLICAS: %v %v", reps, err)
	}
	_, err = s.ReplicasOf(r2)
	wantErr(t, err, "ERR The specified node is not a master")
}

func TestCountFailureReports(t *testing.T) {
	s := sixNodes(t, m1)
	s.AddFailureReport(s.Node(m3), s.Node(m2), 1000)
	if n, err := s.CountFailureReports(m3, 1000); n != 1 || err != nil {
		t.Fatalf("%d %v", n, err)
	}
	if n, _ := s.CountFailureReports(m3, 1001+timeout*FailReportValidityMult); n != 0 {
		t.Fatal("an expired report counted")
	}
	_, err := s.CountFailureReports("x", 0)
	wantErr(t, err, "ERR Unknown node x")
}

func TestReset(t *testing.T) {
	s := sixNodes(t, r1)
	s.Reset(false, "")
	me := s.Me()
	if len(s.Nodes()) != 1 || !me.IsMaster() || me.IsSlave() || me.Master != "" || s.Owner[0] != "" || s.CurrentEpoch != 6 || s.Myself != r1 {
		t.Fatalf("soft reset: %d nodes, %s, epoch %d", len(s.Nodes()), FlagsString(me.Flags), s.CurrentEpoch)
	}
	h := sixNodes(t, m1)
	h.Importing = map[uint16]string{1: m2}
	h.Reset(true, m3)
	me = h.Me()
	if h.Myself != m3 || me.ID != m3 || h.Node(m1) != nil || len(h.Nodes()) != 1 || me.ConfigEpoch != 0 || h.CurrentEpoch != 0 || h.Importing != nil || me.NumSlots != 0 {
		t.Fatalf("hard reset: myself %s, %d nodes, epochs %d %d", h.Myself, len(h.Nodes()), me.ConfigEpoch, h.CurrentEpoch)
	}
}

func TestMeetAddress(t *testing.T) {
	for _, c := range []struct {
		ip, port    string
		p, cp       int64
		want, error string
	}{
		{"127.0.0.1", "7000", 7000, 17000, "127.0.0.1", ""},
		{"::ffff:127.0.0.1", "7000", 7000, 17000, "127.0.0.1", ""},
		{"localhost", "7000", 7000, 17000, "", "ERR Invalid node address specified: localhost:7000"},
		{"127.0.0.1", "0", 0, 10000, "", "ERR Invalid node address specified: 127.0.0.1:0"},
		{"127.0.0.1", "7000", 7000, 65536, "", "ERR Invalid node address specified: 127.0.0.1:7000"},
	} {
		got, err := MeetAddress(c.ip, c.port, c.p, c.cp)
		wantErr(t, err, c.error)
		if got != c.want {
			t.Fatalf("%s: %q", c.ip, got)
		}
	}
}
