package session

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ErrArgvLine is the class of errors of SplitArgv.
var ErrArgvLine = errors.New("invalid command line")

// ArgvLineError says where and why SplitArgv refused a line.
type ArgvLineError struct {
	Offset int // byte offset in the line
	Reason string
}

func (e *ArgvLineError) Error() string {
	return fmt.Sprintf("command line at byte %d: %s", e.Offset, e.Reason)
}

// Is makes errors.Is(err, ErrArgvLine) true.
func (e *ArgvLineError) Is(target error) bool { return target == ErrArgvLine }

// bareSafe reports whether c needs no quoting.
func bareSafe(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_@%+=:,./-", c) >= 0
}

// QuoteArgv writes argv as one line of shell-style words that SplitArgv
// reads back exactly: plain words bare, printable ones in single quotes,
// and anything with control, escape, non-printable or invalid UTF-8
// content in $'...' with \xHH escapes, so the line itself is inert on a
// terminal.
func QuoteArgv(argv []string) string {
	words := make([]string, len(argv))
	for i, a := range argv {
		words[i] = quoteWord(a)
	}
	return strings.Join(words, " ")
}

func quoteWord(a string) string {
	bare, printable := a != "", utf8.ValidString(a)
	for i := 0; i < len(a); i++ {
		bare = bare && bareSafe(a[i])
	}
	for _, r := range a {
		printable = printable && unicode.IsPrint(r)
	}
	switch {
	case bare:
		return a
	case printable:
		return "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	var b strings.Builder
	b.WriteString("$'")
	for len(a) > 0 {
		r, n := utf8.DecodeRuneInString(a)
		switch {
		case r == utf8.RuneError && n <= 1, !unicode.IsPrint(r):
			for _, c := range []byte(a[:n]) {
				fmt.Fprintf(&b, `\x%02x`, c)
			}
		case r == '\\' || r == '\'':
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteString(a[:n])
		}
		a = a[n:]
	}
	b.WriteByte('\'')
	return b.String()
}

// shellOnly are the characters that mean something only to a shell; left
// unquoted they are refused, because no shell reads the line.
const shellOnly = "|&;<>()$`*?[]{}~#!"

// SplitArgv splits a line into words as a POSIX shell would split a simple
// command made only of words, without running or expanding anything:
// blanks separate words; 'single quotes' are literal; "double quotes"
// keep \\, \", \$ and \` escapes; $'...' takes \\, \', \", \n, \t, \r,
// \a, \b, \e, \f, \v and \xHH; a backslash outside quotes takes the next
// character literally. Unquoted shell syntax (pipes, redirections,
// substitutions, globs, comments) is an error, as is an empty line.
func SplitArgv(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	fail := func(at int, format string, a ...any) ([]string, error) {
		return nil, &ArgvLineError{Offset: at, Reason: fmt.Sprintf(format, a...)}
	}
	for i := 0; i < len(line); {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
			i++
		case c == '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				return fail(i, "unterminated single quote")
			}
			cur.WriteString(line[i+1 : i+1+end])
			inWord = true
			i += end + 2
		case c == '$' && i+1 < len(line) && line[i+1] == '\'':
			n, err := ansiQuoted(line, i, &cur)
			if err != nil {
				return nil, err
			}
			inWord = true
			i = n
		case c == '"':
			j := i + 1
			for ; j < len(line) && line[j] != '"'; j++ {
				if line[j] == '\\' && j+1 < len(line) && strings.IndexByte("\\\"$`", line[j+1]) >= 0 {
					j++
				} else if line[j] == '$' || line[j] == '`' {
					return fail(j, "%q inside double quotes would be a substitution; escape it with a backslash or use single quotes", line[j])
				}
				cur.WriteByte(line[j])
			}
			if j >= len(line) {
				return fail(i, "unterminated double quote")
			}
			inWord = true
			i = j + 1
		case c == '\\':
			if i+1 >= len(line) {
				return fail(i, "a backslash at the end of the line escapes nothing")
			}
			_, n := utf8.DecodeRuneInString(line[i+1:])
			cur.WriteString(line[i+1 : i+1+n])
			inWord = true
			i += 1 + n
		case strings.IndexByte(shellOnly, c) >= 0:
			return fail(i, "unquoted %q is shell syntax and no shell reads this line; quote it", c)
		case c < 0x20 || c == 0x7f:
			return fail(i, "control character %#02x; write it as $'\\x%02x'", c, c)
		default:
			cur.WriteByte(c)
			inWord = true
			i++
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	if len(words) == 0 {
		return fail(0, "the line has no words")
	}
	return words, nil
}

// ansiQuoted reads the $'...' word at line[at:] into cur and returns the
// offset after its closing quote.
func ansiQuoted(line string, at int, cur *strings.Builder) (int, error) {
	simple := map[byte]byte{'\\': '\\', '\'': '\'', '"': '"', 'n': '\n', 't': '\t', 'r': '\r', 'a': 7, 'b': 8, 'e': 0x1b, 'f': '\f', 'v': '\v'}
	i := at + 2
	for i < len(line) {
		c := line[i]
		switch {
		case c == '\'':
			return i + 1, nil
		case c != '\\':
			cur.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(line) {
			break
		}
		e := line[i+1]
		if v, ok := simple[e]; ok {
			cur.WriteByte(v)
			i += 2
			continue
		}
		if e != 'x' {
			return 0, &ArgvLineError{Offset: i, Reason: fmt.Sprintf("unknown escape \\%c in $'...'", e)}
		}
		j, v := i+2, 0
		for ; j < len(line) && j < i+4 && isHex(line[j]); j++ {
			v = v*16 + hexVal(line[j])
		}
		if j == i+2 {
			return 0, &ArgvLineError{Offset: i, Reason: "\\x without hex digits in $'...'"}
		}
		cur.WriteByte(byte(v))
		i = j
	}
	return 0, &ArgvLineError{Offset: at, Reason: "unterminated $'...'"}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func hexVal(c byte) int {
	switch {
	case c >= 'a':
		return int(c-'a') + 10
	case c >= 'A':
		return int(c-'A') + 10
	}
	return int(c - '0')
}
