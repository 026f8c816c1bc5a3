package cluster

import "slices"

// Changes is what one input did to a State, for the caller to act on:
// the state only decides, the caller saves, sends and reconfigures.
type Changes struct {
	// Save: nodes.conf no longer matches the state.
	Save bool
	// UpdateState: the cluster's ok/fail status may have changed;
	// call UpdateState.
	UpdateState bool
	// SendUpdate names the node whose slots the sender claims with a
	// stale config: send the sender an UPDATE about it.
	SendUpdate string
	// NewNodes are nodes that gossip introduced, to connect to.
	NewNodes []string
	// Failed are nodes this input marked FAIL by quorum: broadcast a
	// FAIL about each.
	Failed []string
	// BecomeReplicaOf names the master myself must now replicate,
	// having lost its slots (or its master's) to it.
	BecomeReplicaOf string
	// LostSlots are slots myself owned and lost while remaining a
	// master: their keys are to be deleted.
	LostSlots []uint16
	// Announce: myself's config changed in a way every node must hear
	// of at once rather than at the next PINGs (clusterBroadcastPong).
	Announce bool
	// SaveSync: nodes.conf must be written and synced before anything
	// else goes out (a vote, a new config epoch).
	SaveSync bool

	// HandleFailover: run the failover steps again now rather than at
	// the next cron (CLUSTER_TODO_HANDLE_FAILOVER).
	HandleFailover bool
	// RequestVotes: broadcast a FAILOVER_AUTH_REQUEST, flagged ForceAck
	// in a manual failover.
	RequestVotes, ForceAck bool
	// GrantVote names the replica to send a FAILOVER_AUTH_ACK to.
	GrantVote string
	// SendMFStart names the master to send an MFSTART to.
	SendMFStart string
	// PongReplicas: send a PONG to the other replicas of myself's
	// master, so that they rank themselves with myself's offset.
	PongReplicas bool
	// PauseUntil (ms) asks the server to pause writes for a manual
	// failover, and to ConfirmPaused once none is running; Unpause asks
	// it to resume them.
	PauseUntil int64
	Unpause    bool
	// Log are the events worth a line in the server's log.
	Log []string
}

func (c *Changes) merge(o Changes) {
	c.Save = c.Save || o.Save
	c.UpdateState = c.UpdateState || o.UpdateState
	if o.SendUpdate != "" {
		c.SendUpdate = o.SendUpdate
	}
	c.NewNodes = append(c.NewNodes, o.NewNodes...)
	c.Failed = append(c.Failed, o.Failed...)
	if o.BecomeReplicaOf != "" {
		c.BecomeReplicaOf = o.BecomeReplicaOf
	}
	c.LostSlots = append(c.LostSlots, o.LostSlots...)
	c.Announce = c.Announce || o.Announce
	c.SaveSync = c.SaveSync || o.SaveSync
	c.HandleFailover = c.HandleFailover || o.HandleFailover
	c.RequestVotes = c.RequestVotes || o.RequestVotes
	c.ForceAck = c.ForceAck || o.ForceAck
	if o.GrantVote != "" {
		c.GrantVote = o.GrantVote
	}
	if o.SendMFStart != "" {
		c.SendMFStart = o.SendMFStart
	}
	c.PongReplicas = c.PongReplicas || o.PongReplicas
	c.PauseUntil = max(c.PauseUntil, o.PauseUntil)
	c.Unpause = c.Unpause || o.Unpause
	c.Log = append(c.Log, o.Log...)
}

// AddFailureReport records that sender reports failing as failing at
// now, and reports whether the report is new rather than a refresh.
func (s *State) AddFailureReport(failing, sender *Node, now int64) bool {
	for i := range failing.FailReports {
		if failing.FailReports[i].Sender == sender.ID {
			failing.FailReports[i].Time = now
			return false
		}
	}
	failing.FailReports = append(failing.FailReports, FailReport{sender.ID, now})
	return true
}

// CleanupFailureReports drops n's reports older than
// FailReportValidityMult node timeouts: a FAIL needs agreement that is
// current, and a local PFAIL lasts at least one node timeout anyway.
func (s *State) CleanupFailureReports(n *Node, now int64) {
	max := s.NodeTimeout * FailReportValidityMult
	n.FailReports = slices.DeleteFunc(n.FailReports, func(r FailReport) bool { return now-r.Time > max })
}

// DelFailureReport drops sender's report on n, for a sender that now
// sees n as up, and reports whether there was one.
func (s *State) DelFailureReport(n, sender *Node, now int64) bool {
	i := slices.IndexFunc(n.FailReports, func(r FailReport) bool { return r.Sender == sender.ID })
	if i < 0 {
		return false
	}
	n.FailReports = slices.Delete(n.FailReports, i, i+1)
	s.CleanupFailureReports(n, now)
	return true
}

// FailureReports counts the current reports on n.
func (s *State) FailureReports(n *Node, now int64) int {
	s.CleanupFailureReports(n, now)
	return len(n.FailReports)
}

// markFailingIfNeeded turns n's PFAIL into FAIL once a majority of the
// slot-owning masters (myself among them when a master) agree, as
// markNodeAsFailingIfNeeded does, and reports whether it did.
func (s *State) markFailingIfNeeded(n *Node, now int64) bool {
	if !n.TimedOut() || n.Failed() {
		return false
	}
	failures := s.FailureReports(n, now)
	if s.Me().IsMaster() {
		failures++
	}
	if failures < s.Size/2+1 {
		return false
	}
	n.Flags &^= NodePFail
	n.Flags |= NodeFail
	n.FailTime = now
	return true
}

// clearFailureIfNeeded lifts a FAIL from a node that is reachable again
// when nothing is gained by keeping it (clearNodeFailureIfNeeded): a
// replica or a master without slots at once, a master with slots only
// after FailUndoTimeMult node timeouts, when evidently no replica is
// taking over.
func (s *State) clearFailureIfNeeded(n *Node, now int64) bool {
	if !n.Failed() {
		return false
	}
	if n.IsSlave() || n.NumSlots == 0 {
		n.Flags &^= NodeFail
		return true
	}
	if n.IsMaster() && now-n.FailTime > s.NodeTimeout*FailUndoTimeMult {
		n.Flags &^= NodeFail
		return true
	}
	return false
}

// Tick does clusterCron's failure detection at now: a node with a ping
// outstanding and no traffic for longer than the node timeout becomes
// PFAIL. The caller sends the pings and records them in PingSent.
func (s *State) Tick(now int64) Changes {
	var c Changes
	for _, n := range s.Nodes() {
		if n.Flags&(NodeMyself|NodeNoAddr|NodeHandshake) != 0 || n.PingSent == 0 {
			continue
		}
		delay := min(now-n.PingSent, now-n.DataReceived)
		if delay > s.NodeTimeout && n.Flags&(NodePFail|NodeFail) == 0 {
			n.Flags |= NodePFail
			c.UpdateState = true
		}
	}
	return c
}

// Receive applies a message from a connected node, as
// clusterProcessPacket does for the state it keeps. outbound is whether
// it came on the link this node opened, the one its PINGs go out on: only
// a PONG there answers them.
func (s *State) Receive(m *Msg, outbound bool, now int64) Changes {
	var c Changes
	if m.Type < typeCount {
		s.StatsReceived[m.Type]++
	}
	sender := s.nodes[m.Sender.String()]
	if sender != nil && sender.Handshake() {
		// Until the handshake names it, a node's word counts for nothing.
		sender = nil
	}
	if sender != nil {
		sender.DataReceived = now
		if m.CurrentEpoch > s.CurrentEpoch {
			s.CurrentEpoch = m.CurrentEpoch
		}
		if m.ConfigEpoch > sender.ConfigEpoch {
			sender.ConfigEpoch = m.ConfigEpoch
			c.Save = true
		}
		sender.ReplOffset = int64(m.Offset)
		if s.noteMasterOffset(m, sender) {
			c.HandleFailover = true
			c.Log = append(c.Log, "Received replication offset for paused master manual failover: "+itoa(int64(m.Offset)))
		}
	}
	switch m.Type {
	case TypePing, TypePong, TypeMeet:
		if sender != nil {
			c.merge(s.receivePing(m, sender, outbound, now))
		}
	case TypeFail:
		if sender == nil {
			break
		}
		if f := s.nodes[m.About.String()]; f != nil && f.Flags&(NodeFail|NodeMyself) == 0 {
			f.Flags |= NodeFail
			f.Flags &^= NodePFail
			f.FailTime = now
			c.Save, c.UpdateState = true, true
		}
	case TypeFailoverAuthRequest, TypeFailoverAuthAck, TypeMFStart:
		if sender != nil {
			c.merge(s.receiveFailoverMsg(m, sender, now))
		}
	case TypeUpdate:
		if sender == nil || m.Update == nil {
			break
		}
		n := s.nodes[m.Update.Node.String()]
		if n == nil || n.ConfigEpoch >= m.Update.ConfigEpoch {
			break
		}
		if n.IsSlave() {
			s.setMaster(n)
		}
		n.ConfigEpoch = m.Update.ConfigEpoch
		c.Save = true
		c.merge(s.updateSlotsConfigWith(n, m.Update.ConfigEpoch, &m.Update.Slots))
	}
	return c
}

func (s *State) receivePing(m *Msg, sender *Node, outbound bool, now int64) Changes {
	var c Changes
	sender.Flags = sender.Flags&^NodeNoFailover | m.Flags&NodeNoFailover

	if outbound && m.Type == TypePong {
		sender.PongReceived = now
		sender.PingSent = 0
		if sender.TimedOut() {
			sender.Flags &^= NodePFail
			c.Save, c.UpdateState = true, true
		} else if s.clearFailureIfNeeded(sender, now) {
			c.Save, c.UpdateState = true, true
		}
	}

	// Role switches.
	if m.SlaveOf.IsZero() {
		if !sender.IsMaster() {
			s.setMaster(sender)
			c.Save, c.UpdateState = true, true
		}
	} else {
		if sender.IsMaster() {
			for j := range s.Owner {
				if s.Owner[j] == sender.ID {
					s.SetOwner(uint16(j), "")
				}
			}
			sender.Flags &^= NodeMaster | NodeMigrateTo
			sender.Flags |= NodeSlave
			c.Save, c.UpdateState = true, true
		}
		if id := m.SlaveOf.String(); s.nodes[id] != nil && sender.Master != id {
			sender.Master = id
			// A master that had a replica may be given another when it
			// loses it (clusterNodeAddSlave).
			s.nodes[id].Flags |= NodeMigrateTo
			c.Save = true
		}
	}

	// Slot claims: compared with what is known of the sender's shard.
	var senderMaster *Node
	if sender.IsMaster() {
		senderMaster = sender
	} else {
		senderMaster = s.nodes[sender.Master]
	}
	dirty := false
	if senderMaster != nil {
		dirty = s.SlotsOf(senderMaster.ID) != m.MySlots
	}
	if sender.IsMaster() && dirty {
		c.merge(s.updateSlotsConfigWith(sender, m.ConfigEpoch, &m.MySlots))
	}
	if dirty {
		c.SendUpdate = s.staleClaim(sender, m.ConfigEpoch, &m.MySlots)
	}

	if s.Me().IsMaster() && sender.IsMaster() && m.ConfigEpoch == s.Me().ConfigEpoch {
		if s.handleEpochCollision(sender) {
			c.Save = true
		}
	}

	c.merge(s.processGossip(m, sender, now))
	if h := m.Hostname(); h != sender.Hostname {
		sender.Hostname = h
		c.Save = true
	}
	return c
}

// setMaster makes n a master (clusterSetNodeAsMaster). A node that
// stopped replicating is eligible for replica migration.
func (s *State) setMaster(n *Node) {
	if n.IsMaster() {
		return
	}
	if n.Master != "" && n.ID != s.Myself {
		n.Flags |= NodeMigrateTo
	}
	n.Flags &^= NodeSlave
	n.Flags |= NodeMaster
	n.Master = ""
}

// staleClaim finds the first slot the sender claims that a node with a
// greater config epoch owns, and names that node, which the sender must
// be told of with an UPDATE; "" when the claims are current. A slot
// whose owner stopped claiming it proves nothing.
func (s *State) staleClaim(sender *Node, epoch uint64, slots *[SlotBytes]byte) string {
	for j := range uint16(Slots) {
		if !HasSlot(slots, j) || s.Owner[j] == sender.ID || s.unclaimed(j) {
			continue
		}
		if o := s.nodes[s.Owner[j]]; o != nil && o.ConfigEpoch > epoch {
			return o.ID
		}
	}
	return ""
}

// updateSlotsConfigWith applies a master's slot claims at a config epoch
// (clusterUpdateSlotsConfigWith): a claimed slot goes to the claimer if
// it is unassigned or its owner's config epoch is lower, unless this
// node is importing it, which only an operator ends. If that left
// myself's shard without slots, myself is to replicate the claimer.
func (s *State) updateSlotsConfigWith(sender *Node, epoch uint64, slots *[SlotBytes]byte) Changes {
	var c Changes
	if sender.ID == s.Myself {
		return c
	}
	me := s.Me()
	cur := me
	if !me.IsMaster() {
		cur = s.nodes[me.Master]
	}
	var newMaster *Node
	senderSlots, migrated := 0, 0
	for j := range uint16(Slots) {
		if !HasSlot(slots, j) {
			if s.Owner[j] == sender.ID {
				s.notClaiming[j>>3] |= 1 << (j & 7)
			}
			continue
		}
		senderSlots++
		if s.Owner[j] == sender.ID {
			s.notClaiming[j>>3] &^= 1 << (j & 7)
			continue
		}
		if _, ok := s.Importing[j]; ok {
			continue
		}
		owner := s.nodes[s.Owner[j]]
		if !s.unclaimed(j) && (owner == nil || owner.ConfigEpoch >= epoch) {
			continue
		}
		if s.Owner[j] == s.Myself {
			c.LostSlots = append(c.LostSlots, j)
		}
		if cur != nil && s.Owner[j] == cur.ID {
			newMaster = sender
			migrated++
		}
		s.SetOwner(j, sender.ID)
		c.Save, c.UpdateState = true, true
	}
	switch {
	case newMaster != nil && cur.NumSlots == 0 && (s.AllowReplicaMigration || senderSlots == migrated):
		c.BecomeReplicaOf = sender.ID
		c.LostSlots = nil // a replica resyncs its whole data set anyway
	case me.Master != "" && s.nodes[me.Master] != nil && s.nodes[me.Master].Master != "" &&
		s.nodes[me.Master].Master != s.Myself:
		// A sub-replica: follow the grandmaster.
		c.BecomeReplicaOf = s.nodes[me.Master].Master
		c.LostSlots = nil
	}
	return c
}

// handleEpochCollision resolves two masters sharing a config epoch
// (clusterHandleConfigEpochCollision): the one with the smaller ID takes
// a new epoch, so that the greatest ID never moves and all end distinct.
func (s *State) handleEpochCollision(sender *Node) bool {
	me := s.Me()
	if sender.ConfigEpoch != me.ConfigEpoch || !sender.IsMaster() || !me.IsMaster() {
		return false
	}
	if sender.ID <= me.ID {
		return false
	}
	s.CurrentEpoch++
	me.ConfigEpoch = s.CurrentEpoch
	return true
}

// processGossip applies a message's gossip entries
// (clusterProcessGossipSection).
func (s *State) processGossip(m *Msg, sender *Node, now int64) Changes {
	var c Changes
	for i := range m.Gossip {
		g := &m.Gossip[i]
		n := s.nodes[g.Name.String()]
		if n == nil {
			// Only a known node's word adds a node, by name rather than
			// by address: an address may belong to another cluster now.
			if g.Flags&NodeNoAddr == 0 && !s.Blacklisted(g.Name.String(), now) {
				n = &Node{
					ID: g.Name.String(), Flags: g.Flags,
					IP: g.IP.String(), Port: g.Port, CPort: g.CPort, PPort: g.PPort,
				}
				s.AddNode(n)
				c.NewNodes = append(c.NewNodes, n.ID)
				c.Save = true
			}
			continue
		}
		failing := g.Flags&(NodeFail|NodePFail) != 0
		if sender.IsMaster() && n.ID != s.Myself {
			if failing {
				s.AddFailureReport(n, sender, now)
				if s.markFailingIfNeeded(n, now) {
					c.Failed = append(c.Failed, n.ID)
					c.Save, c.UpdateState = true, true
				}
			} else {
				s.DelFailureReport(n, sender, now)
			}
		}
		if !failing && n.PingSent == 0 && s.FailureReports(n, now) == 0 {
			pong := int64(g.PongReceived) * 1000
			if pong <= now+500 && pong > n.PongReceived {
				n.PongReceived = pong
			}
		}
		if n.Flags&(NodeFail|NodePFail) != 0 && g.Flags&NodeNoAddr == 0 && !failing &&
			(n.IP != g.IP.String() || n.Port != g.Port || n.CPort != g.CPort) {
			n.Linked = false
			n.IP, n.Port, n.PPort, n.CPort = g.IP.String(), g.Port, g.PPort, g.CPort
			n.Flags &^= NodeNoAddr
		}
	}
	return c
}
