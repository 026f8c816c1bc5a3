package rdb

import "encoding/binary"

// Ziplists (src/ziplist.c), the compact form before Redis 7.0's listpacks.
// 7.0 still loads them from older payloads, converting; so does Decode.
// Header: total bytes, offset of the last entry (both 32 bits), count (16
// bits, 65535: count them); entries; 0xFF. An entry is the previous
// entry's length (1 byte, or 0xFE and 4 bytes), an encoding, the data.

const zlHeader = 10

// readZiplist checks zl and calls fn for each element.
func readZiplist(zl []byte, fn func(lpElement) bool) bool {
	if len(zl) < zlHeader+1 || int(binary.LittleEndian.Uint32(zl)) != len(zl) || zl[len(zl)-1] != 0xFF {
		return false
	}
	tail := int(binary.LittleEndian.Uint32(zl[4:]))
	numel := int(binary.LittleEndian.Uint16(zl[8:]))
	end := len(zl) - 1
	p, n, prev, last := zlHeader, 0, 0, zlHeader
	for p < end {
		start := p
		var plen int
		if zl[p] < 254 {
			plen = int(zl[p])
			p++
		} else if zl[p] == 254 {
			if p+5 > end {
				return false
			}
			plen = int(binary.LittleEndian.Uint32(zl[p+1:]))
			p += 5
		} else {
			return false
		}
		if plen != prev {
			return false
		}
		if p >= end {
			return false
		}
		b := zl[p]
		var e lpElement
		switch {
		case b>>6 == 0:
			if p+1+int(b&0x3f) > end {
				return false
			}
			e.s = zl[p+1 : p+1+int(b&0x3f)]
			p += 1 + int(b&0x3f)
		case b>>6 == 1:
			if p+2 > end {
				return false
			}
			l := int(b&0x3f)<<8 | int(zl[p+1])
			if p+2+l > end {
				return false
			}
			e.s = zl[p+2 : p+2+l]
			p += 2 + l
		case b>>6 == 2:
			if p+5 > end {
				return false
			}
			l := binary.BigEndian.Uint32(zl[p+1:])
			if uint64(l) > uint64(end-p-5) {
				return false
			}
			e.s = zl[p+5 : p+5+int(l)]
			p += 5 + int(l)
		default:
			var w int
			switch b {
			case 0xC0:
				w = 2
			case 0xD0:
				w = 4
			case 0xE0:
				w = 8
			case 0xF0:
				w = 3
			case 0xFE:
				w = 1
			default:
				if b >= 0xF1 && b <= 0xFD {
					e = lpElement{v: int64(b&0x0f) - 1, isInt: true}
					p++
					break
				}
				return false
			}
			if w > 0 {
				if p+1+w > end {
					return false
				}
				var u uint64
				for i := w - 1; i >= 0; i-- {
					u = u<<8 | uint64(zl[p+1+i])
				}
				shift := uint(64 - 8*w)
				e = lpElement{v: int64(u<<shift) >> shift, isInt: true}
				p += 1 + w
			}
		}
		prev = p - start
		last = start
		n++
		if !fn(e) {
			return true
		}
	}
	if n > 0 && tail != last || n == 0 && tail != zlHeader {
		return false
	}
	return p == end && (numel == 0xFFFF || numel == n)
}
