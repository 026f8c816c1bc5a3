package cluster

// What the bus carries for the server rather than for the cluster's
// state: pub/sub messages and modules' messages.

// Publish relays a PUBLISH to every node, or a PUBLISHSHARD (shard) to
// the other nodes of myself's shard, its master and replicas, which are
// the only ones with subscribers to its channels
// (clusterPropagatePublish).
func (b *Bus) Publish(channel, message []byte, shard bool) {
	channel, message = append([]byte(nil), channel...), append([]byte(nil), message...)
	b.post(func() {
		st := b.st
		if !shard {
			b.broadcast(func() *Msg {
				m := b.header(TypePublish)
				m.Channel, m.Message = channel, message
				return m
			})
			return
		}
		master := st.Me()
		if master.IsSlave() {
			master = st.Node(master.Master)
		}
		if master == nil {
			return
		}
		for _, n := range append([]*Node{master}, st.Replicas(master.ID)...) {
			if n.ID == st.Myself || n.Handshake() {
				continue
			}
			m := b.header(TypePublishShard)
			m.Channel, m.Message = channel, message
			b.send(b.outbound[n.ID], m)
		}
	})
}

// SendModule sends a module message to the node to, or to every node
// when to is "" (clusterSendModule).
func (b *Bus) SendModule(to string, moduleID uint64, typ uint8, payload []byte) {
	payload = append([]byte(nil), payload...)
	b.post(func() {
		mk := func() *Msg {
			m := b.header(TypeModule)
			m.ModuleID, m.ModuleType, m.Payload = moduleID, typ, payload
			return m
		}
		if to == "" {
			b.broadcast(mk)
			return
		}
		if n := b.st.Node(to); n != nil && !n.Handshake() {
			b.send(b.outbound[to], mk())
		}
	})
}

// relay hands the server what a known node sent for it; an unknown
// node's messages are not trusted with the server's clients.
func (b *Bus) relay(sender *Node, m *Msg) {
	switch m.Type {
	case TypePublish, TypePublishShard:
		if b.cfg.OnPublish != nil {
			b.cfg.OnPublish(m.Channel, m.Message, m.Type == TypePublishShard)
		}
	case TypeModule:
		if b.cfg.OnModule != nil {
			b.cfg.OnModule(sender.ID, m.ModuleID, m.ModuleType, m.Payload)
		}
	}
}

// updateAddress takes a known node's address from a PING it sent on a
// link other than the one to it: a node that restarted elsewhere is
// found again (nodeUpdateAddressIfNeeded). The link to the old address
// goes, to be made anew to the new one.
func (b *Bus) updateAddress(n *Node, l *link, m *Msg) bool {
	if l == b.outbound[n.ID] {
		return false
	}
	ip := b.peerIP(l, m)
	if ip == "" || (n.IP == ip && n.Port == m.Port && n.CPort == m.CPort && n.PPort == m.PPort) {
		return false
	}
	n.IP, n.Port, n.CPort, n.PPort = ip, m.Port, m.CPort, m.PPort
	if old := b.outbound[n.ID]; old != nil {
		b.dropLink(old)
	}
	n.Flags &^= NodeNoAddr
	b.log.Warn("cluster: address updated", "node", n.ID, "ip", ip, "port", n.Port)
	return true
}
