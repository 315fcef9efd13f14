package sys

import (
	"os"

	"golang.org/x/sys/unix"
)

// Read is read(2).
func Read(fd int, p []byte) (int, error) {
	n, err := retryInt(func() (int, error) { return unix.Read(fd, p) })
	return n, os.NewSyscallError("read", err)
}

// Pread is pread64(2).
func Pread(fd int, p []byte, off int64) (int, error) {
	n, err := retryInt(func() (int, error) { return unix.Pread(fd, p, off) })
	return n, os.NewSyscallError("pread", err)
}

// Write is write(2). Like write(2) it may write less than p; the caller
// checks the count.
func Write(fd int, p []byte) (int, error) {
	n, err := retryInt(func() (int, error) { return unix.Write(fd, p) })
	return n, os.NewSyscallError("write", err)
}

// Getdents is getdents64(2).
func Getdents(fd int, buf []byte) (int, error) {
	n, err := retryInt(func() (int, error) { return unix.Getdents(fd, buf) })
	return n, os.NewSyscallError("getdents64", err)
}

// Fstat is fstat(2).
func Fstat(fd int, st *unix.Stat_t) error {
	return os.NewSyscallError("fstat", retry(func() error { return unix.Fstat(fd, st) }))
}

// Fstatfs is fstatfs(2).
func Fstatfs(fd int, st *unix.Statfs_t) error {
	return os.NewSyscallError("fstatfs", retry(func() error { return unix.Fstatfs(fd, st) }))
}

// Fallocate is fallocate(2).
func Fallocate(fd int, mode uint32, off, size int64) error {
	return os.NewSyscallError("fallocate", retry(func() error { return unix.Fallocate(fd, mode, off, size) }))
}

// Flock is flock(2). With LOCK_NB a held lock is EWOULDBLOCK.
func Flock(fd int, how int) error {
	return os.NewSyscallError("flock", retry(func() error { return unix.Flock(fd, how) }))
}

// FcntlFlock is fcntl(2) with a record-lock command (F_OFD_SETLK and the
// like).
func FcntlFlock(fd int, cmd int, lk *unix.Flock_t) error {
	return os.NewSyscallError("fcntl", retry(func() error { return unix.FcntlFlock(uintptr(fd), cmd, lk) }))
}

// IoctlSetTermios is ioctl(2) with a TCSETS-style request.
func IoctlSetTermios(fd int, req uint, t *unix.Termios) error {
	return os.NewSyscallError("ioctl", retry(func() error { return unix.IoctlSetTermios(fd, req, t) }))
}
