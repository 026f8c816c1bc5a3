package commands

import (
	"strings"

	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/pubsub"
	"github.com/limitkv/limitkv/resp"
)

// pubsubCommands: publish and subscribe.
func pubsubCommands() []*command {
	return []*command{
		cmd("publish", 3, "pubsub loading stale fast may_replicate", cmdPublish),
		cmd("subscribe", -2, "pubsub noscript loading stale", cmdSubscribe),
		cmd("unsubscribe", -1, "pubsub noscript loading stale", cmdUnsubscribe),
		cmd("psubscribe", -2, "pubsub noscript loading stale", cmdPSubscribe),
		cmd("punsubscribe", -1, "pubsub noscript loading stale", cmdPUnsubscribe),
		cmd("spublish", 3, "pubsub loading stale fast may_replicate", cmdSPublish),
		cmd("ssubscribe", -2, "pubsub noscript loading stale", cmdSSubscribe),
		cmd("sunsubscribe", -1, "pubsub noscript loading stale", cmdSUnsubscribe),
		cmd("pubsub", -2, "", nil).withSub(
			cmd("channels", -2, "pubsub loading stale", cmdPubsubChannels),
			cmd("help", 2, "loading stale", cmdPubsubHelp),
			cmd("numpat", 2, "pubsub loading stale", cmdPubsubNumPat),
			cmd("numsub", -2, "pubsub loading stale", cmdPubsubNumSub),
			cmd("shardchannels", -2, "pubsub loading stale", cmdPubsubShardChannels),
			cmd("shardnumsub", -2, "pubsub loading stale", cmdPubsubShardNumSub),
		),
	}
}

// Pub/sub: SUBSCRIBE UNSUBSCRIBE PSUBSCRIBE PUNSUBSCRIBE PUBLISH, the shard
// channels of SSUBSCRIBE SUNSUBSCRIBE SPUBLISH (without a cluster, a
// namespace of channels of their own, as in Redis), and PUBSUB.
//
// The subscriptions live in the registry of package pubsub, under its own
// lock, never a shard lock of the keyspace. A publisher holds it for
// reading while it hands the message to each subscriber's connection
// (resp.Conn.Push copies it into the connection's output queue and never
// waits for the network), so the messages of one publisher reach each
// subscriber in order. A subscriber holds it for writing while it adds
// itself and moves its reply into its output queue (Conn.Commit), so no
// message can overtake the confirmation of its subscription. A subscribed
// connection is in the pubsub output class: client-output-buffer-limit
// pubsub closes one that does not read.

// PubSub returns the client's own subscriptions, for the registry
// (pubsub.Subscriber).
func (cl *Client) PubSub() *pubsub.Subs { return &cl.ps }

// subscribed reports whether the client is in pub/sub mode (Redis's
// CLIENT_PUBSUB flag). Its own goroutine only.
func (cl *Client) subscribed() bool { return cl.ps.Subscribed() }

// pubsubCounts returns the client's channels, patterns and shard channels,
// for CLIENT LIST. Any goroutine may call it.
func (cl *Client) pubsubCounts() (sub, psub, ssub int32) { return cl.ps.Counts() }

// inPubsubMode is subscribed for other goroutines (CLIENT LIST's flags and
// types).
func (cl *Client) inPubsubMode() bool {
	sub, psub, ssub := cl.pubsubCounts()
	return sub+psub+ssub > 0
}

// dropSubscriptions removes every subscription of cl, without
// notifications: the connection closed, or RESET.
func (s *Server) dropSubscriptions(cl *Client) {
	if s.pubsub.Drop(cl) {
		cl.settleClass()
	}
}

// execDone ends an EXEC that subscribed: its whole reply is written, so it
// joins the output queue, and messages may follow. The caller still holds
// every shard lock.
func (s *Server) execDone(cl *Client) {
	if !s.pubsub.HeldByExec(cl) {
		return
	}
	cl.conn.Commit()
	s.pubsub.ReleaseExec()
}

func cmdSubscribe(c *Ctx)  { subscribe(c, pubsub.Channel) }
func cmdPSubscribe(c *Ctx) { subscribe(c, pubsub.Pattern) }

func cmdSSubscribe(c *Ctx) {
	if c.held {
		// Inside EXEC Redis's client is flagged CLIENT_DENY_BLOCKING, which
		// SUBSCRIBE and PSUBSCRIBE forgive inside MULTI, but SSUBSCRIBE not.
		c.W.Error("ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client")
		return
	}
	subscribe(c, pubsub.Shard)
}

// subscribe adds the client to each name and confirms each.
func subscribe(c *Ctx, k pubsub.Kind) {
	r, cl := &c.Srv.pubsub, c.Client
	inExec := c.held // (P|S)SUBSCRIBE are refused in scripts
	if inExec {
		r.HoldForExec(cl)
	} else {
		r.Lock(false)
	}
	for _, name := range c.Args[1:] {
		r.Add(cl, k, name)
		c.W.Push(3)
		c.W.BulkString(pubsub.Words[k].Sub)
		c.W.Bulk(name)
		c.W.Int(cl.ps.Notified(k))
	}
	if cl.conn != nil {
		cl.conn.SetClass(resp.ClassPubSub)
		if !inExec {
			cl.conn.Commit()
		}
	}
	if !inExec {
		r.Unlock()
	}
}

func cmdUnsubscribe(c *Ctx)  { unsubscribe(c, pubsub.Channel) }
func cmdPUnsubscribe(c *Ctx) { unsubscribe(c, pubsub.Pattern) }
func cmdSUnsubscribe(c *Ctx) { unsubscribe(c, pubsub.Shard) }

// unsubscribe removes the client from the names given, or from all its
// names of kind k, and confirms each; with none to remove, it still
// answers, with a nil name.
func unsubscribe(c *Ctx, k pubsub.Kind) {
	r, cl := &c.Srv.pubsub, c.Client
	var names []string
	if len(c.Args) == 1 {
		names = cl.ps.Ordered(k)
	} else {
		names = make([]string, len(c.Args)-1)
		for i, a := range c.Args[1:] {
			names[i] = string(a)
		}
	}
	locked := r.Lock(c.held)
	for _, name := range names {
		r.Remove(cl, k, name)
		c.W.Push(3)
		c.W.BulkString(pubsub.Words[k].Unsub)
		c.W.BulkString(name)
		c.W.Int(cl.ps.Notified(k))
	}
	if len(names) == 0 {
		c.W.Push(3)
		c.W.BulkString(pubsub.Words[k].Unsub)
		c.W.Null()
		c.W.Int(cl.ps.Notified(k))
	}
	if locked {
		r.Unlock()
	}
	if !cl.subscribed() {
		cl.settleClass()
	}
}

// PUBLISH reaches the subscribers of the replicas too, as in Redis.
func cmdPublish(c *Ctx) {
	c.W.Int(int64(c.Srv.publish(c, pubsub.Channel, c.Args[1], c.Args[2])))
	c.propagatePublish(false)
}

func cmdSPublish(c *Ctx) {
	c.W.Int(int64(c.Srv.publish(c, pubsub.Shard, c.Args[1], c.Args[2])))
	c.propagatePublish(true)
}

// propagatePublish sends a message published here on: to the replicas,
// or in a cluster to the other nodes (replicas included) over the bus,
// as Redis does.
func (c *Ctx) propagatePublish(shard bool) {
	if c.Srv.Cluster != nil {
		c.Srv.clusterPublish(c.Args[1], c.Args[2], shard)
		return
	}
	c.replicate(-1, c.Args...)
}

// Publish delivers message to the subscribers of channel (shard: of the
// shard channel, as SPUBLISH) and returns how many received it, as PUBLISH
// does; a client subscribed to the channel and to a matching pattern
// counts twice. A replica calls it for the PUBLISH its primary propagates.
func (s *Server) Publish(channel, message []byte, shard bool) int {
	k := pubsub.Channel
	if shard {
		k = pubsub.Shard
	}
	return s.publish(nil, k, channel, message)
}

// publish delivers a message for the request c (nil for the replica).
func (s *Server) publish(c *Ctx, k pubsub.Kind, channel, message []byte) int {
	r := &s.pubsub
	var from *Client
	held := c != nil && c.held
	if c != nil {
		from = c.Client
	}
	if r.RLock(held) {
		defer r.RUnlock()
	}
	return r.Publish(k, channel, message, func(to *Client, b []byte) {
		s.deliver(held, from, to, b)
	})
}

// deliver sends message b, built as a RESP2 array, to one subscriber: as a
// RESP3 push when it speaks RESP3.
func (s *Server) deliver(held bool, from, to *Client, b []byte) {
	if to.conn == nil {
		return
	}
	if to == from || held && s.pubsub.HeldByExec(to) {
		// The client whose request this is (a RESP3 subscriber, or one that
		// subscribed in this EXEC): the message goes among its replies,
		// where Redis writes it.
		w := &to.conn.W
		b[0] = pubsub.PushType(w.Proto())
		w.Raw(b)
		return
	}
	b[0] = pubsub.PushType(to.conn.Proto())
	// A connection closed for its output limits still counts, as in
	// Redis, until it is gone.
	to.conn.Push(b)
}

// PUBSUB's subcommands.

func cmdPubsubChannels(c *Ctx)      { pubsubChannels(c, pubsub.Channel) }
func cmdPubsubShardChannels(c *Ctx) { pubsubChannels(c, pubsub.Shard) }
func cmdPubsubNumSub(c *Ctx)        { pubsubNumSub(c, pubsub.Channel) }
func cmdPubsubShardNumSub(c *Ctx)   { pubsubNumSub(c, pubsub.Shard) }

func cmdPubsubNumPat(c *Ctx) { c.W.Int(c.Srv.pubsub.Count(pubsub.Pattern)) }

// pubsubChannels lists the channels with subscribers, matching the pattern
// if one is given; sorted, where Redis's order is its hash table's.
func pubsubChannels(c *Ctx, k pubsub.Kind) {
	if len(c.Args) > 3 {
		subcommandSyntaxError(c)
		return
	}
	var pat []byte
	if len(c.Args) == 3 {
		pat = c.Args[2]
	}
	r := &c.Srv.pubsub
	if r.RLock(c.held) {
		defer r.RUnlock()
	}
	names := r.Channels(k, pat)
	c.W.Array(len(names))
	for _, n := range names {
		c.W.BulkString(n)
	}
}

// pubsubNumSub answers each channel and its number of subscribers
// (patterns not included).
func pubsubNumSub(c *Ctx, k pubsub.Kind) {
	r := &c.Srv.pubsub
	if r.RLock(c.held) {
		defer r.RUnlock()
	}
	c.W.Array(2 * (len(c.Args) - 2))
	for _, name := range c.Args[2:] {
		c.W.Bulk(name)
		c.W.Int(int64(r.NumSub(k, name)))
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
