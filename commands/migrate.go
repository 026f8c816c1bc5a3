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
// Unlike Redis, which does all of it in its one thread, limitkv does not
// hold a shard lock while it waits for the network, but in a last round:
// it dumps the keys under their shards' locks, releases them, talks to
// the target, then takes the locks again to delete what the target took.
// A key is deleted only if its value is still the one the target
// acknowledged; whether it is is told by a 64-bit hash of its value and
// expiry in the engine's encoding, taken both times. A key another
// client wrote in between is sent again, its current value replacing
// the target's copy, and the check is made again once the target has
// it: the target's copy cannot have been used meanwhile, since while a
// key exists here the cluster routes its requests here, and to the
// target only once it is gone from here. A key that keeps changing is
// sent a bounded number of times, the last under its shard's lock, held
// across that one exchange (which the timeout bounds), so that what the
// target holds when the key is deleted here is its last value whatever
// the load: the requests for that shard wait for one round trip, as
// every request waits for a whole MIGRATE in Redis. A key the target
// refuses, or does not answer for, stays here, as in Redis. Inside MULTI
// or a script every shard is already locked and stays so, as Redis's
// server does, and no key can change.
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

// migrateRounds bounds the exchanges MIGRATE has with its target: the
// first, then one per round in which other clients changed keys it had
// sent; the last of them holds the locks of the shards of the keys it
// sends.
const migrateRounds = 4

// migrating is one key on its way: its name and the hash of the value
// sent, read under its shard's lock.
type migrating struct {
	key []byte
	sum uint64
}

// migration is what one MIGRATE sends, and the reply it is building.
type migration struct {
	c      *Ctx
	target migrate.Target
	// failed is the first error: a reply of the target or a value that
	// could not be dumped; the keys concerned stay here.
	failed string
	// payload, value: scratch for DUMP payloads and the values hashed.
	payload, value []byte
}

// add dumps key's value e, read at now, into b, as a RESTORE with
// REPLACE if replace, and returns it with the hash of its value; ok is
// false for a key that expired since the command's clock read it
// (Redis skips it), or whose value has no payload.
func (mg *migration) add(b *migrate.Batch, sh *engine.Shard, e engine.Entry, key []byte, now int64, replace bool) (migrating, bool) {
	ttl := int64(0)
	if exp := e.ExpireAt(); exp != 0 {
		if ttl = exp - now; ttl < 0 {
			return migrating{}, false
		}
		ttl = max(ttl, 1)
	}
	var msg string
	if mg.payload, msg = dumpPayload(mg.payload[:0], sh, e); msg != "" {
		mg.fail(msg)
		return migrating{}, false
	}
	b.Restore(key, ttl, mg.payload, replace)
	mg.value, _ = engine.AppendValue(mg.value[:0], sh, e)
	return migrating{key: key, sum: maphash.Bytes(migrateSeed, mg.value)}, true
}

// send hands b to the target and returns the keys of sent it took.
func (mg *migration) send(b *migrate.Batch, sent []migrating) []migrating {
	acked, err := mg.c.Srv.migrate.Send(mg.target, b)
	if err != nil {
		mg.fail(err.Error())
	}
	took := sent[:0]
	for i, mv := range sent {
		if acked[i] {
			took = append(took, mv)
		}
	}
	return took
}

func (mg *migration) fail(msg string) {
	if mg.failed == "" {
		mg.failed = msg
	}
}

// settle deletes each key of took, which the target holds, whose value
// here is still the one sent, and sends the others again, their current
// values replacing the target's copies, until none is left or the
// rounds are up: the last round sends under the locks and deletes what
// the target takes before it lets them go.
func (mg *migration) settle(took []migrating) {
	eng := mg.c.Srv.Eng
	for round := 1; len(took) > 0; round++ {
		last := round >= migrateRounds-1
		var m engine.Mask
		for _, mv := range took {
			m = eng.Add(m, mv.key)
		}
		again := migrate.Batch{Asking: mg.c.Srv.Cluster != nil}
		var resent []migrating
		mg.c.withShards(m, func() {
			now := eng.Now()
			for _, mv := range took {
				sh := eng.ShardFor(mv.key)
				e, ok := sh.Find(mg.c.DB, mv.key, now)
				if !ok {
					continue
				}
				mg.value, _ = engine.AppendValue(mg.value[:0], sh, e)
				if maphash.Bytes(migrateSeed, mg.value) == mv.sum {
					sh.DeleteEntry(e)
					mg.c.notify(notifyGeneric, "del", mv.key)
					continue
				}
				if next, ok := mg.add(&again, sh, e, mv.key, now, true); ok {
					resent = append(resent, next)
				}
			}
			if !last || len(resent) == 0 {
				return
			}
			// No client can change these keys before they are deleted.
			for _, mv := range mg.send(&again, resent) {
				sh := eng.ShardFor(mv.key)
				if e, ok := sh.Find(mg.c.DB, mv.key, eng.Now()); ok {
					sh.DeleteEntry(e)
					mg.c.notify(notifyGeneric, "del", mv.key)
				}
			}
			resent = nil
		})
		if len(resent) == 0 {
			return
		}
		took = mg.send(&again, resent)
	}
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
	mg := &migration{c: c, target: migrate.Target{
		Addr:    net.JoinHostPort(string(c.Args[1]), strconv.FormatInt(engine.Atoi(c.Args[2]), 10)),
		Timeout: time.Duration(timeout) * time.Millisecond,
		DB:      db,
		Auth:    auth,
		User:    user,
		Pass:    pass,
	}}

	eng := c.Srv.Eng
	var m engine.Mask
	for _, k := range keys {
		m = eng.Add(m, k)
	}

	// Read the keys and build the RESTORE commands under their locks.
	batch := migrate.Batch{Asking: c.Srv.Cluster != nil}
	var moving []migrating
	found := 0
	c.withShards(m, func() {
		now := eng.Now()
		for _, k := range keys {
			sh := eng.ShardFor(k)
			e, ok := sh.Lookup(c.DB, k, c.Now)
			if !ok {
				continue
			}
			found++
			if mv, ok := mg.add(&batch, sh, e, k, now, replace); ok {
				moving = append(moving, mv)
			}
		}
	})
	if mg.failed != "" {
		c.W.Error(mg.failed)
		return
	}
	if found == 0 {
		c.W.Simple("NOKEY")
		return
	}

	// Talk to the target, holding no lock (unless MULTI or a script
	// holds them all), then delete what it took.
	took := mg.send(&batch, moving)
	if !copyKeys {
		mg.settle(took)
	}
	if mg.failed == "" {
		c.W.OK()
	} else {
		c.W.Error(mg.failed)
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
