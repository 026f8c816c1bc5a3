package rdb

// crc64Table is Redis's CRC-64 (src/crc64.c): the Jones polynomial
// 0xad93d23594c935a9, reflected (0x95ac9329ac4bc9b5 bit-reversed), initial
// value 0 and no final xor. hash/crc64 cannot give it: its Update inverts
// the value on entry and exit.
var crc64Table = func() (t [256]uint64) {
	const poly = 0x95ac9329ac4bc9b5
	for i := range t {
		crc := uint64(i)
		for j := 0; j < 8; j++ {
			if crc&1 == 1 {
				crc = crc>>1 ^ poly
			} else {
				crc >>= 1
			}
		}
		t[i] = crc
	}
	return t
}()

// CRC64 continues crc over p as Redis's crc64(crc, p, len) does; start
// with 0.
func CRC64(crc uint64, p []byte) uint64 {
	for _, b := range p {
		crc = crc64Table[byte(crc)^b] ^ crc>>8
	}
	return crc
}
