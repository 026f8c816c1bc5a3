package engine

import (
	"math/rand/v2"
	"testing"
)

// Blocks never overlap and keep their contents while live, whatever the
// order of allocations and releases.
func TestArenaBlocksStayIntact(t *testing.T) {
	var a arena
	a.init(nil, nil)
	type blk struct {
		ref uint32
		c   uint8
		tag byte
	}
	var live []blk
	rng := rand.New(rand.NewPCG(1, 2))
	fill := func(b blk) {
		for i, s := 0, a.bytes(b.ref, classSizes[b.c]); i < len(s); i++ {
			s[i] = b.tag
		}
	}
	check := func(b blk) {
		for _, v := range a.bytes(b.ref, classSizes[b.c]) {
			if v != b.tag {
				t.Fatalf("block %d of class %d was overwritten", b.ref, b.c)
			}
		}
	}
	for step := 0; step < 200_000; step++ {
		if len(live) > 0 && rng.IntN(100) < 45 {
			i := rng.IntN(len(live))
			b := live[i]
			check(b)
			a.release(b.ref, b.c)
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
			continue
		}
		b := blk{c: uint8(rng.IntN(len(classSizes))), tag: byte(step)}
		b.ref = a.alloc(b.c)
		if b.ref == 0 {
			t.Fatal("alloc returned ref 0, which means empty")
		}
		fill(b)
		live = append(live, b)
	}
	var used int64
	for _, b := range live {
		check(b)
		used += int64(classSizes[b.c])
	}
	if used != a.used {
		t.Fatalf("arena counts %d bytes in use, blocks hold %d", a.used, used)
	}
	for _, b := range live {
		a.release(b.ref, b.c)
	}
	if a.used != 0 || len(a.empty) != len(a.pages) {
		t.Fatalf("after releasing everything: used %d, %d of %d pages empty", a.used, len(a.empty), len(a.pages))
	}
}

// Values that grow together through the size classes, as sliding logs of
// many users do, leave their smaller blocks to be reused rather than
// held by each class forever.
func TestArenaReusesPagesAcrossClasses(t *testing.T) {
	var a arena
	a.init(nil, nil)
	const n = 20_000
	refs := make([]uint32, n)
	cls := make([]uint8, n)
	for i := range refs {
		refs[i] = a.alloc(0)
	}
	for c := uint8(1); int(c) < len(classSizes) && classSizes[c] <= 256; c++ {
		for i := range refs {
			nref := a.alloc(c)
			a.release(refs[i], cls[i])
			refs[i], cls[i] = nref, c
		}
	}
	if fp := a.footprint(); float64(fp) > 1.1*float64(a.used) {
		t.Fatalf("arena holds %d bytes for %d in use", fp, a.used)
	}
}
