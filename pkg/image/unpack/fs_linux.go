package unpack

import (
	"errors"
	"os"
	"sort"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/fsroot"
	"lazaret.dev/pkg/sys"
)

// Thin wrappers over the syscalls Apply uses. Each retries EINTR and returns
// *os.PathError naming the path relative to the root.

// openInRoot opens rel (relative, cleaned; "" is the root itself) below the
// root descriptor, resolving every component inside the root
// (fsroot.OpenInRoot).
func openInRoot(root int, rel string, flags uint64) (int, error) {
	fd, err := fsroot.OpenInRoot(root, rel, int(flags), 0)
	if errors.Is(err, unix.ENOSYS) {
		return -1, ErrKernel
	}
	if err != nil {
		return -1, err
	}
	return fd, nil
}

func split(rel string) (dir, base string) {
	i := strings.LastIndexByte(rel, '/')
	if i < 0 {
		return "", rel
	}
	return rel[:i], rel[i+1:]
}

func lstatAt(dir int, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := sys.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	return st, err
}

// removeAt removes name in dir, descending into directories. Directories are
// opened without following links and made writable by their owner first, so
// a read-only directory from an image can still be emptied.
func removeAt(dir int, name string) error {
	err := sys.Unlinkat(dir, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return err
	}
	fd, err := sys.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EACCES) {
		if cerr := unix.Fchmodat(dir, name, 0o700, 0); cerr == nil {
			fd, err = sys.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		}
	}
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	_ = unix.Fchmod(fd, 0o700)
	names, err := f.Readdirnames(-1)
	if err != nil {
		return &os.PathError{Op: "readdir", Path: name, Err: err}
	}
	for _, n := range names {
		if err := removeAt(fd, n); err != nil {
			return err
		}
	}
	err = sys.Unlinkat(dir, name, unix.AT_REMOVEDIR)
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return err
	}
	return nil
}

// RemoveTree removes the directory tree at path, including directories an
// image left without owner write or search permission. The last component
// of path is not followed.
func RemoveTree(path string) error {
	dir, base := path, ""
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		dir, base = path[:i], path[i+1:]
		if dir == "" {
			dir = "/"
		}
	}
	if base == "" || base == "." || base == ".." {
		return &os.PathError{Op: "remove tree", Path: path, Err: unix.EINVAL}
	}
	pfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(pfd)
	if err := removeAt(pfd, base); err != nil {
		return &os.PathError{Op: "remove tree", Path: path, Err: err}
	}
	return nil
}

func timespecs(atime, mtime time.Time) [2]unix.Timespec {
	if atime.IsZero() {
		atime = mtime
	}
	return [2]unix.Timespec{unix.NsecToTimespec(atime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
}

// futimens sets the times of an open descriptor (utimensat with a NULL path).
func futimens(fd int, ts [2]unix.Timespec) error {
	_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// byDepth sorts paths deepest first, so a directory's mode is set after
// everything below it has been reached through it.
func byDepth(paths []string) {
	depth := func(p string) int {
		if p == "" {
			return -1
		}
		return strings.Count(p, "/")
	}
	sort.SliceStable(paths, func(i, j int) bool { return depth(paths[i]) > depth(paths[j]) })
}
