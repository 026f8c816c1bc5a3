package engine

import (
	"encoding/binary"
	"errors"
	"math"
)

// A stream in the value codec (codec.go, type 'x'), after the expiry:
//
//	nodes      count, then each: master ID (ms, seq), listpack (length, bytes)
//	metadata   length, last ID, first ID, max deleted ID, entries added
//	groups     count, then each: name, last delivered ID, entries read
//	           (zig-zag, -1 unknown), the PEL (count, then each: ID,
//	           delivery time (zig-zag), delivery count), the consumers
//	           (count, then each: name, seen time (zig-zag), its pending
//	           IDs (count, then each ID))
//
// every number a uvarint unless said. The nodes are Redis's own bytes, as
// RDB keeps them, and a stream with no entries is still a key.

const valStream byte = 'x'

func appendStreamID(dst []byte, id StreamID) []byte {
	dst = binary.AppendUvarint(dst, id.Ms)
	return binary.AppendUvarint(dst, id.Seq)
}

// appendStreamBody appends st's encoding after its type and expiry.
func appendStreamBody(dst []byte, st *Stream) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(st.nodes)))
	st.ForEachNode(func(master StreamID, lp []byte) bool {
		dst = appendStreamID(dst, master)
		dst = appendLenBytes(dst, lp)
		return true
	})
	dst = binary.AppendUvarint(dst, st.length)
	for _, id := range []StreamID{st.lastID, st.firstID, st.maxDeletedID} {
		dst = appendStreamID(dst, id)
	}
	dst = binary.AppendUvarint(dst, st.entriesAdded)
	dst = binary.AppendUvarint(dst, uint64(st.GroupCount()))
	st.Groups(func(g *StreamGroup) bool {
		dst = appendLenBytes(dst, []byte(g.Name()))
		dst = appendStreamID(dst, g.LastID())
		dst = binary.AppendVarint(dst, g.EntriesRead())
		dst = binary.AppendUvarint(dst, uint64(g.PendingCount()))
		g.PendingRange(StreamID{}, MaxStreamID, math.MaxInt, nil, 0, 0, func(p StreamPending) {
			dst = appendStreamID(dst, p.ID)
			dst = binary.AppendVarint(dst, p.DeliveryTime)
			dst = binary.AppendUvarint(dst, p.DeliveryCount)
		})
		dst = binary.AppendUvarint(dst, uint64(g.ConsumerCount()))
		g.Consumers(func(c *StreamConsumer) bool {
			dst = appendLenBytes(dst, []byte(c.Name()))
			dst = binary.AppendVarint(dst, c.SeenTime())
			dst = binary.AppendUvarint(dst, uint64(c.PendingCount()))
			g.ConsumerPending(c, func(p StreamPending) bool {
				dst = appendStreamID(dst, p.ID)
				return true
			})
			return true
		})
		return true
	})
	return dst
}

var errStreamValue = errors.New("malformed stream value")

func (r *codecReader) streamID() StreamID {
	ms := r.uvarint()
	return StreamID{Ms: ms, Seq: r.uvarint()}
}

// decodeStreamBody reads what appendStreamBody wrote, checking each node
// and the groups as RESTORE checks Redis's.
func decodeStreamBody(r *codecReader) (*Stream, error) {
	st := NewStream()
	n := r.count()
	for i := 0; i < n && r.err == nil; i++ {
		master := r.streamID()
		lp := r.bytes()
		if r.err == nil {
			if err := st.RestoreNode(master, lp); err != nil {
				return nil, err
			}
		}
	}
	length := r.uvarint()
	last, first, maxDel := r.streamID(), r.streamID(), r.streamID()
	added := r.uvarint()
	if r.err != nil {
		return nil, r.err
	}
	if err := st.RestoreMeta(length, last, first, maxDel, added); err != nil {
		return nil, err
	}
	groups := r.count()
	for i := 0; i < groups && r.err == nil; i++ {
		name := r.bytes()
		lastID := r.streamID()
		read := r.varint()
		if r.err != nil {
			break
		}
		g, err := st.CreateGroup(name, lastID, read)
		if err != nil {
			return nil, errStreamValue
		}
		pending := r.count()
		for j := 0; j < pending && r.err == nil; j++ {
			id := r.streamID()
			at := r.varint()
			count := r.uvarint()
			if r.err == nil {
				if err := g.RestorePending(id, at, count); err != nil {
					return nil, err
				}
			}
		}
		consumers := r.count()
		for j := 0; j < consumers && r.err == nil; j++ {
			cname := r.bytes()
			seen := r.varint()
			if r.err != nil {
				break
			}
			c, err := g.RestoreConsumer(cname, seen)
			if err != nil {
				return nil, err
			}
			ids := r.count()
			for k := 0; k < ids && r.err == nil; k++ {
				if id := r.streamID(); r.err == nil {
					if err := g.RestoreConsumerPending(c, id); err != nil {
						return nil, err
					}
				}
			}
		}
		if r.err == nil {
			if err := g.RestoreDone(); err != nil {
				return nil, err
			}
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != 0 {
		return nil, errStreamValue
	}
	return st, nil
}
