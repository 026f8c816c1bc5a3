package engine

import "testing"

func TestCRC16Check(t *testing.T) {
	// The XMODEM check value of the standard's test string.
	if got := crc16([]byte("123456789")); got != 0x31C3 {
		t.Fatalf("crc16(123456789) = %#x, want 0x31c3", got)
	}
}
