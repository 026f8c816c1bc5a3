package engine

// Redis Cluster's hash slots: a cluster node's engine shards its keys by
// slot (slots.go), and the cluster routes requests by it.

// crcTable is CRC-16/XMODEM's byte table (polynomial 0x1021, no
// reflection, zero initial value), the checksum Redis hashes keys with;
// it is derived here rather than listed so that the polynomial, not 256
// magic numbers, is what a reader checks.
var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

func crc16(b []byte) uint16 {
	var c uint16
	for _, x := range b {
		c = c<<8 ^ crcTable[byte(c>>8)^x]
	}
	return c
}

// KeySlot is the hash slot of key, as CLUSTER KEYSLOT answers: when the
// key holds a '{' followed later by a '}' with at least one byte between
// them, only the bytes between the first '{' and the first '}' after it
// are hashed, so that related keys can be made to share a slot.
func KeySlot(key []byte) uint16 {
	for s := 0; s < len(key); s++ {
		if key[s] != '{' {
			continue
		}
		for e := s + 1; e < len(key); e++ {
			if key[e] == '}' {
				if e > s+1 {
					return crc16(key[s+1:e]) & (ClusterSlots - 1)
				}
				break
			}
		}
		break
	}
	return crc16(key) & (ClusterSlots - 1)
}
