package engine

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"unsafe"
)

// zmodel is the naive sorted set the ZSet is checked against: a sorted
// slice, and the encoding Redis would be using, which decides whether -0
// survives (a listpack stores it as 0).
type zmodel struct {
	ents    []zent
	compact bool
	lim     ZSetLimits
}

type zent struct {
	m string
	s float64
}

func zless(a, b zent) bool {
	if a.s != b.s {
		return a.s < b.s
	}
	return a.m < b.m
}

func (md *zmodel) find(m string) int {
	for i, e := range md.ents {
		if e.m == m {
			return i
		}
	}
	return -1
}

func (md *zmodel) put(m string, s float64) {
	if md.compact && s == 0 {
		s = 0
	}
	e := zent{m, s}
	i, _ := slices.BinarySearchFunc(md.ents, e, func(a, b zent) int {
		if zless(a, b) {
			return -1
		}
		if zless(b, a) {
			return 1
		}
		return 0
	})
	md.ents = slices.Insert(md.ents, i, e)
}

// add follows Redis's zsetAdd.
func (md *zmodel) add(m string, s float64, f ZAddFlags) (ZAddResult, float64) {
	if math.IsNaN(s) {
		return ZAddNaN, 0
	}
	if i := md.find(m); i >= 0 {
		cur := md.ents[i].s
		if f&ZAddNX != 0 {
			return ZAddSkipped, 0
		}
		if f&ZAddIncr != 0 {
			s += cur
			if math.IsNaN(s) {
				return ZAddNaN, 0
			}
		}
		if (f&ZAddLT != 0 && s >= cur) || (f&ZAddGT != 0 && s <= cur) {
			return ZAddSkipped, 0
		}
		if s == cur {
			return ZAddUnchanged, s
		}
		md.ents = slices.Delete(md.ents, i, i+1)
		md.put(m, s)
		return ZAddUpdated, s
	}
	if f&ZAddXX != 0 {
		return ZAddSkipped, 0
	}
	if md.compact && (len(md.ents)+1 > md.lim.Entries || len(m) > md.lim.Value) {
		md.compact = false
	}
	md.put(m, s)
	return ZAddAdded, s
}

// scoreWindow walks like Redis's genericZrangebyscoreCommand.
func (md *zmodel) scoreWindow(r ScoreRange, rev bool, offset, limit int64) []zent {
	var out []zent
	n := len(md.ents)
	if !rev {
		i := 0
		for i < n && !r.aboveMin(md.ents[i].s) {
			i++
		}
		if i == n || !r.belowMax(md.ents[i].s) {
			return nil
		}
		for ; i < n && offset != 0; offset-- {
			i++
		}
		for ; i < n && limit != 0 && r.belowMax(md.ents[i].s); limit-- {
			out = append(out, md.ents[i])
			i++
		}
		return out
	}
	i := n - 1
	for i >= 0 && !r.belowMax(md.ents[i].s) {
		i--
	}
	if i < 0 || !r.aboveMin(md.ents[i].s) {
		return nil
	}
	for ; i >= 0 && offset != 0; offset-- {
		i--
	}
	for ; i >= 0 && limit != 0 && r.aboveMin(md.ents[i].s); limit-- {
		out = append(out, md.ents[i])
		i--
	}
	return out
}

// lexWindow walks like Redis's listpack code for ZRANGEBYLEX.
func (md *zmodel) lexWindow(r LexRange, rev bool, offset, limit int64) []zent {
	n := len(md.ents)
	if r.empty() || n == 0 {
		return nil
	}
	in := func(i int) (bool, bool) {
		m := []byte(md.ents[i].m)
		return r.aboveMin(m), r.belowMax(m)
	}
	if a, _ := in(n - 1); !a {
		return nil
	}
	if _, b := in(0); !b {
		return nil
	}
	var out []zent
	if !rev {
		i := 0
		for ; i < n; i++ {
			if a, _ := in(i); a {
				break
			}
		}
		if i == n {
			return nil
		}
		if _, b := in(i); !b {
			return nil
		}
		for ; i < n && offset != 0; offset-- {
			i++
		}
		for ; i < n && limit != 0; limit-- {
			if _, b := in(i); !b {
				break
			}
			out = append(out, md.ents[i])
			i++
		}
		return out
	}
	i := n - 1
	for ; i >= 0; i-- {
		if _, b := in(i); b {
			break
		}
	}
	if i < 0 {
		return nil
	}
	if a, _ := in(i); !a {
		return nil
	}
	for ; i >= 0 && offset != 0; offset-- {
		i--
	}
	for ; i >= 0 && limit != 0; limit-- {
		if a, _ := in(i); !a {
			break
		}
		out = append(out, md.ents[i])
		i--
	}
	return out
}

// rankWindow follows genericZrangebyrankCommand.
func (md *zmodel) rankWindow(start, stop int64, rev bool) []zent {
	n := int64(len(md.ents))
	if start < 0 {
		start = n + start
	}
	if stop < 0 {
		stop = n + stop
	}
	if start < 0 {
		start = 0
	}
	if start > stop || start >= n {
		return nil
	}
	if stop >= n {
		stop = n - 1
	}
	var out []zent
	for i := start; i <= stop; i++ {
		if rev {
			out = append(out, md.ents[n-1-i])
		} else {
			out = append(out, md.ents[i])
		}
	}
	return out
}

func collect(z *ZSet, lo, hi int, rev bool) []zent {
	var out []zent
	z.Range(lo, hi, rev, nil, func(m []byte, s float64) bool {
		out = append(out, zent{string(m), s})
		return true
	})
	return out
}

func sameEnts(a, b []zent) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].m != b[i].m || math.Float64bits(a[i].s) != math.Float64bits(b[i].s) {
			return false
		}
	}
	return true
}

// zgen draws members and scores that hit the encodings' special cases:
// canonical and non-canonical numbers, timestamps used as their own score,
// long members, -0, infinities, fractions, huge integers.
type zgen struct {
	rng    *rand.Rand
	pool   int
	lexish bool // all scores equal, for lex ranges
}

func (g *zgen) member() string {
	k := g.rng.IntN(g.pool)
	switch k % 7 {
	case 0:
		return strconv.Itoa(1732170000000 + k)
	case 1:
		return strconv.Itoa(k - g.pool/2)
	case 2:
		return "0" + strconv.Itoa(k) // not canonical: stored as bytes
	case 3:
		return string(bytes.Repeat([]byte{'a' + byte(k%26)}, 1+k%80))
	case 4:
		return ""
	default:
		return fmt.Sprintf("m%03d", k)
	}
}

func (g *zgen) score(m string) float64 {
	if g.lexish {
		return 0
	}
	switch g.rng.IntN(12) {
	case 0:
		if v, err := strconv.ParseInt(m, 10, 64); err == nil {
			return float64(v)
		}
		return 7
	case 1:
		return math.Copysign(0, -1)
	case 2:
		return 0
	case 3:
		return math.Inf(1)
	case 4:
		return math.Inf(-1)
	case 5:
		return g.rng.Float64()*200 - 100
	case 6:
		return float64(g.rng.Int64N(1<<62)) * 4
	case 7:
		return 1732170000000 + float64(g.rng.IntN(100))
	default:
		return float64(g.rng.IntN(20) - 10)
	}
}

func (g *zgen) bound() (float64, bool) {
	ex := g.rng.IntN(3) == 0
	switch g.rng.IntN(8) {
	case 0:
		return math.Inf(-1), ex
	case 1:
		return math.Inf(1), ex
	case 2:
		return 1732170000000 + float64(g.rng.IntN(100)), ex
	case 3:
		return math.Copysign(0, -1), ex
	}
	return float64(g.rng.IntN(24) - 12), ex
}

func (g *zgen) lexBound() LexBound {
	switch g.rng.IntN(6) {
	case 0:
		return LexBound{Inf: -1, Excl: true}
	case 1:
		return LexBound{Inf: 1, Excl: true}
	}
	return LexBound{Value: []byte(g.member()), Excl: g.rng.IntN(2) == 0}
}

func TestZSetModel(t *testing.T) {
	limits := []ZSetLimits{{128, 64}, {16, 8}, {0, 64}, {1 << 20, 1 << 20}, {40, 1 << 20}}
	for seed := uint64(1); seed <= 12; seed++ {
		lim := limits[seed%uint64(len(limits))]
		lexish := seed%3 == 0
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			pool := 60 + rng.IntN(400)
			if seed%4 == 0 {
				pool = 3000
			}
			runZSetModel(t, rng, lim, &zgen{rng: rng, pool: pool, lexish: lexish}, 6000)
		})
	}
}

// TestZSetModelDeep runs the model with tiny nodes (inner ones need a
// minimum of at least two children, as in any B-tree), so that a few hundred
// members make a tree six levels deep and every split, merge and share
// path of inner nodes runs many times.
func TestZSetModelDeep(t *testing.T) {
	defer func(l, i int) {
		zLeafMax, zLeafMin, zInnerMax, zInnerMin = l, l/2, i, i/2
	}(zLeafMax, zInnerMax)
	for _, fan := range [][2]int{{4, 4}, {3, 5}, {8, 4}, {2, 6}} {
		zLeafMax, zLeafMin, zInnerMax, zInnerMin = fan[0], fan[0]/2, fan[1], fan[1]/2
		for seed := uint64(1); seed <= 6; seed++ {
			t.Run(fmt.Sprintf("fan%v/seed%d", fan, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 11))
				lim := ZSetLimits{Entries: int(seed % 3 * 20), Value: 64}
				runZSetModel(t, rng, lim, &zgen{rng: rng, pool: 100 + 200*int(seed), lexish: seed%2 == 0}, 8000)
			})
		}
	}
}

func runZSetModel(t *testing.T, rng *rand.Rand, lim ZSetLimits, g *zgen, steps int) {
	z := NewZSet()
	md := &zmodel{compact: true, lim: lim}
	flagSets := []ZAddFlags{0, 0, 0, ZAddNX, ZAddXX, ZAddGT, ZAddLT, ZAddIncr, ZAddIncr | ZAddGT, ZAddXX | ZAddLT, ZAddIncr | ZAddNX}
	for step := 0; step < steps; step++ {
		n := len(md.ents)
		switch op := rng.IntN(20); {
		case op < 8 || n == 0:
			m := g.member()
			s := g.score(m)
			f := flagSets[rng.IntN(len(flagSets))]
			wr, ws := md.add(m, s, f)
			gr, gs := z.Add([]byte(m), s, f, lim)
			if wr != gr || (wr != ZAddSkipped && wr != ZAddNaN && math.Float64bits(ws) != math.Float64bits(gs)) {
				t.Fatalf("step %d: Add(%q, %v, %b) = %v %v, want %v %v", step, m, s, f, gr, gs, wr, ws)
			}
		case op < 10:
			m := g.member()
			i := md.find(m)
			if i >= 0 {
				md.ents = slices.Delete(md.ents, i, i+1)
			}
			if got := z.Remove([]byte(m)); got != (i >= 0) {
				t.Fatalf("step %d: Remove(%q) = %v", step, m, got)
			}
		case op < 11:
			lo := rng.IntN(n + 1)
			hi := lo + rng.IntN(min(n-lo, 1+n/8)+1)
			if rng.IntN(10) == 0 {
				hi = n
			}
			if got := z.RemoveRange(lo, hi); got != hi-lo {
				t.Fatalf("step %d: RemoveRange(%d, %d) = %d", step, lo, hi, got)
			}
			md.ents = slices.Delete(md.ents, lo, hi)
		case op < 12:
			// ZPOPMIN / ZPOPMAX with a count
			k := 1 + rng.IntN(4)
			rev := rng.IntN(2) == 0
			lo, hi := 0, min(k, n)
			if rev {
				lo, hi = n-min(k, n), n
			}
			got := collect(z, lo, hi, rev)
			want := slices.Clone(md.ents[lo:hi])
			if rev {
				slices.Reverse(want)
			}
			if !sameEnts(got, want) {
				t.Fatalf("step %d: pop %v %v, want %v", step, rev, got, want)
			}
			z.RemoveRange(lo, hi)
			md.ents = slices.Delete(md.ents, lo, hi)
		case op < 14:
			m := g.member()
			i := md.find(m)
			s, ok := z.Score([]byte(m))
			r, rok := z.Rank([]byte(m))
			if ok != (i >= 0) || rok != ok || (ok && (r != i || math.Float64bits(s) != math.Float64bits(md.ents[i].s))) {
				t.Fatalf("step %d: Score/Rank(%q) = %v %v %d %v, model index %d", step, m, s, ok, r, rok, i)
			}
		case op < 16:
			start := int64(rng.IntN(2*n+3) - n - 1)
			stop := int64(rng.IntN(2*n+3) - n - 1)
			if rng.IntN(20) == 0 {
				start, stop = math.MinInt64, math.MaxInt64
			}
			rev := rng.IntN(2) == 0
			lo, hi := z.RankWindow(start, stop)
			var got []zent
			if rev {
				// ZREVRANGE counts ranks from the top.
				got = collect(z, n-hi, n-lo, true)
			} else {
				got = collect(z, lo, hi, false)
			}
			if want := md.rankWindow(start, stop, rev); !sameEnts(got, want) {
				t.Fatalf("step %d: rank window %d %d rev=%v: %v, want %v", step, start, stop, rev, got, want)
			}
		case op < 18:
			var r ScoreRange
			r.Min, r.MinEx = g.bound()
			r.Max, r.MaxEx = g.bound()
			rev := rng.IntN(2) == 0
			offset, limit := int64(0), int64(-1)
			if rng.IntN(2) == 0 {
				offset, limit = int64(rng.IntN(n+2)-1), int64(rng.IntN(n+2)-1)
			}
			lo, hi := z.ScoreWindow(r, rev, offset, limit)
			got := collect(z, lo, hi, rev)
			if want := md.scoreWindow(r, rev, offset, limit); !sameEnts(got, want) {
				t.Fatalf("step %d: score window %+v rev=%v %d %d: %v, want %v", step, r, rev, offset, limit, got, want)
			}
			slo, shi := z.ScoreSpan(r)
			if want := md.scoreWindow(r, false, 0, -1); shi-slo != len(want) {
				t.Fatalf("step %d: ScoreSpan %+v = %d", step, r, shi-slo)
			}
		default:
			// Lex ranges: exact for a compact set whatever the scores (a
			// listpack walk), and for any set whose scores are all equal.
			if !g.lexish && !md.compact {
				continue
			}
			r := LexRange{Min: g.lexBound(), Max: g.lexBound()}
			if rng.IntN(4) == 0 {
				r.Max = LexBound{Inf: 1, Excl: true}
			}
			rev := rng.IntN(2) == 0
			offset, limit := int64(0), int64(-1)
			if rng.IntN(2) == 0 {
				offset, limit = int64(rng.IntN(n+2)-1), int64(rng.IntN(n+2)-1)
			}
			lo, hi := z.LexWindow(r, rev, offset, limit)
			got := collect(z, lo, hi, rev)
			if want := md.lexWindow(r, rev, offset, limit); !sameEnts(got, want) {
				t.Fatalf("step %d: lex window [%q %d %v] [%q %d %v] rev=%v %d %d: %v, want %v", step,
					r.Min.Value, r.Min.Inf, r.Min.Excl, r.Max.Value, r.Max.Inf, r.Max.Excl, rev, offset, limit, got, want)
			}
		}
		if z.Len() != len(md.ents) {
			t.Fatalf("step %d: Len %d, want %d", step, z.Len(), len(md.ents))
		}
		if wantEnc := map[bool]string{true: "listpack", false: "skiplist"}[md.compact]; z.Encoding() != wantEnc {
			t.Fatalf("step %d: encoding %s, want %s", step, z.Encoding(), wantEnc)
		}
		if step%31 == 0 || len(md.ents) < 3 {
			if got := collect(z, 0, z.Len(), false); !sameEnts(got, md.ents) {
				t.Fatalf("step %d: contents\n got %v\nwant %v", step, got, md.ents)
			}
			checkZSet(t, z)
		}
		if len(md.ents) == 0 {
			// An emptied key is deleted and comes back compact.
			z = NewZSet()
			md.compact = true
		}
	}
}

// checkZSet verifies the large encoding's invariants: the index, the slab
// and the tree agree, the tree is balanced with sizes, separators, fill
// and leaf chain all correct.
func checkZSet(t *testing.T, z *ZSet) {
	t.Helper()
	if z.big == nil {
		n, off := 0, 0
		for off < len(z.lp) {
			off = lpDecode(z.lp, off).end
			n++
		}
		if n != z.Len() || off != len(z.lp) || (n > 0 && lpSkip(z.lp, int(z.tail)) != len(z.lp)) {
			t.Fatalf("compact: %d entries in %d bytes, n=%d, tail %d", n, off, z.n, z.tail)
		}
		return
	}
	b := z.big
	tr := &b.tree
	if b.index.count != b.live() || tr.n != b.live() {
		t.Fatalf("index %d, tree %d, live %d", b.index.count, tr.n, b.live())
	}
	for id, it := range b.items {
		if it.member == "" && slices.Contains(b.free, uint32(id)) {
			continue
		}
		got, _, ok := b.lookup([]byte(it.member))
		if !ok || got != uint32(id) {
			t.Fatalf("item %d %q not indexed", id, it.member)
		}
	}
	if tr.root == nil {
		if tr.n != 0 || tr.leaves != 0 || tr.inners != 0 {
			t.Fatalf("empty tree with n=%d leaves=%d inners=%d", tr.n, tr.leaves, tr.inners)
		}
		return
	}
	var leaves []*znode
	inners := 0
	// Nodes at the ends of their level may be under the minimum: inserts
	// in key order split them unevenly on purpose.
	var walk func(n *znode, h int, edgeL, edgeR bool) (int, zent, zent)
	walk = func(n *znode, h int, edgeL, edgeR bool) (int, zent, zent) {
		edge := edgeL || edgeR
		if h == 0 {
			if (!edge && len(n.scores) < zLeafMin) || len(n.scores) == 0 || len(n.scores) > zLeafMax || len(n.ids) != len(n.scores) {
				t.Fatalf("leaf with %d entries", len(n.scores))
			}
			leaves = append(leaves, n)
			for i := 1; i < len(n.scores); i++ {
				a := zent{tr.member(n.ids[i-1]), n.scores[i-1]}
				c := zent{tr.member(n.ids[i]), n.scores[i]}
				if !zless(a, c) {
					t.Fatalf("leaf out of order: %v %v", a, c)
				}
			}
			return len(n.scores), zent{tr.member(n.ids[0]), n.scores[0]}, zent{tr.member(n.ids[len(n.ids)-1]), n.scores[len(n.scores)-1]}
		}
		inners++
		k := len(n.kids)
		if (!edge && k < zInnerMin) || (n == tr.root && k < 2) || k > zInnerMax || len(n.sizes) != k || len(n.scores) != k || len(n.seps) != k {
			t.Fatalf("inner node with %d children", k)
		}
		total := 0
		var first, prevMax zent
		for j, kid := range n.kids {
			c, lo, hi := walk(kid, h-1, edgeL && j == 0, edgeR && j == k-1)
			if c != n.sizes[j] {
				t.Fatalf("size %d recorded as %d", c, n.sizes[j])
			}
			if j == 0 {
				first = lo
			} else {
				sep := zent{n.seps[j], n.scores[j]}
				if !zless(prevMax, sep) || zless(lo, sep) {
					t.Fatalf("separator %v between %v and %v", sep, prevMax, lo)
				}
			}
			prevMax = hi
			total += c
		}
		return total, first, prevMax
	}
	total, _, _ := walk(tr.root, tr.height, true, true)
	if total != tr.n || len(leaves) != tr.leaves || inners != tr.inners {
		t.Fatalf("tree counts %d/%d leaves %d/%d inners %d/%d", total, tr.n, len(leaves), tr.leaves, inners, tr.inners)
	}
	for i, l := range leaves {
		var prev, next *znode
		if i > 0 {
			prev = leaves[i-1]
		}
		if i+1 < len(leaves) {
			next = leaves[i+1]
		}
		if l.prev != prev || l.next != next {
			t.Fatalf("leaf chain broken at leaf %d", i)
		}
	}
}

// TestZSetStructSizes keeps MemoryUsage's constants true: each struct
// must fit the allocation class it is counted as.
func TestZSetStructSizes(t *testing.T) {
	for _, c := range []struct {
		name        string
		size, class uintptr
	}{
		{"ZSet", unsafe.Sizeof(ZSet{}), zsetBytes},
		{"zbig", unsafe.Sizeof(zbig{}), zbigBytes},
		{"znode", unsafe.Sizeof(znode{}), zNodeBytes},
	} {
		if c.size > c.class {
			t.Errorf("%s takes %d bytes, counted as %d", c.name, c.size, c.class)
		}
	}
}

func TestZSetCompactEntrySizes(t *testing.T) {
	// A sliding-window log entry, the request time used as member and
	// score, takes 7 bytes.
	z := NewZSet()
	lim := ZSetLimits{128, 64}
	for i := 0; i < 100; i++ {
		ts := strconv.Itoa(1732170000000 + i*37)
		z.Add([]byte(ts), float64(1732170000000+i*37), 0, lim)
	}
	if len(z.lp) != 700 {
		t.Fatalf("100 timestamp entries take %d bytes, want 700", len(z.lp))
	}
	// Redis 7.0.15 reports MEMORY USAGE 2096 for this set (listpack).
	if got := z.MemoryUsage(); got >= 2096 {
		t.Fatalf("MemoryUsage %d is not below Redis's 2096", got)
	}
}

func TestZSetNegativeZero(t *testing.T) {
	lim := ZSetLimits{128, 64}
	negZero := math.Copysign(0, -1)
	z := NewZSet()
	if r, s := z.Add([]byte("a"), negZero, ZAddIncr, lim); r != ZAddAdded || !math.Signbit(s) {
		t.Fatalf("ZADD INCR -0 replies %v %v, want -0", r, s)
	}
	if s, _ := z.Score([]byte("a")); math.Signbit(s) {
		t.Fatal("a listpack keeps -0; Redis's stores 0")
	}
	if r, _ := z.Add([]byte("a"), negZero, 0, lim); r != ZAddUnchanged {
		t.Fatalf("-0 over 0 is %v, want unchanged", r)
	}
	big := NewZSet()
	big.Add([]byte("a"), negZero, 0, ZSetLimits{0, 64})
	if s, _ := big.Score([]byte("a")); !math.Signbit(s) || big.Encoding() != "skiplist" {
		t.Fatalf("the large encoding keeps -0: got %v in %s", s, big.Encoding())
	}
	if got := string(big.AppendScanScore(nil, negZero)); got != "-0" {
		t.Fatalf("ZSCAN shows %q for -0 in a skiplist", got)
	}
}

func TestZSetScanScoreFormat(t *testing.T) {
	compact, big := NewZSet(), NewZSet()
	big.Add([]byte("x"), 1, 0, ZSetLimits{})
	for _, c := range []struct {
		score        float64
		compact, big string
	}{
		{1e17, "100000000000000000", "1e+17"},
		{123456789012345678, "123456789012345680", "1.2345678901234568e+17"},
		{1 << 62, "4611686018427387904", "4.6116860184273879e+18"},
		{1 << 63, "9.2233720368547758e+18", "9.2233720368547758e+18"},
		{1.5, "1.5", "1.5"},
		{math.Inf(-1), "-inf", "-inf"},
	} {
		if got := string(compact.AppendScanScore(nil, c.score)); got != c.compact {
			t.Errorf("listpack ZSCAN of %v: %q, want %q", c.score, got, c.compact)
		}
		if got := string(big.AppendScanScore(nil, c.score)); got != c.big {
			t.Errorf("skiplist ZSCAN of %v: %q, want %q", c.score, got, c.big)
		}
	}
}

func TestParseScoreRange(t *testing.T) {
	for _, c := range []struct {
		min, max string
		ok       bool
		want     ScoreRange
	}{
		{"1", "2", true, ScoreRange{Min: 1, Max: 2}},
		{"(1", "(2", true, ScoreRange{Min: 1, Max: 2, MinEx: true, MaxEx: true}},
		{"-inf", "+inf", true, ScoreRange{Min: math.Inf(-1), Max: math.Inf(1)}},
		{"", "(", true, ScoreRange{MaxEx: true}},
		{" 2", "\t3", true, ScoreRange{Min: 2, Max: 3}},
		{"0x10", "1e400", true, ScoreRange{Min: 16, Max: math.Inf(1)}},
		{"1e-400", "0x1p1", true, ScoreRange{Min: 0, Max: 2}},
		{"5\x00junk", "6", true, ScoreRange{Min: 5, Max: 6}},
		{"2 ", "3", false, ScoreRange{}},
		{" ", "3", false, ScoreRange{}},
		{"-", "3", false, ScoreRange{}},
		{"nan", "3", false, ScoreRange{}},
		{"1", "(nan", false, ScoreRange{}},
		{"1_0", "3", false, ScoreRange{}},
		{"a", "3", false, ScoreRange{}},
	} {
		got, ok := ParseScoreRange([]byte(c.min), []byte(c.max))
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("ParseScoreRange(%q, %q) = %+v %v", c.min, c.max, got, ok)
		}
	}
}

func TestZSetScanFullIteration(t *testing.T) {
	// Members present from the start to the end of an iteration are all
	// returned, even while the set grows and shrinks in between.
	rng := rand.New(rand.NewPCG(3, 3))
	lim := ZSetLimits{128, 64}
	z := NewZSet()
	for i := 0; i < 5000; i++ {
		z.Add([]byte("stay"+strconv.Itoa(i)), float64(i), 0, lim)
	}
	seen := map[string]bool{}
	var cursor uint64
	churn := 0
	for {
		cursor = z.Scan(cursor, 1+rng.IntN(50), nil, func(m []byte, _ float64) {
			seen[string(m)] = true
		})
		if cursor == 0 {
			break
		}
		// Grow far enough to resize the index, then shrink back.
		for k := 0; k < 400; k++ {
			z.Add([]byte("tmp"+strconv.Itoa(churn)), float64(churn), 0, lim)
			churn++
		}
		if churn%4000 == 0 {
			for k := churn - 4000; k < churn; k++ {
				z.Remove([]byte("tmp" + strconv.Itoa(k)))
			}
		}
	}
	for i := 0; i < 5000; i++ {
		if !seen["stay"+strconv.Itoa(i)] {
			t.Fatalf("stay%d never returned", i)
		}
	}
	// A compact set comes back whole with cursor 0.
	small := NewZSet()
	small.Add([]byte("a"), 1, 0, lim)
	small.Add([]byte("b"), 2, 0, lim)
	n := 0
	if c := small.Scan(99, 1, nil, func([]byte, float64) { n++ }); c != 0 || n != 2 {
		t.Fatalf("compact scan: cursor %d, %d members", c, n)
	}
}

func TestZSetFromAll(t *testing.T) {
	lim := ZSetLimits{128, 64}
	for _, n := range []int{5, 128, 129, 5000} {
		z := NewZSet()
		for i := 0; i < n; i++ {
			z.Add([]byte("m"+strconv.Itoa(i)), float64(i%17), 0, lim)
		}
		back, err := ZSetFrom(lim, z.Encoding() == "skiplist", z.All())
		if err != nil {
			t.Fatal(err)
		}
		if !sameEnts(collect(back, 0, back.Len(), false), collect(z, 0, z.Len(), false)) || back.Encoding() != z.Encoding() {
			t.Fatalf("%d members: rebuilt set differs (%s vs %s)", n, back.Encoding(), z.Encoding())
		}
		checkZSet(t, back)
	}
	bad := func(yield func([]byte, float64) bool) { yield([]byte("x"), math.NaN()) }
	if _, err := ZSetFrom(lim, false, bad); err != ErrNotFloat {
		t.Fatalf("NaN score: err %v", err)
	}
}

func TestZSetSparseCompaction(t *testing.T) {
	lim := ZSetLimits{128, 64}
	z := NewZSet()
	for i := 0; i < 20000; i++ {
		z.Add([]byte("m"+strconv.Itoa(i)), float64(i), 0, lim)
	}
	before := z.MemoryUsage()
	z.RemoveRange(0, 19000)
	checkZSet(t, z)
	if after := z.MemoryUsage(); after*4 > before {
		t.Fatalf("memory went from %d to %d after removing 95%% of the members", before, after)
	}
	if r, _ := z.Rank([]byte("m19500")); r != 500 {
		t.Fatalf("rank after compaction: %d", r)
	}
}

// TestZSetBytesPerKey loads many 100-member sliding-window logs into a
// shard and reports the heap they take per key, for comparison with
// Redis's used_memory growth for the same data.
func TestZSetBytesPerKey(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 20000 keys")
	}
	const keys = 20000
	lim := ZSetLimits{128, 64}
	e := New(Config{})
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	var key []byte
	var mem [16]byte
	base := int64(1732170000000)
	for k := 0; k < keys; k++ {
		key = append(key[:0], "rl:user:"...)
		key = strconv.AppendInt(key, int64(k), 10)
		z := NewZSet()
		for i := 0; i < 100; i++ {
			ts := base + int64(k) + int64(i)*600
			z.Add(strconv.AppendInt(mem[:0], ts, 10), float64(ts), 0, lim)
		}
		s := e.ShardFor(key)
		s.SetObject(0, key, KindZSet, z, base+61000)
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	perKey := float64(m1.HeapAlloc-m0.HeapAlloc) / keys
	t.Logf("%d keys of 100 timestamps: %.0f heap bytes per key", keys, perKey)
	runtime.KeepAlive(e)
	// Redis 7.0.15 grows used_memory by about 2,200 bytes per such key.
	if perKey > 1500 {
		t.Fatalf("%.0f bytes per key", perKey)
	}
}

// bigZSet builds a set of n members "m<i>" with score i*10, once per size.
var bigZSets = map[int]*ZSet{}

func bigZSet(b *testing.B, n int) *ZSet {
	if z, ok := bigZSets[n]; ok {
		return z
	}
	z := NewZSet()
	lim := ZSetLimits{128, 64}
	var m []byte
	for i := 0; i < n; i++ {
		m = strconv.AppendInt(append(m[:0], 'm'), int64(i), 10)
		z.Add(m, float64(i*10), 0, lim)
	}
	bigZSets[n] = z
	return z
}

// BenchmarkZSet1M measures the large encoding at a million members.
func BenchmarkZSet1M(b *testing.B) {
	const n = 1_000_000
	lim := ZSetLimits{128, 64}
	member := func(buf []byte, i int) []byte { return strconv.AppendInt(append(buf[:0], 'm'), int64(i), 10) }
	b.Run("ZADD-new", func(b *testing.B) {
		z := bigZSet(b, n)
		var m []byte
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			m = member(m, n+i)
			z.Add(m, float64(i%n*10+5), 0, lim)
		}
		b.StopTimer()
		for i := 0; i < b.N; i++ {
			z.Remove(member(m, n+i))
		}
	})
	b.Run("ZADD-update", func(b *testing.B) {
		z := bigZSet(b, n)
		rng := rand.New(rand.NewPCG(1, 1))
		var m []byte
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			k := rng.IntN(n)
			m = member(m, k)
			z.Add(m, float64(k*10+1+i%2), 0, lim)
		}
	})
	b.Run("ZSCORE", func(b *testing.B) {
		z := bigZSet(b, n)
		rng := rand.New(rand.NewPCG(2, 2))
		var m []byte
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			m = member(m, rng.IntN(n))
			z.Score(m)
		}
	})
	b.Run("ZRANK", func(b *testing.B) {
		z := bigZSet(b, n)
		rng := rand.New(rand.NewPCG(3, 3))
		var m []byte
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			m = member(m, rng.IntN(n))
			if _, ok := z.Rank(m); !ok {
				b.Fatal("missing")
			}
		}
	})
	b.Run("ZRANGE-10", func(b *testing.B) {
		z := bigZSet(b, n)
		rng := rand.New(rand.NewPCG(4, 4))
		buf := make([]byte, 0, 64)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			lo, hi := z.RankWindow(int64(rng.IntN(n)), -1)
			z.Range(lo, min(hi, lo+10), false, buf, func([]byte, float64) bool { return true })
		}
	})
	b.Run("ZRANGEBYSCORE-10", func(b *testing.B) {
		z := bigZSet(b, n)
		rng := rand.New(rand.NewPCG(5, 5))
		buf := make([]byte, 0, 64)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			r := ScoreRange{Min: float64(rng.IntN(n) * 10), Max: math.Inf(1)}
			lo, hi := z.ScoreWindow(r, false, 0, 10)
			z.Range(lo, hi, false, buf, func([]byte, float64) bool { return true })
		}
	})
	b.Run("ZREM", func(b *testing.B) {
		// Remove b.N extra members, in random order, from a set that
		// stays above a million throughout.
		z := bigZSet(b, n)
		var m []byte
		for i := 0; i < b.N; i++ {
			z.Add(member(m, n+i), float64((i*7919)%n*10+5), 0, lim)
		}
		order := rand.New(rand.NewPCG(6, 6)).Perm(b.N)
		b.ReportAllocs()
		b.ResetTimer()
		for _, i := range order {
			m = member(m, n+i)
			if !z.Remove(m) {
				b.Fatal("missing")
			}
		}
	})
	b.Run("ZREMRANGEBYRANK-10", func(b *testing.B) {
		// Remove ten members from the middle; rounds remove consecutive
		// members, which go back untimed every thousand rounds so that
		// the set stays at a million.
		z := bigZSet(b, n)
		var m []byte
		lo := n/2 - 5
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if i%1000 == 999 || i == b.N-1 {
				b.StopTimer()
				for k := lo; k < lo+10*(i%1000+1); k++ {
					z.Add(member(m, k), float64(k*10), 0, lim)
				}
				b.StartTimer()
			}
			z.RemoveRange(lo, lo+10)
		}
	})
}

// BenchmarkZSetSlidingWindow runs one step of a ZSET sliding-window limiter
// (SMS per hour, replies per minute) on a window log of 100 requests: drop
// entries older than the window, count, log the new request with its time
// as member and score.
func BenchmarkZSetSlidingWindow(b *testing.B) {
	for _, size := range []int{100, 1000} {
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			lim := ZSetLimits{128, 64}
			z := NewZSet()
			const window = 60000
			step := int64(window / size)
			now := int64(1732170000000)
			var m []byte
			for i := 0; i < size; i++ {
				now += step
				z.Add(strconv.AppendInt(m[:0], now, 10), float64(now), 0, lim)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				now += step
				lo, hi := z.ScoreSpan(ScoreRange{Min: 0, Max: float64(now - window)})
				z.RemoveRange(lo, hi)
				if z.Len() > size {
					b.Fatal("window grew")
				}
				m = strconv.AppendInt(m[:0], now, 10)
				z.Add(m, float64(now), 0, lim)
			}
		})
	}
}
