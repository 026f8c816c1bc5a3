package rdb

import (
	"bytes"
	"encoding/hex"
	"math"
	"math/rand"
	"testing"
)

func TestCRC64Vector(t *testing.T) {
	// src/crc64.c's own test.
	if got := CRC64(0, []byte("123456789")); got != 0xe9c6d914c4b8d9ca {
		t.Fatalf("crc64(123456789) = %#x, want 0xe9c6d914c4b8d9ca", got)
	}
	// Continuing over a split input gives the same value.
	if got := CRC64(CRC64(0, []byte("1234")), []byte("56789")); got != 0xe9c6d914c4b8d9ca {
		t.Fatalf("split crc64 = %#x", got)
	}
}

// redisDumps are DUMP replies of redis-server 7.0.15 for SET of the value:
// envelope, integer encoding, verbatim and LZF strings.
var redisDumps = []struct{ value, dump string }{
	{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "00c3092c016161e01f000161610a009811f4b6aa5376ff"},
	{"hello world, hello world, hello world! abcabcabcabc", "00c31d330d68656c6c6f20776f726c642c2068e00e0c042120616263a0020162630a00aceb6fdee4e6fa06"},
	{"12345", "00c139300a009d94ea2793fc08b9"},
	{"123456789012", "000c3132333435363738393031320a00911001b1d116e7ac"},
	{"cbdaaacabaaddabadaabadababcdbacbabcaaabddcddccbbbacdcdcaadbcbddaacccddaacdaacdcdcadcbadabcbbdddabddcbdcdcdbbabbbbadbccabdccbadddddaddababdbacaaabacaabdbcccdaaddddcabaccdbabcbacaccbcbcbbbdbbdcaacdcbcdccababdbcbdadcaadbdbdcadddabbbabdbdcbbaaabdbbacbcbccdbacddbbadbabbbdaacdaabbcaadaadcbcddbcbdbdaddcabd",
		"00c340d1412c0c636264616161636162616164642005200d40040762616263646261634007201f03626464632002026362622013200a2013026462632015203a0063201920066003200101616420342040202b006420182004202720170064203a203e201b016263206e404c207120002005406e406d40694005200c405620642000202c2064201e2052201c20844001205d20022031205a20aa4052603620ce40150064201e2007203e40744019202620e3400920452027605220ba200e405b204c404b202040f02007202f401d2050201940850162640a00be630d43a395b4e5"},
}

func TestSealMatchesRedis(t *testing.T) {
	for _, c := range redisDumps {
		want, _ := hex.DecodeString(c.dump)
		got := Seal(AppendString([]byte{0}, []byte(c.value)))
		if !bytes.Equal(got, want) {
			t.Errorf("DUMP of %q:\n got %x\nwant %x", c.value, got, want)
		}
		payload, err := Open(want)
		if err != nil {
			t.Fatalf("Open(Redis's dump of %q): %v", c.value, err)
		}
		r := NewReader(payload)
		if typ := r.Byte(); typ != 0 {
			t.Fatalf("type %d", typ)
		}
		if s := r.String(); string(s) != c.value || r.Err() != nil || r.Remaining() != 0 {
			t.Errorf("read back %q (err %v, %d left), want %q", s, r.Err(), r.Remaining(), c.value)
		}
	}
}

func TestOpenRefuses(t *testing.T) {
	good, _ := hex.DecodeString(redisDumps[2].dump)
	if _, err := Open(good); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"empty":     nil,
		"short":     good[:9],
		"truncated": good[:len(good)-1],
		"newer":     func() []byte { b := Seal([]byte{0, 0}); b[2] = 11; return b }(),
	} {
		if _, err := Open(b); err != ErrPayload {
			t.Errorf("%s: Open = %v, want ErrPayload", name, err)
		}
	}
	// Every single flipped bit is caught.
	for i := range good {
		for bit := 0; bit < 8; bit++ {
			b := append([]byte(nil), good...)
			b[i] ^= 1 << bit
			if _, err := Open(b); err == nil {
				t.Fatalf("flipping bit %d of byte %d went unnoticed", bit, i)
			}
		}
	}
	// An older version is accepted (Redis loads versions up to its own).
	old := Seal([]byte{0, 1, 'x'})
	old[3], old[4] = 9, 0
	copy(old[5:], le64(CRC64(0, old[:5])))
	if p, err := Open(old); err != nil || !bytes.Equal(p, []byte{0, 1, 'x'}) {
		t.Errorf("version 9: %q %v", p, err)
	}
}

func le64(v uint64) []byte {
	b := make([]byte, 8)
	for i := range b {
		b[i] = byte(v >> (8 * i))
	}
	return b
}

func TestLen(t *testing.T) {
	for _, c := range []struct {
		n    uint64
		size int
	}{
		{0, 1}, {63, 1}, {64, 2}, {16383, 2}, {16384, 5}, {math.MaxUint32, 5},
		{math.MaxUint32 + 1, 9}, {math.MaxUint64, 9},
	} {
		b := AppendLen(nil, c.n)
		if len(b) != c.size {
			t.Errorf("AppendLen(%d) is %d bytes, want %d", c.n, len(b), c.size)
		}
		r := NewReader(b)
		if got := r.Len(); got != c.n || r.Err() != nil || r.Remaining() != 0 {
			t.Errorf("Len(%x) = %d %v", b, got, r.Err())
		}
		for cut := 0; cut < len(b); cut++ {
			r := NewReader(b[:cut])
			r.Len()
			if r.Err() != ErrBadData {
				t.Errorf("Len of %x cut to %d: err %v", b, cut, r.Err())
			}
		}
	}
	// An unknown length marker and an encoded marker where a length belongs.
	for _, b := range [][]byte{{0x82}, {0xbf}, {0xc0, 1}} {
		r := NewReader(b)
		r.Len()
		if r.Err() != ErrBadData {
			t.Errorf("Len(%x) accepted", b)
		}
	}
}

func TestStringEncodings(t *testing.T) {
	for _, c := range []struct {
		s    string
		want string // hex of the encoding
	}{
		{"0", "c000"}, {"-1", "c0ff"}, {"127", "c07f"}, {"-128", "c080"},
		{"128", "c18000"}, {"-32768", "c10080"}, {"32768", "c200800000"},
		{"2147483647", "c2ffffff7f"}, {"-2147483648", "c200000080"},
		{"2147483648", "0a32313437343833363438"}, // beyond 32 bits: verbatim
		{"007", "03303037"}, {"+7", "022b37"}, {"-0", "022d30"}, {" 1", "022031"},
		{"", "00"},
	} {
		b := AppendString(nil, []byte(c.s))
		if hex.EncodeToString(b) != c.want {
			t.Errorf("AppendString(%q) = %x, want %s", c.s, b, c.want)
		}
		r := NewReader(b)
		if got := r.String(); string(got) != c.s || r.Err() != nil {
			t.Errorf("String(%x) = %q %v", b, got, r.Err())
		}
	}
	// Unknown string encoding.
	r := NewReader([]byte{0xc4, 0})
	r.String()
	if r.Err() != ErrBadData {
		t.Error("encoding 4 accepted")
	}
}

func TestLZFRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 2000; i++ {
		n := rng.Intn(3000) + 1
		alphabet := rng.Intn(255) + 1
		in := make([]byte, n)
		for j := range in {
			in[j] = byte(rng.Intn(alphabet))
		}
		if rng.Intn(3) == 0 { // long runs and repeats
			for j := range in {
				in[j] = byte(j / (rng.Intn(300) + 1))
			}
		}
		c := LZFCompress(in, n+n/16+64)
		if c == nil {
			t.Fatalf("could not compress %d bytes into %d", n, n+n/16+64)
		}
		out, err := LZFDecompress(c, n)
		if err != nil || !bytes.Equal(out, in) {
			t.Fatalf("round trip of %d bytes failed: %v", n, err)
		}
		// A budget one byte short of the result is refused, not overrun.
		if len(c) > 1 && LZFCompress(in, len(c)-1) != nil && len(c) > 4 {
			t.Fatalf("compression into %d bytes should not fit", len(c)-1)
		}
		s := AppendString(nil, in)
		r := NewReader(s)
		if got := r.String(); !bytes.Equal(got, in) || r.Err() != nil {
			t.Fatalf("AppendString/String of %d bytes: %v", n, r.Err())
		}
	}
}

func TestLZFDecompressRefuses(t *testing.T) {
	good := LZFCompress(bytes.Repeat([]byte("abc"), 100), 300)
	if _, err := LZFDecompress(good, 300); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		in []byte
		n  int
	}{
		"short result":      {good, 299},
		"long result":       {good, 301},
		"truncated":         {good[:len(good)-1], 300},
		"ref before start":  {[]byte{0, 'a', 0x20, 5}, 4},
		"literal past end":  {[]byte{5, 'a'}, 6},
		"backref no offset": {[]byte{0, 'a', 0x20}, 4},
	} {
		if _, err := LZFDecompress(c.in, c.n); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// A claimed size no LZF blob of that length could give is refused
	// before it is allocated.
	b := AppendLZF(nil, []byte{0, 'a'}, 1<<40)
	r := NewReader(b)
	r.String()
	if r.Err() != ErrBadData {
		t.Error("absurd LZF size accepted")
	}
}

func TestDouble(t *testing.T) {
	for _, f := range []float64{0, 1.5, -2.25, math.Inf(1), math.Inf(-1), math.MaxFloat64} {
		r := NewReader(AppendBinaryDouble(nil, f))
		if got := r.BinaryDouble(); got != f {
			t.Errorf("binary double %v read as %v", f, got)
		}
	}
	r := NewReader([]byte{254, 255, 253, 3, '1', '.', '5'})
	if a, b, c, d := r.Double(), r.Double(), r.Double(), r.Double(); !math.IsInf(a, 1) || !math.IsInf(b, -1) || !math.IsNaN(c) || d != 1.5 || r.Err() != nil {
		t.Errorf("textual doubles: %v %v %v %v %v", a, b, c, d, r.Err())
	}
}
