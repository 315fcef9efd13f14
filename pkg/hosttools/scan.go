package hosttools

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"

	"golang.org/x/sys/unix"
)

// MaxScanEntries bounds the directory entries Scan looks at, so that a
// huge tree fails clearly instead of stalling a start.
const MaxScanEntries = 1 << 21

// ErrTooLarge means the workspace has more than MaxScanEntries entries.
var ErrTooLarge = errors.New("workspace has more entries than the review scan reads (2097152)")

// Scan returns the state of every file of root that a Rule matches, in
// path order. It lists every directory except the workspace's .git, any
// nested repository's .git and node_modules; it never follows a symbolic
// link (a matching link is recorded with the SHA-256 of its target), and
// opens each directory and file relative to its parent's descriptor with
// O_NOFOLLOW. Matching entries that are neither regular files nor links
// (a FIFO, a socket, a device) are not recorded.
func Scan(root string) ([]File, error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: root, Err: err}
	}
	s := &scanner{root: root}
	err = s.dir(fd, "")
	if err != nil {
		return nil, err
	}
	sort.Slice(s.files, func(i, j int) bool { return s.files[i].Path < s.files[j].Path })
	return s.files, nil
}

type scanner struct {
	root    string
	entries int
	files   []File
}

// dir lists the directory open as fd (which it closes), whose path is rel.
func (s *scanner) dir(fd int, rel string) error {
	f := os.NewFile(uintptr(fd), path.Join(s.root, rel))
	names, err := f.Readdirnames(-1)
	if err != nil {
		f.Close()
		return fmt.Errorf("listing %q: %w", f.Name(), err)
	}
	sort.Strings(names)
	defer f.Close()
	for _, name := range names {
		s.entries++
		if s.entries > MaxScanEntries {
			return fmt.Errorf("scanning %q: %w", s.root, ErrTooLarge)
		}
		p := path.Join(rel, name)
		if rel == "" && name == ".git" {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // removed while listing
			}
			return &os.PathError{Op: "fstatat", Path: path.Join(s.root, p), Err: err}
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			if skipDir(p) {
				continue
			}
			cfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return &os.PathError{Op: "openat", Path: path.Join(s.root, p), Err: err}
			}
			if err := s.dir(cfd, p); err != nil {
				return err
			}
		case unix.S_IFREG:
			if _, ok := Match(p); ok {
				if err := s.file(fd, name, p, &st); err != nil {
					return err
				}
			}
		case unix.S_IFLNK:
			if _, ok := Match(p); ok {
				buf := make([]byte, unix.PathMax)
				n, err := unix.Readlinkat(fd, name, buf)
				if err != nil {
					return &os.PathError{Op: "readlinkat", Path: path.Join(s.root, p), Err: err}
				}
				s.files = append(s.files, File{Path: p, Mode: st.Mode, SHA256: sha256.Sum256(buf[:n])})
			}
		}
	}
	return nil
}

// file hashes the regular file name of the directory fd, checking that
// what it opened is what it listed.
func (s *scanner) file(dirfd int, name, p string, listed *unix.Stat_t) error {
	full := path.Join(s.root, p)
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "openat", Path: full, Err: err}
	}
	f := os.NewFile(uintptr(fd), full)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "fstat", Path: full, Err: err}
	}
	if st.Dev != listed.Dev || st.Ino != listed.Ino || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%q changed while the review scan read it; run the scan again", full)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("reading %q: %w", full, err)
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	s.files = append(s.files, File{Path: p, Mode: st.Mode, SHA256: sum})
	return nil
}
