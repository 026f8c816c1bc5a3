package cmddocs

import (
	"errors"
	"strconv"
	"strings"
)

// A command's argument syntax, the "arguments" of its entry in
// cmddocs/docs/*.json, is written as in Redis's documentation, with a few
// marks so that COMMAND DOCS can be generated from it:
//
//		key value [condition=NX|XX] [GET] [EX seconds:integer|PX milliseconds:integer]
//
//	  - lower-case words are arguments; ":type" sets the type (integer,
//	    double, key, pattern, unix-time, string). "key" and names ending in
//	    "key" are keys, "pattern" a pattern; some common names are integers.
//	  - UPPER-CASE words are tokens; "TOKEN arg" gives arg that token;
//	    `name:"~"` is a token that is no word (XADD's "~", "*"), named.
//	  - [ ... ] is optional, < ... > a required group; | separates choices;
//	    "name=" right after the bracket names the group, and makes a group
//	    of one argument a block ("<pattern=pattern>...").
//	  - "..." after an item means it repeats.
//	  - "@version" right after an item or group gives the version that
//	    added it ("[GET@6.2.0]"); "#n" after a key gives the index of the
//	    key spec that finds it ("newkey#1").
//	  - "TOKEN^ <group>" gives the group itself the token, as Redis
//	    documents ZUNION's "AGGREGATE SUM|MIN|MAX" (a oneof with a
//	    token); "[name=TOKEN]" names a lone token otherwise than after
//	    itself (GEOADD's CH is "change").

// Arg is one argument of a command's syntax, as COMMAND DOCS describes it.
type Arg struct {
	Name     string
	Type     string // string integer double key pattern unix-time pure-token oneof block
	Token    string
	Since    string
	KeySpec  int // for keys: the index of the key spec that finds it
	Optional bool
	Multiple bool
	// MultipleToken: the token repeats with each repetition ("[GET
	// pattern]...": GET a GET b), Redis's multiple_token.
	MultipleToken bool
	Args          []*Arg
	glue          bool // "TOKEN^": the token belongs to the group after it
}

var integerNames = map[string]bool{
	"seconds": true, "milliseconds": true, "count": true, "offset": true, "start": true,
	"end": true, "index": true, "numkeys": true, "increment": true, "decrement": true,
	"timeout": true, "limit": true, "cost": true, "db": true, "index1": true, "index2": true,
	"cursor": true, "bit": true, "pivot": true, "rank": true, "len": true, "min-len": true,
	"maxlen": true, "number": true, "protover": true, "client-id": true, "quantity": true,
	"max_burst": true, "count_per_period": true, "period": true, "keep": true, "unix-time-seconds": true,
	"unix-time-milliseconds": true,
}

func inferType(name string) string {
	switch {
	case name == "key" || strings.HasSuffix(name, "key") || name == "source" || name == "destination":
		return "key"
	case name == "pattern":
		return "pattern"
	case name == "unix-time-seconds" || name == "unix-time-milliseconds":
		return "unix-time"
	case integerNames[name]:
		return "integer"
	}
	return "string"
}

type syntaxParser struct {
	toks []string
	pos  int
}

func tokenizeSyntax(s string) []string {
	var toks []string
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ':
			i++
		case strings.HasPrefix(s[i:], "..."):
			toks = append(toks, "...")
			i += 3
		case c == '[' || c == ']' || c == '<' || c == '>' || c == '|':
			toks = append(toks, string(c))
			i++
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" []<>|", rune(s[j])) && !strings.HasPrefix(s[j:], "...") {
				j++
			}
			toks = append(toks, s[i:j])
			i = j
		}
	}
	return toks
}

func parseSyntax(s string) ([]*Arg, error) {
	p := &syntaxParser{toks: tokenizeSyntax(s)}
	args, err := p.seq()
	if err != nil {
		return nil, err
	}
	if p.pos != len(p.toks) {
		return nil, errors.New("syntax: unexpected " + p.toks[p.pos])
	}
	return args, nil
}

func (p *syntaxParser) peek() string {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return ""
}

// seq parses items up to a closing bracket, a '|' or the end, joining
// "TOKEN arg" pairs.
func (p *syntaxParser) seq() ([]*Arg, error) {
	var out []*Arg
	for {
		t := p.peek()
		if t == "" || t == "]" || t == ">" || t == "|" {
			return out, nil
		}
		a, err := p.item()
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
}

func (p *syntaxParser) item() (*Arg, error) {
	t := p.peek()
	p.pos++
	var a *Arg
	switch {
	case t == "[" || t == "<":
		closer := "]"
		if t == "<" {
			closer = ">"
		}
		g, err := p.group(closer)
		if err != nil {
			return nil, err
		}
		g.Optional = t == "["
		a = g
	case t == "..." || t == "]" || t == ">" || t == "|":
		return nil, errors.New("syntax: unexpected " + t)
	default:
		word, since, _ := strings.Cut(t, "@")
		word, spec, _ := strings.Cut(word, "#")
		glue := strings.HasSuffix(word, "^")
		word = strings.TrimSuffix(word, "^")
		if strings.ToUpper(word) == word && strings.ToLower(word) != word {
			a = &Arg{Name: strings.ToLower(word), Type: "pure-token", Token: word, glue: glue}
		} else {
			name, typ, _ := strings.Cut(word, ":")
			switch {
			case len(typ) >= 3 && typ[0] == '"' && typ[len(typ)-1] == '"':
				// `approximately:"~"`: a token that is no word, named.
				a = &Arg{Name: name, Type: "pure-token", Token: typ[1 : len(typ)-1], glue: glue}
			case typ == "":
				a = &Arg{Name: name, Type: inferType(name)}
			default:
				a = &Arg{Name: name, Type: typ}
			}
		}
		a.Since = since
		if spec != "" {
			n, err := strconv.Atoi(spec)
			if err != nil {
				return nil, errors.New("syntax: bad key spec index in " + t)
			}
			a.KeySpec = n
		}
	}
	if t := p.peek(); strings.HasPrefix(t, "@") {
		p.pos++
		a.Since = t[1:]
	}
	if p.peek() == "..." {
		p.pos++
		a.Multiple = true
		a.MultipleToken = (t == "[" || t == "<") && a.Token != ""
	}
	return a, nil
}

// group parses the inside of a bracket: one or more alternatives.
func (p *syntaxParser) group(closer string) (*Arg, error) {
	name := ""
	if t := p.peek(); strings.Contains(t, "=") {
		name, p.toks[p.pos], _ = strings.Cut(t, "=")
		if p.toks[p.pos] == "" {
			p.pos++
		}
	}
	var alts [][]*Arg
	for {
		s, err := p.seq()
		if err != nil {
			return nil, err
		}
		if len(s) == 0 {
			return nil, errors.New("syntax: empty group")
		}
		alts = append(alts, s)
		t := p.peek()
		p.pos++
		if t == "|" {
			continue
		}
		if t != closer {
			return nil, errors.New("syntax: expected " + closer)
		}
		break
	}
	if len(alts) == 1 && name != "" && len(alts[0]) == 1 && alts[0][0].Type == "pure-token" && !alts[0][0].Multiple {
		// "[sorting=ALPHA]": a token with a name of its own.
		a := alts[0][0]
		a.Name = name
		return a, nil
	}
	if len(alts) == 1 && name != "" && len(alts[0]) == 1 {
		// "<pattern=pattern>...": a block of one argument, as Redis
		// documents PSUBSCRIBE's and CONFIG GET's repeated arguments.
		return &Arg{Name: name, Type: "block", Args: alts[0]}, nil
	}
	if len(alts) == 1 {
		g := collapse(alts[0])
		if name != "" {
			g.Name = name
		}
		return g, nil
	}
	g := &Arg{Name: name, Type: "oneof"}
	var names []string
	for _, s := range alts {
		a := collapse(s)
		g.Args = append(g.Args, a)
		names = append(names, a.Name)
	}
	if g.Name == "" {
		g.Name = strings.Join(names, "-")
	}
	return g, nil
}

// collapse turns a bracketed sequence into one argument: "EX seconds" is
// the argument seconds with the token EX; "LIMIT offset count" a block with
// the token LIMIT; tokens alone ("NO ONE") and anything else longer than
// one item a plain block.
func collapse(s []*Arg) *Arg {
	switch {
	case len(s) == 1:
		return s[0]
	case len(s) == 2 && s[0].glue && (s[1].Type == "oneof" || s[1].Type == "block") && s[1].Token == "":
		a := s[1]
		a.Token = s[0].Token
		return a
	case allTokens(s):
		return &Arg{Name: s[0].Name, Type: "block", Args: s}
	case len(s) == 2 && s[0].Type == "pure-token" && !s[0].Multiple &&
		s[1].Token == "" && s[1].Type != "pure-token" && s[1].Type != "oneof" && s[1].Type != "block":
		a := s[1]
		a.Token = s[0].Token
		return a
	case s[0].Type == "pure-token":
		return &Arg{Name: s[0].Name, Type: "block", Token: s[0].Token, Args: s[1:]}
	}
	return &Arg{Name: s[0].Name, Type: "block", Args: s}
}

func allTokens(s []*Arg) bool {
	for _, a := range s {
		if a.Type != "pure-token" || a.Multiple {
			return false
		}
	}
	return true
}
