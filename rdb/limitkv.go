package rdb

import "encoding/binary"

// limitkv's own payloads carry the values Redis has no type for (the
// rate-limit states, and a login list with its ban) between limitkv
// servers, in Redis's envelope so that DUMP, RESTORE and MIGRATE handle
// them as any other payload. Their version and type byte are chosen so
// that redis-server refuses them cleanly and never misreads them:
//
//   - LimitkvVersion, 0x4B4C (the footer's bytes read "LK"), is far above
//     any RDB version Redis writes (10 in 7.0; it grows by one in a few
//     releases), and verifyDumpPayload refuses a version above its own
//     before it reads a byte of the value: RESTORE on redis-server answers
//     "ERR DUMP payload version or checksum are wrong" and creates nothing.
//   - TypeLimitkv, 0xC0, is neither one of Redis's value types, numbered up
//     from 0 (19 is 7.0's last), nor one of its opcodes, numbered down from
//     255 (245 in 7.0), so that a server skipping the version check would
//     still refuse the value as an unknown type.
//
// Open refuses LimitkvVersion as it refuses every version above Version;
// only OpenLimitkv accepts it, and only with TypeLimitkv.
const (
	LimitkvVersion uint16 = 0x4B4C
	TypeLimitkv    byte   = 0xC0
)

// IsLimitkv reports whether b's footer names LimitkvVersion.
func IsLimitkv(b []byte) bool {
	return len(b) >= footerLen && binary.LittleEndian.Uint16(b[len(b)-footerLen:]) == LimitkvVersion
}

// SealLimitkv appends to body (TypeLimitkv's body, without the type byte)
// the envelope of LimitkvVersion. It appends to body's backing array when
// there is room.
func SealLimitkv(body []byte) []byte {
	b := append(body, 0)
	copy(b[1:], b)
	b[0] = TypeLimitkv
	return seal(b, LimitkvVersion)
}

// OpenLimitkv checks the envelope of a payload of LimitkvVersion and its
// type byte, and returns the body after the type byte (a subslice of b).
// It fails with ErrPayload as Open does.
func OpenLimitkv(b []byte) ([]byte, error) {
	if !IsLimitkv(b) {
		return nil, ErrPayload
	}
	footer := len(b) - footerLen
	if CRC64(0, b[:footer+2]) != binary.LittleEndian.Uint64(b[footer+2:]) {
		return nil, ErrPayload
	}
	if footer == 0 || b[0] != TypeLimitkv {
		return nil, ErrBadData
	}
	return b[1:footer], nil
}
