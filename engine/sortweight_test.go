package engine

import (
	"math"
	"testing"
)

var posInf = math.Inf(1)

// TestParseSortWeight: what strtod converts in full, as SORT reads it
// (the cases checked against Redis 7.0.15 in tests/testdata/diff/sort.txt).
func TestParseSortWeight(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"1", 1, true}, {"-5", -5, true}, {"", 0, true}, {" 7", 7, true}, {"\t4", 4, true},
		{"01", 1, true}, {"+3", 3, true}, {"1.0", 1, true}, {".5", 0.5, true}, {"5.", 5, true},
		{"1e2", 100, true}, {"0x10", 16, true}, {"0x1p3", 8, true}, {"inf", posInf, true},
		{"-Infinity", -posInf, true}, {"INF", posInf, true}, {"-0", 0, true},
		{"9007199254740993", 9007199254740992, true},
		{"1e-300", 1e-300, true}, {"2.2250738585072014e-308", 2.2250738585072014e-308, true},
		{"1\x00junk", 1, true},
		{"abc", 0, false}, {"nan", 0, false}, {"1 ", 0, false}, {" ", 0, false}, {"1x", 0, false},
		{"- 1", 0, false}, {"++1", 0, false}, {"1e", 0, false}, {"0x", 0, false}, {"1_0", 0, false},
		{"1e400", 0, false}, {"-1e400", 0, false}, {"1e-310", 0, false}, {"4.9e-324", 0, false},
		{"1e-400", 0, false}, {"0x1p-1074", 0, false}, {"0x0p0", 0, true},
	} {
		got, ok := ParseSortWeight([]byte(c.in))
		if ok != c.ok || ok && got != c.want {
			t.Errorf("ParseSortWeight(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
