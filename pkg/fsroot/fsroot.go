package fsroot

import (
	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/sys"
)

// The resolution rules. Every one refuses magic links (/proc/<pid>/fd/*
// and the like), which jump to an object without a path walk.
const (
	noLinks = unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS
	// beneath stays below the starting directory, through no link and
	// across no mount: a path a caller computed never needs either.
	beneath = unix.RESOLVE_BENEATH | noLinks | unix.RESOLVE_NO_XDEV
	// inRoot treats the starting directory as "/", so absolute symbolic
	// links and ".." inside an image resolve within the image, and never
	// crosses a mount.
	inRoot = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV
)

// open is openat2 with O_CLOEXEC added. The error is an *os.PathError
// naming "openat2" and path.
func open(dirfd int, path string, flags int, mode uint32, resolve uint64) (int, error) {
	return sys.Openat2(dirfd, path, &unix.OpenHow{
		Flags:   uint64(flags) | unix.O_CLOEXEC,
		Mode:    uint64(mode),
		Resolve: resolve,
	})
}

// self is the path naming the starting directory itself.
func self(path string) string {
	if path == "" {
		return "."
	}
	return path
}

// OpenNoLinks opens path relative to dirfd (or absolute, or relative to
// the working directory with unix.AT_FDCWD) through no symbolic or magic
// link in any component; a link fails with ELOOP, except that O_PATH with
// O_NOFOLLOW returns a final symbolic link itself. The caller owns the
// returned descriptor.
func OpenNoLinks(dirfd int, path string, flags int, mode uint32) (int, error) {
	return open(dirfd, path, flags, mode, noLinks)
}

// OpenNoMagicLinks opens path following symbolic links but no magic link.
// It is for directories a user names (a configured root, the runtime
// root), where a symbolic link on the way is the user's choice; combine
// it with O_NOFOLLOW to refuse a link as the last component. The caller
// owns the returned descriptor.
func OpenNoMagicLinks(dirfd int, path string, flags int, mode uint32) (int, error) {
	return open(dirfd, path, flags, mode, unix.RESOLVE_NO_MAGICLINKS)
}

// OpenBeneath opens the relative path below the retained directory dirfd:
// ".." never leaves it (EXDEV), no symbolic or magic link is followed
// (ELOOP) and no mount point is crossed (EXDEV). An empty path is dirfd
// itself. The caller owns the returned descriptor.
func OpenBeneath(dirfd int, path string, flags int, mode uint32) (int, error) {
	return open(dirfd, self(path), flags, mode, beneath)
}

// OpenInRoot opens path inside the root filesystem open at rootfd as if
// rootfd were "/": ".." at the root stays there and absolute symbolic
// links resolve against it, so an image's own links cannot name a host
// file. No magic link is followed and no mount point is crossed (EXDEV).
// An empty path is the root itself. The caller owns the returned
// descriptor.
func OpenInRoot(rootfd int, path string, flags int, mode uint32) (int, error) {
	return open(rootfd, self(path), flags, mode, inRoot)
}

// OpenPath returns an O_PATH descriptor of path itself, for checking the
// object (fstat, statx, identity) or for a later *at call relative to it.
// No symbolic or magic link is followed on the way; a symbolic link as the
// last component is returned itself, unfollowed, so a caller that wants a
// file or a directory checks the type of what it got. The caller owns the
// descriptor.
func OpenPath(dirfd int, path string) (int, error) {
	return OpenNoLinks(dirfd, path, unix.O_PATH|unix.O_NOFOLLOW, 0)
}

// OpenDir returns an O_PATH descriptor of the directory path, reached
// through no symbolic or magic link; a symbolic link as the last component
// fails with ENOTDIR. The caller owns the descriptor.
func OpenDir(dirfd int, path string) (int, error) {
	return OpenNoLinks(dirfd, path, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
}

// Probe opens "/" once under each rule of this package and reports the
// first failure: on a kernel or a seccomp filter without openat2, or one
// that rejects a RESOLVE_* flag, nothing here works.
func Probe() error {
	root, err := OpenNoLinks(unix.AT_FDCWD, "/", unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	for _, openAt := range []func(int, string, int, uint32) (int, error){OpenBeneath, OpenInRoot} {
		fd, err := openAt(root, "", unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return err
		}
		unix.Close(fd)
	}
	return nil
}
