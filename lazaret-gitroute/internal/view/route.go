package view

import (
	"strings"
)

// Backing names the root a view path is served from.
type Backing uint8

const (
	// Host is the developer's workspace.
	Host Backing = iota
	// Isolated is the Domain's isolated root for git-ignored paths.
	Isolated
)

func (b Backing) String() string {
	if b == Isolated {
		return "isolated"
	}
	return "host"
}

// Classifier says whether git ignores a path; lazaret.dev/pkg/gitignore's
// Classifier, frozen at generation start, is the production one.
type Classifier interface {
	Ignored(path string, isDir bool) bool
}

// Router decides where a view path lives. Its answers depend only on the
// frozen classification and the path, never on the current content of any
// ignore file, so nothing the sandbox writes during a generation can move a
// path from the isolated root to the host.
type Router struct {
	C Classifier
}

// Route returns the backing root of path (relative to the view root,
// slash-separated, "" for the root) for an entry of the given kind.
func (r Router) Route(path string, isDir bool) Backing {
	if path == "" || r.C.Ignored(path, isDir) {
		if path == "" {
			return Host
		}
		return Isolated
	}
	return Host
}

// ReadOnly reports whether path may not be created, written, renamed,
// removed, linked or have its metadata changed in the view: .git/config and
// everything at or below .git/hooks, which the host runs on the
// developer's behalf. ".git" itself may not be renamed or removed either,
// since replacing it would replace both.
func ReadOnly(path string) bool {
	return path == ".git" || path == ".git/config" || path == ".git/hooks" || strings.HasPrefix(path, ".git/hooks/")
}

// join appends name to the directory path dir.
func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// split returns the parent directory and last component of path.
func split(path string) (dir, name string) {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[:i], path[i+1:]
	}
	return "", path
}
