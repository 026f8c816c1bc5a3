package cluster

import (
	"strconv"
)

// Routing is what a request needs to know of the cluster to be routed:
// which node serves each slot, the slots migrating and importing here,
// and whether the cluster is up. It is an immutable snapshot the bus
// publishes whenever one of these changes, so that requests route with
// one atomic load and never wait for the bus.
type Routing struct {
	// Nodes are the nodes that own a slot or a migration names, and
	// myself; owner, migrating and importing index them.
	Nodes     []RouteNode
	owner     [Slots]uint16
	migrating map[uint16]uint16 // slot → the node it is migrating to
	importing map[uint16]uint16 // slot → the node it is importing from
	// Myself indexes Nodes; Master is myself's master when myself is
	// a replica (and known), NoNode otherwise.
	Myself, Master uint16
	// OK is whether the cluster is up from this node's view.
	OK bool
	// unsettled: some slot myself serves is migrating, or some slot is
	// importing here.
	unsettled bool
}

// NoNode marks a slot no node serves.
const NoNode = 0xffff

// RouteNode is a node as a redirection names it.
type RouteNode struct {
	ID       string
	IP       string
	Port     uint16
	PPort    uint16
	Hostname string
}

// NewRouting takes the routing snapshot of s.
func NewRouting(s *State) *Routing {
	r := new(Routing)
	r.fill(s, map[string]uint16{})
	return r
}

// fill makes r the routing snapshot of s, reusing r's room; index is
// scratch space.
func (r *Routing) fill(s *State, index map[string]uint16) {
	clear(index)
	clear(r.migrating)
	clear(r.importing)
	r.Nodes = r.Nodes[:0]
	r.Myself, r.Master, r.OK = NoNode, NoNode, s.Status == StateOK
	add := func(id string) uint16 {
		if id == "" {
			return NoNode
		}
		if i, ok := index[id]; ok {
			return i
		}
		n := s.nodes[id]
		if n == nil {
			return NoNode
		}
		i := uint16(len(r.Nodes))
		r.Nodes = append(r.Nodes, RouteNode{ID: n.ID, IP: n.IP, Port: n.Port, PPort: n.PPort, Hostname: n.Hostname})
		index[id] = i
		return i
	}
	r.Myself = add(s.Myself)
	if me := s.Me(); me.IsSlave() {
		r.Master = add(me.Master)
	}
	for _, run := range s.ownerRuns() {
		i := add(run.Owner)
		for j := int(run.First); j <= int(run.Last); j++ {
			r.owner[j] = i
		}
	}
	for slot, id := range s.Migrating {
		if i := add(id); i != NoNode {
			if r.migrating == nil {
				r.migrating = map[uint16]uint16{}
			}
			r.migrating[slot] = i
		}
	}
	for slot, id := range s.Importing {
		if i := add(id); i != NoNode {
			if r.importing == nil {
				r.importing = map[uint16]uint16{}
			}
			r.importing[slot] = i
		}
	}
	r.unsettled = len(r.importing) > 0
	for slot := range r.migrating {
		if r.owner[slot] == r.Myself {
			r.unsettled = true
		}
	}
}

// Unsettled reports whether some slot myself serves is migrating to
// another node, or some slot is importing here. Requests for such a slot
// are routed by which of their keys exist, which can change between the
// routing and the command's run: a server that routes before it locks
// the keys must route those requests again once it holds the locks. In
// a settled snapshot a decision depends on the snapshot alone.
func (r *Routing) Unsettled() bool { return r.unsettled }

// Equal reports whether r and o route every request alike.
func (r *Routing) Equal(o *Routing) bool {
	if r == nil || o == nil {
		return r == o
	}
	if r.Myself != o.Myself || r.Master != o.Master || r.OK != o.OK || r.owner != o.owner ||
		len(r.Nodes) != len(o.Nodes) || len(r.migrating) != len(o.migrating) || len(r.importing) != len(o.importing) {
		return false
	}
	for i := range r.Nodes {
		if r.Nodes[i] != o.Nodes[i] {
			return false
		}
	}
	for k, v := range r.migrating {
		if w, ok := o.migrating[k]; !ok || w != v {
			return false
		}
	}
	for k, v := range r.importing {
		if w, ok := o.importing[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Owner is the node serving slot, ok false when none does.
func (r *Routing) Owner(slot uint16) (RouteNode, bool) {
	i := r.owner[slot]
	if i == NoNode {
		return RouteNode{}, false
	}
	return r.Nodes[i], true
}

// Serves reports whether myself owns slot.
func (r *Routing) Serves(slot uint16) bool { return r.owner[slot] == r.Myself }

// Redirect is the outcome of routing a request (getNodeByQuery's error
// codes).
type Redirect uint8

const (
	// Here: myself serves the request.
	Here Redirect = iota
	Moved
	Ask
	CrossSlot
	// Unstable: a multi-key request in a slot being migrated, with some
	// of its keys here and some gone (TRYAGAIN).
	Unstable
	// DownState: the cluster is down.
	DownState
	// DownReadOnly: the cluster is down and takes only reads.
	DownReadOnly
	// DownUnbound: the slot of the first key is served by no node.
	DownUnbound
)

// Query is one request to route: its keys, and what Redis's
// getNodeByQuery reads of the client and the command.
type Query struct {
	// Exists reports whether a key is here; asked only of keys in a
	// slot migrating from or importing to myself.
	Exists func(key []byte) bool
	// Write: the command, or one queued in the transaction, writes.
	Write bool
	// Asking: the client sent ASKING, or the command acts as if it had.
	Asking bool
	// ReadOnly: the client sent READONLY.
	ReadOnly bool
	// PubSubShard: SPUBLISH, SSUBSCRIBE, SUNSUBSCRIBE; their channels
	// route as keys but are never looked up.
	PubSubShard bool
	// Migrate: MIGRATE, which runs on an open slot whatever it holds.
	Migrate bool
	// AllowReadsWhenDown is cluster-allow-reads-when-down.
	AllowReadsWhenDown bool

	keys         [][]byte
	slot         uint16
	multipleKeys bool
	crossSlot    bool
}

// Reset empties q for the next request, keeping its key slice's room.
func (q *Query) Reset() {
	clear(q.keys)
	*q = Query{keys: q.keys[:0]}
}

// Key adds a key of the request. Keys of every command of a
// transaction go to one Query.
func (q *Query) Key(key []byte) {
	if q.crossSlot {
		return
	}
	if len(q.keys) == 0 {
		q.slot = KeySlot(key)
	} else if string(key) != string(q.keys[0]) {
		if KeySlot(key) != q.slot {
			q.crossSlot = true
			return
		}
		q.multipleKeys = true
	}
	q.keys = append(q.keys, key)
}

// Keys is how many keys were added, counting repetitions.
func (q *Query) Keys() int { return len(q.keys) }

// Route decides where a request goes, as getNodeByQuery does; a request
// without keys is served here.
func (r *Routing) Route(q *Query) (Redirect, uint16, RouteNode) {
	if q.crossSlot {
		return CrossSlot, 0, RouteNode{}
	}
	if len(q.keys) == 0 {
		return Here, 0, RouteNode{}
	}
	slot := q.slot
	owner := r.owner[slot]
	if owner == NoNode {
		return DownUnbound, slot, RouteNode{}
	}
	migrating, importing := false, false
	if owner == r.Myself {
		_, migrating = r.migrating[slot]
	}
	if !migrating {
		_, importing = r.importing[slot]
	}
	missing, existing := 0, 0
	if (migrating || importing) && !q.PubSubShard && q.Exists != nil {
		for _, k := range q.keys {
			if q.Exists(k) {
				existing++
			} else {
				missing++
			}
		}
	}
	if !r.OK {
		switch {
		case q.PubSubShard, !q.AllowReadsWhenDown:
			return DownState, slot, RouteNode{}
		case q.Write:
			return DownReadOnly, slot, RouteNode{}
		}
	}
	if (migrating || importing) && q.Migrate {
		return Here, slot, RouteNode{}
	}
	if migrating && missing > 0 {
		if existing > 0 {
			return Unstable, slot, RouteNode{}
		}
		return Ask, slot, r.Nodes[r.migrating[slot]]
	}
	if importing && q.Asking {
		if q.multipleKeys && missing > 0 {
			return Unstable, slot, RouteNode{}
		}
		return Here, slot, RouteNode{}
	}
	if (q.ReadOnly || q.PubSubShard) && !q.Write && r.Master != NoNode && owner == r.Master {
		return Here, slot, RouteNode{}
	}
	if owner != r.Myself {
		return Moved, slot, r.Nodes[owner]
	}
	return Here, slot, RouteNode{}
}

// Error is the error reply of a redirection, without the leading '-'
// (clusterRedirectClient). plaintext: the client is not on TLS while
// the cluster is, so it is sent to the node's plaintext port.
func (d Redirect) Error(slot uint16, n RouteNode, plaintext bool) string {
	switch d {
	case CrossSlot:
		return "CROSSSLOT Keys in request don't hash to the same slot"
	case Unstable:
		return "TRYAGAIN Multiple keys request during rehashing of slot"
	case DownState:
		return "CLUSTERDOWN The cluster is down"
	case DownReadOnly:
		return "CLUSTERDOWN The cluster is down and only accepts read commands"
	case DownUnbound:
		return "CLUSTERDOWN Hash slot not served"
	case Moved, Ask:
		word := "MOVED "
		if d == Ask {
			word = "ASK "
		}
		port := n.Port
		if plaintext && n.PPort != 0 {
			port = n.PPort
		}
		return word + strconv.Itoa(int(slot)) + " " + n.IP + ":" + strconv.Itoa(int(port))
	}
	return ""
}
