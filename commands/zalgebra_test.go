package commands

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// TestRandMembersProperties checks ZRANDMEMBER and HRANDFIELD by their
// properties, in both encodings: a positive count gives distinct members
// of the key, min(count, size) of them; a negative one gives exactly
// -count members of the key, repeats allowed; WITHSCORES/WITHVALUES pair
// each with its own score or value; over many draws every member shows up.
func TestRandMembersProperties(t *testing.T) {
	h := newHarness(t)
	for _, n := range []int{5, 300} { // listpack, then large encodings
		z, hk := fmt.Sprint("z", n), fmt.Sprint("h", n)
		for i := 0; i < n; i++ {
			h.do("ZADD", z, strconv.Itoa(i), fmt.Sprint("m", i))
			h.do("HSET", hk, fmt.Sprint("m", i), fmt.Sprint("v", i))
		}
		for _, c := range []struct {
			cmd, key, with string
			own            func(m string) string
		}{
			{"ZRANDMEMBER", z, "WITHSCORES", func(m string) string { return m[1:] }},
			{"HRANDFIELD", hk, "WITHVALUES", func(m string) string { return "v" + m[1:] }},
		} {
			seen := map[string]bool{}
			for _, count := range []int{1, 3, n - 1, n, n + 7, -1, -4, -3 * n} {
				r := h.do(c.cmd, c.key, strconv.Itoa(count))
				want := min(count, n)
				if count < 0 {
					want = -count
				}
				if len(r.Elems) != want {
					t.Fatalf("%s %s %d: %d members, want %d", c.cmd, c.key, count, len(r.Elems), want)
				}
				distinct := map[string]bool{}
				for _, e := range r.Elems {
					m := string(e.Str)
					var i int
					if _, err := fmt.Sscanf(m, "m%d", &i); err != nil || i < 0 || i >= n {
						t.Fatalf("%s %s %d: stranger %q", c.cmd, c.key, count, m)
					}
					distinct[m], seen[m] = true, true
				}
				if count > 0 && len(distinct) != len(r.Elems) {
					t.Fatalf("%s %s %d: repeated members %v", c.cmd, c.key, count, r.String())
				}
				p := h.do(c.cmd, c.key, strconv.Itoa(count), c.with)
				if len(p.Elems) != 2*want {
					t.Fatalf("%s %s %d %s: %d elements", c.cmd, c.key, count, c.with, len(p.Elems))
				}
				for i := 0; i < len(p.Elems); i += 2 {
					if g, w := string(p.Elems[i+1].Str), c.own(string(p.Elems[i].Str)); g != w {
						t.Fatalf("%s: %s paired with %s", c.cmd, p.Elems[i].Str, g)
					}
				}
			}
			for i := 0; i < 50*n && len(seen) < n; i++ {
				seen[string(h.do(c.cmd, c.key).Str)] = true
			}
			if len(seen) != n {
				t.Errorf("%s %s: %d of %d members ever drawn", c.cmd, c.key, len(seen), n)
			}
		}
	}
}

// TestRandMembersHugeCount: a count with repetitions whose reply cannot
// fit in proto-max-bulk-len is refused before any work; Redis would try
// to build it.
func TestRandMembersHugeCount(t *testing.T) {
	h := newHarness(t)
	h.do("ZADD", "z", "1", "a")
	h.do("HSET", "h", "f", "v")
	expect(t, h, "-ERR value is out of range", "ZRANDMEMBER", "z", "-9223372036854775807")
	expect(t, h, "-ERR value is out of range", "HRANDFIELD", "h", "-1000000000000")
	r := h.do("ZRANDMEMBER", "z", "-1000")
	if len(r.Elems) != 1000 {
		t.Fatalf("ZRANDMEMBER z -1000: %d", len(r.Elems))
	}
}

// TestZAlgebraLarge checks the algebra on large sets against a model.
func TestZAlgebraLarge(t *testing.T) {
	h := newHarness(t)
	const n = 2000
	for i := 0; i < n; i++ {
		h.do("ZADD", "a", strconv.Itoa(i), fmt.Sprint("m", i))
		if i%2 == 0 {
			h.do("ZADD", "b", strconv.Itoa(2*i), fmt.Sprint("m", i))
		}
		if i%3 == 0 {
			h.do("ZADD", "c", "1", fmt.Sprint("m", i))
		}
	}
	expect(t, h, ":2000", "ZUNIONSTORE", "u", "3", "a", "b", "c")
	expect(t, h, ":334", "ZINTERSTORE", "i", "3", "a", "b", "c", "AGGREGATE", "MAX")
	expect(t, h, ":334", "ZINTERCARD", "3", "a", "b", "c")
	expect(t, h, ":10", "ZINTERCARD", "3", "a", "b", "c", "LIMIT", "10")
	expect(t, h, ":667", "ZDIFFSTORE", "d", "3", "a", "b", "c")
	// m6 is in all three: 6 + 12 + 1.
	expect(t, h, `"19"`, "ZSCORE", "u", "m6")
	expect(t, h, `"12"`, "ZSCORE", "i", "m6")
	expect(t, h, `"1"`, "ZSCORE", "d", "m1")
	expect(t, h, `nil`, "ZSCORE", "d", "m2")
	expect(t, h, `"skiplist"`, "OBJECT", "ENCODING", "u")
	expect(t, h, `["m1999", "m1997"]`, "ZRANGE", "d", "0", "1", "REV")
}

// TestAlgebraCountsEachInputOnce: every input key is one keyspace hit or
// miss, as in Redis, whether it is a sorted set or a plain set.
func TestAlgebraCountsEachInputOnce(t *testing.T) {
	h := newHarness(t)
	h.do("ZADD", "cz", "1", "a")
	h.do("SADD", "cs", "b")
	h.do("CONFIG", "RESETSTAT")
	h.do("ZUNION", "3", "cz", "cs", "cmissing")
	info := string(h.do("INFO", "stats").Str)
	for _, want := range []string{"keyspace_hits:2\r\n", "keyspace_misses:1\r\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("after ZUNION of a zset, a set and a missing key, INFO stats lacks %q:\n%s", want, info)
		}
	}
}
