package session

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/sys"
)

// LockName is the Domain lock file inside a Domain's runtime directory.
const LockName = "lock"

// Lock is an open Domain lock file. Holding is true while this process's
// open file description holds flock(LOCK_EX) on it; a spawned coordinator
// that inherits the descriptor shares that hold.
type Lock struct {
	f       *os.File
	Holding bool
}

// OpenLock opens (creating, mode 0600) the lock file at path. The caller
// has made its directory private.
func OpenLock(path string) (*Lock, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY, 0o600)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != uint32(os.Geteuid()) {
		unix.Close(fd)
		return nil, fmt.Errorf("Domain lock %q is not a regular file owned by uid %d", path, os.Geteuid())
	}
	return &Lock{f: os.NewFile(uintptr(fd), path)}, nil
}

// TryLock takes the exclusive lock without waiting. It reports false when
// another open file description holds it.
func (l *Lock) TryLock() (bool, error) {
	err := sys.Flock(int(l.f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	switch {
	case err == nil:
		l.Holding = true
		return true, nil
	case errors.Is(err, unix.EWOULDBLOCK):
		return false, nil
	}
	return false, fmt.Errorf("%q: %w", l.f.Name(), err)
}

// File is the lock's descriptor, for handing to a coordinator.
func (l *Lock) File() *os.File { return l.f }

// Path is the lock file's path.
func (l *Lock) Path() string { return l.f.Name() }

// Close closes this process's descriptor. The lock is released unless a
// coordinator inherited the same open file description.
func (l *Lock) Close() error {
	l.Holding = false
	return l.f.Close()
}

// domainDir creates <runtime root>/domains/<hex> (each level 0700) and
// checks that the Domain directory is a private directory of the user.
func domainDir(dir string) error {
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("creating Domain directory %q: %w", d, err)
		}
		var st unix.Stat_t
		if err := unix.Lstat(d, &st); err != nil {
			return &os.PathError{Op: "lstat", Path: d, Err: err}
		}
		switch {
		case st.Mode&unix.S_IFMT != unix.S_IFDIR:
			return fmt.Errorf("Domain directory %q is not a directory", d)
		case st.Uid != uint32(os.Geteuid()):
			return fmt.Errorf("Domain directory %q is owned by uid %d, not %d", d, st.Uid, os.Geteuid())
		case st.Mode&0o077 != 0:
			return fmt.Errorf("Domain directory %q has mode %04o; it must be 0700", d, st.Mode&0o7777)
		}
	}
	return nil
}
