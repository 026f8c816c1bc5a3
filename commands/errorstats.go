package commands

import (
	"bytes"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// errorStats counts error replies by their code, for INFO errorstats and
// total_error_replies, as Redis's afterErrorReply does: the code is the
// first word of the reply, found within its first 32 bytes, else ERR.
//
// Scripts can reply with errors of any code (redis.error_reply), so the
// codes are capped as Redis 7.4 caps them (7.0.15 has no cap): once
// maxErrorCodes distinct codes are counted, a new one replaces the table
// with the single entry ERRORSTATS_DISABLED and counting by code stops
// until CONFIG RESETSTAT. total_error_replies goes on counting.
type errorStats struct {
	total    atomic.Int64
	mu       sync.Mutex
	codes    map[string]*int64
	disabled bool
}

const (
	maxErrorCodes     = 128
	errorsDisabledKey = "ERRORSTATS_DISABLED"
)

var codeERR = []byte("ERR")

// errorCode returns the code of an error reply ("-WRONGTYPE Operation...").
func errorCode(reply []byte) []byte {
	if i := bytes.IndexByte(reply, '\r'); i >= 0 {
		reply = reply[:i]
	}
	if len(reply) == 0 || reply[0] != '-' {
		return codeERR
	}
	sp := bytes.IndexByte(reply[:min(len(reply), 32)], ' ')
	if sp < 0 {
		return codeERR
	}
	return reply[1:sp]
}

// count counts one error reply. It reports the codes counted so far when
// this one made the table overflow, so that the caller can log them.
func (e *errorStats) count(reply []byte) (overflow []string) {
	e.total.Add(1)
	code := errorCode(reply)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.disabled {
		return nil
	}
	if p := e.codes[string(code)]; p != nil {
		*p++
		return nil
	}
	if e.codes == nil {
		e.codes = map[string]*int64{}
	}
	if len(e.codes) >= maxErrorCodes {
		for c := range e.codes {
			overflow = append(overflow, c)
		}
		sort.Strings(overflow)
		one := int64(1)
		e.codes = map[string]*int64{errorsDisabledKey: &one}
		e.disabled = true
		return overflow
	}
	n := int64(1)
	e.codes[string(code)] = &n
	return nil
}

// reset forgets every count (CONFIG RESETSTAT) and counts by code again.
func (e *errorStats) reset() {
	e.total.Store(0)
	e.mu.Lock()
	e.codes = nil
	e.disabled = false
	e.mu.Unlock()
}

// ErrorCount is the number of error replies with one code.
type ErrorCount struct {
	Code  string
	Count int64
}

// snapshot returns the counts sorted by code, as INFO lists them.
func (e *errorStats) snapshot() []ErrorCount {
	e.mu.Lock()
	out := make([]ErrorCount, 0, len(e.codes))
	for c, n := range e.codes {
		out = append(out, ErrorCount{c, *n})
	}
	e.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Code < out[j].Code })
	return out
}

// countError counts an error reply the server sent, logging once when the
// codes overflow.
func (s *Server) countError(reply []byte) {
	if overflow := s.errors.count(reply); overflow != nil {
		s.Log.Warn("Errorstats stopped adding new errors because the number of different error codes reached " +
			"the limit (a script's redis.error_reply?); CONFIG RESETSTAT enables them again. Codes: " +
			strings.Join(overflow, ", "))
	}
}

// infoSafe replaces the characters INFO's format reserves, as Redis's
// getSafeInfoString does.
func infoSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '#', ':', '\n', '\r':
			return '_'
		}
		return r
	}, s)
}

func infoErrorStats(s *Server, b *strings.Builder) {
	for _, e := range s.errors.snapshot() {
		b.WriteString("errorstat_")
		b.WriteString(infoSafe(e.Code))
		b.WriteString(":count=")
		b.WriteString(strconv.FormatInt(e.Count, 10))
		b.WriteString("\r\n")
	}
}
