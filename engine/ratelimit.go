package engine

import "encoding/binary"

// Rate-limit states are values of their own type (TYPE says "ratelimit").
// Each is a small byte string in the key's record: a kind byte, then the
// kind's varint-encoded body. Decisions are pure functions from (old state,
// request, now) to (reply, new state), so that they can be tested against
// naive models on a manual clock. Each command has a Shard operation
// (Fixed, Slide, Throttle; Login keeps a list instead) that loads the
// state, runs the decision and stores the new state with the key's expiry,
// under the shard lock that the caller holds.

// Limit kinds, the first byte of a state.
const (
	LimitFixed byte = 1 // RL.FIXED: one counter per rule and window
	LimitSlide byte = 2 // RL.SLIDE: log of (time, cost) entries
	LimitGCRA  byte = 3 // CL.THROTTLE: theoretical arrival time
	LimitLease byte = 4 // RL.ACQUIRE: the live leases, end and id each
)

// MaxLimit bounds limits and costs (2^53, the largest integer a double, and
// so every client language, represents exactly).
const MaxLimit = 1 << 53

// MaxWindow bounds windows: ten years in ms.
const MaxWindow = 3650 * 24 * 3600 * 1000

// Decision is the reply every RL command gives.
type Decision struct {
	Allowed    bool
	Limit      int64 // the limit of the rule that decided
	Remaining  int64 // units left in that rule after this request
	RetryAfter int64 // ms until the same request would be allowed; -1 when allowed
	ResetAfter int64 // ms until that rule is back to its full limit
}

// LimitState returns the rate-limit state bytes at key, valid until the next
// change to the shard. It fails with ErrWrongType for other types and when
// the state is of another kind.
func (s *Shard) LimitState(db int, key []byte, now int64, kind byte) ([]byte, bool, error) {
	e, ok := s.Find(db, key, now)
	if !ok {
		return nil, false, nil
	}
	if e.Kind() != KindLimit {
		return nil, false, ErrWrongType
	}
	st := limitBytes(s, e)
	if len(st) == 0 || st[0]&^limitBanned != kind {
		return nil, false, ErrWrongType
	}
	return st, true, nil
}

// LimitScratch is a caller's reusable memory for rate-limit decisions, one
// per connection: with it a decision on an existing key allocates nothing.
// The zero value is ready to use.
type LimitScratch struct {
	fixed FixedScratch
	slide SlideScratch
	lease LeaseScratch
	state []byte // the new state, until SetLimitState copies it
	// A policy container being rebuilt, and its entries (ratelimit_policy.go).
	policy, policyEntries []byte
}

// storeDecided stores a state a decision returned, if it wrote one, and
// keeps its buffer for the next decision.
func (s *Shard) storeDecided(db int, key []byte, now int64, sc *LimitScratch, state []byte, expireAt int64, write bool) {
	if !write {
		return
	}
	s.SetLimitState(db, key, now, state, expireAt)
	if state != nil {
		sc.state = state[:0]
	}
}

// limitBytes returns the state bytes of a rate-limit entry.
func limitBytes(_ *Shard, e Entry) []byte {
	return rawString(recPayload(e.rec))
}

// SetLimitState stores a rate-limit state at key with its expiry, or
// deletes the key when state is empty.
func (s *Shard) SetLimitState(db int, key []byte, now int64, state []byte, expireAt int64) {
	if len(state) == 0 {
		s.Delete(db, key, now)
		return
	}
	var hb [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(hb[:], uint64(len(state)))
	s.put(db, key, encLimit, expireAt, hb[:n], state, false, false)
}

// LimitKindName names a state's kind for OBJECT ENCODING.
func LimitKindName(kind byte) string {
	switch kind &^ limitBanned {
	case LimitFixed:
		return "fixed-window"
	case LimitSlide:
		return "sliding-window"
	case LimitGCRA:
		return "gcra"
	case LimitLease:
		return "concurrency"
	case LimitPolicies:
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

func (r *varintReader) byte() byte {
	if len(r.b) == 0 {
		r.bad = true
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}
