package lua51

import (
	"math"
	"testing"
)

// TestStrToNumber: Lua 5.1 reads numbers with C's strtod.
func TestStrToNumber(t *testing.T) {
	for s, want := range map[string]float64{
		"10": 10, " 12 ": 12, "0x10": 16, "0X1p4": 16, "1e2": 100, ".5": 0.5, "5.": 5, "-0x10": -16,
		"inf": math.Inf(1), "-Infinity": math.Inf(-1), "1e400": math.Inf(1), "010": 10,
	} {
		got, ok := luaStr2Number(s)
		if !ok || got != want {
			t.Errorf("luaStr2Number(%q) = %v, %v; want %v", s, got, ok, want)
		}
	}
	for _, s := range []string{"", " ", "0x", "1e", "1_000", "0b1", "1 2", "abc", "--1"} {
		if got, ok := luaStr2Number(s); ok {
			t.Errorf("luaStr2Number(%q) = %v, want no number", s, got)
		}
	}
	if got, ok := luaStr2Number("nan"); !ok || got == got {
		t.Errorf("luaStr2Number(nan) = %v, %v", got, ok)
	}
}
