// Package resp is limitkv's wire layer: a typed reply writer for RESP2 and
// RESP3, a request parser that enforces Redis's protocol limits as it goes,
// and the connection server that ties them to a Handler, with Redis's
// client buffer limits. One serve loop (serve.go) serves every connection,
// driven by the connection's own goroutine or, for plain TCP on Linux, by
// an event loop (loop_linux.go). It knows nothing of commands or of the
// keyspace.
package resp

import (
	"math"
	"strconv"

	"github.com/tidwall/redcon"
)

// Writer builds replies into a buffer, in RESP2 or RESP3 as the client
// chose with HELLO. It is used for connections, and on its own to capture
// replies for EXEC, scripts and tests.
type Writer struct {
	b     []byte
	proto int
}

// NewWriter returns a Writer for protocol version proto (2 or 3).
func NewWriter(proto int) *Writer { return &Writer{proto: proto} }

// Proto returns the protocol version, 2 or 3.
func (w *Writer) Proto() int {
	if w.proto == 3 {
		return 3
	}
	return 2
}

// SetProto switches the reply encoding.
func (w *Writer) SetProto(p int) { w.proto = p }

// Bytes returns the replies written since the last Reset.
func (w *Writer) Bytes() []byte { return w.b }

// Len returns the number of bytes written since the last Reset.
func (w *Writer) Len() int { return len(w.b) }

// Reset empties the buffer, dropping it if a huge reply made it big.
func (w *Writer) Reset() {
	if cap(w.b) > 1<<20 {
		w.b = nil
	} else {
		w.b = w.b[:0]
	}
}

// Truncate drops everything written after the first n bytes.
func (w *Writer) Truncate(n int) { w.b = w.b[:n] }

// Raw appends bytes that are already RESP.
func (w *Writer) Raw(b []byte) { w.b = append(w.b, b...) }

// Simple writes a simple string (+OK).
func (w *Writer) Simple(s string) { w.b = redcon.AppendString(w.b, s) }

// OK writes +OK.
func (w *Writer) OK() { w.b = append(w.b, "+OK\r\n"...) }

// Error writes an error reply. A message whose first word is an upper-case
// code (WRONGTYPE, NOAUTH, ERR...) is sent as is; any other gets "ERR ".
// Line breaks become spaces so that no client input can break the framing.
func (w *Writer) Error(msg string) {
	w.b = append(w.b, '-')
	if !hasCode(msg) {
		w.b = append(w.b, "ERR "...)
	}
	w.appendLine(msg)
}

// appendLine appends msg and CRLF, with any line break in msg made a space.
func (w *Writer) appendLine(msg string) {
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		w.b = append(w.b, c)
	}
	w.b = append(w.b, '\r', '\n')
}

// ErrorVerbatim writes msg as the whole error reply, without a code, for
// replies that must match a module's exactly (CL.THROTTLE's "Cell error").
func (w *Writer) ErrorVerbatim(msg string) {
	w.b = append(w.b, '-')
	w.appendLine(msg)
}

func hasCode(msg string) bool {
	i := 0
	for i < len(msg) && msg[i] >= 'A' && msg[i] <= 'Z' {
		i++
	}
	return i >= 2 && (i == len(msg) || msg[i] == ' ')
}

// Int writes an integer.
func (w *Writer) Int(n int64) {
	// The digits are appended in place: a decision's reply is five
	// integers, and a helper's prefix and copy cost as much as the rest of
	// the reply.
	if uint64(n) < 10 {
		w.b = append(w.b, ':', byte('0'+n), '\r', '\n')
		return
	}
	w.b = append(w.b, ':')
	w.b = strconv.AppendInt(w.b, n, 10)
	w.b = append(w.b, '\r', '\n')
}

// Bulk writes a bulk string.
func (w *Writer) Bulk(b []byte) { w.b = redcon.AppendBulk(w.b, b) }

// BulkString writes a bulk string.
func (w *Writer) BulkString(s string) { w.b = redcon.AppendBulkString(w.b, s) }

// BulkInt writes an integer as a bulk string.
func (w *Writer) BulkInt(n int64) {
	var buf [24]byte
	w.b = redcon.AppendBulk(w.b, strconv.AppendInt(buf[:0], n, 10))
}

// Null writes a null bulk string (RESP2 $-1, RESP3 _).
func (w *Writer) Null() {
	if w.proto == 3 {
		w.b = append(w.b, "_\r\n"...)
	} else {
		w.b = append(w.b, "$-1\r\n"...)
	}
}

// NullArray writes a null array (RESP2 *-1, RESP3 _).
func (w *Writer) NullArray() {
	if w.proto == 3 {
		w.b = append(w.b, "_\r\n"...)
	} else {
		w.b = append(w.b, "*-1\r\n"...)
	}
}

// Array writes an array header; n elements must follow.
func (w *Writer) Array(n int) {
	if uint(n) < 10 {
		w.b = append(w.b, '*', byte('0'+n), '\r', '\n')
		return
	}
	w.b = redcon.AppendArray(w.b, n)
}

// Map writes a map header for n pairs (RESP2: an array of 2n elements).
func (w *Writer) Map(n int) {
	if w.proto == 3 {
		w.b = appendHeader(w.b, '%', n)
	} else {
		w.b = redcon.AppendArray(w.b, 2*n)
	}
}

// Set writes a set header (RESP2: an array).
func (w *Writer) Set(n int) {
	if w.proto == 3 {
		w.b = appendHeader(w.b, '~', n)
	} else {
		w.b = redcon.AppendArray(w.b, n)
	}
}

// Push writes a push header (RESP2: an array).
func (w *Writer) Push(n int) {
	if w.proto == 3 {
		w.b = appendHeader(w.b, '>', n)
	} else {
		w.b = redcon.AppendArray(w.b, n)
	}
}

// Attribute writes an attribute header for n pairs, which only RESP3 has:
// in RESP2 the caller writes no pairs either (Writer.Proto).
func (w *Writer) Attribute(n int) {
	if w.proto == 3 {
		w.b = appendHeader(w.b, '|', n)
	}
}

// Double writes a double as Redis 7.0 does: "%.17g", inf and -inf; a bulk
// string in RESP2, a double in RESP3.
func (w *Writer) Double(f float64) {
	var buf [40]byte
	d := AppendDouble(buf[:0], f)
	if w.proto == 3 {
		w.b = append(w.b, ',')
		w.b = append(w.b, d...)
		w.b = append(w.b, '\r', '\n')
	} else {
		w.b = redcon.AppendBulk(w.b, d)
	}
}

// DoubleText writes a double already formatted (Redis's human long double
// form, as GEOPOS replies): a bulk string in RESP2, a double in RESP3.
func (w *Writer) DoubleText(d []byte) {
	if w.proto == 3 {
		w.b = append(w.b, ',')
		w.b = append(w.b, d...)
		w.b = append(w.b, '\r', '\n')
	} else {
		w.b = redcon.AppendBulk(w.b, d)
	}
}

// AppendDouble formats f the way Redis 7.0 replies with doubles.
func AppendDouble(dst []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(dst, "inf"...)
	case math.IsInf(f, -1):
		return append(dst, "-inf"...)
	case math.IsNaN(f):
		return append(dst, "nan"...)
	}
	return strconv.AppendFloat(dst, f, 'g', 17, 64)
}

// Bool writes a boolean (RESP2: integer 1 or 0).
func (w *Writer) Bool(v bool) {
	switch {
	case w.proto == 3 && v:
		w.b = append(w.b, "#t\r\n"...)
	case w.proto == 3:
		w.b = append(w.b, "#f\r\n"...)
	case v:
		w.b = append(w.b, ":1\r\n"...)
	default:
		w.b = append(w.b, ":0\r\n"...)
	}
}

// Verbatim writes verbatim text of the given three-letter format ("txt"),
// a plain bulk string in RESP2.
func (w *Writer) Verbatim(format, s string) {
	if w.proto != 3 {
		w.BulkString(s)
		return
	}
	w.b = appendHeader(w.b, '=', len(s)+4)
	w.b = append(w.b, format...)
	w.b = append(w.b, ':')
	w.b = append(w.b, s...)
	w.b = append(w.b, '\r', '\n')
}

// BigNumber writes an arbitrary-precision integer given in decimal (RESP2:
// a bulk string).
func (w *Writer) BigNumber(s string) {
	if w.proto != 3 {
		w.BulkString(s)
		return
	}
	w.b = append(w.b, '(')
	w.b = append(w.b, s...)
	w.b = append(w.b, '\r', '\n')
}

func appendHeader(b []byte, c byte, n int) []byte {
	b = append(b, c)
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '\r', '\n')
}
