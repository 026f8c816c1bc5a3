package scripting

import (
	"crypto/sha1"
	"encoding/hex"
	"sync"
	"sync/atomic"

	lua "github.com/yuin/gopher-lua"

	"github.com/limitkv/limitkv/lua51"
)

// Script is a compiled script of the cache.
type Script struct {
	sha   string // 40 lower-case hex digits
	proto *lua.FunctionProto
	flags Flags
	size  int64 // source and compiled code, for INFO's used_memory_scripts
	// fn is the compiled chunk bound to the sandbox of state fnOf; made
	// on first use, by the holder of the shard locks.
	fn   *lua.LFunction
	fnOf *lua51.State
}

// SHA1 returns the script's SHA1 in lower-case hex.
func (sc *Script) SHA1() string { return sc.sha }

// Flags returns what the script's shebang line declared.
func (sc *Script) Flags() Flags { return sc.flags }

// Cache is the script cache: scripts compiled once per SHA1, as EVAL,
// SCRIPT LOAD and EVALSHA find them.
type Cache struct {
	mu    sync.RWMutex
	bySHA map[string]*Script
	// bytes is the cached scripts' size (used_memory_scripts), read
	// without the lock by every used_memory.
	bytes atomic.Int64
}

// Stats returns the number of cached scripts and their bytes.
func (c *Cache) Stats() (n int, bytes int64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, sc := range c.bySHA {
		bytes += sc.size
	}
	return len(c.bySHA), bytes
}

// Bytes returns the cached scripts' size.
func (c *Cache) Bytes() int64 { return c.bytes.Load() }

// Lookup finds a cached script by SHA1, in any case.
func (c *Cache) Lookup(sha []byte) *Script {
	if len(sha) != 40 {
		return nil
	}
	var lower [40]byte
	for i, ch := range sha {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		lower[i] = ch
	}
	c.mu.RLock()
	sc := c.bySHA[string(lower[:])]
	c.mu.RUnlock()
	return sc
}

// Load returns the cached script for body, compiling and caching it first
// if needed; on failure it returns Redis's error text.
func (c *Cache) Load(body []byte) (*Script, string) {
	sum := sha1.Sum(body)
	var sha [40]byte
	hex.Encode(sha[:], sum[:])
	c.mu.RLock()
	sc := c.bySHA[string(sha[:])]
	c.mu.RUnlock()
	if sc != nil {
		return sc, ""
	}
	flags, skip, msg := ParseShebang(body)
	if msg != "" {
		return nil, msg
	}
	proto, err := lua51.Compile(body[skip:])
	if err != nil {
		return nil, "Error compiling script (new function): " + err.Error()
	}
	sc = &Script{sha: string(sha[:]), proto: proto, flags: flags,
		size: int64(len(body)+len(sha)) + lua51.ProtoBytes(proto)}
	c.mu.Lock()
	if old := c.bySHA[sc.sha]; old != nil {
		sc = old // compiled meanwhile by another connection
	} else {
		if c.bySHA == nil {
			c.bySHA = make(map[string]*Script)
		}
		c.bySHA[sc.sha] = sc
		c.bytes.Add(sc.size)
	}
	c.mu.Unlock()
	return sc, ""
}

// flush forgets every script.
func (c *Cache) flush() {
	c.mu.Lock()
	c.bySHA = nil
	c.bytes.Store(0)
	c.mu.Unlock()
}
