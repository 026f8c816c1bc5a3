package rdb

import (
	"encoding/binary"
	"math"
	"slices"
)

// Streams in RDB (rdbSaveObject and rdbLoadObject of Redis 7.0): the
// nodes, each its master ID as a 16-byte string (ms and seq big endian,
// the radix tree's key) and its listpack as a string; the metadata as
// lengths; then the consumer groups, each with its global PEL (raw 16-byte
// IDs, delivery times as 8 bytes little endian, delivery counts) and its
// consumers (name, seen time, the raw IDs they own). Names and listpacks
// go through rdbSaveRawString, so they are integer-encoded or LZF-
// compressed as any string: AppendString is that function.
//
// RDB_TYPE_STREAM_LISTPACKS (15), what Redis before 7.0 writes, lacks the
// first ID, the largest deleted ID, entries-added and the groups'
// entries-read; Decode derives them as Redis 7.0's loader does, so that a
// decoded stream always carries 7.0's metadata.

// StreamID is a stream entry ID.
type StreamID struct {
	Ms, Seq uint64
}

func (id StreamID) compare(o StreamID) int {
	switch {
	case id.Ms != o.Ms:
		if id.Ms < o.Ms {
			return -1
		}
		return 1
	case id.Seq != o.Seq:
		if id.Seq < o.Seq {
			return -1
		}
		return 1
	}
	return 0
}

func (id StreamID) isZero() bool { return id.Ms == 0 && id.Seq == 0 }

// StreamNode is one node: its master ID and its listpack, in Redis's
// bytes.
type StreamNode struct {
	Master StreamID
	LP     []byte
}

// StreamNACK is a pending entry of a group's PEL.
type StreamNACK struct {
	ID            StreamID
	DeliveryTime  int64
	DeliveryCount uint64
}

// StreamConsumer is a consumer and the IDs pending for it.
type StreamConsumer struct {
	Name     []byte
	SeenTime int64
	Pending  []StreamID
}

// StreamGroup is a consumer group. EntriesRead is -1 when unknown.
type StreamGroup struct {
	Name        []byte
	LastID      StreamID
	EntriesRead int64
	PEL         []StreamNACK
	Consumers   []StreamConsumer
}

// Stream is a stream as RDB carries it. Nodes come in master ID order,
// groups and consumers in name order (bytewise), PELs in ID order: the
// orders of Redis's radix trees, which AppendStream writes as given. What
// Decode returns aliases its payload where the payload stored bytes
// verbatim.
type Stream struct {
	Nodes        []StreamNode
	Length       uint64
	LastID       StreamID
	FirstID      StreamID
	MaxDeletedID StreamID
	EntriesAdded uint64
	Groups       []StreamGroup
}

func appendRawID(dst []byte, id StreamID) []byte {
	dst = binary.BigEndian.AppendUint64(dst, id.Ms)
	return binary.BigEndian.AppendUint64(dst, id.Seq)
}

func appendIDLens(dst []byte, id StreamID) []byte {
	return AppendLen(AppendLen(dst, id.Ms), id.Seq)
}

// appendMillis is rdbSaveMillisecondTime: 8 bytes little endian.
func appendMillis(dst []byte, t int64) []byte {
	return binary.LittleEndian.AppendUint64(dst, uint64(t))
}

// AppendStream appends s as Redis 7.0 writes a stream
// (RDB_TYPE_STREAM_LISTPACKS_2).
func AppendStream(dst []byte, s *Stream) []byte {
	dst = AppendLen(append(dst, TypeStreamListpacks2), uint64(len(s.Nodes)))
	var key []byte
	for _, n := range s.Nodes {
		key = appendRawID(key[:0], n.Master)
		dst = AppendString(dst, key)
		dst = AppendString(dst, n.LP)
	}
	dst = AppendLen(dst, s.Length)
	dst = appendIDLens(dst, s.LastID)
	dst = appendIDLens(dst, s.FirstID)
	dst = appendIDLens(dst, s.MaxDeletedID)
	dst = AppendLen(dst, s.EntriesAdded)
	dst = AppendLen(dst, uint64(len(s.Groups)))
	for _, g := range s.Groups {
		dst = AppendString(dst, g.Name)
		dst = appendIDLens(dst, g.LastID)
		// -1 (unknown) goes as the 64-bit length it is in two's
		// complement, as rdbSaveLen does with the long long.
		dst = AppendLen(dst, uint64(g.EntriesRead))
		dst = AppendLen(dst, uint64(len(g.PEL)))
		for _, p := range g.PEL {
			dst = appendRawID(dst, p.ID)
			dst = appendMillis(dst, p.DeliveryTime)
			dst = AppendLen(dst, p.DeliveryCount)
		}
		dst = AppendLen(dst, uint64(len(g.Consumers)))
		for _, c := range g.Consumers {
			dst = AppendString(dst, c.Name)
			dst = appendMillis(dst, c.SeenTime)
			dst = AppendLen(dst, uint64(len(c.Pending)))
			for _, id := range c.Pending {
				dst = appendRawID(dst, id)
			}
		}
	}
	return dst
}

func (r *Reader) rawID() StreamID {
	p := r.take(16)
	if p == nil {
		return StreamID{}
	}
	return StreamID{binary.BigEndian.Uint64(p), binary.BigEndian.Uint64(p[8:])}
}

func (r *Reader) idLens() StreamID {
	ms := r.Len()
	return StreamID{ms, r.Len()}
}

func (r *Reader) millis() int64 {
	p := r.take(8)
	if p == nil {
		return 0
	}
	return int64(binary.LittleEndian.Uint64(p))
}

// countOf reads a count of items that take at least size bytes each,
// refusing one the remaining bytes cannot hold.
func (r *Reader) countOf(size int) int {
	n := r.Len()
	if n > uint64(len(r.b)/size) {
		r.fail()
		return 0
	}
	return int(n)
}

// decodeStream reads a stream of type t (15 or 19) and refuses what
// Redis's RESTORE refuses: a node key that is not 16 bytes, a listpack
// that is not a stream node (checked whole, as sanitize-dump-payload yes
// checks it: limitkv never skips that), a node key twice, a length with
// no nodes, a group or consumer name twice, a PEL entry twice, a
// consumer's pending ID missing from its group's PEL, and (as the deep
// check does) a PEL entry left without a consumer. Beyond Redis, it
// refuses a length that is not the nodes' live entries (Redis believes
// any) and an entry pending for two consumers (Redis would leave it in
// both consumers' PELs, owned by the second).
//
// Nodes come back in master ID order, as Redis's radix tree holds them;
// groups, consumers and PELs in the payload's order (the engine inserts
// them in place).
func decodeStream(r *Reader, t byte) (*Stream, bool) {
	s := &Stream{}
	// A node takes at least its key (a length and 16 bytes) and a
	// string: LZF can make a listpack's string shorter than the listpack.
	n := r.countOf(1 + 16 + 1)
	s.Nodes = make([]StreamNode, 0, n)
	var walk nodeWalker
	var live uint64
	sorted := true
	for i := 0; i < n && r.err == nil; i++ {
		key := r.String()
		lp := r.String()
		if r.err != nil || len(key) != 16 || !walk.walk(lp, idFromKey(key), nil) {
			return nil, false
		}
		live += uint64(walk.live)
		node := StreamNode{Master: idFromKey(key), LP: lp}
		if i > 0 && s.Nodes[i-1].Master.compare(node.Master) >= 0 {
			sorted = false
		}
		s.Nodes = append(s.Nodes, node)
	}
	if !sorted {
		slices.SortFunc(s.Nodes, func(a, b StreamNode) int { return a.Master.compare(b.Master) })
	}
	for i := 1; i < len(s.Nodes); i++ {
		if s.Nodes[i-1].Master == s.Nodes[i].Master {
			return nil, false
		}
	}
	s.Length = r.Len()
	s.LastID = r.idLens()
	v2 := t == TypeStreamListpacks2
	if v2 {
		s.FirstID = r.idLens()
		s.MaxDeletedID = r.idLens()
		s.EntriesAdded = r.Len()
	} else {
		s.FirstID = s.firstLiveID(&walk)
		s.EntriesAdded = s.Length
	}
	// Redis refuses only a length without nodes (and believes any other);
	// the engine counts on the length being the live entries'.
	if r.err != nil || s.Length != live {
		return nil, false
	}
	// A group takes at least a name, two ID lengths, entries-read and two
	// counts.
	ng := r.countOf(6)
	s.Groups = make([]StreamGroup, 0, ng)
	names := make(map[string]struct{}, ng)
	for i := 0; i < ng && r.err == nil; i++ {
		g, ok := decodeStreamGroup(r, s, v2)
		if !ok {
			return nil, false
		}
		if _, dup := names[string(g.Name)]; dup {
			return nil, false
		}
		names[string(g.Name)] = struct{}{}
		s.Groups = append(s.Groups, g)
	}
	return s, r.err == nil
}

func idFromKey(b []byte) StreamID {
	return StreamID{binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:])}
}

// firstLiveID is streamGetEdgeID(s, first, skip tombstones), which Redis
// 7.0 uses for the first ID of a stream loaded without one: the largest
// ID when no entry is live.
func (s *Stream) firstLiveID(walk *nodeWalker) StreamID {
	first, found := StreamID{math.MaxUint64, math.MaxUint64}, false
	for _, n := range s.Nodes {
		walk.walk(n.LP, n.Master, func(id StreamID, deleted bool) bool {
			if !deleted {
				first, found = id, true
			}
			return !found
		})
		if found {
			break
		}
	}
	return first
}

func decodeStreamGroup(r *Reader, s *Stream, v2 bool) (StreamGroup, bool) {
	g := StreamGroup{Name: r.String()}
	g.LastID = r.idLens()
	if v2 {
		g.EntriesRead = int64(r.Len())
	} else {
		g.EntriesRead = s.estimateEntriesRead(g.LastID)
	}
	np := r.countOf(16 + 8 + 1)
	if r.err != nil {
		return g, false
	}
	g.PEL = make([]StreamNACK, 0, np)
	// Whether each pending entry has found its consumer yet.
	owned := make(map[StreamID]bool, np)
	for j := 0; j < np && r.err == nil; j++ {
		p := StreamNACK{ID: r.rawID(), DeliveryTime: r.millis(), DeliveryCount: r.Len()}
		if _, dup := owned[p.ID]; dup {
			return g, false
		}
		owned[p.ID] = false
		g.PEL = append(g.PEL, p)
	}
	nc := r.countOf(1 + 8 + 1)
	if r.err != nil {
		return g, false
	}
	g.Consumers = make([]StreamConsumer, 0, nc)
	names := make(map[string]struct{}, nc)
	for j := 0; j < nc && r.err == nil; j++ {
		c := StreamConsumer{Name: r.String(), SeenTime: r.millis()}
		if _, dup := names[string(c.Name)]; dup {
			return g, false
		}
		names[string(c.Name)] = struct{}{}
		ids := r.countOf(16)
		c.Pending = make([]StreamID, 0, ids)
		for k := 0; k < ids && r.err == nil; k++ {
			id := r.rawID()
			if was, ok := owned[id]; !ok || was {
				return g, false
			}
			owned[id] = true
			c.Pending = append(c.Pending, id)
		}
		g.Consumers = append(g.Consumers, c)
	}
	if r.err != nil {
		return g, false
	}
	for _, o := range owned {
		if !o {
			return g, false
		}
	}
	return g, true
}

// estimateEntriesRead is streamEstimateDistanceFromFirstEverEntry: the
// entries-read Redis 7.0 gives a group loaded from a payload that has
// none.
func (s *Stream) estimateEntriesRead(id StreamID) int64 {
	if s.EntriesAdded == 0 {
		return 0
	}
	added := int64(s.EntriesAdded)
	last := id.compare(s.LastID)
	if s.Length == 0 && last <= 0 {
		return added
	}
	switch last {
	case 0:
		return added
	case 1:
		return -1
	}
	if s.MaxDeletedID.isZero() || s.MaxDeletedID.compare(s.FirstID) < 0 {
		switch id.compare(s.FirstID) {
		case -1:
			return added - int64(s.Length)
		case 0:
			return added - int64(s.Length) + 1
		}
	}
	return -1
}
