package observe

import (
	"strconv"
	"sync"
)

// SlowLog is SLOWLOG's log, as Redis 7.0's slowlog.c keeps it: the
// entries of commands that took at least slowlog-log-slower-than
// microseconds (the server decides which), newest first, at most
// slowlog-max-len of them, in a ring that grows up to that length. The
// zero value is empty and ready.
type SlowLog struct {
	mu     sync.Mutex
	ring   []SlowEntry
	head   int // the oldest entry
	n      int
	nextID int64
}

// SlowEntry is one command in the slow log.
type SlowEntry struct {
	ID     int64 // given by Add, counting on across resets
	Unix   int64 // when it was logged
	Micros int64 // how long it took
	Args   [][]byte
	// Addr and Name are the client's address ("?:0" for a script's, as
	// in Redis) and name.
	Addr, Name string
}

// Add logs e, with the next id, keeping at most maxLen entries.
func (l *SlowLog) Add(e SlowEntry, maxLen int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e.ID = l.nextID
	l.nextID++
	if maxLen <= 0 {
		l.trimLocked(0)
		return
	}
	if l.n == len(l.ring) {
		if len(l.ring) < maxLen {
			l.resizeLocked(min(max(2*len(l.ring), 8), maxLen))
		} else {
			l.ring[l.head] = SlowEntry{}
			l.head = (l.head + 1) % len(l.ring)
			l.n--
		}
	}
	l.ring[(l.head+l.n)%len(l.ring)] = e
	l.n++
	l.trimLocked(maxLen)
}

// resizeLocked moves the entries to a ring of size n >= l.n.
func (l *SlowLog) resizeLocked(n int) {
	ring := make([]SlowEntry, n)
	for i := 0; i < l.n; i++ {
		ring[i] = l.ring[(l.head+i)%len(l.ring)]
	}
	l.ring, l.head = ring, 0
}

// Trim drops the oldest entries beyond maxLen (a smaller slowlog-max-len).
func (l *SlowLog) Trim(maxLen int) {
	l.mu.Lock()
	l.trimLocked(maxLen)
	l.mu.Unlock()
}

func (l *SlowLog) trimLocked(maxLen int) {
	for l.n > maxLen {
		l.ring[l.head] = SlowEntry{}
		l.head = (l.head + 1) % len(l.ring)
		l.n--
	}
	if len(l.ring) > 2*max(maxLen, 8) {
		l.resizeLocked(max(l.n, 8))
	}
}

// Reset empties the log; ids go on from where they were.
func (l *SlowLog) Reset() {
	l.mu.Lock()
	l.ring, l.head, l.n = nil, 0, 0
	l.mu.Unlock()
}

// Len returns the number of entries.
func (l *SlowLog) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// Newest returns up to count entries, newest first.
func (l *SlowLog) Newest(count int) []SlowEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]SlowEntry, min(count, l.n))
	for i := range out {
		out[i] = l.ring[(l.head+l.n-1-i)%len(l.ring)]
	}
	return out
}

const (
	slowlogMaxArgs  = 32
	slowlogMaxBytes = 128
)

var redacted = []byte("(redacted)")

// SlowlogArgs copies a command's arguments for an entry, as Redis keeps
// them: 32 arguments at most (the last saying how many more there were),
// 128 bytes of each (with how many more there were), and "(redacted)" in
// place of each argument secret reports. The copy shares nothing with
// args, whose bytes a connection reuses.
func SlowlogArgs(args [][]byte, secret func(int) bool) [][]byte {
	n := min(len(args), slowlogMaxArgs)
	size := 0
	for _, a := range args[:n] {
		size += min(len(a), slowlogMaxBytes) + 24
	}
	buf := make([]byte, 0, size)
	out := make([][]byte, n)
	for j := 0; j < n; j++ {
		start := len(buf)
		switch a := args[j]; {
		case n < len(args) && j == n-1:
			buf = append(buf, "... ("...)
			buf = strconv.AppendInt(buf, int64(len(args)-n+1), 10)
			buf = append(buf, " more arguments)"...)
		case secret(j):
			buf = append(buf, redacted...)
		case len(a) > slowlogMaxBytes:
			buf = append(buf, a[:slowlogMaxBytes]...)
			buf = append(buf, "... ("...)
			buf = strconv.AppendInt(buf, int64(len(a)-slowlogMaxBytes), 10)
			buf = append(buf, " more bytes)"...)
		default:
			buf = append(buf, a...)
		}
		out[j] = buf[start:len(buf):len(buf)]
	}
	return out
}
