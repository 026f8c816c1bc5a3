package commands

import (
	"context"
	"log/slog"
	"time"

	"github.com/limitkv/limitkv/acl"
	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/resp"
	"github.com/limitkv/limitkv/scripting"
)

// The bridge from package scripting to the server: scriptHost is what the
// runtime asks of the server, and a scriptSession the client as which a
// script's redis.call runs its commands through the server's table, with
// the checks and texts of Redis's scriptCall.

// scriptHost is the server as scripting.Host.
type scriptHost struct{ srv *Server }

func (h scriptHost) LockAll()   { h.srv.Eng.Lock(engine.AllShards) }
func (h scriptHost) UnlockAll() { h.srv.Eng.Unlock(engine.AllShards) }

func (h scriptHost) BusyThreshold() time.Duration { return h.srv.Cfg.BusyThreshold() }

func (h scriptHost) Log(level slog.Level, msg string, args ...any) {
	h.srv.Log.Log(context.Background(), level, msg, args...)
}

func (h scriptHost) Panicked(v any) {
	if h.srv.Net.OnPanic != nil {
		h.srv.Net.OnPanic(v)
	}
}

// NewSession gives a Lua state a client of its own, with its own SELECTed
// database, as Redis's Lua client has.
func (h scriptHost) NewSession() scripting.Session {
	s := &scriptSession{srv: h.srv, client: &Client{srv: h.srv}}
	s.client.authed = true
	s.client.multiLen.Store(-1)
	return s
}

// scriptSession runs the commands of one Lua state's scripts. Only the
// holder of every shard lock uses it.
type scriptSession struct {
	srv    *Server
	client *Client
	// sub is the context the commands a script calls run with, kept so
	// that a call allocates none.
	sub Ctx

	// The run in progress: the request that runs the script, and the
	// database the script's commands run in (SELECT may change it).
	caller *Ctx
	db     int
}

// Refusal: a full sync that began to replace the keyspace since the call
// was let through is seen here, under every shard lock, which the
// replacement needs too (scripts do not count themselves in flight); so
// is a cluster that routes the script's declared keys elsewhere now, as
// dispatch routes a command again once it holds its keys' locks.
func (s *scriptSession) Refusal(caller any) string {
	c := caller.(*Ctx)
	if s.srv.loadState.Load() != 0 {
		return s.srv.loadingRefusal(c.Client, c.Spec)
	}
	if c.routed != nil {
		return s.srv.rerouted(c)
	}
	return ""
}

func (s *scriptSession) Begin(caller any) {
	c := caller.(*Ctx)
	s.caller, s.db = c, c.DB
	s.client.db.Store(int32(c.DB))
	s.client.user.Store(c.Client.user.Load()) // the script runs as its caller's user
}

// End ends a run: its effects reach the replicas as one, unless it was
// stopped halfway (SHUTDOWN NOSAVE): then none of it may. Inside a
// transaction they join the transaction's.
func (s *scriptSession) End(out scripting.Outcome) {
	c, srv := s.caller, s.srv
	s.caller = nil
	srv.stats.Commands.Add(s.client.commands.Swap(0))
	if out.Counted {
		c.errorsCounted, c.failedReply = true, out.Failed
	}
	switch {
	case out.Killed:
		srv.dropEffects(s.client)
	case c.held:
		// Inside EXEC: the clients blocked on keys the script pushed to
		// are served at the transaction's end.
		c.Client.ready = append(c.Client.ready, s.client.ready...)
		clear(s.client.ready)
		s.client.ready = s.client.ready[:0]
		srv.joinEffects(c.Client, s.client)
	default:
		if len(s.client.ready) > 0 {
			// Served at the script's end, every shard still held.
			sc := Ctx{Srv: srv, Client: s.client, W: c.W, Now: c.Now, DB: c.DB, Spec: c.Spec, held: true}
			srv.serveReady(&sc, engine.AllShards)
		}
		if off := srv.propagateHeld(s.client); off != 0 {
			c.Client.woff = off
		}
	}
}

func (s *scriptSession) CountError(reply []byte) { s.srv.countError(reply) }

func (s *scriptSession) Call(spec *cmdspec.Spec, argv [][]byte, w *resp.Writer) {
	s.sub = Ctx{Srv: s.srv, Client: s.client, W: w, Args: argv, Now: s.caller.Now, DB: s.db, Spec: spec, held: true, script: true, origin: s.caller.trackingClient()}
	s.srv.runGuarded(&s.sub)
	s.db = s.sub.DB
	s.sub = Ctx{}
}

// Command finds the command a script calls and checks that the script
// may run it, with Redis's texts and in Redis's order.
func (s *scriptSession) Command(argv [][]byte, rules scripting.CallRules) (*cmdspec.Spec, string) {
	srv := s.srv
	spec := srv.Table.Lookup(argv[0])
	if spec != nil && len(spec.Sub) > 0 && len(argv) >= 2 {
		spec = spec.LookupSub(argv[1])
	}
	if spec == nil {
		return nil, "Unknown Redis command called from script"
	}
	if !spec.ArityOK(len(argv)) {
		srv.cmd(spec).reject.Add(1)
		return nil, "Wrong number of args calling Redis command from script"
	}
	if spec.Flags&cmdspec.NoScript != 0 {
		srv.cmd(spec).reject.Add(1)
		return nil, "This Redis command is not allowed from script"
	}
	// Redis's scriptVerifyAllowStale: a script runs on a stale replica
	// only if it declared allow-stale, and may call only stale commands.
	if n := srv.Repl; spec.Flags&cmdspec.Stale == 0 && n.Replica() && !n.Set.ServeStale.Load() && !n.LinkUp() {
		srv.cmd(spec).reject.Add(1)
		return nil, "Can not execute the command on a stale replica"
	}
	if msg := srv.checkScriptCall(s.caller.Client, spec, argv); msg != "" {
		srv.cmd(spec).reject.Add(1)
		return nil, msg
	}
	if rules.ReadOnly && spec.Flags&(cmdspec.Write|cmdspec.MayReplicate) != 0 {
		srv.cmd(spec).reject.Add(1)
		return nil, "Write commands are not allowed from read-only scripts."
	}
	// Redis's scriptVerifyWriteCommandAllow: a script that has not written
	// yet may not start writing on a read-only replica or without enough
	// good replicas (a script without a shebang, admitted as a read); once
	// it has written, it must be let finish.
	if spec.Flags&cmdspec.Write != 0 && rules.Clean() {
		n := srv.Repl
		if n.Replica() && n.Set.ReadOnly.Load() && !s.caller.Client.master {
			srv.cmd(spec).reject.Add(1)
			return nil, "-" + msgReadOnlyReplica
		}
		if n.Set.MinReplicas.Load() > 0 && !n.WriteAllowed() {
			srv.cmd(spec).reject.Add(1)
			return nil, "-" + msgNoReplicas
		}
	}
	// Redis's scriptVerifyOOM: memory was over maxmemory when the script
	// began, and this would be its first write: refuse it. After a write
	// the script must be let finish.
	if spec.Flags&cmdspec.DenyOOM != 0 && !rules.AllowOOM && s.caller.Client.oomAtStart &&
		srv.Cfg.maxMemory.Load() != 0 && rules.Clean() {
		srv.cmd(spec).reject.Add(1)
		return nil, "-" + msgOOM
	}
	return spec, ""
}

// ACLAllows is redis.acl_check_cmd's: whether the caller's user may run
// the command with these arguments (its keys and channels included).
func (s *scriptSession) ACLAllows(argv [][]byte) (allowed, known bool) {
	spec := s.srv.Table.Lookup(argv[0])
	if spec != nil && len(spec.Sub) > 0 && len(argv) >= 2 {
		spec = spec.LookupSub(argv[1])
	}
	if spec == nil {
		return false, false
	}
	allowed = true
	if rules := s.caller.Client.aclRules(); rules != nil {
		res, _ := rules.Check(spec, argv)
		allowed = res == acl.OK
	}
	return allowed, true
}
