package cluster

import "testing"

// routingFixture is three masters, each with a third of the slots, and
// myself the first; each case changes what it needs.
func routingFixture(t *testing.T) *State {
	t.Helper()
	s := NewState(&Node{ID: nodeName('a'), IP: "127.0.0.1", Port: 7000}, 15000)
	s.AddNode(&Node{ID: nodeName('b'), IP: "127.0.0.1", Port: 7001, Flags: NodeMaster})
	s.AddNode(&Node{ID: nodeName('c'), IP: "127.0.0.1", Port: 7002, Flags: NodeMaster, PPort: 6002})
	for j := range Slots {
		s.SetOwner(uint16(j), nodeName('a'+byte(j*3/Slots)))
	}
	s.Status = StateOK
	return s
}

func nodeName(c byte) string {
	b := make([]byte, NameLen)
	for i := range b {
		b[i] = c
	}
	return string(b)
}

func TestRoute(t *testing.T) {
	// Keys and their slots, as CLUSTER KEYSLOT gives them: "a" and "{a}x"
	// 15495 (node c), "b" 3300 (a, myself), "foo" 12182 (c), "k" 7629 (b).
	const (
		slotB   = 3300
		slotFoo = 12182
		slotK   = 7629
	)
	for _, tc := range []struct {
		name  string
		setup func(s *State)
		keys  []string
		here  map[string]bool // keys present on myself
		q     Query
		want  string
	}{
		{name: "no keys", want: ""},
		{name: "mine", keys: []string{"b"}, want: ""},
		{name: "moved", keys: []string{"foo"}, want: "MOVED 12182 127.0.0.1:7002"},
		{name: "moved, plaintext port", keys: []string{"k"}, want: "MOVED 7629 127.0.0.1:7001"},
		{name: "crossslot", keys: []string{"a", "b"}, want: "CROSSSLOT Keys in request don't hash to the same slot"},
		{name: "same slot by hash tag", keys: []string{"a", "{a}x"}, want: "MOVED 15495 127.0.0.1:7002"},
		{name: "unbound", keys: []string{"b"}, setup: func(s *State) { s.SetOwner(slotB, "") },
			want: "CLUSTERDOWN Hash slot not served"},
		{name: "down", keys: []string{"b"}, setup: func(s *State) { s.Status = StateFail },
			want: "CLUSTERDOWN The cluster is down"},
		{name: "down, reads allowed, write", keys: []string{"b"}, setup: func(s *State) { s.Status = StateFail },
			q: Query{AllowReadsWhenDown: true, Write: true}, want: "CLUSTERDOWN The cluster is down and only accepts read commands"},
		{name: "down, reads allowed, read", keys: []string{"b"}, setup: func(s *State) { s.Status = StateFail },
			q: Query{AllowReadsWhenDown: true}, want: ""},
		{name: "migrating, key here", keys: []string{"b"}, here: map[string]bool{"b": true},
			setup: func(s *State) { s.Migrating = map[uint16]string{slotB: nodeName('b')} }, want: ""},
		{name: "migrating, key gone", keys: []string{"b"},
			setup: func(s *State) { s.Migrating = map[uint16]string{slotB: nodeName('b')} }, want: "ASK 3300 127.0.0.1:7001"},
		{name: "migrating, some keys gone", keys: []string{"{b}1", "{b}2"}, here: map[string]bool{"{b}1": true},
			setup: func(s *State) { s.Migrating = map[uint16]string{slotB: nodeName('b')} },
			want:  "TRYAGAIN Multiple keys request during rehashing of slot"},
		{name: "migrating, MIGRATE runs", keys: []string{"b"}, q: Query{Migrate: true},
			setup: func(s *State) { s.Migrating = map[uint16]string{slotB: nodeName('b')} }, want: ""},
		{name: "importing without ASKING", keys: []string{"foo"},
			setup: func(s *State) { s.Importing = map[uint16]string{slotFoo: nodeName('c')} }, want: "MOVED 12182 127.0.0.1:7002"},
		{name: "importing with ASKING", keys: []string{"foo"}, q: Query{Asking: true},
			setup: func(s *State) { s.Importing = map[uint16]string{slotFoo: nodeName('c')} }, want: ""},
		{name: "importing, multi-key, some missing", keys: []string{"{foo}1", "{foo}2"}, q: Query{Asking: true},
			here:  map[string]bool{"{foo}1": true},
			setup: func(s *State) { s.Importing = map[uint16]string{slotFoo: nodeName('c')} },
			want:  "TRYAGAIN Multiple keys request during rehashing of slot"},
		{name: "replica, READONLY read", keys: []string{"k"}, q: Query{ReadOnly: true},
			setup: func(s *State) { becomeReplica(s, nodeName('b')) }, want: ""},
		{name: "replica, READONLY write", keys: []string{"k"}, q: Query{ReadOnly: true, Write: true},
			setup: func(s *State) { becomeReplica(s, nodeName('b')) }, want: "MOVED 7629 127.0.0.1:7001"},
		{name: "replica, no READONLY", keys: []string{"k"},
			setup: func(s *State) { becomeReplica(s, nodeName('b')) }, want: "MOVED 7629 127.0.0.1:7001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := routingFixture(t)
			if tc.setup != nil {
				tc.setup(s)
			}
			r := NewRouting(s)
			q := tc.q
			q.Exists = func(k []byte) bool { return tc.here[string(k)] }
			for _, k := range tc.keys {
				q.Key([]byte(k))
			}
			d, slot, n := r.Route(&q)
			if got := d.Error(slot, n, false); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// becomeReplica makes myself a replica of master, its slots given up.
func becomeReplica(s *State, master string) {
	me := s.Me()
	for j := range Slots {
		if s.Owner[j] == me.ID {
			s.SetOwner(uint16(j), master)
		}
	}
	me.Flags = me.Flags&^NodeMaster | NodeSlave
	me.Master = master
}

func TestRoutePlaintextPort(t *testing.T) {
	s := routingFixture(t)
	q := Query{}
	q.Key([]byte("foo"))
	d, slot, n := NewRouting(s).Route(&q)
	if got := d.Error(slot, n, true); got != "MOVED 12182 127.0.0.1:6002" {
		t.Errorf("got %q", got)
	}
}

// TestRoutingUnsettled: a snapshot is unsettled while a slot myself
// serves migrates away or a slot imports here; a migration recorded for
// a slot another node now serves does not count.
func TestRoutingUnsettled(t *testing.T) {
	const mine, theirs = 3300, 12182 // served by myself, by node c
	for _, tc := range []struct {
		name      string
		migrating map[uint16]string
		importing map[uint16]string
		want      bool
	}{
		{name: "stable"},
		{name: "migrating from myself", migrating: map[uint16]string{mine: nodeName('b')}, want: true},
		{name: "importing", importing: map[uint16]string{theirs: nodeName('c')}, want: true},
		{name: "migrating, slot served by another", migrating: map[uint16]string{theirs: nodeName('b')}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := routingFixture(t)
			s.Migrating, s.Importing = tc.migrating, tc.importing
			if got := NewRouting(s).Unsettled(); got != tc.want {
				t.Errorf("Unsettled() = %v, want %v", got, tc.want)
			}
			// A snapshot refilled in place forgets what it was.
			r := NewRouting(s)
			s.Migrating, s.Importing = nil, nil
			r.fill(s, map[string]uint16{})
			if r.Unsettled() {
				t.Error("Unsettled() after the migrations ended")
			}
		})
	}
}

func TestRoutingEqual(t *testing.T) {
	s := routingFixture(t)
	a, b := NewRouting(s), NewRouting(s)
	if !a.Equal(b) {
		t.Fatal("snapshots of one state differ")
	}
	s.Migrating = map[uint16]string{1: nodeName('b')}
	if c := NewRouting(s); a.Equal(c) {
		t.Fatal("an open slot left the snapshot equal")
	}
	s.Migrating = nil
	s.Status = StateFail
	if c := NewRouting(s); a.Equal(c) {
		t.Fatal("the cluster's status left the snapshot equal")
	}
	// fill reuses a snapshot's room without keeping what it held.
	c := NewRouting(s)
	c.fill(routingFixture(t), map[string]uint16{})
	if !c.Equal(a) {
		t.Fatal("a refilled snapshot differs from a new one")
	}
}

// The bus renews the snapshot after every event it handles: its cost is
// paid on every ping.
func BenchmarkRoutingFill(b *testing.B) {
	s := NewState(&Node{ID: nodeName('a'), IP: "127.0.0.1", Port: 7000}, 15000)
	for i := range 6 {
		s.AddNode(&Node{ID: nodeName('b' + byte(i)), IP: "127.0.0.1", Port: uint16(7001 + i), Flags: NodeMaster})
	}
	for j := range Slots {
		s.SetOwner(uint16(j), nodeName('a'+byte(j*7/Slots)))
	}
	r, index := new(Routing), map[string]uint16{}
	b.ReportAllocs()
	for b.Loop() {
		r.fill(s, index)
	}
}
