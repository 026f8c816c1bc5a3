package lua51

import (
	"fmt"
	"reflect"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// Runtime errors in Lua 5.1's words. gopher-lua words the errors its
// virtual machine raises its own way ("attempt to call a non-function
// object"); Lua 5.1 names the value at fault ("attempt to call local 'f'
// (a nil value)") by looking at the failing instruction and at what last
// wrote the register involved. That is done here, from the frame that
// raised the error, when the error handler runs.
//
// gopher-lua does not export a frame's program counter nor its registers;
// they are read with reflection. The field names are those of gopher-lua
// v1.1.2 (pinned in go.mod); should they change, the frame cannot be read
// and gopher-lua's own message is kept (TestRuntimeErrorTexts and
// TestGopherLuaInternals fail).

// gopher-lua's instruction encoding, as in its opcode.go (Lua 5.1's layout
// with its own order of fields).
func luaOp(i uint32) int   { return int(i >> 26) }
func luaArgA(i uint32) int { return int(i>>18) & 0xff }
func luaArgB(i uint32) int { return int(i & 0x1ff) }
func luaArgC(i uint32) int { return int(i>>9) & 0x1ff }
func luaArgBx(i uint32) int {
	return int(i & 0x3ffff)
}
func luaArgSBx(i uint32) int { return luaArgBx(i) - (1<<18-1)>>1 }

const luaRKBit = 1 << 8

// gopher-lua's opcodes (its opcode.go).
const (
	opMove = iota
	opMoveN
	opLoadK
	opLoadBool
	opLoadNil
	opGetUpval
	opGetGlobal
	opGetTable
	opGetTableKS
	opSetGlobal
	opSetUpval
	opSetTable
	opSetTableKS
	opNewTable
	opSelf
	opAdd
	opSub
	opMul
	opDiv
	opMod
	opPow
	opUnm
	opNot
	opLen
	opConcat
	opJmp
	opEq
	opLt
	opLe
	opTest
	opTestSet
	opCall
	opTailCall
	opReturn
	opForLoop
	opForPrep
	opTForLoop
	opSetList
	opClose
	opClosure
	opVararg
	opNop
)

// luaOpSetsA tells which opcodes write register A (gopher-lua's opProps).
var luaOpSetsA = map[int]bool{
	opMove: true, opMoveN: true, opLoadK: true, opLoadBool: true, opLoadNil: true, opGetUpval: true,
	opGetGlobal: true, opGetTable: true, opGetTableKS: true, opNewTable: true, opSelf: true,
	opAdd: true, opSub: true, opMul: true, opDiv: true, opMod: true, opPow: true, opUnm: true,
	opNot: true, opLen: true, opConcat: true, opTest: true, opTestSet: true, opCall: true,
	opTailCall: true, opForLoop: true, opForPrep: true, opClosure: true, opVararg: true,
}

// valueStack finds the state's value stack (its registry's array), which
// gopher-lua does not export; the Value reads the live field.
func valueStack(L *lua.LState) (reflect.Value, bool) {
	reg := reflect.ValueOf(L).Elem().FieldByName("reg")
	if !reg.IsValid() || reg.Kind() != reflect.Pointer || reg.IsNil() {
		return reflect.Value{}, false
	}
	regs := reg.Elem().FieldByName("array")
	return regs, regs.IsValid() && regs.Kind() == reflect.Slice
}

// callStackBytes is the size of the state's fixed call stack (the bulk of
// an idle state), read the same way as the value stack; 0 if gopher-lua's
// layout changed.
func callStackBytes(L *lua.LState) int {
	st := reflect.ValueOf(L).Elem().FieldByName("stack")
	if !st.IsValid() || st.Kind() != reflect.Interface || st.IsNil() {
		return 0
	}
	impl := st.Elem()
	if impl.Kind() != reflect.Pointer || impl.IsNil() {
		return 0
	}
	arr := impl.Elem().FieldByName("array")
	if !arr.IsValid() || arr.Kind() != reflect.Slice {
		return 0
	}
	return arr.Cap() * int(arr.Type().Elem().Size())
}

// stackBytes is the size of the state's value stack.
func (s *State) stackBytes() int {
	if !s.stackOK {
		return 0
	}
	return s.stack.Cap() * 16
}

// luaFrame is what the error rewriting needs of the function that failed.
type luaFrame struct {
	proto *lua.FunctionProto
	pc    int // the failing instruction
	base  int // where its registers start in the value stack
	regs  reflect.Value
}

func inspectFrame(L *lua.LState, dbg *lua.Debug) (luaFrame, bool) {
	fv, err := L.GetInfo("f", dbg, lua.LNil)
	fn, ok := fv.(*lua.LFunction)
	if err != nil || !ok || fn.IsG || fn.Proto == nil {
		return luaFrame{}, false
	}
	frame := reflect.ValueOf(dbg).Elem().FieldByName("frame")
	if !frame.IsValid() || frame.Kind() != reflect.Pointer || frame.IsNil() {
		return luaFrame{}, false
	}
	pc := frame.Elem().FieldByName("Pc")
	base := frame.Elem().FieldByName("LocalBase")
	regs, ok := valueStack(L)
	if !pc.IsValid() || !base.IsValid() || !ok {
		return luaFrame{}, false
	}
	f := luaFrame{proto: fn.Proto, pc: int(pc.Int()) - 1, base: int(base.Int()), regs: regs}
	if f.pc < 0 || f.pc >= len(f.proto.Code) {
		return luaFrame{}, false
	}
	return f, true
}

var luaValueTypes = map[reflect.Type]string{
	reflect.TypeOf(lua.LNumber(0)):    "number",
	reflect.TypeOf(lua.LString("")):   "string",
	reflect.TypeOf(lua.LNil):          "nil",
	reflect.TypeOf(lua.LTrue):         "boolean",
	reflect.TypeOf(&lua.LTable{}):     "table",
	reflect.TypeOf(&lua.LFunction{}):  "function",
	reflect.TypeOf(&lua.LUserData{}):  "userdata",
	reflect.TypeOf(&lua.LState{}):     "thread",
	reflect.TypeOf(lua.LChannel(nil)): "channel",
}

// register returns the type of register r of the frame and, for strings,
// whether it reads as a number.
func (f luaFrame) register(r int) (typ string, numeric bool, ok bool) {
	i := f.base + r
	if i < 0 || i >= f.regs.Len() {
		return "", false, false
	}
	v := f.regs.Index(i)
	if v.Kind() != reflect.Interface || v.IsNil() {
		return "", false, false
	}
	v = v.Elem()
	typ, ok = luaValueTypes[v.Type()]
	switch typ {
	case "number":
		numeric = true
	case "string":
		_, numeric = luaStr2Number(v.String())
	}
	return typ, numeric, ok
}

// constant returns the string constant k, or "?" as Lua's kname does.
func (f luaFrame) constant(k int) string {
	if k >= 0 && k < len(f.proto.Constants) {
		if s, ok := f.proto.Constants[k].(lua.LString); ok {
			return string(s)
		}
	}
	return "?"
}

func (f luaFrame) rkName(rk int) string {
	if rk&luaRKBit != 0 {
		return f.constant(rk &^ luaRKBit)
	}
	return "?"
}

// localName is luaF_getlocalname: the name of register reg at pc, if it
// holds a local variable.
func (f luaFrame) localName(reg, pc int) (string, bool) {
	n := reg + 1
	for _, v := range f.proto.DbgLocals {
		if v.StartPc > pc {
			break
		}
		if pc < v.EndPc {
			n--
			if n == 0 {
				return v.Name, true
			}
		}
	}
	return "", false
}

// lastWriter finds the instruction before pc that last set reg, as Lua's
// symbexec does (forward jumps that land before pc are followed).
func (f luaFrame) lastWriter(pc, reg int) (uint32, bool) {
	code := f.proto.Code
	var last uint32
	found := false
	for i := 0; i < pc; i++ {
		in := code[i]
		op, a := luaOp(in), luaArgA(in)
		switch op {
		case opLoadNil:
			if a <= reg && reg <= luaArgB(in) {
				last, found = in, true
			}
			continue
		case opTForLoop:
			if reg >= a+2 {
				last, found = in, true
			}
			continue
		case opCall, opTailCall:
			if reg >= a {
				last, found = in, true
			}
			continue
		case opJmp:
			if dest := i + 1 + luaArgSBx(in); i < dest && dest <= pc {
				i = dest - 1
			}
			continue
		case opClosure:
			if a == reg {
				last, found = in, true
			}
			if b := luaArgBx(in); b < len(f.proto.FunctionPrototypes) {
				i += int(f.proto.FunctionPrototypes[b].NumUpvalues)
			}
			continue
		}
		if luaOpSetsA[op] && a == reg {
			last, found = in, true
		}
	}
	return last, found
}

// describe is Lua's getobjname: "local 'x'", "global 'f'", "field 'k'",
// "upvalue 'u'", "method 'm'", or "" when the value has no name.
func (f luaFrame) describe(reg int) string {
	return f.describeAt(f.pc, reg, 0)
}

func (f luaFrame) describeAt(pc, reg, depth int) string {
	if name, ok := f.localName(reg, pc); ok {
		return "local '" + name + "'"
	}
	in, ok := f.lastWriter(pc, reg)
	if !ok || depth > 100 {
		return ""
	}
	switch luaOp(in) {
	case opGetGlobal:
		return "global '" + f.constant(luaArgBx(in)) + "'"
	case opMove, opMoveN:
		if b := luaArgB(in); b < luaArgA(in) {
			return f.describeAt(pc, b, depth+1)
		}
	case opGetTable, opGetTableKS:
		return "field '" + f.rkName(luaArgC(in)) + "'"
	case opGetUpval:
		if b := luaArgB(in); b < len(f.proto.DbgUpvalues) {
			return "upvalue '" + f.proto.DbgUpvalues[b] + "'"
		}
		return "upvalue '?'"
	case opSelf:
		return "method '" + f.rkName(luaArgC(in)) + "'"
	}
	return ""
}

// typeError is luaG_typeerror: "attempt to <op> <name> (a <type> value)",
// or "attempt to <op> a <type> value" for a value without a name.
func (f luaFrame) typeError(op string, rk int, typ string) string {
	if rk&luaRKBit == 0 {
		if name := f.describe(rk); name != "" {
			return "attempt to " + op + " " + name + " (a " + typ + " value)"
		}
	}
	return "attempt to " + op + " a " + typ + " value"
}

// lua51Message turns the message of an error raised while a script ran
// into Lua 5.1's. Messages that are not the virtual machine's pass as
// they are.
// level is where the function that raised the error is on the stack.
func (s *State) lua51Message(L *lua.LState, msg string, level int) string {
	pos, text := splitErrorPosition(msg, s.chunk)
	if strings.Contains(text, "registry overflow") {
		return pos + "stack overflow"
	}
	if strings.HasPrefix(text, "bad argument #") && !strings.Contains(text, " to '") {
		// gopher-lua's own library (this package's functions word theirs
		// as Lua does).
		return pos + quoteFunctionName(missingArgument(L, text, level))
	}
	if strings.HasPrefix(text, "attempt to compare ") {
		if a, b, ok := strings.Cut(strings.TrimPrefix(text, "attempt to compare "), " with "); ok && a == b {
			return pos + "attempt to compare two " + a + " values"
		}
		return msg
	}
	dbg, ok := L.GetStack(level)
	if !ok {
		return msg
	}
	f, ok := inspectFrame(L, dbg)
	if !ok {
		return msg
	}
	if rewritten := f.rewrite(text); rewritten != "" {
		return pos + rewritten
	}
	return msg
}

// missingArgument turns gopher-lua's "got nil" into Lua's "got no value"
// when the argument was not passed at all: the library function that
// raised the error is at level, and its frame says how many it got.
func missingArgument(L *lua.LState, text string, level int) string {
	const gotNil = ", got nil)"
	if !strings.HasSuffix(text, gotNil) {
		return text
	}
	var n int
	if _, err := fmt.Sscanf(text, "bad argument #%d", &n); err != nil {
		return text
	}
	dbg, ok := L.GetStack(level)
	if !ok {
		return text
	}
	frame := reflect.ValueOf(dbg).Elem().FieldByName("frame")
	if !frame.IsValid() || frame.Kind() != reflect.Pointer || frame.IsNil() {
		return text
	}
	nargs := frame.Elem().FieldByName("NArgs")
	if !nargs.IsValid() || nargs.Kind() != reflect.Int || int64(n) <= nargs.Int() {
		return text
	}
	return strings.TrimSuffix(text, gotNil) + ", got no value)"
}

// splitErrorPosition separates "user_script:3: " (chunk's) from the
// message.
func splitErrorPosition(msg, chunk string) (string, string) {
	prefix := chunk + ":"
	if !strings.HasPrefix(msg, prefix) {
		return "", msg
	}
	rest := msg[len(prefix):]
	i := 0
	for i < len(rest) && isDigit(rest[i]) {
		i++
	}
	if i == 0 || !strings.HasPrefix(rest[i:], ": ") {
		return "", msg
	}
	return msg[:len(prefix)+i+2], rest[i+2:]
}

// quoteFunctionName turns gopher-lua's "bad argument #1 to rep (...)" into
// Lua's "bad argument #1 to 'rep' (...)".
func quoteFunctionName(text string) string {
	const to = " to "
	i := strings.Index(text, to)
	if i < 0 {
		return text
	}
	rest := text[i+len(to):]
	j := strings.IndexByte(rest, ' ')
	if j <= 0 || rest[0] == '\'' {
		return text
	}
	return text[:i+len(to)] + "'" + rest[:j] + "'" + rest[j:]
}

// rewrite produces Lua 5.1's message for the failing instruction, or ""
// when it cannot.
func (f luaFrame) rewrite(text string) string {
	in := f.proto.Code[f.pc]
	op, a, b, c := luaOp(in), luaArgA(in), luaArgB(in), luaArgC(in)
	regType := func(rk int) string {
		if rk&luaRKBit != 0 {
			k := rk &^ luaRKBit
			if k < len(f.proto.Constants) {
				return f.proto.Constants[k].Type().String()
			}
			return ""
		}
		typ, _, _ := f.register(rk)
		return typ
	}
	switch {
	case text == "attempt to call a non-function object":
		switch op {
		case opCall, opTailCall:
			if typ := regType(a); typ != "" {
				return f.typeError("call", a, typ)
			}
		case opTForLoop:
			if typ := regType(a); typ != "" {
				return "attempt to call a " + typ + " value"
			}
		}
	case strings.HasPrefix(text, "attempt to index a non-table object("):
		typ := strings.TrimPrefix(text, "attempt to index a non-table object(")
		typ = typ[:max(strings.IndexByte(typ, ')'), 0)]
		switch op {
		case opGetTable, opGetTableKS, opSelf:
			return f.typeError("index", b, typ)
		case opSetTable, opSetTableKS:
			return f.typeError("index", a, typ)
		}
	case strings.HasPrefix(text, "cannot perform "), text == "__unm undefined":
		switch op {
		case opAdd, opSub, opMul, opDiv, opMod, opPow:
			// Lua blames the first operand unless it reads as a number.
			blame := b
			if b&luaRKBit != 0 {
				if k := b &^ luaRKBit; k < len(f.proto.Constants) {
					if _, numeric := ToNumber(f.proto.Constants[k]); numeric {
						blame = c
					}
				}
			} else if _, numeric, _ := f.register(b); numeric {
				blame = c
			}
			if typ := regType(blame); typ != "" {
				return f.typeError("perform arithmetic on", blame, typ)
			}
		case opUnm:
			if typ := regType(b); typ != "" {
				return f.typeError("perform arithmetic on", b, typ)
			}
		case opConcat:
			return f.concatError(b, c)
		}
	case text == "__len undefined" && op == opLen:
		if typ := regType(b); typ != "" {
			return f.typeError("get length of", b, typ)
		}
	}
	return ""
}

// concatError finds the operand of R(first)..R(last) Lua blames: the
// first one, from the right, that is neither a string nor a number.
func (f luaFrame) concatError(first, last int) string {
	isText := func(r int) bool {
		typ, _, _ := f.register(r)
		return typ == "string" || typ == "number"
	}
	blame := -1
	if !isText(last) {
		blame = last
		if last > first && !isText(last-1) {
			blame = last - 1
		}
	} else {
		for r := last - 1; r >= first; r-- {
			if !isText(r) {
				blame = r
				break
			}
		}
	}
	if blame < 0 {
		return ""
	}
	typ, _, ok := f.register(blame)
	if !ok {
		return ""
	}
	return f.typeError("concatenate", blame, typ)
}
