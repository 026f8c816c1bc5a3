package observe

import (
	"bytes"
	"sort"
	"sync"
	"sync/atomic"
)

// ErrorStats counts error replies by their code, for INFO errorstats and
// total_error_replies, as Redis's afterErrorReply does: the code is the
// first word of the reply, found within its first 32 bytes, else ERR.
//
// Scripts can reply with errors of any code (redis.error_reply), so the
// codes are capped as Redis 7.4 caps them (7.0.15 has no cap): once
// MaxErrorCodes distinct codes are counted, a new one replaces the table
// with the single entry ERRORSTATS_DISABLED and counting by code stops
// until Reset. The total goes on counting. The zero value is ready.
type ErrorStats struct {
	total    atomic.Int64
	mu       sync.Mutex
	codes    map[string]*int64
	disabled bool
}

const (
	// MaxErrorCodes is how many distinct codes ErrorStats counts.
	MaxErrorCodes     = 128
	errorsDisabledKey = "ERRORSTATS_DISABLED"
)

var codeERR = []byte("ERR")

// ErrorCode returns the code of an error reply ("-WRONGTYPE Operation...").
func ErrorCode(reply []byte) []byte {
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

// Count counts one error reply. It reports the codes counted so far when
// this one made the table overflow, so that the caller can log them.
// Counting a code already in the table allocates nothing.
func (e *ErrorStats) Count(reply []byte) (overflow []string) {
	e.total.Add(1)
	code := ErrorCode(reply)
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
	if len(e.codes) >= MaxErrorCodes {
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

// Reset forgets every count (CONFIG RESETSTAT) and counts by code again.
func (e *ErrorStats) Reset() {
	e.total.Store(0)
	e.mu.Lock()
	e.codes = nil
	e.disabled = false
	e.mu.Unlock()
}

// Total returns the number of error replies counted.
func (e *ErrorStats) Total() int64 { return e.total.Load() }

// ErrorCount is the number of error replies with one code.
type ErrorCount struct {
	Code  string
	Count int64
}

// Snapshot returns the counts sorted by code, as INFO lists them.
func (e *ErrorStats) Snapshot() []ErrorCount {
	e.mu.Lock()
	out := make([]ErrorCount, 0, len(e.codes))
	for c, n := range e.codes {
		out = append(out, ErrorCount{c, *n})
	}
	e.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Code < out[j].Code })
	return out
}
