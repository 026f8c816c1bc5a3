package cluster

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMeetFromRedis lets a real redis-server meet a node played by the
// test on the bus: what redis-server sends must decode, and what the
// test answers with Append must be understood, for redis-server to list
// the node under the name and hostname the test's PONGs carry.
func TestMeetFromRedis(t *testing.T) {
	a := startRedis(t)
	b := startRedis(t)
	ctx := context.Background()
	aID := a.c.ClusterMyID(ctx).Val()
	bID := b.c.ClusterMyID(ctx).Val()
	// A short node timeout makes redis-server ping every node at least
	// every half second, and so gossip about B sooner.
	for _, r := range []*redisNode{a, b} {
		if err := r.c.ConfigSet(ctx, "cluster-node-timeout", "1000").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.c.ConfigSet(ctx, "cluster-announce-hostname", "redis-a.test").Err(); err != nil {
		t.Fatal(err)
	}
	// A knows B first, so that it has another node to gossip about.
	if err := a.c.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(b.port)).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "A to complete its handshake with B", func() bool {
		line := nodeLine(a.c.ClusterNodes(ctx).Val(), bID)
		return line != "" && !strings.Contains(line, "handshake") && strings.Contains(line, " connected")
	})

	port := freePortPair(t)
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port+BusPortOffset))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	const ourID = "0123456789abcdef0123456789abcdef01234567"
	const ourHost = "limitkv-test.local"
	pong := func() []byte {
		m := &Msg{
			Type: TypePong, Port: uint16(port), CPort: uint16(port + BusPortOffset),
			Sender: NameOf(ourID), Flags: NodeMaster, State: StateOK,
			Gossip: []Gossip{{Name: NameOf(aID), IP: IPOf("127.0.0.1"), Port: uint16(a.port),
				CPort: uint16(a.port + BusPortOffset), Flags: NodeMaster}},
			Exts: AppendHostnameExt(nil, ourHost),
		}
		return m.Append(nil)
	}()

	type seen struct {
		first     *Msg
		gossipB   bool
		gossipBad string
		err       error
	}
	var mu sync.Mutex
	var s seen
	conns := make(chan net.Conn, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := ln.Accept()
		if err != nil {
			mu.Lock()
			s.err = err
			mu.Unlock()
			return
		}
		conns <- conn
		for {
			m, err := ReadMsg(conn, 1<<20)
			mu.Lock()
			if err != nil {
				if s.err == nil && s.first == nil {
					s.err = err
				}
				mu.Unlock()
				return
			}
			if s.first == nil {
				s.first = m
			}
			for _, g := range m.Gossip {
				switch g.Name.String() {
				case bID:
					if g.IP.String() == "127.0.0.1" && int(g.Port) == b.port && int(g.CPort) == b.port+BusPortOffset {
						s.gossipB = true
					} else {
						s.gossipBad = fmt.Sprintf("gossip about B: %+v", g)
					}
				case ourID:
				default:
					s.gossipBad = fmt.Sprintf("gossip about an unknown node: %q", g.Name.String())
				}
			}
			mu.Unlock()
			if m.Type == TypeMeet || m.Type == TypePing {
				if _, err := conn.Write(pong); err != nil {
					return
				}
			}
		}
	}()

	if err := a.c.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(port)).Err(); err != nil {
		t.Fatal(err)
	}
	var line string
	waitFor(t, 15*time.Second, "A to list the test's node with its hostname and to gossip about B", func() bool {
		mu.Lock()
		defer mu.Unlock()
		if s.err != nil {
			t.Fatalf("bus: %v", s.err)
		}
		line = nodeLine(a.c.ClusterNodes(ctx).Val(), ourID)
		return s.gossipB && strings.Contains(line, ","+ourHost+" ") && !strings.Contains(line, "handshake")
	})
	ln.Close()
	(<-conns).Close()
	<-done

	mu.Lock()
	defer mu.Unlock()
	m := s.first
	if m.Type != TypeMeet {
		t.Errorf("first message is %s, want meet", TypeName(m.Type))
	}
	if m.Sender.String() != aID {
		t.Errorf("sender %q, CLUSTER MYID says %q", m.Sender.String(), aID)
	}
	if int(m.Port) != a.port || int(m.CPort) != a.port+BusPortOffset {
		t.Errorf("port %d, cport %d; redis-server listens on %d and %d", m.Port, m.CPort, a.port, a.port+BusPortOffset)
	}
	if m.Flags&(NodeMyself|NodeMaster) != NodeMyself|NodeMaster {
		t.Errorf("flags %s", FlagsString(m.Flags))
	}
	if !m.SlaveOf.IsZero() || m.MySlots != [SlotBytes]byte{} {
		t.Errorf("a master without slots sent slaveof %q and slots", m.SlaveOf.String())
	}
	if h := m.Hostname(); h != "redis-a.test" {
		t.Errorf("hostname extension %q", h)
	}
	if s.gossipBad != "" {
		t.Error(s.gossipBad)
	}
	want := fmt.Sprintf("%s 127.0.0.1:%d@%d,%s master - ", ourID, port, port+BusPortOffset, ourHost)
	if !strings.HasPrefix(line, want) {
		t.Errorf("CLUSTER NODES lists\n%s\nwant it to start\n%s", line, want)
	}
	t.Logf("redis-server lists the test's node as: %s", line)
}

func nodeLine(nodes, id string) string {
	for _, l := range strings.Split(nodes, "\n") {
		if strings.HasPrefix(l, id+" ") {
			return l
		}
	}
	return ""
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
