package isolation

import (
	"fmt"
	"sort"
	"strings"
)

// Entry is one host path: a directory (its whole subtree) or another
// entry (file, symbolic link, device).
type Entry struct {
	Path string
	Dir  bool
}

// String shows a directory with a trailing slash.
func (e Entry) String() string {
	if e.Dir {
		return e.Path + "/"
	}
	return e.Path
}

// Set is a sorted set of entries, one per path. The zero Set is empty.
type Set struct {
	entries []Entry // sorted by Path, unique
	index   map[string]struct{}
}

// NewSet checks every entry and returns their set; two entries of one
// path are an error, whatever their kinds.
func NewSet(entries []Entry) (*Set, error) {
	s := &Set{entries: append([]Entry(nil), entries...)}
	sort.Slice(s.entries, func(i, j int) bool { return s.entries[i].Path < s.entries[j].Path })
	for i, e := range s.entries {
		if err := CheckPath(e.Path); err != nil {
			return nil, err
		}
		if i > 0 && s.entries[i-1].Path == e.Path {
			return nil, fmt.Errorf("%w %q: listed twice", ErrPath, e.Path)
		}
	}
	if len(s.entries) > MaxEntries {
		return nil, fmt.Errorf("%d paths: %w", len(s.entries), ErrTooMany)
	}
	s.build()
	return s, nil
}

func (s *Set) build() {
	s.index = make(map[string]struct{}, len(s.entries))
	for _, e := range s.entries {
		s.index[e.Path] = struct{}{}
	}
}

// Entries returns the entries in path order.
func (s *Set) Entries() []Entry {
	if s == nil {
		return nil
	}
	return append([]Entry(nil), s.entries...)
}

// Len is the number of entries.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.entries)
}

// Covers reports whether p equals an entry's path or lies below it,
// whatever kind either is: a kept file that became a directory keeps its
// whole subtree isolated.
func (s *Set) Covers(p string) bool {
	if s == nil || len(s.index) == 0 {
		return false
	}
	for {
		if _, ok := s.index[p]; ok {
			return true
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}

// Has reports whether p is exactly an entry's path.
func (s *Set) Has(p string) bool {
	if s == nil {
		return false
	}
	_, ok := s.index[p]
	return ok
}

// Union returns the set of s's entries and those of add; where both name
// a path, add's kind wins (it is the newer observation).
func (s *Set) Union(add []Entry) (*Set, error) {
	m := map[string]Entry{}
	for _, e := range s.Entries() {
		m[e.Path] = e
	}
	for _, e := range add {
		m[e.Path] = e
	}
	all := make([]Entry, 0, len(m))
	for _, e := range m {
		all = append(all, e)
	}
	return NewSet(all)
}

// Without returns the set less the entries named by paths, and the
// entries removed. A path that is not an entry is an error naming it, and
// nothing is removed.
func (s *Set) Without(paths []string) (*Set, []Entry, error) {
	drop := map[string]bool{}
	for _, p := range paths {
		if !s.Has(p) {
			return nil, nil, fmt.Errorf("%q: %w", p, ErrNotKept)
		}
		drop[p] = true
	}
	var keep, removed []Entry
	for _, e := range s.Entries() {
		if drop[e.Path] {
			removed = append(removed, e)
		} else {
			keep = append(keep, e)
		}
	}
	out, err := NewSet(keep)
	return out, removed, err
}

// Classifier says whether git ignores a path (the frozen
// lazaret.dev/pkg/gitignore Classifier).
type Classifier interface {
	Ignored(path string, isDir bool) bool
}

// Keep is a classifier that also treats every path covered by Set as
// ignored, so that it routes to the isolated root.
type Keep struct {
	Inner Classifier
	Set   *Set
}

// Ignored is true when the inner classifier ignores p or the set covers
// it.
func (k Keep) Ignored(p string, isDir bool) bool {
	return k.Set.Covers(p) || k.Inner.Ignored(p, isDir)
}
