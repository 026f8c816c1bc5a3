// Package rdb holds Redis's RDB value format as DUMP and RESTORE carry it:
// the payload envelope (RDB version and CRC-64 footer), the length and
// string encodings, LZF, and the value encodings of the types limitkv
// shares with Redis. It works on plain Go values ([]byte, [][]byte,
// float64) and imports nothing of ours, so that the engine's types stay
// the engine's and the commands layer does the translation.
package rdb

import (
	"encoding/binary"
	"errors"
)

// Version is the RDB format version Redis 7.0 writes (RDB_VERSION).
const Version = 10

// ErrPayload is Open's refusal. Redis replies with it prefixed by "ERR "
// ("ERR DUMP payload version or checksum are wrong"); the text starts with
// an upper-case word, so a writer that takes such a word for an error code
// must be given the prefixed form.
var ErrPayload = errors.New("DUMP payload version or checksum are wrong")

// footerLen is the envelope's size: 2 bytes of version, 8 of CRC-64.
const footerLen = 10

// Seal appends the envelope to payload (an RDB value: type byte then
// body), as Redis's createDumpPayload does: the version as 2 bytes little
// endian, then the CRC-64 of everything before the checksum, little endian.
// It appends to payload's backing array when there is room.
func Seal(payload []byte) []byte {
	return seal(payload, Version)
}

func seal(payload []byte, version uint16) []byte {
	b := binary.LittleEndian.AppendUint16(payload, version)
	return binary.LittleEndian.AppendUint64(b, CRC64(0, b))
}

// Open checks the envelope of a DUMP payload as Redis's verifyDumpPayload
// does and returns the payload without it (a subslice of b). A payload
// shorter than the footer, of a version newer than Version, or whose
// CRC-64 does not match is refused with ErrPayload.
func Open(b []byte) (payload []byte, err error) {
	if len(b) < footerLen {
		return nil, ErrPayload
	}
	footer := len(b) - footerLen
	if binary.LittleEndian.Uint16(b[footer:]) > Version {
		return nil, ErrPayload
	}
	if CRC64(0, b[:footer+2]) != binary.LittleEndian.Uint64(b[footer+2:]) {
		return nil, ErrPayload
	}
	return b[:footer], nil
}
