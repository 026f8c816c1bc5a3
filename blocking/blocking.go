// Package blocking holds the clients blocked on keys, as Redis's
// db->blocking_keys and blocked.c do: for each database and key, the
// clients waiting on it in the order they blocked; the keys that received
// a write while someone waited on them, to be served once the writing
// command is done; and the claim that settles who ends a wait (the server
// serving a write, the timeout, CLIENT UNBLOCK, the client going), so that
// exactly one party writes a blocked client's reply.
//
// The registry knows keys, their order and the kind of value each waiter
// can take, not commands: what a waiter does once served (pop, move, the
// shape of its reply) is the caller's, kept in Waiter.Req. It reaches the
// client only through Client.
package blocking

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Client is a blocked client as the registry sees it.
type Client interface {
	// SetBlocked records the waiter the client is blocked on, and nil once
	// its wait is claimed, for other goroutines to find it by the client
	// (CLIENT UNBLOCK, CLIENT LIST's flags).
	SetBlocked(w *Waiter)
}

// Waiter is one client blocked on keys, or on none (WAIT, which only
// CLIENT UNBLOCK and its own end can release).
type Waiter struct {
	Client Client
	DB     int
	// Keys are the keys it waits on, distinct, as Add set them.
	Keys []string
	// Kind is the kind of value it can take from a key, in the caller's
	// numbering: First finds only waiters of the kind the key holds.
	Kind uint8
	// Timeout ends the wait (Await); 0 waits for ever.
	Timeout time.Duration
	// Req is the caller's: what the waiter does once served.
	Req any

	done    chan struct{} // closed once its claimer has written its reply
	claimed bool          // under Registry.mu
}

// Wake tells the waiter's client that its reply is written. Only the
// party whose Claim succeeded calls it, once.
func (w *Waiter) Wake() { close(w.done) }

// Woken is closed once the waiter's claimer has written its reply.
func (w *Waiter) Woken() <-chan struct{} { return w.done }

// Registry holds the waiters by database and key. The zero value is
// ready to use.
type Registry struct {
	mu   sync.Mutex
	dbs  []map[string][]*Waiter // key -> waiters, in the order they blocked
	keys int                    // keys with a waiter
	// blocked counts the clients blocked, on keys or in WAIT.
	blocked atomic.Int64
}

// Waiting reports whether any client is blocked: the one question a write
// asks before it looks for waiters on its keys.
func (r *Registry) Waiting() bool { return r.blocked.Load() > 0 }

// Blocked returns the number of clients blocked, on keys or in WAIT.
func (r *Registry) Blocked() int64 { return r.blocked.Load() }

// Keys returns the number of keys some client waits on.
func (r *Registry) Keys() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keys
}

// Add registers w as waiting on keys, each once, behind those already
// waiting on them, and tells its client.
func (r *Registry) Add(w *Waiter, keys [][]byte) {
	for _, k := range keys {
		if !slices.Contains(w.Keys, string(k)) {
			w.Keys = append(w.Keys, string(k))
		}
	}
	w.done = make(chan struct{})
	r.mu.Lock()
	for len(r.dbs) <= w.DB {
		r.dbs = append(r.dbs, nil)
	}
	m := r.dbs[w.DB]
	if m == nil {
		m = map[string][]*Waiter{}
		r.dbs[w.DB] = m
	}
	for _, k := range w.Keys {
		q := m[k]
		if len(q) == 0 {
			r.keys++
		}
		m[k] = append(q, w)
	}
	r.mu.Unlock()
	r.blocked.Add(1)
	w.Client.SetBlocked(w)
}

// Claim takes w out of every queue, for the caller to write its reply and
// Wake it; false when another party claimed it first, which then does.
func (r *Registry) Claim(w *Waiter) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w.claimed {
		return false
	}
	w.claimed = true
	m := r.dbs[w.DB]
	for _, k := range w.Keys {
		q := m[k]
		if i := slices.Index(q, w); i >= 0 {
			copy(q[i:], q[i+1:])
			q[len(q)-1] = nil
			q = q[:len(q)-1]
		}
		if len(q) == 0 {
			delete(m, k)
			r.keys--
		} else {
			m[k] = q
		}
	}
	r.blocked.Add(-1)
	w.Client.SetBlocked(nil)
	return true
}

// First returns the first waiter on key that takes a value of kind, nil
// if none does.
func (r *Registry) First(db int, key []byte, kind uint8) *Waiter {
	r.mu.Lock()
	defer r.mu.Unlock()
	if db >= len(r.dbs) || r.dbs[db] == nil {
		return nil
	}
	for _, w := range r.dbs[db][string(key)] {
		if w.Kind == kind {
			return w
		}
	}
	return nil
}

// AppendWaiters appends to dst the waiters on key that take a value of
// kind, in the order they blocked, and returns the result. Streams serve
// every such waiter a key can satisfy in one pass (each reads without
// taking), so the caller walks a copy while it claims some of them.
func (r *Registry) AppendWaiters(dst []*Waiter, db int, key []byte, kind uint8) []*Waiter {
	r.mu.Lock()
	defer r.mu.Unlock()
	if db >= len(r.dbs) || r.dbs[db] == nil {
		return dst
	}
	for _, w := range r.dbs[db][string(key)] {
		if w.Kind == kind {
			dst = append(dst, w)
		}
	}
	return dst
}

// has reports whether a client waits on key.
func (r *Registry) has(db int, key []byte) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return db < len(r.dbs) && r.dbs[db] != nil && len(r.dbs[db][string(key)]) > 0
}

// Waiters returns every waiter blocked on a key, each once.
func (r *Registry) Waiters() []*Waiter {
	r.mu.Lock()
	defer r.mu.Unlock()
	var all []*Waiter
	for _, m := range r.dbs {
		for _, q := range m {
			for _, w := range q {
				if !slices.Contains(all, w) {
					all = append(all, w)
				}
			}
		}
	}
	return all
}

// ReadyKey is a key that received a write while clients waited on it.
type ReadyKey struct {
	DB  int
	Key string
}

// NoteReady appends key to ready, the keys one command (or transaction,
// or script) made ready, if a client waits on it and it is not there
// yet, and returns the result.
func (r *Registry) NoteReady(ready []ReadyKey, db int, key []byte) []ReadyKey {
	if !r.has(db, key) {
		return ready
	}
	for _, rk := range ready {
		if rk.DB == db && rk.Key == string(key) {
			return ready
		}
	}
	return append(ready, ReadyKey{db, string(key)})
}

// NoteAllReady notes every key a client waits on: for a command that
// creates keys it cannot name (SWAPDB, MOVE, FLUSHALL, ...). Whoever
// serves them checks each key.
func (r *Registry) NoteAllReady(ready []ReadyKey) []ReadyKey {
	r.mu.Lock()
	var all []ReadyKey
	for db, m := range r.dbs {
		for k := range m {
			all = append(all, ReadyKey{db, k})
		}
	}
	r.mu.Unlock()
	for _, rk := range all {
		ready = r.NoteReady(ready, rk.DB, []byte(rk.Key))
	}
	return ready
}

// End says why a wait ended.
type End uint8

const (
	Served   End = iota // another party claimed it and wrote its reply
	TimedOut            // its Timeout passed
	Gone                // its connection closed
	HungUp              // its peer hung up
)

// Await waits, holding nothing, for the end of w's wait: another party's
// claim, its timeout, or its client going (gone is closed when the
// connection closes, hung when the peer hangs up). It returns why, and
// whether it claimed w itself: then the reply, if any, is the caller's to
// write. Otherwise the party that claimed w has written its reply by the
// time Await returns.
func (r *Registry) Await(w *Waiter, gone, hung <-chan struct{}) (why End, own bool) {
	var timeout <-chan time.Time
	if w.Timeout > 0 {
		t := time.NewTimer(w.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-w.done:
		return Served, false
	case <-timeout:
		why = TimedOut
	case <-gone:
		why = Gone
	case <-hung:
		why = HungUp
	}
	if r.Claim(w) {
		w.Wake()
		return why, true
	}
	<-w.done
	return why, false
}
