package engine

import (
	"errors"
	"slices"
	"sort"
	"unsafe"
)

// Consumer groups (Redis 7.0.15 semantics). A group has the last ID it
// delivered, a logical read counter (entries-read, -1 when unknown), a
// pending entries list (PEL) of the entries delivered and not yet
// acknowledged, and its consumers, each with its own PEL and the time it
// was last seen. 7.0 has no active-time: that came with 7.2.
//
// A PEL is an ordered index from StreamID to a value, kept as a sorted run
// of chunks of at most pelChunkMax IDs (pelIndex). Deliveries come in ID
// order, so inserts are nearly always appends to the last chunk, and acks
// mostly drain the first chunks; a lookup is two binary searches. The
// group's PEL holds each NACK inline (delivery time, count, consumer: 24
// bytes beside the 16-byte ID) and a consumer's PEL holds the IDs alone,
// so a pending entry costs about 56 bytes and no heap object of its own,
// where a map beside an ordered index would cost a map slot, a pointer and
// a NACK allocation per entry, and hold the collector's attention with as
// many pointers.

// ErrBusyGroup is XGROUP CREATE's reply for an existing group.
var ErrBusyGroup = errors.New("BUSYGROUP Consumer Group name already exists")

// StreamGroup is a consumer group.
type StreamGroup struct {
	stream      *Stream
	name        string
	lastID      StreamID
	entriesRead int64 // -1: unknown (SCG_INVALID_ENTRIES_READ)
	pel         pelIndex[streamNACK]
	consumers   []*StreamConsumer // sorted by name
	held        int64             // what the group holds, for MemoryUsage
}

// StreamConsumer is a consumer of a group.
type StreamConsumer struct {
	name     string
	seenTime int64
	pel      pelIndex[struct{}]
}

// streamNACK is a pending entry: its last delivery and to whom.
type streamNACK struct {
	deliveryTime  int64
	deliveryCount uint64
	consumer      *StreamConsumer
}

var (
	streamGroupSize    = int(unsafe.Sizeof(StreamGroup{}))
	streamConsumerSize = int(unsafe.Sizeof(StreamConsumer{}))
)

// Name returns the group's name.
func (g *StreamGroup) Name() string { return g.name }

// LastID returns the last delivered ID (last-delivered-id).
func (g *StreamGroup) LastID() StreamID { return g.lastID }

// EntriesRead returns the logical read counter, -1 when unknown (XINFO
// shows it as nil).
func (g *StreamGroup) EntriesRead() int64 { return g.entriesRead }

// PendingCount returns the number of entries in the group's PEL.
func (g *StreamGroup) PendingCount() int { return g.pel.n }

// PendingBounds returns the smallest and largest pending IDs, false when
// nothing is pending (XPENDING's summary).
func (g *StreamGroup) PendingBounds() (first, last StreamID, ok bool) {
	if g.pel.n == 0 {
		return StreamID{}, StreamID{}, false
	}
	c0, cn := &g.pel.chunks[0], &g.pel.chunks[len(g.pel.chunks)-1]
	return c0.ids[0], cn.ids[len(cn.ids)-1], true
}

// ConsumerCount returns the number of consumers.
func (g *StreamGroup) ConsumerCount() int { return len(g.consumers) }

// Consumers calls fn for each consumer in name order until it returns
// false.
func (g *StreamGroup) Consumers(fn func(c *StreamConsumer) bool) {
	for _, c := range g.consumers {
		if !fn(c) {
			return
		}
	}
}

// Consumer returns the consumer called name, or nil, without touching its
// seen-time (as XPENDING and DELCONSUMER look consumers up).
func (g *StreamGroup) Consumer(name []byte) *StreamConsumer {
	i, ok := g.consumerIndex(name)
	if !ok {
		return nil
	}
	return g.consumers[i]
}

// Name returns the consumer's name.
func (c *StreamConsumer) Name() string { return c.name }

// SeenTime returns when the consumer was last seen, in ms (XINFO
// CONSUMERS's idle is now minus this, at least 0).
func (c *StreamConsumer) SeenTime() int64 { return c.seenTime }

// PendingCount returns the number of entries pending for the consumer.
func (c *StreamConsumer) PendingCount() int { return c.pel.n }

// account adds d bytes to the group's count and the stream's.
func (g *StreamGroup) account(d int64) {
	g.held += d
	g.stream.groupHeld += d
}

// GroupCount returns the number of consumer groups.
func (s *Stream) GroupCount() int { return len(s.groups) }

// Groups calls fn for each group in name order until it returns false.
func (s *Stream) Groups(fn func(g *StreamGroup) bool) {
	for _, g := range s.groups {
		if !fn(g) {
			return
		}
	}
}

func (s *Stream) groupIndex(name []byte) (int, bool) {
	i := sort.Search(len(s.groups), func(i int) bool { return s.groups[i].name >= string(name) })
	return i, i < len(s.groups) && s.groups[i].name == string(name)
}

// Group returns the group called name, or nil.
func (s *Stream) Group(name []byte) *StreamGroup {
	i, ok := s.groupIndex(name)
	if !ok {
		return nil
	}
	return s.groups[i]
}

// CreateGroup is XGROUP CREATE: a group that has delivered up to id ("$"
// is the caller's s.LastID()), with entriesRead as its read counter (-1
// when ENTRIESREAD is not given).
func (s *Stream) CreateGroup(name []byte, id StreamID, entriesRead int64) (*StreamGroup, error) {
	i, ok := s.groupIndex(name)
	if ok {
		return nil, ErrBusyGroup
	}
	g := &StreamGroup{stream: s, name: string(name), lastID: id, entriesRead: entriesRead}
	c := cap(s.groups)
	s.groups = slices.Insert(s.groups, i, g)
	s.groupHeld += allocSize(cap(s.groups)*8) - allocSize(c*8)
	g.account(allocSize(streamGroupSize) + allocSize(len(g.name)))
	return g, nil
}

// DestroyGroup is XGROUP DESTROY; it reports whether the group existed.
func (s *Stream) DestroyGroup(name []byte) bool {
	i, ok := s.groupIndex(name)
	if !ok {
		return false
	}
	s.groupHeld -= s.groups[i].held
	s.groups = slices.Delete(s.groups, i, i+1)
	if len(s.groups) == 0 {
		s.groupHeld -= allocSize(cap(s.groups) * 8)
		s.groups = nil
	}
	return true
}

// SetLastID is XGROUP SETID: the group's last delivered ID and read
// counter (-1 when ENTRIESREAD is not given: Redis then forgets the
// counter). "$" is the caller's s.LastID().
func (g *StreamGroup) SetLastID(id StreamID, entriesRead int64) {
	g.lastID = id
	g.entriesRead = entriesRead
}

func (g *StreamGroup) consumerIndex(name []byte) (int, bool) {
	i := sort.Search(len(g.consumers), func(i int) bool { return g.consumers[i].name >= string(name) })
	return i, i < len(g.consumers) && g.consumers[i].name == string(name)
}

// CreateConsumer is XGROUP CREATECONSUMER: it reports whether the consumer
// was created (false if it exists).
func (g *StreamGroup) CreateConsumer(name []byte, now int64) bool {
	i, ok := g.consumerIndex(name)
	if ok {
		return false
	}
	g.insertConsumer(i, name, now)
	return true
}

func (g *StreamGroup) insertConsumer(i int, name []byte, now int64) *StreamConsumer {
	c := &StreamConsumer{name: string(name), seenTime: now}
	n := cap(g.consumers)
	g.consumers = slices.Insert(g.consumers, i, c)
	g.account(allocSize(cap(g.consumers)*8) - allocSize(n*8) + allocSize(streamConsumerSize) + allocSize(len(c.name)))
	return c
}

// consumerFor looks the consumer up, refreshing its seen-time, or creates
// it (streamLookupConsumer then streamCreateConsumer), and reports whether
// it was created.
func (g *StreamGroup) consumerFor(name []byte, now int64) (*StreamConsumer, bool) {
	i, ok := g.consumerIndex(name)
	if ok {
		c := g.consumers[i]
		c.seenTime = now
		return c, false
	}
	return g.insertConsumer(i, name, now), true
}

// DeleteConsumer is XGROUP DELCONSUMER: the consumer goes with its pending
// entries (they leave the group's PEL too). It returns how many entries
// were pending for it, and whether it existed.
func (g *StreamGroup) DeleteConsumer(name []byte) (pending int, ok bool) {
	i, ok := g.consumerIndex(name)
	if !ok {
		return 0, false
	}
	c := g.consumers[i]
	pending = c.pel.n
	before := g.pel.held
	c.pel.each(StreamID{}, func(id StreamID, _ *struct{}) bool {
		g.pel.remove(id)
		return true
	})
	g.consumers = slices.Delete(g.consumers, i, i+1)
	g.account(g.pel.held - before - c.pel.held - allocSize(streamConsumerSize) - allocSize(len(c.name)))
	return pending, true
}

// setPending adds id to consumer c's PEL (or removes it) keeping the
// group's count of memory right.
func (g *StreamGroup) setPending(c *StreamConsumer, id StreamID, pending bool) {
	before := c.pel.held
	if pending {
		c.pel.insert(id, struct{}{})
	} else {
		c.pel.remove(id)
	}
	g.account(c.pel.held - before)
}

// StreamClaimEffect is one pending entry as a replica must rebuild it,
// which Redis propagates as
//
//	XCLAIM key group Consumer 0 ID TIME DeliveryTime RETRYCOUNT DeliveryCount FORCE JUSTID LASTID LastID
type StreamClaimEffect struct {
	ID            StreamID
	Consumer      string
	DeliveryTime  int64
	DeliveryCount uint64
	LastID        StreamID // the group's last delivered ID at the time
}

// StreamGroupEffects collects what a group operation did that replicas
// and the AOF must be told, in the commands Redis 7.0 propagates instead
// of XREADGROUP, XCLAIM and XAUTOCLAIM themselves. The caller clears it
// between commands.
type StreamGroupEffects struct {
	// Claims are to be propagated as XCLAIMs, in order. An entry no longer
	// in the stream is among them with its NACK as it was: the replica's
	// XCLAIM drops it from the PEL just as the master did.
	Claims []StreamClaimEffect
	// SetID asks for XGROUP SETID key group <LastID> ENTRIESREAD
	// <EntriesRead> with the group's values after the operation, sent after
	// the claims: the last delivered ID moved and no claim carried it.
	SetID bool
	// ConsumerCreated: the operation created the consumer. Redis propagates
	// XGROUP CREATECONSUMER for it only for XREADGROUP ... NOACK (otherwise
	// the claims create it on the replica).
	ConsumerCreated bool
}

func (fx *StreamGroupEffects) claim(g *StreamGroup, id StreamID, n *streamNACK) {
	if fx != nil {
		fx.Claims = append(fx.Claims, StreamClaimEffect{ID: id, Consumer: n.consumer.name,
			DeliveryTime: n.deliveryTime, DeliveryCount: n.deliveryCount, LastID: g.lastID})
	}
}

// HasNewEntriesFor reports whether XREADGROUP with ">" is to be served
// right away: the stream has a live entry after the group's last delivered
// ID. (A client blocked on the group is served instead when LastID()
// passes the group's last delivered ID, as blocked.c checks.)
func (s *Stream) HasNewEntriesFor(g *StreamGroup) bool {
	if s.length == 0 {
		return false
	}
	last, _ := s.LastValidID()
	return g.lastID.Less(last)
}

// ReadGroupNew is XREADGROUP with ">": it passes to fn the entries after
// the group's last delivered ID, up to count (0: no limit), moving the
// last delivered ID and the read counter as it goes, and, unless noack,
// making each entry pending for the consumer (taking it from another
// consumer if the group's ID was set back). The consumer is created if
// needed, its seen-time set to now. It returns the number of entries.
func (s *Stream) ReadGroupNew(g *StreamGroup, consumer []byte, count int, noack bool, now int64, fx *StreamGroupEffects, fn func(id StreamID, fv [][]byte)) int {
	if g.lastID == MaxStreamID {
		return 0
	}
	c, created := g.consumerFor(consumer, now)
	if created && fx != nil {
		fx.ConsumerCreated = true
	}
	start, _ := g.lastID.Incr()
	moved := false
	n := s.Range(start, MaxStreamID, count, false, func(id StreamID, fv [][]byte) bool {
		if g.lastID.Less(id) {
			if g.entriesRead != -1 && !s.RangeHasTombstones(id, MaxStreamID) {
				g.entriesRead++
			} else if s.entriesAdded != 0 {
				g.entriesRead = s.EstimateEntriesRead(id)
			}
			g.lastID = id
			moved = true
		}
		if fn != nil {
			fn(id, fv)
		}
		if !noack {
			fx.claim(g, id, g.deliver(c, id, now))
		}
		return true
	})
	if noack && moved && fx != nil {
		fx.SetID = true
	}
	return n
}

// deliver makes id pending for c, delivered now for the first time.
func (g *StreamGroup) deliver(c *StreamConsumer, id StreamID, now int64) *streamNACK {
	before := g.pel.held
	nack, inserted := g.pel.insert(id, streamNACK{deliveryTime: now, deliveryCount: 1, consumer: c})
	g.account(g.pel.held - before)
	if !inserted {
		g.setPending(nack.consumer, id, false)
		*nack = streamNACK{deliveryTime: now, deliveryCount: 1, consumer: c}
	}
	g.setPending(c, id, true)
	return nack
}

// ReadGroupHistory is XREADGROUP with an ID: it passes to fn the entries
// pending for the consumer after the ID after, up to count (0: no limit).
// An entry deleted from the stream comes with ok false (Redis replies the
// ID with a nil). Each entry still in the stream counts as delivered again
// now. The consumer is created if needed. Redis propagates nothing for
// this (so a replica's delivery counts fall behind), and nor does this.
func (s *Stream) ReadGroupHistory(g *StreamGroup, consumer []byte, after StreamID, count int, now int64, fn func(id StreamID, fv [][]byte, ok bool)) int {
	c, _ := g.consumerFor(consumer, now)
	start, _ := after.Incr()
	n := 0
	for cur := start; count == 0 || n < count; n++ {
		id, _, ok := c.pel.seek(cur)
		if !ok {
			break
		}
		found := s.Get(id, func(fv [][]byte) {
			if fn != nil {
				fn(id, fv, true)
			}
		})
		if found {
			nack := g.pel.get(id)
			nack.deliveryTime = now
			nack.deliveryCount++
		} else if fn != nil {
			fn(id, nil, false)
		}
		if cur, ok = id.Incr(); !ok {
			n++
			break
		}
	}
	return n
}

// Ack is XACK: it removes the ids from the PEL and returns how many were
// pending.
func (g *StreamGroup) Ack(ids []StreamID) int {
	acked := 0
	for _, id := range ids {
		nack := g.pel.get(id)
		if nack == nil {
			continue
		}
		g.setPending(nack.consumer, id, false)
		before := g.pel.held
		g.pel.remove(id)
		g.account(g.pel.held - before)
		acked++
	}
	return acked
}

// StreamPending is one pending entry as XPENDING and XINFO show it.
type StreamPending struct {
	ID            StreamID
	Consumer      string
	DeliveryTime  int64 // ms; XPENDING shows now minus this, at least 0
	DeliveryCount uint64
}

// PendingRange is XPENDING's extended form: it passes to fn the pending
// entries with start <= ID <= end, of consumer only if it is not nil,
// that have been idle at least minIdle ms (0: all), until count of them
// were passed. As in XPENDING, count 0 passes none; XINFO STREAM FULL's
// "no limit" is math.MaxInt.
func (g *StreamGroup) PendingRange(start, end StreamID, count int, consumer *StreamConsumer, minIdle, now int64, fn func(p StreamPending)) {
	visit := func(id StreamID, n *streamNACK) bool {
		if end.Less(id) {
			return false
		}
		if minIdle != 0 && now-n.deliveryTime < minIdle {
			return true
		}
		fn(StreamPending{ID: id, Consumer: n.consumer.name, DeliveryTime: n.deliveryTime, DeliveryCount: n.deliveryCount})
		count--
		return count > 0
	}
	if count <= 0 {
		return
	}
	if consumer == nil {
		g.pel.each(start, visit)
		return
	}
	consumer.pel.each(start, func(id StreamID, _ *struct{}) bool {
		return visit(id, g.pel.get(id))
	})
}

// ConsumerPending passes to fn the entries pending for c in ID order, with
// their NACKs, until fn returns false (XINFO STREAM FULL).
func (g *StreamGroup) ConsumerPending(c *StreamConsumer, fn func(p StreamPending) bool) {
	c.pel.each(StreamID{}, func(id StreamID, _ *struct{}) bool {
		n := g.pel.get(id)
		return fn(StreamPending{ID: id, Consumer: c.name, DeliveryTime: n.deliveryTime, DeliveryCount: n.deliveryCount})
	})
}

// StreamClaimArgs are XCLAIM's options.
type StreamClaimArgs struct {
	// MinIdle is min-idle-time: entries idle for less stay where they are.
	// 0 (or less) claims regardless.
	MinIdle int64
	// DeliveryTime is the new delivery time in ms: now-IDLE, or TIME; -1
	// when neither was given. A time before 0 or after now becomes now.
	DeliveryTime int64
	// RetryCount is RETRYCOUNT, -1 when not given: then the count goes up
	// by one, unless JustID.
	RetryCount int64
	// Force creates the NACK of an entry that exists but is not pending.
	Force bool
	// JustID: fn gets no fields, and the delivery count is left alone.
	JustID bool
	// LastID (LASTID) moves the group's last delivered ID forward to it.
	// 0-0 when not given.
	LastID StreamID
}

// Claim is XCLAIM: it gives the pending entries ids that have been idle
// long enough to the consumer (created on the first claim) and passes each
// claimed entry to fn (fv nil with JustID). A pending entry that is no
// longer in the stream leaves the PEL, as in 7.0, and is not passed to fn.
// It returns the number of entries claimed.
func (s *Stream) Claim(g *StreamGroup, consumer []byte, ids []StreamID, a StreamClaimArgs, now int64, fx *StreamGroupEffects, fn func(id StreamID, fv [][]byte)) int {
	moveLastID := false
	if g.lastID.Less(a.LastID) {
		g.lastID = a.LastID
		moveLastID = true
	}
	deliveryTime := a.DeliveryTime
	if deliveryTime < 0 || deliveryTime > now {
		deliveryTime = now
	}
	var c *StreamConsumer
	claimed := 0
	for _, id := range ids {
		nack := g.pel.get(id)
		if !s.Exists(id) {
			if nack != nil {
				fx.claim(g, id, nack)
				moveLastID = false
				g.dropPending(id, nack)
			}
			continue
		}
		if nack == nil {
			if !a.Force {
				continue
			}
			before := g.pel.held
			nack, _ = g.pel.insert(id, streamNACK{deliveryTime: now, deliveryCount: 1})
			g.account(g.pel.held - before)
		}
		// A NACK FORCE just made has no consumer and no idle time to
		// respect.
		if nack.consumer != nil && a.MinIdle > 0 && now-nack.deliveryTime < a.MinIdle {
			continue
		}
		if c == nil {
			var created bool
			if c, created = g.consumerFor(consumer, now); created && fx != nil {
				fx.ConsumerCreated = true
			}
		}
		nack.deliveryTime = deliveryTime
		if a.RetryCount >= 0 {
			nack.deliveryCount = uint64(a.RetryCount)
		} else if !a.JustID {
			nack.deliveryCount++
		}
		g.transfer(id, nack, c)
		if fn != nil {
			if a.JustID {
				fn(id, nil)
			} else {
				s.Get(id, func(fv [][]byte) { fn(id, fv) })
			}
		}
		claimed++
		fx.claim(g, id, nack)
		moveLastID = false
	}
	if moveLastID && fx != nil {
		fx.SetID = true
	}
	return claimed
}

// transfer makes the pending entry id belong to c.
func (g *StreamGroup) transfer(id StreamID, nack *streamNACK, c *StreamConsumer) {
	if nack.consumer == c {
		return
	}
	if nack.consumer != nil {
		g.setPending(nack.consumer, id, false)
	}
	g.setPending(c, id, true)
	nack.consumer = c
}

// dropPending removes the pending entry id from the group and its
// consumer.
func (g *StreamGroup) dropPending(id StreamID, nack *streamNACK) {
	g.setPending(nack.consumer, id, false)
	before := g.pel.held
	g.pel.remove(id)
	g.account(g.pel.held - before)
}

// AutoClaim is XAUTOCLAIM: from the pending entry start on, it gives the
// entries idle at least minIdle ms (0: all) to the consumer (created on the
// first claim), passing each to fn (fv nil with justID; justID also leaves
// the delivery count alone), until count entries were claimed or found
// deleted, having looked at no more than 10 times count. Entries no longer
// in the stream leave the PEL and are returned in deleted. next is the
// cursor for the next call: the first pending ID after the last one looked
// at, 0-0 when there is none.
func (s *Stream) AutoClaim(g *StreamGroup, consumer []byte, minIdle int64, start StreamID, count int, justID bool, now int64, fx *StreamGroupEffects, fn func(id StreamID, fv [][]byte)) (next StreamID, deleted []StreamID, claimed int) {
	attempts := count * 10
	var c *StreamConsumer
	cur, more := start, true
	for ; more && attempts > 0 && count > 0; attempts-- {
		id, nack, ok := g.pel.seek(cur)
		if !ok {
			more = false
			break
		}
		cur, more = id.Incr()
		if !s.Exists(id) {
			fx.claim(g, id, nack)
			g.dropPending(id, nack)
			deleted = append(deleted, id)
			count--
			continue
		}
		if minIdle > 0 && now-nack.deliveryTime < minIdle {
			continue
		}
		if c == nil {
			var created bool
			if c, created = g.consumerFor(consumer, now); created && fx != nil {
				fx.ConsumerCreated = true
			}
		}
		nack.deliveryTime = now
		if !justID {
			nack.deliveryCount++
		}
		g.transfer(id, nack, c)
		if fn != nil {
			if justID {
				fn(id, nil)
			} else {
				s.Get(id, func(fv [][]byte) { fn(id, fv) })
			}
		}
		claimed++
		count--
		fx.claim(g, id, nack)
	}
	if more {
		if id, _, ok := g.pel.seek(cur); ok {
			next = id
		}
	}
	return next, deleted, claimed
}

// RangeHasTombstones reports whether an entry between start and end
// (inclusive) may have been deleted (streamRangeHasTombstones): only the
// largest deleted ID is known, so this says whether it is in the range
// and not before the first entry. It assumes start is below LastID().
func (s *Stream) RangeHasTombstones(start, end StreamID) bool {
	if s.length == 0 || s.maxDeletedID.IsZero() || s.maxDeletedID.Less(s.firstID) {
		return false
	}
	return !s.maxDeletedID.Less(start) && !end.Less(s.maxDeletedID)
}

// EstimateEntriesRead returns id's logical read counter: how many entries
// were added up to it since the stream began
// (streamEstimateDistanceFromFirstEverEntry), or -1 when that cannot be
// known: id is past the last ID, or between the first and last entries, or
// deletions may have happened after it.
func (s *Stream) EstimateEntriesRead(id StreamID) int64 {
	if s.entriesAdded == 0 {
		return 0
	}
	added := int64(s.entriesAdded)
	if s.length == 0 && !s.lastID.Less(id) {
		return added
	}
	switch id.Compare(s.lastID) {
	case 0:
		return added
	case 1:
		return -1
	}
	if s.maxDeletedID.IsZero() || s.maxDeletedID.Less(s.firstID) {
		switch id.Compare(s.firstID) {
		case -1:
			return added - int64(s.length)
		case 0:
			return added - int64(s.length) + 1
		}
	}
	return -1
}

// GroupLag returns the number of entries the group has yet to be
// delivered, as XINFO shows it (streamReplyWithCGLag), and false when it
// cannot be known (XINFO shows nil).
func (s *Stream) GroupLag(g *StreamGroup) (int64, bool) {
	if s.entriesAdded == 0 {
		return 0, true
	}
	if g.entriesRead != -1 && !s.RangeHasTombstones(g.lastID, MaxStreamID) {
		return int64(s.entriesAdded) - g.entriesRead, true
	}
	if read := s.EstimateEntriesRead(g.lastID); read != -1 {
		return int64(s.entriesAdded) - read, true
	}
	return 0, false
}

// pelIndex is an ordered map from StreamID to V: a sorted run of chunks,
// each a sorted run of at most pelChunkMax IDs with their values.
type pelIndex[V any] struct {
	chunks []pelChunk[V]
	n      int
	held   int64 // the arrays' bytes, for MemoryUsage
}

type pelChunk[V any] struct {
	ids  []StreamID
	vals []V
}

const pelChunkMax = 128

func (c *pelChunk[V]) bytes() int64 {
	var v V
	return allocSize(cap(c.ids)*16) + allocSize(cap(c.vals)*int(unsafe.Sizeof(v)))
}

func (x *pelIndex[V]) chunksBytes() int64 {
	return allocSize(cap(x.chunks) * int(unsafe.Sizeof(pelChunk[V]{})))
}

// locate returns the chunk and slot where id is, or would be inserted.
func (x *pelIndex[V]) locate(id StreamID) (ci, i int, found bool) {
	ci = sort.Search(len(x.chunks), func(k int) bool {
		ids := x.chunks[k].ids
		return !ids[len(ids)-1].Less(id)
	})
	if ci == len(x.chunks) {
		if ci == 0 {
			return 0, 0, false
		}
		ci--
		return ci, len(x.chunks[ci].ids), false
	}
	ids := x.chunks[ci].ids
	i = sort.Search(len(ids), func(k int) bool { return !ids[k].Less(id) })
	return ci, i, ids[i] == id
}

// get returns id's value, nil if id is absent. The pointer is good until
// the index changes.
func (x *pelIndex[V]) get(id StreamID) *V {
	if x.n == 0 {
		return nil
	}
	ci, i, found := x.locate(id)
	if !found {
		return nil
	}
	return &x.chunks[ci].vals[i]
}

// insert adds id with v unless id is there, and returns id's value and
// whether it was added.
func (x *pelIndex[V]) insert(id StreamID, v V) (*V, bool) {
	if x.n == 0 {
		old := x.chunksBytes()
		x.chunks = append(x.chunks, pelChunk[V]{ids: []StreamID{id}, vals: []V{v}})
		x.held += x.chunksBytes() - old + x.chunks[0].bytes()
		x.n = 1
		return &x.chunks[0].vals[0], true
	}
	ci, i, found := x.locate(id)
	if found {
		return &x.chunks[ci].vals[i], false
	}
	x.n++
	c := &x.chunks[ci]
	if len(c.ids) == pelChunkMax {
		if ci == len(x.chunks)-1 && i == len(c.ids) {
			// Appending past a full last chunk, the common case: start a
			// new one rather than leave two half-full.
			x.addChunk(ci+1, pelChunk[V]{ids: []StreamID{id}, vals: []V{v}})
			return &x.chunks[ci+1].vals[0], true
		}
		x.split(ci)
		if c = &x.chunks[ci]; i > len(c.ids) {
			i -= len(c.ids)
			ci++
			c = &x.chunks[ci]
		}
	}
	old := c.bytes()
	c.ids = slices.Insert(c.ids, i, id)
	c.vals = slices.Insert(c.vals, i, v)
	x.held += c.bytes() - old
	return &c.vals[i], true
}

// split moves the upper half of chunk ci into a new chunk after it.
func (x *pelIndex[V]) split(ci int) {
	c := &x.chunks[ci]
	h := len(c.ids) / 2
	upper := pelChunk[V]{ids: slices.Clone(c.ids[h:]), vals: slices.Clone(c.vals[h:])}
	clear(c.vals[h:])
	c.ids, c.vals = c.ids[:h], c.vals[:h]
	x.addChunk(ci+1, upper)
}

func (x *pelIndex[V]) addChunk(ci int, c pelChunk[V]) {
	old := x.chunksBytes()
	x.chunks = slices.Insert(x.chunks, ci, c)
	x.held += x.chunksBytes() - old + c.bytes()
}

// remove deletes id and reports whether it was there.
func (x *pelIndex[V]) remove(id StreamID) bool {
	if x.n == 0 {
		return false
	}
	ci, i, found := x.locate(id)
	if !found {
		return false
	}
	x.n--
	c := &x.chunks[ci]
	if len(c.ids) == 1 {
		x.held -= c.bytes()
		old := x.chunksBytes()
		x.chunks = slices.Delete(x.chunks, ci, ci+1)
		if len(x.chunks) == 0 {
			x.chunks = nil
		}
		x.held += x.chunksBytes() - old
		return true
	}
	c.ids = slices.Delete(c.ids, i, i+1)
	c.vals = slices.Delete(c.vals, i, i+1)
	// Merge a thinned chunk into its successor when both fit in one, so
	// that acks in random order do not leave a trail of tiny chunks.
	if len(c.ids) < pelChunkMax/4 && ci+1 < len(x.chunks) && len(c.ids)+len(x.chunks[ci+1].ids) <= pelChunkMax/2 {
		nx := &x.chunks[ci+1]
		old := c.bytes() + nx.bytes()
		merged := pelChunk[V]{
			ids:  append(slices.Clip(c.ids), nx.ids...),
			vals: append(slices.Clip(c.vals), nx.vals...),
		}
		x.chunks[ci] = merged
		oldArr := x.chunksBytes()
		x.chunks = slices.Delete(x.chunks, ci+1, ci+2)
		x.held += merged.bytes() - old + x.chunksBytes() - oldArr
	}
	return true
}

// seek returns the first id at or after from.
func (x *pelIndex[V]) seek(from StreamID) (StreamID, *V, bool) {
	if x.n == 0 {
		return StreamID{}, nil, false
	}
	ci, i, _ := x.locate(from)
	c := &x.chunks[ci]
	if i == len(c.ids) {
		return StreamID{}, nil, false
	}
	return c.ids[i], &c.vals[i], true
}

// each calls fn for the ids at or after from, in order, until fn returns
// false. fn must not change the index.
func (x *pelIndex[V]) each(from StreamID, fn func(id StreamID, v *V) bool) {
	if x.n == 0 {
		return
	}
	ci, i, _ := x.locate(from)
	for ; ci < len(x.chunks); ci, i = ci+1, 0 {
		c := &x.chunks[ci]
		for ; i < len(c.ids); i++ {
			if !fn(c.ids[i], &c.vals[i]) {
				return
			}
		}
	}
}

// ErrStreamBadPEL reports inconsistent consumer group data from RDB or
// DUMP (RESTORE answers "Bad data format").
var ErrStreamBadPEL = errors.New("stream consumer group data failed validation")

// RestorePending adds a pending entry read from RDB or DUMP to the group's
// PEL, owned by no consumer until RestoreConsumerPending gives it one.
// Every restored NACK must get its consumer before the group is used.
func (g *StreamGroup) RestorePending(id StreamID, deliveryTime int64, deliveryCount uint64) error {
	before := g.pel.held
	_, inserted := g.pel.insert(id, streamNACK{deliveryTime: deliveryTime, deliveryCount: deliveryCount})
	g.account(g.pel.held - before)
	if !inserted {
		return ErrStreamBadPEL
	}
	return nil
}

// RestoreConsumer adds a consumer read from RDB or DUMP.
func (g *StreamGroup) RestoreConsumer(name []byte, seenTime int64) (*StreamConsumer, error) {
	i, ok := g.consumerIndex(name)
	if ok {
		return nil, ErrStreamBadPEL
	}
	return g.insertConsumer(i, name, seenTime), nil
}

// RestoreConsumerPending gives the restored pending entry id to c.
func (g *StreamGroup) RestoreConsumerPending(c *StreamConsumer, id StreamID) error {
	nack := g.pel.get(id)
	if nack == nil || nack.consumer != nil {
		return ErrStreamBadPEL
	}
	nack.consumer = c
	g.setPending(c, id, true)
	return nil
}

// RestoreDone checks that every restored pending entry has a consumer.
func (g *StreamGroup) RestoreDone() error {
	ok := true
	g.pel.each(StreamID{}, func(_ StreamID, n *streamNACK) bool {
		ok = n.consumer != nil
		return ok
	})
	if !ok {
		return ErrStreamBadPEL
	}
	return nil
}
