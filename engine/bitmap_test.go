package engine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// The word-at-a-time functions are checked against bit-by-bit definitions
// over random strings of every length around the word size and random
// ranges, so that every head, body and tail shape is met.

func slowBit(b []byte, i int64) int { return int(b[i/8]>>(7-i%8)) & 1 }

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		switch rng.IntN(4) {
		case 0:
			b[i] = 0
		case 1:
			b[i] = 0xff
		default:
			b[i] = byte(rng.IntN(256))
		}
	}
	return b
}

func TestCountAndFindBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 1; n <= 80; n++ {
		for trial := 0; trial < 60; trial++ {
			b := randBytes(rng, n)
			if trial%10 == 0 {
				b = bytes.Repeat([]byte{byte(trial % 20 / 10 * 0xff)}, n) // all zeros or all ones
			}
			first := rng.Int64N(int64(n) * 8)
			last := first + rng.Int64N(int64(n)*8-first)
			var count int64
			find := [2]int64{-1, -1}
			for i := first; i <= last; i++ {
				bit := slowBit(b, i)
				count += int64(bit)
				if find[bit] < 0 {
					find[bit] = i
				}
			}
			if got := CountBits(b, first, last); got != count {
				t.Fatalf("CountBits(%x, %d, %d) = %d, want %d", b, first, last, got, count)
			}
			for bit := 0; bit < 2; bit++ {
				if got := FindBit(b, bit, first, last); got != find[bit] {
					t.Fatalf("FindBit(%x, %d, %d, %d) = %d, want %d", b, bit, first, last, got, find[bit])
				}
			}
		}
	}
}

func TestFoldBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 2000; trial++ {
		op := BitOp(rng.IntN(4))
		nsrc := 1 + rng.IntN(4)
		if op == BitNot {
			nsrc = 1
		}
		srcs := make([][]byte, nsrc)
		maxLen := 0
		for i := range srcs {
			srcs[i] = randBytes(rng, rng.IntN(40))
			maxLen = max(maxLen, len(srcs[i]))
		}
		want := make([]byte, maxLen)
		for j := range want {
			at := func(s []byte) byte {
				if j < len(s) {
					return s[j]
				}
				return 0
			}
			v := at(srcs[0])
			for _, s := range srcs[1:] {
				switch op {
				case BitAnd:
					v &= at(s)
				case BitOr:
					v |= at(s)
				case BitXor:
					v ^= at(s)
				}
			}
			if op == BitNot {
				v = ^v
			}
			want[j] = v
		}
		got := make([]byte, maxLen)
		for i, s := range srcs {
			FoldBits(op, got, s, i == 0)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("op %d over %x: %x, want %x", op, srcs, got, want)
		}
	}
}

func TestSetGetBit(t *testing.T) {
	e := New(Config{Databases: 1})
	s := e.Shard(0)
	now := int64(1000)
	key := []byte("bits")
	if b, err := s.GetBit(0, key, now, 100); b != 0 || err != nil {
		t.Fatalf("GetBit of a missing key: %d %v", b, err)
	}
	if old, err := s.SetBit(0, key, now, 7, 1); old != 0 || err != nil {
		t.Fatalf("SetBit: %d %v", old, err)
	}
	if v, _, _ := s.GetString(0, key, now, nil); string(v) != "\x01" {
		t.Fatalf("after SetBit 7: %q", v)
	}
	if old, _ := s.SetBit(0, key, now, 7, 1); old != 1 {
		t.Fatalf("SetBit again: old %d", old)
	}
	if old, _ := s.SetBit(0, key, now, 2000, 1); old != 0 {
		t.Fatalf("SetBit past the end: old %d", old)
	}
	if n, _ := mustEntry(t, s, key).StrLen(); n != 251 {
		t.Fatalf("length after growing to bit 2000: %d", n)
	}
	if b, _ := s.GetBit(0, key, now, 2000); b != 1 {
		t.Fatal("bit 2000 not set")
	}
	// An integer-encoded string is read bit by bit as its text.
	s.SetString(0, []byte("n"), []byte("1"), 0) // '1' is 0x31
	if b, _ := s.GetBit(0, []byte("n"), now, 7); b != 1 {
		t.Fatal("bit 7 of \"1\"")
	}
	if old, _ := s.SetBit(0, []byte("n"), now, 6, 1); old != 0 {
		t.Fatal("bit 6 of \"1\"")
	}
	if v, _, _ := s.GetString(0, []byte("n"), now, nil); string(v) != "3" {
		t.Fatalf("after setting bit 6 of \"1\": %q", v)
	}
	// Writes that change nothing leave watchers alone; real changes do not.
	var w Watch
	s.AddWatch(0, key, now, &w)
	s.SetBit(0, key, now, 7, 1)
	s.SetBit(0, key, now, 6, 0)
	if w.Dirty() {
		t.Fatal("a SetBit that changed nothing touched the key")
	}
	s.SetBit(0, key, now, 6, 1)
	if !w.Dirty() {
		t.Fatal("a SetBit that changed a bit did not touch the key")
	}
	w.Reset()
	s.SetBit(0, key, now, 5000, 0)
	if !w.Dirty() {
		t.Fatal("a SetBit that grew the string did not touch the key")
	}
	h := NewHash()
	h.Set([]byte("f"), []byte("v"), HashLimits{512, 64})
	s.SetObject(0, []byte("h"), KindHash, h, 0)
	if _, err := s.SetBit(0, []byte("h"), now, 1, 1); err != ErrWrongType {
		t.Fatalf("SetBit on a hash: %v", err)
	}
	if _, err := s.GetBit(0, []byte("h"), now, 1); err != ErrWrongType {
		t.Fatalf("GetBit on a hash: %v", err)
	}
}

func mustEntry(t *testing.T, s *Shard, key []byte) Entry {
	t.Helper()
	e, ok := s.Find(0, key, 0)
	if !ok {
		t.Fatalf("%q missing", key)
	}
	return e
}

func BenchmarkCountBits(b *testing.B) {
	for _, n := range []int{457, 64 << 10} {
		buf := randBytes(rand.New(rand.NewPCG(5, 6)), n)
		b.Run(fmt.Sprintf("%dB", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				CountBits(buf, 3, int64(n)*8-2)
			}
		})
	}
}

func BenchmarkFindBit(b *testing.B) {
	for _, n := range []int{457, 64 << 10} {
		buf := make([]byte, n)
		buf[n-1] = 1
		b.Run(fmt.Sprintf("%dB", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				if FindBit(buf, 1, 3, int64(n)*8-1) < 0 {
					b.Fatal("not found")
				}
			}
		})
	}
}
