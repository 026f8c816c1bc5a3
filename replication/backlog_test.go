package replication

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// read takes everything a reader has, in chunks of at most max.
func read(r *Reader, max int) []byte {
	var out []byte
	for {
		n, _ := r.Next(max, func(b []byte) { out = append(out, b...) })
		if n == 0 {
			return out
		}
	}
}

func TestBacklogReaders(t *testing.T) {
	bl := NewBacklog(100, 10)
	if end := bl.Append([]byte("hello")); end != 105 {
		t.Fatalf("end = %d", end)
	}
	r, ok := bl.NewReader(102)
	if !ok {
		t.Fatal("no reader at a kept offset")
	}
	bl.Append([]byte(" world"))
	if got := read(r, 3); string(got) != "llo world" {
		t.Fatalf("read %q", got)
	}
	if _, ok := bl.NewReader(99); ok {
		t.Fatal("reader before the first offset")
	}
	if _, ok := bl.NewReader(112); ok {
		t.Fatal("reader after the end")
	}
	select {
	case <-r.Wake():
	default:
		t.Fatal("an append did not wake the reader")
	}
}

// A reader holds what it has not sent however far the kept size is
// passed; once it moves, what nobody needs goes.
func TestBacklogKeepsWhatReadersNeed(t *testing.T) {
	bl := NewBacklog(0, 1000)
	slow, _ := bl.NewReader(0)
	var all []byte
	chunk := bytes.Repeat([]byte("x"), 10_000)
	for i := 0; i < 30; i++ { // 300 KB: several blocks past the kept size
		chunk[0] = byte('a' + i%26)
		all = append(all, chunk...)
		bl.Append(chunk)
	}
	if first, _ := bl.Range(); first != 0 {
		t.Fatalf("a block the slow reader needs was dropped: first = %d", first)
	}
	if got := read(slow, 64<<10); !bytes.Equal(got, all) {
		t.Fatalf("the slow reader got %d bytes, want %d, or other bytes", len(got), len(all))
	}
	first, end := bl.Range()
	if end != int64(len(all)) || end-first > blockSize+1000 {
		t.Fatalf("kept [%d, %d): more than the kept size plus a block", first, end)
	}
	slow.Close()
	if _, ok := bl.NewReader(0); ok {
		t.Fatal("offset 0 is still readable after it was let go")
	}
	if _, ok := bl.NewReader(end - 1000); !ok {
		t.Fatal("the last repl-backlog-size bytes are not kept")
	}
}

// Random appends and reads at random sizes deliver every byte in order.
func TestBacklogRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	bl := NewBacklog(7, 1<<10)
	rd, _ := bl.NewReader(7)
	var want, got []byte
	for i := 0; i < 2000; i++ {
		b := make([]byte, r.IntN(3000))
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		want = append(want, b...)
		bl.Append(b)
		if r.IntN(3) == 0 {
			got = append(got, read(rd, 1+r.IntN(100_000))...)
		}
	}
	got = append(got, read(rd, 1<<20)...)
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, want %d, or different ones", len(got), len(want))
	}
	if rd.Pos() != bl.End() {
		t.Fatalf("reader at %d, end %d", rd.Pos(), bl.End())
	}
}

// SetSize shrinks what is kept at once.
func TestBacklogSetSize(t *testing.T) {
	bl := NewBacklog(0, 1<<20)
	for i := 0; i < 8; i++ {
		bl.Append(make([]byte, blockSize))
	}
	bl.SetSize(1)
	if first, end := bl.Range(); end-first > blockSize {
		t.Fatalf("kept %d bytes after SetSize(1)", end-first)
	}
}
