// Package tracking holds the server's side of client-side caching
// (Redis's tracking.c): which clients read which keys, so that a change
// to a key can be sent to exactly them, once, and the prefixes that
// clients in BCAST mode follow, with the keys changed under each since
// the last broadcast.
//
// The table knows clients only by ID and never writes to a connection;
// the caller resolves the IDs it returns and sends the invalidations, so
// that what a client is and how a message reaches it stay the server's.
// Like Redis's, the table is one namespace for every database: a key
// read in one database is invalidated by a change in any.
//
// One mutex guards the table. The engine reports changes under a shard
// lock, so the order is always shard lock, then this one.
package tracking

import (
	"slices"
	"sync"
	"sync/atomic"
)

// Table is the tracking state of a server.
type Table struct {
	mu sync.Mutex
	// readers: key -> the IDs of the clients that read it since its last
	// invalidation.
	readers map[string]map[int64]struct{}
	items   int
	// prefixes: prefix -> the BCAST clients following it and the keys
	// changed under it since the last broadcast.
	prefixes map[string]*prefix

	// Published for INFO and for the cheap checks of the hot path.
	nKeys, nItems, nPrefixes atomic.Int64
	pending                  atomic.Bool // some prefix has changed keys
}

type prefix struct {
	clients map[int64]struct{}
	// changed: key -> the client whose change came last (0: none, the
	// server's own), for NOLOOP.
	changed map[string]int64
}

// Init makes the table ready for use.
func (t *Table) Init() {
	t.readers = make(map[string]map[int64]struct{})
	t.prefixes = make(map[string]*prefix)
}

// Active reports whether a change to some key may have to be sent:
// some key has readers or some prefix has followers.
func (t *Table) Active() bool { return t.nKeys.Load() > 0 || t.nPrefixes.Load() > 0 }

// HasBroadcasts reports whether TakeBroadcasts has anything to hand over.
func (t *Table) HasBroadcasts() bool { return t.pending.Load() }

// Stats returns what INFO shows: keys with readers, reader entries, and
// prefixes followed.
func (t *Table) Stats() (keys, items, prefixes int64) {
	return t.nKeys.Load(), t.nItems.Load(), t.nPrefixes.Load()
}

func (t *Table) publish() {
	t.nKeys.Store(int64(len(t.readers)))
	t.nItems.Store(int64(t.items))
	t.nPrefixes.Store(int64(len(t.prefixes)))
}

// Remember records that client id read keys.
func (t *Table) Remember(id int64, keys ...[]byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range keys {
		ids := t.readers[string(k)]
		if ids == nil {
			ids = make(map[int64]struct{}, 1)
			t.readers[string(k)] = ids
		}
		if _, ok := ids[id]; !ok {
			ids[id] = struct{}{}
			t.items++
		}
	}
	t.publish()
}

// Invalidate is a change to key made by client by (0: by the server
// itself): it forgets and appends to dst the clients that read key, and
// records the change under every prefix of key for the next broadcast.
func (t *Table) Invalidate(key []byte, by int64, dst []int64) []int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	for p, st := range t.prefixes {
		if len(p) <= len(key) && string(key[:len(p)]) == p {
			st.changed[string(key)] = by
			t.pending.Store(true)
		}
	}
	return t.forget(key, dst)
}

// forget removes key's readers, appending them to dst.
func (t *Table) forget(key []byte, dst []int64) []int64 {
	ids, ok := t.readers[string(key)]
	if !ok {
		return dst
	}
	for id := range ids {
		dst = append(dst, id)
	}
	t.items -= len(ids)
	delete(t.readers, string(key))
	t.publish()
	return dst
}

// Flush forgets every reader: a flush is sent to every tracking client
// as one message, not key by key.
func (t *Table) Flush() {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.readers)
	t.items = 0
	t.publish()
}

// Follow makes client id follow prefix (BCAST).
func (t *Table) Follow(id int64, p string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.prefixes[p]
	if st == nil {
		st = &prefix{clients: make(map[int64]struct{}), changed: make(map[string]int64)}
		t.prefixes[p] = st
	}
	st.clients[id] = struct{}{}
	t.publish()
}

// Unfollow stops client id following prefix p; a prefix nobody follows
// is dropped with the changes it kept.
func (t *Table) Unfollow(id int64, p string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.prefixes[p]
	if st == nil {
		return
	}
	delete(st.clients, id)
	if len(st.clients) == 0 {
		delete(t.prefixes, p)
	}
	t.publish()
}

// Broadcast is the changes under one prefix: its followers, and the keys
// changed, in byte order, each with the client whose change came last.
type Broadcast struct {
	Clients []int64
	Keys    []string
	By      []int64
}

// TakeBroadcasts hands over, prefix by prefix in byte order, the changes
// recorded since the last call.
func (t *Table) TakeBroadcasts() []Broadcast {
	if !t.pending.Load() {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending.Store(false)
	names := make([]string, 0, len(t.prefixes))
	for p, st := range t.prefixes {
		if len(st.changed) > 0 {
			names = append(names, p)
		}
	}
	slices.Sort(names)
	out := make([]Broadcast, 0, len(names))
	for _, p := range names {
		st := t.prefixes[p]
		var b Broadcast
		for id := range st.clients {
			b.Clients = append(b.Clients, id)
		}
		slices.Sort(b.Clients)
		for k := range st.changed {
			b.Keys = append(b.Keys, k)
		}
		slices.Sort(b.Keys)
		for _, k := range b.Keys {
			b.By = append(b.By, st.changed[k])
		}
		clear(st.changed)
		out = append(out, b)
	}
	return out
}

// Shrink forgets keys while more than max keys have readers, at most
// effort of them, calling fn with each key and its readers (who must be
// told, as if the key had changed). It reports whether the table is at
// or under max. Go's map order is the random walk Redis takes.
func (t *Table) Shrink(max, effort int, fn func(key string, ids []int64)) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ids []int64
	for k := range t.readers {
		if len(t.readers) <= max || effort == 0 {
			break
		}
		effort--
		ids = t.forget([]byte(k), ids[:0])
		fn(k, ids)
	}
	return len(t.readers) <= max
}
