package engine

import (
	"sync/atomic"
	"unsafe"
)

// The arena holds the records of one shard in large pointer-free chunks, so
// that millions of small keys cost neither a Go allocation each nor any work
// for the garbage collector: a chunk is a []byte, which the collector never
// scans. Records are addressed by a 32-bit ref counted in 8-byte units.
//
// Blocks come in size classes (16 B up to maxBlock), kept in 8 KiB pages
// of one class each.

const (
	unitShift  = 3
	unitSize   = 1 << unitShift // bytes per ref unit
	chunkShift = 13             // units per chunk = 8192, i.e. 64 KiB chunks
	chunkUnits = 1 << chunkShift
	chunkBytes = chunkUnits * unitSize
	maxBlock   = 1024 // larger records live on the Go heap behind a stub

	pageShift     = 10 // units per page = 1024, i.e. 8 KiB pages
	pageUnits     = 1 << pageShift
	pagesPerChunk = chunkUnits / pageUnits
	noPage        = ^uint32(0)
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
	chunks  [][]byte
	pages   []page   // one per page of every chunk
	partial []uint32 // per class: first page with room for a block, noPage = none
	empty   []uint32 // pages holding no block, ready for any class
	used    int64    // bytes in live blocks

	// shardMem and engineMem count used and the pages' bookkeeping for
	// the shard's memory accounting (see memory.go).
	shardMem  *int64
	engineMem *atomic.Int64
}

// A page holds blocks of one class while any of them is live. Blocks are
// carved from the page's start on demand; freed ones go on the page's own
// free list, linked through their first four bytes. A page whose last block
// is freed goes back to the arena's empty pages for any class to take: a
// per-class free list alone would keep every block a growing value ever
// left behind (a sliding log growing through fifteen classes kept fifteen
// blocks, ten times its size) for that class alone.
type page struct {
	free       uint32 // first freed block, 0 = none
	next, prev uint32 // neighbours in the class's list of pages with room
	carved     uint16 // units handed out from the page's start
	live       uint16 // blocks in use
	class      uint8
	listed     bool // in partial[class]
}

func (a *arena) init(shardMem *int64, engineMem *atomic.Int64) {
	a.shardMem, a.engineMem = shardMem, engineMem
	a.partial = make([]uint32, len(classSizes))
	for i := range a.partial {
		a.partial[i] = noPage
	}
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
	units := uint16(size >> unitShift)
	p := a.partial[c]
	if p == noPage {
		p = a.takePage(c)
	}
	pg := &a.pages[p]
	var ref uint32
	if pg.free != 0 {
		ref = pg.free
		pg.free = le32(a.bytes(ref, 4))
	} else {
		ref = p<<pageShift | uint32(pg.carved)
		pg.carved += units
	}
	pg.live++
	if pg.free == 0 && int(pg.carved)+int(units) > pageUnits {
		a.unlist(p)
	}
	a.used += int64(size)
	a.acct(int64(size))
	return ref
}

// takePage gives class c an empty page, growing the arena when none is left.
func (a *arena) takePage(c uint8) uint32 {
	if len(a.empty) == 0 {
		a.grow()
	}
	p := a.empty[len(a.empty)-1]
	a.empty = a.empty[:len(a.empty)-1]
	pg := &a.pages[p]
	*pg = page{class: c}
	if p == 0 {
		pg.carved = 2 // ref 0 means "empty"; keep the first unit pair unused
	}
	a.list(p)
	return p
}

// grow adds a chunk, its pages empty, lowest page taken first.
func (a *arena) grow() {
	a.chunks = append(a.chunks, make([]byte, chunkBytes))
	first := uint32(len(a.pages))
	c := cap(a.pages)
	a.pages = append(a.pages, make([]page, pagesPerChunk)...)
	a.acct(int64(cap(a.pages)-c) * pageBytes)
	for i := uint32(pagesPerChunk); i > 0; i-- {
		a.empty = append(a.empty, first+i-1)
	}
}

// release returns the block at ref, of class c.
func (a *arena) release(ref uint32, c uint8) {
	a.used -= int64(classSizes[c])
	a.acct(-int64(classSizes[c]))
	p := ref >> pageShift
	pg := &a.pages[p]
	pg.live--
	if pg.live == 0 {
		if pg.listed {
			a.unlist(p)
		}
		a.empty = append(a.empty, p)
		return
	}
	put32(a.bytes(ref, 4), pg.free)
	pg.free = ref
	if !pg.listed {
		a.list(p)
	}
}

// list puts page p at the head of its class's pages with room.
func (a *arena) list(p uint32) {
	pg := &a.pages[p]
	head := a.partial[pg.class]
	pg.prev, pg.next, pg.listed = noPage, head, true
	if head != noPage {
		a.pages[head].prev = p
	}
	a.partial[pg.class] = p
}

// unlist takes page p off its class's pages with room.
func (a *arena) unlist(p uint32) {
	pg := &a.pages[p]
	if pg.prev != noPage {
		a.pages[pg.prev].next = pg.next
	} else {
		a.partial[pg.class] = pg.next
	}
	if pg.next != noPage {
		a.pages[pg.next].prev = pg.prev
	}
	pg.listed = false
}

// reset drops every chunk.
func (a *arena) reset() {
	a.acct(-a.used - int64(cap(a.pages))*pageBytes)
	a.chunks, a.pages, a.empty = nil, nil, nil
	a.used = 0
	for i := range a.partial {
		a.partial[i] = noPage
	}
}

const pageBytes = int64(unsafe.Sizeof(page{}))

func (a *arena) acct(d int64) {
	if a.shardMem != nil {
		*a.shardMem += d
		a.engineMem.Add(d)
	}
}

// footprint is the memory the arena holds from the Go heap.
func (a *arena) footprint() int64 {
	return int64(len(a.chunks))*chunkBytes + int64(cap(a.pages))*int64(unsafe.Sizeof(page{}))
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func put32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}
