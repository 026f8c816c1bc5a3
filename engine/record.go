package engine

import "encoding/binary"

// A record is one key with its value, stored contiguously:
//
//	[0]     encoding (encRaw, encInt, ...)
//	[1]     block class (low 6 bits) | flagExpire | flagDirty
//	[2:5]   access stamp: LRU clock or LFU counter (see access.go)
//	[5:]    uvarint key length, key bytes
//	        int64 expiry in Unix ms, little endian, if flagExpire
//	        payload, whose layout the encoding defines
//
// Records up to maxBlock bytes live in the shard's arena. A larger one lives
// in a []byte on the Go heap, reached through a stub record of encoding
// encStub whose payload is the handle of that []byte in the object table.
//
// The access stamp is Redis's 24-bit lru field, kept in every record because
// Redis tracks it under every policy (OBJECT IDLETIME works under
// noeviction). Its three bytes cost a key 3 B on average (less where the
// record had that much slack in its block, as the fixed-window key of
// `user:<n>` does), against 4 B for a side table or 8 B for a wider slot.
const (
	recHeader      = 5 // bytes before the key length
	encStub   byte = 0
	encRaw    byte = 1 // string: uvarint length, bytes
	encInt    byte = 2 // string holding an integer: zigzag varint
	encList   byte = 3 // handle of a *List
	encHash   byte = 4 // handle of a *Hash
	encZSet   byte = 5 // handle of a *ZSet
	encSet    byte = 6 // handle of a *Set
	encLimit  byte = 7 // rate-limit state: uvarint length, bytes
	// encListBan is a list that RL.LOGIN has banned: the handle of its
	// *List, then the ban's end in Unix ms as int64 little endian. The ban
	// lives in the record, not in the list, so that LRANGE and LLEN show
	// only the login times and an unbanned list costs nothing more.
	encListBan byte = 8
	encStream  byte = 9 // handle of a *Stream
	numEncs         = 10

	classMask  byte = 0x3f
	flagExpire byte = 0x40
	flagDirty  byte = 0x80
)

// encKind maps an encoding to the type Redis clients see.
var encKind = [numEncs]Kind{
	encRaw: KindString, encInt: KindString, encList: KindList, encListBan: KindList,
	encHash: KindHash, encZSet: KindZSet, encSet: KindSet,
	encLimit: KindLimit, encStream: KindStream,
}

// encHasHandle reports whether the payload is an object handle.
func encHasHandle(enc byte) bool {
	return enc == encList || enc == encHash || enc == encZSet || enc == encSet || enc == encStub || enc == encListBan || enc == encStream
}

// recKeyBounds returns the start and end offsets of the key.
func recKeyBounds(r []byte) (int, int) {
	n, w := binary.Uvarint(r[recHeader:])
	return recHeader + w, recHeader + w + int(n)
}

func recKey(r []byte) []byte {
	a, b := recKeyBounds(r)
	return r[a:b]
}

// recExpire returns the expiry time in ms, or 0 when the key has none.
func recExpire(r []byte) int64 {
	if r[1]&flagExpire == 0 {
		return 0
	}
	_, e := recKeyBounds(r)
	return int64(binary.LittleEndian.Uint64(r[e:]))
}

// recPayload returns the payload: the bytes after the key and expiry, up to
// the end that the encoding defines (a block may have slack after it).
func recPayload(r []byte) []byte {
	_, e := recKeyBounds(r)
	if r[1]&flagExpire != 0 {
		e += 8
	}
	p := r[e:]
	switch r[0] {
	case encRaw, encLimit:
		n, w := binary.Uvarint(p)
		return p[:w+int(n)]
	case encInt:
		_, w := binary.Varint(p)
		return p[:w]
	case encListBan:
		return p[:12]
	default:
		return p[:4]
	}
}

// recHandle returns the object handle of a handle-encoded record.
func recHandle(r []byte) uint32 {
	return le32(recPayload(r))
}

// recSize is the length of a record with these parts.
func recSize(keyLen int, hasExpire bool, payloadLen int) int {
	n := recHeader + uvarintLen(uint64(keyLen)) + keyLen + payloadLen
	if hasExpire {
		n += 8
	}
	return n
}

// writeRecord lays out a record into b, which must be large enough. The
// payload is head followed by body, so callers need not join them first.
func writeRecord(b []byte, enc, class byte, stamp uint32, key []byte, expireAt int64, head, body []byte) {
	b[0] = enc
	b[1] = class
	setStamp(b, stamp)
	i := recHeader + binary.PutUvarint(b[recHeader:], uint64(len(key)))
	i += copy(b[i:], key)
	if expireAt != 0 {
		b[1] |= flagExpire
		binary.LittleEndian.PutUint64(b[i:], uint64(expireAt))
		i += 8
	}
	i += copy(b[i:], head)
	copy(b[i:], body)
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// recStamp returns the record's access stamp.
func recStamp(r []byte) uint32 { return uint32(r[2]) | uint32(r[3])<<8 | uint32(r[4])<<16 }

func setStamp(r []byte, v uint32) { r[2], r[3], r[4] = byte(v), byte(v>>8), byte(v>>16) }

// rawString decodes an encRaw payload.
func rawString(p []byte) []byte {
	n, w := binary.Uvarint(p)
	return p[w : w+int(n)]
}
