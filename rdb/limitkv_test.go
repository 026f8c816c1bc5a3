package rdb

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// TestLimitkvEnvelope: a limitkv payload opens with OpenLimitkv only;
// Open, which also serves FUNCTION RESTORE, refuses it as a version above
// its own; any changed byte is refused.
func TestLimitkvEnvelope(t *testing.T) {
	body := []byte("r\x00\x01\x02\x03")
	p := SealLimitkv(bytes.Clone(body))
	if p[0] != TypeLimitkv || binary.LittleEndian.Uint16(p[len(p)-footerLen:]) != LimitkvVersion {
		t.Fatalf("payload %x", p)
	}
	got, err := OpenLimitkv(p)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("OpenLimitkv = %q, %v", got, err)
	}
	if _, err := Open(p); err != ErrPayload {
		t.Fatalf("Open of a limitkv payload: %v", err)
	}
	if IsLimitkv(Seal([]byte{TypeString, 1, 'a'})) {
		t.Fatal("a Redis payload taken for limitkv's")
	}
	for i := range p {
		q := bytes.Clone(p)
		q[i] ^= 0x20
		if _, err := OpenLimitkv(q); err == nil {
			t.Errorf("byte %d changed: accepted", i)
		}
	}
	for n := 0; n < len(p); n++ {
		if _, err := OpenLimitkv(p[:n]); err == nil {
			t.Errorf("prefix of %d bytes accepted", n)
		}
	}
	wrongType := seal([]byte{TypeString, 'r'}, LimitkvVersion)
	if _, err := OpenLimitkv(wrongType); err != ErrBadData {
		t.Errorf("another type byte: %v", err)
	}
}
