package engine

import "bytes"

// SORT's ordering, as Redis's sort.c orders: what the elements sort by is
// found by the command under its locks (the keyspace reads of BY
// patterns are its own), and only the comparison and the sorts live here,
// so that they can be tested without a server.

// SortItem is one element being sorted, with what it sorts by. It holds
// no pointers (the bytes are in arenas), so that a million of them cost
// the garbage collector nothing to scan.
type SortItem struct {
	Off, CmpOff int // the element in the elements' arena; ALPHA BY's weight in the weights'
	N, CmpN     int32
	HasCmp      bool // ALPHA with BY: the weight exists
	Score       float64
}

// SortSpec is what of SORT's options decides the order.
type SortSpec struct {
	Desc  bool // DESC
	Alpha bool // ALPHA
	By    bool // BY a pattern that weighs the elements
	Store bool // STORE: strings compare in full, past a NUL
}

// CString is b as C's string functions read it: up to its first NUL.
func CString(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

// sortKey is what an item sorts by, packed for the sort to move: its
// score, or where the string ALPHA compares lies (cut at a NUL as strcoll
// reads it, unless the result is stored), and the item's index. Numbers
// tie-break on the element, which the string then locates.
type sortKey struct {
	score float64
	off   int
	n     int32
	has   bool // ALPHA with BY: the weight exists
	idx   int32
}

// SortOrder returns the order in which Redis's sortCompare puts items:
// numbers by score, ties by the elements' bytes; ALPHA by the elements,
// or by the weights (a missing one first); strings compared as C's
// strcoll in the C locale (up to a NUL) unless the result is stored (all
// bytes). Items that compare equal (ALPHA weights) come out where Redis's
// sorts leave them: a stable merge sort, as glibc's qsort is; with BY and a
// LIMIT window start..end, Redis's partial quicksort (pqsort.c), ported as
// it is. arena holds the elements, weights ALPHA BY's weights.
func SortOrder(items []SortItem, arena, weights []byte, o SortSpec, start, end int64) []int32 {
	src := arena
	if o.Alpha && o.By {
		src = weights
	}
	keys := make([]sortKey, len(items))
	for i := range items {
		it := &items[i]
		k := &keys[i]
		k.idx, k.score = int32(i), it.Score
		k.off, k.n = it.Off, it.N
		if o.Alpha && o.By {
			k.off, k.n, k.has = it.CmpOff, it.CmpN, it.HasCmp
		}
		if o.Alpha && !o.Store {
			k.n = int32(len(CString(src[k.off : k.off+int(k.n)])))
		}
	}
	str := func(k *sortKey) []byte { return src[k.off : k.off+int(k.n)] }
	var cmp func(a, b *sortKey) int
	switch {
	case !o.Alpha:
		cmp = func(a, b *sortKey) int {
			switch {
			case a.score > b.score:
				return 1
			case a.score < b.score:
				return -1
			}
			return bytes.Compare(str(a), str(b))
		}
	case o.By:
		cmp = func(a, b *sortKey) int {
			switch {
			case !a.has && !b.has:
				return 0
			case !a.has:
				return -1
			case !b.has:
				return 1
			}
			return bytes.Compare(str(a), str(b))
		}
	default:
		cmp = func(a, b *sortKey) int { return bytes.Compare(str(a), str(b)) }
	}
	if o.Desc {
		asc := cmp
		cmp = func(a, b *sortKey) int { return -asc(a, b) }
	}
	if o.By && (start != 0 || end != int64(len(items))-1) {
		pqsort(keys, 0, len(keys), cmp, int(start), int(end))
	} else {
		mergeSort(keys, make([]sortKey, len(keys)), cmp)
	}
	order := make([]int32, len(keys))
	for i := range keys {
		order[i] = keys[i].idx
	}
	return order
}

// mergeSort sorts v stably (tmp: scratch as long as v): a top-down merge
// sort as glibc's qsort does, runs of up to 12 by insertion.
func mergeSort(v, tmp []sortKey, cmp func(a, b *sortKey) int) {
	if len(v) <= 12 {
		for i := 1; i < len(v); i++ {
			for j := i; j > 0 && cmp(&v[j-1], &v[j]) > 0; j-- {
				v[j-1], v[j] = v[j], v[j-1]
			}
		}
		return
	}
	h := len(v) / 2
	mergeSort(v[:h], tmp[:h], cmp)
	mergeSort(v[h:], tmp[h:], cmp)
	if cmp(&v[h-1], &v[h]) <= 0 {
		return // already in order
	}
	copy(tmp, v)
	a, b, k := 0, h, 0
	for a < h && b < len(v) {
		if cmp(&tmp[a], &tmp[b]) <= 0 {
			v[k] = tmp[a]
			a++
		} else {
			v[k] = tmp[b]
			b++
		}
		k++
	}
	k += copy(v[k:], tmp[a:h])
	copy(v[k:], tmp[b:])
}

// pqsort is Redis's pqsort.c (Bentley and McIlroy's quicksort, skipping
// the partitions that lie outside ranks lo..hi) on v[base:base+n], in
// indexes rather than byte pointers.
func pqsort(v []sortKey, base, n int, cmp func(a, b *sortKey) int, lo, hi int) {
	swap := func(i, j int) { v[i], v[j] = v[j], v[i] }
	vecswap := func(i, j, n int) {
		for ; n > 0; n-- {
			swap(i, j)
			i++
			j++
		}
	}
	med3 := func(a, b, c int) int {
		if cmp(&v[a], &v[b]) < 0 {
			if cmp(&v[b], &v[c]) < 0 {
				return b
			}
			if cmp(&v[a], &v[c]) < 0 {
				return c
			}
			return a
		}
		if cmp(&v[b], &v[c]) > 0 {
			return b
		}
		if cmp(&v[a], &v[c]) < 0 {
			return a
		}
		return c
	}
	outside := func(base, n int) bool {
		return lo < base && hi < base || lo >= base+n && hi >= base+n
	}
	for {
		if n < 7 {
			for pm := base + 1; pm < base+n; pm++ {
				for pl := pm; pl > base && cmp(&v[pl-1], &v[pl]) > 0; pl-- {
					swap(pl, pl-1)
				}
			}
			return
		}
		pm := base + n/2
		if n > 7 {
			pl, pn := base, base+n-1
			if n > 40 {
				d := n / 8
				pl = med3(pl, pl+d, pl+2*d)
				pm = med3(pm-d, pm, pm+d)
				pn = med3(pn-2*d, pn-d, pn)
			}
			pm = med3(pl, pm, pn)
		}
		swap(base, pm)
		pa, pb := base+1, base+1
		pc, pd := base+n-1, base+n-1
		for {
			for pb <= pc {
				r := cmp(&v[pb], &v[base])
				if r > 0 {
					break
				}
				if r == 0 {
					swap(pa, pb)
					pa++
				}
				pb++
			}
			for pb <= pc {
				r := cmp(&v[pc], &v[base])
				if r < 0 {
					break
				}
				if r == 0 {
					swap(pc, pd)
					pd--
				}
				pc--
			}
			if pb > pc {
				break
			}
			swap(pb, pc)
			pb++
			pc--
		}
		pn := base + n
		r := min(pa-base, pb-pa)
		vecswap(base, pb-r, r)
		r = min(pd-pc, pn-pd-1)
		vecswap(pb, pn-r, r)
		if r = pb - pa; r > 1 && !outside(base, r) {
			pqsort(v, base, r, cmp, lo, hi)
		}
		r = pd - pc
		if r <= 1 {
			return
		}
		base, n = pn-r, r
		if outside(base, n) {
			return
		}
	}
}
