package replication

import (
	"strconv"

	"github.com/limitkv/limitkv/engine"
	"github.com/limitkv/limitkv/resp"
)

// Batch gathers the entries of one unit of work on a master (a command, a
// transaction, a script, a sweep of one shard) and appends them to the
// stream as one: wrapped in MULTI/EXEC when there are several and the unit
// is atomic. Each caller owns its Batch (a client keeps one), so building
// entries allocates nothing once the buffers have grown.
//
// Entries are built from the keys the engine logged as changed, read back
// as they are once the unit has run: the stream carries effects, not
// commands. The caller holds the locks of every shard it drains until
// Commit returns, so the stream's order is the keyspace's.
type Batch struct {
	n       *Node
	buf     []byte // entries, each prefixed by its database (see add)
	entries int
	log     []byte // a shard's effect log being read
	exp     []byte // its expired keys
	val     []byte // an encoded value
}

// NewBatch returns an empty batch for the node's stream.
func (n *Node) NewBatch() *Batch { return &Batch{n: n} }

// Recording reports whether the node keeps a stream: a master that has (or
// recently had) replicas. Commands skip building entries otherwise.
func (n *Node) Recording() bool { return n.recording.Load() }

// AsIs reports whether a command on the shards of m (locked) may be
// replicated as it is rather than as the states it leaves: not while a
// full sync has yet to capture one of them, since the replica would apply
// the command again to a copy that has it already. Key states, applied
// twice, are the same.
func (n *Node) AsIs(m engine.Mask) bool {
	for i := 0; m != 0; i++ {
		if m&1 != 0 && n.pending[i].Load() != 0 {
			return false
		}
		m >>= 1
	}
	return true
}

// An entry in buf is [db as 4 bytes][length as 4 bytes][RESP bytes]; db is
// -1 for entries that need no database (PUBLISH).
func (b *Batch) begin(db int) int {
	at := len(b.buf)
	b.buf = append(b.buf, byte(db>>24), byte(db>>16), byte(db>>8), byte(db), 0, 0, 0, 0)
	return at
}

func (b *Batch) end(at int) {
	n := len(b.buf) - at - 8
	b.buf[at+4], b.buf[at+5], b.buf[at+6], b.buf[at+7] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	b.entries++
}

// Drain adds an entry for every key the shard logged as changed: its
// state as it is now, or its deletion. The caller holds the shard's lock.
func (b *Batch) Drain(sh *engine.Shard) {
	if !sh.HasEffects() {
		return
	}
	exp := sh.TakeExpired(b.exp)
	log := sh.TakeEffects(b.log)
	for _, l := range [2][]byte{exp, log} {
		for len(l) > 0 {
			db, key, next, ok := engine.ReadChange(l)
			if !ok {
				break
			}
			l = next
			b.keyState(sh, db, key)
		}
	}
	b.log, b.exp = log[:0], exp[:0]
}

// Expired adds the deletions of the keys of the shard that expired during
// the command (as a replica expires nothing by itself, they must precede a
// command replicated as it is), forgets the rest of its effect log, and
// reports whether the command changed anything else there. The shard is
// locked.
func (b *Batch) Expired(sh *engine.Shard) (changed bool) {
	if !sh.HasEffects() {
		return false
	}
	b.expirations(sh)
	log := sh.TakeEffects(b.log)
	b.log = log[:0]
	return len(log) > 0
}

// expirations adds the deletions of the keys of the shard that expired
// since its logs were taken. The shard is locked.
func (b *Batch) expirations(sh *engine.Shard) {
	exp := sh.TakeExpired(b.exp)
	for rest := exp; len(rest) > 0; {
		d, key, next, ok := engine.ReadChange(rest)
		if !ok {
			break
		}
		rest = next
		b.deletion(d, key)
	}
	b.exp = exp[:0]
}

func (b *Batch) deletion(db int, key []byte) {
	at := b.begin(db)
	b.buf = append(b.buf, "*2\r\n$7\r\nLKV.DEL\r\n"...)
	b.buf = appendBulk(b.buf, key)
	b.end(at)
}

// Expiries adds, for every key the shard logged as changed by a command
// that changes expiries only, its expiry as PEXPIREAT or PERSIST, or its
// deletion. The shard is locked.
func (b *Batch) Expiries(sh *engine.Shard) {
	if !sh.HasEffects() {
		return
	}
	b.expirations(sh) // keys that expired as the command looked at them
	log := sh.TakeEffects(b.log)
	var n [20]byte
	for rest := log; len(rest) > 0; {
		db, key, next, ok := engine.ReadChange(rest)
		if !ok {
			break
		}
		rest = next
		e, live := sh.Raw(db, key)
		switch {
		case !live:
			b.deletion(db, key)
		case e.ExpireAt() == 0:
			b.Command(db, []byte("PERSIST"), key)
		default:
			b.Command(db, []byte("PEXPIREAT"), key, strconv.AppendInt(n[:0], e.ExpireAt(), 10))
		}
	}
	b.log = log[:0]
}

// Skip forgets the keys the shard logged as changed (a script stopped
// halfway, whose effects must not reach replicas). The shard is locked.
func (b *Batch) Skip(sh *engine.Shard) {
	if sh.HasEffects() {
		b.log = sh.TakeEffects(b.log)[:0]
		b.exp = sh.TakeExpired(b.exp)[:0]
	}
}

// keyState adds the entry that gives key its current state.
func (b *Batch) keyState(sh *engine.Shard, db int, key []byte) {
	e, ok := sh.Raw(db, key)
	if ok {
		var err error
		b.val, err = engine.AppendValue(b.val[:0], sh, e)
		ok = err == nil
	}
	at := b.begin(db)
	if ok {
		b.buf = append(b.buf, "*3\r\n$7\r\nLKV.SET\r\n"...)
		b.buf = appendBulk(b.buf, key)
		b.buf = appendBulk(b.buf, b.val)
	} else {
		b.buf = append(b.buf, "*2\r\n$7\r\nLKV.DEL\r\n"...)
		b.buf = appendBulk(b.buf, key)
	}
	b.end(at)
	if cap(b.val) > 1<<20 {
		b.val = nil // a huge value's buffer is not kept
	}
}

// Command adds args as an entry run as it is on replicas, in database db
// (-1: any). Only commands whose result does not depend on where or when
// they run belong here (FLUSHDB, SWAPDB, PUBLISH).
func (b *Batch) Command(db int, args ...[]byte) {
	at := b.begin(db)
	b.buf = resp.AppendCommand(b.buf, args...)
	b.end(at)
}

// Join moves the entries of other to the end of b.
func (b *Batch) Join(other *Batch) {
	b.buf = append(b.buf, other.buf...)
	b.entries += other.entries
	other.Reset()
}

// Empty reports whether the batch holds no entry.
func (b *Batch) Empty() bool { return b.entries == 0 }

// Commit appends the batch to the stream, wrapped in MULTI/EXEC if atomic
// and it has several entries, and empties it. It returns the stream's
// offset after the batch (for WAIT), or 0 when nothing was appended.
func (b *Batch) Commit(atomic bool) int64 {
	if b.entries == 0 {
		return 0
	}
	off := b.n.appendBatch(b.buf, b.entries > 1 && atomic)
	b.buf = b.buf[:0]
	b.entries = 0
	if cap(b.buf) > 1<<20 {
		b.buf = nil
	}
	return off
}

// Reset drops the batch's entries (the node stopped recording).
func (b *Batch) Reset() {
	b.buf = b.buf[:0]
	b.entries = 0
}

// appendBatch writes a batch's entries to the stream with the SELECTs
// they need, under the stream's lock so that the stream's database is
// known.
func (n *Node) appendBatch(entries []byte, wrap bool) int64 {
	n.streamMu.Lock()
	defer n.streamMu.Unlock()
	bl := n.backlog
	if bl == nil {
		return 0
	}
	out := n.scratch[:0]
	if wrap {
		out = append(out, entryMulti...)
	}
	for p := 0; p < len(entries); {
		db := int(int32(uint32(entries[p])<<24 | uint32(entries[p+1])<<16 | uint32(entries[p+2])<<8 | uint32(entries[p+3])))
		size := int(uint32(entries[p+4])<<24 | uint32(entries[p+5])<<16 | uint32(entries[p+6])<<8 | uint32(entries[p+7]))
		p += 8
		if db >= 0 && db != n.streamDB {
			out = appendSelect(out, db)
			n.streamDB = db
		}
		out = append(out, entries[p:p+size]...)
		p += size
	}
	if wrap {
		out = append(out, entryExec...)
	}
	end := bl.Append(out)
	if cap(out) <= 1<<20 {
		n.scratch = out[:0]
	} else {
		n.scratch = nil
	}
	return end
}

// appendRaw appends bytes that are complete entries (a heartbeat, a
// GETACK) outside any database.
func (n *Node) appendRaw(b []byte) int64 {
	n.streamMu.Lock()
	defer n.streamMu.Unlock()
	if n.backlog == nil {
		return 0
	}
	return n.backlog.Append(b)
}

// loadEntry applies a LKV.SET or LKV.DEL entry of a master to the engine;
// the caller holds the key's shard lock (or every lock, for a group).
func loadEntry(eng *engine.Engine, lim engine.Limits, db int, args [][]byte) error {
	switch {
	case isCmd(args[0], "LKV.SET"):
		if len(args) != 3 {
			return errArity(args)
		}
		return eng.ShardFor(args[1]).StoreValue(db, args[1], args[2], lim)
	case isCmd(args[0], "LKV.DEL"):
		if len(args) < 2 {
			return errArity(args)
		}
		for _, k := range args[1:] {
			eng.ShardFor(k).Remove(db, k)
		}
		return nil
	}
	return nil
}

func errArity(args [][]byte) error {
	return &applyError{"wrong number of arguments for " + strconv.Quote(string(args[0]))}
}

type applyError struct{ msg string }

func (e *applyError) Error() string { return e.msg }

// isCmd compares a command name with upper-case want, ignoring case.
func isCmd(name []byte, want string) bool {
	if len(name) != len(want) {
		return false
	}
	for i := range len(name) {
		c := name[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		if c != want[i] {
			return false
		}
	}
	return true
}
