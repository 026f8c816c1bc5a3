package ratelimit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The nodes of a cluster share one set of named policies: RL.POLICY SET
// or DEL on any node reaches every other, and a node that joins or comes
// back is sent them all. Messages may arrive in any order and twice, so
// each policy carries a stamp, the time of its last change and the node
// that made it, and the latest stamp wins everywhere (last writer wins);
// a deletion is kept as a tombstone with its stamp, so that a node that
// missed it does not bring the policy back.

// Stamp orders the changes of one policy across nodes.
type Stamp struct {
	Millis int64  // when the change was made, on its node's clock
	Node   string // the node that made it, which breaks ties
}

// After reports whether a is a later change than b.
func (a Stamp) After(b Stamp) bool {
	if a.Millis != b.Millis {
		return a.Millis > b.Millis
	}
	return a.Node > b.Node
}

// Change is one policy's state as nodes exchange it: its definition, or
// its deletion (Def nil), and the stamp of the change.
type Change struct {
	Name  string
	Def   [][]byte // the definition after the name, as SET takes it; nil: deleted
	Stamp Stamp
}

// Changes are rec's policies and tombstones as changes, for a node that
// merges another's whole set with its own rather than replace its own.
func (rec Recorded) Changes() []Change {
	out := make([]Change, 0, len(rec.Stamps)+len(rec.Policies))
	has := make(map[string]bool, len(rec.Policies))
	for _, p := range rec.Policies {
		has[p.Name] = true
		out = append(out, Change{Name: p.Name, Def: p.Def, Stamp: rec.Stamps[p.Name]})
	}
	for name, st := range rec.Stamps {
		if !has[name] {
			out = append(out, Change{Name: name, Stamp: st})
		}
	}
	return out
}

// StampLocked stamps a change the caller made on this node, at now (ms)
// by node, under the registry's lock, and returns the change to send.
// The stamp is later than the one it replaces even when another node's
// clock is ahead of this one's, so that the change wins everywhere, as
// it did here.
func (reg *Registry) StampLocked(name string, now int64, node string) Change {
	if reg.stamps == nil {
		reg.stamps = map[string]Stamp{}
	}
	st := Stamp{Millis: max(now, reg.stamps[name].Millis+1), Node: node}
	reg.stamps[name] = st
	reg.gen.Add(1) // the stamps are saved with the policies
	ch := Change{Name: name, Stamp: st}
	if p := reg.current()[name]; p != nil {
		ch.Def = p.Def
	}
	return ch
}

// ChangesLocked is every policy and tombstone with its stamp, for a
// node that joins: a policy that was never stamped (loaded from a
// snapshot or a file) carries the zero stamp, which any change beats.
func (reg *Registry) ChangesLocked() []Change {
	var out []Change
	for _, p := range reg.Sorted() {
		out = append(out, Change{Name: p.Name, Def: p.Def, Stamp: reg.stamps[p.Name]})
	}
	for name, st := range reg.stamps {
		if reg.current()[name] == nil {
			out = append(out, Change{Name: name, Stamp: st})
		}
	}
	return out
}

// MergeLocked applies the changes that are later than what the registry
// holds, and reports how many it applied. An unstamped change (a policy
// another node loaded from its snapshot or file) only adds a policy this
// node lacks. A definition this node cannot parse is refused whole, with
// its name, and nothing of chs is applied.
func (reg *Registry) MergeLocked(chs []Change) (int, error) {
	latest := map[string]Change{}
	for _, ch := range chs {
		if prev, ok := latest[ch.Name]; !ok || ch.Stamp.After(prev.Stamp) {
			latest[ch.Name] = ch
		}
	}
	var set []*Named
	var del []string
	for name, ch := range latest {
		cur, stamped := reg.stamps[name]
		switch {
		case stamped && !ch.Stamp.After(cur):
			continue
		case !stamped && ch.Stamp == (Stamp{}) && (ch.Def == nil || reg.Lookup([]byte(name)) != nil):
			continue
		case ch.Def == nil:
			del = append(del, name)
			continue
		}
		p, err := ParseNamed([]byte(name), ch.Def)
		if err != nil {
			return 0, fmt.Errorf("policy '%s': %v", name, err)
		}
		set = append(set, p)
	}
	if len(set) == 0 && len(del) == 0 {
		return 0, nil
	}
	m, msg := reg.WithChanges(set, "")
	if msg != "" {
		return 0, errors.New(msg)
	}
	for _, name := range del {
		delete(m, name)
	}
	reg.ReplaceLocked(m)
	if reg.stamps == nil {
		reg.stamps = map[string]Stamp{}
	}
	for _, p := range set {
		if st := latest[p.Name].Stamp; st != (Stamp{}) {
			reg.stamps[p.Name] = st
		}
	}
	for _, name := range del {
		reg.stamps[name] = latest[name].Stamp
	}
	reg.pruneTombstonesLocked()
	return len(set) + len(del), nil
}

// maxTombstones bounds the deletions a registry remembers, so that what
// peers send cannot grow it without bound; the oldest go first, as a
// deletion every node has long applied no longer needs its tombstone.
const maxTombstones = MaxPolicies

func (reg *Registry) pruneTombstonesLocked() {
	cur := reg.current()
	if len(reg.stamps)-len(cur) <= maxTombstones {
		return
	}
	var dead []string
	for name := range reg.stamps {
		if cur[name] == nil {
			dead = append(dead, name)
		}
	}
	if len(dead) <= maxTombstones {
		return
	}
	slices.SortFunc(dead, func(a, b string) int {
		sa, sb := reg.stamps[a], reg.stamps[b]
		switch {
		case sa.After(sb):
			return 1
		case sb.After(sa):
			return -1
		}
		return strings.Compare(a, b)
	})
	for _, name := range dead[:len(dead)-maxTombstones] {
		delete(reg.stamps, name)
	}
}

// Changes on the wire: a version byte, then per change its stamp
// (varint millis, node name), its name, and its definition's words (a
// count of zero for a deletion), each string length-prefixed.
const changesVersion = 1

// maxChangeWords bounds a definition read from the wire, as
// ReadPayload's does.
const maxChangeWords = 256

// AppendChanges encodes chs after b.
func AppendChanges(b []byte, chs []Change) []byte {
	b = append(b, changesVersion)
	b = binary.AppendUvarint(b, uint64(len(chs)))
	for _, ch := range chs {
		b = binary.AppendVarint(b, ch.Stamp.Millis)
		b = appendBytes(b, []byte(ch.Stamp.Node))
		b = appendBytes(b, []byte(ch.Name))
		b = binary.AppendUvarint(b, uint64(len(ch.Def)))
		for _, w := range ch.Def {
			b = appendBytes(b, w)
		}
	}
	return b
}

// ReadChanges decodes what AppendChanges encoded, refusing whatever does
// not hold together without reading or allocating past b: every count is
// checked against the bytes left, each entry taking at least one.
func ReadChanges(b []byte) ([]Change, error) {
	bad := errors.New("damaged policy changes")
	if len(b) == 0 || b[0] != changesVersion {
		return nil, bad
	}
	r := varintReader{b: b[1:]}
	count := r.uvarint()
	if r.bad || count > MaxPolicies*2 || count > uint64(len(r.b)) {
		return nil, bad
	}
	out := make([]Change, 0, count)
	for range count {
		var ch Change
		ch.Stamp.Millis = r.varint()
		ch.Stamp.Node = string(r.bytes())
		ch.Name = string(r.bytes())
		nw := r.uvarint()
		if r.bad || nw > maxChangeWords || nw > uint64(len(r.b)) {
			return nil, bad
		}
		if nw > 0 {
			ch.Def = make([][]byte, nw)
			for i := range ch.Def {
				ch.Def[i] = r.bytes()
			}
		}
		if r.bad || strings.TrimSpace(ch.Name) == "" {
			return nil, bad
		}
		out = append(out, ch)
	}
	if len(r.b) != 0 {
		return nil, bad
	}
	return out, nil
}
