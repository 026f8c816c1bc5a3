package commands

import (
	"hash/maphash"
	"net"
	"strconv"
	"time"

	"github.com/limitkv/limitkv/cmdspec"
	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/migrate"
)

// migrateCommands: MIGRATE, whose network I/O holds no shard lock.
func migrateCommands() []*command {
	return []*command{
		cmd("migrate", -6, "write selflock may_wait", cmdMigrate).withKeys(migrateKeys),
	}
}

// MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE]
// [AUTH password | AUTH2 username password] [KEYS key...]
//
// As Redis's migrateCommand: the keys found are sent to the target as
// RESTORE commands (after AUTH and SELECT), in one write; each one the
// target accepts is deleted here, unless COPY.
//
// Unlike Redis, which does all of it in its one thread, limitkv never
// holds a shard lock while it waits for the network: it dumps the keys
// under their shards' locks, releases them, talks to the target, then
// takes the locks again to delete what the target took. A key written by
// another client in between is not deleted: its new value, which the
// target never saw, would be lost otherwise, while keeping it loses
// nothing (the target holds the value as it was when MIGRATE read it, as
// if the write had come just after the MIGRATE). Whether the key is
// unchanged is told by a 64-bit hash of its value and expiry in the
// engine's encoding, taken both times. Inside MULTI or a script every
// shard is already locked and stays so, as Redis's server does.
//
// The exchange with the target, and the connections kept for the next
// one, are the migrate package's.

const msgMigrateKeys = "When using MIGRATE KEYS option, the key argument must be set to the empty string"

// migrateSecrets says which arguments of MIGRATE the slow log and MONITOR
// must not show: AUTH's password, AUTH2's username and password, as far
// as Redis's parser redacts them before it stops.
func migrateSecrets(args [][]byte) func(int) bool {
	hide := map[int]bool{}
	for j := 6; j < len(args); j++ {
		more := len(args) - 1 - j
		switch {
		case is(args[j], "COPY"), is(args[j], "REPLACE"):
		case is(args[j], "AUTH") && more >= 1:
			hide[j+1] = true
			j++
		case is(args[j], "AUTH2") && more >= 2:
			hide[j+1], hide[j+2] = true, true
			j += 2
		default:
			j = len(args)
		}
	}
	return func(j int) bool { return hide[j] }
}

// migrateKeys finds MIGRATE's keys as Redis does for ACL checks and
// COMMAND GETKEYS: from its key specs, the key argument, unless the
// second spec, which is incomplete, finds a KEYS (looking back from the
// next to last argument); then with migrateGetKeys: scanning forwards,
// skipping AUTH's and AUTH2's arguments, the keys after the first KEYS
// if the key argument is empty, none if it is not (MIGRATE refuses that).
func migrateKeys(args [][]byte, out []cmdspec.KeyRef) []cmdspec.KeyRef {
	keys := false
	for i := len(args) - 2; i >= 2; i-- {
		if is(args[i], "KEYS") {
			keys = true
			break
		}
	}
	if !keys {
		return append(out, cmdspec.KeyRef{Pos: 3, Spec: 0})
	}
	first, num := 3, 1
	for j := 6; j < len(args); j++ {
		switch {
		case is(args[j], "KEYS"):
			if len(args[3]) > 0 {
				num = 0
			} else {
				first, num = j+1, len(args)-j-1
			}
			j = len(args)
		case is(args[j], "AUTH"):
			j++
		case is(args[j], "AUTH2"):
			j += 2
		}
	}
	for i := first; i < first+num; i++ {
		out = append(out, cmdspec.KeyRef{Pos: i, Spec: 0})
	}
	return out
}

var migrateSeed = maphash.MakeSeed()

// migrating is one key on its way: its name, what was sent, and the hash
// of its value when it was read.
type migrating struct {
	key  []byte
	sum  uint64
	sent bool
}

func cmdMigrate(c *Ctx) {
	var copyKeys, replace bool
	var user, pass []byte
	auth := false
	keys := c.Args[3:4]
	for j := 6; j < len(c.Args); j++ {
		more := len(c.Args) - 1 - j
		switch {
		case is(c.Args[j], "COPY"):
			copyKeys = true
		case is(c.Args[j], "REPLACE"):
			replace = true
		case is(c.Args[j], "AUTH"):
			if more < 1 {
				c.W.Error(msgSyntax)
				return
			}
			j++
			auth, user, pass = true, nil, c.Args[j]
		case is(c.Args[j], "AUTH2"):
			if more < 2 {
				c.W.Error(msgSyntax)
				return
			}
			auth, user, pass = true, c.Args[j+1], c.Args[j+2]
			j += 2
		case is(c.Args[j], "KEYS"):
			if len(c.Args[3]) != 0 {
				c.W.Error(msgMigrateKeys)
				return
			}
			keys = c.Args[j+1:]
			j = len(c.Args)
		default:
			c.W.Error(msgSyntax)
			return
		}
	}
	timeout, ok := c.Int(5)
	if !ok {
		return
	}
	db, ok := c.Int(4)
	if !ok {
		return
	}
	if timeout <= 0 {
		timeout = 1000
	}
	wait := time.Duration(timeout) * time.Millisecond

	eng := c.Srv.Eng
	var m engine.Mask
	for _, k := range keys {
		m = eng.Add(m, k)
	}

	// Read the keys and build the RESTORE commands under their locks.
	batch := migrate.Batch{Asking: c.Srv.Cluster != nil}
	var moving []migrating
	var failed string
	found := 0
	c.withShards(m, func() {
		now := eng.Now()
		var payload, scratch []byte
		for _, k := range keys {
			sh := eng.ShardFor(k)
			e, ok := sh.Lookup(c.DB, k, c.Now)
			if !ok {
				continue
			}
			found++
			ttl := int64(0)
			if exp := e.ExpireAt(); exp != 0 {
				// Expired since it was looked up (the command's clock
				// is older than now): Redis skips it.
				if ttl = exp - now; ttl < 0 {
					continue
				}
				ttl = max(ttl, 1)
			}
			var msg string
			payload, msg = dumpPayload(payload[:0], sh, e)
			if msg != "" {
				failed = msg
				return
			}
			batch.Restore(k, ttl, payload, replace)
			scratch, _ = engine.AppendValue(scratch[:0], sh, e)
			moving = append(moving, migrating{key: k, sum: maphash.Bytes(migrateSeed, scratch)})
		}
	})
	if failed != "" {
		c.W.Error(failed)
		return
	}
	if found == 0 {
		c.W.Simple("NOKEY")
		return
	}

	// Talk to the target, holding no lock (unless MULTI or a script
	// holds them all).
	target := migrate.Target{
		Addr:    net.JoinHostPort(string(c.Args[1]), strconv.FormatInt(engine.Atoi(c.Args[2]), 10)),
		Timeout: wait,
		DB:      db,
		Auth:    auth,
		User:    user,
		Pass:    pass,
	}
	acked, err := c.Srv.migrate.Send(target, &batch)
	for i := range acked {
		moving[i].sent = acked[i]
	}

	// Delete what the target took, if it is still what was sent.
	if !copyKeys {
		c.withShards(m, func() {
			var scratch []byte
			for _, mv := range moving {
				if !mv.sent {
					continue
				}
				sh := eng.ShardFor(mv.key)
				e, ok := sh.Find(c.DB, mv.key, c.Now)
				if !ok {
					continue
				}
				scratch, _ = engine.AppendValue(scratch[:0], sh, e)
				if maphash.Bytes(migrateSeed, scratch) == mv.sum {
					sh.DeleteEntry(e)
				}
			}
		})
	}
	if err == nil {
		c.W.OK()
	} else {
		c.W.Error(err.Error())
	}
}

// withShards runs fn with the shards of m locked (unless the request
// holds them all already) and sends what it changed to the replicas, as
// dispatch does around a handler: for SelfLock commands that must let go
// of their locks between steps.
func (c *Ctx) withShards(m engine.Mask, fn func()) {
	s := c.Srv
	if !c.held {
		s.Eng.Lock(m)
		defer s.Eng.Unlock(m)
	}
	fn()
	if s.Repl.Recording() {
		s.propagate(c, m, false)
	}
}
