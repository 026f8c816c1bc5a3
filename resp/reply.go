package resp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Value is a parsed reply, for code that reads replies back: scripts turn
// captured replies into Lua values, and tests and tools compare them.
type Value struct {
	Type  byte // '+' '-' ':' '$' '*' '%' '~' '>' '_' ',' '#' '=' '('
	Str   []byte
	Int   int64
	Elems []Value // arrays, sets, pushes; maps as key, value, key, value...
	Null  bool    // $-1, *-1 or _
}

// ErrMalformed reports a reply that is not valid RESP.
var ErrMalformed = errors.New("malformed reply")

// maxReplyElems bounds what one header may make ReadValue allocate up front.
const maxReplyElems = 1 << 20

// ReadValue reads one reply.
func ReadValue(r *bufio.Reader) (Value, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		if err == bufio.ErrBufferFull {
			return Value{}, ErrMalformed
		}
		return Value{}, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return Value{}, ErrMalformed
	}
	t, body := line[0], string(line[1:len(line)-2])
	v := Value{Type: t}
	switch t {
	case '+', '-', ',', '(':
		v.Str = []byte(body)
	case '#':
		v.Int = 0
		if body == "t" {
			v.Int = 1
		}
	case '_':
		v.Null = true
	case ':':
		n, err := strconv.ParseInt(body, 10, 64)
		if err != nil {
			return v, ErrMalformed
		}
		v.Int = n
	case '$', '=':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 {
			return v, ErrMalformed
		}
		if n == -1 {
			v.Null = true
			return v, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return v, err
		}
		v.Str = buf[:n]
		if t == '=' && n >= 4 {
			v.Str = v.Str[4:] // drop the "txt:" format
		}
	case '*', '~', '>', '%':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 {
			return v, ErrMalformed
		}
		if n == -1 {
			v.Null = true
			return v, nil
		}
		if t == '%' {
			n *= 2
		}
		v.Elems = make([]Value, 0, min(n, maxReplyElems))
		for i := 0; i < n; i++ {
			e, err := ReadValue(r)
			if err != nil {
				return v, err
			}
			v.Elems = append(v.Elems, e)
		}
	default:
		return v, ErrMalformed
	}
	return v, nil
}

// String renders the value on one line, for transcripts and test failures:
// +OK -ERR... :5 "bulk" [a, b] {k: v} ~[set] ,1.5 #t (bignum, and nulls as
// nil ($-1), *nil (*-1) and _ (RESP3).
func (v Value) String() string {
	var b strings.Builder
	v.write(&b)
	return b.String()
}

func (v Value) write(b *strings.Builder) {
	if v.Null {
		switch v.Type {
		case '_':
			b.WriteString("_")
		case '$':
			b.WriteString("nil")
		default:
			b.WriteString(string(v.Type) + "nil")
		}
		return
	}
	switch v.Type {
	case '+', '-', ',', '(':
		b.WriteByte(v.Type)
		b.Write(v.Str)
	case ':':
		fmt.Fprintf(b, ":%d", v.Int)
	case '#':
		if v.Int != 0 {
			b.WriteString("#t")
		} else {
			b.WriteString("#f")
		}
	case '$':
		b.WriteString(strconv.Quote(string(v.Str)))
	case '=':
		b.WriteString("=" + strconv.Quote(string(v.Str)))
	case '*', '~', '>':
		if v.Type != '*' {
			b.WriteByte(v.Type)
		}
		b.WriteByte('[')
		for i, e := range v.Elems {
			if i > 0 {
				b.WriteString(", ")
			}
			e.write(b)
		}
		b.WriteByte(']')
	case '%':
		b.WriteByte('{')
		for i := 0; i+1 < len(v.Elems); i += 2 {
			if i > 0 {
				b.WriteString(", ")
			}
			v.Elems[i].write(b)
			b.WriteString(": ")
			v.Elems[i+1].write(b)
		}
		b.WriteByte('}')
	}
}

// AppendCommand encodes args as a request, for clients and tests.
func AppendCommand(b []byte, args ...[]byte) []byte { return appendCommand(b, args) }
