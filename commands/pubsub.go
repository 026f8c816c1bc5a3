package commands

import (
	"errors"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/resp"
)

// Pub/sub: SUBSCRIBE UNSUBSCRIBE PSUBSCRIBE PUNSUBSCRIBE PUBLISH, the shard
// channels of SSUBSCRIBE SUNSUBSCRIBE SPUBLISH (without a cluster, a
// namespace of channels of their own, as in Redis), and PUBSUB.
//
// The subscriptions live in one registry under its own lock, never a shard
// lock of the keyspace. A publisher holds it for reading while it hands
// the message to each subscriber's connection (resp.Conn.Push copies it
// into the connection's output queue and never waits for the network), so
// the messages of one publisher reach each subscriber in order. A
// subscriber holds it for writing while it adds itself and moves its reply
// into its output queue (Conn.Commit), so no message can overtake the
// confirmation of its subscription. A subscribed connection is in the
// pubsub output class: client-output-buffer-limit pubsub closes one that
// does not read.

// psKind is a namespace of subscriptions.
type psKind uint8

const (
	psChannel psKind = iota // SUBSCRIBE, PUBLISH
	psShard                 // SSUBSCRIBE, SPUBLISH
	psPattern               // PSUBSCRIBE, matched by PUBLISH
	psKinds
)

// psWords are the words Redis's notifications and messages carry.
var psWords = [psKinds]struct{ sub, unsub, message string }{
	psChannel: {"subscribe", "unsubscribe", "message"},
	psShard:   {"ssubscribe", "sunsubscribe", "smessage"},
	psPattern: {"psubscribe", "punsubscribe", "pmessage"},
}

// pubsubRegistry maps channels, shard channels and patterns to their
// subscribers.
type pubsubRegistry struct {
	mu   sync.RWMutex
	subs [psKinds]map[string]*subscriberSet
	// patterns holds the subscribed patterns in the order they were first
	// subscribed, for PUBLISH to match each.
	patterns []*subscriberSet
	// counts mirror len(subs[k]) for INFO, which may run while an EXEC
	// holds mu.
	counts [psKinds]atomic.Int64

	// An EXEC that subscribes keeps mu until its whole reply is written
	// (execDone): its subscriptions must not receive a message before it.
	// execHeld is set while it does; execClient is that EXEC's client.
	execHeld   atomic.Bool
	execClient *Client
}

// subscriberSet is the clients subscribed to one name.
type subscriberSet struct {
	name    []byte // the channel or pattern, for matching and messages
	clients map[*Client]struct{}
}

// clientSubs is a client's own subscriptions. names belong to the client's
// goroutine; the counts are published for CLIENT LIST and INFO.
type clientSubs struct {
	names [psKinds]map[string]uint64 // name -> order of subscription
	seq   uint64
	n     [psKinds]atomic.Int32
}

func (r *pubsubRegistry) init() {
	for k := range r.subs {
		r.subs[k] = make(map[string]*subscriberSet)
	}
}

// subscribed reports whether the client is in pub/sub mode (Redis's
// CLIENT_PUBSUB flag): subscribed to anything. Its own goroutine only.
func (cl *Client) subscribed() bool {
	return len(cl.ps.names[psChannel])+len(cl.ps.names[psShard])+len(cl.ps.names[psPattern]) > 0
}

// pubsubCounts returns the client's channels, patterns and shard channels,
// for CLIENT LIST. Any goroutine may call it.
func (cl *Client) pubsubCounts() (sub, psub, ssub int32) {
	return cl.ps.n[psChannel].Load(), cl.ps.n[psPattern].Load(), cl.ps.n[psShard].Load()
}

// inPubsubMode is subscribed for other goroutines (CLIENT LIST's flags and
// types).
func (cl *Client) inPubsubMode() bool {
	sub, psub, ssub := cl.pubsubCounts()
	return sub+psub+ssub > 0
}

// subscriptionCount is the number a (un)subscribe notification carries:
// channels and patterns together, shard channels on their own.
func (cl *Client) subscriptionCount(k psKind) int64 {
	if k == psShard {
		return int64(len(cl.ps.names[psShard]))
	}
	return int64(len(cl.ps.names[psChannel]) + len(cl.ps.names[psPattern]))
}

// lock takes the registry for writing, unless c runs inside the EXEC that
// holds it already. A request runs with every shard lock held (c.held)
// only inside EXEC or a script, and only one goroutine at a time holds
// them, so such a request finding execHeld set is inside that EXEC.
func (r *pubsubRegistry) lock(c *Ctx) bool {
	if c != nil && c.held && r.execHeld.Load() {
		return false
	}
	r.mu.Lock()
	return true
}

// rlock is lock for reading.
func (r *pubsubRegistry) rlock(c *Ctx) bool {
	if c != nil && c.held && r.execHeld.Load() {
		return false
	}
	r.mu.RLock()
	return true
}

// add subscribes cl to name; the caller holds the registry for writing.
func (r *pubsubRegistry) add(cl *Client, k psKind, name []byte) {
	own := cl.ps.names[k]
	if own == nil {
		own = make(map[string]uint64)
		cl.ps.names[k] = own
	}
	if _, ok := own[string(name)]; ok {
		return
	}
	s := string(name)
	cl.ps.seq++
	own[s] = cl.ps.seq
	cl.ps.n[k].Store(int32(len(own)))
	set := r.subs[k][s]
	if set == nil {
		set = &subscriberSet{name: []byte(s), clients: make(map[*Client]struct{}, 1)}
		r.subs[k][s] = set
		r.counts[k].Store(int64(len(r.subs[k])))
		if k == psPattern {
			r.patterns = append(r.patterns, set)
		}
	}
	set.clients[cl] = struct{}{}
}

// remove unsubscribes cl from name; the caller holds the registry for
// writing.
func (r *pubsubRegistry) remove(cl *Client, k psKind, name string) {
	own := cl.ps.names[k]
	if _, ok := own[name]; !ok {
		return
	}
	delete(own, name)
	cl.ps.n[k].Store(int32(len(own)))
	set := r.subs[k][name]
	if set == nil {
		return
	}
	delete(set.clients, cl)
	if len(set.clients) > 0 {
		return
	}
	// Nobody listens any more: forget the name, so that subscribing to
	// ever new channels costs nothing once they are left.
	delete(r.subs[k], name)
	r.counts[k].Store(int64(len(r.subs[k])))
	if k == psPattern {
		if i := slices.Index(r.patterns, set); i >= 0 {
			r.patterns = slices.Delete(r.patterns, i, i+1)
		}
	}
}

// ordered returns cl's subscriptions of kind k in the order it made them.
func (cl *Client) ordered(k psKind) []string {
	own := cl.ps.names[k]
	names := make([]string, 0, len(own))
	for n := range own {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return own[names[i]] < own[names[j]] })
	return names
}

// dropClient removes every subscription of cl, without notifications: the
// connection closed, or RESET.
func (r *pubsubRegistry) dropClient(cl *Client) {
	if !cl.subscribed() {
		return
	}
	r.mu.Lock()
	for k := range psKinds {
		for name := range cl.ps.names[k] {
			r.remove(cl, k, name)
		}
	}
	r.mu.Unlock()
	if cl.conn != nil {
		cl.conn.SetClass(resp.ClassNormal)
	}
}

// execDone ends an EXEC that subscribed: its whole reply is written, so it
// joins the output queue, and messages may follow. The caller still holds
// every shard lock.
func (r *pubsubRegistry) execDone(cl *Client) {
	if !r.execHeld.Load() || r.execClient != cl {
		return
	}
	cl.conn.Commit()
	r.execClient = nil
	r.execHeld.Store(false)
	r.mu.Unlock()
}

func cmdSubscribe(c *Ctx)  { subscribe(c, psChannel) }
func cmdPSubscribe(c *Ctx) { subscribe(c, psPattern) }

func cmdSSubscribe(c *Ctx) {
	if c.held {
		// Inside EXEC Redis's client is flagged CLIENT_DENY_BLOCKING, which
		// SUBSCRIBE and PSUBSCRIBE forgive inside MULTI, but SSUBSCRIBE not.
		c.W.Error("ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client")
		return
	}
	subscribe(c, psShard)
}

// subscribe adds the client to each name and confirms each.
func subscribe(c *Ctx, k psKind) {
	r, cl := &c.Srv.pubsub, c.Client
	inExec := c.held // (P|S)SUBSCRIBE are refused in scripts
	if inExec {
		if !r.execHeld.Load() {
			r.mu.Lock()
			r.execClient = cl
			r.execHeld.Store(true)
		}
	} else {
		r.mu.Lock()
	}
	for _, name := range c.Args[1:] {
		r.add(cl, k, name)
		c.W.Push(3)
		c.W.BulkString(psWords[k].sub)
		c.W.Bulk(name)
		c.W.Int(cl.subscriptionCount(k))
	}
	if cl.conn != nil {
		cl.conn.SetClass(resp.ClassPubSub)
		if !inExec {
			cl.conn.Commit()
		}
	}
	if !inExec {
		r.mu.Unlock()
	}
}

func cmdUnsubscribe(c *Ctx)  { unsubscribe(c, psChannel) }
func cmdPUnsubscribe(c *Ctx) { unsubscribe(c, psPattern) }
func cmdSUnsubscribe(c *Ctx) { unsubscribe(c, psShard) }

// unsubscribe removes the client from the names given, or from all its
// names of kind k, and confirms each; with none to remove, it still
// answers, with a nil name.
func unsubscribe(c *Ctx, k psKind) {
	r, cl := &c.Srv.pubsub, c.Client
	var names []string
	if len(c.Args) == 1 {
		names = cl.ordered(k)
	} else {
		names = make([]string, len(c.Args)-1)
		for i, a := range c.Args[1:] {
			names[i] = string(a)
		}
	}
	locked := r.lock(c)
	for _, name := range names {
		r.remove(cl, k, name)
		c.W.Push(3)
		c.W.BulkString(psWords[k].unsub)
		c.W.BulkString(name)
		c.W.Int(cl.subscriptionCount(k))
	}
	if len(names) == 0 {
		c.W.Push(3)
		c.W.BulkString(psWords[k].unsub)
		c.W.Null()
		c.W.Int(cl.subscriptionCount(k))
	}
	if locked {
		r.mu.Unlock()
	}
	if !cl.subscribed() && cl.conn != nil {
		cl.conn.SetClass(resp.ClassNormal)
	}
}

// PUBLISH reaches the subscribers of the replicas too, as in Redis.
func cmdPublish(c *Ctx) {
	c.W.Int(int64(c.Srv.publish(c, psChannel, c.Args[1], c.Args[2])))
	c.replicate(-1, c.Args...)
}

func cmdSPublish(c *Ctx) {
	c.W.Int(int64(c.Srv.publish(c, psShard, c.Args[1], c.Args[2])))
	c.replicate(-1, c.Args...)
}

// Publish delivers message to the subscribers of channel (shard: of the
// shard channel, as SPUBLISH) and returns how many received it, as PUBLISH
// does; a client subscribed to the channel and to a matching pattern
// counts twice. A replica calls it for the PUBLISH its primary propagates.
func (s *Server) Publish(channel, message []byte, shard bool) int {
	k := psChannel
	if shard {
		k = psShard
	}
	return s.publish(nil, k, channel, message)
}

// msgBufs hold the message being delivered, built once per publish.
var msgBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// publish delivers a message for the request c (nil for the replica).
func (s *Server) publish(c *Ctx, k psKind, channel, message []byte) int {
	r := &s.pubsub
	var from *Client
	if c != nil {
		from = c.Client
	}
	bp := msgBufs.Get().(*[]byte)
	b := (*bp)[:0]
	n := 0
	if r.rlock(c) {
		defer r.mu.RUnlock()
	}
	if set := r.subs[k][string(channel)]; set != nil {
		b = appendMessage(b[:0], psWords[k].message, nil, channel, message)
		for to := range set.clients {
			r.deliver(c, from, to, b)
			n++
		}
	}
	if k == psChannel {
		for _, set := range r.patterns {
			if !engine.Match(set.name, channel, false) {
				continue
			}
			b = appendMessage(b[:0], psWords[psPattern].message, set.name, channel, message)
			for to := range set.clients {
				r.deliver(c, from, to, b)
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

// deliver sends message b, built as a RESP2 array, to one subscriber: as a
// RESP3 push when it speaks RESP3.
func (r *pubsubRegistry) deliver(c *Ctx, from, to *Client, b []byte) {
	if to.conn == nil {
		return
	}
	if to == from || c != nil && c.held && r.execHeld.Load() && to == r.execClient {
		// The client whose request this is (a RESP3 subscriber, or one that
		// subscribed in this EXEC): the message goes among its replies,
		// where Redis writes it.
		w := &to.conn.W
		b[0] = pushType(w.Proto())
		w.Raw(b)
		return
	}
	b[0] = pushType(to.conn.Proto())
	// A connection closed for its output limits still counts, as in
	// Redis, until it is gone.
	to.conn.Push(b)
}

func pushType(proto int) byte {
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

// PUBSUB's subcommands.

func cmdPubsubChannels(c *Ctx)      { pubsubChannels(c, psChannel) }
func cmdPubsubShardChannels(c *Ctx) { pubsubChannels(c, psShard) }
func cmdPubsubNumSub(c *Ctx)        { pubsubNumSub(c, psChannel) }
func cmdPubsubShardNumSub(c *Ctx)   { pubsubNumSub(c, psShard) }

func cmdPubsubNumPat(c *Ctx) { c.W.Int(c.Srv.pubsub.counts[psPattern].Load()) }

// pubsubChannels lists the channels with subscribers, matching the pattern
// if one is given; sorted, where Redis's order is its hash table's.
func pubsubChannels(c *Ctx, k psKind) {
	if len(c.Args) > 3 {
		subcommandSyntaxError(c)
		return
	}
	var pat []byte
	if len(c.Args) == 3 {
		pat = c.Args[2]
	}
	r := &c.Srv.pubsub
	var names []string
	if r.rlock(c) {
		defer r.mu.RUnlock()
	}
	for name, set := range r.subs[k] {
		if pat == nil || engine.Match(pat, set.name, false) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	c.W.Array(len(names))
	for _, n := range names {
		c.W.BulkString(n)
	}
}

// pubsubNumSub answers each channel and its number of subscribers
// (patterns not included).
func pubsubNumSub(c *Ctx, k psKind) {
	r := &c.Srv.pubsub
	if r.rlock(c) {
		defer r.mu.RUnlock()
	}
	c.W.Array(2 * (len(c.Args) - 2))
	for _, name := range c.Args[2:] {
		c.W.Bulk(name)
		n := 0
		if set := r.subs[k][string(name)]; set != nil {
			n = len(set.clients)
		}
		c.W.Int(int64(n))
	}
}

// subcommandSyntaxError is Redis's addReplySubcommandSyntaxError.
func subcommandSyntaxError(c *Ctx) {
	c.W.Error("unknown subcommand or wrong number of arguments for '" + trunc(string(c.Args[1]), 128) +
		"'. Try " + strings.ToUpper(string(c.Args[0])) + " HELP.")
}

// cmdPubsubHelp writes Redis's text, which ends in "Prints this help."
func cmdPubsubHelp(c *Ctx) {
	c.W.Array(len(pubsubHelp))
	for _, l := range pubsubHelp {
		c.W.Simple(l)
	}
}

var pubsubHelp = []string{
	"PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"CHANNELS [<pattern>]",
	"    Return the currently active channels matching a <pattern> (default: '*').",
	"NUMPAT",
	"    Return number of subscriptions to patterns.",
	"NUMSUB [<channel> ...]",
	"    Return the number of subscribers for the specified channels, excluding",
	"    pattern subscriptions(default: no channels).",
	"SHARDCHANNELS [<pattern>]",
	"    Return the currently active shard level channels matching a <pattern> (default: '*').",
	"SHARDNUMSUB [<shardchannel> ...]",
	"    Return the number of subscribers for the specified shard level channel(s)",
	"HELP",
	"    Prints this help.",
}

// allowedWhileSubscribed lists the commands a RESP2 client in pub/sub mode
// may send.
func allowedWhileSubscribed(s *cmdspec.Spec) bool {
	if s.Parent() != nil {
		return false
	}
	switch s.Name {
	case "ping", "subscribe", "ssubscribe", "unsubscribe", "sunsubscribe", "psubscribe", "punsubscribe", "quit", "reset":
		return true
	}
	return false
}

func msgSubscribedMode(s *cmdspec.Spec) string {
	return "Can't execute '" + s.FullName() + "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
}

// keyspaceEventsAll are the notify-keyspace-events classes "A" stands
// for, in the order Redis writes them back; n, K, E and m are not among
// them.
const keyspaceEventsAll = "g$lshzxetd"

// mergeKeyspaceEvents validates a notify-keyspace-events value and
// returns it as Redis keeps it (keyspaceEventsFlagsToString): the classes
// in its own order, "A" for all those it stands for (and then no n, as in
// Redis), then K, E and m. limitkv sends no notifications, but the
// setting reads back as Redis's does.
func mergeKeyspaceEvents(_, v string) (string, error) {
	var on [256]bool
	for _, ch := range []byte(v) {
		switch {
		case ch == 'A':
			for _, c := range []byte(keyspaceEventsAll) {
				on[c] = true
			}
		case strings.IndexByte(keyspaceEventsAll+"nKEm", ch) >= 0:
			on[ch] = true
		default:
			return "", errors.New("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")
		}
	}
	all := true
	for _, c := range []byte(keyspaceEventsAll) {
		all = all && on[c]
	}
	var b []byte
	if all {
		b = append(b, 'A')
	} else {
		for _, c := range []byte(keyspaceEventsAll + "n") {
			if on[c] {
				b = append(b, c)
			}
		}
	}
	for _, c := range []byte("KEm") {
		if on[c] {
			b = append(b, c)
		}
	}
	return string(b), nil
}
