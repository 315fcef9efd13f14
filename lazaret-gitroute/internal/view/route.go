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

// Router decides where a view path lives and what the sandbox may do
// there. Its answers depend only on the layout frozen at generation start
// (classification, index, repositories) and the path, never on the
// current content of any file, so nothing the sandbox writes during a
// generation can move a path from the isolated root to the host.
type Router struct {
	C Classifier
	// Repos are the repositories present at generation start.
	Repos Repos
	// Index is the frozen index (nil: nothing tracked). An entry named
	// HEAD in the work tree routes to the isolated root unless tracked.
	Index Tracker
	// Named are the work-tree paths the host's git configuration names as
	// files git reads or programs it runs (gitignore.Config.Named); see
	// NewNamed.
	Named Named
}

// Route returns the backing root of path (relative to the view root,
// slash-separated, "" for the root) for an entry of the given kind.
//
// Besides ignored paths, three kinds of path are served from the isolated
// root whatever the ignore rules say: a ".git" below the root that is not
// a nested repository frozen at generation start, and everything below it;
// an untracked entry named HEAD outside administrative areas, and
// everything below it (so that no bare repository can be assembled on the
// host); and the sequencer state directories of an administrative area
// (rebase-merge, rebase-apply, sequencer).
func (r Router) Route(path string, isDir bool) Backing {
	if path == "" {
		return Host
	}
	p := r.locate(path)
	switch {
	case p.foreign:
		return Isolated
	case p.area != "":
		top, _, _ := strings.Cut(p.rel, "/")
		if sequencerDirs[top] {
			return Isolated
		}
		return Host
	}
	if r.C.Ignored(path, isDir) {
		return Isolated
	}
	return Host
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
