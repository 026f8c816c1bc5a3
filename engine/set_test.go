package engine

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// setModel checks a Set against a map after every operation.
type setModel struct {
	t     *testing.T
	s     *Set
	m     map[string]bool
	lim   SetLimits
	wasHT bool // the set has been a hashtable: it never goes back
}

func newSetModel(t *testing.T, lim SetLimits) *setModel {
	return &setModel{t: t, s: NewSet(), m: map[string]bool{}, lim: lim}
}

func (sm *setModel) check() {
	t := sm.t
	t.Helper()
	if sm.s.Len() != len(sm.m) {
		t.Fatalf("Len %d, want %d", sm.s.Len(), len(sm.m))
	}
	var got []string
	for m := range sm.s.All() {
		got = append(got, string(m))
	}
	if len(got) != len(sm.m) {
		t.Fatalf("All gave %d members, want %d", len(got), len(sm.m))
	}
	for _, g := range got {
		if !sm.m[g] {
			t.Fatalf("All gave %q, not a member", g)
		}
	}
	allInts := true
	for k := range sm.m {
		if _, ok := ParseInt([]byte(k)); !ok {
			allInts = false
		}
	}
	wantIntset := !sm.wasHT && allInts && len(sm.m) <= sm.lim.IntsetEntries
	if sm.s.IsIntset() != wantIntset {
		t.Fatalf("encoding %s with %d members (all integers: %v, was a hashtable: %v)", sm.s.Encoding(), len(sm.m), allInts, sm.wasHT)
	}
	if sm.s.IsIntset() {
		if !slices.IsSortedFunc(got, func(a, b string) int {
			x, _ := strconv.ParseInt(a, 10, 64)
			y, _ := strconv.ParseInt(b, 10, 64)
			return int(max(-1, min(1, x-y)))
		}) {
			t.Fatalf("intset not in order: %q", got)
		}
	}
	sm.wasHT = !sm.s.IsIntset()
}

func (sm *setModel) add(m string) {
	got := sm.s.Add([]byte(m), sm.lim)
	if got == sm.m[m] {
		sm.t.Fatalf("Add(%q) = %v with the member there: %v", m, got, sm.m[m])
	}
	sm.m[m] = true
}

func (sm *setModel) remove(m string) {
	got := sm.s.Remove([]byte(m))
	if got != sm.m[m] {
		sm.t.Fatalf("Remove(%q) = %v", m, got)
	}
	delete(sm.m, m)
}

func randomMember(r *rand.Rand, strings bool) string {
	switch {
	case strings && r.IntN(4) == 0:
		return "m" + strconv.Itoa(r.IntN(400))
	case r.IntN(10) == 0:
		return strconv.FormatInt(int64(r.Uint64()), 10) // any width
	case r.IntN(10) == 0:
		return strconv.Itoa(r.IntN(1 << 20))
	}
	return strconv.Itoa(r.IntN(600) - 300)
}

func TestSetAgainstModel(t *testing.T) {
	for seed := uint64(0); seed < 30; seed++ {
		r := rand.New(rand.NewPCG(seed, 1))
		lim := SetLimits{IntsetEntries: []int{0, 1, 16, 512}[seed%4]}
		sm := newSetModel(t, lim)
		strs := seed%3 == 0
		for i := 0; i < 3000; i++ {
			m := randomMember(r, strs)
			switch r.IntN(10) {
			case 0, 1, 2:
				if sm.s.Has([]byte(m)) != sm.m[m] {
					t.Fatalf("seed %d: Has(%q) wrong", seed, m)
				}
			case 3, 4:
				sm.remove(m)
			case 5:
				if sm.s.Len() > 0 {
					p := sm.s.Pop(nil)
					if !sm.m[string(p)] {
						t.Fatalf("seed %d: Pop gave %q, not a member", seed, p)
					}
					delete(sm.m, string(p))
				}
			default:
				if sm.m[m] {
					continue // the model's Add check wants a new member
				}
				sm.add(m)
			}
			sm.check()
			if sm.s.Len() == 0 {
				// An empty set is no key: the next one starts afresh.
				sm = newSetModel(t, lim)
			}
		}
	}
}

func TestSetEncodingLikeRedis(t *testing.T) {
	lim := SetLimits{IntsetEntries: 3}
	s := NewSet()
	for _, m := range []string{"1", "2", "3"} {
		s.Add([]byte(m), lim)
	}
	if s.Encoding() != "intset" {
		t.Fatalf("3 integers: %s", s.Encoding())
	}
	s.Add([]byte("4"), lim)
	if s.Encoding() != "hashtable" {
		t.Fatalf("4 integers past a limit of 3: %s", s.Encoding())
	}
	s.Remove([]byte("4"))
	if s.Encoding() != "hashtable" {
		t.Fatalf("a hashtable went back: %s", s.Encoding())
	}
	// Not string2ll's form: no intset.
	for _, m := range []string{"01", "+1", "-0", " 1", "1.0", "18446744073709551616", ""} {
		s := NewSet()
		s.Add([]byte(m), DefaultLimits.Set)
		if s.Encoding() != "hashtable" {
			t.Errorf("%q: %s", m, s.Encoding())
		}
	}
	// A limit of 0: the first integer converts the set, as in Redis.
	s = NewSet()
	s.Add([]byte("1"), SetLimits{})
	if s.Encoding() != "hashtable" {
		t.Fatalf("limit 0: %s", s.Encoding())
	}
}

func fillSet(lim SetLimits, n int, f func(i int) string) *Set {
	s := NewSet()
	for i := 0; i < n; i++ {
		s.Add([]byte(f(i)), lim)
	}
	return s
}

// The random commands' properties, on every form: distinct members when
// they must be, every one a member, the right count, and each member
// drawn some time.
func TestSetRandomProperties(t *testing.T) {
	forms := map[string]*Set{
		"intset":  fillSet(DefaultLimits.Set, 200, strconv.Itoa),
		"compact": fillSet(DefaultLimits.Set, 100, func(i int) string { return "m" + strconv.Itoa(i) }),
		"indexed": fillSet(DefaultLimits.Set, 1000, func(i int) string { return "m" + strconv.Itoa(i) }),
	}
	for name, s := range forms {
		n := s.Len()
		members := map[string]bool{}
		for m := range s.All() {
			members[string(m)] = true
		}
		for _, count := range []int{1, 2, n / 10, n / 3, n/3 + 1, n / 2, n - 1} {
			seen := map[string]bool{}
			s.Sample(count, func(m []byte) {
				if !members[string(m)] || seen[string(m)] {
					t.Fatalf("%s: Sample(%d) gave %q (member %v, repeated %v)", name, count, m, members[string(m)], seen[string(m)])
				}
				seen[string(m)] = true
			})
			if len(seen) != count {
				t.Fatalf("%s: Sample(%d) gave %d", name, count, len(seen))
			}
		}
		hits := map[string]int{}
		for i := 0; i < 50*n; i++ {
			hits[string(s.Random(nil))]++
		}
		if len(hits) != n {
			t.Errorf("%s: %d draws reached %d of %d members", name, 50*n, len(hits), n)
		}
		for m, h := range hits {
			if !members[m] || h < 10 || h > 150 {
				t.Errorf("%s: %q drawn %d times in %d (about 50 expected)", name, m, h, 50*n)
			}
		}
	}
	// PopN removes exactly count distinct members, for every share of the
	// set (both of choosePositions' ways).
	for _, form := range []string{"intset", "compact", "indexed"} {
		for _, count := range []int{1, 7, 50, 99} {
			var s *Set
			switch form {
			case "intset":
				s = fillSet(DefaultLimits.Set, 100, strconv.Itoa)
			case "compact":
				s = fillSet(DefaultLimits.Set, 100, func(i int) string { return "m" + strconv.Itoa(i) })
			default:
				s = fillSet(DefaultLimits.Set, 100, func(i int) string { return "m" + strconv.Itoa(i) })
				s.index()
			}
			popped := map[string]bool{}
			s.PopN(count, func(m []byte) {
				if popped[string(m)] {
					t.Fatalf("%s: PopN(%d) gave %q twice", form, count, m)
				}
				popped[string(m)] = true
			})
			if len(popped) != count || s.Len() != 100-count {
				t.Fatalf("%s: PopN(%d): %d popped, %d left", form, count, len(popped), s.Len())
			}
			left := 0
			for m := range s.All() {
				if popped[string(m)] {
					t.Fatalf("%s: %q popped and still there", form, m)
				}
				left++
			}
			if left != 100-count {
				t.Fatalf("%s: All gives %d after PopN, Len %d", form, left, s.Len())
			}
		}
	}
}

func TestSetScanVisitsEveryMember(t *testing.T) {
	s := fillSet(DefaultLimits.Set, 5000, func(i int) string { return "k" + strconv.Itoa(i) })
	seen := map[string]bool{}
	cursor := uint64(0)
	for calls := 0; ; calls++ {
		if calls > 10000 {
			t.Fatal("scan does not end")
		}
		cursor = s.Scan(cursor, 10, func(m []byte) { seen[string(m)] = true })
		if cursor == 0 {
			break
		}
	}
	if len(seen) != 5000 {
		t.Fatalf("scan saw %d of 5000", len(seen))
	}
}

func TestSetCodecRoundTrip(t *testing.T) {
	eng := New(Config{Databases: 1, Clock: NewManualClock(1000)})
	sets := map[string]*Set{
		"ints":    fillSet(DefaultLimits.Set, 300, func(i int) string { return strconv.Itoa(i * 99991) }),
		"compact": fillSet(DefaultLimits.Set, 20, func(i int) string { return "\x00m" + strconv.Itoa(i) }),
		"indexed": fillSet(DefaultLimits.Set, 3000, func(i int) string { return "m" + strconv.Itoa(i) }),
	}
	// A hashtable of integers only stays one.
	ht := fillSet(DefaultLimits.Set, 10, strconv.Itoa)
	ht.Add([]byte("x"), DefaultLimits.Set)
	ht.Remove([]byte("x"))
	sets["htints"] = ht
	for name, st := range sets {
		key := []byte(name)
		sh := eng.ShardFor(key)
		sh.Lock()
		e := sh.SetObject(0, key, KindSet, st, 5000)
		v, err := AppendValue(nil, sh, e)
		if err != nil {
			t.Fatal(err)
		}
		if err := sh.StoreValue(0, []byte("copy"), v, DefaultLimits); err != nil {
			t.Fatal(err)
		}
		e2, _ := sh.Raw(0, []byte("copy"))
		got := sh.Object(e2).(*Set)
		if e2.ExpireAt() != 5000 || got.Encoding() != st.Encoding() || got.Len() != st.Len() {
			t.Fatalf("%s: expiry %d, %s with %d, want %s with %d", name, e2.ExpireAt(), got.Encoding(), got.Len(), st.Encoding(), st.Len())
		}
		for m := range st.All() {
			if !got.Has(m) {
				t.Fatalf("%s: %q lost", name, m)
			}
		}
		v2, _ := AppendValue(nil, sh, e2)
		if string(v) != string(v2) {
			t.Fatalf("%s: encoding changed in a round trip", name)
		}
		// Damaged values are refused and change nothing.
		for cut := 1; cut < len(v) && cut < 40; cut++ {
			if err := sh.StoreValue(0, []byte("copy"), v[:len(v)-cut], DefaultLimits); err == nil {
				t.Fatalf("%s: a value cut by %d bytes was accepted", name, cut)
			}
		}
		sh.Unlock()
	}
}
