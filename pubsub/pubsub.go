// Package pubsub holds the subscriptions of pub/sub: which clients listen
// on each channel, shard channel (a namespace of its own, as Redis has
// without a cluster) and pattern, each client's own subscriptions in the
// order it made them, the counts INFO and CLIENT LIST read, the matching
// of a published channel against the patterns, and the messages'
// framing.
//
// The registry knows clients only as comparable values that find their
// own subscriptions (Subscriber); it never writes to a connection. The
// caller hands each message to its subscribers (Registry.Publish's
// deliver) and writes the replies of the commands, so that what a
// connection is and how a request runs stay the server's.
//
// One lock guards the registry, never a lock of the keyspace. A publisher
// holds it for reading while it hands the message to each subscriber, so
// the messages of one publisher reach each subscriber in order; a
// subscriber holds it for writing while it adds itself and queues its
// confirmation, so no message can overtake it. An EXEC that subscribes
// keeps it until its whole reply is written (HoldForExec, ReleaseExec).
package pubsub

import (
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/limitkv/limitkv/engine"
)

// Kind is a namespace of subscriptions.
type Kind uint8

const (
	Channel Kind = iota // SUBSCRIBE, PUBLISH
	Shard               // SSUBSCRIBE, SPUBLISH
	Pattern             // PSUBSCRIBE, matched by PUBLISH
	Kinds
)

// Words are the words Redis's notifications and messages carry, by kind.
var Words = [Kinds]struct{ Sub, Unsub, Message string }{
	Channel: {"subscribe", "unsubscribe", "message"},
	Shard:   {"ssubscribe", "sunsubscribe", "smessage"},
	Pattern: {"psubscribe", "punsubscribe", "pmessage"},
}

// Subscriber is a client as the registry sees it: a map key that leads
// to its own subscriptions.
type Subscriber interface {
	comparable
	PubSub() *Subs
}

// Subs is one client's own subscriptions. The names belong to the
// client's goroutine; the counts are published for other goroutines
// (CLIENT LIST, INFO).
type Subs struct {
	names [Kinds]map[string]uint64 // name -> order of subscription
	seq   uint64
	n     [Kinds]atomic.Int32
}

// Subscribed reports whether the client is in pub/sub mode (Redis's
// CLIENT_PUBSUB flag): subscribed to anything. Its own goroutine only.
func (s *Subs) Subscribed() bool {
	return len(s.names[Channel])+len(s.names[Shard])+len(s.names[Pattern]) > 0
}

// Counts returns the client's channels, patterns and shard channels. Any
// goroutine may call it.
func (s *Subs) Counts() (sub, psub, ssub int32) {
	return s.n[Channel].Load(), s.n[Pattern].Load(), s.n[Shard].Load()
}

// Notified is the number a (un)subscribe notification of kind k carries:
// channels and patterns together, shard channels on their own.
func (s *Subs) Notified(k Kind) int64 {
	if k == Shard {
		return int64(len(s.names[Shard]))
	}
	return int64(len(s.names[Channel]) + len(s.names[Pattern]))
}

// Ordered returns the subscriptions of kind k in the order they were made,
// the order UNSUBSCRIBE without names confirms them in.
func (s *Subs) Ordered(k Kind) []string {
	own := s.names[k]
	names := make([]string, 0, len(own))
	for n := range own {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return own[names[i]] < own[names[j]] })
	return names
}

// set is the clients subscribed to one name.
type set[C Subscriber] struct {
	name    []byte // the channel or pattern, for matching and messages
	clients map[C]struct{}
}

// Registry maps channels, shard channels and patterns to their
// subscribers. Init makes it ready.
type Registry[C Subscriber] struct {
	mu   sync.RWMutex
	subs [Kinds]map[string]*set[C]
	// patterns holds the subscribed patterns in the order they were first
	// subscribed, for PUBLISH to match each.
	patterns []*set[C]
	// counts mirror len(subs[k]) for INFO, which may run while an EXEC
	// holds mu.
	counts [Kinds]atomic.Int64

	// execHeld is set while an EXEC that subscribed holds mu, its
	// subscriptions not to receive a message before its reply is written;
	// execClient is that EXEC's client.
	execHeld   atomic.Bool
	execClient C
}

// Init makes the registry ready for use.
func (r *Registry[C]) Init() {
	for k := range r.subs {
		r.subs[k] = make(map[string]*set[C])
	}
}

// Lock takes the registry for writing, unless the caller runs inside the
// EXEC that holds it already: held says the request holds every shard
// lock, which only an EXEC or a script does, one goroutine at a time, so
// such a request finding the registry held for an EXEC is inside that
// EXEC. It reports whether it locked, and the caller then Unlocks.
func (r *Registry[C]) Lock(held bool) bool {
	if held && r.execHeld.Load() {
		return false
	}
	r.mu.Lock()
	return true
}

// Unlock lets go of what Lock took.
func (r *Registry[C]) Unlock() { r.mu.Unlock() }

// RLock is Lock for reading.
func (r *Registry[C]) RLock(held bool) bool {
	if held && r.execHeld.Load() {
		return false
	}
	r.mu.RLock()
	return true
}

// RUnlock lets go of what RLock took.
func (r *Registry[C]) RUnlock() { r.mu.RUnlock() }

// HoldForExec takes the registry for writing for the EXEC of cl that
// subscribes, unless it holds it already, until ReleaseExec.
func (r *Registry[C]) HoldForExec(cl C) {
	if !r.execHeld.Load() {
		r.mu.Lock()
		r.execClient = cl
		r.execHeld.Store(true)
	}
}

// HeldByExec reports whether the EXEC of cl holds the registry. Only that
// EXEC's goroutine, or one that holds every shard lock after it, may ask.
func (r *Registry[C]) HeldByExec(cl C) bool {
	return r.execHeld.Load() && r.execClient == cl
}

// ReleaseExec lets go of the registry HoldForExec took, once the EXEC's
// reply is queued.
func (r *Registry[C]) ReleaseExec() {
	var none C
	r.execClient = none
	r.execHeld.Store(false)
	r.mu.Unlock()
}

// Add subscribes cl to name; the caller holds the registry for writing.
func (r *Registry[C]) Add(cl C, k Kind, name []byte) {
	ps := cl.PubSub()
	own := ps.names[k]
	if own == nil {
		own = make(map[string]uint64)
		ps.names[k] = own
	}
	if _, ok := own[string(name)]; ok {
		return
	}
	s := string(name)
	ps.seq++
	own[s] = ps.seq
	ps.n[k].Store(int32(len(own)))
	st := r.subs[k][s]
	if st == nil {
		st = &set[C]{name: []byte(s), clients: make(map[C]struct{}, 1)}
		r.subs[k][s] = st
		r.counts[k].Store(int64(len(r.subs[k])))
		if k == Pattern {
			r.patterns = append(r.patterns, st)
		}
	}
	st.clients[cl] = struct{}{}
}

// Remove unsubscribes cl from name; the caller holds the registry for
// writing.
func (r *Registry[C]) Remove(cl C, k Kind, name string) {
	ps := cl.PubSub()
	own := ps.names[k]
	if _, ok := own[name]; !ok {
		return
	}
	delete(own, name)
	ps.n[k].Store(int32(len(own)))
	st := r.subs[k][name]
	if st == nil {
		return
	}
	delete(st.clients, cl)
	if len(st.clients) > 0 {
		return
	}
	// Nobody listens any more: forget the name, so that subscribing to
	// ever new channels costs nothing once they are left.
	delete(r.subs[k], name)
	r.counts[k].Store(int64(len(r.subs[k])))
	if k == Pattern {
		if i := slices.Index(r.patterns, st); i >= 0 {
			r.patterns = slices.Delete(r.patterns, i, i+1)
		}
	}
}

// Drop removes every subscription of cl, without notifications, and
// reports whether it had any. It takes the registry itself.
func (r *Registry[C]) Drop(cl C) bool {
	ps := cl.PubSub()
	if !ps.Subscribed() {
		return false
	}
	r.mu.Lock()
	for k := range Kinds {
		for name := range ps.names[k] {
			r.Remove(cl, k, name)
		}
	}
	r.mu.Unlock()
	return true
}

// Count returns the number of names of kind k with a subscriber, as INFO
// and PUBSUB NUMPAT read it. Any goroutine may call it, locked or not.
func (r *Registry[C]) Count(k Kind) int64 { return r.counts[k].Load() }

// Channels returns the names of kind k with subscribers that match the
// glob pat (all of them when pat is nil), sorted; the caller holds the
// registry for reading.
func (r *Registry[C]) Channels(k Kind, pat []byte) []string {
	var names []string
	for name, st := range r.subs[k] {
		if pat == nil || engine.Match(pat, st.name, false) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// NumSub returns the number of clients subscribed to name itself
// (patterns not included); the caller holds the registry for reading.
func (r *Registry[C]) NumSub(k Kind, name []byte) int {
	if st := r.subs[k][string(name)]; st != nil {
		return len(st.clients)
	}
	return 0
}

// Each calls fn for every subscription; the caller holds the registry
// for reading.
func (r *Registry[C]) Each(fn func(k Kind, name []byte, cl C)) {
	for k := range Kinds {
		for _, st := range r.subs[k] {
			for cl := range st.clients {
				fn(k, st.name, cl)
			}
		}
	}
}

// msgBufs hold the message being delivered, built once per publish.
var msgBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// Publish hands message, sent to channel (of kind Channel or Shard), to
// deliver for each subscriber: the channel's, and for Channel those of
// every pattern that matches it, each with its pattern message. It
// returns how many it was handed to: a client subscribed to the channel
// and to a matching pattern counts twice. The message is a RESP2 array,
// valid during the call only; deliver may change its first byte
// (PushType). The caller holds the registry for reading.
func (r *Registry[C]) Publish(k Kind, channel, message []byte, deliver func(to C, msg []byte)) int {
	bp := msgBufs.Get().(*[]byte)
	b := (*bp)[:0]
	n := 0
	if st := r.subs[k][string(channel)]; st != nil {
		b = appendMessage(b[:0], Words[k].Message, nil, channel, message)
		for to := range st.clients {
			deliver(to, b)
			n++
		}
	}
	if k == Channel {
		for _, st := range r.patterns {
			if !engine.Match(st.name, channel, false) {
				continue
			}
			b = appendMessage(b[:0], Words[Pattern].Message, st.name, channel, message)
			for to := range st.clients {
				deliver(to, b)
				n++
			}
		}
	}
	if cap(b) <= 64<<10 {
		*bp = b[:0]
		msgBufs.Put(bp)
	}
	return n
}

// PushType is the type byte a message starts with for a connection
// speaking proto: a RESP3 push, or a RESP2 array.
func PushType(proto int) byte {
	if proto == 3 {
		return '>'
	}
	return '*'
}

// appendMessage builds a message ("message", channel, payload) or, with a
// pattern, a pattern message ("pmessage", pattern, channel, payload), as
// a RESP2 array.
func appendMessage(b []byte, kind string, pattern, channel, message []byte) []byte {
	if pattern != nil {
		b = append(b, "*4\r\n"...)
	} else {
		b = append(b, "*3\r\n"...)
	}
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(kind)), 10)
	b = append(b, '\r', '\n')
	b = append(b, kind...)
	b = append(b, '\r', '\n')
	if pattern != nil {
		b = appendBulk(b, pattern)
	}
	b = appendBulk(b, channel)
	return appendBulk(b, message)
}

func appendBulk(b, s []byte) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, '\r', '\n')
	b = append(b, s...)
	return append(b, '\r', '\n')
}
