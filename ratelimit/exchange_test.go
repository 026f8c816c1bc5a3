package ratelimit

import (
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"
)

func words(ws ...string) [][]byte {
	out := make([][]byte, len(ws))
	for i, w := range ws {
		out[i] = []byte(w)
	}
	return out
}

func TestChangesRoundTrip(t *testing.T) {
	chs := []Change{
		{Name: "api", Def: words("FIXED", "10", "1m"), Stamp: Stamp{Millis: 5, Node: "a"}},
		{Name: "gone", Stamp: Stamp{Millis: 7, Node: "b"}},
		{Name: "loaded", Def: words("SLIDE", "3", "1h")},
	}
	b := AppendChanges(nil, chs)
	got, err := ReadChanges(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, chs) {
		t.Fatalf("got %+v, want %+v", got, chs)
	}
	// Every truncation and every flipped byte is refused or read back as
	// something well-formed, never a panic or a read past the end.
	for i := range b {
		if _, err := ReadChanges(b[:i]); err == nil {
			t.Fatalf("a truncation at %d was accepted", i)
		}
		c := append([]byte(nil), b...)
		c[i] ^= 0xff
		ReadChanges(c)
	}
}

// state is a registry's policies and tombstones, for comparing nodes.
func state(reg *Registry) []Change {
	reg.Lock()
	defer reg.Unlock()
	chs := reg.ChangesLocked()
	m := map[string]Change{}
	for _, ch := range chs {
		m[ch.Name] = ch
	}
	var out []Change
	for i := range 6 {
		out = append(out, m["p"+strconv.Itoa(i)])
	}
	return out
}

// Nodes that make changes and receive each other's in any order, some
// twice, end with the same policies: the latest change of each wins.
func TestMergeConverges(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		nodes := []string{"a", "b", "c"}
		regs := make([]*Registry, len(nodes))
		for i := range regs {
			regs[i] = new(Registry)
		}
		var sent []Change
		for step := range 40 {
			i := rng.IntN(len(nodes))
			reg := regs[i]
			name := "p" + strconv.Itoa(rng.IntN(6))
			reg.Lock()
			if rng.IntN(3) == 0 {
				m, _ := reg.WithChanges(nil, name)
				reg.ReplaceLocked(m)
			} else {
				p, err := ParseNamed([]byte(name), words("FIXED", strconv.Itoa(step+1), "1m"))
				if err != nil {
					t.Fatal(err)
				}
				m, _ := reg.WithChanges([]*Named{p}, "")
				reg.ReplaceLocked(m)
			}
			// Clocks disagree: a node's "now" may be behind another's.
			sent = append(sent, reg.StampLocked(name, int64(rng.IntN(10)), nodes[i]))
			reg.Unlock()
		}
		for _, reg := range regs {
			order := rng.Perm(len(sent))
			for _, k := range append(order, order[:len(order)/3]...) {
				reg.Lock()
				if _, err := reg.MergeLocked([]Change{sent[k]}); err != nil {
					t.Fatal(err)
				}
				reg.Unlock()
			}
		}
		want := state(regs[0])
		for i := 1; i < len(regs); i++ {
			if got := state(regs[i]); !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d: node %s has %+v, node a %+v", seed, nodes[i], got, want)
			}
		}
	}
}

// An unstamped policy (from a snapshot or file) reaches a node that
// lacks it, but never replaces a node's own, nor a deletion.
func TestMergeUnstamped(t *testing.T) {
	reg := new(Registry)
	reg.Lock()
	defer reg.Unlock()
	n, err := reg.MergeLocked([]Change{{Name: "new", Def: words("FIXED", "1", "1m")}})
	if err != nil || n != 1 || reg.Lookup([]byte("new")) == nil {
		t.Fatalf("an unknown unstamped policy was not added: %d %v", n, err)
	}
	n, _ = reg.MergeLocked([]Change{{Name: "new", Def: words("FIXED", "2", "1m")}})
	if n != 0 || string(reg.Lookup([]byte("new")).Def[1]) != "1" {
		t.Fatal("an unstamped policy replaced one this node has")
	}
	m, _ := reg.WithChanges(nil, "new")
	reg.ReplaceLocked(m)
	reg.StampLocked("new", 10, "a")
	n, _ = reg.MergeLocked([]Change{{Name: "new", Def: words("FIXED", "3", "1m")}})
	if n != 0 || reg.Lookup([]byte("new")) != nil {
		t.Fatal("an unstamped policy undid a deletion")
	}
	if _, err := reg.MergeLocked([]Change{{Name: "bad", Def: words("NOPE"), Stamp: Stamp{Millis: 1}}}); err == nil {
		t.Fatal("a definition this node cannot parse was accepted")
	}
}

// Deletions sent by peers are remembered up to a bound, the oldest
// forgotten first, so that a peer cannot grow the registry without end.
func TestTombstonesBounded(t *testing.T) {
	reg := new(Registry)
	reg.Lock()
	defer reg.Unlock()
	var chs []Change
	for i := range maxTombstones + 10 {
		chs = append(chs, Change{Name: "gone" + strconv.Itoa(i), Stamp: Stamp{Millis: int64(i + 1), Node: "a"}})
	}
	if _, err := reg.MergeLocked(chs); err != nil {
		t.Fatal(err)
	}
	if len(reg.stamps) != maxTombstones {
		t.Fatalf("%d tombstones kept, want %d", len(reg.stamps), maxTombstones)
	}
	if _, ok := reg.stamps["gone0"]; ok {
		t.Error("the oldest tombstone was kept")
	}
	if _, ok := reg.stamps["gone"+strconv.Itoa(maxTombstones+9)]; !ok {
		t.Error("the newest tombstone was dropped")
	}
}

// TestMergeWholeSet: a node that merges another's saved set (a master's
// in a full sync) keeps its own newer changes and takes the other's
// newer ones, tombstones included, rather than go back to the other's.
func TestMergeWholeSet(t *testing.T) {
	var master, replica Registry
	master.Lock()
	if _, err := master.MergeLocked([]Change{
		{Name: "kept", Def: words("FIXED", "1", "1m"), Stamp: Stamp{Millis: 10, Node: "m"}},
		{Name: "newer-here", Def: words("FIXED", "2", "1m"), Stamp: Stamp{Millis: 10, Node: "m"}},
		{Name: "gone", Stamp: Stamp{Millis: 12, Node: "m"}},
	}); err != nil {
		t.Fatal(err)
	}
	rec, err := ReadPayload(master.Payload())
	master.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	replica.Lock()
	defer replica.Unlock()
	if _, err := replica.MergeLocked([]Change{
		{Name: "newer-here", Def: words("SLIDE", "5", "1h"), Stamp: Stamp{Millis: 20, Node: "r"}},
		{Name: "gone", Def: words("FIXED", "3", "1m"), Stamp: Stamp{Millis: 11, Node: "r"}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := replica.MergeLocked(rec.Changes()); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"kept": "FIXED 1 1m", "newer-here": "SLIDE 5 1h", "gone": ""} {
		got := ""
		if p := replica.Lookup([]byte(name)); p != nil {
			for i, w := range p.Def {
				if i > 0 {
					got += " "
				}
				got += string(w)
			}
		}
		if got != want {
			t.Errorf("%s after the merge: %q, want %q", name, got, want)
		}
	}
}
