package commands

import (
	"github.com/limitkv/limitkv/engine"

	"github.com/limitkv/limitkv/acl"
)

// transactionCommands: MULTI, EXEC and optimistic locking.
func transactionCommands() []*command {
	return []*command{
		cmd("multi", 1, "noscript loading stale fast allow_busy", cmdMulti),
		cmd("exec", 1, "noscript loading stale skip_slowlog", cmdExec),
		cmd("discard", 1, "noscript loading stale fast allow_busy", cmdDiscard),
		cmd("watch", -2, "noscript loading stale fast allow_busy selflock", cmdWatch),
		cmd("unwatch", 1, "noscript loading stale fast allow_busy", cmdUnwatch),
	}
}

// Transactions: MULTI EXEC DISCARD WATCH UNWATCH. EXEC runs its queued
// commands with every shard locked, so no other connection sees any state
// between them, and checks WATCHed keys under the same locks.

func cmdMulti(c *Ctx) {
	if c.Client.multi {
		c.W.Error("ERR MULTI calls can not be nested")
		return
	}
	c.Client.multi = true
	c.Client.multiLen.Store(0)
	c.W.OK()
}

func cmdDiscard(c *Ctx) {
	if !c.Client.multi {
		c.W.Error("ERR DISCARD without MULTI")
		return
	}
	c.Client.discardTx()
	c.Client.unwatchAll()
	c.W.OK()
}

func cmdExec(c *Ctx) {
	cl := c.Client
	if !cl.multi {
		c.W.Error("ERR EXEC without MULTI")
		return
	}
	if cl.txFailed {
		cl.discardTx()
		cl.unwatchAll()
		c.W.Error("EXECABORT Transaction discarded because of previous errors.")
		return
	}
	queued := cl.queued
	eng := c.Srv.Eng
	eng.Lock(engine.AllShards)
	if c.routed != nil {
		// The queued commands' keys are routed again, as a single
		// command's are once its shards are locked.
		if msg := c.Srv.rerouted(c); msg != "" {
			eng.Unlock(engine.AllShards)
			cl.discardTx()
			cl.unwatchAll()
			c.W.Error(msg)
			return
		}
	}
	if cl.watchFailed(c.Now) {
		eng.Unlock(engine.AllShards)
		cl.discardTx()
		cl.unwatchAll()
		c.W.NullArray()
		return
	}
	c.W.Array(len(queued))
	for _, q := range queued {
		// Permissions are checked again: they may have changed since the
		// command was queued.
		if r := cl.aclRules(); r != nil {
			if res, pos := r.Check(q.spec, q.args); res != acl.OK {
				object := q.spec.FullName()
				if res != acl.DeniedCmd {
					object = string(q.args[pos])
				}
				c.Srv.aclLogAdd(cl, res, acl.CtxMulti, object, "")
				c.W.Error(aclExecDenied(res))
				continue
			}
		}
		sub := Ctx{Srv: c.Srv, Client: cl, W: c.W, Args: q.args, Now: c.Now, DB: cl.DB(), Spec: q.spec, held: true}
		c.Srv.runGuarded(&sub)
	}
	// A SUBSCRIBE among the commands kept the pub/sub registry so that no
	// message could come before this reply; it is complete now.
	c.Srv.execDone(cl)
	// Clients blocked on keys the transaction pushed to are served at its
	// end, as in Redis, before anything else can see those keys.
	if len(cl.ready) > 0 {
		hc := *c
		hc.held = true // every shard is locked; the transaction commits it all
		c.Srv.serveReady(&hc, engine.AllShards)
	}
	if off := c.Srv.propagateHeld(cl); off != 0 {
		cl.woff = off
	}
	eng.Unlock(engine.AllShards)
	cl.discardTx()
	cl.unwatchAll()
}

// runGuarded runs a command inside EXEC or a script, where a panic must not
// leave the shard locks held by the caller behind: it becomes an error
// reply for that command alone.
func (s *Server) runGuarded(c *Ctx) {
	defer func() {
		if r := recover(); r != nil {
			if s.Net.OnPanic != nil {
				s.Net.OnPanic(r)
			}
			c.W.Error("internal error")
		}
	}()
	s.run(c)
}

// watchFailed reports whether a watched key changed or expired since WATCH.
// All shards must be locked.
func (cl *Client) watchFailed(now int64) bool {
	if len(cl.watching) == 0 {
		return false
	}
	if cl.watch.Dirty() {
		return true
	}
	eng := cl.srv.Eng
	for _, wk := range cl.watching {
		k := []byte(wk.key)
		if eng.ShardFor(k).IsExpired(wk.db, k, now) {
			return true
		}
	}
	return false
}

func cmdWatch(c *Ctx) {
	cl := c.Client
	if cl.multi {
		c.W.Error("ERR WATCH inside MULTI is not allowed")
		return
	}
	eng := c.Srv.Eng
	for _, k := range c.Args[1:] {
		dup := false
		for _, wk := range cl.watching {
			if wk.db == c.DB && wk.key == string(k) {
				dup = true
				break
			}
		}
		if dup {
			continue
		}
		s := eng.ShardFor(k)
		s.Lock()
		s.AddWatch(c.DB, k, c.Now, &cl.watch)
		s.Unlock()
		cl.watching = append(cl.watching, watchedKey{db: c.DB, key: string(k)})
	}
	c.W.OK()
}

func cmdUnwatch(c *Ctx) {
	c.Client.unwatch(c.held)
	c.W.OK()
}
