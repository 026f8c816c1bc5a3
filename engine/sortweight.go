package engine

import (
	"bytes"
	"math"
	"strconv"
	"strings"
)

// ParseSortWeight parses a SORT weight as Redis does with strtod: the
// whole C string (up to a NUL) must convert, leading blanks allowed, an
// empty string is 0; NaN and results out of range (overflow, and underflow
// to zero or to a subnormal, for which strtod sets ERANGE) are refused.
func ParseSortWeight(b []byte) (float64, bool) {
	if v, ok := ParseInt(b); ok && v < 1<<53 && v > -1<<53 {
		return float64(v), true // the common case, exact, without strconv
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	if len(b) == 0 {
		return 0, true
	}
	i := 0
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	s := string(b[i:])
	if s == "" || strings.IndexByte(s, '_') >= 0 {
		return 0, false
	}
	hex := hexPrefix(s)
	if hex && !hasHexExponent(s) {
		s += "p0"
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) {
		return 0, false
	}
	if f != 0 && math.Abs(f) < 0x1p-1022 {
		return 0, false
	}
	if f == 0 && (hex && hexMantissaNonZero(s) || !hex && hasNonZeroMantissa(s)) {
		return 0, false
	}
	return f, true
}

func hexMantissaNonZero(s string) bool {
	_, s, _ = strings.Cut(strings.ToLower(s), "x")
	for i := 0; i < len(s) && s[i] != 'p'; i++ {
		if c := s[i]; c != '0' && c != '.' {
			return true
		}
	}
	return false
}
