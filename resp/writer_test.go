package resp

import (
	"math"
	"strconv"
	"testing"
)

// TestWriterIntAndArray: the digits appended in place are the same as
// strconv's, at the single-digit boundary and at the extremes.
func TestWriterIntAndArray(t *testing.T) {
	w := NewWriter(2)
	for _, n := range []int64{0, 1, 9, 10, 11, 99, 100, -1, -9, -10, 60000, math.MaxInt64, math.MinInt64} {
		w.Reset()
		w.Int(n)
		if got, want := string(w.Bytes()), ":"+strconv.FormatInt(n, 10)+"\r\n"; got != want {
			t.Errorf("Int(%d) = %q, want %q", n, got, want)
		}
	}
	for _, n := range []int{0, 1, 5, 9, 10, 123, -1} {
		w.Reset()
		w.Array(n)
		if got, want := string(w.Bytes()), "*"+strconv.Itoa(n)+"\r\n"; got != want {
			t.Errorf("Array(%d) = %q, want %q", n, got, want)
		}
	}
}
