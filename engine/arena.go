package engine

// The arena holds the records of one shard in large pointer-free chunks, so
// that millions of small keys cost neither a Go allocation each nor any work
// for the garbage collector: a chunk is a []byte, which the collector never
// scans. Records are addressed by a 32-bit ref counted in 8-byte units.
//
// Blocks come in size classes (16 B up to maxBlock); freed blocks go on a
// free list per class, linked through their first four bytes.

const (
	unitShift  = 3
	unitSize   = 1 << unitShift // bytes per ref unit
	chunkShift = 13             // units per chunk = 8192, i.e. 64 KiB chunks
	chunkUnits = 1 << chunkShift
	chunkBytes = chunkUnits * unitSize
	maxBlock   = 1024 // larger records live on the Go heap behind a stub
)

// classSizes lists block sizes in bytes. Steps grow with size so that
// internal waste stays under about an eighth.
var classSizes = func() []int {
	var s []int
	for n := 16; n <= 128; n += 8 {
		s = append(s, n)
	}
	for n := 144; n <= 256; n += 16 {
		s = append(s, n)
	}
	for n := 288; n <= 512; n += 32 {
		s = append(s, n)
	}
	for n := 576; n <= maxBlock; n += 64 {
		s = append(s, n)
	}
	return s
}()

// classOfSize maps ceil(size/8) to the smallest class that holds it.
var classOfSize = func() []uint8 {
	t := make([]uint8, maxBlock/unitSize+1)
	c := 0
	for u := range t {
		for classSizes[c] < u*unitSize {
			c++
		}
		t[u] = uint8(c)
	}
	return t
}()

// classFor returns the class for a block of n bytes (n <= maxBlock).
func classFor(n int) uint8 {
	return classOfSize[(n+unitSize-1)>>unitShift]
}

type arena struct {
	chunks [][]byte
	free   []uint32 // head ref of each class's free list, 0 = empty
	bump   uint32   // next unallocated unit in the last chunk
	end    uint32   // first unit past the last chunk
	used   int64    // bytes in live blocks
}

func (a *arena) init() {
	a.free = make([]uint32, len(classSizes))
}

// bytes returns the n-byte block at ref.
func (a *arena) bytes(ref uint32, n int) []byte {
	c := a.chunks[ref>>chunkShift]
	off := int(ref&(chunkUnits-1)) << unitShift
	return c[off : off+n : off+n]
}

// alloc returns a block of class c. The block's contents are undefined.
func (a *arena) alloc(c uint8) uint32 {
	size := classSizes[c]
	a.used += int64(size)
	if ref := a.free[c]; ref != 0 {
		b := a.bytes(ref, 4)
		a.free[c] = le32(b)
		return ref
	}
	units := uint32(size >> unitShift)
	if a.bump+units > a.end || a.chunks == nil {
		a.grow()
	}
	ref := a.bump
	a.bump += units
	return ref
}

// grow starts a new chunk, first handing the unused tail of the current one
// to the free lists so that nothing is lost.
func (a *arena) grow() {
	for a.chunks != nil && a.end-a.bump >= 2 {
		rest := int(a.end-a.bump) << unitShift
		c := len(classSizes) - 1
		for classSizes[c] > rest {
			c--
		}
		ref := a.bump
		a.bump += uint32(classSizes[c] >> unitShift)
		put32(a.bytes(ref, 4), a.free[c])
		a.free[c] = ref
	}
	a.chunks = append(a.chunks, make([]byte, chunkBytes))
	a.bump = uint32(len(a.chunks)-1) << chunkShift
	a.end = a.bump + chunkUnits
	if a.bump == 0 {
		a.bump = 2 // ref 0 means "empty"; keep the first block unused
	}
}

// release returns the block at ref, of class c, to its free list.
func (a *arena) release(ref uint32, c uint8) {
	a.used -= int64(classSizes[c])
	put32(a.bytes(ref, 4), a.free[c])
	a.free[c] = ref
}

// reset drops every chunk.
func (a *arena) reset() {
	a.chunks = nil
	a.bump, a.end, a.used = 0, 0, 0
	clear(a.free)
}

// footprint is the memory the arena holds from the Go heap.
func (a *arena) footprint() int64 {
	return int64(len(a.chunks)) * chunkBytes
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func put32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}
