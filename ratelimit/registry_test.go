package ratelimit

import (
	"slices"
	"testing"
)

func named(t *testing.T, name string, def ...string) *Named {
	t.Helper()
	words := make([][]byte, len(def))
	for i, w := range def {
		words[i] = []byte(w)
	}
	p, err := ParseNamed([]byte(name), words)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRegistry: a replaced policy keeps its counts, a deleted one loses
// them, and the payload a snapshot keeps reads back as the same policies.
func TestRegistry(t *testing.T) {
	var reg Registry
	gen := reg.Gen()
	m, msg := reg.WithChanges([]*Named{named(t, "b", "FIXED", "2", "1h"), named(t, "a", "SLIDE", "5", "1m")}, "")
	if msg != "" {
		t.Fatal(msg)
	}
	reg.ReplaceLocked(m)
	if reg.Gen() == gen || reg.Lookup([]byte("a")) == nil || reg.Lookup([]byte("c")) != nil {
		t.Fatal("published policies not found")
	}
	reg.Lookup([]byte("b")).Counts.Count(false, false)
	m, _ = reg.WithChanges([]*Named{named(t, "b", "FIXED", "3", "1h")}, "a")
	reg.ReplaceLocked(m)
	if b := reg.Lookup([]byte("b")); b.Counts.Denied.Load() != 1 || b.Rules[0].Limit != 3 {
		t.Errorf("replaced policy: denied %d, limit %d", b.Counts.Denied.Load(), b.Rules[0].Limit)
	}
	if reg.Lookup([]byte("a")) != nil {
		t.Error("deleted policy still found")
	}

	rec, err := ReadPayload(reg.Payload())
	ps := rec.Policies
	if err != nil || len(ps) != 1 || ps[0].Name != "b" || !slices.EqualFunc(ps[0].Def, reg.Lookup([]byte("b")).Def, slices.Equal) {
		t.Fatalf("payload read back as %v, %v", ps, err)
	}
	if rec, err := ReadPayload(nil); rec.Policies != nil || rec.Stamps != nil || err != nil {
		t.Errorf("empty payload: %v, %v", rec, err)
	}
	// The cluster's stamps, a deletion's included, travel with the
	// policies, so that they order changes after every node restarts.
	reg.StampLocked("b", 100, "node-a")
	reg.StampLocked("a", 200, "node-b")
	rec, err = ReadPayload(reg.Payload())
	if err != nil || len(rec.Stamps) != 2 || rec.Stamps["a"] != (Stamp{200, "node-b"}) || rec.Stamps["b"] != (Stamp{100, "node-a"}) {
		t.Fatalf("stamps read back as %v, %v", rec.Stamps, err)
	}
	restored := new(Registry)
	restored.RestoreLocked(rec)
	if n, _ := restored.MergeLocked([]Change{{Name: "a", Def: words("FIXED", "1", "1m"), Stamp: Stamp{150, "node-c"}}}); n != 0 || restored.Lookup([]byte("a")) != nil {
		t.Error("a restored registry let an older change undo a deletion")
	}
	// A payload of the first version, without stamps, still reads.
	v1 := []byte{policyPayloadV1, 0}
	if rec, err := ReadPayload(v1); err != nil || len(rec.Policies) != 0 || rec.Stamps != nil {
		t.Errorf("version 1 payload: %v, %v", rec, err)
	}
	p := reg.Payload()
	for i := 1; i < len(p); i++ {
		if _, err := ReadPayload(p[:i]); err == nil {
			t.Errorf("payload cut at %d read without error", i)
		}
	}
	if _, err := ReadPayload(append([]byte{9}, p[1:]...)); err == nil {
		t.Error("unknown payload version read")
	}
}
