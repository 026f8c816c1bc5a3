package commands

import (
	"strconv"
	"strings"
)

// codeERR is counted for an error whose text carries no code of its own,
// which the error statistics count as ERR.
var codeERR = []byte("ERR")

// countError counts an error reply the server sent, logging once when the
// codes overflow.
func (s *Server) countError(reply []byte) {
	if overflow := s.errors.Count(reply); overflow != nil {
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
	for _, e := range s.errors.Snapshot() {
		b.WriteString("errorstat_")
		b.WriteString(infoSafe(e.Code))
		b.WriteString(":count=")
		b.WriteString(strconv.FormatInt(e.Count, 10))
		b.WriteString("\r\n")
	}
}
