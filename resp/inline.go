package resp

// SplitArgs splits an inline request line into arguments with the rules of
// Redis's sdssplitargs: arguments are separated by white space; "double
// quotes" understand \n \r \t \b \a, \xHH and \<any>; 'single quotes'
// understand only \'; a closing quote must be followed by white space or the
// end of the line; a NUL byte ends the line, as it does for C strings. It
// returns false for unbalanced quotes. line is left as it is.
func SplitArgs(line []byte) ([][]byte, bool) {
	return splitArgsCopy(line, false)
}

// SplitArgsComment is SplitArgs for a line of a file of commands, where a
// '#' that begins an argument outside quotes begins a comment running to
// the end of the line, as in a shell: a#b, '#' and "#" are data. (Redis's
// own config file has no such comments: a '#' there is a comment only at
// the start of a line.)
func SplitArgsComment(line []byte) ([][]byte, bool) {
	return splitArgsCopy(line, true)
}

func splitArgsCopy(line []byte, comments bool) ([][]byte, bool) {
	args, ok := splitArgsInPlace(append([]byte(nil), line...), nil, comments)
	if !ok {
		return nil, false
	}
	return args[:len(args):len(args)], true
}

// splitArgsInPlace is SplitArgs decoding into line itself, which it
// overwrites: an argument never decodes to more bytes than it is written
// with, so the decoded bytes never overtake the ones still to be read. The
// arguments are appended to args and point into line; nothing is allocated
// unless args must grow. With comments, an unquoted '#' that begins an
// argument ends the line.
func splitArgsInPlace(line []byte, args [][]byte, comments bool) ([][]byte, bool) {
	// p is the read position; at reads the line as a NUL-terminated C string.
	p := 0
	at := func(i int) byte {
		if i < len(line) {
			return line[i]
		}
		return 0
	}
	for {
		for at(p) != 0 && isCSpace(at(p)) {
			p++
		}
		if at(p) == 0 || comments && at(p) == '#' {
			return args, true
		}
		start := p // the argument is decoded into line[start:w]
		w := start
		put := func(c byte) {
			line[w] = c
			w++
		}
		inDouble, inSingle, done := false, false, false
		for !done {
			c := at(p)
			switch {
			case inDouble:
				switch {
				case c == '\\' && at(p+1) == 'x' && isHex(at(p+2)) && isHex(at(p+3)):
					put(hexVal(at(p+2))<<4 | hexVal(at(p+3)))
					p += 3
				case c == '\\' && at(p+1) != 0:
					p++
					switch e := at(p); e {
					case 'n':
						put('\n')
					case 'r':
						put('\r')
					case 't':
						put('\t')
					case 'b':
						put('\b')
					case 'a':
						put('\a')
					default:
						put(e)
					}
				case c == '"':
					if n := at(p + 1); n != 0 && !isCSpace(n) {
						return args, false
					}
					done = true
				case c == 0:
					return args, false
				default:
					put(c)
				}
			case inSingle:
				switch {
				case c == '\\' && at(p+1) == '\'':
					p++
					put('\'')
				case c == '\'':
					if n := at(p + 1); n != 0 && !isCSpace(n) {
						return args, false
					}
					done = true
				case c == 0:
					return args, false
				default:
					put(c)
				}
			default:
				switch c {
				case ' ', '\n', '\r', '\t', 0:
					done = true
				case '"':
					inDouble = true
				case '\'':
					inSingle = true
				default:
					put(c)
				}
			}
			if at(p) != 0 {
				p++
			}
		}
		args = append(args, line[start:w:w])
	}
}

func isCSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func hexVal(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}
