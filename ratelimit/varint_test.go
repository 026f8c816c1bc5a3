package ratelimit

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestVarintReaderMatchesBinary: the rate-limit states' reader decodes as
// encoding/binary does, value for value and byte for byte, and fails
// where it fails (truncated, more than 64 bits), reading 0 from then on.
func TestVarintReaderMatchesBinary(t *testing.T) {
	var inputs [][]byte
	for _, v := range []uint64{0, 1, 0x7f, 0x80, 0x3fff, 0x4000, 1 << 35, 1<<63 - 1, 1 << 63, math.MaxUint64} {
		inputs = append(inputs, binary.AppendUvarint(nil, v))
	}
	inputs = append(inputs,
		nil, []byte{0x80}, []byte{0xff, 0xff},
		bytes.Repeat([]byte{0xff}, 9),                // truncated at the tenth byte
		append(bytes.Repeat([]byte{0xff}, 9), 1),     // MaxUint64
		append(bytes.Repeat([]byte{0xff}, 9), 2),     // 65 bits
		append(bytes.Repeat([]byte{0x80}, 10), 0),    // eleven bytes
		append(bytes.Repeat([]byte{0xff}, 12), 0, 5), // overlong, then more
		[]byte{0x80, 0x00},                           // non-minimal zero
	)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		b := make([]byte, rng.IntN(24))
		for j := range b {
			b[j] = byte(rng.Uint32())
			if rng.IntN(3) == 0 {
				b[j] &= 0x7f
			}
		}
		inputs = append(inputs, b)
	}
	for _, in := range inputs {
		// Read the input to its end as unsigned, then as signed varints.
		for signed := 0; signed < 2; signed++ {
			r := varintReader{b: in}
			rest, failed := in, false
			for k := 0; k < 30; k++ {
				var want, got uint64
				var n int
				if signed == 1 {
					var v int64
					v, n = binary.Varint(rest)
					want, got = uint64(v), uint64(r.varint())
				} else {
					want, n = binary.Uvarint(rest)
					got = r.uvarint()
				}
				if failed {
					want, n = 0, 0
				}
				if n <= 0 {
					failed = true
					rest = nil
				} else {
					rest = rest[n:]
				}
				if got != want || r.bad != failed || !bytes.Equal(r.b, rest) {
					t.Fatalf("%x read %d (signed %d): got %d bad %v rest %x, want %d bad %v rest %x",
						in, k, signed, got, r.bad, r.b, want, failed, rest)
				}
			}
		}
	}
}

// TestVarintReaderInlines: RL.SLIDE's decision walks its log through
// varintReader, and a call per varint costs it a few percent. Guard that
// the compiler still inlines the reads.
func TestVarintReaderInlines(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package")
	}
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	out, err := exec.Command(gobin, "build", "-gcflags=-m", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build -gcflags=-m: %v\n%s", err, out)
	}
	inlined := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if _, m, ok := strings.Cut(line, "can inline (*varintReader)."); ok {
			inlined[strings.Fields(m)[0]] = true
		}
	}
	for _, m := range []string{"uvarint", "varint", "byte"} {
		if !inlined[m] {
			t.Errorf("(*varintReader).%s no longer inlines: keep it within the compiler's inlining budget", m)
		}
	}
}
