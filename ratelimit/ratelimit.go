// Package ratelimit holds limitkv's rate limiting: the decisions of
// RL.FIXED, RL.SLIDE, CL.THROTTLE, RL.ACQUIRE, RL.RELEASE and RL.LOGIN as
// pure functions, the byte encodings of the states they keep (bans and
// named policies' containers included), the time zones fixed windows align
// to, the parse of the arguments that define a limit and of the named
// policies made of them, and the summary of the keys denied most often
// (RL.TOP).
//
// A decision is a function from (old state, request, now) to (reply, new
// state, the key's new expiry): it reads no clock, takes no lock and keeps
// nothing between calls, so it is tested against naive models and
// datadriven files on a manual clock. The engine owns the keys: its Shard
// operations (Fixed, Slide, Throttle, Acquire, Release, Login, Policy*)
// load a key's state under the shard lock, call the decision here and
// store what it returns with the expiry it names. The commands parse a
// request's arguments with ParseArgs, ParseLease and ParsePolicy and write
// the reply; ParseArgs may load a time zone's rules, so RL.FIXED and
// RL.SLIDE call it before dispatch takes any lock. The texts of ArgError
// carry no error code, which the caller adds.
//
// It imports only the standard library: what a limit means and how its
// state is laid out on disk and on the replication stream can then be read,
// tested and changed without the keyspace, the wire or the server, and
// nothing here can come to depend on them.
package ratelimit

import "encoding/binary"

// State kinds, the first byte of a state. The byte may also carry the
// banned flag (ban.go) and, on an RL.SLIDE log, the flag of its roomy
// layout (slide.go).
const (
	KindFixed    byte = 1 // RL.FIXED: one counter per rule and window
	KindSlide    byte = 2 // RL.SLIDE: log of (time, cost) entries
	KindGCRA     byte = 3 // CL.THROTTLE: theoretical arrival time
	KindLease    byte = 4 // RL.ACQUIRE: the live leases, end and id each
	KindPolicies byte = 5 // RL.CHECK: named policies' states (policy.go)
)

// MaxLimit bounds limits and costs (2^53, the largest integer a double, and
// so every client language, represents exactly).
const MaxLimit = 1 << 53

// MaxWindow bounds windows: ten years in ms.
const MaxWindow = 3650 * 24 * 3600 * 1000

const dayMs = 24 * 3600 * 1000

// Decision is the reply every RL command gives.
type Decision struct {
	Allowed    bool
	Limit      int64 // the limit of the rule that decided
	Remaining  int64 // units left in that rule after this request
	RetryAfter int64 // ms until the same request would be allowed; -1 when allowed
	ResetAfter int64 // ms until that rule is back to its full limit
	// BanStarted says this denial started a ban (BAN): not part of the
	// reply, but an event for keyspace notifications.
	BanStarted bool
}

// Rule is one "limit window" pair.
type Rule struct {
	Limit  int64
	Window int64 // ms
}

// kindFlags are the bits of a state's first byte that are not its kind.
const kindFlags = banned | slideRoomy

// KindOf returns the kind of a state, without its flags; 0 for an empty
// one.
func KindOf(st []byte) byte {
	if len(st) == 0 {
		return 0
	}
	return st[0] &^ kindFlags
}

// KindName names a state's kind for OBJECT ENCODING.
func KindName(kind byte) string {
	switch kind &^ kindFlags {
	case KindFixed:
		return "fixed-window"
	case KindSlide:
		return "sliding-window"
	case KindGCRA:
		return "gcra"
	case KindLease:
		return "concurrency"
	case KindPolicies:
		return "policies"
	}
	return "ratelimit"
}

// varintReader reads a state body: the one varint reader of the
// rate-limit states, decoding as binary.Uvarint and binary.Varint do. It
// remembers the first error: after a truncated or overlong varint (or a
// missing byte) bad is set, the rest is dropped and every later read
// returns 0.
//
// Decisions read states on every request, RL.SLIDE two varints per entry
// it walks, so uvarint and varint are kept small enough to inline (check
// with go build -gcflags=-m; TestVarintReaderInlines does): the loop is
// written out here instead of calling binary.Uvarint, and no slow path is
// called out of line.
type varintReader struct {
	b   []byte
	bad bool
}

func (r *varintReader) uvarint() (x uint64) {
	for i, c := range r.b {
		x |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			if i > 9 || i == 9 && c > 1 {
				break // more than 64 bits
			}
			r.b = r.b[i+1:]
			return x
		}
	}
	r.bad = true
	r.b = nil
	return 0
}

// varint reads a zig-zag encoded signed varint.
func (r *varintReader) varint() int64 {
	u := r.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

// bytes reads a length-prefixed byte string, its capacity cut to its
// length so that an append to it cannot reach what follows; nil, and bad
// set, when it runs past the end.
func (r *varintReader) bytes() []byte {
	n := r.uvarint()
	if r.bad || n > uint64(len(r.b)) {
		r.bad = true
		r.b = nil
		return nil
	}
	s := r.b[:n:n]
	r.b = r.b[n:]
	return s
}

// appendBytes appends s length-prefixed, as varintReader.bytes reads it.
func appendBytes(b, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func (r *varintReader) byte() byte {
	if len(r.b) == 0 {
		r.bad = true
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}
