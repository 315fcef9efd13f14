package isolation

import (
	"errors"
	"fmt"
	"strings"
)

// MaxPathLen bounds one path, as PATH_MAX does.
const MaxPathLen = 4096

// ErrPath means a path is not a workspace path this package accepts.
var ErrPath = errors.New("invalid workspace path")

// CheckPath accepts a workspace path: relative, slash-separated, clean
// (no empty, "." or ".." component, no leading or trailing slash), without
// NUL, at most MaxPathLen bytes, and not ".git" or below it, which the
// view never routes to the isolated root. Bytes need not be UTF-8, as in
// git.
func CheckPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("%w: empty", ErrPath)
	case len(p) > MaxPathLen:
		return fmt.Errorf("%w: %d bytes, more than %d", ErrPath, len(p), MaxPathLen)
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("%w %q: holds a NUL byte", ErrPath, p)
	}
	for i, c := range strings.Split(p, "/") {
		switch {
		case c == "":
			return fmt.Errorf("%w %q: empty component (leading, trailing or doubled slash)", ErrPath, p)
		case c == "." || c == "..":
			return fmt.Errorf("%w %q: %q component", ErrPath, p, c)
		case i == 0 && c == ".git":
			return fmt.Errorf("%w %q: inside .git", ErrPath, p)
		}
	}
	return nil
}
