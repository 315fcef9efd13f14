package gitignore

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
)

// MaxIgnoreFileSize bounds one ignore file, as git does (100 MiB). A larger
// file is refused rather than skipped, so that no path the developer
// expects ignored is classified as tracked content.
const MaxIgnoreFileSize = 100 << 20

// ErrIgnoreFileTooLarge means an ignore file exceeds MaxIgnoreFileSize.
var ErrIgnoreFileTooLarge = errors.New("ignore file larger than 100 MiB")

// DirEntry is one entry of a Tree directory.
type DirEntry struct {
	Name  string
	IsDir bool
}

// Tree reads the workspace for Load. Names are slash-separated and relative
// to the workspace root ("" is the root). ReadFile returns an error matching
// fs.ErrNotExist for a file that is absent or not a regular file (a
// symbolic link to an ignore file is not followed, as in git).
type Tree interface {
	ReadFile(name string, limit int64) ([]byte, error)
	ReadDir(name string) ([]DirEntry, error)
}

// Sources are the ignore files outside the work tree, already read. Absent
// files are nil.
type Sources struct {
	InfoExclude    []byte
	GlobalExcludes []byte
	// GlobalName names the global excludes file in pattern sources.
	GlobalName string
}

// Load walks the work tree top-down and returns a Matcher frozen at this
// moment: every .gitignore of every directory git would read (it does not
// descend into excluded directories, into ".git", or into nested
// repositories, whose own ignore files git does not apply), with the info
// and global excludes.
func Load(t Tree, src Sources) (*Matcher, error) {
	return LoadVisit(t, src, nil)
}

// Visit is told about each entry of each directory the walk of LoadVisit
// lists (the workspace's own ".git" excepted), after that directory's
// .gitignore is loaded: m then answers for p as the finished Matcher will,
// since only the ignore files of p's ancestors apply to it. For a
// directory, descend asks the walk to list it even where git would read no
// ignore file in it (an excluded directory, or anything in a nested
// repository); no ignore file is read there. A directory named ".git" is
// never listed.
type Visit func(m *Matcher, p string, isDir bool) (descend bool)

// LoadVisit is Load that also shows visit every entry it lists, so that a
// caller classifying the tree needs no second walk. A nil visit is Load.
func LoadVisit(t Tree, src Sources, visit Visit) (*Matcher, error) {
	m := NewMatcher(nil, ParseFile(src.InfoExclude, "", ".git/info/exclude"), ParseFile(src.GlobalExcludes, "", src.GlobalName))
	if err := load(t, m, "", true, visit); err != nil {
		return nil, err
	}
	return m, nil
}

// load lists dir; readIgnore says whether git reads ignore files there.
func load(t Tree, m *Matcher, dir string, readIgnore bool, visit Visit) error {
	entries, err := t.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("listing workspace directory %q: %w", dir, err)
	}
	if dir != "" {
		for _, e := range entries {
			if e.Name == ".git" {
				// A nested repository: git reads none of its ignore files.
				if visit == nil {
					return nil
				}
				readIgnore = false
			}
		}
	}
	if readIgnore {
		name := path.Join(dir, ".gitignore")
		data, err := t.ReadFile(name, MaxIgnoreFileSize)
		switch {
		case err == nil:
			m.dirs[dir] = ParseFile(data, dir, name)
		case errors.Is(err, fs.ErrNotExist):
		default:
			return fmt.Errorf("reading ignore file %q: %w", name, err)
		}
	}
	for _, e := range entries {
		if dir == "" && e.Name == ".git" {
			continue
		}
		child := path.Join(dir, e.Name)
		descend := false
		if visit != nil {
			descend = visit(m, child, e.IsDir)
		}
		if !e.IsDir || e.Name == ".git" {
			continue
		}
		more := readIgnore && !m.Ignored(child, true)
		if !more && !descend {
			continue
		}
		if err := load(t, m, child, more, visit); err != nil {
			return err
		}
	}
	return nil
}

// Classifier combines a frozen Matcher with a frozen Index: a tracked path
// is never ignored, as in git.
type Classifier struct {
	Matcher *Matcher
	Index   *Index
}

// Ignored reports whether git would treat path as ignored: not tracked (a
// directory counts as tracked when it holds a tracked path) and excluded by
// the ignore rules.
func (c *Classifier) Ignored(p string, isDir bool) bool {
	if c.Index.Tracked(p, isDir) {
		return false
	}
	return c.Matcher.Ignored(p, isDir)
}
