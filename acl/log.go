package acl

import "sync"

// ACL LOG: denied commands, keys, channels and failed authentications,
// newest first; an event like one of the 10 newest (same reason, context,
// object and user, within a minute) is counted in it instead of added, so
// that a client retrying a denied command does not flush the log.

// logGroupMs is how close in time two like events must be to count as one.
const logGroupMs = 60000

// logGroupScan is how many of the newest entries a new event may join.
const logGroupScan = 10

// Context is where a denied request ran, as ACL LOG's context field
// names it.
type Context int

// The contexts a denial happens in: a client's own request, a script's
// call, a command EXEC runs.
const (
	CtxToplevel Context = iota
	CtxLua
	CtxMulti
)

// String is the context as ACL LOG writes it.
func (c Context) String() string {
	return [...]string{"toplevel", "lua", "multi"}[c]
}

// ReasonName is a denial's reason as ACL LOG writes it.
func ReasonName(r Result) string {
	return [...]string{"unknown", "command", "key", "auth", "channel"}[r]
}

// LogEntry is one entry of the ACL LOG.
type LogEntry struct {
	Count   int64
	Reason  Result
	Context Context
	// Object is the command, key or channel denied, or for auth the
	// command name as typed.
	Object string
	// Username is the user name tried for auth, else the client's user.
	Username string
	// Ctime is when the last event of the entry happened, in ms.
	Ctime int64
	// ClientInfo is the client's CLIENT INFO line at the last event.
	ClientInfo string
}

// Log is the ACL LOG, safe for concurrent use.
type Log struct {
	mu      sync.Mutex
	entries []*LogEntry // newest first
}

// Add records an event as Redis's addACLLogEntry, then keeps at most
// maxLen entries (acllog-max-len). e.Count is ignored: a new entry
// counts one event.
func (l *Log) Add(e LogEntry, maxLen int) {
	le := &e
	le.Count = 1
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, old := range l.entries[:min(len(l.entries), logGroupScan)] {
		d := old.Ctime - le.Ctime
		if old.Reason != le.Reason || old.Context != le.Context || d > logGroupMs || d < -logGroupMs ||
			old.Object != le.Object || old.Username != le.Username {
			continue
		}
		copy(l.entries[1:i+1], l.entries[:i])
		l.entries[0] = old
		old.ClientInfo, old.Ctime = le.ClientInfo, le.Ctime
		old.Count++
		return
	}
	l.entries = append(l.entries, nil)
	copy(l.entries[1:], l.entries)
	l.entries[0] = le
	for len(l.entries) > maxLen {
		l.entries[len(l.entries)-1] = nil
		l.entries = l.entries[:len(l.entries)-1]
	}
}

// Reset empties the log (ACL LOG RESET).
func (l *Log) Reset() {
	l.mu.Lock()
	l.entries = nil
	l.mu.Unlock()
}

// Newest returns copies of the count newest entries, newest first, so
// that the reply can be written without the lock.
func (l *Log) Newest(count int64) []LogEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]LogEntry, 0, min(int(count), len(l.entries)))
	for _, e := range l.entries[:min(int64(len(l.entries)), count)] {
		out = append(out, *e)
	}
	return out
}
