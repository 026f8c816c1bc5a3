package engine

import "math/bits"

// table is an open-addressing hash index from key to record, one per
// database per shard. Each slot is a uint64: the low 32 bits of the key's hash
// in the high half, the record's arena ref in the low half (0 = empty). The
// hash kept in the slot lets lookups skip foreign keys without touching their
// records and lets the table grow without reading a single record.
//
// Collisions are resolved by linear probing and deletions by backward
// shifting, so there are no tombstones. Every key sits in the run of occupied
// slots that starts at its home slot (hash & mask); SCAN relies on that.
type table struct {
	slots   []uint64
	mask    uint32
	count   int   // keys
	expires int   // keys with a TTL
	expSum  int64 // sum of their expiry times in seconds, for INFO's avg_ttl
	sweep   uint32
	bySlot  *slotIndex // its keys by hash slot, with Config.Slots (slots.go)
}

func (t *table) addExp(at int64) {
	if at != 0 {
		t.expires++
		t.expSum += at / 1000
	}
}

func (t *table) delExp(at int64) {
	if at != 0 {
		t.expires--
		t.expSum -= at / 1000
	}
}

const (
	minTableSize = 8
	maxLoadNum   = 4 // grow past 4/5 full
	maxLoadDen   = 5
)

func slotHash(s uint64) uint32 { return uint32(s >> 32) }
func slotRef(s uint64) uint32  { return uint32(s) }
func mkSlot(h uint32, ref uint32) uint64 {
	return uint64(h)<<32 | uint64(ref)
}

// probe returns the slot index after i.
func (t *table) next(i uint32) uint32 { return (i + 1) & t.mask }

// needGrow reports whether one more key would pass the load limit.
func (t *table) needGrow() bool {
	return (t.count+1)*maxLoadDen > len(t.slots)*maxLoadNum
}

// grow doubles the table (or creates it) and reinserts every slot.
func (t *table) grow() {
	n := len(t.slots) * 2
	if n < minTableSize {
		n = minTableSize
	}
	old := t.slots
	t.slots = make([]uint64, n)
	t.mask = uint32(n - 1)
	for _, s := range old {
		if slotRef(s) == 0 {
			continue
		}
		i := slotHash(s) & t.mask
		for slotRef(t.slots[i]) != 0 {
			i = t.next(i)
		}
		t.slots[i] = s
	}
}

// shrinkIfSparse halves the table while it is under 1/8 full, so that a
// database emptied by deletes or expiry gives its memory back.
func (t *table) shrinkIfSparse() {
	if len(t.slots) <= minTableSize || t.count*8 >= len(t.slots) {
		return
	}
	n := len(t.slots)
	for n > minTableSize && t.count*4 < n {
		n /= 2
	}
	old := t.slots
	t.slots = make([]uint64, n)
	t.mask = uint32(n - 1)
	for _, s := range old {
		if slotRef(s) == 0 {
			continue
		}
		i := slotHash(s) & t.mask
		for slotRef(t.slots[i]) != 0 {
			i = t.next(i)
		}
		t.slots[i] = s
	}
	t.sweep = 0
}

// removeAt empties slot i and shifts later members of the run back so that
// every key stays reachable from its home slot.
func (t *table) removeAt(i uint32) {
	j := i
	for {
		j = t.next(j)
		s := t.slots[j]
		if slotRef(s) == 0 {
			break
		}
		home := slotHash(s) & t.mask
		// Move s into the hole at i unless its home lies cyclically in (i, j].
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			t.slots[i] = s
			i = j
		}
	}
	t.slots[i] = 0
}

// scanBucket appends the refs of every key whose home slot is v & mask.
func (t *table) scanBucket(v uint32, out []uint32) []uint32 {
	if len(t.slots) == 0 {
		return out
	}
	home := v & t.mask
	for i := home; ; i = t.next(i) {
		s := t.slots[i]
		if slotRef(s) == 0 {
			return out
		}
		if slotHash(s)&t.mask == home {
			out = append(out, slotRef(s))
		}
	}
}

// nextCursor advances a reverse-binary cursor, as Redis's dictScan does, so
// that a scan started before the table grew or shrank still visits every
// home bucket exactly once or, after a resize, at worst twice.
func (t *table) nextCursor(v uint32) uint32 {
	v |= ^t.mask
	v = bits.Reverse32(v)
	v++
	return bits.Reverse32(v)
}
