package rdb

import (
	"encoding/binary"
	"errors"
	"math"
	"strconv"
)

// ErrBadData is the refusal of a payload whose envelope is sound but whose
// value cannot be read: Redis answers RESTORE of it with "ERR Bad data
// format".
var ErrBadData = errors.New("Bad data format")

// The first byte of a length (rdb.h): its two high bits say how the rest
// is stored; RDB_ENCVAL marks a string stored in a special encoding, named
// by the low six bits.
const (
	len6Bit  = 0
	len14Bit = 1
	len32Bit = 0x80
	len64Bit = 0x81
	encVal   = 3

	encInt8  = 0
	encInt16 = 1
	encInt32 = 2
	encLZF   = 3
)

// AppendLen appends n in RDB's length encoding (rdbSaveLen): 6 bits in one
// byte, 14 bits in two, else a marker and 32 or 64 bits big endian.
func AppendLen(dst []byte, n uint64) []byte {
	switch {
	case n < 1<<6:
		return append(dst, byte(n))
	case n < 1<<14:
		return append(dst, byte(n>>8)|len14Bit<<6, byte(n))
	case n <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(dst, len32Bit), uint32(n))
	default:
		return binary.BigEndian.AppendUint64(append(dst, len64Bit), n)
	}
}

// appendIntEncoded is rdbEncodeInteger: v in 1, 2 or 4 bytes little
// endian after an RDB_ENCVAL marker; ok is false when v needs more.
func appendIntEncoded(dst []byte, v int64) ([]byte, bool) {
	switch {
	case v >= math.MinInt8 && v <= math.MaxInt8:
		return append(dst, encVal<<6|encInt8, byte(v)), true
	case v >= math.MinInt16 && v <= math.MaxInt16:
		return append(dst, encVal<<6|encInt16, byte(v), byte(v>>8)), true
	case v >= math.MinInt32 && v <= math.MaxInt32:
		return append(dst, encVal<<6|encInt32, byte(v), byte(v>>8), byte(v>>16), byte(v>>24)), true
	}
	return dst, false
}

// AppendString appends s as Redis's rdbSaveRawString does with
// rdbcompression on (its default): a string of up to 11 bytes that is the
// canonical form of an integer fitting 32 bits is stored as that integer;
// one of more than 20 bytes is stored LZF-compressed when that saves at
// least 4 bytes; any other verbatim after its length.
func AppendString(dst []byte, s []byte) []byte {
	if len(s) <= 11 {
		if v, ok := ParseInt(s); ok {
			if out, ok := appendIntEncoded(dst, v); ok {
				return out
			}
		}
	}
	if len(s) > 20 {
		if c := LZFCompress(s, len(s)-4); c != nil {
			return AppendLZF(dst, c, len(s))
		}
	}
	return AppendRawString(dst, s)
}

// AppendRawString appends s verbatim after its length, never encoded.
func AppendRawString(dst []byte, s []byte) []byte {
	return append(AppendLen(dst, uint64(len(s))), s...)
}

// AppendLZF appends an LZF blob c that expands to origLen bytes
// (rdbSaveLzfBlob).
func AppendLZF(dst []byte, c []byte, origLen int) []byte {
	dst = append(dst, encVal<<6|encLZF)
	dst = AppendLen(dst, uint64(len(c)))
	dst = AppendLen(dst, uint64(origLen))
	return append(dst, c...)
}

// ParseInt is Redis's string2ll: the canonical decimal form of an int64
// only (no sign but '-', no leading zeros, no spaces, "-0" refused).
func ParseInt(s []byte) (int64, bool) {
	if len(s) == 0 || len(s) > 20 {
		return 0, false
	}
	if len(s) == 1 && s[0] == '0' {
		return 0, true
	}
	d := s
	if d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || d[0] < '1' || d[0] > '9' {
		return 0, false
	}
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(string(s), 10, 64)
	return v, err == nil
}

// AppendBinaryDouble appends f as 8 bytes little endian
// (rdbSaveBinaryDoubleValue, RDB_TYPE_ZSET_2's scores).
func AppendBinaryDouble(dst []byte, f float64) []byte {
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(f))
}

// Reader reads an RDB value. Its first error sticks: every later read
// returns zero values, and Err reports it. Strings it returns may alias the
// input; copy what outlives it. No read allocates more than the input can
// justify: a length is checked against the bytes that remain before
// anything is made for it.
type Reader struct {
	b   []byte
	err error
}

// NewReader reads b.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Err is the first error met, ErrBadData for any malformed input.
func (r *Reader) Err() error { return r.err }

// Remaining is how many bytes are left unread.
func (r *Reader) Remaining() int { return len(r.b) }

func (r *Reader) fail() {
	if r.err == nil {
		r.err = ErrBadData
	}
	r.b = nil
}

// Fail marks the input bad (for a caller's checks on what it read).
func (r *Reader) Fail() { r.fail() }

func (r *Reader) take(n uint64) []byte {
	if r.err != nil || n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	p := r.take(1)
	if p == nil {
		return 0
	}
	return p[0]
}

// lenOrEnc is rdbLoadLenByRef: a length, or (encoded true) the number of
// a special string encoding.
func (r *Reader) lenOrEnc() (n uint64, encoded bool) {
	first := r.Byte()
	if r.err != nil {
		return 0, false
	}
	switch first >> 6 {
	case encVal:
		return uint64(first & 0x3f), true
	case len6Bit:
		return uint64(first & 0x3f), false
	case len14Bit:
		return uint64(first&0x3f)<<8 | uint64(r.Byte()), false
	}
	switch first {
	case len32Bit:
		if p := r.take(4); p != nil {
			return uint64(binary.BigEndian.Uint32(p)), false
		}
	case len64Bit:
		if p := r.take(8); p != nil {
			return binary.BigEndian.Uint64(p), false
		}
	default:
		r.fail()
	}
	return 0, false
}

// Len reads a length; an encoded-string marker where a length belongs is
// bad data.
func (r *Reader) Len() uint64 {
	n, enc := r.lenOrEnc()
	if enc {
		r.fail()
		return 0
	}
	return n
}

// maxLZFRatio bounds what an LZF blob can expand to: a 3-byte back
// reference gives at most 264 bytes. A claimed length beyond it cannot be
// honest, and is refused before anything of that size is allocated.
const maxLZFRatio = 88

// String reads a string in any of its encodings (rdbGenericLoadStringObject).
func (r *Reader) String() []byte {
	n, enc := r.lenOrEnc()
	if r.err != nil {
		return nil
	}
	if !enc {
		return r.take(n)
	}
	var v int64
	switch n {
	case encInt8:
		p := r.take(1)
		if p == nil {
			return nil
		}
		v = int64(int8(p[0]))
	case encInt16:
		p := r.take(2)
		if p == nil {
			return nil
		}
		v = int64(int16(binary.LittleEndian.Uint16(p)))
	case encInt32:
		p := r.take(4)
		if p == nil {
			return nil
		}
		v = int64(int32(binary.LittleEndian.Uint32(p)))
	case encLZF:
		clen := r.Len()
		olen := r.Len()
		c := r.take(clen)
		if r.err != nil {
			return nil
		}
		if olen > uint64(len(c))*maxLZFRatio+lzfMaxLit {
			r.fail()
			return nil
		}
		out, err := LZFDecompress(c, int(olen))
		if err != nil {
			r.fail()
			return nil
		}
		return out
	default:
		r.fail()
		return nil
	}
	return strconv.AppendInt(nil, v, 10)
}

// BinaryDouble reads 8 bytes little endian as a float64.
func (r *Reader) BinaryDouble() float64 {
	p := r.take(8)
	if p == nil {
		return 0
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(p))
}

// Double reads the old textual double (rdbLoadDoubleValue, RDB_TYPE_ZSET's
// scores): a length byte, 253 NaN, 254 +inf, 255 -inf, else that many
// bytes of decimal text.
func (r *Reader) Double() float64 {
	n := r.Byte()
	switch n {
	case 253:
		return math.NaN()
	case 254:
		return math.Inf(1)
	case 255:
		return math.Inf(-1)
	}
	p := r.take(uint64(n))
	if r.err != nil {
		return 0
	}
	f, err := strconv.ParseFloat(string(p), 64)
	if err != nil {
		r.fail()
		return 0
	}
	return f
}
