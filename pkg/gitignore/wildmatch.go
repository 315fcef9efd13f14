package gitignore

// wildmatch reports whether text matches the glob pattern, with git's
// wildmatch semantics. With pathname set, "*", "?" and bracket expressions
// never match "/", and "**" matches across directories only when it stands
// alone between slashes (or at either end of the pattern); otherwise "**"
// behaves as "*". Without pathname every wildcard may match "/".
//
// Matching is on bytes, case-sensitive. A malformed bracket expression (an
// unterminated "[" or an unknown "[:class:]") and a trailing lone backslash
// never match.
func wildmatch(pattern, text string, pathname bool) bool {
	m := wildmatcher{p: pattern, t: text, pathname: pathname}
	return m.match(0, 0)
}

type wildmatcher struct {
	p, t     string
	pathname bool
	// failed remembers (pattern, text) offsets already shown not to match,
	// so that patterns with many stars stay polynomial.
	failed map[[2]int]bool
}

func (m *wildmatcher) match(pi, ti int) bool {
	p, t := m.p, m.t
	for pi < len(p) {
		switch c := p[pi]; c {
		case '*':
			return m.star(pi, ti)
		case '?':
			if ti >= len(t) || (m.pathname && t[ti] == '/') {
				return false
			}
			pi++
			ti++
		case '[':
			if ti >= len(t) {
				return false
			}
			next, ok := matchBracket(p, pi, t[ti], m.pathname)
			if !ok {
				return false
			}
			pi = next
			ti++
		case '\\':
			pi++
			if pi >= len(p) || ti >= len(t) || t[ti] != p[pi] {
				return false
			}
			pi++
			ti++
		default:
			if ti >= len(t) || t[ti] != c {
				return false
			}
			pi++
			ti++
		}
	}
	return ti == len(t)
}

// star matches a run of "*" starting at p[pi] against t[ti:].
func (m *wildmatcher) star(pi, ti int) bool {
	key := [2]int{pi, ti}
	if m.failed[key] {
		return false
	}
	p, t := m.p, m.t
	start := pi
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	crossSlash := !m.pathname
	if m.pathname && pi-start >= 2 {
		alonePrev := start == 0 || p[start-1] == '/'
		aloneNext := pi == len(p) || p[pi] == '/' || (p[pi] == '\\' && pi+1 < len(p) && p[pi+1] == '/')
		if alonePrev && aloneNext {
			// "**/" may stand for no directory at all.
			if pi < len(p) && p[pi] == '/' && m.match(pi+1, ti) {
				return true
			}
			crossSlash = true
		}
	}
	if pi == len(p) {
		if crossSlash {
			return true
		}
		for k := ti; k < len(t); k++ {
			if t[k] == '/' {
				return false
			}
		}
		return true
	}
	for k := ti; k <= len(t); k++ {
		if m.match(pi, k) {
			return true
		}
		if k < len(t) && !crossSlash && t[k] == '/' {
			break
		}
	}
	if m.failed == nil {
		m.failed = make(map[[2]int]bool)
	}
	m.failed[key] = true
	return false
}

// matchBracket matches the bracket expression that opens at p[open] against
// the byte c. It returns the offset just past the closing "]" and whether c
// matched; a malformed expression never matches.
func matchBracket(p string, open int, c byte, pathname bool) (int, bool) {
	i := open + 1
	at := func(k int) byte {
		if k < len(p) {
			return p[k]
		}
		return 0
	}
	negated := false
	if at(i) == '!' || at(i) == '^' {
		negated = true
		i++
	}
	matched := false
	var prev byte // previous literal member, 0 after a range or class
	first := true
	for first || at(i) != ']' {
		first = false
		pc := at(i)
		if i >= len(p) {
			return 0, false
		}
		switch {
		case pc == '\\':
			i++
			if i >= len(p) {
				return 0, false
			}
			pc = p[i]
			if c == pc {
				matched = true
			}
			prev = pc
		case pc == '-' && prev != 0 && i+1 < len(p) && p[i+1] != ']':
			i++
			hi := p[i]
			if hi == '\\' {
				i++
				if i >= len(p) {
					return 0, false
				}
				hi = p[i]
			}
			if c >= prev && c <= hi {
				matched = true
			}
			prev = 0
		case pc == '[' && at(i+1) == ':':
			s := i + 2
			j := s
			for j < len(p) && p[j] != ']' {
				j++
			}
			if j >= len(p) {
				return 0, false
			}
			if j-s-1 < 0 || p[j-1] != ':' {
				// Not a "[:class:]": the "[" is an ordinary member.
				if c == '[' {
					matched = true
				}
				prev = '['
				break
			}
			in, known := inClass(p[s:j-1], c)
			if !known {
				return 0, false
			}
			if in {
				matched = true
			}
			i = j
			prev = 0
		default:
			if c == pc {
				matched = true
			}
			prev = pc
		}
		i++
	}
	if matched == negated || (pathname && c == '/') {
		return 0, false
	}
	return i + 1, true
}

// inClass reports whether c is in the named POSIX class, with git's ASCII
// definitions, and whether the class name is known.
func inClass(name string, c byte) (in, known bool) {
	upper := c >= 'A' && c <= 'Z'
	lower := c >= 'a' && c <= 'z'
	digit := c >= '0' && c <= '9'
	space := c == ' ' || c == '\t' || c == '\n' || c == '\r'
	print := c >= 0x20 && c <= 0x7e
	switch name {
	case "alnum":
		return upper || lower || digit, true
	case "alpha":
		return upper || lower, true
	case "blank":
		return c == ' ' || c == '\t', true
	case "cntrl":
		return c < 0x20 || c == 0x7f, true
	case "digit":
		return digit, true
	case "graph":
		return print && !space, true
	case "lower":
		return lower, true
	case "print":
		return print, true
	case "punct":
		return print && !space && !upper && !lower && !digit, true
	case "space":
		return space, true
	case "upper":
		return upper, true
	case "xdigit":
		return digit || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'), true
	}
	return false, false
}
