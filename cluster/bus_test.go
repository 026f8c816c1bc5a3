package cluster

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// startBus starts a Bus on 127.0.0.1 with a short node timeout,
// retrying when another process takes the probed port first.
func startBus(t *testing.T, hostname string) (*Bus, int) {
	t.Helper()
	return startBusWith(t, func(c *BusConfig) { c.Hostname = hostname })
}

func startBusWith(t *testing.T, set func(*BusConfig)) (*Bus, int) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		port := freePortPair(t)
		cfg := BusConfig{
			IP: "127.0.0.1", Port: uint16(port), NodeTimeout: 1000,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		}
		set(&cfg)
		b, err := NewBus(cfg)
		if err == nil {
			t.Cleanup(func() { b.Close() })
			return b, port
		}
		if attempt == 3 {
			t.Fatal(err)
		}
	}
}

// view runs f with the bus's State, on the bus's goroutine.
func view(t *testing.T, b *Bus, f func(*State) bool) bool {
	t.Helper()
	var ok bool
	if !b.Do(func(s *State) { ok = f(s) }) {
		t.Fatal("bus closed")
	}
	return ok
}

func connectedMaster(s *State, id string, port int, hostname string) bool {
	n := s.Node(id)
	return n != nil && n.Linked && n.IsMaster() && !n.Handshake() && n.IP == "127.0.0.1" &&
		int(n.Port) == port && int(n.CPort) == port+BusPortOffset && n.Hostname == hostname
}

func TestBusMeet(t *testing.T) {
	// Save runs on the bus's goroutine, so view reads saves safely.
	saves := 0
	a, aPort := startBusWith(t, func(c *BusConfig) {
		c.Hostname = "bus-a.test"
		c.Save = func(*State, bool) error { saves++; return nil }
	})
	b, bPort := startBus(t, "bus-b.test")
	aID, bID := a.ID(), b.ID()
	if err := a.Meet("127.0.0.1", uint16(bPort), 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "both buses to list each other", func() bool {
		return view(t, a, func(s *State) bool { return connectedMaster(s, bID, bPort, "bus-b.test") && len(s.Nodes()) == 2 }) &&
			view(t, b, func(s *State) bool { return connectedMaster(s, aID, aPort, "bus-a.test") && len(s.Nodes()) == 2 })
	})
	if view(t, a, func(*State) bool { return saves == 0 }) {
		t.Error("meeting B changed A's state without saving it")
	}
	view(t, a, func(s *State) bool {
		for j := range uint16(100) {
			s.SetOwner(j, s.Myself)
		}
		return true
	})
	waitFor(t, 30*time.Second, "B to learn A's slots", func() bool {
		return view(t, b, func(s *State) bool {
			return slices.Equal(s.Ranges(aID), []SlotRange{{0, 99}})
		})
	})
}

// TestBusClose checks that Close returns with links, dials and
// handshakes under way, and that the bus is then inert.
func TestBusClose(t *testing.T) {
	a, _ := startBus(t, "")
	b, bPort := startBus(t, "")
	a.Meet("127.0.0.1", uint16(bPort), 0)
	dead := freePortPair(t)
	a.Meet("127.0.0.1", uint16(dead), 0)
	b.Close()
	a.Close()
	if a.Do(func(*State) {}) {
		t.Error("Do ran on a closed bus")
	}
	if err := a.Meet("127.0.0.1", 1, 0); err == nil {
		t.Error("Meet on a closed bus succeeded")
	}
}

// lockedBuffer is a log the bus's goroutines write while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestBusMalformed sends garbage to the bus: the link is closed, the
// reason logged, and the bus carries on.
func TestBusMalformed(t *testing.T) {
	var log lockedBuffer
	a, aPort := startBusWith(t, func(c *BusConfig) { c.Logger = slog.New(slog.NewTextHandler(&log, nil)) })
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", aPort+BusPortOffset))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("RCmb\xff\xff\xff\xffgarbage"))
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("the bus answered garbage")
	}
	waitFor(t, 30*time.Second, "the bad packet to be logged", func() bool {
		return strings.Contains(log.String(), "bad message length")
	})
	if !a.Do(func(*State) {}) {
		t.Error("the bus stopped")
	}
}

// TestBusCronClock drives the cron with the test's ticks and clock: a
// node that cannot be reached at all is suspected once the node timeout
// passes, since the ping its first connection attempt would carry
// counts as sent.
func TestBusCronClock(t *testing.T) {
	ticks := make(chan time.Time)
	var mu sync.Mutex
	clock := time.UnixMilli(1_000_000_000_000)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	a, _ := startBusWith(t, func(c *BusConfig) { c.Now, c.Ticks = now, ticks })

	dead := freePortPair(t)
	const id = "00000000000000000000000000000000000000aa"
	view(t, a, func(s *State) bool {
		s.AddNode(&Node{ID: id, IP: "127.0.0.1", Port: uint16(dead), CPort: uint16(dead + BusPortOffset), Flags: NodeMaster})
		return true
	})
	flags := func() uint16 {
		var f uint16
		view(t, a, func(s *State) bool { f = s.Node(id).Flags; return true })
		return f
	}
	// A tick is taken by the loop, which then runs the cron; the empty
	// event after it is taken only once the cron is done.
	tick := func() { ticks <- now(); a.post(func() {}) }
	tick()
	if flags()&NodePFail != 0 {
		t.Fatal("suspected before the node timeout")
	}
	advance(1500 * time.Millisecond)
	tick()
	if flags()&NodePFail == 0 {
		t.Errorf("not suspected after the node timeout: %s", FlagsString(flags()))
	}
}

// TestBusNoLeak checks that Close leaves no goroutine behind, links,
// dials and readers included.
func TestBusNoLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	a, _ := startBus(t, "")
	b, bPort := startBus(t, "")
	if err := a.Meet("127.0.0.1", uint16(bPort), 0); err != nil {
		t.Fatal(err)
	}
	bID := b.ID()
	waitFor(t, 30*time.Second, "A to link to B", func() bool {
		return view(t, a, func(s *State) bool { n := s.Node(bID); return n != nil && n.Linked })
	})
	a.Close()
	b.Close()
	waitFor(t, 30*time.Second, "the goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}

// TestBusSendBufLimit: a peer that stops reading makes its link's unsent
// messages pile up; past cluster-link-sendbuf-limit the next cron drops
// the link and counts it, as Redis's freeClusterLinkOnBufferLimitReached.
func TestBusSendBufLimit(t *testing.T) {
	ticks := make(chan time.Time)
	a, _ := startBusWith(t, func(c *BusConfig) { c.Ticks = ticks })
	tick := func() { ticks <- time.Now(); a.post(func() {}) }

	// The peer accepts and never reads.
	port := freePortPair(t)
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+BusPortOffset)))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	held := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held <- c
		}
	}()
	defer func() {
		for len(held) > 0 {
			(<-held).Close()
		}
	}()
	const id = "00000000000000000000000000000000000000bb"
	view(t, a, func(s *State) bool {
		s.AddNode(&Node{ID: id, IP: "127.0.0.1", Port: uint16(port), CPort: uint16(port + BusPortOffset), Flags: NodeMaster})
		return true
	})
	tick() // dials
	linked := func() bool {
		ok := false
		view(t, a, func(s *State) bool { ok = s.Node(id).Linked; return true })
		return ok
	}
	waitFor(t, 20*time.Second, "the link to the silent peer", linked)

	a.SetSendBufLimit(1 << 20)
	// Far more than the socket's buffers take: the rest waits in the
	// link's queue.
	big := make([]byte, 512<<10)
	for range 48 {
		a.Publish([]byte("ch"), big, false)
	}
	exceeded := func() uint64 {
		var n uint64
		view(t, a, func(s *State) bool { n = s.LinksBufferLimitExceeded; return true })
		return n
	}
	waitFor(t, 20*time.Second, "the link over the limit to be dropped", func() bool {
		tick()
		return exceeded() >= 1
	})
	var info string
	var n uint64
	view(t, a, func(s *State) bool { n, info = s.LinksBufferLimitExceeded, s.ClusterInfo().String(); return true })
	if !strings.Contains(info, "total_cluster_links_buffer_limit_exceeded:"+strconv.FormatUint(n, 10)+"\r\n") {
		t.Errorf("CLUSTER INFO after %d drops:\n%s", n, info)
	}
}
