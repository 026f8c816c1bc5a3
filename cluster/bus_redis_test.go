package cluster

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBusWithRedis has a Bus join two redis-server nodes as a third
// master, and then agree with the survivor that a killed one failed.
func TestBusWithRedis(t *testing.T) {
	needRedis(t)
	ctx := context.Background()
	r1, r2 := startRedis(t), startRedis(t)
	for _, r := range []*redisNode{r1, r2} {
		if err := r.c.ConfigSet(ctx, "cluster-node-timeout", "1000").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := r1.c.ConfigSet(ctx, "cluster-announce-hostname", "redis-1.test").Err(); err != nil {
		t.Fatal(err)
	}
	r1ID, r2ID := r1.c.ClusterMyID(ctx).Val(), r2.c.ClusterMyID(ctx).Val()
	if err := r1.c.Do(ctx, "cluster", "addslotsrange", 0, 5000).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r2.c.Do(ctx, "cluster", "addslotsrange", 5001, 10000).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r1.c.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(r2.port)).Err(); err != nil {
		t.Fatal(err)
	}

	bus, busPort := startBus(t, "limitkv-bus.test")
	busID := bus.ID()
	view(t, bus, func(s *State) bool {
		for j := 10001; j < Slots; j++ {
			s.SetOwner(uint16(j), s.Myself)
		}
		return true
	})
	if err := bus.Meet("127.0.0.1", uint16(r1.port), 0); err != nil {
		t.Fatal(err)
	}

	var last string
	waitFor(t, 60*time.Second, "the three masters to agree", func() bool {
		for _, r := range []*redisNode{r1, r2} {
			info := r.c.ClusterInfo(ctx).Val()
			if !strings.Contains(info, "cluster_state:ok\r") || !strings.Contains(info, "cluster_known_nodes:3\r") {
				last = fmt.Sprintf("%d: %s", r.port, info)
				return false
			}
			line := nodeLine(r.c.ClusterNodes(ctx).Val(), busID)
			f := strings.Fields(line)
			want := fmt.Sprintf("127.0.0.1:%d@%d,limitkv-bus.test", busPort, busPort+BusPortOffset)
			if len(f) != 9 || f[1] != want || f[2] != "master" || f[7] != "connected" || f[8] != "10001-16383" {
				last = fmt.Sprintf("%d lists the bus as %q", r.port, line)
				return false
			}
		}
		return view(t, bus, func(s *State) bool {
			last = s.ClusterNodes(false)
			return connectedMaster(s, r1ID, r1.port, "redis-1.test") && connectedMaster(s, r2ID, r2.port, "") &&
				slices.Equal(s.Ranges(r1ID), []SlotRange{{0, 5000}}) &&
				slices.Equal(s.Ranges(r2ID), []SlotRange{{5001, 10000}}) &&
				len(s.Nodes()) == 3
		})
	})
	t.Logf("the bus's view:\n%s", last)

	r2.kill()
	flags := func() uint16 {
		var f uint16
		view(t, bus, func(s *State) bool { f = s.Node(r2ID).Flags; return true })
		return f
	}
	waitFor(t, 60*time.Second, "the bus to suspect the killed node", func() bool {
		return flags()&(NodePFail|NodeFail) != 0
	})
	waitFor(t, 60*time.Second, "the bus to mark the killed node FAIL", func() bool {
		return flags()&NodeFail != 0
	})
	waitFor(t, 60*time.Second, "the surviving redis-server to mark the killed node FAIL", func() bool {
		f := strings.Fields(nodeLine(r1.c.ClusterNodes(ctx).Val(), r2ID))
		return len(f) > 2 && slices.Contains(strings.Split(f[2], ","), "fail")
	})
}
