package gitignore

import (
	"strings"
	"sync"
)

// Matcher answers whether git's ignore rules exclude a path. It holds the
// patterns of every ignore source as they were when it was built and never
// rereads them. It is safe for concurrent use.
type Matcher struct {
	// dirs maps a directory (relative to the root, "" for the root) to the
	// patterns of its .gitignore.
	dirs map[string][]Pattern
	// info holds $GIT_DIR/info/exclude, global the core.excludesFile.
	info, global []Pattern

	mu sync.Mutex
	// dirExcluded caches, per directory, whether it or an ancestor is
	// excluded.
	dirExcluded map[string]bool
}

// NewMatcher builds a matcher from per-directory pattern lists (keyed by
// directory relative to the root, "" for the root), the info/exclude
// patterns and the global excludes patterns.
func NewMatcher(dirs map[string][]Pattern, info, global []Pattern) *Matcher {
	d := make(map[string][]Pattern, len(dirs))
	for k, v := range dirs {
		d[k] = v
	}
	return &Matcher{dirs: d, info: info, global: global, dirExcluded: make(map[string]bool)}
}

// Ignored reports whether git's rules exclude path (relative to the
// workspace root, slash-separated); isDir says whether it is a directory.
// A path under an excluded directory is excluded whatever its own patterns
// say, as in git. Paths inside ".git" are never excluded.
func (m *Matcher) Ignored(path string, isDir bool) bool {
	if path == "" || path == ".git" || strings.HasPrefix(path, ".git/") {
		return false
	}
	parent := ""
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		parent = path[:i]
	}
	if parent != "" && m.excludedDir(parent) {
		return true
	}
	p := m.lastMatch(path, isDir, parent)
	return p != nil && !p.Negative
}

// Why returns the pattern that decides path, or nil when no pattern
// matches; for a path under an excluded directory it is that directory's
// pattern.
func (m *Matcher) Why(path string, isDir bool) *Pattern {
	parts := strings.Split(path, "/")
	for i := 1; i < len(parts); i++ {
		anc := strings.Join(parts[:i], "/")
		par := strings.Join(parts[:i-1], "/")
		if p := m.lastMatch(anc, true, par); p != nil && !p.Negative {
			return p
		}
	}
	parent := strings.Join(parts[:len(parts)-1], "/")
	return m.lastMatch(path, isDir, parent)
}

// excludedDir reports whether dir or one of its ancestors is excluded.
func (m *Matcher) excludedDir(dir string) bool {
	m.mu.Lock()
	v, ok := m.dirExcluded[dir]
	m.mu.Unlock()
	if ok {
		return v
	}
	parent := ""
	if i := strings.LastIndexByte(dir, '/'); i >= 0 {
		parent = dir[:i]
	}
	if parent != "" && m.excludedDir(parent) {
		v = true
	} else {
		p := m.lastMatch(dir, true, parent)
		v = p != nil && !p.Negative
	}
	m.mu.Lock()
	m.dirExcluded[dir] = v
	m.mu.Unlock()
	return v
}

// lastMatch returns the deciding pattern for path, whose parent directory is
// parent: the last matching pattern of the deepest .gitignore that has one,
// else of info/exclude, else of the global excludes.
func (m *Matcher) lastMatch(path string, isDir bool, parent string) *Pattern {
	dir := parent
	for {
		if p := lastIn(m.dirs[dir], path, isDir); p != nil {
			return p
		}
		if dir == "" {
			break
		}
		if i := strings.LastIndexByte(dir, '/'); i >= 0 {
			dir = dir[:i]
		} else {
			dir = ""
		}
	}
	if p := lastIn(m.info, path, isDir); p != nil {
		return p
	}
	return lastIn(m.global, path, isDir)
}

func lastIn(list []Pattern, path string, isDir bool) *Pattern {
	for i := len(list) - 1; i >= 0; i-- {
		if list[i].Match(path, isDir) {
			return &list[i]
		}
	}
	return nil
}

// Files is the number of per-directory ignore files the matcher holds.
func (m *Matcher) Files() int { return len(m.dirs) }
