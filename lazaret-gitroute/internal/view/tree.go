package view

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/gitignore"
)

// Tree reads the host workspace for the frozen classification, confined
// beneath the retained root like every other host access.
type Tree struct{ b backing }

// NewTree returns a Tree over the retained O_PATH root fd (borrowed).
func NewTree(fd int) Tree { return Tree{b: backing{fd: fd}} }

var _ gitignore.Tree = Tree{}

// ReadFile reads a regular file of at most limit bytes. A symbolic link, a
// non-regular file or an absent one reads as fs.ErrNotExist.
func (t Tree) ReadFile(name string, limit int64) ([]byte, error) {
	fd, err := t.b.open(name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return nil, fs.ErrNotExist
		}
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "fstat", Path: name, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fs.ErrNotExist
	}
	if st.Size > limit {
		return nil, fmt.Errorf("%q is %d bytes: %w", name, st.Size, gitignore.ErrIgnoreFileTooLarge)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: name, Err: err}
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%q grew past %d bytes: %w", name, limit, gitignore.ErrIgnoreFileTooLarge)
	}
	return data, nil
}

// ReadDir lists a directory; entries whose kind the directory does not
// record are stat'ed.
func (t Tree) ReadDir(name string) ([]gitignore.DirEntry, error) {
	ents, _, err := t.b.readDir(name)
	if err != nil {
		return nil, &os.PathError{Op: "readdir", Path: name, Err: err}
	}
	out := make([]gitignore.DirEntry, 0, len(ents))
	for _, e := range ents {
		isDir := e.typ == unix.DT_DIR
		if e.typ == unix.DT_UNKNOWN {
			st, err := t.b.lstat(join(name, e.name))
			if err != nil {
				if errors.Is(err, unix.ENOENT) {
					continue
				}
				return nil, &os.PathError{Op: "lstat", Path: join(name, e.name), Err: err}
			}
			isDir = st.Mode&unix.S_IFMT == unix.S_IFDIR
		}
		out = append(out, gitignore.DirEntry{Name: e.name, IsDir: isDir})
	}
	return out, nil
}
