package cluster

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAdminWithRedis checks the operator's commands that change slots
// and epochs, FORGET and PUBLISH, as a redis-server 7.0 node sees them.
func TestAdminWithRedis(t *testing.T) {
	needRedis(t)
	ctx := context.Background()
	r := startRedis(t)
	if err := r.c.ConfigSet(ctx, "cluster-node-timeout", "1000").Err(); err != nil {
		t.Fatal(err)
	}
	rID := r.c.ClusterMyID(ctx).Val()
	if err := r.c.Do(ctx, "cluster", "addslotsrange", 1000, 1999).Err(); err != nil {
		t.Fatal(err)
	}
	bus := startHooked(t, nil)
	busID := bus.ID()
	if err := bus.Meet("127.0.0.1", uint16(r.port), 0); err != nil {
		t.Fatal(err)
	}
	busLine := func() []string { return strings.Fields(nodeLine(r.c.ClusterNodes(ctx).Val(), busID)) }
	waitFor(t, 20*time.Second, "redis-server to know the bus", func() bool {
		f := busLine()
		return len(f) >= 8 && f[2] == "master" && f[7] == "connected"
	})

	// ADDSLOTS is announced by the next PINGs.
	if err := bus.AddSlots([]SlotRange{{0, 99}, {200, 200}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "redis-server to see the bus's slots", func() bool {
		f := busLine()
		return len(f) == 10 && f[8] == "0-99" && f[9] == "200"
	})

	// Two masters that met at config epoch 0 resolve their collision by
	// a bump of one of them; the epoch SETSLOT takes below must be later
	// than that, so the bus first learns the cluster's current epoch.
	waitFor(t, 20*time.Second, "the masters' config epochs to settle", func() bool {
		var cur, mine uint64
		view(t, bus.Bus, func(s *State) bool { cur, mine = s.CurrentEpoch, s.Me().ConfigEpoch; return true })
		info := r.c.ClusterInfo(ctx).Val()
		f := strings.Fields(nodeLine(r.c.ClusterNodes(ctx).Val(), rID))
		return len(f) > 6 && f[6] != strconv.FormatUint(mine, 10) &&
			strings.Contains(info, "cluster_current_epoch:"+strconv.FormatUint(cur, 10)+"\r\n")
	})

	// SETSLOT NODE to myself of a slot being imported takes a new epoch,
	// which wins the slot from its owner.
	if err := bus.SetSlot(1000, []string{"importing", rID}, func(uint16) int { return 0 }); err != nil {
		t.Fatal(err)
	}
	if err := bus.SetSlot(1000, []string{"node", busID}, func(uint16) int { return 0 }); err != nil {
		t.Fatal(err)
	}
	var epoch uint64
	view(t, bus.Bus, func(s *State) bool { epoch = s.Me().ConfigEpoch; return true })
	if epoch == 0 {
		t.Fatal("SETSLOT NODE on an importing slot bumped no epoch")
	}
	waitFor(t, 20*time.Second, "redis-server to give the slot up", func() bool {
		f := busLine()
		return len(f) == 11 && f[6] == strconv.FormatUint(epoch, 10) && f[10] == "1000" &&
			!strings.Contains(nodeLine(r.c.ClusterNodes(ctx).Val(), rID), " 1000-")
	})

	// PUBLISH both ways.
	r.c.Publish(ctx, "from-redis", "hello")
	if got := recv(t, bus.publish, "redis-server's PUBLISH"); got != (published{"from-redis", "hello", false}) {
		t.Fatalf("OnPublish got %+v", got)
	}
	sub := r.c.Subscribe(ctx, "from-bus")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	bus.Publish([]byte("from-bus"), []byte("hi"), false)
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil || msg.Channel != "from-bus" || msg.Payload != "hi" {
		t.Fatalf("the subscriber got %v, %v", msg, err)
	}

	// FORGET: redis-server's PINGs do not bring the node back.
	if err := bus.Forget(rID); err != nil {
		t.Fatal(err)
	}
	var before int64
	view(t, bus.Bus, func(s *State) bool { before = s.StatsReceived[TypePing]; return true })
	waitFor(t, 20*time.Second, "more PINGs from redis-server", func() bool {
		return view(t, bus.Bus, func(s *State) bool { return s.StatsReceived[TypePing] > before+3 })
	})
	if view(t, bus.Bus, func(s *State) bool { return s.Node(rID) != nil }) {
		t.Fatal("a forgotten node is back")
	}
	// And redis-server forgets the bus when told.
	if err := r.c.ClusterForget(ctx, busID).Err(); err != nil {
		t.Fatal(err)
	}
	if line := nodeLine(r.c.ClusterNodes(ctx).Val(), busID); line != "" {
		t.Fatalf("redis-server still lists the bus: %s", line)
	}
}
