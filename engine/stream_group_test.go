package engine

import (
	"math/rand"
	"runtime"
	"slices"
	"strconv"
	"testing"
)

func streamOf(t *testing.T, ids ...StreamID) *Stream {
	t.Helper()
	s := NewStream()
	for _, id := range ids {
		if _, err := s.Add(id, XAddExplicit, [][]byte{[]byte("data"), []byte(id.String())}, DefaultStreamNodeLimits, 0); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func sid(ms uint64) StreamID { return StreamID{ms, 0} }

func checkLag(t *testing.T, s *Stream, g *StreamGroup, read int64, lag int64, lagKnown bool) {
	t.Helper()
	if g.EntriesRead() != read {
		t.Errorf("entries-read %d, want %d", g.EntriesRead(), read)
	}
	l, ok := s.GroupLag(g)
	if ok != lagKnown || ok && l != lag {
		t.Errorf("lag %d (known %v), want %d (known %v)", l, ok, lag, lagKnown)
	}
}

// The lag tests are Redis 7.0.15's (tests/unit/type/stream-cgroups.tcl).

func TestStreamLagEmpty(t *testing.T) {
	s := NewStream()
	g, _ := s.CreateGroup([]byte("g1"), StreamID{}, -1)
	checkLag(t, s, g, -1, 0, true)
	s.Add(sid(1), XAddExplicit, [][]byte{[]byte("data"), []byte("a")}, DefaultStreamNodeLimits, 0)
	s.Delete([]StreamID{sid(1)})
	if s.MaxDeletedID() != sid(1) || s.EntriesAdded() != 1 {
		t.Fatalf("maxdel %v added %d", s.MaxDeletedID(), s.EntriesAdded())
	}
	checkLag(t, s, g, -1, 0, true)
}

func TestStreamLagSanity(t *testing.T) {
	s := streamOf(t, sid(1), sid(2), sid(3), sid(4), sid(5))
	g, _ := s.CreateGroup([]byte("g1"), StreamID{}, -1)
	checkLag(t, s, g, -1, 5, true)
	s.ReadGroupNew(g, []byte("c11"), 1, false, 0, nil, nil)
	checkLag(t, s, g, 1, 4, true)
	s.ReadGroupNew(g, []byte("c12"), 10, false, 0, nil, nil)
	checkLag(t, s, g, 5, 0, true)
	s.Add(sid(6), XAddExplicit, [][]byte{[]byte("data"), []byte("f")}, DefaultStreamNodeLimits, 0)
	checkLag(t, s, g, 5, 1, true)
}

func TestStreamLagWithDeletes(t *testing.T) {
	s := streamOf(t, sid(1), sid(2), sid(3), sid(4), sid(5))
	s.Delete([]StreamID{sid(3)})
	g1, _ := s.CreateGroup([]byte("g1"), StreamID{}, -1)
	g2, _ := s.CreateGroup([]byte("g2"), StreamID{}, -1)
	checkLag(t, s, g1, -1, 0, false)
	for i := 0; i < 3; i++ {
		s.ReadGroupNew(g1, []byte("c11"), 1, false, 0, nil, nil)
		checkLag(t, s, g1, -1, 0, false)
	}
	s.ReadGroupNew(g1, []byte("c11"), 1, false, 0, nil, nil)
	checkLag(t, s, g1, 5, 0, true)
	s.Add(sid(6), XAddExplicit, [][]byte{[]byte("data"), []byte("f")}, DefaultStreamNodeLimits, 0)
	checkLag(t, s, g1, 5, 1, true)
	s.Trim(StreamTrimArgs{Strategy: StreamTrimMinID, MinID: sid(3)})
	checkLag(t, s, g1, 5, 1, true)
	checkLag(t, s, g2, -1, 3, true)
	s.Trim(StreamTrimArgs{Strategy: StreamTrimMinID, MinID: sid(5)})
	checkLag(t, s, g1, 5, 1, true)
	checkLag(t, s, g2, -1, 2, true)
}

func TestStreamEstimateEntriesRead(t *testing.T) {
	s := streamOf(t, sid(10), sid(20), sid(30))
	for _, c := range []struct {
		id   StreamID
		want int64
	}{
		{sid(30), 3},  // the last ID
		{sid(31), -1}, // in the future
		{sid(10), 1},  // the first entry, no tombstones
		{sid(5), 0},   // before the first entry
		{sid(20), -1}, // in between
	} {
		if got := s.EstimateEntriesRead(c.id); got != c.want {
			t.Errorf("EstimateEntriesRead(%v) = %d, want %d", c.id, got, c.want)
		}
	}
	s.Delete([]StreamID{sid(20)})
	if got := s.EstimateEntriesRead(sid(5)); got != -1 {
		t.Errorf("with a tombstone after the first entry: %d", got)
	}
	if !s.RangeHasTombstones(sid(15), MaxStreamID) || s.RangeHasTombstones(sid(21), MaxStreamID) {
		t.Error("RangeHasTombstones")
	}
	s.Delete([]StreamID{sid(10)}) // max-deleted stays 20, the first entry is now 30
	if s.FirstID() != sid(30) {
		t.Errorf("first %v", s.FirstID())
	}
	if got := s.EstimateEntriesRead(sid(5)); got != 2 {
		// max-deleted 20 < first 30: no fragmentation ahead, 3 added - 1 live
		t.Errorf("after the tombstones fell behind the first entry: %d, want 2", got)
	}
}

func TestStreamReadGroupDeliveryAndEffects(t *testing.T) {
	s := streamOf(t, sid(1), sid(2), sid(3))
	g, _ := s.CreateGroup([]byte("g"), StreamID{}, -1)
	if !s.HasNewEntriesFor(g) {
		t.Fatal("HasNewEntriesFor")
	}
	var fx StreamGroupEffects
	var got []StreamID
	n := s.ReadGroupNew(g, []byte("alice"), 2, false, 100, &fx, func(id StreamID, fv [][]byte) {
		if string(fv[0]) != "data" || string(fv[1]) != id.String() {
			t.Errorf("entry %v: %q", id, fv)
		}
		got = append(got, id)
	})
	if n != 2 || !slices.Equal(got, []StreamID{sid(1), sid(2)}) {
		t.Fatalf("delivered %v", got)
	}
	want := []StreamClaimEffect{
		{ID: sid(1), Consumer: "alice", DeliveryTime: 100, DeliveryCount: 1, LastID: sid(1)},
		{ID: sid(2), Consumer: "alice", DeliveryTime: 100, DeliveryCount: 1, LastID: sid(2)},
	}
	if !slices.Equal(fx.Claims, want) || fx.SetID || !fx.ConsumerCreated {
		t.Errorf("effects %+v", fx)
	}
	if g.LastID() != sid(2) || g.EntriesRead() != 2 {
		t.Errorf("last %v read %d", g.LastID(), g.EntriesRead())
	}
	// NOACK: no PEL entries, and the last ID goes out as XGROUP SETID.
	fx = StreamGroupEffects{}
	s.ReadGroupNew(g, []byte("bob"), 0, true, 200, &fx, nil)
	if len(fx.Claims) != 0 || !fx.SetID || !fx.ConsumerCreated || g.PendingCount() != 2 || g.LastID() != sid(3) {
		t.Errorf("NOACK: effects %+v pending %d last %v", fx, g.PendingCount(), g.LastID())
	}
	if s.HasNewEntriesFor(g) {
		t.Error("nothing new left")
	}
	// An existing consumer is refreshed, not created.
	fx = StreamGroupEffects{}
	s.ReadGroupNew(g, []byte("alice"), 0, false, 300, &fx, nil)
	if fx.ConsumerCreated || g.Consumer([]byte("alice")).SeenTime() != 300 {
		t.Error("alice not refreshed")
	}
	// Setting the ID back redelivers: the NACK moves to the new reader
	// with a fresh count.
	g.SetLastID(StreamID{}, -1)
	s.ReadGroupNew(g, []byte("carol"), 1, false, 400, nil, nil)
	var pend []StreamPending
	g.PendingRange(StreamID{}, MaxStreamID, 10, nil, 0, 500, func(p StreamPending) { pend = append(pend, p) })
	if len(pend) != 2 || pend[0] != (StreamPending{sid(1), "carol", 400, 1}) || pend[1].Consumer != "alice" {
		t.Errorf("pending after SETID 0: %+v", pend)
	}
	if a := g.Consumer([]byte("alice")); a.PendingCount() != 1 {
		t.Errorf("alice has %d pending", a.PendingCount())
	}
	// XGROUP SETID forgets the read counter; the next delivery estimates it.
	if g.EntriesRead() != 1 {
		t.Errorf("entries-read after redelivery of the first entry: %d", g.EntriesRead())
	}
}

func TestStreamReadGroupHistory(t *testing.T) {
	s := streamOf(t, sid(1), sid(2), sid(3))
	g, _ := s.CreateGroup([]byte("g"), StreamID{}, -1)
	s.ReadGroupNew(g, []byte("alice"), 0, false, 10, nil, nil)
	s.Delete([]StreamID{sid(2)})
	type item struct {
		id StreamID
		ok bool
	}
	var got []item
	n := s.ReadGroupHistory(g, []byte("alice"), StreamID{}, 0, 50, func(id StreamID, fv [][]byte, ok bool) {
		if ok != (fv != nil) {
			t.Errorf("%v: ok %v with fields %q", id, ok, fv)
		}
		got = append(got, item{id, ok})
	})
	if n != 3 || !slices.Equal(got, []item{{sid(1), true}, {sid(2), false}, {sid(3), true}}) {
		t.Fatalf("history %v", got)
	}
	var pend []StreamPending
	g.PendingRange(StreamID{}, MaxStreamID, 10, nil, 0, 60, func(p StreamPending) { pend = append(pend, p) })
	want := []StreamPending{{sid(1), "alice", 50, 2}, {sid(2), "alice", 10, 1}, {sid(3), "alice", 50, 2}}
	if !slices.Equal(pend, want) {
		t.Errorf("pending %+v", pend)
	}
	got = nil
	s.ReadGroupHistory(g, []byte("alice"), sid(1), 1, 70, func(id StreamID, _ [][]byte, ok bool) { got = append(got, item{id, ok}) })
	if !slices.Equal(got, []item{{sid(2), false}}) {
		t.Errorf("history after 1-0, count 1: %v", got)
	}
	// Another consumer has no history, but is created.
	if n := s.ReadGroupHistory(g, []byte("bob"), StreamID{}, 0, 80, nil); n != 0 || g.Consumer([]byte("bob")) == nil {
		t.Error("bob")
	}
}

func TestStreamAckPendingDelConsumer(t *testing.T) {
	s := streamOf(t, sid(1), sid(2), sid(3), sid(4))
	g, _ := s.CreateGroup([]byte("g"), StreamID{}, -1)
	s.ReadGroupNew(g, []byte("bob"), 2, false, 1000, nil, nil)
	s.ReadGroupNew(g, []byte("alice"), 2, false, 2000, nil, nil)
	if first, last, ok := g.PendingBounds(); !ok || first != sid(1) || last != sid(4) || g.PendingCount() != 4 {
		t.Fatalf("bounds %v %v %v", first, last, ok)
	}
	var names []string
	g.Consumers(func(c *StreamConsumer) bool { names = append(names, c.Name()); return true })
	if !slices.Equal(names, []string{"alice", "bob"}) {
		t.Errorf("consumers %v", names)
	}
	collect := func(start, end StreamID, count int, c *StreamConsumer, minIdle, now int64) []StreamID {
		var ids []StreamID
		g.PendingRange(start, end, count, c, minIdle, now, func(p StreamPending) { ids = append(ids, p.ID) })
		return ids
	}
	if got := collect(StreamID{}, MaxStreamID, 10, nil, 1500, 3000); !slices.Equal(got, []StreamID{sid(1), sid(2)}) {
		t.Errorf("idle >= 1500: %v", got)
	}
	if got := collect(sid(2), sid(3), 10, nil, 0, 3000); !slices.Equal(got, []StreamID{sid(2), sid(3)}) {
		t.Errorf("2..3: %v", got)
	}
	if got := collect(StreamID{}, MaxStreamID, 0, nil, 0, 3000); got != nil {
		t.Errorf("count 0: %v", got)
	}
	alice := g.Consumer([]byte("alice"))
	if got := collect(StreamID{}, MaxStreamID, 1, alice, 0, 3000); !slices.Equal(got, []StreamID{sid(3)}) {
		t.Errorf("alice, count 1: %v", got)
	}
	if n := g.Ack([]StreamID{sid(3), sid(3), sid(9)}); n != 1 || alice.PendingCount() != 1 || g.PendingCount() != 3 {
		t.Errorf("ack: %d, alice %d, group %d", n, alice.PendingCount(), g.PendingCount())
	}
	if n, ok := g.DeleteConsumer([]byte("bob")); !ok || n != 2 || g.PendingCount() != 1 || g.ConsumerCount() != 1 {
		t.Errorf("delconsumer: %d %v, pending %d", n, ok, g.PendingCount())
	}
	if _, ok := g.DeleteConsumer([]byte("bob")); ok {
		t.Error("bob deleted twice")
	}
	if g.CreateConsumer([]byte("alice"), 0) || !g.CreateConsumer([]byte("zed"), 5) {
		t.Error("CreateConsumer")
	}
	if _, err := s.CreateGroup([]byte("g"), StreamID{}, -1); err != ErrBusyGroup {
		t.Errorf("BUSYGROUP: %v", err)
	}
	if !s.DestroyGroup([]byte("g")) || s.DestroyGroup([]byte("g")) || s.GroupCount() != 0 || s.groupHeld != 0 {
		t.Errorf("destroy: groups %d held %d", s.GroupCount(), s.groupHeld)
	}
}

func TestStreamClaim(t *testing.T) {
	s := streamOf(t, sid(1), sid(2), sid(3), sid(4))
	g, _ := s.CreateGroup([]byte("g"), StreamID{}, -1)
	s.ReadGroupNew(g, []byte("alice"), 3, false, 1000, nil, nil) // 1, 2, 3 pending for alice
	var fx StreamGroupEffects
	var got []StreamID
	claim := func(ids []StreamID, a StreamClaimArgs, now int64) int {
		got, fx = nil, StreamGroupEffects{}
		return s.Claim(g, []byte("bob"), ids, a, now, &fx, func(id StreamID, fv [][]byte) {
			if a.JustID != (fv == nil) {
				t.Errorf("claim %v: fields %q with JustID %v", id, fv, a.JustID)
			}
			got = append(got, id)
		})
	}
	noOpts := StreamClaimArgs{DeliveryTime: -1, RetryCount: -1}
	// Too recent for min-idle 500 at 1400: nothing moves, bob not created.
	a := noOpts
	a.MinIdle = 500
	if n := claim([]StreamID{sid(1)}, a, 1400); n != 0 || g.Consumer([]byte("bob")) != nil || len(fx.Claims) != 0 {
		t.Fatalf("early claim: %d", n)
	}
	if n := claim([]StreamID{sid(1), sid(4)}, a, 1500); n != 1 || !slices.Equal(got, []StreamID{sid(1)}) {
		t.Fatalf("claim at 1500: %d %v", n, got)
	}
	if !fx.ConsumerCreated || len(fx.Claims) != 1 || fx.Claims[0] != (StreamClaimEffect{sid(1), "bob", 1500, 2, sid(3)}) {
		t.Errorf("effects %+v", fx)
	}
	// IDLE/TIME: a time in the future or before 0 becomes now.
	a = noOpts
	a.DeliveryTime = 1200
	a.RetryCount = 7
	a.JustID = true
	claim([]StreamID{sid(2)}, a, 1600)
	p := pendingOf(g, sid(2))
	if p.Consumer != "bob" || p.DeliveryTime != 1200 || p.DeliveryCount != 7 {
		t.Errorf("TIME 1200 RETRYCOUNT 7: %+v", p)
	}
	a.DeliveryTime, a.RetryCount = 99999, -1
	claim([]StreamID{sid(2)}, a, 1700)
	if p := pendingOf(g, sid(2)); p.DeliveryTime != 1700 || p.DeliveryCount != 7 {
		t.Errorf("future TIME, JUSTID: %+v", p)
	}
	// FORCE makes a NACK for an entry that exists; the count starts at 1
	// and goes up as for any claim.
	a = noOpts
	a.Force = true
	if n := claim([]StreamID{sid(4), sid(9)}, a, 1800); n != 1 || pendingOf(g, sid(4)).DeliveryCount != 2 {
		t.Errorf("FORCE: %d %+v", n, pendingOf(g, sid(4)))
	}
	// A deleted entry leaves the PEL and goes out as a claim with its old
	// NACK; LASTID then rides on that claim.
	s.Delete([]StreamID{sid(3)})
	a = noOpts
	a.LastID = sid(10)
	if n := claim([]StreamID{sid(3)}, a, 1900); n != 0 || pendingOf(g, sid(3)).Consumer != "" ||
		len(fx.Claims) != 1 || fx.Claims[0] != (StreamClaimEffect{sid(3), "alice", 1000, 1, sid(10)}) || fx.SetID {
		t.Errorf("deleted: %d %+v", n, fx)
	}
	if g.LastID() != sid(10) || g.Consumer([]byte("alice")).PendingCount() != 0 {
		t.Error("LASTID or alice's PEL")
	}
	// LASTID with nothing claimed goes out as XGROUP SETID.
	a.LastID = sid(11)
	if claim([]StreamID{sid(9)}, a, 2000); !fx.SetID || len(fx.Claims) != 0 {
		t.Errorf("LASTID alone: %+v", fx)
	}
}

func pendingOf(g *StreamGroup, id StreamID) StreamPending {
	var out StreamPending
	g.PendingRange(id, id, 1, nil, 0, 0, func(p StreamPending) { out = p })
	return out
}

func TestStreamAutoClaim(t *testing.T) {
	var ids []StreamID
	for i := uint64(1); i <= 30; i++ {
		ids = append(ids, sid(i))
	}
	s := streamOf(t, ids...)
	g, _ := s.CreateGroup([]byte("g"), StreamID{}, -1)
	s.ReadGroupNew(g, []byte("alice"), 0, false, 1000, nil, nil)
	s.Delete([]StreamID{sid(2), sid(3)})
	// Entries 5..30 delivered again later: too recent.
	s.ReadGroupHistory(g, []byte("alice"), sid(4), 0, 5000, nil)
	var fx StreamGroupEffects
	var claimed []StreamID
	next, deleted, n := s.AutoClaim(g, []byte("bob"), 1000, StreamID{}, 3, false, 5100, &fx, func(id StreamID, fv [][]byte) {
		claimed = append(claimed, id)
	})
	// 1 claimed, 2 and 3 found deleted: count 3 used up; the cursor is 4.
	if n != 1 || !slices.Equal(claimed, []StreamID{sid(1)}) || !slices.Equal(deleted, []StreamID{sid(2), sid(3)}) || next != sid(4) {
		t.Fatalf("first call: n %d claimed %v deleted %v next %v", n, claimed, deleted, next)
	}
	if len(fx.Claims) != 3 || fx.Claims[0] != (StreamClaimEffect{sid(1), "bob", 5100, 2, sid(30)}) ||
		fx.Claims[1] != (StreamClaimEffect{sid(2), "alice", 1000, 1, sid(30)}) || fx.Claims[2].ID != sid(3) {
		t.Errorf("effects %+v", fx.Claims)
	}
	// From 4: 4 is claimable, the rest too recent; 10 attempts for count
	// 1 end after 4 and nine more; the cursor is the next one after.
	claimed = nil
	next, deleted, n = s.AutoClaim(g, []byte("bob"), 1000, sid(4), 2, true, 5100, nil, func(id StreamID, fv [][]byte) {
		claimed = append(claimed, id)
	})
	if n != 1 || !slices.Equal(claimed, []StreamID{sid(4)}) || len(deleted) != 0 || next != sid(24) {
		t.Errorf("second call: n %d claimed %v deleted %v next %v", n, claimed, deleted, next)
	}
	if p := pendingOf(g, sid(4)); p.DeliveryCount != 1 || p.Consumer != "bob" {
		t.Errorf("JUSTID changed the count: %+v", p)
	}
	// To the end: the cursor is 0-0.
	next, _, n = s.AutoClaim(g, []byte("carol"), 0, sid(24), 100, true, 6000, nil, nil)
	if n != 7 || next != (StreamID{}) {
		t.Errorf("last call: n %d next %v", n, next)
	}
}

// TestStreamGroupMemoryAccounting runs random group operations and checks
// the running count of what the groups hold against a recount.
func TestStreamGroupMemoryAccounting(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	s := NewStream()
	var ids []StreamID
	for i := 1; i <= 2000; i++ {
		id, _ := s.Add(StreamID{}, XAddAuto, [][]byte{[]byte("f"), []byte(strconv.Itoa(i))}, DefaultStreamNodeLimits, int64(i))
		ids = append(ids, id)
	}
	names := [][]byte{[]byte("a"), []byte("bb"), []byte("ccc")}
	for step := 0; step < 5000; step++ {
		g := s.Group(names[r.Intn(3)])
		c := names[r.Intn(3)]
		switch op := r.Intn(10); {
		case g == nil:
			s.CreateGroup(names[r.Intn(3)], ids[r.Intn(len(ids))], -1)
		case op < 3:
			s.ReadGroupNew(g, c, r.Intn(50), r.Intn(5) == 0, int64(step), nil, nil)
		case op < 5:
			var acks []StreamID
			for k := r.Intn(40); k > 0; k-- {
				acks = append(acks, ids[r.Intn(len(ids))])
			}
			g.Ack(acks)
		case op == 5:
			g.SetLastID(ids[r.Intn(len(ids))], -1)
		case op == 6:
			s.Claim(g, c, ids[r.Intn(100):][:r.Intn(30)], StreamClaimArgs{DeliveryTime: -1, RetryCount: -1, Force: r.Intn(2) == 0}, int64(step), nil, nil)
		case op == 7:
			s.AutoClaim(g, c, 0, ids[r.Intn(len(ids))], 1+r.Intn(20), false, int64(step), nil, nil)
		case op == 8:
			g.DeleteConsumer(c)
		default:
			if r.Intn(20) == 0 {
				s.DestroyGroup([]byte(g.Name()))
			}
		}
		if want := recountGroupBytes(t, s); want != s.groupHeld {
			t.Fatalf("step %d: groupHeld %d, recount %d", step, s.groupHeld, want)
		}
	}
}

func recountGroupBytes(t *testing.T, s *Stream) int64 {
	n := allocSize(cap(s.groups) * 8)
	for _, g := range s.groups {
		n += allocSize(streamGroupSize) + allocSize(len(g.name)) + recountPEL(t, &g.pel) + allocSize(cap(g.consumers)*8)
		total := 0
		for _, c := range g.consumers {
			n += allocSize(streamConsumerSize) + allocSize(len(c.name)) + recountPEL(t, &c.pel)
			total += c.pel.n
			c.pel.each(StreamID{}, func(id StreamID, _ *struct{}) bool {
				if nk := g.pel.get(id); nk == nil || nk.consumer != c {
					t.Fatalf("consumer %s has %v, the group's PEL disagrees", c.name, id)
				}
				return true
			})
		}
		if total != g.pel.n {
			t.Fatalf("consumers hold %d pending, the group %d", total, g.pel.n)
		}
	}
	return n
}

func recountPEL[V any](t *testing.T, x *pelIndex[V]) int64 {
	n := x.chunksBytes()
	count := 0
	var prev StreamID
	for i := range x.chunks {
		c := &x.chunks[i]
		if len(c.ids) == 0 || len(c.ids) != len(c.vals) || len(c.ids) > pelChunkMax {
			t.Fatalf("chunk %d of %d: %d ids %d vals", i, len(x.chunks), len(c.ids), len(c.vals))
		}
		for k, id := range c.ids {
			if (i > 0 || k > 0) && !prev.Less(id) {
				t.Fatalf("PEL out of order: %v after %v", id, prev)
			}
			prev = id
		}
		count += len(c.ids)
		n += c.bytes()
	}
	if count != x.n {
		t.Fatalf("PEL holds %d, says %d", count, x.n)
	}
	return n
}

// TestPELIndex checks the chunked index against a sorted slice.
func TestPELIndex(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	var x pelIndex[int]
	var model []StreamID
	vals := map[StreamID]int{}
	for step := 0; step < 100000; step++ {
		var id StreamID
		switch r.Intn(3) {
		case 0: // mostly appends, as deliveries are
			id = StreamID{uint64(step), 0}
		default:
			id = StreamID{uint64(r.Intn(step + 1)), uint64(r.Intn(2))}
		}
		i, found := slices.BinarySearchFunc(model, id, func(a, b StreamID) int { return a.Compare(b) })
		if r.Intn(5) < 3 {
			v, ins := x.insert(id, step)
			if ins == found || *v != map[bool]int{true: vals[id], false: step}[found] {
				t.Fatalf("insert %v: inserted %v found %v", id, ins, found)
			}
			if !found {
				model = slices.Insert(model, i, id)
				vals[id] = step
			}
		} else {
			if x.remove(id) != found {
				t.Fatalf("remove %v", id)
			}
			if found {
				model = slices.Delete(model, i, i+1)
				delete(vals, id)
			}
		}
		if step%1000 == 0 || step < 500 {
			recountPEL(t, &x)
			var all []StreamID
			x.each(StreamID{}, func(id StreamID, v *int) bool {
				if *v != vals[id] {
					t.Fatalf("%v = %d, want %d", id, *v, vals[id])
				}
				all = append(all, id)
				return true
			})
			if !slices.Equal(all, model) {
				t.Fatalf("step %d: index %d ids, model %d", step, len(all), len(model))
			}
			from := StreamID{uint64(r.Intn(step + 1)), 0}
			j, _ := slices.BinarySearchFunc(model, from, func(a, b StreamID) int { return a.Compare(b) })
			got, _, ok := x.seek(from)
			if ok != (j < len(model)) || ok && got != model[j] {
				t.Fatalf("seek %v = %v %v", from, got, ok)
			}
		}
	}
	if len(x.chunks) > len(model)/16+2 {
		t.Errorf("%d chunks for %d ids", len(x.chunks), len(model))
	}
}

// TestStreamMemoryUsageEstimate checks MemoryUsage against the heap that
// streams with a consumer group really take.
func TestStreamMemoryUsageEstimate(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 50 streams of 20,000 entries")
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	streams := make([]*Stream, 50)
	val := make([]byte, 0, 20)
	for i := range streams {
		s := NewStream()
		for j := 0; j < 20_000; j++ {
			val = strconv.AppendInt(val[:0], int64(j), 10)
			s.Add(StreamID{}, XAddAuto, [][]byte{[]byte("sensor"), val, []byte("reading"), []byte("some text")}, DefaultStreamNodeLimits, 1732123456789+int64(j/7))
		}
		g, _ := s.CreateGroup([]byte("workers"), StreamID{}, -1)
		for _, c := range []string{"w1", "w2", "w3"} {
			s.ReadGroupNew(g, []byte(c), 2000, false, 1, nil, nil)
		}
		streams[i] = s
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	var estimate int64
	for _, s := range streams {
		estimate += s.MemoryUsage()
	}
	real := int64(after.HeapAlloc - before.HeapAlloc)
	t.Logf("estimate %d bytes, heap %d bytes", estimate, real)
	if estimate < real*9/10 || estimate > real*11/10 {
		t.Errorf("MemoryUsage sums to %d, the heap grew by %d", estimate, real)
	}
	runtime.KeepAlive(streams)
}

// TestStreamEntriesReadAfterOldTombstone: a deletion before the entries a
// group reads next does not stop the read counter from counting.
func TestStreamEntriesReadAfterOldTombstone(t *testing.T) {
	s := streamOf(t, sid(1), sid(2), sid(3), sid(4), sid(5))
	s.Delete([]StreamID{sid(2)})
	g, _ := s.CreateGroup([]byte("g"), sid(2), 2)
	s.ReadGroupNew(g, []byte("c"), 1, false, 0, nil, nil)
	checkLag(t, s, g, 3, 2, true)
}
