package cluster

import (
	"errors"
	"fmt"
	"net"
	"strings"
)

// The operator's side of the state: what the CLUSTER subcommands do to
// it, with Redis 7.0's checks in Redis's order and its error texts,
// which are whole replies ("ERR ..."), so that the command layer writes
// them as they are.

// BlacklistTTL is how long, in milliseconds, a forgotten node stays out
// of the table whatever gossip says of it (CLUSTER_BLACKLIST_TTL): the
// time an operator has to send FORGET to every node.
const BlacklistTTL = 60_000

func errReply(format string, args ...any) error {
	return errors.New(fmt.Sprintf("ERR "+format, args...))
}

// Lookup is the node with the ID, or Redis's "Unknown node" error.
func (s *State) Lookup(id string) (*Node, error) {
	if n := s.nodes[id]; n != nil {
		return n, nil
	}
	return nil, errReply("Unknown node %s", id)
}

// CheckSlots checks the slots an ADDSLOTS (del false) or DELSLOTS (del
// true) names, range by range in the request's order: each must be free
// (or, to delete, assigned) and named once (checkSlotAssignmentsOrReply).
func (s *State) CheckSlots(ranges []SlotRange, del bool) error {
	var seen [Slots]bool
	for _, r := range ranges {
		for j := int(r.First); j <= int(r.Last); j++ {
			switch {
			case del && s.Owner[j] == "":
				return errReply("Slot %d is already unassigned", j)
			case !del && s.Owner[j] != "":
				return errReply("Slot %d is already busy", j)
			case seen[j]:
				return errReply("Slot %d specified multiple times", j)
			}
			seen[j] = true
		}
	}
	return nil
}

// AddSlots gives myself the slots of ranges (CLUSTER ADDSLOTS and
// ADDSLOTSRANGE). An importing slot stops importing: myself owns it now.
// Nothing is bumped; the next PINGs announce the slots.
func (s *State) AddSlots(ranges []SlotRange) error { return s.updateSlots(ranges, false) }

// DelSlots unassigns the slots of ranges (CLUSTER DELSLOTS and
// DELSLOTSRANGE), whoever owns them.
func (s *State) DelSlots(ranges []SlotRange) error { return s.updateSlots(ranges, true) }

func (s *State) updateSlots(ranges []SlotRange, del bool) error {
	if err := s.CheckSlots(ranges, del); err != nil {
		return err
	}
	owner := s.Myself
	if del {
		owner = ""
	}
	for _, r := range ranges {
		for j := int(r.First); j <= int(r.Last); j++ {
			delete(s.Importing, uint16(j))
			s.SetOwner(uint16(j), owner)
		}
	}
	return nil
}

// FlushSlots unassigns every slot of myself (CLUSTER FLUSHSLOTS); that
// the keyspace is empty is the caller's check.
func (s *State) FlushSlots() {
	for j := range s.Owner {
		if s.Owner[j] == s.Myself {
			s.SetOwner(uint16(j), "")
		}
	}
}

// SetSlot is CLUSTER SETSLOT <slot> <args...>: MIGRATING <id>, IMPORTING
// <id>, STABLE or NODE <id>. keysInSlot counts myself's keys in a slot,
// which NODE must not leave behind. NODE giving away myself's last slot
// makes myself a replica of the new owner (BecomeReplicaOf), and NODE to
// myself on an importing slot takes a new config epoch without consensus
// and announces it at once (Announce).
func (s *State) SetSlot(slot uint16, args []string, keysInSlot func(uint16) int) (Changes, error) {
	var c Changes
	if s.Me().IsSlave() {
		return c, errors.New("ERR Please use SETSLOT only with masters.")
	}
	action := ""
	if len(args) > 0 {
		action = strings.ToLower(args[0])
	}
	target := func() (*Node, error) {
		n := s.nodes[args[1]]
		if n == nil {
			return nil, errReply("I don't know about node %s", args[1])
		}
		if n.IsSlave() {
			return nil, errors.New("ERR Target node is not a master")
		}
		return n, nil
	}
	switch {
	case action == "migrating" && len(args) == 2:
		if s.Owner[slot] != s.Myself {
			return c, errReply("I'm not the owner of hash slot %d", slot)
		}
		n, err := target()
		if err != nil {
			return c, err
		}
		if s.Migrating == nil {
			s.Migrating = map[uint16]string{}
		}
		s.Migrating[slot] = n.ID
	case action == "importing" && len(args) == 2:
		if s.Owner[slot] == s.Myself {
			return c, errReply("I'm already the owner of hash slot %d", slot)
		}
		n, err := target()
		if err != nil {
			return c, err
		}
		if s.Importing == nil {
			s.Importing = map[uint16]string{}
		}
		s.Importing[slot] = n.ID
	case action == "stable" && len(args) == 1:
		delete(s.Importing, slot)
		delete(s.Migrating, slot)
	case action == "node" && len(args) == 2:
		n := s.nodes[args[1]]
		if n == nil {
			return c, errReply("Unknown node %s", args[1])
		}
		if n.IsSlave() {
			return c, errors.New("ERR Target node is not a master")
		}
		keys := keysInSlot(slot)
		if s.Owner[slot] == s.Myself && n.ID != s.Myself && keys != 0 {
			return c, errReply("Can't assign hashslot %d to a different node while I still hold keys for this hash slot.", slot)
		}
		if keys == 0 {
			delete(s.Migrating, slot)
		}
		wasMine := s.Owner[slot] == s.Myself
		s.SetOwner(slot, n.ID)
		if wasMine && n.ID != s.Myself && s.Me().NumSlots == 0 && s.AllowReplicaMigration {
			c.BecomeReplicaOf = n.ID
		}
		if _, importing := s.Importing[slot]; n.ID == s.Myself && importing {
			s.BumpEpoch()
			delete(s.Importing, slot)
			c.Announce = true
		}
	default:
		return c, errors.New("ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP")
	}
	c.Save, c.UpdateState = true, true
	return c, nil
}

// BumpEpoch gives myself a new config epoch without consensus, unless
// it already has the greatest, non-zero one
// (clusterBumpConfigEpochWithoutConsensus); it reports whether it did,
// and myself's config epoch, as CLUSTER BUMPEPOCH answers.
func (s *State) BumpEpoch() (bumped bool, epoch uint64) {
	me := s.Me()
	if me.ConfigEpoch == 0 || me.ConfigEpoch != s.MaxEpoch() {
		s.CurrentEpoch++
		me.ConfigEpoch = s.CurrentEpoch
		return true, me.ConfigEpoch
	}
	return false, me.ConfigEpoch
}

// SetConfigEpoch is CLUSTER SET-CONFIG-EPOCH: only a fresh node, alone
// and at epoch 0, may be given its epoch, so that a new cluster starts
// with distinct epochs without waiting for collisions to resolve.
func (s *State) SetConfigEpoch(epoch int64) error {
	me := s.Me()
	switch {
	case epoch < 0:
		return errReply("Invalid config epoch specified: %d", epoch)
	case len(s.nodes) > 1:
		return errors.New("ERR The user can assign a config epoch only when the node does not know any other node.")
	case me.ConfigEpoch != 0:
		return errors.New("ERR Node config epoch is already non-zero")
	}
	me.ConfigEpoch = uint64(epoch)
	s.CurrentEpoch = max(s.CurrentEpoch, uint64(epoch))
	return nil
}

// Forget is CLUSTER FORGET: the node leaves the table and stays out of
// it for BlacklistTTL from now, whatever gossip says.
func (s *State) Forget(id string, now int64) error {
	n, err := s.Lookup(id)
	switch {
	case err != nil:
		return err
	case n.ID == s.Myself:
		return errors.New("ERR I tried hard but I can't forget myself...")
	case s.Me().IsSlave() && s.Me().Master == n.ID:
		return errors.New("ERR Can't forget my master!")
	}
	s.cleanBlacklist(now)
	if s.blacklist == nil {
		s.blacklist = map[string]int64{}
	}
	s.blacklist[id] = now + BlacklistTTL
	s.DelNode(id)
	return nil
}

// Blacklisted is whether gossip must not add the node back yet.
func (s *State) Blacklisted(id string, now int64) bool {
	s.cleanBlacklist(now)
	_, ok := s.blacklist[id]
	return ok
}

func (s *State) cleanBlacklist(now int64) {
	for id, until := range s.blacklist {
		if until < now {
			delete(s.blacklist, id)
		}
	}
}

// Replicate is CLUSTER REPLICATE's part of the state: myself becomes a
// replica of the master id. hasKeys is whether myself's keyspace holds
// keys, which a master must not have to become a replica.
func (s *State) Replicate(id string, hasKeys bool) error {
	n, err := s.Lookup(id)
	if err != nil {
		return err
	}
	me := s.Me()
	switch {
	case n.ID == s.Myself:
		return errors.New("ERR Can't replicate myself")
	case n.IsSlave():
		return errors.New("ERR I can only replicate a master, not a replica.")
	case me.IsMaster() && (me.NumSlots != 0 || hasKeys):
		return errors.New("ERR To set a master the node must be empty and without assigned slots.")
	}
	s.SetMyMaster(n.ID)
	return nil
}

// SetMyMaster makes myself a replica of the node id (clusterSetMaster):
// a master drops its open slots, which a replica has none of. It reports
// whether myself's master changed.
func (s *State) SetMyMaster(id string) bool {
	me := s.Me()
	if me.IsSlave() && me.Master == id {
		return false
	}
	if me.IsMaster() {
		me.Flags &^= NodeMaster | NodeMigrateTo
		me.Flags |= NodeSlave
		s.Migrating, s.Importing = nil, nil
	}
	me.Master = id
	if n := s.nodes[id]; n != nil {
		n.Flags |= NodeMigrateTo
	}
	return true
}

// ReplicasOf is CLUSTER REPLICAS's (and SLAVES's) list: the replicas
// of the master id.
func (s *State) ReplicasOf(id string) ([]*Node, error) {
	n, err := s.Lookup(id)
	if err != nil {
		return nil, err
	}
	if n.IsSlave() {
		return nil, errors.New("ERR The specified node is not a master")
	}
	return s.Replicas(n.ID), nil
}

// CountFailureReports is CLUSTER COUNT-FAILURE-REPORTS: the current
// reports on the node id.
func (s *State) CountFailureReports(id string, now int64) (int, error) {
	n, err := s.Lookup(id)
	if err != nil {
		return 0, err
	}
	return s.FailureReports(n, now), nil
}

// Reset is CLUSTER RESET (clusterReset): myself becomes a master without
// slots, open slots or other nodes; a hard reset also zeroes the epochs
// and renames myself newID. That a master holds no keys is the caller's
// check.
func (s *State) Reset(hard bool, newID string) {
	me := s.Me()
	if me.IsSlave() {
		s.setMaster(me)
	}
	s.Migrating, s.Importing = nil, nil
	for j := range s.Owner {
		if s.Owner[j] != "" {
			s.SetOwner(uint16(j), "")
		}
	}
	for _, n := range s.Nodes() {
		s.DelNode(n.ID)
	}
	if hard {
		s.CurrentEpoch, s.LastVoteEpoch, me.ConfigEpoch = 0, 0, 0
		delete(s.nodes, me.ID)
		s.order = nil
		me.ID = newID
		s.Myself = newID
		s.AddNode(me)
	}
}

// MeetAddress checks CLUSTER MEET's address as clusterStartHandshake
// does, and gives the IP in its normal form; the error is Redis's reply,
// which quotes the address as the request spelled it.
func MeetAddress(ip, portArg string, port, cport int64) (string, error) {
	p := net.ParseIP(ip)
	if p == nil || port <= 0 || port > 65535 || cport <= 0 || cport > 65535 {
		return "", errReply("Invalid node address specified: %s:%s", ip, portArg)
	}
	return p.String(), nil
}

// The bus's side of the operator's commands: each runs its State
// operation between messages, then saves, updates the status and tells
// the other nodes as Redis does (most changes ride on the next PINGs).

// Admin runs f on the bus's goroutine, then acts on the changes it
// reports as on a message's: saving, the cluster status, a new master,
// lost slots and announcements. The error is f's, or net.ErrClosed.
func (b *Bus) Admin(f func(*State) (Changes, error)) error {
	var err error
	if !b.Do(func(s *State) {
		var c Changes
		c, err = f(s)
		if err == nil {
			b.finish(c, nil, b.nowMS())
		}
	}) {
		return net.ErrClosed
	}
	return err
}

// changed is the Changes of an operation that changed the slots or the
// nodes: saved, and the status decided anew.
func changed(err error) (Changes, error) { return Changes{Save: true, UpdateState: true}, err }

// AddSlots is CLUSTER ADDSLOTS and ADDSLOTSRANGE.
func (b *Bus) AddSlots(ranges []SlotRange) error {
	return b.Admin(func(s *State) (Changes, error) { return changed(s.AddSlots(ranges)) })
}

// DelSlots is CLUSTER DELSLOTS and DELSLOTSRANGE.
func (b *Bus) DelSlots(ranges []SlotRange) error {
	return b.Admin(func(s *State) (Changes, error) { return changed(s.DelSlots(ranges)) })
}

// FlushSlots is CLUSTER FLUSHSLOTS.
func (b *Bus) FlushSlots() error {
	return b.Admin(func(s *State) (Changes, error) { s.FlushSlots(); return changed(nil) })
}

// SetSlot is CLUSTER SETSLOT; see State.SetSlot.
func (b *Bus) SetSlot(slot uint16, args []string, keysInSlot func(uint16) int) error {
	return b.Admin(func(s *State) (Changes, error) { return s.SetSlot(slot, args, keysInSlot) })
}

// Forget is CLUSTER FORGET: the node and its links go.
func (b *Bus) Forget(id string) error {
	return b.Admin(func(s *State) (Changes, error) {
		err := s.Forget(id, b.nowMS())
		if err == nil {
			b.forget(id)
		}
		return changed(err)
	})
}

// Replicate is CLUSTER REPLICATE; OnReplicate hears of the new master.
func (b *Bus) Replicate(id string, hasKeys bool) error {
	return b.Admin(func(s *State) (Changes, error) { return changed(s.Replicate(id, hasKeys)) })
}

// SetConfigEpoch is CLUSTER SET-CONFIG-EPOCH.
func (b *Bus) SetConfigEpoch(epoch int64) error {
	return b.Admin(func(s *State) (Changes, error) { return changed(s.SetConfigEpoch(epoch)) })
}

// BumpEpoch is CLUSTER BUMPEPOCH.
func (b *Bus) BumpEpoch() (bumped bool, epoch uint64, err error) {
	err = b.Admin(func(s *State) (Changes, error) {
		bumped, epoch = s.BumpEpoch()
		return Changes{Save: bumped}, nil
	})
	return bumped, epoch, err
}

// Reset is CLUSTER RESET: every other node and every link goes, and a
// hard reset renames myself.
func (b *Bus) Reset(hard bool) error {
	return b.Admin(func(s *State) (Changes, error) {
		for _, n := range s.Nodes() {
			if n.ID != s.Myself {
				b.forget(n.ID)
			}
		}
		s.Reset(hard, randomName())
		return changed(nil)
	})
}

// SaveConfig is CLUSTER SAVECONFIG: the state saved now, its error
// reported as Redis reports it.
func (b *Bus) SaveConfig() error {
	var err error
	if !b.Do(func(*State) { err = b.save(true) }) {
		return net.ErrClosed
	}
	if err != nil {
		return errReply("error saving the cluster node config: %s", err)
	}
	return nil
}

// save hands the state to BusConfig.Save, logging a failure: the next
// change saves again.
func (b *Bus) save(sync bool) error {
	if b.cfg.Save == nil {
		return nil
	}
	err := b.cfg.Save(b.st, sync)
	if err != nil {
		b.log.Error("cluster: saving the config", "err", err)
	}
	return err
}

// reportMaster tells OnReplicate of a change of myself's master since it
// was last told, whatever changed it.
func (b *Bus) reportMaster() {
	me := b.st.Me()
	master := ""
	if me.IsSlave() {
		master = me.Master
	}
	if master == b.master {
		return
	}
	b.master = master
	if b.cfg.OnReplicate == nil {
		return
	}
	if m := b.st.Node(master); m != nil {
		b.cfg.OnReplicate(m.IP, int(m.Port))
	} else {
		b.cfg.OnReplicate("", 0)
	}
}

// broadcastPong sends every linked node a PONG, so that a change of
// myself's config reaches them before the next PINGs
// (clusterBroadcastPong).
func (b *Bus) broadcastPong() {
	for id, l := range b.outbound {
		if n := b.st.Node(id); n != nil && !n.Handshake() {
			b.sendPing(l, n, TypePong)
		}
	}
}

// LinkInfo is one CLUSTER LINKS entry.
type LinkInfo struct {
	Direction           string // "to": this node opened it; "from": the peer did
	Node                string
	CreateTime          int64 // ms since the epoch
	Events              string
	SendBufferAllocated int64
	SendBufferUsed      int64
}

// Links is CLUSTER LINKS: each node's outbound link, then its inbound
// one, in node order; links not yet tied to a node are left out.
func (b *Bus) Links() []LinkInfo {
	var out []LinkInfo
	b.Do(func(s *State) {
		for _, n := range s.Nodes() {
			for _, l := range []*link{b.outbound[n.ID], b.inbound[n.ID]} {
				if l == nil {
					continue
				}
				li := LinkInfo{Direction: "to", Node: n.ID, CreateTime: l.created, Events: "r",
					SendBufferAllocated: l.queuedCap.Load(), SendBufferUsed: l.queued.Load()}
				if l.inbound {
					li.Direction = "from"
				}
				if li.SendBufferUsed > 0 {
					li.Events = "rw"
				}
				out = append(out, li)
			}
		}
	})
	return out
}

// NodeLine is the node's line of CLUSTER NODES, without its newline, as
// CLUSTER REPLICAS lists it (clusterGenNodeDescription); plaintext as
// for ClusterNodes.
func (s *State) NodeLine(n *Node, plaintext bool) string {
	cn := s.describedNode(n, s.Ranges(n.ID), plaintext)
	return string(cn.AppendLine(nil))
}

// ManualFailover is CLUSTER FAILOVER on myself, a replica: it returns
// Redis's error when it cannot start one, and otherwise acts on it as
// the bus does on any event.
func (b *Bus) ManualFailover(mode FailoverMode) error {
	var err error
	if !b.Do(func(st *State) {
		now := b.nowMS()
		var c Changes
		if c, err = st.ManualFailover(mode, now); err == nil {
			b.finish(c, nil, now)
		}
	}) {
		return net.ErrClosed
	}
	return err
}

// ConfirmPaused is the server's word that writes are paused for the
// manual failover a replica asked for (BusConfig.OnPause) and that none
// is still running: the master's messages carry the PAUSED flag and the
// final offset from now on, and the replica hears it at once.
func (b *Bus) ConfirmPaused() {
	b.Do(func(st *State) {
		if id := st.ConfirmPaused(); id != "" {
			if l := b.outbound[id]; l != nil {
				b.sendPing(l, st.Node(id), TypePing)
			}
		}
	})
}
