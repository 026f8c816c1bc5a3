package cluster

import (
	"errors"
	"strconv"
)

// Failover: a replica taking over its master's slots, by election when
// the master is FAIL, or by CLUSTER FAILOVER; and replica migration. As
// with failure detection, the State decides and the Bus carries out what
// Changes asks for.

// Times Redis 7.0 fixes (cluster.h), in milliseconds.
const (
	// ManualFailoverTimeout bounds a manual failover (CLUSTER_MF_TIMEOUT).
	ManualFailoverTimeout = 5000
	// ManualFailoverPauseMult: the master pauses writes for this many
	// ManualFailoverTimeouts at most (CLUSTER_MF_PAUSE_MULT).
	ManualFailoverPauseMult = 2
	// ReplicaMigrationDelay is how long a master must stay orphaned before
	// a replica migrates to it (CLUSTER_SLAVE_MIGRATION_DELAY), so that
	// its own replicas have time to announce a failover first.
	ReplicaMigrationDelay = 5000
)

// ReplicaInfo is what the server tells the State of myself's
// replication when a failover is considered.
type ReplicaInfo struct {
	// Offset is the replication offset myself has processed.
	Offset int64
	// DataAge is how long, in milliseconds, since myself last heard from
	// its master, or since the link went down: Redis's data_age, with
	// its one-second granularity.
	DataAge int64
}

// election is a replica's failover attempt (clusterState's
// failover_auth_* fields).
type election struct {
	time  int64 // when the election may start, or started
	count int   // votes received
	sent  bool  // the vote request went out
	rank  int
	epoch uint64 // the epoch the votes are asked for
}

// manualFailover is CLUSTER FAILOVER's state on both sides
// (clusterState's mf_* fields).
type manualFailover struct {
	end      int64  // when it is abandoned; 0: none under way
	canStart bool   // replica: the election may go ahead
	replica  string // master: the replica that asked (mf_slave)
	// paused: master, the server has paused writes and let those under
	// way finish, so the offset PINGs carry from now on is final.
	paused bool
	// masterOffset is the paused master's offset, once offsetKnown.
	masterOffset int64
	offsetKnown  bool
}

// FailoverMode is CLUSTER FAILOVER's option.
type FailoverMode int

const (
	FailoverDefault FailoverMode = iota
	FailoverForce
	FailoverTakeover
)

// resetManualFailover ends a manual failover, on either side
// (resetManualFailover); a master that had paused writes for it is to
// resume them.
func (s *State) resetManualFailover(c *Changes) {
	if s.mf.replica != "" {
		c.Unpause = true
	}
	s.mf = manualFailover{}
}

// ManualFailoverUnderway reports whether a manual failover is under way,
// on either side.
func (s *State) ManualFailoverUnderway() bool { return s.mf.end != 0 }

// ManualFailover starts CLUSTER FAILOVER on myself, a replica, at now.
// TAKEOVER takes the master's slots at once under a new config epoch
// of myself's own making; FORCE holds an election at once, without the
// master's agreement on the offset; the default asks the master to pause
// writes (MFSTART) and holds the election once myself has caught up.
func (s *State) ManualFailover(mode FailoverMode, now int64) (Changes, error) {
	var c Changes
	me := s.Me()
	master := s.nodes[me.Master]
	switch {
	case me.IsMaster():
		return c, errors.New("ERR You should send CLUSTER FAILOVER to a replica")
	case master == nil:
		return c, errors.New("ERR I'm a replica but my master is unknown to me")
	case mode == FailoverDefault && (master.Failed() || !master.Linked):
		return c, errors.New("ERR Master is down or failed, please use CLUSTER FAILOVER FORCE")
	}
	s.resetManualFailover(&c)
	s.mf.end = now + ManualFailoverTimeout
	switch mode {
	case FailoverTakeover:
		s.bumpConfigEpochWithoutConsensus()
		s.replaceMaster(&c)
	case FailoverForce:
		s.mf.canStart = true
		c.HandleFailover = true
	default:
		c.SendMFStart = master.ID
	}
	return c, nil
}

// bumpConfigEpochWithoutConsensus gives myself a new config epoch unless
// it has the greatest already (clusterBumpConfigEpochWithoutConsensus).
func (s *State) bumpConfigEpochWithoutConsensus() bool {
	me := s.Me()
	if me.ConfigEpoch == 0 || me.ConfigEpoch != s.MaxEpoch() {
		s.CurrentEpoch++
		me.ConfigEpoch = s.CurrentEpoch
		return true
	}
	return false
}

// manualFailoverTick abandons a manual failover whose time is up
// (manualFailoverCheckTimeout), and on a replica lets the election go
// ahead once myself has processed the paused master's stream
// (clusterHandleManualFailover). A replica that went past the announced
// offset has it all too: a paused master may still replicate expiries.
func (s *State) manualFailoverTick(now int64, ri ReplicaInfo) Changes {
	var c Changes
	if s.mf.end != 0 && s.mf.end < now {
		c.Log = append(c.Log, "Manual failover timed out.")
		s.resetManualFailover(&c)
		return c
	}
	if s.mf.end == 0 || s.mf.canStart || !s.mf.offsetKnown || !s.Me().IsSlave() {
		return c
	}
	if ri.Offset >= s.mf.masterOffset {
		s.mf.canStart = true
		c.HandleFailover = true
		c.Log = append(c.Log, "All master replication stream processed, manual failover can start.")
	}
	return c
}

// rank is myself's rank among its master's replicas: how many that may
// fail over have a greater offset (clusterGetSlaveRank).
func (s *State) rank(offset int64) int {
	rank := 0
	for _, r := range s.Replicas(s.Me().Master) {
		if r.ID != s.Myself && r.Flags&NodeNoFailover == 0 && r.ReplOffset > offset {
			rank++
		}
	}
	return rank
}

// HandleFailover is a replica's failover step at now
// (clusterHandleSlaveFailover): when its master is FAIL, or a manual
// failover may start, it schedules an election after 500 ms, a random
// 0-499 ms, and a second per rank, so that the most up-to-date replica
// asks first and the FAIL has spread; asks every node for a vote under a
// new currentEpoch; and once a majority of the slot-owning masters has
// voted within the auth timeout, takes the slots with the election's
// epoch as its config epoch. rnd(n) is a random number in [0, n).
func (s *State) HandleFailover(now int64, ri ReplicaInfo, rnd func(int64) int64) Changes {
	var c Changes
	me := s.Me()
	manual := s.mf.end != 0 && s.mf.canStart
	authTimeout := max(s.NodeTimeout*2, 2000)
	authRetry := authTimeout * 2
	authAge := now - s.el.time
	master := s.nodes[me.Master]
	if me.IsMaster() || master == nil || (!master.Failed() && !manual) ||
		(me.Flags&NodeNoFailover != 0 && !manual) || master.NumSlots == 0 {
		s.cantFailover = ""
		return c
	}
	dataAge := ri.DataAge
	if dataAge > s.NodeTimeout {
		dataAge -= s.NodeTimeout
	}
	if s.ReplicaValidityFactor > 0 && !manual &&
		dataAge > s.ReplPingPeriod+s.NodeTimeout*s.ReplicaValidityFactor {
		s.cantFail(&c, now, master, "Disconnected from master for longer than allowed. Please check the 'cluster-replica-validity-factor' configuration option.")
		return c
	}
	if authAge > authRetry {
		s.el = election{time: now + 500 + rnd(500), rank: s.rank(ri.Offset)}
		s.el.time += int64(s.el.rank) * 1000
		if s.mf.end != 0 {
			s.el.time, s.el.rank = now, 0
			c.HandleFailover = true
		}
		c.Log = append(c.Log, "Start of election delayed for "+itoa(s.el.time-now)+" milliseconds (rank #"+itoa(int64(s.el.rank))+", offset "+itoa(ri.Offset)+").")
		c.PongReplicas = true
		return c
	}
	if !s.el.sent && s.mf.end == 0 {
		if r := s.rank(ri.Offset); r > s.el.rank {
			s.el.time += int64(r-s.el.rank) * 1000
			s.el.rank = r
		}
	}
	if now < s.el.time {
		s.cantFail(&c, now, master, "Waiting the delay before I can start a new failover.")
		return c
	}
	if authAge > authTimeout {
		s.cantFail(&c, now, master, "Failover attempt expired.")
		return c
	}
	if !s.el.sent {
		s.CurrentEpoch++
		s.el.epoch = s.CurrentEpoch
		s.el.sent = true
		c.RequestVotes = true
		c.ForceAck = s.mf.end != 0
		c.SaveSync, c.UpdateState = true, true
		c.Log = append(c.Log, "Starting a failover election for epoch "+itoa(int64(s.CurrentEpoch))+".")
		return c
	}
	if s.el.count >= s.Size/2+1 {
		c.Log = append(c.Log, "Failover election won: I'm the new master.")
		if me.ConfigEpoch < s.el.epoch {
			me.ConfigEpoch = s.el.epoch
		}
		s.replaceMaster(&c)
		return c
	}
	s.cantFail(&c, now, master, "Waiting for votes, but majority still not reached.")
	return c
}

// cantFail logs why myself cannot fail over yet, as clusterLogCantFailover
// does: once per reason, and not in the first node timeout plus five
// seconds of the master's failure, when waiting is normal.
func (s *State) cantFail(c *Changes, now int64, master *Node, why string) {
	if why == s.cantFailover {
		return
	}
	s.cantFailover = why
	if master.Failed() && now-master.FailTime < s.NodeTimeout+5000 {
		return
	}
	c.Log = append(c.Log, "Currently unable to failover: "+why)
}

// replaceMaster makes myself a master with its master's slots
// (clusterFailoverReplaceYourMaster); the caller has given myself its new
// config epoch.
func (s *State) replaceMaster(c *Changes) {
	me := s.Me()
	old := s.nodes[me.Master]
	if me.IsMaster() || old == nil {
		return
	}
	s.setMaster(me)
	for j := range s.Owner {
		if s.Owner[j] == old.ID {
			s.SetOwner(uint16(j), me.ID)
		}
	}
	c.SaveSync, c.UpdateState, c.Announce = true, true, true
	s.resetManualFailover(c)
	// The votes won are spent: should myself become a replica again and
	// be asked to fail over before the retry time, it must hold a new
	// election, not count these under an epoch the cluster has left
	// behind (Redis keeps them, and promotes itself with a stale epoch).
	s.el.count, s.el.sent = 0, false
}

// grantVote decides a vote asked by node (clusterSendFailoverAuthIfNeeded):
// only a master serving slots votes, once per epoch, for a replica whose
// master is FAIL (or, in a manual failover, up), not twice for one master
// within two node timeouts, and not for claims older than the owners' it
// knows. It reports the refusal's reason, "" when it votes.
func (s *State) grantVote(node *Node, m *Msg, now int64) string {
	me := s.Me()
	if !me.IsMaster() || me.NumSlots == 0 {
		return "-" // not a voter: nothing to log
	}
	if m.CurrentEpoch < s.CurrentEpoch {
		return "reqEpoch (" + itoa(int64(m.CurrentEpoch)) + ") < curEpoch(" + itoa(int64(s.CurrentEpoch)) + ")"
	}
	if s.LastVoteEpoch == s.CurrentEpoch {
		return "already voted for epoch " + itoa(int64(s.CurrentEpoch))
	}
	master := s.nodes[node.Master]
	force := m.MFlags[0]&Flag0ForceAck != 0
	switch {
	case node.IsMaster():
		return "it is a master node"
	case master == nil || !node.IsSlave():
		return "I don't know its master"
	case !master.Failed() && !force:
		return "its master is up"
	}
	if wait := s.NodeTimeout*2 - (now - master.VotedTime); wait > 0 {
		return "can't vote about this master before " + itoa(wait) + " milliseconds"
	}
	for j := range uint16(Slots) {
		if !HasSlot(&m.MySlots, j) || s.unclaimed(j) {
			continue
		}
		if o := s.nodes[s.Owner[j]]; o != nil && o.ConfigEpoch > m.ConfigEpoch {
			return "slot " + itoa(int64(j)) + " epoch (" + itoa(int64(o.ConfigEpoch)) + ") > reqEpoch (" + itoa(int64(m.ConfigEpoch)) + ")"
		}
	}
	s.LastVoteEpoch = s.CurrentEpoch
	master.VotedTime = now
	return ""
}

// receiveFailoverMsg handles the election's and the manual failover's
// messages from a known sender.
func (s *State) receiveFailoverMsg(m *Msg, sender *Node, now int64) Changes {
	var c Changes
	switch m.Type {
	case TypeFailoverAuthRequest:
		if why := s.grantVote(sender, m, now); why == "" {
			c.GrantVote = sender.ID
			c.SaveSync = true
			c.Log = append(c.Log, "Failover auth granted to "+sender.ID+" for epoch "+itoa(int64(s.CurrentEpoch)))
		} else if why != "-" {
			c.Log = append(c.Log, "Failover auth denied to "+sender.ID+": "+why)
		}
	case TypeFailoverAuthAck:
		// Only votes for the request out now count: a vote of an earlier
		// election, delivered late, carries that election's epoch.
		if sender.IsMaster() && sender.NumSlots > 0 && s.el.sent && m.CurrentEpoch >= s.el.epoch {
			s.el.count++
			c.HandleFailover = true
		}
	case TypeMFStart:
		if sender.Master != s.Myself || !s.Me().IsMaster() {
			break
		}
		s.resetManualFailover(&c)
		s.mf.end = now + ManualFailoverTimeout
		s.mf.replica = sender.ID
		c.PauseUntil = now + ManualFailoverTimeout*ManualFailoverPauseMult
		c.Log = append(c.Log, "Manual failover requested by replica "+sender.ID+".")
	}
	return c
}

// ConfirmPaused is the server's word that writes are paused for the
// manual failover under way and that none is still running: the master's
// PINGs carry the PAUSED flag, and their offset, from now on. It reports
// the replica to ping at once, "" when no manual failover waits for it.
func (s *State) ConfirmPaused() string {
	if s.mf.end == 0 || s.mf.replica == "" || !s.Me().IsMaster() {
		return ""
	}
	s.mf.paused = true
	return s.mf.replica
}

// pausedForFailover reports whether myself's messages carry the PAUSED
// flag.
func (s *State) pausedForFailover() bool {
	return s.mf.paused && s.mf.end != 0 && s.Me().IsMaster()
}

// noteMasterOffset takes the offset of myself's master from a message
// flagged PAUSED during a manual failover.
func (s *State) noteMasterOffset(m *Msg, sender *Node) bool {
	me := s.Me()
	if s.mf.end == 0 || !me.IsSlave() || me.Master != sender.ID ||
		m.MFlags[0]&Flag0Paused == 0 || s.mf.offsetKnown {
		return false
	}
	s.mf.masterOffset, s.mf.offsetKnown = int64(m.Offset), true
	return true
}

// nonFailingReplicas counts n's replicas that are not FAIL
// (clusterCountNonFailingSlaves).
func (s *State) nonFailingReplicas(n *Node) int {
	ok := 0
	for _, r := range s.Replicas(n.ID) {
		if !r.Failed() {
			ok++
		}
	}
	return ok
}

// ReplicaMigration moves myself, a replica, to an orphaned master
// (clusterCron's census and clusterHandleSlaveMigration): a master that
// serves slots, had replicas (MIGRATE_TO) and has no working one now,
// for longer than ReplicaMigrationDelay, gets the replica with the
// smallest ID among those of the masters with the most working replicas,
// provided its own master keeps more than MigrationBarrier working ones.
func (s *State) ReplicaMigration(now int64) Changes {
	var c Changes
	me := s.Me()
	if !me.IsSlave() {
		return c
	}
	orphaned, maxReplicas, mine := 0, 0, 0
	for _, n := range s.Nodes() {
		if n.Flags&(NodeMyself|NodeNoAddr|NodeHandshake) != 0 || !n.IsMaster() || n.Failed() {
			continue
		}
		ok := s.nonFailingReplicas(n)
		if ok == 0 && n.NumSlots > 0 && n.Flags&NodeMigrateTo != 0 {
			orphaned++
		}
		maxReplicas = max(maxReplicas, ok)
		if me.Master == n.ID {
			mine = ok
		}
	}
	if orphaned == 0 || maxReplicas < 2 || mine != maxReplicas || !s.AllowReplicaMigration {
		return c
	}
	if s.Status != StateOK {
		return c
	}
	master := s.nodes[me.Master]
	if master == nil {
		return c
	}
	ok := 0
	for _, r := range s.Replicas(master.ID) {
		if r.Flags&(NodeFail|NodePFail) == 0 {
			ok++
		}
	}
	if int64(ok) <= s.MigrationBarrier {
		return c
	}
	candidate := me.ID
	var target *Node
	for _, n := range s.Nodes() {
		okReplicas := 0
		if n.IsMaster() {
			okReplicas = s.nonFailingReplicas(n)
		}
		orphan := !n.IsSlave() && !n.Failed() && n.Flags&NodeMigrateTo != 0 && okReplicas == 0
		if orphan {
			if target == nil && n.NumSlots > 0 {
				target = n
			}
			if n.OrphanedTime == 0 {
				n.OrphanedTime = now
			}
		} else {
			n.OrphanedTime = 0
		}
		if okReplicas == maxReplicas {
			for _, r := range s.Replicas(n.ID) {
				if r.ID < candidate {
					candidate = r.ID
				}
			}
		}
	}
	if target != nil && candidate == me.ID && now-target.OrphanedTime > ReplicaMigrationDelay {
		c.Log = append(c.Log, "Migrating to orphaned master "+target.ID)
		c.BecomeReplicaOf = target.ID
		c.Save = true
	}
	return c
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
