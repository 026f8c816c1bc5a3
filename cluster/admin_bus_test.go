package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

type published struct {
	channel, message string
	shard            bool
}

type moduleMsg struct {
	sender  string
	id      uint64
	typ     uint8
	payload string
}

// hooked is a bus whose callbacks report on channels.
type hooked struct {
	*Bus
	port      int
	replicate chan string
	publish   chan published
	module    chan moduleMsg
	linked    chan string
	lost      chan []uint16
}

func startHooked(t *testing.T, set func(*BusConfig)) *hooked {
	t.Helper()
	h := &hooked{replicate: make(chan string, 16), publish: make(chan published, 16),
		module: make(chan moduleMsg, 16), linked: make(chan string, 16), lost: make(chan []uint16, 16)}
	h.Bus, h.port = startBusWith(t, func(c *BusConfig) {
		c.OnReplicate = func(ip string, port int) { h.replicate <- net.JoinHostPort(ip, strconv.Itoa(port)) }
		c.OnPublish = func(ch, msg []byte, shard bool) { h.publish <- published{string(ch), string(msg), shard} }
		c.OnModule = func(s string, id uint64, typ uint8, p []byte) { h.module <- moduleMsg{s, id, typ, string(p)} }
		c.OnLostSlots = func(slots []uint16) { h.lost <- slots }
		c.OnLinked = func(id string) {
			select {
			case h.linked <- id:
			default:
			}
		}
		if set != nil {
			set(c)
		}
	})
	return h
}

func recv[T any](t *testing.T, ch chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// meetAll introduces every bus to the first and waits until each knows
// every other by name, over a link.
func meetAll(t *testing.T, bs ...*hooked) {
	t.Helper()
	for _, b := range bs[1:] {
		if err := bs[0].Meet("127.0.0.1", uint16(b.port), 0); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 20*time.Second, "the buses to know each other", func() bool {
		for _, a := range bs {
			for _, b := range bs {
				if a != b && !view(t, a.Bus, func(s *State) bool {
					n := s.Node(b.ID())
					return n != nil && !n.Handshake() && n.Linked
				}) {
					return false
				}
			}
		}
		return true
	})
}

func TestBusAdminAndRelay(t *testing.T) {
	a, b, c := startHooked(t, nil), startHooked(t, nil), startHooked(t, nil)
	meetAll(t, a, b, c)
	aID, bID, cID := a.ID(), b.ID(), c.ID()
	for got := ""; got != bID; {
		got = recv(t, a.linked, "A's link to B")
	}

	if err := a.AddSlots([]SlotRange{{0, 99}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "B to see A's slots", func() bool {
		return view(t, b.Bus, func(s *State) bool { return s.Owner[0] == aID && s.Owner[99] == aID })
	})

	if err := b.Replicate(aID, false); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, b.replicate, "B's OnReplicate"); got != net.JoinHostPort("127.0.0.1", strconv.Itoa(a.port)) {
		t.Fatalf("OnReplicate(%s)", got)
	}
	waitFor(t, 20*time.Second, "A and C to see B replicate A", func() bool {
		return view(t, a.Bus, func(s *State) bool { return s.Node(bID).Master == aID }) &&
			view(t, c.Bus, func(s *State) bool { return s.Node(bID).Master == aID })
	})

	// A shard message reaches A's replica only; a global one everybody.
	a.Publish([]byte("s"), []byte("m1"), true)
	a.Publish([]byte("g"), []byte("m2"), false)
	if got := recv(t, b.publish, "B's first message"); got != (published{"s", "m1", true}) {
		t.Fatalf("B got %+v", got)
	}
	if got := recv(t, b.publish, "B's second message"); got != (published{"g", "m2", false}) {
		t.Fatalf("B got %+v", got)
	}
	if got := recv(t, c.publish, "C's message"); got != (published{"g", "m2", false}) {
		t.Fatalf("C got %+v, the shard message included", got)
	}

	a.SendModule(cID, 7, 3, []byte("to C"))
	a.SendModule("", 8, 4, []byte("to all"))
	if got := recv(t, c.module, "C's module message"); got != (moduleMsg{aID, 7, 3, "to C"}) {
		t.Fatalf("C got %+v", got)
	}
	if got := recv(t, b.module, "B's module message"); got != (moduleMsg{aID, 8, 4, "to all"}) {
		t.Fatalf("B got %+v, C's own included", got)
	}

	waitFor(t, 20*time.Second, "A's links both ways to B", func() bool {
		dirs := map[string]bool{}
		for _, l := range a.Links() {
			if l.Node == bID && l.CreateTime > 0 && (l.Events == "r" || l.Events == "rw") {
				dirs[l.Direction] = true
			}
		}
		return dirs["to"] && dirs["from"]
	})

	// C forgets A; B's gossip does not bring A back within the TTL.
	if err := c.Forget(aID); err != nil {
		t.Fatal(err)
	}
	var pings int64
	view(t, c.Bus, func(s *State) bool { pings = s.StatsReceived[TypePing] + s.StatsReceived[TypePong]; return true })
	waitFor(t, 20*time.Second, "C to hear from B again", func() bool {
		return view(t, c.Bus, func(s *State) bool {
			return s.StatsReceived[TypePing]+s.StatsReceived[TypePong] > pings+4
		})
	})
	if view(t, c.Bus, func(s *State) bool { return s.Node(aID) != nil }) {
		t.Fatal("gossip brought back a forgotten node")
	}
}

func selfSigned(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bus"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		RootCAs:      pool, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert,
	}
}

func TestBusTLS(t *testing.T) {
	conf := selfSigned(t)
	tlsBus := func(c *BusConfig) { c.TLS, c.DialTLS = conf, conf }
	a, b := startHooked(t, tlsBus), startHooked(t, tlsBus)
	meetAll(t, a, b)

	// A plaintext peer gets no answer from a TLS bus.
	conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(a.port+BusPortOffset)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	m := &Msg{Type: TypeMeet, Sender: NameOf("0123456789abcdef0123456789abcdef01234567")}
	conn.Write(m.Append(nil))
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := ReadMsg(conn, DefaultMaxMsg); err == nil {
		t.Fatal("a TLS bus answered a plaintext MEET")
	}
}

// TestBusLosingSlots: a master that loses some slots to a greater epoch
// is told which, and one that loses its last becomes the taker's replica.
func TestBusLosingSlots(t *testing.T) {
	a, b := startHooked(t, nil), startHooked(t, nil)
	meetAll(t, a, b)
	aID, bID := a.ID(), b.ID()
	if err := a.AddSlots([]SlotRange{{0, 1}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "B to see A's slots", func() bool {
		return view(t, b.Bus, func(s *State) bool { return s.Owner[1] == aID })
	})
	none := func(uint16) int { return 0 }
	take := func(slot uint16) {
		t.Helper()
		if err := b.SetSlot(slot, []string{"importing", aID}, none); err != nil {
			t.Fatal(err)
		}
		if err := b.SetSlot(slot, []string{"node", bID}, none); err != nil {
			t.Fatal(err)
		}
	}
	take(0)
	if got := recv(t, a.lost, "A's lost slots"); len(got) != 1 || got[0] != 0 {
		t.Fatalf("OnLostSlots(%v)", got)
	}
	take(1)
	if got := recv(t, a.replicate, "A's OnReplicate"); got != net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port)) {
		t.Fatalf("OnReplicate(%s)", got)
	}
	if !view(t, a.Bus, func(s *State) bool { return s.Me().IsSlave() && s.Me().Master == bID }) {
		t.Fatal("A is not B's replica")
	}
}

// TestBusTakenSlotRoutedBeforeAnnounced: a node that takes a slot it was
// importing routes its requests by it before any other node hears of it:
// by the time the old owner learns that it lost the slot, and redirects
// clients to the new one, the new one's routing snapshot serves it. The
// new owner's nodes.conf save is held until then, as a slow disk or a
// descheduled goroutine would hold the rest of its bookkeeping.
func TestBusTakenSlotRoutedBeforeAnnounced(t *testing.T) {
	var hold atomic.Bool
	release := make(chan struct{})
	a := startHooked(t, nil)
	b := startHooked(t, func(c *BusConfig) {
		c.Save = func(*State, bool) error {
			if hold.Load() {
				<-release
			}
			return nil
		}
	})
	meetAll(t, a, b)
	aID, bID := a.ID(), b.ID()
	if err := a.AddSlots([]SlotRange{{0, 1}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "B to see A's slots", func() bool {
		return view(t, b.Bus, func(s *State) bool { return s.Owner[0] == aID })
	})
	none := func(uint16) int { return 0 }
	if err := b.SetSlot(0, []string{"importing", aID}, none); err != nil {
		t.Fatal(err)
	}
	hold.Store(true)
	done := make(chan error, 1)
	go func() { done <- b.SetSlot(0, []string{"node", bID}, none) }()
	lost := recv(t, a.lost, "A's lost slots")
	served := b.Routing().Serves(0)
	hold.Store(false)
	close(release)
	if err := recv(t, done, "CLUSTER SETSLOT NODE"); err != nil {
		t.Fatal(err)
	}
	if len(lost) != 1 || lost[0] != 0 {
		t.Fatalf("OnLostSlots(%v)", lost)
	}
	if !served {
		t.Error("A heard that B took slot 0 before B's routing served it")
	}
}

// TestBusAddressUpdate: a node that comes back at another address with
// its name is found there from its PINGs (nodeUpdateAddressIfNeeded).
func TestBusAddressUpdate(t *testing.T) {
	a, b := startHooked(t, nil), startHooked(t, nil)
	meetAll(t, a, b)
	bID := b.ID()
	b.Close()
	moved := startHooked(t, func(c *BusConfig) { c.ID = bID })
	if err := moved.Meet("127.0.0.1", uint16(a.port), 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "A to find B at its new address", func() bool {
		return view(t, a.Bus, func(s *State) bool {
			n := s.Node(bID)
			return n != nil && int(n.Port) == moved.port && int(n.CPort) == moved.port+BusPortOffset && n.Linked
		})
	})
}
