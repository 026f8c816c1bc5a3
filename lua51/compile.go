package lua51

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"unsafe"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// Compile compiles a script as Lua 5.1 does, with the messages Lua 5.1
// gives for what it refuses ("user_script:1: unexpected symbol near
// '<eof>'"). The function it returns runs in any State (State.Bind).
func Compile(src []byte) (*lua.FunctionProto, error) {
	proto, msg := compileChunk(src, ChunkName)
	if msg != "" {
		return nil, errors.New(msg)
	}
	return proto, nil
}

// compileChunk compiles Lua source as Lua 5.1 accepts it. chunk is the
// chunk's name as messages show it (Lua's chunkid). On failure it returns
// Lua's message ("user_script:1: unexpected symbol near '<eof>'").
func compileChunk(src []byte, chunk string) (*lua.FunctionProto, string) {
	src, msg := luaSyntaxCheck(src, chunk)
	if msg != "" {
		return nil, msg
	}
	stmts, err := parse.Parse(bytes.NewReader(src), chunk)
	if err == nil {
		proto, cerr := lua.Compile(stmts, chunk)
		if cerr == nil {
			// Lua 5.1's main chunk has no "arg" table (gopher-lua would
			// build one, with a hash part, on every run).
			proto.IsVarArg &^= lua.VarArgNeedsArg
			compactProto(proto)
			return proto, ""
		}
		err = cerr
	}
	// Valid Lua 5.1 that gopher-lua refuses: one of its own limits.
	return nil, chunk + ": " + strings.TrimSpace(err.Error())
}

// compactProto trims the slices gopher-lua's compiler leaves with room to
// grow (1024 instructions and positions for any function): a cached script
// costs its size rather than 16 KB more.
func compactProto(p *lua.FunctionProto) {
	p.Code = slices.Clip(slices.Clone(p.Code))
	p.DbgSourcePositions = slices.Clip(slices.Clone(p.DbgSourcePositions))
	p.Constants = slices.Clip(slices.Clone(p.Constants))
	p.DbgLocals = slices.Clip(slices.Clone(p.DbgLocals))
	p.DbgCalls = slices.Clip(slices.Clone(p.DbgCalls))
	p.DbgUpvalues = slices.Clip(slices.Clone(p.DbgUpvalues))
	for _, child := range p.FunctionPrototypes {
		compactProto(child)
	}
}

// luaChunkID is Lua 5.1's luaO_chunkid: how a chunk name is shown in
// messages. "=name" shows as name, "@file" as file, and code (loadstring's
// default name) as [string "first line..."].
func luaChunkID(name string) string {
	const idSize = 60
	switch {
	case strings.HasPrefix(name, "="):
		name = name[1:]
		return name[:min(len(name), idSize-1)]
	case strings.HasPrefix(name, "@"):
		name = name[1:]
		if room := idSize - len(" '...' ") - 1; len(name) > room {
			return "..." + name[len(name)-room:]
		}
		return name
	}
	room := idSize - len(" [string \"...\"] ") - 1
	n := strings.IndexAny(name, "\r\n")
	if n < 0 {
		n = len(name)
	}
	n = min(n, room)
	if n < len(name) {
		return "[string \"" + name[:n] + "...\"]"
	}
	return "[string \"" + name + "\"]"
}

// ProtoBytes estimates a compiled chunk's memory: its code, constants,
// debug tables and nested functions.
func ProtoBytes(p *lua.FunctionProto) int64 {
	n := int64(unsafe.Sizeof(*p)) + int64(cap(p.Code))*4 + int64(cap(p.Constants))*16 +
		int64(cap(p.DbgSourcePositions))*8 + int64(cap(p.DbgLocals)+cap(p.FunctionPrototypes))*8 +
		int64(cap(p.DbgCalls))*24 + int64(cap(p.DbgUpvalues))*16
	for _, c := range p.Constants {
		if str, ok := c.(lua.LString); ok {
			n += int64(len(str))
		}
	}
	for _, up := range p.DbgUpvalues {
		n += int64(len(up))
	}
	for _, l := range p.DbgLocals {
		n += int64(unsafe.Sizeof(*l)) + int64(len(l.Name))
	}
	for _, f := range p.FunctionPrototypes {
		n += ProtoBytes(f)
	}
	return n
}
