package resp

// SplitArgs splits an inline request line into arguments with the rules of
// Redis's sdssplitargs: arguments are separated by white space; "double
// quotes" understand \n \r \t \b \a, \xHH and \<any>; 'single quotes'
// understand only \'; a closing quote must be followed by white space or the
// end of the line; a NUL byte ends the line, as it does for C strings. It
// returns false for unbalanced quotes.
func SplitArgs(line []byte) ([][]byte, bool) {
	var args [][]byte
	p := 0
	at := func(i int) byte { // the line as a NUL-terminated C string
		if i < len(line) {
			return line[i]
		}
		return 0
	}
	for {
		for at(p) != 0 && isCSpace(at(p)) {
			p++
		}
		if at(p) == 0 {
			return args, true
		}
		var cur []byte
		inDouble, inSingle, done := false, false, false
		for !done {
			c := at(p)
			switch {
			case inDouble:
				switch {
				case c == '\\' && at(p+1) == 'x' && isHex(at(p+2)) && isHex(at(p+3)):
					cur = append(cur, hexVal(at(p+2))<<4|hexVal(at(p+3)))
					p += 3
				case c == '\\' && at(p+1) != 0:
					p++
					switch e := at(p); e {
					case 'n':
						cur = append(cur, '\n')
					case 'r':
						cur = append(cur, '\r')
					case 't':
						cur = append(cur, '\t')
					case 'b':
						cur = append(cur, '\b')
					case 'a':
						cur = append(cur, '\a')
					default:
						cur = append(cur, e)
					}
				case c == '"':
					if n := at(p + 1); n != 0 && !isCSpace(n) {
						return nil, false
					}
					done = true
				case c == 0:
					return nil, false
				default:
					cur = append(cur, c)
				}
			case inSingle:
				switch {
				case c == '\\' && at(p+1) == '\'':
					p++
					cur = append(cur, '\'')
				case c == '\'':
					if n := at(p + 1); n != 0 && !isCSpace(n) {
						return nil, false
					}
					done = true
				case c == 0:
					return nil, false
				default:
					cur = append(cur, c)
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
					cur = append(cur, c)
				}
			}
			if at(p) != 0 {
				p++
			}
		}
		if cur == nil {
			cur = []byte{}
		}
		args = append(args, cur)
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
