package engine

import (
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/limitkv/limitkv/ratelimit"
)

// ParseInt parses a decimal int64 exactly as Redis's string2ll does: an
// optional minus sign, no plus sign, no leading zeros, no spaces, at most 20
// characters. Values stored as integers format back to the same bytes. The
// rate-limit core reads its integers with the same function.
func ParseInt(b []byte) (int64, bool) { return ratelimit.ParseInt(b) }

// Atoi reads a leading decimal number as C's atoi does: spaces, a sign,
// digits, and whatever follows ignored; 0 when there are none. Redis reads
// some arguments so (EVAL's numkeys for ACL checks, MIGRATE's port).
func Atoi(b []byte) int64 {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] >= '\t' && b[i] <= '\r') {
		i++
	}
	neg := false
	if i < len(b) && (b[i] == '-' || b[i] == '+') {
		neg = b[i] == '-'
		i++
	}
	var n int64
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9' && n < 1<<40; i++ {
		n = n*10 + int64(b[i]-'0')
	}
	if neg {
		return -n
	}
	return n
}

// ParseFloat parses a double as Redis does with strtod: the whole string
// must be a number, no leading space, and neither NaN nor a value out of
// range; "inf" and "-inf" are accepted.
func ParseFloat(b []byte) (float64, bool) {
	if len(b) == 0 || len(b) > 5*1024 || isSpace(b[0]) {
		return 0, false
	}
	s := string(b)
	if strings.IndexByte(s, '_') >= 0 {
		return 0, false
	}
	hex := hexPrefix(s)
	if hex && !strings.ContainsAny(s, "pP") {
		s += "p0" // C reads hex floats without an exponent too
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 0, false // overflow
		}
		lower := strings.ToLower(s)
		if lower == "infinity" || lower == "+infinity" || lower == "-infinity" {
			return f, true
		}
		return 0, false
	}
	if math.IsNaN(f) {
		return 0, false
	}
	if f == 0 && !hex && hasNonZeroMantissa(s) {
		return 0, false // underflow: strtod reports ERANGE
	}
	return f, true
}

func hexPrefix(s string) bool {
	if len(s) > 0 && (s[0] == '-' || s[0] == '+') {
		s = s[1:]
	}
	return len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')
}

func hasNonZeroMantissa(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == 'e' || c == 'E' {
			return false
		}
		if c >= '1' && c <= '9' {
			return true
		}
	}
	return false
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// AppendFloat formats a double as Redis 7.0 replies do ("%.17g"), with
// infinities spelled "inf" and "-inf".
func AppendFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(dst, "inf"...)
	case math.IsInf(f, -1):
		return append(dst, "-inf"...)
	}
	return strconv.AppendFloat(dst, f, 'g', 17, 64)
}

// Redis computes INCRBYFLOAT and HINCRBYFLOAT in C's long double, which on
// x86-64 is the 80-bit extended format: a 64-bit mantissa. A big.Float with
// 64 bits of precision rounds the same way, so results match to the last
// digit.
const longDoublePrec = 64

// Largest finite long double, and smallest positive subnormal.
var (
	maxLongDouble, _, _ = big.ParseFloat("0x1.fffffffffffffffep16383", 0, longDoublePrec, big.ToNearestEven)
	minLongDouble, _, _ = big.ParseFloat("0x1p-16445", 0, longDoublePrec, big.ToNearestEven)
)

// ParseLongDouble parses like Redis's string2ld (strtold plus checks).
func ParseLongDouble(b []byte) (*big.Float, bool) {
	if len(b) == 0 || len(b) >= 5*1024 || isSpace(b[0]) {
		return nil, false
	}
	s := string(b)
	if strings.IndexByte(s, '_') >= 0 {
		return nil, false
	}
	lower := strings.ToLower(s)
	switch strings.TrimLeft(lower, "+-") {
	case "inf", "infinity":
		return new(big.Float).SetInf(lower[0] == '-'), true
	case "nan":
		return nil, false
	}
	if hexPrefix(s) && !strings.ContainsAny(s, "pP") {
		s += "p0"
	}
	f, _, err := big.ParseFloat(s, 0, longDoublePrec, big.ToNearestEven)
	if err != nil {
		return nil, false
	}
	abs := new(big.Float).Abs(f)
	if abs.Cmp(maxLongDouble) > 0 {
		return nil, false // strtold: ERANGE, HUGE_VALL
	}
	if f.Sign() != 0 && abs.Cmp(minLongDouble) < 0 {
		return nil, false // strtold: ERANGE, underflow to zero
	}
	return f, true
}

// FormatLongDouble formats like Redis's ld2string in human mode: "%.17Lf"
// with trailing zeros (and a trailing point) removed, "-0" written "0".
func FormatLongDouble(f *big.Float) string {
	if f.IsInf() {
		if f.Sign() > 0 {
			return "inf"
		}
		return "-inf"
	}
	s := f.Text('f', 17)
	if strings.IndexByte(s, '.') >= 0 {
		s = strings.TrimRight(s, "0")
		s = strings.TrimSuffix(s, ".")
	}
	if s == "-0" {
		s = "0"
	}
	return s
}

// AddLongDouble returns a+b rounded to long double, and false when the sum
// is not finite.
func AddLongDouble(a, b *big.Float) (*big.Float, bool) {
	if a.IsInf() || b.IsInf() {
		return nil, false
	}
	sum := new(big.Float).SetPrec(longDoublePrec).SetMode(big.ToNearestEven).Add(a, b)
	if new(big.Float).Abs(sum).Cmp(maxLongDouble) > 0 {
		return nil, false
	}
	return sum, true
}
