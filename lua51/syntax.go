package lua51

import (
	"math"
	"strconv"
	"strings"
)

// A syntax checker for Lua 5.1, the Lua of Redis: it accepts what Lua 5.1
// accepts and rejects the rest with the message Lua 5.1's parser gives
// ("user_script:3: 'end' expected (to close 'if' at line 1) near '<eof>'").
// gopher-lua parses a slightly different language (it also accepts goto and
// labels) and words its errors its own way, so scripts are checked here
// first, once per new script.

// Lua 5.1's limits the parser enforces.
const (
	luaMaxSyntaxLevels = 200 // LUAI_MAXCCALLS
	luaMaxLocals       = 200 // LUAI_MAXVARS
	luaMaxUpvalues     = 60  // LUAI_MAXUPVALUES
)

// Token kinds: single characters are themselves; the rest follow.
const (
	tkAnd = 257 + iota
	tkBreak
	tkDo
	tkElse
	tkElseif
	tkEnd
	tkFalse
	tkFor
	tkFunction
	tkIf
	tkIn
	tkLocal
	tkNil
	tkNot
	tkOr
	tkRepeat
	tkReturn
	tkThen
	tkTrue
	tkUntil
	tkWhile
	tkConcat
	tkDots
	tkEq
	tkGe
	tkLe
	tkNe
	tkNumber
	tkName
	tkString
	tkEOS
)

var luaTokenNames = [...]string{"and", "break", "do", "else", "elseif", "end", "false", "for", "function",
	"if", "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while",
	"..", "...", "==", ">=", "<=", "~=", "<number>", "<name>", "<string>", "<eof>"}

var luaReserved = func() map[string]int {
	m := make(map[string]int)
	for i := tkAnd; i <= tkWhile; i++ {
		m[luaTokenNames[i-tkAnd]] = i
	}
	return m
}()

func luaTokenString(tk int) string {
	if tk < 257 {
		if tk < 32 || tk == 127 {
			return "char(" + strconv.Itoa(tk) + ")"
		}
		return string([]byte{byte(tk)})
	}
	return luaTokenNames[tk-tkAnd]
}

// luaSyntaxError is raised (as a panic) and recovered by luaSyntaxCheck.
type luaSyntaxError struct{ msg string }

type luaLexer struct {
	chunk string // the chunk's name in messages ("user_script")
	src   []byte
	pos   int
	cur   int // current character, -1 at the end
	line  int
	buf   []byte // text of the token being read, as Lua's buffer

	tok, ahead   int // current and look-ahead token kinds
	text, aText  string
	lastLine     int // line of the last token consumed
	aheadPending bool

	// numerals gopher-lua would read differently (hexadecimal floats,
	// hexadecimal beyond 64 bits, overflow to infinity), to be rewritten.
	rewrites []luaNumeral
}

// luaNumeral is a numeral's place in the source and how gopher-lua should
// read it.
type luaNumeral struct {
	start, end int
	text       string
}

func (lx *luaLexer) next() {
	if lx.pos < len(lx.src) {
		lx.cur = int(lx.src[lx.pos])
		lx.pos++
	} else {
		lx.cur = -1
	}
}

func (lx *luaLexer) save(c int)      { lx.buf = append(lx.buf, byte(c)) }
func (lx *luaLexer) saveNext()       { lx.save(lx.cur); lx.next() }
func (lx *luaLexer) isNewline() bool { return lx.cur == '\n' || lx.cur == '\r' }

func (lx *luaLexer) fail(msg string, tk int) {
	msg = lx.chunk + ":" + strconv.Itoa(lx.line) + ": " + msg
	if tk != 0 {
		msg += " near '" + lx.tokenText(tk) + "'"
	}
	panic(luaSyntaxError{msg})
}

// tokenText is what Lua prints after "near": the text read for names,
// strings and numbers (Lua's buffer), the token's name otherwise.
func (lx *luaLexer) tokenText(tk int) string {
	switch tk {
	case tkName, tkString, tkNumber:
		return string(lx.buf)
	}
	return luaTokenString(tk)
}

func (lx *luaLexer) newline() {
	old := lx.cur
	lx.next()
	if lx.isNewline() && lx.cur != old {
		lx.next() // \r\n or \n\r
	}
	lx.line++
}

// skipSep reads [==[ or ]==] and returns the number of '=', or -count-1
// when the second bracket is missing.
func (lx *luaLexer) skipSep() int {
	s := lx.cur
	lx.saveNext()
	count := 0
	for lx.cur == '=' {
		lx.saveNext()
		count++
	}
	if lx.cur == s {
		return count
	}
	return -count - 1
}

func (lx *luaLexer) longString(sep int, isString bool) {
	lx.saveNext() // the second [
	if lx.isNewline() {
		lx.newline()
	}
	for {
		switch lx.cur {
		case -1:
			if isString {
				lx.fail("unfinished long string", tkEOS)
			}
			lx.fail("unfinished long comment", tkEOS)
		case ']':
			if lx.skipSep() == sep {
				lx.saveNext()
				return
			}
		case '\n', '\r':
			lx.save('\n')
			lx.newline()
			if !isString {
				lx.buf = lx.buf[:0]
			}
		default:
			if isString {
				lx.saveNext()
			} else {
				lx.next()
			}
		}
	}
}

func (lx *luaLexer) shortString(delim int) {
	lx.saveNext()
	for lx.cur != delim {
		switch lx.cur {
		case -1:
			lx.fail("unfinished string", tkEOS)
		case '\n', '\r':
			lx.fail("unfinished string", tkString)
		case '\\':
			lx.next() // the backslash is not kept
			switch lx.cur {
			case 'a', 'b', 'f', 'n', 'r', 't', 'v':
				lx.save(int(map[int]byte{'a': 7, 'b': 8, 'f': 12, 'n': 10, 'r': 13, 't': 9, 'v': 11}[lx.cur]))
				lx.next()
			case '\n', '\r':
				lx.save('\n')
				lx.newline()
			case -1:
				// the loop reports the unfinished string
			default:
				if !isDigit(byte(lx.cur)) {
					lx.saveNext()
					continue
				}
				c := 0
				for i := 0; i < 3 && lx.cur >= 0 && isDigit(byte(lx.cur)); i++ {
					c = 10*c + lx.cur - '0'
					lx.next()
				}
				if c > 255 {
					lx.fail("escape sequence too large", tkString)
				}
				lx.save(c)
			}
		default:
			lx.saveNext()
		}
	}
	lx.saveNext()
}

// offset is where the current character is in the source.
func (lx *luaLexer) offset() int {
	if lx.cur < 0 {
		return len(lx.src)
	}
	return lx.pos - 1
}

func (lx *luaLexer) numeral(start int) {
	for lx.cur >= 0 && (isDigit(byte(lx.cur)) || lx.cur == '.') {
		lx.saveNext()
	}
	if lx.cur == 'e' || lx.cur == 'E' {
		lx.saveNext()
		if lx.cur == '+' || lx.cur == '-' {
			lx.saveNext()
		}
	}
	for lx.cur >= 0 && (isAlnum(byte(lx.cur)) || lx.cur == '_') {
		lx.saveNext()
	}
	f, ok := luaStr2Number(string(lx.buf))
	if !ok {
		lx.fail("malformed number", tkNumber)
	}
	switch {
	case math.IsInf(f, 0):
		lx.rewrites = append(lx.rewrites, luaNumeral{start, lx.offset(), "(1/0)"})
	case strings.ContainsAny(string(lx.buf), "xX"):
		lx.rewrites = append(lx.rewrites, luaNumeral{start, lx.offset(), strconv.FormatFloat(f, 'g', -1, 64)})
	}
}

// scan reads the next token.
func (lx *luaLexer) scan() (int, string) {
	lx.buf = lx.buf[:0]
	for {
		switch c := lx.cur; c {
		case '\n', '\r':
			lx.newline()
			continue
		case '-':
			lx.next()
			if lx.cur != '-' {
				return '-', ""
			}
			lx.next()
			if lx.cur == '[' {
				sep := lx.skipSep()
				lx.buf = lx.buf[:0]
				if sep >= 0 {
					lx.longString(sep, false)
					lx.buf = lx.buf[:0]
					continue
				}
			}
			for !lx.isNewline() && lx.cur != -1 {
				lx.next()
			}
			continue
		case '[':
			sep := lx.skipSep()
			if sep >= 0 {
				lx.longString(sep, true)
				return tkString, string(lx.buf)
			}
			if sep == -1 {
				return '[', ""
			}
			lx.fail("invalid long string delimiter", tkString)
		case '=', '<', '>', '~':
			lx.next()
			if lx.cur != '=' {
				return c, ""
			}
			lx.next()
			switch c {
			case '=':
				return tkEq, ""
			case '<':
				return tkLe, ""
			case '>':
				return tkGe, ""
			}
			return tkNe, ""
		case '"', '\'':
			lx.shortString(c)
			return tkString, string(lx.buf)
		case '.':
			start := lx.offset()
			lx.saveNext()
			if lx.cur == '.' {
				lx.next()
				if lx.cur == '.' {
					lx.next()
					return tkDots, ""
				}
				return tkConcat, ""
			}
			if lx.cur < 0 || !isDigit(byte(lx.cur)) {
				return '.', ""
			}
			lx.numeral(start)
			return tkNumber, string(lx.buf)
		case -1:
			return tkEOS, ""
		default:
			switch {
			case isCSpace(byte(c)):
				lx.next()
				continue
			case isDigit(byte(c)):
				lx.numeral(lx.offset())
				return tkNumber, string(lx.buf)
			case c == '_' || 'a' <= c|0x20 && c|0x20 <= 'z':
				for lx.cur >= 0 && (isAlnum(byte(lx.cur)) || lx.cur == '_') {
					lx.saveNext()
				}
				if tk, ok := luaReserved[string(lx.buf)]; ok {
					return tk, ""
				}
				return tkName, string(lx.buf)
			}
			lx.next()
			return c, ""
		}
	}
}

// advance moves to the next token (luaX_next).
func (lx *luaLexer) advance() {
	lx.lastLine = lx.line
	if lx.aheadPending {
		lx.tok, lx.text, lx.aheadPending = lx.ahead, lx.aText, false
		return
	}
	lx.tok, lx.text = lx.scan()
}

func (lx *luaLexer) lookahead() int {
	lx.ahead, lx.aText = lx.scan()
	lx.aheadPending = true
	return lx.ahead
}

// Parser state.

type luaFuncScope struct {
	parent   *luaFuncScope
	vararg   bool
	line     int   // where the function is defined, 0 for the main chunk
	actives  []int // variables in scope, innermost last
	upvalues []int
	loops    []bool // enclosing blocks: whether each is a loop
}

// Kinds of expressions the parser tells apart.
const (
	exprValue = iota // a value that cannot be assigned to
	exprVar          // local, upvalue, global or indexed: assignable
	exprCall
)

type luaParser struct {
	lx    luaLexer
	fs    *luaFuncScope
	names []string // variable names by id
	level int      // nested chunks and expressions (enterlevel)
}

// luaSyntaxCheck returns Lua 5.1's error for the first syntax error of
// src, or "" when src is a valid chunk. For a valid chunk it also returns
// the source to give gopher-lua: src, with the numerals gopher-lua reads
// differently from Lua 5.1 written in a form it reads the same way.
func luaSyntaxCheck(src []byte, chunk string) (forGopher []byte, msg string) {
	p := &luaParser{lx: luaLexer{chunk: chunk, src: src, line: 1}}
	defer func() {
		if r := recover(); r != nil {
			se, ok := r.(luaSyntaxError)
			if !ok {
				panic(r)
			}
			forGopher, msg = nil, se.msg
		}
	}()
	p.lx.next()
	p.lx.advance()
	p.fs = &luaFuncScope{vararg: true}
	p.chunk()
	p.check(tkEOS)
	if len(p.lx.rewrites) == 0 {
		return src, ""
	}
	out := make([]byte, 0, len(src))
	at := 0
	for _, n := range p.lx.rewrites {
		out = append(out, src[at:n.start]...)
		out = append(out, n.text...)
		at = n.end
	}
	return append(out, src[at:]...), ""
}

func (p *luaParser) tok() int { return p.lx.tok }

func (p *luaParser) fail(msg string) { p.lx.fail(msg, p.tok()) }

func (p *luaParser) errorExpected(tk int) { p.fail("'" + luaTokenString(tk) + "' expected") }

func (p *luaParser) testNext(tk int) bool {
	if p.tok() == tk {
		p.lx.advance()
		return true
	}
	return false
}

func (p *luaParser) check(tk int) {
	if p.tok() != tk {
		p.errorExpected(tk)
	}
}

func (p *luaParser) checkNext(tk int) {
	p.check(tk)
	p.lx.advance()
}

func (p *luaParser) checkMatch(what, who, line int) {
	if p.testNext(what) {
		return
	}
	if line == p.lx.line {
		p.errorExpected(what)
	}
	p.fail("'" + luaTokenString(what) + "' expected (to close '" + luaTokenString(who) + "' at line " + strconv.Itoa(line) + ")")
}

func (p *luaParser) checkName() string {
	p.check(tkName)
	name := p.lx.text
	p.lx.advance()
	return name
}

func (p *luaParser) enterLevel() {
	p.level++
	if p.level > luaMaxSyntaxLevels {
		p.lx.fail("chunk has too many syntax levels", 0)
	}
}

func (p *luaParser) leaveLevel() { p.level-- }

func (p *luaParser) errorLimit(limit int, what string) {
	var msg string
	if p.fs.line == 0 {
		msg = "main function has more than " + strconv.Itoa(limit) + " " + what
	} else {
		msg = "function at line " + strconv.Itoa(p.fs.line) + " has more than " + strconv.Itoa(limit) + " " + what
	}
	p.lx.fail(msg, 0)
}

// declare adds a local that becomes active, with the others declared in
// the same statement, only after their initialisers (Lua's new_localvar;
// pending counts those declared before it).
func (p *luaParser) declare(name string, pending int) int {
	if len(p.fs.actives)+pending+1 > luaMaxLocals {
		p.errorLimit(luaMaxLocals, "local variables")
	}
	p.names = append(p.names, name)
	return len(p.names) - 1
}

func (p *luaParser) activate(ids []int) { p.fs.actives = append(p.fs.actives, ids...) }

// resolve finds what a name refers to in fs, recording upvalues on the way
// as Lua's singlevar does.
func (p *luaParser) resolve(fs *luaFuncScope, name string) (id int, global bool) {
	if fs == nil {
		return -1, true
	}
	for i := len(fs.actives) - 1; i >= 0; i-- {
		if p.names[fs.actives[i]] == name {
			return fs.actives[i], false
		}
	}
	id, global = p.resolve(fs.parent, name)
	if global {
		return -1, true
	}
	for _, u := range fs.upvalues {
		if u == id {
			return id, false
		}
	}
	if len(fs.upvalues)+1 > luaMaxUpvalues {
		p.fs = fs // the function errorLimit names; it does not return
		p.errorLimit(luaMaxUpvalues, "upvalues")
	}
	fs.upvalues = append(fs.upvalues, id)
	return id, false
}

func blockFollow(tk int) bool {
	switch tk {
	case tkElse, tkElseif, tkEnd, tkUntil, tkEOS:
		return true
	}
	return false
}

// block runs body in a new scope; loop says whether break may leave it.
func (p *luaParser) block(loop bool, body func()) {
	fs := p.fs
	n := len(fs.actives)
	fs.loops = append(fs.loops, loop)
	body()
	fs.loops = fs.loops[:len(fs.loops)-1]
	fs.actives = fs.actives[:n]
}

func (p *luaParser) chunk() {
	p.enterLevel()
	last := false
	for !last && !blockFollow(p.tok()) {
		last = p.statement()
		p.testNext(';')
	}
	p.leaveLevel()
}

func (p *luaParser) statement() bool {
	line := p.lx.line
	switch p.tok() {
	case tkIf:
		p.ifStat(line)
	case tkWhile:
		p.lx.advance()
		p.expr()
		p.checkNext(tkDo)
		p.block(true, p.chunk)
		p.checkMatch(tkEnd, tkWhile, line)
	case tkDo:
		p.lx.advance()
		p.block(false, p.chunk)
		p.checkMatch(tkEnd, tkDo, line)
	case tkFor:
		p.forStat(line)
	case tkRepeat:
		p.lx.advance()
		p.block(true, func() {
			p.chunk()
			p.checkMatch(tkUntil, tkRepeat, line)
			p.expr()
		})
	case tkFunction:
		p.lx.advance()
		p.singleVar(p.checkName())
		needSelf := false
		for p.tok() == '.' {
			p.lx.advance()
			p.checkName()
		}
		if p.tok() == ':' {
			needSelf = true
			p.lx.advance()
			p.checkName()
		}
		p.body(needSelf, line)
	case tkLocal:
		p.lx.advance()
		if p.testNext(tkFunction) {
			p.activate([]int{p.declare(p.checkName(), 0)})
			p.body(false, p.lx.line)
		} else {
			p.localStat()
		}
	case tkReturn:
		p.lx.advance()
		if !blockFollow(p.tok()) && p.tok() != ';' {
			p.exprList()
		}
		return true
	case tkBreak:
		p.lx.advance()
		loops := p.fs.loops
		inLoop := false
		for i := len(loops) - 1; i >= 0; i-- {
			if loops[i] {
				inLoop = true
				break
			}
		}
		if !inLoop {
			p.fail("no loop to break")
		}
		return true
	default:
		p.exprStat()
	}
	return false
}

func (p *luaParser) ifStat(line int) {
	thenBlock := func() {
		p.lx.advance() // if or elseif
		p.expr()
		p.checkNext(tkThen)
		p.block(false, p.chunk)
	}
	thenBlock()
	for p.tok() == tkElseif {
		thenBlock()
	}
	if p.tok() == tkElse {
		p.lx.advance()
		p.block(false, p.chunk)
	}
	p.checkMatch(tkEnd, tkIf, line)
}

func (p *luaParser) forStat(line int) {
	p.block(true, func() {
		p.lx.advance()
		name := p.checkName()
		var ids []int
		switch p.tok() {
		case '=':
			for _, n := range []string{"(for index)", "(for limit)", "(for step)", name} {
				ids = append(ids, p.declare(n, len(ids)))
			}
			p.checkNext('=')
			p.expr()
			p.checkNext(',')
			p.expr()
			if p.testNext(',') {
				p.expr()
			}
			p.forBody(ids)
		case ',', tkIn:
			for _, n := range []string{"(for generator)", "(for state)", "(for control)", name} {
				ids = append(ids, p.declare(n, len(ids)))
			}
			for p.testNext(',') {
				ids = append(ids, p.declare(p.checkName(), len(ids)))
			}
			p.checkNext(tkIn)
			p.exprList()
			p.forBody(ids)
		default:
			p.fail("'=' or 'in' expected")
		}
		p.checkMatch(tkEnd, tkFor, line)
	})
}

func (p *luaParser) forBody(ids []int) {
	p.activate(ids[:3])
	p.checkNext(tkDo)
	p.block(false, func() {
		p.activate(ids[3:])
		p.chunk()
	})
}

func (p *luaParser) localStat() {
	var ids []int
	for {
		ids = append(ids, p.declare(p.checkName(), len(ids)))
		if !p.testNext(',') {
			break
		}
	}
	if p.testNext('=') {
		p.exprList()
	}
	p.activate(ids)
}

// body parses a function's parameters and body.
func (p *luaParser) body(needSelf bool, line int) {
	fs := &luaFuncScope{parent: p.fs, line: line}
	p.fs = fs
	p.checkNext('(')
	if needSelf {
		p.activate([]int{p.declare("self", 0)})
	}
	var params []int
	if p.tok() != ')' {
		for {
			switch p.tok() {
			case tkName:
				params = append(params, p.declare(p.checkName(), len(params)))
			case tkDots:
				p.lx.advance()
				fs.vararg = true
				// Lua 5.1's compatibility local "arg" holds the extra arguments.
				params = append(params, p.declare("arg", len(params)))
			default:
				p.fail("<name> or '...' expected")
			}
			if fs.vararg || !p.testNext(',') {
				break
			}
		}
	}
	p.activate(params)
	p.checkNext(')')
	p.chunk()
	p.checkMatch(tkEnd, tkFunction, line)
	p.fs = fs.parent
}

func (p *luaParser) exprList() int {
	n := 1
	p.expr()
	for p.testNext(',') {
		p.expr()
		n++
	}
	return n
}

func (p *luaParser) exprStat() {
	kind := p.primaryExp()
	if kind == exprCall {
		return
	}
	p.assignment(kind, 1)
}

func (p *luaParser) assignment(kind, nvars int) {
	if kind != exprVar {
		p.fail("syntax error")
	}
	if p.testNext(',') {
		next := p.primaryExp()
		if nvars > luaMaxSyntaxLevels-p.level {
			p.errorLimit(luaMaxSyntaxLevels-p.level, "variables in assignment")
		}
		p.assignment(next, nvars+1)
		return
	}
	p.checkNext('=')
	p.exprList()
}

func (p *luaParser) singleVar(name string) { p.resolve(p.fs, name) }

func (p *luaParser) primaryExp() int {
	kind := exprValue
	switch p.tok() {
	case '(':
		line := p.lx.line
		p.lx.advance()
		p.expr()
		p.checkMatch(')', '(', line)
	case tkName:
		p.singleVar(p.checkName())
		kind = exprVar
	default:
		p.fail("unexpected symbol")
	}
	for {
		switch p.tok() {
		case '.':
			p.lx.advance()
			p.checkName()
			kind = exprVar
		case '[':
			p.lx.advance()
			p.expr()
			p.checkNext(']')
			kind = exprVar
		case ':':
			p.lx.advance()
			p.checkName()
			p.funcArgs()
			kind = exprCall
		case '(', tkString, '{':
			p.funcArgs()
			kind = exprCall
		default:
			return kind
		}
	}
}

func (p *luaParser) funcArgs() {
	line := p.lx.line
	switch p.tok() {
	case '(':
		if line != p.lx.lastLine {
			p.fail("ambiguous syntax (function call x new statement)")
		}
		p.lx.advance()
		if p.tok() != ')' {
			p.exprList()
		}
		p.checkMatch(')', '(', line)
	case '{':
		p.constructor()
	case tkString:
		p.lx.advance()
	default:
		p.fail("function arguments expected")
	}
}

func (p *luaParser) constructor() {
	line := p.lx.line
	p.checkNext('{')
	for p.tok() != '}' {
		switch {
		case p.tok() == tkName && p.lx.lookahead() == '=':
			p.lx.advance()
			p.checkNext('=')
			p.expr()
		case p.tok() == '[':
			p.lx.advance()
			p.expr()
			p.checkNext(']')
			p.checkNext('=')
			p.expr()
		default:
			p.expr()
		}
		if !p.testNext(',') && !p.testNext(';') {
			break
		}
	}
	p.checkMatch('}', '{', line)
}

func (p *luaParser) simpleExp() {
	switch p.tok() {
	case tkNumber, tkString, tkNil, tkTrue, tkFalse:
	case tkDots:
		if !p.fs.vararg {
			p.fail("cannot use '...' outside a vararg function")
		}
	case '{':
		p.constructor()
		return
	case tkFunction:
		p.lx.advance()
		p.body(false, p.lx.line)
		return
	default:
		p.primaryExp()
		return
	}
	p.lx.advance()
}

// Binary operator priorities (left, right), as Lua 5.1's.
var luaBinaryPriority = map[int][2]int{
	'+': {6, 6}, '-': {6, 6}, '*': {7, 7}, '/': {7, 7}, '%': {7, 7},
	'^': {10, 9}, tkConcat: {5, 4},
	tkEq: {3, 3}, tkNe: {3, 3}, '<': {3, 3}, tkLe: {3, 3}, '>': {3, 3}, tkGe: {3, 3},
	tkAnd: {2, 2}, tkOr: {1, 1},
}

const luaUnaryPriority = 8

func (p *luaParser) expr() { p.subExpr(0) }

// subExpr parses an expression whose operators bind tighter than limit and
// returns the first operator that does not.
func (p *luaParser) subExpr(limit int) int {
	p.enterLevel()
	switch p.tok() {
	case tkNot, '-', '#':
		p.lx.advance()
		p.subExpr(luaUnaryPriority)
	default:
		p.simpleExp()
	}
	op := p.tok()
	for prio, ok := luaBinaryPriority[op]; ok && prio[0] > limit; prio, ok = luaBinaryPriority[op] {
		p.lx.advance()
		op = p.subExpr(prio[1])
	}
	p.leaveLevel()
	return op
}
