package lua51

import (
	"unsafe"

	lua "github.com/yuin/gopher-lua"
)

// A state's memory, for INFO's used_memory_lua and maxmemory: its stacks,
// the objects of its sandbox (the libraries' tables and functions, walked
// once when the state is made), the functions it bound for the scripts it
// ran, and its KEYS and ARGV tables, which keep the capacity of the
// largest run. What a script allocates and drops is garbage, not the
// state's: the sandbox's globals are read-only, so nothing a script makes
// outlives its run. The compiled scripts are the script cache's (INFO's
// used_memory_scripts), not counted here.

const (
	tableBytes    = int64(unsafe.Sizeof(lua.LTable{}))
	functionBytes = int64(unsafe.Sizeof(lua.LFunction{}))
	valueBytes    = 16 // an interface
	// entryBytes is a hash part's entry: key and value in the map, the key
	// in the iteration order slice and its index.
	entryBytes = 2*valueBytes + valueBytes + 8 + 16
)

// Memory is the bytes the state holds.
func (s *State) Memory() int {
	return s.stackBytes() + s.callLen + int(s.base+s.bound*functionBytes+s.keysMem.bytes()+s.argvMem.bytes())
}

// argMemory is what a KEYS or ARGV table holds: the slots of the largest
// run since it was made (gopher-lua keeps an array's capacity) and the
// strings of the last run.
type argMemory struct {
	slots, strings int64
}

func (m *argMemory) note(fresh bool, args [][]byte) {
	if fresh {
		m.slots = 0
	}
	m.slots = max(m.slots, int64(len(args)))
	m.strings = 0
	for _, a := range args {
		m.strings += int64(len(a))
	}
}

func (m *argMemory) bytes() int64 {
	if m.slots == 0 && m.strings == 0 {
		return 0
	}
	return tableBytes + m.slots*valueBytes + m.strings
}

// objectBytes walks what v reaches, counting each table, function,
// string and userdata once.
func objectBytes(v lua.LValue, seen map[any]bool) int64 {
	switch x := v.(type) {
	case lua.LString:
		return int64(len(x))
	case *lua.LTable:
		if x == nil || seen[x] {
			return 0
		}
		seen[x] = true
		n := tableBytes
		x.ForEach(func(k, v lua.LValue) {
			n += entryBytes + objectBytes(k, seen) + objectBytes(v, seen)
		})
		return n + objectBytes(x.Metatable, seen)
	case *lua.LFunction:
		if x == nil || seen[x] {
			return 0
		}
		seen[x] = true
		n := functionBytes + int64(len(x.Upvalues))*24
		for _, up := range x.Upvalues {
			n += objectBytes(up.Value(), seen)
		}
		if x.Proto != nil && !seen[x.Proto] {
			seen[x.Proto] = true
			n += ProtoBytes(x.Proto)
		}
		return n
	case *lua.LUserData:
		if x == nil || seen[x] {
			return 0
		}
		seen[x] = true
		return int64(unsafe.Sizeof(*x)) + objectBytes(x.Metatable, seen)
	}
	return 0
}
