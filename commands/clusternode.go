package commands

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/limitkv/limitkv/cluster"
	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/config"
	"github.com/limitkv/limitkv/ratelimit"
	"github.com/limitkv/limitkv/resp"
)

// The node's part in a Redis Cluster: starting its bus from nodes.conf,
// and routing each request to the node that serves its keys' slot. The
// CLUSTER command is cluster.go's.

// StartCluster starts the cluster bus when cluster-enabled is on: the node
// takes up its id, epochs, slots and peers from nodes.conf in dir, or
// starts as a new node and writes one. A nodes.conf that cannot be read
// stops start-up: a node that silently took a new identity would join
// its own cluster as a stranger.
func (s *Server) StartCluster() error {
	if s.Cfg.Get("cluster-enabled") != "yes" {
		return nil
	}
	if _, _, replica := s.Cfg.ReplicaOf(); replica {
		return errors.New("replicaof directive not allowed in cluster mode")
	}
	path := s.nodesConfPath()
	s.nodesConf.path = path
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	conf, err := cluster.LoadNodesConf(path)
	if err != nil {
		return fmt.Errorf("unrecoverable error: corrupted cluster config file: %w", err)
	}
	timeout := s.Cfg.Int("cluster-node-timeout")
	var st *cluster.State
	if conf != nil {
		if st, err = cluster.FromNodesConf(conf, timeout, s.Eng.Now()); err != nil {
			return fmt.Errorf("unrecoverable error: corrupted cluster config file %s: %w", path, err)
		}
	}
	ports := clusterPortsOf(s.Cfg)
	var serverTLS, clientTLS *tls.Config
	if s.Cfg.Get("tls-cluster") == "yes" {
		set := s.Cfg.tlsSet.Load()
		if set == nil || s.Cfg.Int("tls-port") == 0 {
			return errors.New("tls-cluster needs tls-port and the certificates of tls-cert-file and tls-key-file")
		}
		serverTLS, clientTLS = s.Cfg.TLSServerConfig(), set.Client()
	}
	bus, err := cluster.NewBus(cluster.BusConfig{
		IP:               s.Cfg.Get("cluster-announce-ip"),
		Port:             ports.port,
		PPort:            ports.pport,
		BusPort:          ports.bus,
		AnnouncedBusPort: ports.announcedBus,
		TLS:              serverTLS,
		DialTLS:          clientTLS,
		Hostname:         s.Cfg.Get("cluster-announce-hostname"),
		NodeTimeout:      timeout,
		State:            st,
		Save:             s.nodesConf.save,
		Logger:           s.Log,
		OnReplicate:      func(ip string, port int) { s.clusterOut.do(func() { s.followMaster(ip, port) }) },
		OnLostSlots: func(slots []uint16) {
			slots = slices.Clone(slots)
			s.clusterOut.do(func() { s.dropSlots(slots) })
		},
		// What other nodes send is delivered on a goroutine of the
		// server's, in order: the bus's goroutine must never wait for
		// the pub/sub or policy locks, which a handler waiting for the
		// bus may hold.
		OnPublish: func(channel, message []byte, shard bool) {
			s.clusterIn.do(func() { s.Publish(channel, message, shard) })
		},
		OnModule: func(sender string, moduleID uint64, typ uint8, payload []byte) {
			s.clusterIn.do(func() { s.receiveModule(sender, moduleID, typ, payload) })
		},
		OnLinked:    func(id string) { s.clusterOut.do(func() { s.sendPolicies(id) }) },
		Offset:      s.Repl.Offset,
		ReplicaInfo: s.clusterReplicaInfo,
		OnPause:     func(until int64) { s.clusterOut.do(func() { s.pauseForFailover(until) }) },
		OnUnpause:   func() { s.clusterOut.do(s.pause.unpause) },
	})
	if err != nil {
		return fmt.Errorf("cluster bus: %w", err)
	}
	s.Cluster = bus
	bus.SetSendBufLimit(s.Cfg.Int("cluster-link-sendbuf-limit"))
	s.clusterOut.start()
	s.clusterIn.start()
	s.nodesConf.start(s.Log)
	// Read before Do: a CONFIG SET holds the config's lock while it waits
	// for the bus's.
	noFailover := s.Cfg.Get("cluster-replica-no-failover") == "yes"
	fullCoverage := s.Cfg.Get("cluster-require-full-coverage") == "yes"
	replicaMigration := s.Cfg.Get("cluster-allow-replica-migration") == "yes"
	barrier, validity := s.Cfg.Int("cluster-migration-barrier"), s.Cfg.Int("cluster-replica-validity-factor")
	pingPeriod := s.Cfg.Int("repl-ping-replica-period") * 1000
	bus.Do(func(st *cluster.State) {
		st.RequireFullCoverage = fullCoverage
		st.AllowReplicaMigration = replicaMigration
		st.MigrationBarrier, st.ReplicaValidityFactor, st.ReplPingPeriod = barrier, validity, pingPeriod
		if noFailover {
			st.Me().Flags |= cluster.NodeNoFailover
		}
	})
	// A new node writes its identity at once, as Redis does, so that a
	// restart before any change keeps it.
	if err := bus.SaveConfig(); err != nil {
		return err
	}
	s.Log.Info("cluster bus ready", "node", bus.ID(), "addr", bus.Addr().String(), "config", path)
	return nil
}

// settings reads configuration values: the config's, or those a
// Reconfigurer is handed under the config's lock.
type settings interface {
	Get(name string) string
	Int(name string) int64
}

// clusterPorts are the node's ports as the cluster knows them, as
// Redis's deriveAnnouncedPorts makes them: in a TLS cluster (tls-cluster)
// a node is known by its TLS port, its plaintext one given as pport; the
// bus listens at cluster-port, or the client port plus 10000.
type clusterPorts struct{ port, pport, bus, announcedBus uint16 }

func clusterPortsOf(c settings) clusterPorts {
	tlsCluster := c.Get("tls-cluster") == "yes"
	var p clusterPorts
	if tlsCluster {
		p.port, p.pport = uint16(c.Int("tls-port")), uint16(c.Int("port"))
	} else {
		p.port = uint16(c.Int("port"))
	}
	p.bus = p.port + cluster.BusPortOffset
	if cp := c.Int("cluster-port"); cp != 0 {
		p.bus = uint16(cp)
	}
	if tlsCluster && c.Int("cluster-announce-tls-port") != 0 {
		p.port, p.pport = uint16(c.Int("cluster-announce-tls-port")), uint16(c.Int("cluster-announce-port"))
	} else if ap := c.Int("cluster-announce-port"); ap != 0 {
		p.port = uint16(ap)
	}
	p.announcedBus = uint16(c.Int("cluster-announce-bus-port"))
	return p
}

// clusterEffects wires the cluster settings that change a running node;
// StartCluster reads the others once.
func (c *Config) clusterEffects() map[string]config.Effect {
	onState := func(f func(st *cluster.State, n int64)) config.Effect {
		return config.Effect{Apply: func(_ string, n int64) {
			if c.srv != nil && c.srv.Cluster != nil {
				c.srv.Cluster.Do(func(st *cluster.State) { f(st, n) })
			}
		}}
	}
	// What myself announces follows CONFIG SET at once, as in Redis
	// (clusterUpdateMyselfAnnouncedPorts and its kin); the next PINGs
	// carry it.
	announce := config.Effect{Reconf: &config.Reconfigurer{Apply: func(v config.Values) error {
		if c.srv == nil || c.srv.Cluster == nil {
			return nil
		}
		p := clusterPortsOf(v)
		ip, host := v.Get("cluster-announce-ip"), v.Get("cluster-announce-hostname")
		noFailover := v.Get("cluster-replica-no-failover") == "yes"
		c.srv.Cluster.Do(func(st *cluster.State) {
			me := st.Me()
			me.Port, me.PPort, me.Hostname = p.port, p.pport, host
			me.CPort = p.bus
			if p.announcedBus != 0 {
				me.CPort = p.announcedBus
			}
			if ip != "" {
				me.IP = ip
			}
			me.Flags &^= cluster.NodeNoFailover
			if noFailover {
				me.Flags |= cluster.NodeNoFailover
			}
		})
		return nil
	}}}
	effects := map[string]config.Effect{
		"cluster-link-sendbuf-limit": {Apply: func(_ string, n int64) {
			if c.srv != nil && c.srv.Cluster != nil {
				c.srv.Cluster.SetSendBufLimit(n)
			}
		}},
		"cluster-allow-reads-when-down": {Apply: func(_ string, n int64) { c.clusterReadsWhenDown.Store(n != 0) }},
		"cluster-node-timeout":          onState(func(st *cluster.State, n int64) { st.NodeTimeout = n }),
		"cluster-require-full-coverage": onState(func(st *cluster.State, n int64) { st.RequireFullCoverage = n != 0 }),
		"cluster-allow-replica-migration": onState(func(st *cluster.State, n int64) {
			st.AllowReplicaMigration = n != 0
		}),
		"cluster-migration-barrier":       onState(func(st *cluster.State, n int64) { st.MigrationBarrier = n }),
		"cluster-replica-validity-factor": onState(func(st *cluster.State, n int64) { st.ReplicaValidityFactor = n }),
	}
	for _, name := range []string{"cluster-announce-ip", "cluster-announce-hostname", "cluster-announce-port",
		"cluster-announce-tls-port", "cluster-announce-bus-port", "cluster-replica-no-failover"} {
		effects[name] = announce
	}
	return effects
}

// StopCluster closes the cluster bus, if any.
func (s *Server) StopCluster() {
	if s.Cluster != nil {
		s.clusterOut.stop()
		s.Cluster.Close()
		s.clusterIn.stop()
		s.nodesConf.stop()
	}
}

func (s *Server) nodesConfPath() string {
	name := s.Cfg.Get("cluster-config-file")
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(s.Cfg.Get("dir"), name)
}

// nodesConfSaver writes nodes.conf. A change is written by a goroutine
// of its own, the latest one only when several came meanwhile: CLUSTER
// SETSLOT, which a reshard sends for every slot to every master, must not
// wait for the disk. It is synced only when its epochs changed: a slot
// move that only the file's owner table records is written without an
// fsync, as Redis writes it, which a reshard's thousands of them would
// otherwise pay for in CPU; what a node learns again from its peers
// after a crash of the machine need not outlive one. CLUSTER SAVECONFIG,
// a vote and a won election write and sync before they go on. The file
// is always replaced whole (cluster.NodesConf.WriteFile), and a version
// number keeps an older state from overwriting a newer one.
type nodesConfSaver struct {
	path string
	log  *slog.Logger

	mu      sync.Mutex // orders writes
	written uint64     // the version on disk
	synced  [3]uint64  // the epochs of the last synced write

	pmu     sync.Mutex
	version uint64 // of the last state handed in
	pending *cluster.NodesConf
	wake    chan struct{}
	done    chan struct{}
	wg      sync.WaitGroup
}

// save is the bus's Save: on the bus's goroutine, so versions follow
// the order of the changes.
func (n *nodesConfSaver) save(st *cluster.State, sync bool) error {
	conf := st.NodesConf()
	n.pmu.Lock()
	n.version++
	v := n.version
	if !sync {
		n.pending = conf
		n.pmu.Unlock()
		select {
		case n.wake <- struct{}{}:
		default:
		}
		return nil
	}
	n.pending = nil
	n.pmu.Unlock()
	return n.write(conf, v, true)
}

func (n *nodesConfSaver) write(conf *cluster.NodesConf, v uint64, sync bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if v <= n.written {
		return nil
	}
	epochs := conf.Epochs()
	sync = sync || epochs != n.synced
	if err := conf.WriteFile(n.path, sync); err != nil {
		return err
	}
	n.written = v
	if sync {
		n.synced = epochs
	}
	return nil
}

// flush writes the pending state, if any, synced if sync.
func (n *nodesConfSaver) flush(sync bool) {
	n.pmu.Lock()
	conf, v := n.pending, n.version
	n.pending = nil
	n.pmu.Unlock()
	if conf == nil {
		return
	}
	if err := n.write(conf, v, sync); err != nil {
		n.log.Error("cannot save the cluster configuration", "file", n.path, "err", err)
	}
}

func (n *nodesConfSaver) start(log *slog.Logger) {
	n.log = log
	n.wake, n.done = make(chan struct{}, 1), make(chan struct{})
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for {
			select {
			case <-n.done:
				return
			case <-n.wake:
				n.flush(false)
			}
		}
	}()
}

// stop ends the writer once what it was handed is on disk.
func (n *nodesConfSaver) stop() {
	close(n.done)
	n.wg.Wait()
	n.flush(true) // the last state outlives the machine too
}

// followMaster makes the node replicate the master the cluster gave it,
// or a master again (ip ""), through limitkv's own replication. Unlike
// REPLICAOF it leaves replicaof alone: in cluster mode nodes.conf says
// whom a node replicates.
func (s *Server) followMaster(ip string, port int) {
	var err error
	if ip == "" {
		_, err = s.Repl.ReplicaOfNoOne()
	} else {
		_, err = s.Repl.ReplicaOf(ip, port)
	}
	if err != nil {
		s.Log.Error("cluster: cannot change the node's master", "master", net.JoinHostPort(ip, strconv.Itoa(port)), "err", err)
		return
	}
	if ip != "" {
		s.Log.Info("cluster: replicating " + net.JoinHostPort(ip, strconv.Itoa(port)))
	}
}

// clusterReplicaInfo is where myself's replication stands, for an
// election: its offset, and how long since it last heard from its master
// (or since the link went down), in whole seconds as Redis counts it; a
// link never up counts as down forever.
func (s *Server) clusterReplicaInfo() cluster.ReplicaInfo {
	in := s.Repl.Info()
	ri := cluster.ReplicaInfo{Offset: s.Repl.Offset(), DataAge: math.MaxInt64 / 2}
	switch {
	case in.LinkUp && in.LastIOSecondsAgo >= 0:
		ri.DataAge = int64(in.LastIOSecondsAgo) * 1000
	case !in.LinkUp && in.LinkDownSinceSeconds >= 0:
		ri.DataAge = in.LinkDownSinceSeconds * 1000
	}
	return ri
}

// pauseForFailover pauses writes for a manual failover until untilMS,
// waits for the commands and scripts already past the pause to end, and
// tells the bus, whose messages then carry the final offset.
// clusterOut's goroutine runs it: the wait is short, and holds no lock.
func (s *Server) pauseForFailover(untilMS int64) {
	s.pause.pause(pauseWrite, time.UnixMilli(untilMS))
	ended := func() bool { return s.pause.kind.Load() == pauseOff }
	if !s.scripts.InFlight.Drain(ended) {
		return
	}
	for s.scripts.Running() {
		if ended() {
			return
		}
		time.Sleep(time.Millisecond)
	}
	s.Cluster.ConfirmPaused()
}

// dropSlots deletes the keys of slots another master took from this one
// (Redis's delKeysInSlot): requests for them are redirected already.
func (s *Server) dropSlots(slots []uint16) {
	n := 0
	for _, slot := range slots {
		n += s.Eng.DeleteKeysInSlot(slot)
	}
	if n > 0 {
		s.Log.Info("cluster: deleted the keys of slots another master took", "slots", len(slots), "keys", n)
	}
}

// clusterRedirect routes a request as Redis's processCommand does in
// cluster mode, returning the redirection or error to answer instead of
// running it, "" to run it here. A command without key arguments runs
// anywhere; EXEC routes the keys of every command it queued; the master
// of a replica is obeyed whatever it sends. A request routed here by its
// keys comes back with the snapshot that routed it, for rerouted.
func (s *Server) clusterRedirect(cl *Client, spec *cmdspec.Spec, flags cmdspec.Flag, args [][]byte) (string, *cluster.Routing) {
	q := s.clusterQuery(cl, spec, flags, args)
	if q == nil {
		return "", nil
	}
	q.Exists = s.keyExists
	r := s.Cluster.Routing()
	d, slot, n := r.Route(q)
	if d == cluster.Here {
		return "", r
	}
	return d.Error(slot, n, s.clusterPlaintext(cl)), nil
}

// rerouted routes c's request again once its shards are locked, and
// returns the redirection to answer instead of running it ("" to run
// it). Routing before the locks are taken decides on a snapshot and on
// which keys exist, and either may have changed by the time the command
// runs: a key found here may have been migrated away meanwhile, or the
// slot given to another node, and running the command then would create
// the key afresh on a node the cluster no longer sends it to. Only when
// the snapshot is the one that routed the request and no slot of it is
// migrating or importing does the first decision stand as it is, which
// is every request's case but during a reshard: one atomic load and a
// comparison.
func (s *Server) rerouted(c *Ctx) string {
	r := s.Cluster.Routing()
	if r == c.routed && !r.Unsettled() {
		return ""
	}
	// The query the first routing built is still the client's: the
	// same keys and flags, now looked up under the locks held.
	q := &c.Client.route
	q.Exists = s.keyExistsHeld
	d, slot, n := r.Route(q)
	if d == cluster.Here {
		c.routed = r
		return ""
	}
	c.refused = true
	return d.Error(slot, n, s.clusterPlaintext(c.Client))
}

// stillHere is rerouted for a handler that holds its shards' locks: a
// request routed elsewhere meanwhile is answered its redirection, and
// the handler must do nothing more.
func (c *Ctx) stillHere() bool {
	if c.routed == nil {
		return true
	}
	if msg := c.Srv.rerouted(c); msg != "" {
		c.W.Error(msg)
		return false
	}
	return true
}

// clusterQuery is the routing query of a request, in cl.route; nil for
// a request that is not routed by keys.
func (s *Server) clusterQuery(cl *Client, spec *cmdspec.Spec, flags cmdspec.Flag, args [][]byte) *cluster.Query {
	isExec := spec.Name == "exec"
	if cl.master || (!isExec && !routed(spec)) {
		return nil
	}
	q := &cl.route
	q.Reset()
	if isExec {
		if !cl.multi {
			return nil
		}
		for i := range cl.queued {
			qc := &cl.queued[i]
			addKeys(q, qc.spec, qc.args)
			if qc.flags&cmdspec.Write != 0 {
				q.Write = true
			}
		}
	} else {
		addKeys(q, spec, args)
		q.Write = flags&cmdspec.Write != 0
	}
	if q.Keys() == 0 {
		return nil
	}
	q.Asking = cl.asking || flags&cmdspec.Asking != 0
	q.ReadOnly = cl.readOnly
	q.PubSubShard = isShardPubSub(spec)
	q.Migrate = spec.Name == "migrate"
	q.AllowReadsWhenDown = s.Cfg.clusterReadsWhenDown.Load()
	return q
}

// clusterPlaintext reports whether nodes are named to cl by their
// plaintext ports: cl is not on TLS while the cluster is (Redis's
// use_pport).
func (s *Server) clusterPlaintext(cl *Client) bool {
	return cl.conn != nil && !cl.conn.IsTLS() && s.Cfg.Get("tls-cluster") == "yes"
}

// routed reports whether a command is routed by its keys: Redis routes
// every command that declares key specs (channels of the shard pub/sub
// commands included) or finds its keys itself.
func routed(spec *cmdspec.Spec) bool {
	return len(spec.KeySpecs()) > 0 || spec.Flags&cmdspec.Movable != 0
}

// addKeys adds a command's keys to q: those its key specs find, or, for
// a command whose key specs name only channels (SPUBLISH), the legacy
// key range, as Redis's getKeysFromCommand takes it.
func addKeys(q *cluster.Query, spec *cmdspec.Spec, args [][]byte) {
	var pos [8]int
	keys := spec.KeyPositions(args, pos[:0])
	if len(keys) == 0 && !spec.HasKeys() {
		keys = legacyKeyRange(spec, len(args), keys)
	}
	for _, i := range keys {
		q.Key(args[i])
	}
}

// legacyKeyRange lists the arguments in a spec's first/last/step range.
func legacyKeyRange(spec *cmdspec.Spec, argc int, out []int) []int {
	first, last, step := spec.KeyRange()
	if first <= 0 || step <= 0 {
		return out
	}
	if last < 0 {
		last += argc
	}
	for i := first; i <= last && i < argc; i += step {
		out = append(out, i)
	}
	return out
}

func isShardPubSub(spec *cmdspec.Spec) bool {
	switch spec.Name {
	case "spublish", "ssubscribe", "sunsubscribe":
		return true
	}
	return false
}

// existsInDB0 reports whether key is in DB 0, the only one a cluster
// node uses, under its shard's lock.
func (s *Server) existsInDB0(key []byte) bool {
	m := s.Eng.Add(0, key)
	s.Eng.Lock(m)
	defer s.Eng.Unlock(m)
	return s.Eng.ShardFor(key).Exists(0, key, s.Eng.Now())
}

// existsInDB0Held is existsInDB0 for a caller that holds key's shard.
func (s *Server) existsInDB0Held(key []byte) bool {
	return s.Eng.ShardFor(key).Exists(0, key, s.Eng.Now())
}

// clusterRefuse answers a request that clusterRedirect sent elsewhere:
// inside MULTI the transaction is flagged, and an EXEC discards it and
// answers the redirection itself, not EXECABORT, as Redis does.
func (s *Server) clusterRefuse(cl *Client, w *resp.Writer, spec *cmdspec.Spec, msg string) {
	s.cmd(spec).reject.Add(1)
	if spec.Name == "exec" {
		cl.discardTx()
		cl.unwatchAll()
	} else {
		cl.flagTx()
	}
	w.Error(msg)
}

// clusterQueue runs calls on a goroutine of its own, in order. The
// server has two: clusterOut for its calls into the bus, so that a
// handler holding shard locks, or the pub/sub registry's, never waits for
// the bus; clusterIn for what the bus delivers, so that the bus never
// waits for those locks. Neither then waits for the other.
type clusterQueue struct {
	mu   sync.Mutex
	jobs []func()
	// publishes counts the queued PUBLISH relays: past maxQueuedPublishes
	// new ones are dropped, as a slow bus link drops them in Redis,
	// rather than queued without bound. Deliveries from the bus need no
	// bound: the bus's own link queues bound what arrives.
	publishes int
	wake      chan struct{}
	done      chan struct{}
	wg        sync.WaitGroup
}

const maxQueuedPublishes = 10000

func (o *clusterQueue) start() {
	o.wake, o.done = make(chan struct{}, 1), make(chan struct{})
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		for {
			select {
			case <-o.done:
				return
			case <-o.wake:
			}
			o.mu.Lock()
			jobs := o.jobs
			o.jobs, o.publishes = nil, 0
			o.mu.Unlock()
			for _, f := range jobs {
				f()
			}
		}
	}()
}

func (o *clusterQueue) stop() {
	close(o.done)
	o.wg.Wait()
}

// do queues f.
func (o *clusterQueue) do(f func()) { o.add(f, false) }

func (o *clusterQueue) add(f func(), publish bool) bool {
	o.mu.Lock()
	if publish {
		if o.publishes >= maxQueuedPublishes {
			o.mu.Unlock()
			return false
		}
		o.publishes++
	}
	o.jobs = append(o.jobs, f)
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
	return true
}

// clusterPublish relays a message published here to the other nodes,
// which is how a cluster replicates PUBLISH.
func (s *Server) clusterPublish(channel, message []byte, shard bool) {
	channel, message = slices.Clone(channel), slices.Clone(message)
	if !s.clusterOut.add(func() { s.Cluster.Publish(channel, message, shard) }, true) {
		s.Log.Warn("cluster: too many messages waiting for the bus: a PUBLISH reaches this node's subscribers only")
	}
}

// Named policies across the cluster: each change made here goes to every
// node in MODULE messages (which redis-server nodes ignore), and a node
// whose link comes up is sent them all, so that nodes that join or come
// back catch up (ratelimit/exchange.go orders the changes).

// policyModuleID is the module id of the policy messages: "limitkv"
// and a format number, so that no module of a Redis node claims it.
const policyModuleID = 0x6c696d69746b7601

const (
	policyMsgChanges = 1
	// policyMsgChunk bounds one message's payload, far below a bus
	// message's limit.
	policyMsgChunk = 64 << 10
)

// stampPolicy stamps a change just made to the named policy (the caller
// holds the registry's lock) and queues it for the other nodes.
func (s *Server) stampPolicy(name string) {
	r := s.Cluster.Routing()
	ch := s.policies.StampLocked(name, s.Eng.Now(), r.Nodes[r.Myself].ID)
	s.clusterOut.do(func() { s.sendPolicyChanges("", []ratelimit.Change{ch}) })
}

// sendPolicies sends every policy and tombstone to the node id.
func (s *Server) sendPolicies(id string) {
	reg := &s.policies
	reg.Lock()
	chs := reg.ChangesLocked()
	reg.Unlock()
	if len(chs) > 0 {
		s.sendPolicyChanges(id, chs)
	}
}

// sendPolicyChanges sends chs to the node to ("" for all), cut into
// messages of at most policyMsgChunk bytes.
func (s *Server) sendPolicyChanges(to string, chs []ratelimit.Change) {
	for len(chs) > 0 {
		n, size := 0, 0
		for n < len(chs) && (n == 0 || size < policyMsgChunk) {
			size += len(chs[n].Name) + len(chs[n].Stamp.Node) + 32
			for _, w := range chs[n].Def {
				size += len(w) + 4
			}
			n++
		}
		s.Cluster.SendModule(to, policyModuleID, policyMsgChanges, ratelimit.AppendChanges(nil, chs[:n]))
		chs = chs[n:]
	}
}

// receiveModule takes the policy changes another node sent, on the bus's
// goroutine; other modules' messages are not this server's.
func (s *Server) receiveModule(sender string, moduleID uint64, typ uint8, payload []byte) {
	if moduleID != policyModuleID || typ != policyMsgChanges {
		return
	}
	chs, err := ratelimit.ReadChanges(payload)
	if err != nil {
		s.Log.Warn("cluster: policy changes refused", "node", sender, "err", err)
		return
	}
	reg := &s.policies
	reg.Lock()
	defer reg.Unlock()
	if _, err := reg.MergeLocked(chs); err != nil {
		s.Log.Warn("cluster: policy changes refused", "node", sender, "err", err)
	}
}
