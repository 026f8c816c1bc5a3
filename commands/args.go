package commands

import (
	"strconv"

	"github.com/limitkv/limitkv/engine"
)

// Argument helpers. Each parses one argument the way Redis does and, on
// failure, writes Redis's error reply and returns false, so a handler reads
//
//	n, ok := c.Int(2)
//	if !ok {
//		return
//	}

// Int parses argument i as an int64 (Redis's string2ll).
func (c *Ctx) Int(i int) (int64, bool) {
	n, ok := engine.ParseInt(c.Args[i])
	if !ok {
		c.W.Error(msgNotInteger)
	}
	return n, ok
}

// Float parses argument i as a double.
func (c *Ctx) Float(i int) (float64, bool) {
	f, ok := engine.ParseFloat(c.Args[i])
	if !ok {
		c.W.Error(msgNotFloat)
	}
	return f, ok
}

// is reports whether argument b equals the upper-case word s in any case.
func is(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// parseUint64 parses a decimal unsigned integer as Redis's string2ull
// (SCAN cursors): strtoull over the whole string.
func parseUint64(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(string(b), 10, 64)
	return v, err == nil
}
