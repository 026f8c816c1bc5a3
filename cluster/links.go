package cluster

import (
	"crypto/tls"
	"math/rand/v2"
	"net"
	"strconv"
	"time"
)

// handshakeTimeout is how long a handshake node may wait for the PONG
// that names it: the node timeout, but never under a second
// (clusterCron's handshake_timeout).
func (b *Bus) handshakeTimeout() int64 { return max(b.st.NodeTimeout, 1000) }

// startHandshake adds a node known only by address, under a random name
// (clusterStartHandshake). A handshake already under way for the address
// is not doubled, so that repeated MEETs do not pile up nodes.
func (b *Bus) startHandshake(ip string, port, cport uint16, meet bool) {
	if p := net.ParseIP(ip); p != nil {
		ip = p.String()
	}
	for _, n := range b.st.Nodes() {
		if n.Handshake() && n.IP == ip && n.Port == port && n.CPort == cport {
			return
		}
	}
	flags := uint16(NodeHandshake)
	if meet {
		flags |= NodeMeet
	}
	n := &Node{ID: randomName(), IP: ip, Port: port, CPort: cport, Flags: flags}
	b.st.AddNode(n)
	b.handshake[n.ID] = b.nowMS()
}

// forget deletes a node and its outbound link.
func (b *Bus) forget(id string) {
	if l := b.outbound[id]; l != nil {
		b.dropLink(l)
	}
	if l := b.inbound[id]; l != nil {
		b.dropLink(l)
	}
	b.st.DelNode(id)
	delete(b.retry, id)
	delete(b.handshake, id)
}

// rename gives a handshake node the name its PONG revealed
// (clusterRenameNode). The State keys nodes by name, so the node is
// re-added under the new one, with its link following it.
func (b *Bus) rename(n *Node, id string) *Node {
	old := n.ID
	c := *n
	c.ID = id
	b.st.DelNode(old)
	b.st.AddNode(&c)
	delete(b.handshake, old)
	delete(b.retry, old)
	if l := b.outbound[old]; l != nil {
		delete(b.outbound, old)
		l.node = id
		b.outbound[id] = l
	}
	return &c
}

// dial connects to a node's bus port in the background. The PING it
// will carry counts as sent from now on if none is outstanding, so that
// a node that cannot be reached at all still times out.
func (b *Bus) dial(n *Node) {
	id := n.ID
	addr := net.JoinHostPort(n.IP, strconv.Itoa(int(n.CPort)))
	if n.PingSent == 0 && !n.Handshake() {
		n.PingSent = b.nowMS()
	}
	b.dialing[id] = true
	timeout := time.Duration(b.handshakeTimeout()) * time.Millisecond
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		var conn net.Conn
		var err error
		if b.cfg.DialTLS != nil {
			d := tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: b.cfg.DialTLS}
			conn, err = d.DialContext(b.ctx, "tcp", addr)
		} else {
			d := net.Dialer{Timeout: timeout}
			conn, err = d.DialContext(b.ctx, "tcp", addr)
		}
		if !b.post(func() { b.dialed(id, addr, conn, err) }) && conn != nil {
			conn.Close()
		}
	}()
}

func (b *Bus) dialed(id, addr string, conn net.Conn, err error) {
	delete(b.dialing, id)
	n := b.st.Node(id)
	if err != nil {
		if n != nil {
			// Back off up to the node timeout: a node that is down is
			// retried often enough to be seen back within it.
			r := b.retry[id]
			r.backoff = min(max(2*r.backoff, CronInterval.Milliseconds()), b.st.NodeTimeout)
			r.next = b.nowMS() + r.backoff
			b.retry[id] = r
			b.log.Debug("cluster bus: connect", "node", id, "addr", addr, "err", err)
		}
		return
	}
	if n == nil || b.outbound[id] != nil || net.JoinHostPort(n.IP, strconv.Itoa(int(n.CPort))) != addr {
		conn.Close()
		return
	}
	delete(b.retry, id)
	l := b.addLink(conn, false, id)
	if l == nil {
		return
	}
	b.outbound[id] = l
	n.Linked = true
	typ := TypePing
	if n.Flags&NodeMeet != 0 {
		typ = TypeMeet
		n.Flags &^= NodeMeet
	}
	b.sendPing(l, n, typ)
	if !n.Handshake() && b.cfg.OnLinked != nil {
		b.cfg.OnLinked(id)
	}
}

// header is a message from myself with clusterBuildMessageHdr's header:
// a replica speaks for its master's slots and config epoch.
func (b *Bus) header(typ uint16) *Msg {
	st := b.st
	me := st.Me()
	master := me
	if me.IsSlave() && st.Node(me.Master) != nil {
		master = st.Node(me.Master)
	}
	m := &Msg{
		Type: typ, Port: me.Port, CPort: me.CPort, PPort: me.PPort,
		CurrentEpoch: st.CurrentEpoch, ConfigEpoch: master.ConfigEpoch,
		Sender: NameOf(me.ID), MySlots: st.SlotsOf(master.ID),
		Flags: me.Flags, State: st.Status,
	}
	if me.IsSlave() && me.Master != "" {
		m.SlaveOf = NameOf(me.Master)
	}
	if st.pausedForFailover() {
		m.MFlags[0] |= Flag0Paused
	}
	if b.cfg.Offset != nil {
		m.Offset = uint64(max(b.cfg.Offset(), 0))
	}
	if b.cfg.IP != "" {
		m.MyIP = IPOf(b.cfg.IP)
	}
	return m
}

// sendPing sends a PING, PONG or MEET with gossip as clusterSendPing
// chooses it: about a tenth of the nodes, at least three when there are
// that many others, picked at random among those worth telling of, and
// then every PFAIL node, whose failure reports are what turns a PFAIL
// into a FAIL.
func (b *Bus) sendPing(l *link, to *Node, typ uint16) {
	st := b.st
	nodes := st.Nodes()
	fresh := len(nodes) - 2
	wanted := max(len(nodes)/10, 3)
	wanted = min(wanted, fresh)
	m := b.header(typ)
	in := map[string]bool{}
	add := func(n *Node) {
		in[n.ID] = true
		m.Gossip = append(m.Gossip, Gossip{
			Name: NameOf(n.ID), PingSent: uint32(n.PingSent / 1000), PongReceived: uint32(n.PongReceived / 1000),
			IP: IPOf(n.IP), Port: n.Port, CPort: n.CPort, Flags: n.Flags, PPort: n.PPort,
		})
	}
	for tries := wanted * 3; fresh > 0 && len(m.Gossip) < wanted && tries > 0; tries-- {
		n := nodes[rand.IntN(len(nodes))]
		if n.ID == st.Myself || n.TimedOut() {
			continue
		}
		if n.Flags&(NodeHandshake|NodeNoAddr) != 0 || (!n.Linked && n.NumSlots == 0) {
			fresh--
			continue
		}
		if in[n.ID] {
			continue
		}
		add(n)
		fresh--
	}
	for _, n := range nodes {
		if n.TimedOut() && n.Flags&(NodeHandshake|NodeNoAddr) == 0 && !in[n.ID] {
			add(n)
		}
	}
	if h := st.Me().Hostname; h != "" {
		m.Exts = AppendHostnameExt(nil, h)
	}
	if to != nil && (typ == TypePing || typ == TypeMeet) && to.PingSent == 0 {
		to.PingSent = b.nowMS()
	}
	b.send(l, m)
}

// receive handles one message from a link: the link-level part of
// clusterProcessPacket (handshakes, PONG replies, learning myself's
// address) here, the rest in State.Receive.
func (b *Bus) receive(l *link, m *Msg) {
	if _, ok := b.links[l]; !ok {
		return
	}
	st := b.st
	now := b.nowMS()
	var c Changes
	sender := st.Node(m.Sender.String())
	if sender != nil && sender.Handshake() {
		sender = nil
	}
	if sender != nil && l.inbound && b.inbound[sender.ID] != l {
		// A node has one inbound link: a newer one replaces it.
		if old := b.inbound[sender.ID]; old != nil {
			b.dropLink(old)
		}
		b.inbound[sender.ID] = l
		l.node = sender.ID
	}
	if isPing(m.Type) {
		if me := st.Me(); b.cfg.IP == "" && (m.Type == TypeMeet || me.IP == "") {
			if host, _, err := net.SplitHostPort(l.conn.LocalAddr().String()); err == nil && me.IP != host {
				me.IP = host
				c.Save = true
			}
		}
		if m.Type == TypeMeet && sender == nil {
			b.startHandshake(b.peerIP(l, m), m.Port, m.CPort, false)
			c.Save = true
		}
		if !l.inbound {
			if n := st.Node(l.node); n != nil && n.Handshake() {
				if sender != nil {
					// Already known by name: this handshake was redundant,
					// but it may have found the node at a new address.
					if b.updateAddress(sender, l, m) {
						c.Save, c.UpdateState = true, true
					}
					b.forget(n.ID)
					b.finish(c, nil, now)
					return
				}
				n = b.rename(n, m.Sender.String())
				n.Flags = n.Flags&^(NodeHandshake|NodeMeet) | m.Flags&(NodeMaster|NodeSlave)
				c.Save = true
				if b.cfg.OnLinked != nil {
					b.cfg.OnLinked(n.ID)
				}
			} else if n != nil && m.Type == TypePong && n.ID != m.Sender.String() {
				// Another node answers at this address now: the one we
				// knew there has moved, and is reachable only once
				// gossip says where.
				n.Flags |= NodeNoAddr
				n.IP, n.Port, n.CPort = "", 0, 0
				b.dropLink(l)
				c.Save = true
				b.finish(c, nil, now)
				return
			}
		}
		if m.Type == TypePing || m.Type == TypeMeet {
			b.sendPing(l, nil, TypePong)
		}
		if sender != nil && m.Type == TypePing && b.updateAddress(sender, l, m) {
			c.Save, c.UpdateState = true, true
		}
	}
	if sender != nil {
		b.relay(sender, m)
	}
	c.merge(st.Receive(m, !l.inbound, now))
	b.finish(c, l, now)
}

// peerIP is the sender's announced IP, or else the link's peer address.
func (b *Bus) peerIP(l *link, m *Msg) string {
	if ip := m.MyIP.String(); ip != "" {
		return ip
	}
	host, _, _ := net.SplitHostPort(l.conn.RemoteAddr().String())
	return host
}

// finish acts on what the state decided: an UPDATE back on the link the
// stale claim came on, a FAIL broadcast for each node found failing,
// the cluster status, and saving.
func (b *Bus) finish(c Changes, l *link, now int64) {
	st := b.st
	// A step of the failover may call for the next at once (a vote that
	// completes the majority, a manual failover that may start).
	for i := 0; c.HandleFailover && i < 4; i++ {
		c.HandleFailover = false
		c.merge(b.failoverStep(now))
	}
	for _, line := range c.Log {
		b.log.Warn("cluster: " + line)
	}
	if c.SendUpdate != "" && l != nil {
		if n := st.Node(c.SendUpdate); n != nil {
			m := b.header(TypeUpdate)
			m.Update = &Update{ConfigEpoch: n.ConfigEpoch, Node: NameOf(n.ID), Slots: st.SlotsOf(n.ID)}
			b.send(l, m)
		}
	}
	for _, id := range c.Failed {
		b.broadcast(func() *Msg {
			m := b.header(TypeFail)
			m.About = NameOf(id)
			return m
		})
	}
	if c.BecomeReplicaOf != "" {
		wasPaused := st.mf.replica != ""
		if st.SetMyMaster(c.BecomeReplicaOf) {
			// clusterSetMaster ends any manual failover.
			st.mf = manualFailover{}
			c.Unpause = c.Unpause || wasPaused
			c.Save, c.UpdateState = true, true
		}
	}
	if len(c.LostSlots) > 0 && b.cfg.OnLostSlots != nil {
		b.cfg.OnLostSlots(c.LostSlots)
	}
	if c.Unpause && b.cfg.OnUnpause != nil {
		b.cfg.OnUnpause()
	}
	if c.PauseUntil != 0 && b.cfg.OnPause != nil {
		b.cfg.OnPause(c.PauseUntil)
	}
	if c.UpdateState || len(c.Failed) > 0 {
		st.UpdateState(now)
	}
	saved := true
	if c.SaveSync {
		// A vote, or a config epoch won, is on disk before anyone hears
		// of it: a node that restarts must not vote twice in one epoch.
		// A vote that could not be saved is not given.
		saved = b.save(true) == nil
		c.Save = c.Save && !saved
	}
	if c.GrantVote != "" && saved {
		if n := st.Node(c.GrantVote); n != nil {
			b.send(b.outbound[n.ID], b.header(TypeFailoverAuthAck))
		}
	}
	if c.RequestVotes {
		b.broadcast(func() *Msg {
			m := b.header(TypeFailoverAuthRequest)
			if c.ForceAck {
				m.MFlags[0] |= Flag0ForceAck
			}
			return m
		})
	}
	if c.SendMFStart != "" {
		b.send(b.outbound[c.SendMFStart], b.header(TypeMFStart))
	}
	if c.PongReplicas {
		for _, r := range st.Replicas(st.Me().Master) {
			if r.ID != st.Myself && b.outbound[r.ID] != nil {
				b.sendPing(b.outbound[r.ID], nil, TypePong)
			}
		}
	}
	if c.Announce {
		// Other nodes send clients here as soon as they hear: the
		// requests here must be routed by what they hear first, or a
		// client is sent back and forth until it gives up.
		b.publishRouting()
		b.broadcastPong()
	}
	if c.Save {
		b.save(false)
	}
}

// failoverStep runs a replica's failover steps, and ends a manual
// failover whose time is up on either side.
func (b *Bus) failoverStep(now int64) Changes {
	st := b.st
	var ri ReplicaInfo
	if b.cfg.ReplicaInfo != nil && st.Me().IsSlave() {
		ri = b.cfg.ReplicaInfo()
	}
	c := st.manualFailoverTick(now, ri)
	if st.Me().IsSlave() {
		c.merge(st.HandleFailover(now, ri, rand.Int64N))
	}
	return c
}

// broadcast sends a message to every node with a link but handshakes.
func (b *Bus) broadcast(mk func() *Msg) {
	for id, l := range b.outbound {
		if n := b.st.Node(id); n != nil && !n.Handshake() {
			b.send(l, mk())
		}
	}
}

// cron is clusterCron's link work, every CronInterval: connecting to
// nodes without a link, expiring handshakes, pinging one random node a
// second and every node whose PONG is older than half the node timeout,
// dropping links that have gone quiet, and failure detection.
func (b *Bus) cron() {
	st := b.st
	now := b.nowMS()
	timeout := st.NodeTimeout
	b.iteration++
	var c Changes
	for _, n := range st.Nodes() {
		if n.ID == st.Myself || n.Flags&NodeNoAddr != 0 || n.IP == "" || n.CPort == 0 {
			continue
		}
		if n.Handshake() && now-b.handshake[n.ID] > b.handshakeTimeout() {
			b.forget(n.ID)
			c.Save = true
			continue
		}
		if b.outbound[n.ID] == nil && !b.dialing[n.ID] && now >= b.retry[n.ID].next {
			b.dial(n)
		}
	}
	if b.iteration%10 == 0 {
		nodes := st.Nodes()
		var oldest *Node
		for range 5 {
			n := nodes[rand.IntN(len(nodes))]
			if n.ID == st.Myself || n.Handshake() || b.outbound[n.ID] == nil || n.PingSent != 0 {
				continue
			}
			if oldest == nil || n.PongReceived < oldest.PongReceived {
				oldest = n
			}
		}
		if oldest != nil {
			b.sendPing(b.outbound[oldest.ID], oldest, TypePing)
		}
	}
	for _, n := range st.Nodes() {
		if n.ID == st.Myself || n.Flags&(NodeNoAddr|NodeHandshake) != 0 {
			continue
		}
		l := b.outbound[n.ID]
		if l == nil {
			continue
		}
		if now-l.created > timeout && n.PingSent != 0 && now-n.PingSent > timeout/2 && now-n.DataReceived > timeout/2 {
			// The link may be stuck rather than the node down: make
			// a new one, the ping still counting as outstanding.
			b.dropLink(l)
			continue
		}
		if n.PingSent == 0 && now-n.PongReceived > timeout/2 {
			b.sendPing(l, n, TypePing)
		}
	}
	if limit := b.sendBufLimit.Load(); limit > 0 {
		for l := range b.links {
			if used := l.queuedCap.Load(); used > limit {
				b.log.Warn("cluster bus: dropping a link over cluster-link-sendbuf-limit", "peer", l.conn.RemoteAddr().String(), "node", l.node, "bytes", used)
				b.dropLink(l)
				st.LinksBufferLimitExceeded++
			}
		}
	}
	if st.mf.end != 0 && st.Me().IsMaster() && st.mf.paused {
		// The replica taking over learns the paused offset from these.
		if l := b.outbound[st.mf.replica]; l != nil {
			b.sendPing(l, st.Node(st.mf.replica), TypePing)
		}
	}
	c.merge(st.Tick(now))
	c.merge(b.failoverStep(now))
	c.merge(st.ReplicaMigration(now))
	st.UpdateState(now)
	b.finish(c, nil, now)
}
