package sys

import (
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// openat2Attempts bounds the EAGAIN retries of Openat2.
const openat2Attempts = 16

func pathError(op, path string, err error) error {
	if err == nil {
		return nil
	}
	return &os.PathError{Op: op, Path: path, Err: err}
}

// at names what a *at call acted on for its error: path, or the
// descriptor itself when path is empty (AT_EMPTY_PATH).
func at(dirfd int, path string) string {
	if path == "" {
		return "fd " + strconv.Itoa(dirfd)
	}
	return path
}

func linkError(op, oldpath, newpath string, err error) error {
	if err == nil {
		return nil
	}
	return &os.LinkError{Op: op, Old: oldpath, New: newpath, Err: err}
}

// Open is open(2). The caller owns the returned descriptor.
func Open(path string, flags int, mode uint32) (int, error) {
	fd, err := retryInt(func() (int, error) { return unix.Open(path, flags, mode) })
	return fd, pathError("open", path, err)
}

// Openat is openat(2). The caller owns the returned descriptor.
func Openat(dirfd int, path string, flags int, mode uint32) (int, error) {
	fd, err := retryInt(func() (int, error) { return unix.Openat(dirfd, path, flags, mode) })
	return fd, pathError("openat", path, err)
}

// Openat2 is openat2(2) (Linux 5.6 and later; ENOSYS before). EAGAIN,
// which a RESOLVE_* walk returns when it raced a rename or a mount, is
// retried a few times before it is returned. The caller owns the returned
// descriptor.
func Openat2(dirfd int, path string, how *unix.OpenHow) (int, error) {
	var fd int
	var err error
	for range openat2Attempts {
		fd, err = retryInt(func() (int, error) { return unix.Openat2(dirfd, path, how) })
		if !errors.Is(err, unix.EAGAIN) {
			break
		}
	}
	return fd, pathError("openat2", path, err)
}

// Fstatat is fstatat(2).
func Fstatat(dirfd int, path string, st *unix.Stat_t, flags int) error {
	return pathError("fstatat", at(dirfd, path), retry(func() error { return unix.Fstatat(dirfd, path, st, flags) }))
}

// Statx is statx(2). With AT_EMPTY_PATH and path "" it describes dirfd.
func Statx(dirfd int, path string, flags, mask int, st *unix.Statx_t) error {
	return pathError("statx", at(dirfd, path), retry(func() error { return unix.Statx(dirfd, path, flags, mask, st) }))
}

// Faccessat2 is faccessat2(2) (Linux 5.8 and later).
func Faccessat2(dirfd int, path string, mode uint32, flags int) error {
	return pathError("faccessat2", at(dirfd, path), retry(func() error { return unix.Faccessat2(dirfd, path, mode, flags) }))
}

// Mkdirat is mkdirat(2).
func Mkdirat(dirfd int, path string, mode uint32) error {
	return pathError("mkdirat", path, retry(func() error { return unix.Mkdirat(dirfd, path, mode) }))
}

// Mknodat is mknodat(2).
func Mknodat(dirfd int, path string, mode uint32, dev int) error {
	return pathError("mknodat", path, retry(func() error { return unix.Mknodat(dirfd, path, mode, dev) }))
}

// Symlinkat is symlinkat(2); the error names the link, not its target.
func Symlinkat(target string, dirfd int, path string) error {
	return pathError("symlinkat", path, retry(func() error { return unix.Symlinkat(target, dirfd, path) }))
}

// Readlinkat is readlinkat(2).
func Readlinkat(dirfd int, path string, buf []byte) (int, error) {
	n, err := retryInt(func() (int, error) { return unix.Readlinkat(dirfd, path, buf) })
	return n, pathError("readlinkat", path, err)
}

// Unlinkat is unlinkat(2).
func Unlinkat(dirfd int, path string, flags int) error {
	return pathError("unlinkat", path, retry(func() error { return unix.Unlinkat(dirfd, path, flags) }))
}

// Linkat is linkat(2).
func Linkat(olddirfd int, oldpath string, newdirfd int, newpath string, flags int) error {
	return linkError("linkat", oldpath, newpath, retry(func() error {
		return unix.Linkat(olddirfd, oldpath, newdirfd, newpath, flags)
	}))
}

// Renameat2 is renameat2(2).
func Renameat2(olddirfd int, oldpath string, newdirfd int, newpath string, flags uint) error {
	return linkError("renameat2", oldpath, newpath, retry(func() error {
		return unix.Renameat2(olddirfd, oldpath, newdirfd, newpath, flags)
	}))
}
