package replication

import (
	"sync"
)

// Backlog is the replication stream's recent past and its hand-off to the
// replicas' senders: bytes at increasing offsets, kept in blocks. A block
// is kept while it is among the last size bytes (so that a replica that
// reconnects can continue from where it was: PSYNC) or while a reader still
// has to send it; Redis 7 shares its replicas' output with its backlog in
// the same way. Appends never wait for a reader.
//
// Offsets count bytes from the start of the stream's history: end is
// Redis's master_repl_offset, and a reader at pos has sent every byte
// before pos.
type Backlog struct {
	mu      sync.Mutex
	blocks  []*block // oldest first; the last one takes the appends
	first   int64    // offset of blocks[0].b[0]
	end     int64    // offset after the last byte
	size    int64    // bytes kept for PSYNC (repl-backlog-size)
	readers []*Reader
	spare   []*block
}

const blockSize = 64 << 10

type block struct {
	off int64 // offset of b[0]
	b   []byte
}

// NewBacklog returns an empty backlog whose next byte has offset start.
func NewBacklog(start, size int64) *Backlog {
	return &Backlog{first: start, end: start, size: size}
}

// Append adds b at the end of the stream and wakes the readers. It returns
// the offset after b.
func (bl *Backlog) Append(b []byte) int64 {
	bl.mu.Lock()
	for len(b) > 0 {
		var tail *block
		if n := len(bl.blocks); n > 0 && len(bl.blocks[n-1].b) < cap(bl.blocks[n-1].b) {
			tail = bl.blocks[n-1]
		} else {
			tail = bl.newBlock()
		}
		k := min(len(b), cap(tail.b)-len(tail.b))
		tail.b = append(tail.b, b[:k]...)
		b = b[k:]
		bl.end += int64(k)
	}
	end := bl.end
	bl.trim()
	for _, r := range bl.readers {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
	bl.mu.Unlock()
	return end
}

func (bl *Backlog) newBlock() *block {
	var blk *block
	if n := len(bl.spare); n > 0 {
		blk = bl.spare[n-1]
		bl.spare = bl.spare[:n-1]
		blk.b = blk.b[:0]
	} else {
		blk = &block{b: make([]byte, 0, blockSize)}
	}
	blk.off = bl.end
	bl.blocks = append(bl.blocks, blk)
	return blk
}

// trim drops the oldest blocks that are outside the kept size and that no
// reader still needs. The caller holds mu.
func (bl *Backlog) trim() {
	low := bl.end - bl.size
	for _, r := range bl.readers {
		low = min(low, r.pos)
	}
	drop := 0
	for drop < len(bl.blocks)-1 {
		b := bl.blocks[drop]
		if b.off+int64(len(b.b)) > low {
			break
		}
		drop++
	}
	if drop == 0 {
		return
	}
	for _, b := range bl.blocks[:drop] {
		if len(bl.spare) < 4 {
			bl.spare = append(bl.spare, b)
		}
	}
	bl.blocks = append(bl.blocks[:0], bl.blocks[drop:]...)
	bl.first = bl.blocks[0].off
}

// End returns the offset after the last byte: master_repl_offset.
func (bl *Backlog) End() int64 {
	bl.mu.Lock()
	defer bl.mu.Unlock()
	return bl.end
}

// Range returns the offsets of the first byte kept and after the last one.
// Bytes before the kept size may still be there for a reader; they count.
func (bl *Backlog) Range() (first, end int64) {
	bl.mu.Lock()
	defer bl.mu.Unlock()
	return bl.first, bl.end
}

// SetSize changes the bytes kept for PSYNC (CONFIG SET repl-backlog-size).
func (bl *Backlog) SetSize(n int64) {
	bl.mu.Lock()
	bl.size = n
	bl.trim()
	bl.mu.Unlock()
}

// Reader is a replica's sender's place in the stream.
type Reader struct {
	bl    *Backlog
	pos   int64
	wake  chan struct{}
	views [][]byte // Next's, reused
}

// NewReader returns a reader that starts at offset pos, or false when the
// backlog no longer holds (or does not yet hold) that offset.
func (bl *Backlog) NewReader(pos int64) (*Reader, bool) {
	bl.mu.Lock()
	defer bl.mu.Unlock()
	if pos < bl.first || pos > bl.end {
		return nil, false
	}
	r := &Reader{bl: bl, pos: pos, wake: make(chan struct{}, 1)}
	bl.readers = append(bl.readers, r)
	return r, true
}

// Wake is signalled after appends.
func (r *Reader) Wake() <-chan struct{} { return r.wake }

// Pos returns the offset of the next byte to send.
func (r *Reader) Pos() int64 {
	r.bl.mu.Lock()
	defer r.bl.mu.Unlock()
	return r.pos
}

// Next calls fn with the bytes from the reader's position to the end, at
// most max of them, block by block, and moves the reader past them. fn
// must not keep the slices. It returns the bytes passed and the lag left.
func (r *Reader) Next(max int, fn func(b []byte)) (n int, lag int64) {
	bl := r.bl
	bl.mu.Lock()
	views := r.views[:0]
	pos := r.pos
	for _, b := range bl.blocks {
		if n >= max {
			break
		}
		bEnd := b.off + int64(len(b.b))
		if bEnd <= pos {
			continue
		}
		v := b.b[pos-b.off:]
		if len(v) > max-n {
			v = v[:max-n]
		}
		views = append(views, v)
		n += len(v)
		pos += int64(len(v))
	}
	bl.mu.Unlock()
	// The blocks stay: r.pos still holds them until it moves below.
	for _, v := range views {
		fn(v)
	}
	clear(views)
	r.views = views[:0]
	bl.mu.Lock()
	r.pos = pos
	lag = bl.end - pos
	bl.trim()
	bl.mu.Unlock()
	return n, lag
}

// Close removes the reader, letting the blocks it held go.
func (r *Reader) Close() {
	bl := r.bl
	bl.mu.Lock()
	for i, x := range bl.readers {
		if x == r {
			bl.readers = append(bl.readers[:i], bl.readers[i+1:]...)
			break
		}
	}
	bl.trim()
	bl.mu.Unlock()
}
