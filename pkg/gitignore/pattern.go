package gitignore

import (
	"bytes"
	"strings"
)

// Pattern is one parsed line of an ignore file.
type Pattern struct {
	// Text is the pattern as matched: without a leading "!" or a trailing
	// "/", trailing unescaped spaces trimmed.
	Text string
	// Base is the directory of the ignore file the pattern came from,
	// relative to the workspace root, without a trailing slash ("" for the
	// root, $GIT_DIR/info/exclude and the global excludes file).
	Base string
	// Negative is set for a "!" pattern: a match re-includes the path.
	Negative bool
	// DirOnly is set for a pattern that ended in "/": it matches
	// directories only.
	DirOnly bool
	// Basename is set when the pattern has no "/" other than a trailing
	// one: it is matched against the last path component at any depth.
	Basename bool
	// literal is the length of the leading part of Text with no glob
	// special character ("*", "?", "[", "\\").
	literal int
	// Source names the file and line for diagnostics ("a/.gitignore:3").
	Source string
}

// ParsePattern parses one ignore-file line. It reports false for a line
// that holds no pattern: blank, a comment, or only trailing spaces.
func ParsePattern(line, base string) (Pattern, bool) {
	line = trimTrailingSpaces(line)
	if line == "" || line[0] == '#' {
		return Pattern{}, false
	}
	p := Pattern{Base: base}
	if line[0] == '!' {
		p.Negative = true
		line = line[1:]
	}
	if strings.HasSuffix(line, "/") {
		p.DirOnly = true
		line = line[:len(line)-1]
	}
	p.Basename = !strings.Contains(line, "/")
	p.Text = line
	p.literal = literalPrefix(line)
	return p, true
}

// literalPrefix is the number of leading bytes of s before the first glob
// special character.
func literalPrefix(s string) int {
	i := strings.IndexAny(s, `*?[\`)
	if i < 0 {
		return len(s)
	}
	return i
}

// trimTrailingSpaces removes trailing spaces that are not escaped with a
// backslash. A line that ends in a lone backslash is left as it is.
func trimTrailingSpaces(s string) string {
	cut := -1
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ':
			if cut < 0 {
				cut = i
			}
		case '\\':
			i++
			if i >= len(s) {
				return s
			}
			cut = -1
		default:
			cut = -1
		}
	}
	if cut >= 0 {
		return s[:cut]
	}
	return s
}

// utf8BOM is skipped at the start of an ignore file, as git does.
var utf8BOM = []byte{0xef, 0xbb, 0xbf}

// ParseFile parses the content of an ignore file whose directory is base
// (relative to the workspace root, "" for the root). source names the file
// in each pattern's Source. Lines end at "\n"; a "\r" before it is dropped.
func ParseFile(data []byte, base, source string) []Pattern {
	data = bytes.TrimPrefix(data, utf8BOM)
	var out []Pattern
	lineno := 0
	for len(data) > 0 {
		lineno++
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		line = bytes.TrimSuffix(line, []byte{'\r'})
		if p, ok := ParsePattern(string(line), base); ok {
			p.Source = source + ":" + itoa(lineno)
			out = append(out, p)
		}
	}
	return out
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// Match reports whether the pattern matches path (relative to the workspace
// root, slash-separated, no trailing slash); isDir says whether path is a
// directory. A match of a Negative pattern means "not ignored".
func (p *Pattern) Match(path string, isDir bool) bool {
	if p.DirOnly && !isDir {
		return false
	}
	if p.Basename {
		name := path
		if i := strings.LastIndexByte(path, '/'); i >= 0 {
			name = path[i+1:]
		}
		if p.literal == len(p.Text) {
			return name == p.Text
		}
		return wildmatch(p.Text, name, false)
	}
	pat, prefix := p.Text, p.literal
	if strings.HasPrefix(pat, "/") {
		pat = pat[1:]
		prefix--
	}
	name := path
	if p.Base != "" {
		if !strings.HasPrefix(path, p.Base+"/") {
			return false
		}
		name = path[len(p.Base)+1:]
	}
	if prefix > 0 {
		// git compares the literal prefix and wildmatches only the rest,
		// so a "**" right after the prefix counts as standing alone.
		if prefix > len(name) || pat[:prefix] != name[:prefix] {
			return false
		}
		pat, name = pat[prefix:], name[prefix:]
		if pat == "" && name == "" {
			return true
		}
	}
	return wildmatch(pat, name, true)
}
