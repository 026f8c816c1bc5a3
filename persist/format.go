// Package persist keeps limitkv's keyspace on disk as incremental
// snapshots in a Pebble database. The in-memory engine is the source of
// truth; every snapshot interval the keys written, deleted or expired since
// the last snapshot are written in one synced batch, so a crash at any
// instant leaves the previous complete snapshot and loses at most one
// interval. It knows the engine, not the wire.
package persist

import (
	"encoding/binary"
	"errors"
)

// On-disk layout. Every Pebble key starts with a tag byte:
//
//	0x00 "meta"                  format marker: magic, format version
//	0x01 db (2 bytes, BE) key    one key of the keyspace
//
// A key's value is the engine's value codec (engine/codec.go): a type
// byte, the absolute expiry, the body. formatVersion covers both: 2 added
// sets ('S'); 3 added bans (lists of type 'L', rate-limit states whose kind
// byte has the banned flag of ratelimit/ban.go set), so that an older
// binary refuses a snapshot it would misread. An older database is read as
// it is and marked current when opened for writing.
const (
	magic         = "limitkv-snapshot"
	formatVersion = 3

	tagMeta byte = 0x00
	tagKey  byte = 0x01
)

var metaKey = []byte{tagMeta, 'm', 'e', 't', 'a'}

// replKey holds the replication position a snapshot stands for: the
// replication id (40 characters) and the offset as a uvarint. Written with
// every snapshot; a binary that does not know it ignores it.
var replKey = []byte{tagMeta, 'r', 'e', 'p', 'l'}

// funcKey holds the function libraries (Options.Functions), as the
// commands layer encodes them. A binary that does not know it ignores it.
var funcKey = []byte{tagMeta, 'f', 'u', 'n', 'c'}

// policyKey holds the named rate-limit policies (Options.Policies), as the
// commands layer encodes them. A binary that does not know it ignores it.
var policyKey = []byte{tagMeta, 'p', 'o', 'l', 'i', 'c', 'y'}

func replValue(id string, off int64) []byte {
	return binary.AppendUvarint([]byte(id), uint64(off))
}

func parseRepl(v []byte) (string, int64, bool) {
	if len(v) < 41 {
		return "", 0, false
	}
	off, n := binary.Uvarint(v[40:])
	if n <= 0 {
		return "", 0, false
	}
	return string(v[:40]), int64(off), true
}

func metaValue() []byte {
	b := append([]byte(magic), 0)
	return binary.AppendUvarint(b, formatVersion)
}

// parseMeta returns the format version recorded in a meta value.
func parseMeta(v []byte) (int, error) {
	if len(v) < len(magic)+2 || string(v[:len(magic)]) != magic || v[len(magic)] != 0 {
		return 0, errors.New("meta record is not limitkv's")
	}
	n, w := binary.Uvarint(v[len(magic)+1:])
	if w <= 0 {
		return 0, errors.New("meta record is damaged")
	}
	return int(n), nil
}

// dataKey is the Pebble key of key in database db.
func dataKey(dst []byte, db int, key []byte) []byte {
	dst = append(dst, tagKey, byte(db>>8), byte(db))
	return append(dst, key...)
}

// dbPrefix and dbEnd bound database db's keys, for range deletions.
func dbPrefix(db int) []byte { return []byte{tagKey, byte(db >> 8), byte(db)} }
func dbEnd(db int) []byte    { return dbPrefix(db + 1) }

func parseDataKey(k []byte) (db int, key []byte, ok bool) {
	if len(k) < 3 || k[0] != tagKey {
		return 0, nil, false
	}
	return int(k[1])<<8 | int(k[2]), k[3:], true
}

// opReader reads the writer's operations (pebble.go): length-prefixed
// fields, remembering the first error.
type opReader struct {
	b   []byte
	err error
}

func (r *opReader) bytes() []byte {
	if r.err != nil {
		return nil
	}
	n, w := binary.Uvarint(r.b)
	if w <= 0 || n > uint64(len(r.b)-w) {
		r.err = errors.New("truncated snapshot operation")
		return nil
	}
	v := r.b[w : w+int(n)]
	r.b = r.b[w+int(n):]
	return v
}

func (r *opReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	n, w := binary.Uvarint(r.b)
	if w <= 0 {
		r.err = errors.New("truncated snapshot operation")
		return 0
	}
	r.b = r.b[w:]
	return n
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}
