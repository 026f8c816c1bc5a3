package commands

import (
	"slices"
	"strconv"
	"strings"

	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/tracking"
)

// Client-side caching (Redis's tracking.c): CLIENT TRACKING, CACHING,
// GETREDIR and TRACKINGINFO, and the invalidations. A tracking client's
// read-only commands record their keys in the server's table (the
// tracking package); the engine logs every change to a key while the
// table may hold it (engine.NoteChanged), and the change is sent to the
// key's readers, to their redirect client if they named one, as a RESP3
// "invalidate" push or, to a RESP2 redirect client in pub/sub mode, a
// message on __redis__:invalidate. BCAST clients are sent, after each
// request, the keys changed under their prefixes. What is for the client
// whose request made the change is sent after that request's reply, as
// Redis 7.0.15 does.

// trackMode is a tracking client's settings, replaced whole (never
// changed) so that the clients that invalidate its keys read it without
// a lock.
type trackMode struct {
	redirect                     int64
	bcast, optin, optout, noloop bool
	prefixes                     []string // BCAST's, in byte order
}

// trackingClient is the client a request's tracking is for: a script's
// caller rather than the script's own client.
func (c *Ctx) trackingClient() *Client {
	if c.origin != nil {
		return c.origin
	}
	return c.Client
}

func cmdClientTracking(c *Ctx) {
	var m trackMode
	var prefixes []string
	for j := 3; j < len(c.Args); j++ {
		a, more := c.Args[j], j+1 < len(c.Args)
		switch {
		case is(a, "REDIRECT") && more:
			j++
			if m.redirect != 0 {
				c.W.Error("ERR A client can only redirect to a single other client")
				return
			}
			id, ok := c.Int(j)
			if !ok {
				return
			}
			if c.Srv.clients.get(id) == nil {
				c.W.Error("The client ID you want redirect to does not exist")
				return
			}
			m.redirect = id
		case is(a, "BCAST"):
			m.bcast = true
		case is(a, "OPTIN"):
			m.optin = true
		case is(a, "OPTOUT"):
			m.optout = true
		case is(a, "NOLOOP"):
			m.noloop = true
		case is(a, "PREFIX") && more:
			j++
			prefixes = append(prefixes, string(c.Args[j]))
		default:
			c.W.Error(msgSyntax)
			return
		}
	}
	cl := c.Client
	switch {
	case is(c.Args[2], "ON"):
		cur := cl.track.Load()
		switch {
		case !m.bcast && len(prefixes) > 0:
			c.W.Error("ERR PREFIX option requires BCAST mode to be enabled")
		case cur != nil && cur.bcast != m.bcast:
			c.W.Error("You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.")
		case m.bcast && (m.optin || m.optout):
			c.W.Error("ERR OPTIN and OPTOUT are not compatible with BCAST")
		case m.optin && m.optout:
			c.W.Error("You can't specify both OPTIN mode and OPTOUT mode")
		case cur != nil && (m.optin && cur.optout || m.optout && cur.optin):
			c.W.Error("You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.")
		default:
			if m.bcast {
				if msg := prefixCollision(cur, prefixes); msg != "" {
					c.W.Error(msg)
					return
				}
			}
			c.Srv.enableTracking(cl, m, prefixes)
			c.W.OK()
		}
	case is(c.Args[2], "OFF"):
		c.Srv.disableTracking(cl)
		c.W.OK()
	default:
		c.W.Error(msgSyntax)
	}
}

// prefixCollision checks BCAST prefixes as Redis does: no two of a
// client's may be prefixes of one another, as a key would then be sent
// twice.
func prefixCollision(cur *trackMode, ps []string) string {
	overlap := func(a, b string) bool { return strings.HasPrefix(a, b) || strings.HasPrefix(b, a) }
	for i, p := range ps {
		if cur != nil {
			for _, q := range cur.prefixes {
				if overlap(p, q) {
					return "Prefix '" + p + "' overlaps with an existing prefix '" + q + "'. Prefixes for a single client must not overlap."
				}
			}
		}
		for _, q := range ps[i+1:] {
			if overlap(p, q) {
				return "Prefix '" + p + "' overlaps with another provided prefix '" + q + "'. Prefixes for a single client must not overlap."
			}
		}
	}
	return ""
}

// enableTracking turns tracking on for cl with m (a client already
// tracking keeps its BCAST prefixes and adds these).
func (s *Server) enableTracking(cl *Client, m trackMode, prefixes []string) {
	cur := cl.track.Load()
	if m.bcast {
		if cur != nil {
			m.prefixes = slices.Clone(cur.prefixes)
		}
		if len(prefixes) == 0 {
			prefixes = []string{""}
		}
		for _, p := range prefixes {
			if !slices.Contains(m.prefixes, p) {
				m.prefixes = append(m.prefixes, p)
				s.tracking.Follow(cl.ID, p)
			}
		}
		slices.Sort(m.prefixes)
	}
	cl.trackBroken.Store(false)
	cl.track.Store(&m)
	if cur == nil {
		s.trackingClients.Add(1)
		s.applyNotes()
	}
}

// disableTracking turns tracking off for cl (CLIENT TRACKING OFF, RESET,
// a connection gone). Its reads stay in the table until their keys
// change, as in Redis: they are skipped then.
func (s *Server) disableTracking(cl *Client) {
	cur := cl.track.Swap(nil)
	if cur == nil {
		return
	}
	for _, p := range cur.prefixes {
		s.tracking.Unfollow(cl.ID, p)
	}
	cl.trackBroken.Store(false)
	cl.trackCaching = false
	s.trackingClients.Add(-1)
	s.applyNotes()
}

func cmdClientCaching(c *Ctx) {
	m := c.Client.track.Load()
	if m == nil {
		c.W.Error("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled")
		return
	}
	switch {
	case is(c.Args[2], "YES") && m.optin, is(c.Args[2], "NO") && m.optout:
		c.Client.trackCaching = true
		c.W.OK()
	case is(c.Args[2], "YES"):
		c.W.Error("ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.")
	case is(c.Args[2], "NO"):
		c.W.Error("ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.")
	default:
		c.W.Error(msgSyntax)
	}
}

func cmdClientGetRedir(c *Ctx) {
	if m := c.Client.track.Load(); m != nil {
		c.W.Int(m.redirect)
	} else {
		c.W.Int(-1)
	}
}

func cmdClientTrackingInfo(c *Ctx) {
	cl := c.Client
	m := cl.track.Load()
	flags := []string{"off"}
	if m != nil {
		flags[0] = "on"
		if m.bcast {
			flags = append(flags, "bcast")
		}
		if m.optin {
			flags = append(flags, "optin")
			if cl.trackCaching {
				flags = append(flags, "caching-yes")
			}
		}
		if m.optout {
			flags = append(flags, "optout")
			if cl.trackCaching {
				flags = append(flags, "caching-no")
			}
		}
		if m.noloop {
			flags = append(flags, "noloop")
		}
		if cl.trackBroken.Load() {
			flags = append(flags, "broken_redirect")
		}
	}
	c.W.Map(3)
	c.W.BulkString("flags")
	c.W.Set(len(flags))
	for _, f := range flags {
		c.W.BulkString(f)
	}
	c.W.BulkString("redirect")
	if m != nil {
		c.W.Int(m.redirect)
	} else {
		c.W.Int(-1)
	}
	c.W.BulkString("prefixes")
	if m == nil {
		c.W.Array(0)
		return
	}
	c.W.Array(len(m.prefixes))
	for _, p := range m.prefixes {
		c.W.BulkString(p)
	}
}

// trackRead records the keys a read-only command read for its tracking
// client, as Redis's call does after the command: not for BCAST clients,
// nor EVAL_RO, EVALSHA_RO and FCALL_RO themselves (the commands their
// scripts run count), nor shard channels; with OPTIN only after CLIENT
// CACHING YES, with OPTOUT unless after CLIENT CACHING NO.
func (s *Server) trackRead(c *Ctx, keys []int) {
	cl := c.trackingClient()
	m := cl.track.Load()
	if m == nil || m.bcast || len(keys) == 0 || c.Spec.Flags&cmdspec.PubSub != 0 || c.Spec.Flags&cmdspec.RunsScript != 0 {
		return
	}
	if m.optin && !cl.trackCaching || m.optout && cl.trackCaching {
		return
	}
	var buf [8][]byte
	ks := buf[:0]
	for _, i := range keys {
		ks = append(ks, c.Args[i])
	}
	s.tracking.Remember(cl.ID, ks...)
}

// invalidate sends a change to key to the clients that read it. c is the
// request that made it (nil: the server's own change, an expiry or an
// eviction the sweeper made); what is for c's client waits for its reply.
func (s *Server) invalidate(c *Ctx, key []byte) {
	var cur *Client
	var by int64
	if c != nil {
		cur = c.trackingClient()
		by = cur.ID
	}
	var buf [8]int64
	for _, id := range s.tracking.Invalidate(key, by, buf[:0]) {
		t := s.clients.get(id)
		if t == nil {
			continue
		}
		m := t.track.Load()
		if m == nil || m.bcast || m.noloop && t == cur {
			continue
		}
		if t == cur {
			t.trackPending = append(t.trackPending, pendingInvalidation{key: string(key)})
			continue
		}
		s.sendInvalidation(t, m, cur, keyPayload(nil, key))
	}
	if s.trackingClients.Load() == 0 && !s.tracking.Active() {
		s.applyNotes()
	}
}

// keyPayload is the array of one key an invalidation carries.
func keyPayload(dst, key []byte) []byte {
	dst = append(dst, "*1\r\n$"...)
	dst = strconv.AppendInt(dst, int64(len(key)), 10)
	dst = append(dst, "\r\n"...)
	dst = append(dst, key...)
	return append(dst, "\r\n"...)
}

const (
	invalidatePush  = ">2\r\n$10\r\ninvalidate\r\n"
	invalidateMsg   = "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n"
	redirBrokenPush = ">2\r\n$21\r\ntracking-redir-broken\r\n:"
)

// sendInvalidation sends payload (the keys, or a null: all of them) to
// tracking client t, or to the client it redirects to. cur is the
// client whose request is running, whose own writer takes what is for
// it; nil for none.
func (s *Server) sendInvalidation(t *Client, m *trackMode, cur *Client, payload []byte) {
	to := t
	redirected := m.redirect != 0
	if redirected {
		to = s.clients.get(m.redirect)
		if to == nil {
			t.trackBroken.Store(true)
			if t.proto() == 3 {
				msg := strconv.AppendInt([]byte(redirBrokenPush), m.redirect, 10)
				s.deliverTracking(t, cur, append(msg, "\r\n"...))
			}
			return
		}
	}
	var msg []byte
	switch {
	case to.proto() == 3:
		msg = append([]byte(invalidatePush), payload...)
	case redirected && to.inPubsubMode():
		msg = append([]byte(invalidateMsg), payload...)
	default:
		return // RESP2 has no pushes on the connection itself
	}
	s.deliverTracking(to, cur, msg)
}

// deliverTracking writes msg to client to: among its replies if its
// request is the one running (after its reply, flushTracking's caller),
// else to its output queue.
func (s *Server) deliverTracking(to, cur *Client, msg []byte) {
	if to.conn == nil {
		return
	}
	if to == cur {
		to.conn.W.Raw(msg)
		return
	}
	to.conn.Push(msg)
}

// flushTracking sends the invalidations a request made for its own
// client, now that its reply is written, and the BCAST clients' changes.
func (s *Server) flushTracking(cl *Client) {
	if cl.trackPending == nil && !s.tracking.HasBroadcasts() {
		return
	}
	if len(cl.trackPending) > 0 {
		pending := cl.trackPending
		cl.trackPending = nil
		if m := cl.track.Load(); m != nil {
			for _, p := range pending {
				payload := nullPayload(cl.proto())
				if !p.all {
					payload = keyPayload(nil, []byte(p.key))
				}
				s.sendInvalidation(cl, m, cl, payload)
			}
		}
	}
	s.broadcastInvalidations(cl)
}

// pendingInvalidation is one invalidation kept for the reply's end: a key,
// or all of them (a flush).
type pendingInvalidation struct {
	key string
	all bool
}

func nullPayload(proto int) []byte {
	if proto == 3 {
		return []byte("_\r\n")
	}
	return []byte("$-1\r\n")
}

// trackFlush tells every tracking client that every key changed (FLUSHALL,
// FLUSHDB, a replica's new dataset) and forgets every read: one null per
// client, not a message per key.
func (s *Server) trackFlush(c *Ctx) {
	if s.trackingClients.Load() == 0 && !s.tracking.Active() {
		return
	}
	var cur *Client
	if c != nil {
		cur = c.trackingClient()
	}
	for _, t := range s.clients.all() {
		m := t.track.Load()
		if m == nil {
			continue
		}
		if t == cur {
			t.trackPending = append(t.trackPending, pendingInvalidation{all: true})
			continue
		}
		s.sendInvalidation(t, m, nil, nullPayload(t.proto()))
	}
	s.tracking.Flush()
}

// broadcastInvalidations sends the BCAST clients the keys changed under
// their prefixes, one message per prefix, without a NOLOOP client's own
// changes. cur is the client whose request just ran (nil: none).
func (s *Server) broadcastInvalidations(cur *Client) {
	for _, b := range s.tracking.TakeBroadcasts() {
		all := appendKeys(nil, b, 0)
		for _, id := range b.Clients {
			t := s.clients.get(id)
			if t == nil {
				continue
			}
			m := t.track.Load()
			if m == nil {
				continue
			}
			payload := all
			if m.noloop {
				if payload = appendKeys(nil, b, t.ID); payload == nil {
					continue
				}
			}
			s.sendInvalidation(t, m, cur, payload)
		}
	}
}

// appendKeys is the array of b's keys, without those last changed by
// client skip (0: none); nil if none is left.
func appendKeys(dst []byte, b tracking.Broadcast, skip int64) []byte {
	n := 0
	for _, by := range b.By {
		if skip == 0 || by != skip {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	dst = append(dst, '*')
	dst = strconv.AppendInt(dst, int64(n), 10)
	dst = append(dst, "\r\n"...)
	for i, k := range b.Keys {
		if skip != 0 && b.By[i] == skip {
			continue
		}
		dst = append(dst, '$')
		dst = strconv.AppendInt(dst, int64(len(k)), 10)
		dst = append(dst, "\r\n"...)
		dst = append(dst, k...)
		dst = append(dst, "\r\n"...)
	}
	return dst
}

// trackingTick keeps the table within tracking-table-max-keys, as
// Redis's cron does: keys forgotten at random, their readers told as if
// the keys had changed, with an effort that grows while it stays over.
func (s *Server) trackingTick() {
	max := int(s.Cfg.trackingMaxKeys.Load())
	if max == 0 || s.trackingClients.Load() == 0 {
		return
	}
	if keys, _, _ := s.tracking.Stats(); keys <= int64(max) {
		s.trackingEffort = 0
		return
	}
	done := s.tracking.Shrink(max, 100*(s.trackingEffort+1), func(key string, ids []int64) {
		for _, id := range ids {
			t := s.clients.get(id)
			if t == nil {
				continue
			}
			if m := t.track.Load(); m != nil && !m.bcast {
				s.sendInvalidation(t, m, nil, keyPayload(nil, []byte(key)))
			}
		}
	})
	if done {
		s.trackingEffort = 0
	} else {
		s.trackingEffort++
	}
}

// applyNotes tells the engine which of its events to log: those keyspace
// notifications publish, and every change while client-side caching may
// have to send one.
func (s *Server) applyNotes() {
	s.notesMu.Lock()
	defer s.notesMu.Unlock()
	kinds := s.notifyKinds
	if s.trackingClients.Load() > 0 || s.tracking.Active() {
		kinds |= engine.NoteChanged
	}
	s.Eng.SetNotes(kinds, s.sinkNotes)
}

// proto is the client's protocol version, 2 for a client with no
// connection.
func (cl *Client) proto() int {
	if cl.conn == nil {
		return 2
	}
	return cl.conn.Proto()
}
