package engine

// Match reports whether s matches the glob pattern as Redis's KEYS, SCAN
// MATCH and CONFIG GET understand it: * ? [abc] [^a-z] and \ escapes. A '['
// without its ']' runs to the end of the pattern, and a range written
// backwards ([z-a]) means the same as forwards, as in Redis.
func Match(pattern, s []byte, nocase bool) bool {
	skip := false
	return match(pattern, s, nocase, &skip, 0)
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func eqByte(a, b byte, nocase bool) bool {
	if nocase {
		return lower(a) == lower(b)
	}
	return a == b
}

// match is the recursive matcher. skipLonger short-circuits the retries of
// an outer '*' once an inner one has failed on the whole rest of the string,
// which keeps patterns like "a*a*a*a*b" from going exponential; nesting caps
// the recursion depth as Redis does.
func match(p, s []byte, nocase bool, skipLonger *bool, nesting int) bool {
	if nesting > 1000 {
		return false
	}
	for len(p) > 0 && len(s) > 0 {
		switch p[0] {
		case '*':
			for len(p) > 1 && p[1] == '*' {
				p = p[1:]
			}
			if len(p) == 1 {
				return true
			}
			for len(s) > 0 {
				if match(p[1:], s, nocase, skipLonger, nesting+1) {
					return true
				}
				if *skipLonger {
					return false
				}
				s = s[1:]
			}
			*skipLonger = true
			return false
		case '?':
			s = s[1:]
		case '[':
			p = p[1:]
			not := len(p) > 0 && p[0] == '^'
			if not {
				p = p[1:]
			}
			matched := false
			for {
				if len(p) == 0 {
					// Unterminated class: stop here; the step below must not
					// run past the end.
					p = nil
					break
				}
				if p[0] == '\\' && len(p) >= 2 {
					p = p[1:]
					if p[0] == s[0] {
						matched = true
					}
				} else if p[0] == ']' {
					break
				} else if len(p) >= 3 && p[1] == '-' {
					lo, hi, c := p[0], p[2], s[0]
					if lo > hi {
						lo, hi = hi, lo
					}
					if nocase {
						lo, hi, c = lower(lo), lower(hi), lower(c)
					}
					p = p[2:]
					if c >= lo && c <= hi {
						matched = true
					}
				} else if eqByte(p[0], s[0], nocase) {
					matched = true
				}
				p = p[1:]
			}
			if not {
				matched = !matched
			}
			if !matched {
				return false
			}
			s = s[1:]
			if p == nil {
				// The class ran to the end of the pattern.
				return len(s) == 0
			}
		case '\\':
			if len(p) >= 2 {
				p = p[1:]
			}
			if !eqByte(p[0], s[0], nocase) {
				return false
			}
			s = s[1:]
		default:
			if !eqByte(p[0], s[0], nocase) {
				return false
			}
			s = s[1:]
		}
		p = p[1:]
		if len(s) == 0 {
			for len(p) > 0 && p[0] == '*' {
				p = p[1:]
			}
			break
		}
	}
	return len(p) == 0 && len(s) == 0
}
