package daemon

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/gitignore"
	"lazaret.dev/pkg/isolation"
)

// isolationWalk keeps the paths of the keep file isolated and collects,
// during the classification walk, the host entries present at start that
// route to the isolated root: the topmost of each isolated subtree, since
// the walk does not list an isolated directory for this purpose.
type isolationWalk struct {
	keep  *isolation.Set
	found []isolation.Reported
}

// readKeep reads the keep file named by path ("" is the empty set).
func readKeep(path string) (*isolation.Set, error) {
	if path == "" {
		return &isolation.Set{}, nil
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, isolation.MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading keep file %q: %w", path, err)
	}
	s, err := isolation.ParseKeep(data)
	if err != nil {
		return nil, fmt.Errorf("keep file %q: %w", path, err)
	}
	return s, nil
}

// visit returns the gitignore.Visit of a walk whose index is idx.
func (w *isolationWalk) visit(idx *gitignore.Index) gitignore.Visit {
	return func(m *gitignore.Matcher, p string, isDir bool) bool {
		// The walk still lists a kept directory git reads ignore files
		// in; what lies below it was reported with it.
		if i := strings.LastIndexByte(p, '/'); i >= 0 && w.keep.Covers(p[:i]) {
			return false
		}
		c := gitignore.Classifier{Matcher: m, Index: idx}
		switch {
		case c.Ignored(p, isDir):
			w.found = append(w.found, isolation.Reported{Entry: isolation.Entry{Path: p, Dir: isDir}, Reason: isolation.Ignored})
			return false
		case w.keep.Covers(p):
			w.found = append(w.found, isolation.Reported{Entry: isolation.Entry{Path: p, Dir: isDir}, Reason: isolation.Kept})
			return false
		}
		return isDir
	}
}

// classifier is cls with the keep set.
func (w *isolationWalk) classifier(cls *gitignore.Classifier) isolation.Keep {
	return isolation.Keep{Inner: cls, Set: w.keep}
}

// kept counts the entries isolated only by the keep set.
func (w *isolationWalk) kept() int {
	n := 0
	for _, r := range w.found {
		if r.Reason == isolation.Kept {
			n++
		}
	}
	return n
}

// writeReport writes the report to path, which must not exist; "" writes
// nothing. The file is complete (synced) before the daemon reports Ready.
func (w *isolationWalk) writeReport(path string) error {
	if path == "" {
		return nil
	}
	sort.Slice(w.found, func(i, j int) bool { return w.found[i].Path < w.found[j].Path })
	data, err := isolation.EncodeReport(w.found)
	if err != nil {
		return fmt.Errorf("isolation report %q: %w", path, err)
	}
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return &os.PathError{Op: "create", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	_, werr := f.Write(data)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return fmt.Errorf("writing isolation report %q: %w", path, err)
	}
	return nil
}
