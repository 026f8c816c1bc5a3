package scripting

import (
	"time"

	"github.com/limitkv/limitkv/rdb"
)

// FUNCTION DUMP's payload, which FUNCTION RESTORE, full syncs and
// snapshots read: each library as RDB_OPCODE_FUNCTION2 and its code, in
// RDB's envelope (version, CRC-64).

// RDB's opcodes for a library: RDB_OPCODE_FUNCTION2 (the code), and the
// layout of Redis 7.0's release candidates, which Redis still reads.
const (
	rdbOpFunction2 = 245
	rdbOpFunction  = 246
)

// dump is FUNCTION DUMP's payload; the caller holds reg.mu.
func (reg *Registry) dump() []byte {
	var b []byte
	for _, lib := range reg.current().sorted() {
		b = append(b, rdbOpFunction2)
		b = rdb.AppendString(b, lib.code)
	}
	return rdb.Seal(b)
}

// Dump returns the libraries as FUNCTION DUMP's payload.
func (reg *Registry) Dump() []byte {
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	return reg.dump()
}

// DumpHeld returns the libraries as FUNCTION DUMP's payload, read under
// the registry's lock, which release lets go: a full sync holds it until
// it has read its offset, so that a change is either in the payload or
// in the stream after that offset.
func (reg *Registry) DumpHeld() (payload []byte, release func()) {
	reg.mu.RLock()
	return reg.dump(), reg.mu.RUnlock
}

// Snapshot returns the libraries as FUNCTION DUMP's payload (nil when
// there are none), and a number that changes whenever they do: what
// snapshots keep.
func (reg *Registry) Snapshot() ([]byte, uint64) {
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	gen := reg.gen.Load()
	if len(reg.current().libs) == 0 {
		return nil, gen
	}
	return reg.dump(), gen
}

// Payload is a payload's libraries, read and compiled before any lock is
// taken, with the error of a payload that could not be read to the end
// (the libraries before the fault are kept, as Redis reports the fault
// only after it has loaded them).
type Payload struct {
	libs    []*Compiled
	readErr string
}

// OpenPayload checks a payload's envelope, then reads and compiles its
// libraries; the error is the envelope's.
func OpenPayload(b []byte) (*Payload, error) {
	body, err := rdb.Open(b)
	if err != nil {
		return nil, err
	}
	p := &Payload{}
	r := rdb.NewReader(body)
	for r.Remaining() > 0 {
		code, msg := readFunctionRecord(r)
		if msg != "" {
			p.readErr = msg
			break
		}
		p.libs = append(p.libs, CompileLibrary(code))
	}
	return p, nil
}

// readFunctionRecord reads one library's record (rdbFunctionLoad).
func readFunctionRecord(r *rdb.Reader) ([]byte, string) {
	op := r.Byte()
	if r.Err() != nil {
		return nil, "can not read data type"
	}
	var code []byte
	switch op {
	case rdbOpFunction2:
		code = r.String()
		if r.Err() != nil {
			return nil, "Failed loading library payload"
		}
	case rdbOpFunction:
		name := r.String()
		if r.Err() != nil {
			return nil, "Failed loading library name"
		}
		eng := r.String()
		if r.Err() != nil {
			return nil, "Failed loading engine name"
		}
		hasDesc := r.Len()
		if r.Err() != nil {
			return nil, "Failed loading library description indicator"
		}
		if hasDesc != 0 {
			if r.String(); r.Err() != nil {
				return nil, "Failed loading library description"
			}
		}
		blob := r.String()
		if r.Err() != nil {
			return nil, "Failed loading library blob"
		}
		code = append(append(append(append([]byte("#!"), eng...), " name="...), name...), '\n')
		code = append(code, blob...)
	default:
		return nil, "given type is not a function"
	}
	return code, ""
}

// RestorePolicy is what FUNCTION RESTORE does with the libraries there
// are.
type RestorePolicy int

const (
	// RestoreAppend adds the payload's libraries, failing on a name
	// taken; RestoreReplace replaces the libraries of the same names;
	// RestoreFlush replaces them all.
	RestoreAppend RestorePolicy = iota
	RestoreReplace
	RestoreFlush
)

// Restore is FUNCTION RESTORE, inside Change: it loads the payload's
// libraries, their code running for at most timeout each (0: no limit),
// and joins them to the registry's under policy, or changes nothing and
// returns Redis's error text.
func (reg *Registry) Restore(p *Payload, policy RestorePolicy, timeout time.Duration) string {
	fresh := newLibrarySet()
	for _, cl := range p.libs {
		if _, msg := reg.create(cl, false, fresh, timeout); msg != "" {
			return msg
		}
	}
	if p.readErr != "" {
		return p.readErr
	}
	cur := reg.current()
	if policy == RestoreFlush {
		reg.cur = fresh
		return ""
	}
	// libraryJoin: the libraries replaced are put back if a function
	// collides.
	var replaced []*Library
	undo := func() {
		for _, lib := range replaced {
			cur.link(lib)
		}
	}
	for _, lib := range fresh.sorted() {
		old := cur.libs[lib.name]
		if old == nil {
			continue
		}
		if policy != RestoreReplace {
			undo()
			return "Library " + lib.name + " already exists"
		}
		cur.unlink(old)
		replaced = append(replaced, old)
	}
	for _, lib := range fresh.sorted() {
		for _, f := range lib.fns {
			if cur.funcs[f.key] != nil {
				undo()
				return "Function " + f.name + " already exists"
			}
		}
	}
	for _, lib := range fresh.sorted() {
		cur.link(lib)
	}
	return ""
}

// Replace replaces the libraries with a snapshot's (Snapshot's payload),
// their code running without a time limit, before the server serves; the
// caller holds every shard lock. The generation stays: the libraries are
// those the snapshot has. It returns Redis's error text, or "".
func (reg *Registry) Replace(p *Payload) string {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	defer reg.noteMemory()
	defer func() {
		if reg.broken {
			reg.rebuildLocked()
		}
	}()
	return reg.Restore(p, RestoreFlush, 0)
}
