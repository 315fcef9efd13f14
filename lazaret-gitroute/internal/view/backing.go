package view

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/fsroot"
	"lazaret.dev/pkg/sys"
)

// ErrRootNotDirectory means a backing root path is not a directory.
var ErrRootNotDirectory = errors.New("backing root is not a directory")

// OpenRoot opens dir as a retained O_PATH root. The caller owns the
// descriptor.
func OpenRoot(dir string) (int, error) {
	fd, err := fsroot.OpenNoMagicLinks(unix.AT_FDCWD, dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		if errors.Is(err, unix.ENOTDIR) {
			return -1, fmt.Errorf("opening %q: %w", dir, ErrRootNotDirectory)
		}
		return -1, err
	}
	return fd, nil
}

// backing is one retained root.
type backing struct {
	fd int
}

// open resolves rel beneath the root (fsroot.OpenBeneath): never through
// a symbolic link (the kernel resolves links in the view itself, so a
// server-side path never has one in a directory component), a magic link
// or a mount point. rel "" is the root itself.
func (b backing) open(rel string, flags int, mode uint32) (int, error) {
	return fsroot.OpenBeneath(b.fd, rel, flags, mode)
}

// openPath returns an O_PATH descriptor of rel itself (a symbolic link is
// not followed).
func (b backing) openPath(rel string) (int, error) {
	return b.open(rel, unix.O_PATH|unix.O_NOFOLLOW, 0)
}

// lstat stats rel without following a final symbolic link.
func (b backing) lstat(rel string) (unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := b.openPath(rel)
	if err != nil {
		return st, err
	}
	defer unix.Close(fd)
	err = sys.Fstatat(fd, "", &st, unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW)
	return st, err
}

// parent opens the directory of rel (O_PATH) and returns it with rel's last
// component, on which the caller uses an *at call.
func (b backing) parent(rel string) (int, string, error) {
	dir, name := split(rel)
	fd, err := b.open(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	return fd, name, err
}

// mkdirAll creates the directories of rel beneath the root as needed (the
// isolated root mirrors the view's directory structure).
func (b backing) mkdirAll(rel string) error {
	if rel == "" {
		return nil
	}
	parts := strings.Split(rel, "/")
	for i := range parts {
		sub := strings.Join(parts[:i+1], "/")
		fd, name, err := b.parent(sub)
		if err != nil {
			return err
		}
		err = sys.Mkdirat(fd, name, 0o755)
		unix.Close(fd)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return err
		}
	}
	return nil
}

// procPath names an open descriptor so that path-only calls (chmod, chown,
// utimes, xattrs, access) act on exactly the object it refers to.
func procPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// dirent is one entry of a raw directory listing.
type dirent struct {
	name string
	ino  uint64
	typ  uint8
}

// readDir lists the directory rel beneath the root, without "." and "..".
func (b backing) readDir(rel string) ([]dirent, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := b.open(rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, st, err
	}
	defer unix.Close(fd)
	if err := sys.Fstat(fd, &st); err != nil {
		return nil, st, err
	}
	var out []dirent
	buf := make([]byte, 32<<10)
	for {
		n, err := sys.Getdents(fd, buf)
		if err != nil {
			return nil, st, err
		}
		if n <= 0 {
			return out, st, nil
		}
		for off := 0; off+19 <= n; {
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			if reclen < 19 || off+reclen > n {
				return nil, st, unix.EIO
			}
			ino := nativeU64(buf[off:])
			typ := buf[off+18]
			name := buf[off+19 : off+reclen]
			if i := indexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if s := string(name); s != "." && s != ".." {
				out = append(out, dirent{name: s, ino: ino, typ: typ})
			}
			off += reclen
		}
	}
}

// nativeU64 reads a linux_dirent64 field, which is in host byte order.
func nativeU64(b []byte) uint64 { return binary.NativeEndian.Uint64(b) }

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}
