package cluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// CronInterval is how often the bus does clusterCron's work.
const CronInterval = 100 * time.Millisecond

// DefaultMaxMsg bounds a received message: Redis's own packets stay far
// below it, and a peer must not make the bus allocate what it likes.
const DefaultMaxMsg = 1 << 20

// BusConfig is what a Bus needs to know of its own node.
type BusConfig struct {
	// ID is myself's name; a random one when empty, as a fresh node gets.
	ID string
	// IP is myself's address as announced; when empty, others take it
	// from the connection, and myself learns it from the first MEET.
	IP      string
	Port    uint16 // the client port
	BusPort uint16 // the bus port; Port+BusPortOffset when 0
	// AnnouncedBusPort is the bus port others are told (0: BusPort), for
	// a node behind a port mapping; PPort is the plaintext client port
	// of a node whose Port is its TLS port (tls-cluster), 0 when none.
	AnnouncedBusPort, PPort uint16
	Hostname                string
	// NodeTimeout is cluster-node-timeout in milliseconds.
	NodeTimeout int64
	// State, when set, is the state to start from (a loaded nodes.conf);
	// otherwise a fresh one is made.
	State *State
	// Save is called, on the bus's goroutine, when the state no longer
	// matches what was saved (sync false: the caller may write it later,
	// as Redis writes most changes without an fsync before it replies),
	// and by CLUSTER SAVECONFIG (sync true: written and synced before it
	// returns, with its error). It must not keep the State.
	Save func(st *State, sync bool) error
	// Logger receives link errors; slog.Default() when nil.
	Logger *slog.Logger
	// Now and Ticks replace the clock and the cron ticker in tests.
	Now   func() time.Time
	Ticks <-chan time.Time
	// MaxMsg bounds a received message; DefaultMaxMsg when 0.
	MaxMsg int
	// TLS, when set, makes the bus port a TLS listener, and DialTLS the
	// outbound links TLS clients (tls-cluster).
	TLS, DialTLS *tls.Config

	// The server's part of what the bus learns, all called on the bus's
	// goroutine, which they must not block on.
	//
	// OnReplicate is called whenever myself's master changes, with the
	// new master's client address, or "" and 0 when myself became a
	// master.
	OnReplicate func(masterIP string, masterPort int)
	// OnLostSlots is called with the slots myself lost to another master
	// while staying a master: their keys are to be deleted.
	OnLostSlots func(slots []uint16)
	// OnPublish is called with a PUBLISH (or, shard set, a
	// PUBLISHSHARD) another node relayed.
	OnPublish func(channel, message []byte, shard bool)
	// OnModule is called with a module message another node sent.
	OnModule func(sender string, moduleID uint64, typ uint8, payload []byte)
	// Offset is myself's replication offset, which every message's
	// header carries: others list a replica in CLUSTER SLOTS once it has
	// one, and an election ranks replicas by it.
	Offset func() int64
	// OnLinked is called when an outbound link to a named node comes up,
	// so that the server can send a node what a newcomer must know.
	OnLinked func(nodeID string)
	// ReplicaInfo tells a replica's elections where its replication
	// stands.
	ReplicaInfo func() ReplicaInfo
	// OnPause asks the server to pause writes until untilMS for a manual
	// failover and, once no write is running, to call
	// Bus.ConfirmPaused; OnUnpause to resume them.
	OnPause   func(untilMS int64)
	OnUnpause func()
}

// Bus is a node's cluster bus: it owns the State and keeps it fed with
// what the other nodes send, and them with what it knows. One goroutine
// owns the State; readers hand it messages, and it hands writers their
// bytes through queues it never waits on, so that a slow peer delays
// nobody else.
type Bus struct {
	cfg    BusConfig
	ln     net.Listener
	log    *slog.Logger
	now    func() time.Time
	events chan func()
	done   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	close  sync.Once

	// routing is the State's routing snapshot, as of the last event.
	routing atomic.Pointer[Routing]
	// sendBufLimit is cluster-link-sendbuf-limit in bytes, 0 for none.
	sendBufLimit atomic.Int64

	// mu is held by every event of the bus (a message, a cron tick, a
	// Do): what follows is owned by whoever holds it. closed: Close has
	// run, and Do runs nothing.
	mu     sync.Mutex
	closed bool
	// nextRouting and routeIndex are publishRouting's scratch.
	nextRouting *Routing
	routeIndex  map[string]uint16
	st          *State
	links       map[*link]struct{}
	outbound    map[string]*link // node ID → the link this node opened
	inbound     map[string]*link // node ID → the last link it opened here
	// master is myself's master as OnReplicate last heard of it.
	master    string
	dialing   map[string]bool
	retry     map[string]retryState
	handshake map[string]int64 // handshake node ID → when it began
	iteration int
}

type retryState struct {
	next    int64
	backoff int64
}

// link is one TCP connection of the bus. Only the loop changes node.
type link struct {
	conn     net.Conn
	inbound  bool
	node     string
	created  int64
	out      chan []byte
	quit     chan struct{}
	quitOnce sync.Once
	// queued and queuedCap are the bytes waiting in out and the room
	// their buffers take, CLUSTER LINKS's send buffer.
	queued, queuedCap atomic.Int64
}

// linkQueue is how many messages may wait for a peer: enough for the
// bursts a cron tick and a FAIL broadcast make, and a peer that lets
// this many pile up is as good as gone.
const linkQueue = 64

func (l *link) shut() {
	l.quitOnce.Do(func() {
		close(l.quit)
		l.conn.Close()
	})
}

// NewBus listens on the bus port and starts the bus.
func NewBus(cfg BusConfig) (*Bus, error) {
	if cfg.NodeTimeout <= 0 {
		return nil, errors.New("cluster: the node timeout must be positive")
	}
	if cfg.BusPort == 0 {
		cfg.BusPort = cfg.Port + BusPortOffset
	}
	cport := cfg.BusPort
	if cfg.AnnouncedBusPort != 0 {
		cport = cfg.AnnouncedBusPort
	}
	if cfg.MaxMsg == 0 {
		cfg.MaxMsg = DefaultMaxMsg
	}
	b := &Bus{
		cfg:       cfg,
		log:       cfg.Logger,
		now:       cfg.Now,
		events:    make(chan func()),
		done:      make(chan struct{}),
		links:     map[*link]struct{}{},
		outbound:  map[string]*link{},
		inbound:   map[string]*link{},
		dialing:   map[string]bool{},
		retry:     map[string]retryState{},
		handshake: map[string]int64{},
	}
	if b.log == nil {
		b.log = slog.Default()
	}
	if b.now == nil {
		b.now = time.Now
	}
	b.st = cfg.State
	if b.st == nil {
		id := cfg.ID
		if id == "" {
			id = randomName()
		}
		b.st = NewState(&Node{ID: id, IP: cfg.IP, Port: cfg.Port, CPort: cport, PPort: cfg.PPort, Hostname: cfg.Hostname}, cfg.NodeTimeout)
	}
	me := b.st.Me()
	me.Hostname, me.Port, me.CPort, me.PPort, me.Linked = cfg.Hostname, cfg.Port, cport, cfg.PPort, true
	if cfg.IP != "" {
		me.IP = cfg.IP
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.IP, strconv.Itoa(int(cfg.BusPort))))
	if err != nil {
		return nil, err
	}
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS)
	}
	if me.IsSlave() {
		b.master = me.Master
	}
	b.ln = ln
	b.routing.Store(NewRouting(b.st))
	b.ctx, b.cancel = context.WithCancel(context.Background())
	ticks := cfg.Ticks
	var ticker *time.Ticker
	if ticks == nil {
		ticker = time.NewTicker(CronInterval)
		ticks = ticker.C
	}
	b.wg.Add(2)
	go b.accept()
	go func() {
		defer b.wg.Done()
		if ticker != nil {
			defer ticker.Stop()
		}
		b.loop(ticks)
	}()
	return b, nil
}

func randomName() string {
	var r [NameLen / 2]byte
	rand.Read(r[:])
	return hex.EncodeToString(r[:])
}

// Addr is the bus's listening address.
func (b *Bus) Addr() net.Addr { return b.ln.Addr() }

// ID is myself's name.
func (b *Bus) ID() string {
	var id string
	b.Do(func(s *State) { id = s.Myself })
	return id
}

// Do runs f with the State, for reading it or changing it (assigning
// slots, say) between messages, under the lock every event of the bus
// runs under: in the caller's goroutine, so that a CLUSTER command costs
// no hand-over to the bus's and back. Before Do returns, the routing
// snapshot is renewed, so that a request that follows a CLUSTER command
// is routed by its effect. It reports false when the bus is closed and f
// did not run.
func (b *Bus) Do(f func(*State)) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	f(b.st)
	b.settle()
	return true
}

// View runs f with the State for reading it only: unlike Do, it does
// not renew the routing snapshot, which costs a pass over the slots, so
// that CLUSTER NODES and its kin answer quickly.
func (b *Bus) View(f func(*State)) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	f(b.st)
	return true
}

// SetSendBufLimit sets cluster-link-sendbuf-limit: a link whose unsent
// messages take more bytes than limit is dropped by the next cron, and
// made anew, so that a peer that stopped reading costs bounded memory
// (0: no limit but the queue's length).
func (b *Bus) SetSendBufLimit(limit int64) { b.sendBufLimit.Store(limit) }

// Routing is the routing snapshot as of the bus's last event: one atomic
// load, for every request.
func (b *Bus) Routing() *Routing { return b.routing.Load() }

// publishRouting replaces the routing snapshot when the State routes
// differently from it; between changes, which are rare, requests keep
// reading the same snapshot.
func (b *Bus) publishRouting() {
	if b.nextRouting == nil {
		b.nextRouting, b.routeIndex = new(Routing), map[string]uint16{}
	}
	b.nextRouting.fill(b.st, b.routeIndex)
	if !b.nextRouting.Equal(b.routing.Load()) {
		b.routing.Store(b.nextRouting)
		b.nextRouting = nil
	}
}

// post hands an event to the loop, and reports false when it was
// dropped because the bus is closing.
func (b *Bus) post(f func()) bool {
	select {
	case b.events <- f:
		return true
	case <-b.done:
		return false
	}
}

// Meet starts a handshake with the node at ip:port whose bus listens on
// cport (CLUSTER MEET; cport 0 means port+BusPortOffset). The node is
// known under a random name until its PONG names it.
func (b *Bus) Meet(ip string, port, cport uint16) error {
	if net.ParseIP(ip) == nil {
		return fmt.Errorf("cluster: invalid IP address %q", ip)
	}
	if cport == 0 {
		cport = port + BusPortOffset
	}
	if !b.Do(func(s *State) { b.startHandshake(ip, port, cport, true) }) {
		return net.ErrClosed
	}
	return nil
}

// Close stops the bus and waits for its goroutines.
func (b *Bus) Close() error {
	b.close.Do(func() {
		b.mu.Lock()
		b.closed = true
		b.mu.Unlock()
		close(b.done)
		b.cancel()
		b.ln.Close()
	})
	b.wg.Wait()
	return nil
}

func (b *Bus) nowMS() int64 { return b.now().UnixMilli() }

func (b *Bus) accept() {
	defer b.wg.Done()
	for {
		conn, err := b.ln.Accept()
		if err != nil {
			select {
			case <-b.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			b.log.Error("cluster bus: accept", "err", err)
			select {
			case <-b.done:
				return
			case <-time.After(CronInterval):
			}
			continue
		}
		if !b.post(func() { b.addLink(conn, true, "") }) {
			conn.Close()
			return
		}
	}
}

func (b *Bus) loop(ticks <-chan time.Time) {
	defer func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		for l := range b.links {
			l.shut()
		}
	}()
	for {
		select {
		case <-b.done:
			return
		case f := <-b.events:
			b.mu.Lock()
			f()
			b.settle()
			b.mu.Unlock()
		case <-ticks:
			b.mu.Lock()
			b.cron()
			b.settle()
			b.mu.Unlock()
		}
	}
}

// settle acts on what an event changed: the routing snapshot, and
// myself's master for the server.
func (b *Bus) settle() {
	b.publishRouting()
	b.reportMaster()
}

// addLink starts a link's reader and writer. A connection that arrives
// as the bus closes is dropped.
func (b *Bus) addLink(conn net.Conn, inbound bool, node string) *link {
	l := &link{conn: conn, inbound: inbound, node: node, created: b.nowMS(),
		out: make(chan []byte, linkQueue), quit: make(chan struct{})}
	select {
	case <-b.done:
		conn.Close()
		return nil
	default:
	}
	b.links[l] = struct{}{}
	b.wg.Add(2)
	go b.read(l)
	go b.write(l)
	return l
}

func (b *Bus) read(l *link) {
	defer b.wg.Done()
	for {
		m, err := ReadMsg(l.conn, b.cfg.MaxMsg)
		if err != nil {
			select {
			case <-l.quit:
			default:
				if !errors.Is(err, net.ErrClosed) && !isEOF(err) {
					b.log.Warn("cluster bus: closing link", "peer", l.conn.RemoteAddr().String(), "err", err)
				}
			}
			b.post(func() { b.dropLink(l) })
			return
		}
		b.post(func() { b.receive(l, m) })
	}
}

func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

func (b *Bus) write(l *link) {
	defer b.wg.Done()
	for {
		select {
		case <-l.quit:
			return
		case buf := <-l.out:
			l.conn.SetWriteDeadline(time.Now().Add(time.Duration(max(b.cfg.NodeTimeout, 1000)) * time.Millisecond))
			_, err := l.conn.Write(buf)
			l.queued.Add(-int64(len(buf)))
			l.queuedCap.Add(-int64(cap(buf)))
			if err != nil {
				select {
				case <-l.quit:
				default:
					b.log.Warn("cluster bus: write", "peer", l.conn.RemoteAddr().String(), "err", err)
				}
				l.shut()
				return
			}
		}
	}
}

// send queues m on l without waiting: a peer whose queue is full is
// not keeping up, and its link is dropped to be made anew.
func (b *Bus) send(l *link, m *Msg) {
	if l == nil {
		return
	}
	if m.Type < typeCount {
		b.st.StatsSent[m.Type]++
	}
	buf := m.Append(nil)
	l.queued.Add(int64(len(buf)))
	l.queuedCap.Add(int64(cap(buf)))
	select {
	case l.out <- buf:
	default:
		l.queued.Add(-int64(len(buf)))
		l.queuedCap.Add(-int64(cap(buf)))
		b.log.Warn("cluster bus: peer not reading, dropping its link", "peer", l.conn.RemoteAddr().String())
		b.dropLink(l)
	}
}

func (b *Bus) dropLink(l *link) {
	if _, ok := b.links[l]; !ok {
		return
	}
	l.shut()
	delete(b.links, l)
	if l.inbound && b.inbound[l.node] == l {
		delete(b.inbound, l.node)
	}
	if !l.inbound && b.outbound[l.node] == l {
		delete(b.outbound, l.node)
		if n := b.st.Node(l.node); n != nil {
			n.Linked = false
		}
	}
}
