package main

import (
	"bytes"
	"errors"
	"fmt"
)

// The load generator reads millions of replies a second on a machine it
// shares with the server it measures, so it does not build reply values:
// it walks each reply in the read buffer, counts error replies and picks
// out the one number a rate-limit decision carries (the allow flag).

// errShort says the buffer holds only the beginning of a reply.
var errShort = errors.New("incomplete reply")

// maxNesting bounds recursion into nested arrays; no workload's reply is
// nested deeper than one level, so a deeper one means a broken stream.
const maxNesting = 16

// replyInfo is what the load generator keeps of one reply.
type replyInfo struct {
	errors   int   // error replies, at the top level or inside arrays
	firstErr int   // offset in the buffer of the first error line, -1 if none
	flag     int64 // an integer reply's value, or an array's first element if it is an integer
	hasFlag  bool
}

// skipReply parses the RESP2 reply at the start of b without allocating.
// It returns the reply's length, or errShort when b ends inside it (the
// caller reads more and parses again from the same place).
func skipReply(b []byte) (int, replyInfo, error) {
	info := replyInfo{firstErr: -1}
	end, err := skipValue(b, 0, 0, &info, true)
	if err != nil {
		return 0, replyInfo{firstErr: -1}, err
	}
	return end, info, nil
}

// skipValue skips the value at b[pos:] and returns the offset just past it.
func skipValue(b []byte, pos, depth int, info *replyInfo, top bool) (int, error) {
	if pos >= len(b) {
		return 0, errShort
	}
	kind := b[pos]
	lineEnd, err := endOfLine(b, pos)
	if err != nil {
		return 0, err
	}
	body := b[pos+1 : lineEnd-2]
	switch kind {
	case '+':
		return lineEnd, nil
	case '-':
		info.errors++
		if info.firstErr < 0 {
			info.firstErr = pos
		}
		return lineEnd, nil
	case ':':
		n, ok := parseInt(body)
		if !ok {
			return 0, fmt.Errorf("bad integer reply %q", body)
		}
		if top {
			info.flag, info.hasFlag = n, true
		}
		return lineEnd, nil
	case '$':
		n, ok := parseInt(body)
		if !ok || n < -1 {
			return 0, fmt.Errorf("bad bulk length %q", body)
		}
		if n == -1 {
			return lineEnd, nil
		}
		end := lineEnd + int(n) + 2
		if end > len(b) || end < lineEnd {
			return 0, errShort
		}
		if b[end-2] != '\r' || b[end-1] != '\n' {
			return 0, errors.New("bulk reply not terminated by CRLF")
		}
		return end, nil
	case '*':
		n, ok := parseInt(body)
		if !ok || n < -1 {
			return 0, fmt.Errorf("bad array length %q", body)
		}
		if depth >= maxNesting {
			return 0, errors.New("reply nested too deeply")
		}
		next := lineEnd
		for i := int64(0); i < n; i++ {
			if top && i == 0 && next < len(b) && b[next] == ':' {
				// The allow flag leads every RL reply: take it from here.
				end, err := endOfLine(b, next)
				if err != nil {
					return 0, err
				}
				v, ok := parseInt(b[next+1 : end-2])
				if !ok {
					return 0, fmt.Errorf("bad integer reply %q", b[next+1:end-2])
				}
				info.flag, info.hasFlag = v, true
				next = end
				continue
			}
			if next, err = skipValue(b, next, depth+1, info, false); err != nil {
				return 0, err
			}
		}
		return next, nil
	}
	return 0, fmt.Errorf("unexpected reply type %q (the generator speaks RESP2)", kind)
}

// endOfLine returns the offset just past the CRLF ending the line at b[pos:].
func endOfLine(b []byte, pos int) (int, error) {
	i := bytes.IndexByte(b[pos:], '\n')
	if i < 0 {
		return 0, errShort
	}
	end := pos + i + 1
	if i < 2 || b[end-2] != '\r' {
		return 0, errors.New("reply line not terminated by CRLF")
	}
	return end, nil
}

// parseInt parses a RESP integer: an optional '-' and decimal digits.
func parseInt(b []byte) (int64, bool) {
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg, b = true, b[1:]
	}
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if n < 0 { // 19 digits past MaxInt64
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}
