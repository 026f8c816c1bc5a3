package commands

import (
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/limitkv/limitkv/cmdspec"
)

func splitArgs(s string) [][]byte {
	var out [][]byte
	for _, f := range strings.Fields(s) {
		out = append(out, []byte(f))
	}
	return out
}

// TestSortKeys: the keys SORT locks and ACL checks, as Redis's
// sortGetKeys finds them (COMMAND GETKEYS in tests/testdata/diff/sort.txt
// compares with Redis).
func TestSortKeys(t *testing.T) {
	for _, c := range []struct {
		args string
		want []cmdspec.KeyRef
	}{
		{"SORT k", []cmdspec.KeyRef{{Pos: 1, Spec: 0}}},
		{"SORT k STORE d", []cmdspec.KeyRef{{Pos: 1, Spec: 0}, {Pos: 3, Spec: 2}}},
		{"SORT k STORE d LIMIT 0 1 GET # BY w STORE e", []cmdspec.KeyRef{{Pos: 1, Spec: 0}, {Pos: 12, Spec: 2}}},
		{"SORT k LIMIT STORE d STORE", []cmdspec.KeyRef{{Pos: 1, Spec: 0}}},
		{"SORT k GET STORE", []cmdspec.KeyRef{{Pos: 1, Spec: 0}}},
		{"SORT k BY STORE STORE x", []cmdspec.KeyRef{{Pos: 1, Spec: 0}, {Pos: 5, Spec: 2}}},
		{"SORT k STORE", []cmdspec.KeyRef{{Pos: 1, Spec: 0}}},
	} {
		if got := sortKeys(splitArgs(c.args), nil); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.args, got, c.want)
		}
	}
}

// TestSortLocksEveryShard: only patterns that read keys lock every shard.
func TestSortLocksEveryShard(t *testing.T) {
	for _, c := range []struct {
		args     string
		readOnly bool
		want     bool
	}{
		{"SORT k", false, false},
		{"SORT k BY nosort", false, false},
		{"SORT k BY w_*", false, true},
		{"SORT k BY w_* BY nosort", false, false}, // a constant BY stops the sorting for good
		{"SORT k BY nosort BY w_*", false, false},
		{"SORT k GET #", false, false},
		{"SORT k GET nostar", false, false},
		{"SORT k GET # GET h_*->f", false, true},
		{"SORT k STORE d BY w_*", false, true},
		{"SORT k STORE d BY w_*", true, false}, // a syntax error: nothing read
		{"SORT k BY w_* FOO", false, false},
		{"SORT k LIMIT 0 x GET *", false, false},
	} {
		if got := sortReadsPatterns(c.readOnly)(splitArgs(c.args)); got != c.want {
			t.Errorf("%s (read-only %v): %v, want %v", c.args, c.readOnly, got, c.want)
		}
	}
}

// BenchmarkSortMillion sorts a list of a million random integers, as
// SORT big LIMIT 0 10 does: the time the key's shard is held.
func BenchmarkSortMillion(b *testing.B) {
	p := newInProcess()
	rng := rand.New(rand.NewSource(7))
	args := words("RPUSH", "big")
	for i := 0; i < 1000000; i++ {
		args = append(args, []byte(strconv.Itoa(rng.Intn(1e9))))
		if len(args) == 1002 {
			p.do(args...)
			args = args[:2]
		}
	}
	for _, mode := range [][]string{{}, {"ALPHA"}} {
		b.Run(strings.Join(append([]string{"SORT"}, mode...), " "), func(b *testing.B) {
			cmd := append(words("SORT", "big", "LIMIT", "0", "10"), words(mode...)...)
			for i := 0; i < b.N; i++ {
				if r := p.do(cmd...); r[0] != '*' {
					b.Fatalf("%q", r)
				}
			}
		})
	}
}
