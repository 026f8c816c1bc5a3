package cluster

import (
	"context"
	"math/rand/v2"
	"testing"
)

// The expected slots are redis-server 7.0.15's CLUSTER KEYSLOT answers.
var keySlotCases = []struct {
	key  string
	slot uint16
}{
	{"", 0},
	{"foo", 12182},
	{"bar", 5061},
	{"hello", 866},
	{"123456789", 12739},
	{"{user1000}.following", 3443},
	{"{user1000}.followers", 3443},
	{"foo{}{bar}", 8363},    // an empty tag hashes the whole key
	{"foo{{bar}}zap", 4015}, // the tag is "{bar"
	{"foo{bar}{zap}", 5061}, // only the first tag counts
	{"{}", 15257},
	{"{", 4092},
	{"}", 12090},
	{"a{b", 13340},
	{"a}b{", 6027},
	{"{a}", 15495},
	{"x{a}y", 15495},
	{"{{}}", 4092},
	{"}{a}", 15495},
	{"\x00{\xff}", 7920},
	{"\xff", 7920},
	{"\x00", 0},
	{"{\x00}\xff", 0},
}

func TestKeySlot(t *testing.T) {
	for _, c := range keySlotCases {
		if got := KeySlot([]byte(c.key)); got != c.slot {
			t.Errorf("KeySlot(%q) = %d, want %d", c.key, got, c.slot)
		}
	}
}

func TestKeySlotAgainstRedis(t *testing.T) {
	r := startRedis(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("ab{}\x00\xff")
	keys := make([]string, 0, 2000)
	for _, c := range keySlotCases {
		keys = append(keys, c.key)
	}
	for len(keys) < cap(keys) {
		k := make([]byte, rng.IntN(12))
		for i := range k {
			if rng.IntN(2) == 0 {
				k[i] = alphabet[rng.IntN(len(alphabet))]
			} else {
				k[i] = byte(rng.IntN(256))
			}
		}
		keys = append(keys, string(k))
	}
	p := r.c.Pipeline()
	cmds := make([]interface{ Val() int64 }, len(keys))
	for i, k := range keys {
		cmds[i] = p.ClusterKeySlot(ctx, k)
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if got, want := KeySlot([]byte(k)), cmds[i].Val(); int64(got) != want {
			t.Errorf("KeySlot(%q) = %d, redis-server says %d", k, got, want)
		}
	}
}
