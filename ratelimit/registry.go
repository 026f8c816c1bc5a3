package ratelimit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Counts are decisions counted for INFO and the metrics: a rate-limit
// command's, or a named policy's.
type Counts struct {
	Allowed, Denied, ShadowDenied atomic.Int64
}

// Count counts one decision; a SHADOW denial answers allowed but is
// counted apart.
func (n *Counts) Count(allowed, shadow bool) {
	switch {
	case allowed:
		n.Allowed.Add(1)
	case shadow:
		n.ShadowDenied.Add(1)
	default:
		n.Denied.Add(1)
	}
}

// Reset zeroes the counts (CONFIG RESETSTAT).
func (n *Counts) Reset() {
	n.Allowed.Store(0)
	n.Denied.Store(0)
	n.ShadowDenied.Store(0)
}

// MaxPolicies bounds a registry, so that its memory and the metrics'
// cardinality are bounded too.
const MaxPolicies = 10000

// Named is one policy as a server keeps it: the policy, which never
// changes once published (a SET publishes a new one), and its counts.
type Named struct {
	*Policy
	// Counts are the policy's decisions. A SET that replaces a policy
	// keeps them (the series of a name goes on); a DEL drops them.
	Counts *Counts
}

// ParseNamed reads a policy's definition, the words after its name.
func ParseNamed(name []byte, def [][]byte) (*Named, error) {
	p, err := ParsePolicy(name, def)
	if err != nil {
		return nil, err
	}
	return &Named{Policy: p}, nil
}

// Registry is a server's named policies. RL.CHECK is as hot as the
// commands it stands for, so the policies are an immutable map behind an
// atomic pointer: a lookup takes no lock and allocates nothing. A change
// copies the map and swaps it under the registry's lock (Lock), under
// which the server also sends it to its replicas, so that they see the
// changes in the order they were made; a full sync reads the policies
// under it too, with the offset its copy stands for.
type Registry struct {
	mu  sync.Mutex
	cur atomic.Pointer[map[string]*Named]
	// gen counts changes, for snapshots.
	gen atomic.Uint64
	// stamps are the cluster's stamps of the policies changed since
	// start-up, tombstones of deleted ones included (exchange.go); under
	// mu.
	stamps map[string]Stamp
}

// Lock takes the registry's lock, which orders changes.
func (reg *Registry) Lock() { reg.mu.Lock() }

// Unlock lets it go.
func (reg *Registry) Unlock() { reg.mu.Unlock() }

// Gen is a number that changes whenever the policies do.
func (reg *Registry) Gen() uint64 { return reg.gen.Load() }

// Lookup finds a policy without locking or allocating.
func (reg *Registry) Lookup(name []byte) *Named {
	m := reg.cur.Load()
	if m == nil {
		return nil
	}
	return (*m)[string(name)]
}

// current returns the current map (nil: none); it must not be changed.
func (reg *Registry) current() map[string]*Named {
	if m := reg.cur.Load(); m != nil {
		return *m
	}
	return nil
}

// Sorted returns the policies by name.
func (reg *Registry) Sorted() []*Named {
	m := reg.current()
	out := make([]*Named, 0, len(m))
	for _, p := range m {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *Named) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// ReplaceLocked publishes m (the caller holds the lock), carrying the
// counts of the policies it replaces over to their successors.
func (reg *Registry) ReplaceLocked(m map[string]*Named) {
	old := reg.current()
	for name, p := range m {
		if p.Counts == nil {
			if prev := old[name]; prev != nil {
				p.Counts = prev.Counts
			} else {
				p.Counts = new(Counts)
			}
		}
	}
	reg.cur.Store(&m)
	reg.gen.Add(1)
}

// WithChanges returns a copy of the current policies with set added (or
// replacing those of the same names) and del removed, or the reason it
// would hold too many.
func (reg *Registry) WithChanges(set []*Named, del string) (map[string]*Named, string) {
	old := reg.current()
	m := make(map[string]*Named, len(old)+len(set))
	for name, p := range old {
		if name != del {
			m[name] = p
		}
	}
	for _, p := range set {
		m[p.Name] = p
	}
	if len(m) > MaxPolicies {
		return nil, "too many policies: at most " + strconv.Itoa(MaxPolicies)
	}
	return m, ""
}

// ResetCounts zeroes every policy's counts (CONFIG RESETSTAT).
func (reg *Registry) ResetCounts() {
	for _, p := range reg.current() {
		p.Counts.Reset()
	}
}

// Policies in snapshots and full syncs: a version byte, then per policy
// its name and its normalised definition, each word length-prefixed;
// from version 2, then the cluster's stamps (exchange.go), tombstones
// included, so that a cluster whose nodes all restart still orders the
// changes it exchanged before.
const (
	policyPayloadV1 = 1
	policyPayloadV2 = 2
)

// Payload returns the policies and their stamps as snapshots keep them
// (nil: none). The caller holds the registry's lock.
func (reg *Registry) Payload() []byte {
	ps := reg.Sorted()
	if len(ps) == 0 && len(reg.stamps) == 0 {
		return nil
	}
	b := []byte{policyPayloadV2}
	b = binary.AppendUvarint(b, uint64(len(ps)))
	for _, p := range ps {
		b = binary.AppendUvarint(b, uint64(len(p.Def)+1))
		b = appendBytes(b, []byte(p.Name))
		for _, w := range p.Def {
			b = appendBytes(b, w)
		}
	}
	names := make([]string, 0, len(reg.stamps))
	for name := range reg.stamps {
		names = append(names, name)
	}
	slices.Sort(names)
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, name := range names {
		st := reg.stamps[name]
		b = appendBytes(b, []byte(name))
		b = binary.AppendVarint(b, st.Millis)
		b = appendBytes(b, []byte(st.Node))
	}
	return b
}

// Recorded is what a payload holds: the policies, and their stamps.
type Recorded struct {
	Policies []*Named
	Stamps   map[string]Stamp
}

// ReadPayload parses a payload made by Payload (of either version), each
// definition as SET would.
func ReadPayload(b []byte) (Recorded, error) {
	var rec Recorded
	if len(b) == 0 {
		return rec, nil
	}
	version := b[0]
	if version != policyPayloadV1 && version != policyPayloadV2 {
		return rec, fmt.Errorf("policies recorded in an unknown format (version %d)", b[0])
	}
	bad := errors.New("the recorded policies are damaged")
	r := varintReader{b: b[1:]}
	count := r.uvarint()
	if r.bad || count > MaxPolicies {
		return rec, bad
	}
	rec.Policies = make([]*Named, 0, count)
	for i := uint64(0); i < count; i++ {
		nw := r.uvarint()
		if r.bad || nw < 2 || nw > 256 {
			return rec, bad
		}
		words := make([][]byte, nw)
		for j := range words {
			words[j] = r.bytes()
		}
		if r.bad {
			return rec, bad
		}
		p, err := ParseNamed(words[0], words[1:])
		if err != nil {
			return rec, fmt.Errorf("policy '%s': %v", words[0], err)
		}
		rec.Policies = append(rec.Policies, p)
	}
	if version == policyPayloadV1 {
		return rec, nil
	}
	count = r.uvarint()
	if r.bad || count > 2*MaxPolicies {
		return rec, bad
	}
	rec.Stamps = make(map[string]Stamp, count)
	for i := uint64(0); i < count; i++ {
		name := r.bytes()
		st := Stamp{Millis: r.varint(), Node: string(r.bytes())}
		if r.bad {
			return rec, bad
		}
		rec.Stamps[string(name)] = st
	}
	if len(r.b) != 0 {
		return rec, bad
	}
	return rec, nil
}

// RestoreLocked replaces the policies and their stamps with a payload's
// (a snapshot's at start-up, a master's in a full sync); the caller
// holds the registry's lock.
func (reg *Registry) RestoreLocked(rec Recorded) {
	m := make(map[string]*Named, len(rec.Policies))
	for _, p := range rec.Policies {
		m[p.Name] = p
	}
	reg.ReplaceLocked(m)
	reg.stamps = rec.Stamps
}
