package engine

import (
	"bytes"
	"errors"
	"math"
	"sort"
	"strconv"
	"unsafe"
)

// Streams (Redis 7.0.15 semantics). A stream is a log of entries, each a
// StreamID and field/value pairs, kept as Redis keeps it: in nodes that are
// listpacks laid out as t_stream.c lays them out, one node per run of
// appended entries. Because the bytes are Redis's own, DUMP and RDB can
// carry the nodes verbatim, and approximate trimming, which only removes
// whole nodes, removes exactly what Redis would.
//
// A node's listpack starts with the master entry
//
//	count | deleted | num-fields | field_1 ... field_N | 0
//
// (count: live entries, deleted: entries flagged deleted; the trailing 0
// stands where an entry's lp-count would, which stops a backward walk),
// then one run of elements per entry:
//
//	flags | ms-diff | seq-diff | num-fields | field_1 | value_1 ... | lp-count
//
// or, when the entry has exactly the master's fields (flag SAMEFIELDS),
//
//	flags | ms-diff | seq-diff | value_1 ... value_N | lp-count
//
// The diffs are the entry's ID minus the node's master ID, each part
// subtracted as uint64 and stored as int64 (a new millisecond can make the
// sequence diff negative). lp-count is the number of elements of the entry
// before it, so that a walk can go backwards.
//
// Deletion is lazy, as in Redis: XDEL and exact trimming flag entries
// deleted and move them from count to deleted; a node goes when its last
// live entry is deleted, or when trimming removes it whole.
//
// The nodes live in a Go slice sorted by master ID: entries are only ever
// appended at the end and trimmed from the front, and a lookup is a binary
// search, so a tree would buy nothing over the slice.

// StreamID is a stream entry ID: milliseconds and a sequence number.
type StreamID struct {
	Ms, Seq uint64
}

// MaxStreamID is the largest ID, "+" in a range.
var MaxStreamID = StreamID{math.MaxUint64, math.MaxUint64}

// Compare returns -1, 0 or 1 as id is before, equal to or after o.
func (id StreamID) Compare(o StreamID) int {
	switch {
	case id.Ms < o.Ms:
		return -1
	case id.Ms > o.Ms:
		return 1
	case id.Seq < o.Seq:
		return -1
	case id.Seq > o.Seq:
		return 1
	}
	return 0
}

// Less reports whether id sorts before o.
func (id StreamID) Less(o StreamID) bool {
	return id.Ms < o.Ms || id.Ms == o.Ms && id.Seq < o.Seq
}

// IsZero reports whether id is 0-0.
func (id StreamID) IsZero() bool { return id.Ms == 0 && id.Seq == 0 }

// Incr returns the ID after id. For MaxStreamID it returns 0-0 and false,
// as streamIncrID wraps and fails.
func (id StreamID) Incr() (StreamID, bool) {
	switch {
	case id.Seq != math.MaxUint64:
		return StreamID{id.Ms, id.Seq + 1}, true
	case id.Ms != math.MaxUint64:
		return StreamID{id.Ms + 1, 0}, true
	}
	return StreamID{}, false
}

// Decr returns the ID before id. For 0-0 it returns MaxStreamID and false,
// as streamDecrID wraps and fails.
func (id StreamID) Decr() (StreamID, bool) {
	switch {
	case id.Seq != 0:
		return StreamID{id.Ms, id.Seq - 1}, true
	case id.Ms != 0:
		return StreamID{id.Ms - 1, math.MaxUint64}, true
	}
	return MaxStreamID, false
}

// String formats id as "ms-seq".
func (id StreamID) String() string { return string(id.Append(nil)) }

// Append appends id as "ms-seq" to dst.
func (id StreamID) Append(dst []byte) []byte {
	dst = strconv.AppendUint(dst, id.Ms, 10)
	dst = append(dst, '-')
	return strconv.AppendUint(dst, id.Seq, 10)
}

// Errors of stream operations. Their texts are the error replies Redis
// 7.0.15 gives, without the leading '-', so the commands layer can send
// them as they are.
var (
	ErrInvalidStreamID = errors.New("ERR Invalid stream ID specified as stream command argument")
	ErrXAddIDZero      = errors.New("ERR The ID specified in XADD must be greater than 0-0")
	ErrXAddIDTooSmall  = errors.New("ERR The ID specified in XADD is equal or smaller than the target stream top item")
	ErrStreamExhausted = errors.New("ERR The stream has exhausted the last possible ID, unable to add more items")
	// ErrStreamTooLarge: the fields and values of one entry pass 1 GiB.
	ErrStreamTooLarge = errors.New("ERR Elements are too large to be stored")
	// ErrXAddSeqExhausted is for "ms-*" when ms is the last ID's and its
	// sequence is at the maximum. Redis 7.0.15 fails there without setting
	// errno, so XADD reports its stale errno as the size error; the text is
	// what redis-server really answers.
	ErrXAddSeqExhausted      = errors.New("ERR Elements are too large to be stored")
	ErrXSetIDTooSmall        = errors.New("ERR The ID specified in XSETID is smaller than the target stream top item")
	ErrXSetIDEntriesAdded    = errors.New("ERR The entries_added specified in XSETID is smaller than the target stream length")
	ErrXSetIDBelowMaxDeleted = errors.New("ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id")
)

// ParseStreamID parses a strict ID: "ms-seq", or "ms" with the sequence
// missingSeq (0 where the ID starts something, math.MaxUint64 where it ends
// a range). "-" and "+" are refused (streamParseStrictIDOrReply).
func ParseStreamID(b []byte, missingSeq uint64) (StreamID, error) {
	id, _, err := parseStreamID(b, missingSeq, true, false)
	return id, err
}

// ParseStreamRangeID is ParseStreamID that also takes "-" for 0-0 and "+"
// for MaxStreamID (streamParseIDOrReply: range ends, XGROUP SETID).
func ParseStreamRangeID(b []byte, missingSeq uint64) (StreamID, error) {
	id, _, err := parseStreamID(b, missingSeq, false, false)
	return id, err
}

// ParseStreamIntervalID parses a range end that may be exclusive: "(id"
// (strict after the parenthesis) sets exclusive, anything else is
// ParseStreamRangeID. The caller moves an exclusive start with Incr and an
// exclusive end with Decr, answering "ERR invalid start ID for the
// interval" or "ERR invalid end ID for the interval" when they fail.
func ParseStreamIntervalID(b []byte, missingSeq uint64) (id StreamID, exclusive bool, err error) {
	if len(b) > 1 && b[0] == '(' {
		id, _, err = parseStreamID(b[1:], missingSeq, true, false)
		return id, true, err
	}
	id, _, err = parseStreamID(b, missingSeq, false, false)
	return id, false, err
}

// XAddIDForm says how XADD was told to pick the new entry's ID.
type XAddIDForm uint8

const (
	XAddAuto     XAddIDForm = iota // "*": from the clock
	XAddAutoSeq                    // "ms-*": the given ms, the next sequence
	XAddExplicit                   // "ms-seq" or "ms" (sequence 0)
)

// ParseXAddID parses XADD's ID argument.
func ParseXAddID(b []byte) (StreamID, XAddIDForm, error) {
	if len(b) > 0 && b[0] == '*' && (len(b) == 1 || b[1] == 0) {
		return StreamID{}, XAddAuto, nil
	}
	id, autoSeq, err := parseStreamID(b, 0, true, true)
	if autoSeq {
		return id, XAddAutoSeq, err
	}
	return id, XAddExplicit, err
}

// parseStreamID follows streamGenericParseIDOrReply, which works on a C
// string: a NUL ends the argument, the first '-' splits it, and each part
// goes through string2ull, which falls back to strtoull. So " 7", "+7" and
// "007" are 7, and a sequence written "-01" is 2^64-1, as in Redis.
func parseStreamID(b []byte, missingSeq uint64, strict, allowAutoSeq bool) (id StreamID, autoSeq bool, err error) {
	if len(b) > 127 {
		return StreamID{}, false, ErrInvalidStreamID
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	if len(b) == 1 && (b[0] == '-' || b[0] == '+') {
		if strict {
			return StreamID{}, false, ErrInvalidStreamID
		}
		if b[0] == '-' {
			return StreamID{}, false, nil
		}
		return MaxStreamID, false, nil
	}
	msPart, seqPart, hasSeq := bytes.Cut(b, []byte{'-'})
	ms, ok := parseStreamIDPart(msPart)
	if !ok {
		return StreamID{}, false, ErrInvalidStreamID
	}
	seq := missingSeq
	if hasSeq {
		if allowAutoSeq && len(seqPart) == 1 && seqPart[0] == '*' {
			return StreamID{ms, 0}, true, nil
		}
		if seq, ok = parseStreamIDPart(seqPart); !ok {
			return StreamID{}, false, ErrInvalidStreamID
		}
	}
	return StreamID{ms, seq}, false, nil
}

// parseStreamIDPart is string2ull: string2ll, refusing negatives, else
// glibc's strtoull in base 10 (leading white space, a sign, digits, nothing
// after them; a minus negates modulo 2^64).
func parseStreamIDPart(b []byte) (uint64, bool) {
	if v, ok := ParseInt(b); ok {
		return uint64(v), v >= 0
	}
	if len(b) == 0 {
		return 0, false
	}
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] >= '\t' && b[i] <= '\r') {
		i++
	}
	neg := false
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		neg = b[i] == '-'
		i++
	}
	if i == len(b) {
		return 0, false
	}
	var v uint64
	for ; i < len(b); i++ {
		c := b[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, false // ERANGE
		}
		v = v*10 + d
	}
	if neg {
		v = -v
	}
	return v, true
}

// Entry flags, as t_stream.c defines them.
const (
	streamFlagDeleted    = 1 << 0
	streamFlagSameFields = 1 << 1
)

// streamListpackMaxSize caps a node (and one entry's data): a listpack
// holds its size in 32 bits, and Redis stops well before.
const streamListpackMaxSize = 1 << 30

// streamNodePrealloc is the most a new node is given up front; Redis
// preallocates as much so that the first entries need no reallocation.
const streamNodePrealloc = 4096

// StreamNodeLimits bound a node as the stream-node-max-bytes and
// stream-node-max-entries settings do; 0 means no limit.
type StreamNodeLimits struct {
	MaxBytes   int64
	MaxEntries int64
}

// DefaultStreamNodeLimits are Redis's defaults (config.c).
var DefaultStreamNodeLimits = StreamNodeLimits{MaxBytes: 4096, MaxEntries: 100}

// ApproxTrimLimit is the LIMIT XADD and XTRIM use for "~" when none is
// given: 100 nodes' worth of entries, kept within [1, 1000000] and 10000
// when stream-node-max-entries is 0 (streamParseAddOrTrimArgsOrReply).
// Exact trimming has no limit; nor has a command from the master or AOF.
func (l StreamNodeLimits) ApproxTrimLimit() int64 {
	n := int64(0)
	if l.MaxEntries <= math.MaxInt64/100 {
		n = 100 * l.MaxEntries
	}
	if n <= 0 {
		n = 10000
	}
	return min(n, 1000000)
}

// streamNode is one node: its master ID (the ID of the first entry added
// to it) and its listpack.
type streamNode struct {
	master StreamID
	lp     listpack
}

// Stream is a stream value: the nodes, the metadata Redis 7.0 keeps, and
// the consumer groups.
type Stream struct {
	nodes     []streamNode
	nodeSlots int   // capacity of the nodes array as allocated; nodes may be a suffix of it
	lpHeld    int64 // the nodes' listpack allocations, for MemoryUsage

	length       uint64
	lastID       StreamID // last ID ever added (or set by XSETID)
	firstID      StreamID // first live entry, 0-0 when empty
	maxDeletedID StreamID // largest ID XDEL removed (or set by XSETID)
	entriesAdded uint64   // entries ever added (or set by XSETID)

	groups    []*StreamGroup // sorted by name
	groupHeld int64          // the groups' memory, for MemoryUsage

	closedNodeSize int // size of the last node closed for being full, to size the next
}

// NewStream returns an empty stream.
func NewStream() *Stream { return &Stream{} }

// Len returns the number of live entries.
func (s *Stream) Len() uint64 { return s.length }

// LastID returns the last generated ID (XINFO's last-generated-id), which
// XADD must exceed.
func (s *Stream) LastID() StreamID { return s.lastID }

// FirstID returns the recorded first entry ID (recorded-first-entry-id):
// the first live entry, 0-0 when the stream is empty.
func (s *Stream) FirstID() StreamID { return s.firstID }

// MaxDeletedID returns the largest ID XDEL has removed
// (max-deleted-entry-id). Trimming does not move it, as in Redis 7.0.
func (s *Stream) MaxDeletedID() StreamID { return s.maxDeletedID }

// EntriesAdded returns how many entries were ever added (entries-added).
func (s *Stream) EntriesAdded() uint64 { return s.entriesAdded }

// NodeCount returns the number of nodes (XINFO's radix-tree-keys).
func (s *Stream) NodeCount() int { return len(s.nodes) }

// Encoding names the representation as OBJECT ENCODING reports it.
func (s *Stream) Encoding() string { return "stream" }

// masterLayout reads a node's master entry: the live and deleted counts,
// the master field count, the position of the first master field and that
// of the first entry.
func (lp listpack) masterLayout() (live, deleted, nfields int64, fieldsAt, entriesAt int) {
	p := lp.first()
	live = lp.getInt(p)
	p = lp.next(p)
	deleted = lp.getInt(p)
	p = lp.next(p)
	nfields = lp.getInt(p)
	p = lp.next(p)
	fieldsAt = p
	for i := int64(0); i < nfields; i++ {
		p = lp.next(p)
	}
	return live, deleted, nfields, fieldsAt, lp.next(p) // past the 0 terminator
}

// streamEntryHead is what an entry's first elements say.
type streamEntryHead struct {
	flags   int64
	id      StreamID
	nfields int64
	body    int // first field (or first value, with SAMEFIELDS)
	end     int // the next entry
}

// entryAt decodes the entry whose flags are at p.
func (lp listpack) entryAt(p int, master StreamID, masterFields int64) streamEntryHead {
	var h streamEntryHead
	h.flags = lp.getInt(p)
	p = lp.next(p)
	h.id.Ms = master.Ms + uint64(lp.getInt(p))
	p = lp.next(p)
	h.id.Seq = master.Seq + uint64(lp.getInt(p))
	p = lp.next(p)
	n := masterFields
	if h.flags&streamFlagSameFields != 0 {
		h.nfields = masterFields
	} else {
		h.nfields = lp.getInt(p)
		p = lp.next(p)
		n = 2 * h.nfields
	}
	h.body = p
	for ; n > 0; n-- {
		p = lp.next(p)
	}
	h.end = lp.next(p) // past lp-count
	return h
}

// lastEntryAt returns the position of the flags of the node's last entry,
// found through the lp-count that closes it.
func (lp listpack) lastEntryAt() int {
	p := lp.prev(lp.end())
	for n := lp.getInt(p); n > 0; n-- {
		p = lp.prev(p)
	}
	return p
}

// setNodeLP replaces node i's listpack, keeping lpHeld right.
func (s *Stream) setNodeLP(i int, lp listpack) {
	if old := s.nodes[i].lp; cap(old) != cap(lp) {
		s.lpHeld += allocSize(cap(lp)) - allocSize(cap(old))
	}
	s.nodes[i].lp = lp
}

// appendNode adds a node at the end.
func (s *Stream) appendNode(n streamNode) {
	old := unsafe.SliceData(s.nodes)
	s.nodes = append(s.nodes, n)
	if unsafe.SliceData(s.nodes) != old {
		s.nodeSlots = cap(s.nodes)
	}
	s.lpHeld += allocSize(cap(n.lp))
}

// dropNodes removes nodes [i, j).
func (s *Stream) dropNodes(i, j int) {
	for _, n := range s.nodes[i:j] {
		s.lpHeld -= allocSize(cap(n.lp))
	}
	switch {
	case j-i == len(s.nodes):
		s.nodes, s.nodeSlots = nil, 0
	case i == 0:
		// Dropping from the front reslices: the array is reused until the
		// next append outgrows it. The slots let go must not pin listpacks.
		clear(s.nodes[:j])
		s.nodes = s.nodes[j:]
	default:
		s.nodes = append(s.nodes[:i], s.nodes[j:]...)
		clear(s.nodes[len(s.nodes) : len(s.nodes)+j-i])
	}
}

// nodeAtOrBefore returns the index of the last node whose master ID is at
// most id, or -1. Normally only that node can hold id, every entry of a
// node being below the next node's master ID; but XSETID may set the last
// ID below deleted entries, after which Redis appends smaller IDs after
// them, even in a new node sorting before older ones. Lookups therefore
// walk on from this node as Redis's iterator does, stopping at the first
// live entry past what they seek, which in the normal case is at once.
func (s *Stream) nodeAtOrBefore(id StreamID) int {
	return sort.Search(len(s.nodes), func(i int) bool { return id.Less(s.nodes[i].master) }) - 1
}

// Add appends an entry with the field/value pairs fv (field, value, field,
// value...; at least one pair), choosing its ID as XADD does for form, and
// returns the ID. now is the clock in ms for XAddAuto: when the last ID is
// at or past it, the ID is the last one's successor. Creating the key (or
// not, for NOMKSTREAM) is the caller's business.
func (s *Stream) Add(id StreamID, form XAddIDForm, fv [][]byte, limits StreamNodeLimits, now int64) (StreamID, error) {
	if len(fv) == 0 || len(fv)%2 != 0 {
		panic("stream: Add needs field/value pairs")
	}
	if form == XAddExplicit && id.IsZero() {
		return StreamID{}, ErrXAddIDZero
	}
	if s.lastID == MaxStreamID {
		return StreamID{}, ErrStreamExhausted
	}
	switch form {
	case XAddAuto:
		if ms := uint64(max(now, 0)); ms > s.lastID.Ms {
			id = StreamID{ms, 0}
		} else {
			id, _ = s.lastID.Incr()
		}
	case XAddAutoSeq:
		if s.lastID.Ms == id.Ms {
			if s.lastID.Seq == math.MaxUint64 {
				return StreamID{}, ErrXAddSeqExhausted
			}
			id = StreamID{id.Ms, s.lastID.Seq + 1}
		}
	}
	if !s.lastID.Less(id) {
		return StreamID{}, ErrXAddIDTooSmall
	}
	dataLen := 0
	for _, b := range fv {
		dataLen += len(b)
	}
	if dataLen > streamListpackMaxSize {
		return StreamID{}, ErrStreamTooLarge
	}
	s.appendEntry(id, fv, dataLen, limits)
	s.length++
	s.entriesAdded++
	s.lastID = id
	if s.length == 1 {
		s.firstID = id
	}
	return id, nil
}

// appendEntry writes the entry into the tail node, or into a new node when
// the tail is full by limits (streamAppendItem's rules: the node's bytes
// plus the new data reaching max-bytes, or live plus deleted entries
// reaching max-entries).
func (s *Stream) appendEntry(id StreamID, fv [][]byte, dataLen int, limits StreamNodeLimits) {
	nfields := int64(len(fv) / 2)
	tail := len(s.nodes) - 1
	if tail >= 0 {
		lp := s.nodes[tail].lp
		maxBytes := limits.MaxBytes
		if maxBytes <= 0 || maxBytes > streamListpackMaxSize {
			maxBytes = streamListpackMaxSize
		}
		full := int64(len(lp)+dataLen) >= maxBytes
		if !full && limits.MaxEntries > 0 {
			live, deleted, _, _, _ := lp.masterLayout()
			full = live+deleted >= limits.MaxEntries
		}
		if full {
			// A closed node is not appended to again (unless an XSETID
			// below deleted entries reorders the nodes): let its slack go,
			// as Redis does with lpShrinkToFit.
			s.closedNodeSize = len(lp)
			if allocSize(len(lp)) < int64(cap(lp)) {
				s.setNodeLP(tail, append(listpack(nil), lp...))
			}
			tail = -1
		}
	}

	var lp listpack
	var master StreamID
	flags := int64(0)
	if tail < 0 {
		master = id
		prealloc := streamNodePrealloc
		if limits.MaxBytes > 0 && limits.MaxBytes < streamNodePrealloc {
			prealloc = int(limits.MaxBytes)
		}
		// Size the node as the last full one was, as entries tend to be
		// alike, but no bigger than Redis's preallocation, so that one huge
		// entry does not make every later node start huge; failing that
		// start small and let append double, since a stream of a few
		// entries should not hold 4 KiB as Redis's does.
		size := min(prealloc, 2*(64+dataLen))
		if s.closedNodeSize > 0 {
			size = min(int(allocSize(s.closedNodeSize)), prealloc)
		}
		lp = newListpack(size)
		lp = lp.appendInt(1) // live entries: the one being added
		lp = lp.appendInt(0) // deleted entries
		lp = lp.appendInt(nfields)
		for i := 0; i < len(fv); i += 2 {
			lp = lp.appendString(fv[i])
		}
		lp = lp.appendInt(0)
		flags = streamFlagSameFields
	} else {
		n := &s.nodes[tail]
		master, lp = n.master, n.lp
		p := lp.first()
		lp = lp.replaceInt(p, lp.getInt(p)+1)
		p = lp.next(lp.next(p))
		if lp.getInt(p) == nfields {
			same := true
			p = lp.next(p)
			for i := 0; i < len(fv) && same; i += 2 {
				same = listpackElementEquals(lp, p, fv[i])
				p = lp.next(p)
			}
			if same {
				flags = streamFlagSameFields
			}
		}
	}

	lp = lp.appendInt(flags)
	lp = lp.appendInt(int64(id.Ms - master.Ms))
	lp = lp.appendInt(int64(id.Seq - master.Seq))
	count := nfields + 3
	if flags&streamFlagSameFields == 0 {
		lp = lp.appendInt(nfields)
		for _, b := range fv {
			lp = lp.appendString(b)
		}
		count += nfields + 1
	} else {
		for i := 1; i < len(fv); i += 2 {
			lp = lp.appendString(fv[i])
		}
	}
	lp = lp.appendInt(count)

	if tail < 0 {
		s.insertNode(streamNode{master: master, lp: lp})
	} else {
		s.setNodeLP(tail, lp)
	}
}

// insertNode adds a new node in master ID order. That is the end unless
// XSETID went below deleted entries (see nodeAtOrBefore). A node with the
// same master ID is replaced, as raxInsert replaces it in Redis; that node
// normally holds only deleted entries, and if not, its live ones are
// counted out, where Redis (whose stream then no longer adds up, and which
// has been seen to crash after such sequences) leaves the length alone.
func (s *Stream) insertNode(n streamNode) {
	i := s.nodeAtOrBefore(n.master)
	if i < 0 || s.nodes[i].master != n.master {
		s.appendNode(n)
		if i < len(s.nodes)-2 {
			copy(s.nodes[i+2:], s.nodes[i+1:len(s.nodes)-1])
			s.nodes[i+1] = n
		}
		return
	}
	live, _, _, _, _ := s.nodes[i].lp.masterLayout()
	s.length -= uint64(live)
	s.lpHeld += allocSize(cap(n.lp)) - allocSize(cap(s.nodes[i].lp))
	s.nodes[i] = n
}

// listpackElementEquals reports whether the element at p is the string b.
// Integer encoding is canonical, so an integer element equals b exactly
// when b is the canonical form of that integer.
func listpackElementEquals(lp listpack, p int, b []byte) bool {
	s, v, isInt := lp.get(p)
	if isInt {
		w, ok := ParseInt(b)
		return ok && w == v
	}
	return bytes.Equal(s, b)
}

// streamCursor decodes entries for callbacks, reusing its buffers so that
// walking entries does not allocate per entry.
type streamCursor struct {
	fv           [][]byte
	num          []byte   // integers formatted for the current entry
	masterFields [][]byte // the current node's master fields
	masterNum    []byte
	masterOf     int // index of the node masterFields belongs to, -1 for none
}

// loadMasterFields decodes node i's master fields, once per node.
func (c *streamCursor) loadMasterFields(i int, lp listpack, fieldsAt int, nfields int64) {
	if c.masterOf == i {
		return
	}
	c.masterOf = i
	c.masterFields, c.masterNum = c.masterFields[:0], c.masterNum[:0]
	p := fieldsAt
	for k := int64(0); k < nfields; k++ {
		var f []byte
		c.masterNum, f = appendListpackElement(c.masterNum, lp, p)
		c.masterFields = append(c.masterFields, f)
		p = lp.next(p)
	}
}

// appendListpackElement returns the element at p as bytes: a slice of lp
// for a string, or the integer's text appended to buf (the returned slice
// stays valid when a later append moves buf: the old array is left as it
// was).
func appendListpackElement(buf []byte, lp listpack, p int) ([]byte, []byte) {
	s, v, isInt := lp.get(p)
	if !isInt {
		return buf, s
	}
	start := len(buf)
	buf = strconv.AppendInt(buf, v, 10)
	return buf, buf[start:len(buf):len(buf)]
}

// entryPairs decodes the entry h of node i into c.fv.
func (c *streamCursor) entryPairs(i int, lp listpack, h *streamEntryHead, fieldsAt int) [][]byte {
	c.fv, c.num = c.fv[:0], c.num[:0]
	p := h.body
	var e []byte
	if h.flags&streamFlagSameFields != 0 {
		c.loadMasterFields(i, lp, fieldsAt, h.nfields)
		for k := int64(0); k < h.nfields; k++ {
			c.num, e = appendListpackElement(c.num, lp, p)
			c.fv = append(c.fv, c.masterFields[k], e)
			p = lp.next(p)
		}
		return c.fv
	}
	for k := int64(0); k < 2*h.nfields; k++ {
		c.num, e = appendListpackElement(c.num, lp, p)
		c.fv = append(c.fv, e)
		p = lp.next(p)
	}
	return c.fv
}

// Range calls fn for the live entries with start <= ID <= end in ID
// order, or in reverse order when rev, until count entries were passed
// (0: no limit) or fn returns false, and returns how many fn got. fv holds
// field, value, field, value...: it and its slices are valid only during
// the call, and fn must not change the stream.
func (s *Stream) Range(start, end StreamID, count int, rev bool, fn func(id StreamID, fv [][]byte) bool) int {
	if end.Less(start) {
		return 0
	}
	c := streamCursor{masterOf: -1}
	if rev {
		return s.rangeRev(&c, start, end, count, fn)
	}
	emitted := 0
	for i := max(s.nodeAtOrBefore(start), 0); i < len(s.nodes); i++ {
		n := &s.nodes[i]
		lp := n.lp
		_, _, mf, fieldsAt, p := lp.masterLayout()
		for p < lp.end() {
			h := lp.entryAt(p, n.master, mf)
			p = h.end
			if h.flags&streamFlagDeleted != 0 || h.id.Less(start) {
				continue
			}
			if end.Less(h.id) {
				return emitted
			}
			emitted++
			if !fn(h.id, c.entryPairs(i, lp, &h, fieldsAt)) || emitted == count {
				return emitted
			}
		}
	}
	return emitted
}

func (s *Stream) rangeRev(c *streamCursor, start, end StreamID, count int, fn func(id StreamID, fv [][]byte) bool) int {
	emitted := 0
	i := s.nodeAtOrBefore(end)
	if i < 0 {
		i = len(s.nodes) - 1 // as Redis seeks "$" then
	}
	for ; i >= 0; i-- {
		n := &s.nodes[i]
		lp := n.lp
		_, _, mf, fieldsAt, _ := lp.masterLayout()
		// Each entry ends with its lp-count; the master's 0 terminator
		// stands where an lp-count would and ends the walk.
		for p := lp.prev(lp.end()); ; {
			k := lp.getInt(p)
			if k == 0 {
				break
			}
			for ; k > 0; k-- {
				p = lp.prev(p)
			}
			h := lp.entryAt(p, n.master, mf)
			p = lp.prev(p)
			if h.flags&streamFlagDeleted != 0 || end.Less(h.id) {
				continue
			}
			if h.id.Less(start) {
				return emitted
			}
			emitted++
			if !fn(h.id, c.entryPairs(i, lp, &h, fieldsAt)) || emitted == count {
				return emitted
			}
		}
	}
	return emitted
}

// Get calls fn with entry id's field/value pairs and reports whether the
// entry exists (live).
func (s *Stream) Get(id StreamID, fn func(fv [][]byte)) bool {
	return s.Range(id, id, 1, false, func(_ StreamID, fv [][]byte) bool {
		if fn != nil {
			fn(fv)
		}
		return false
	}) == 1
}

// Exists reports whether entry id is in the stream (and not deleted).
func (s *Stream) Exists(id StreamID) bool {
	_, _, ok := s.findEntry(id)
	return ok
}

// findEntry returns the node and the position of the flags of live entry
// id, searching as Redis's iterator does from id to id: deleted entries and
// smaller IDs are passed over, the first larger live ID ends the search.
func (s *Stream) findEntry(id StreamID) (node, pos int, ok bool) {
	for i := max(s.nodeAtOrBefore(id), 0); i < len(s.nodes); i++ {
		n := &s.nodes[i]
		lp := n.lp
		_, _, mf, _, p := lp.masterLayout()
		for p < lp.end() {
			h := lp.entryAt(p, n.master, mf)
			if h.flags&streamFlagDeleted == 0 {
				if h.id == id {
					return i, p, true
				}
				if id.Less(h.id) {
					return 0, 0, false
				}
			}
			p = h.end
		}
	}
	return 0, 0, false
}

// FirstEntry calls fn with the first live entry and reports whether there
// is one.
func (s *Stream) FirstEntry(fn func(id StreamID, fv [][]byte)) bool {
	return s.Range(StreamID{}, MaxStreamID, 1, false, func(id StreamID, fv [][]byte) bool {
		fn(id, fv)
		return false
	}) == 1
}

// LastEntry calls fn with the last live entry and reports whether there is
// one.
func (s *Stream) LastEntry(fn func(id StreamID, fv [][]byte)) bool {
	return s.Range(StreamID{}, MaxStreamID, 1, true, func(id StreamID, fv [][]byte) bool {
		fn(id, fv)
		return false
	}) == 1
}

// LastValidID returns the last live entry's ID (streamLastValidID), false
// when the stream is empty.
func (s *Stream) LastValidID() (StreamID, bool) {
	var last StreamID
	ok := s.Range(StreamID{}, MaxStreamID, 1, true, func(id StreamID, _ [][]byte) bool {
		last = id
		return false
	}) == 1
	return last, ok
}

// EdgeID returns the first (or last) entry's ID, deleted entries included
// unless skipDeleted, as streamGetEdgeID: with no such entry, MaxStreamID
// for the first and 0-0 for the last. XADD and XTRIM with "~" propagate
// MINID as "=" EdgeID(true, false) (and MAXLEN as "=" Len()), since the
// approximate result cannot be recomputed on a replica.
func (s *Stream) EdgeID(first, skipDeleted bool) StreamID {
	if first {
		for _, n := range s.nodes {
			lp := n.lp
			_, _, mf, _, p := lp.masterLayout()
			for p < lp.end() {
				h := lp.entryAt(p, n.master, mf)
				if !skipDeleted || h.flags&streamFlagDeleted == 0 {
					return h.id
				}
				p = h.end
			}
		}
		return MaxStreamID
	}
	if !skipDeleted {
		if len(s.nodes) == 0 {
			return StreamID{}
		}
		n := &s.nodes[len(s.nodes)-1]
		_, _, mf, _, _ := n.lp.masterLayout()
		return n.lp.entryAt(n.lp.lastEntryAt(), n.master, mf).id
	}
	id, _ := s.LastValidID()
	return id
}

// Delete removes the entries ids (XDEL) and returns how many were there.
// As in Redis the entries are only flagged deleted, and a node goes when
// its last live entry does; max-deleted-entry-id and the recorded first ID
// follow.
func (s *Stream) Delete(ids []StreamID) int {
	deleted := 0
	firstGone := false
	for _, id := range ids {
		if !s.deleteEntry(id) {
			continue
		}
		deleted++
		if id == s.firstID {
			firstGone = true
		}
		if s.maxDeletedID.Less(id) {
			s.maxDeletedID = id
		}
	}
	if deleted > 0 {
		if s.length == 0 {
			s.firstID = StreamID{}
		} else if firstGone {
			s.firstID = s.EdgeID(true, true)
		}
	}
	return deleted
}

func (s *Stream) deleteEntry(id StreamID) bool {
	i, p, ok := s.findEntry(id)
	if !ok {
		return false
	}
	lp := s.nodes[i].lp
	lp = lp.replaceInt(p, lp.getInt(p)|streamFlagDeleted)
	s.length--
	first := lp.first()
	live := lp.getInt(first)
	if live == 1 {
		s.dropNodes(i, i+1)
		return true
	}
	lp = lp.replaceInt(first, live-1)
	p = lp.next(first)
	lp = lp.replaceInt(p, lp.getInt(p)+1)
	s.setNodeLP(i, lp)
	return true
}

// StreamTrimStrategy is what XTRIM (or XADD's trimming) keeps.
type StreamTrimStrategy uint8

const (
	StreamTrimNone   StreamTrimStrategy = iota
	StreamTrimMaxLen                    // at most MaxLen entries
	StreamTrimMinID                     // no entries below MinID
)

// StreamTrimArgs are XTRIM's (and XADD's) trimming options.
type StreamTrimArgs struct {
	Strategy StreamTrimStrategy
	MaxLen   int64 // >= 0
	MinID    StreamID
	// Approx ("~") removes whole nodes only: it stops at the first node it
	// cannot remove whole, so the stream may keep more than asked.
	Approx bool
	// Limit is the most entries to remove, 0 for no limit; see
	// StreamNodeLimits.ApproxTrimLimit for the default "~" gets. A node
	// that would pass it stops the trimming.
	Limit int64
}

// Trim removes entries from the front of the stream as streamTrim does and
// returns how many it removed. Exact trimming removes the nodes it can and
// then flags the remaining entries deleted within the first node left,
// without rewriting it; unlike XDEL this leaves max-deleted-entry-id alone.
func (s *Stream) Trim(a StreamTrimArgs) int64 {
	if a.Strategy == StreamTrimNone {
		return 0
	}
	maxLen := uint64(max(a.MaxLen, 0))
	var deleted int64
	drop := 0
	for i := 0; i < len(s.nodes); i++ {
		if a.Strategy == StreamTrimMaxLen && s.length <= maxLen {
			break
		}
		n := &s.nodes[i]
		lp := n.lp
		live, marked, mf, _, p := lp.masterLayout()
		if a.Limit > 0 && deleted+live > a.Limit {
			break
		}
		var whole bool
		if a.Strategy == StreamTrimMaxLen {
			whole = s.length-uint64(live) >= maxLen
		} else {
			// The last entry, deleted or not, decides.
			whole = lp.entryAt(lp.lastEntryAt(), n.master, mf).id.Less(a.MinID)
		}
		if whole {
			drop = i + 1
			s.length -= uint64(live)
			deleted += live
			continue
		}
		if a.Approx {
			break
		}
		var gone int64
		for p < lp.end() {
			h := lp.entryAt(p, n.master, mf)
			if a.Strategy == StreamTrimMaxLen && s.length <= maxLen ||
				a.Strategy == StreamTrimMinID && !h.id.Less(a.MinID) {
				break
			}
			if h.flags&streamFlagDeleted == 0 {
				// Flags are 0..3: the replacement keeps the size.
				lp = lp.replaceInt(p, h.flags|streamFlagDeleted)
				gone++
				s.length--
			}
			p = h.end
		}
		deleted += gone
		first := lp.first()
		lp = lp.replaceInt(first, live-gone)
		lp = lp.replaceInt(lp.next(first), marked+gone)
		s.setNodeLP(i, lp)
		break
	}
	if drop > 0 {
		s.dropNodes(0, drop)
	}
	if s.length == 0 {
		s.firstID = StreamID{}
	} else if deleted > 0 {
		s.firstID = s.EdgeID(true, true)
	}
	return deleted
}

// SetID is XSETID: set the last ID, and entries-added unless entriesAdded
// is -1, and max-deleted-entry-id unless maxDeletedID is 0-0. The last ID
// may not go below the last live entry, nor below maxDeletedID, and
// entries-added may not go below the length.
//
// Redis checks id against maxDeletedID while parsing, before it looks the
// key up, so that error comes first even for a missing key: the commands
// layer calls CheckXSetIDArgs before the lookup.
func (s *Stream) SetID(id StreamID, entriesAdded int64, maxDeletedID StreamID) error {
	if err := CheckXSetIDArgs(id, maxDeletedID); err != nil {
		return err
	}
	if s.length > 0 {
		if last, _ := s.LastValidID(); id.Less(last) {
			return ErrXSetIDTooSmall
		}
		if entriesAdded != -1 && s.length > uint64(entriesAdded) {
			return ErrXSetIDEntriesAdded
		}
	}
	s.lastID = id
	if entriesAdded != -1 {
		s.entriesAdded = uint64(entriesAdded)
	}
	if !maxDeletedID.IsZero() {
		s.maxDeletedID = maxDeletedID
	}
	return nil
}

// CheckXSetIDArgs is XSETID's check of its own arguments.
func CheckXSetIDArgs(id, maxDeletedID StreamID) error {
	if id.Less(maxDeletedID) {
		return ErrXSetIDBelowMaxDeleted
	}
	return nil
}

// ForEachNode calls fn with each node's master ID and listpack, in order,
// until fn returns false: what RDB and DUMP write. lp must not be changed.
func (s *Stream) ForEachNode(fn func(master StreamID, lp []byte) bool) {
	for _, n := range s.nodes {
		if !fn(n.master, n.lp) {
			return
		}
	}
}

// streamStructSize is a Stream's allocation, for MemoryUsage.
var streamStructSize = int(unsafe.Sizeof(Stream{}))

const streamNodeSize = int(unsafe.Sizeof(streamNode{}))

// MemoryUsage estimates the bytes the stream holds, each allocation at the
// size the Go allocator rounds it to: the struct, the nodes array, the
// listpacks at their capacity, and the consumer groups.
func (s *Stream) MemoryUsage() int64 {
	return allocSize(streamStructSize) + allocSize(s.nodeSlots*streamNodeSize) + s.lpHeld + s.groupHeld
}

// ErrStreamBadNode reports a node from RDB or DUMP that is not a stream
// listpack (RESTORE answers "Bad data format").
var ErrStreamBadNode = errors.New("stream node failed validation")

// RestoreNode appends a node read from RDB or DUMP: its master ID (the
// radix tree key) and listpack, kept as given. Nodes come in master ID
// order. The node is checked whole as streamValidateListpackIntegrity does
// in deep mode, and its first entry must have the master ID. The metadata
// comes after, from RestoreMeta.
func (s *Stream) RestoreNode(master StreamID, lp []byte) error {
	node := listpack(lp)
	if !validStreamNode(node) {
		return ErrStreamBadNode
	}
	if n := len(s.nodes); n > 0 && !s.nodes[n-1].master.Less(master) {
		return ErrStreamBadNode
	}
	_, _, mf, _, p := node.masterLayout()
	if node.entryAt(p, master, mf).id != master {
		return ErrStreamBadNode
	}
	s.appendNode(streamNode{master: master, lp: append(listpack(nil), node...)})
	return nil
}

// RestoreMeta sets what RDB and DUMP store after the nodes. length must be
// the number of live entries the nodes hold.
func (s *Stream) RestoreMeta(length uint64, lastID, firstID, maxDeletedID StreamID, entriesAdded uint64) error {
	var live uint64
	for _, n := range s.nodes {
		c, _, _, _, _ := n.lp.masterLayout()
		live += uint64(c)
	}
	if live != length {
		return ErrStreamBadNode
	}
	s.length, s.lastID, s.firstID, s.maxDeletedID, s.entriesAdded = length, lastID, firstID, maxDeletedID, entriesAdded
	return nil
}

// validStreamNode checks a listpack's framing and its stream layout: the
// master entry (non-negative integer counters, the fields, the 0
// terminator), then as many entries as the counters say, each with integer
// flags, ID diffs and counts and the right lp-count, and nothing after.
func validStreamNode(lp listpack) bool {
	if !lp.validate() {
		return false
	}
	p, end := lp.first(), lp.end()
	intAt := func() (int64, bool) {
		if p >= end {
			return 0, false
		}
		s, v, isInt := lp.get(p)
		if !isInt {
			var ok bool
			if v, ok = ParseInt(s); !ok {
				return 0, false
			}
		}
		p = lp.next(p)
		return v, true
	}
	skip := func(n int64) bool {
		for ; n > 0; n-- {
			if p >= end {
				return false
			}
			p = lp.next(p)
		}
		return true
	}
	live, ok1 := intAt()
	deleted, ok2 := intAt()
	mf, ok3 := intAt()
	if !ok1 || !ok2 || !ok3 || live < 0 || deleted < 0 || mf < 0 || live+deleted == 0 || !skip(mf) {
		return false
	}
	if zero, ok := intAt(); !ok || zero != 0 {
		return false
	}
	for n := live + deleted; n > 0; n-- {
		flags, ok1 := intAt()
		_, ok2 := intAt()
		_, ok3 := intAt()
		if !ok1 || !ok2 || !ok3 {
			return false
		}
		fields, extra := mf, int64(3)
		if flags&streamFlagSameFields == 0 {
			var ok bool
			if fields, ok = intAt(); !ok || fields < 0 || !skip(fields) {
				return false
			}
			extra += fields + 1
		}
		if !skip(fields) {
			return false
		}
		if count, ok := intAt(); !ok || count != fields+extra {
			return false
		}
	}
	return p == end
}
