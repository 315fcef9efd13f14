package gitroute

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/hostid"
)

// fuseSuperMagic is FUSE_SUPER_MAGIC from linux/magic.h.
const fuseSuperMagic = 0x65735546

// ErrNotFuse means the mountpoint is not the root of a FUSE mount.
var ErrNotFuse = errors.New("mountpoint is not a FUSE mount")

// Unmount detaches the view mounted at mountpoint: umount2 when the caller
// has the privilege (root), else `fusermount3 -u` (the setuid helper that
// lets a user unmount what it mounted). lazy detaches even a mount whose
// server has died or is busy.
func Unmount(mountpoint string, lazy bool) error {
	if os.Geteuid() == 0 {
		flags := 0
		if lazy {
			flags = unix.MNT_DETACH
		}
		if err := unix.Unmount(mountpoint, flags); err != nil {
			return fmt.Errorf("unmounting %q: %w", mountpoint, &os.PathError{Op: "umount2", Path: mountpoint, Err: err})
		}
		return nil
	}
	bin, err := exec.LookPath("fusermount3")
	if err != nil {
		return fmt.Errorf("unmounting %q: fusermount3 not found (install fuse3): %w", mountpoint, err)
	}
	args := []string{"-u"}
	if lazy {
		args = append(args, "-z")
	}
	cmd := exec.Command(bin, append(args, "--", mountpoint)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("unmounting %q with fusermount3: %w: %s", mountpoint, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}

// MountAt returns the identity of the FUSE mount whose root is mountpoint.
// A FUSE mount whose server has gone answers ENOTCONN; that is reported as
// the error, not as absence.
func MountAt(mountpoint string) (hostid.MountIdentity, error) {
	fd, err := unix.Open(mountpoint, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return hostid.MountIdentity{}, &os.PathError{Op: "open", Path: mountpoint, Err: err}
	}
	defer unix.Close(fd)
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(fd, &sfs); err != nil {
		return hostid.MountIdentity{}, &os.PathError{Op: "fstatfs", Path: mountpoint, Err: err}
	}
	if uint64(sfs.Type) != fuseSuperMagic {
		return hostid.MountIdentity{}, fmt.Errorf("%q has filesystem magic %#x: %w", mountpoint, uint64(sfs.Type), ErrNotFuse)
	}
	m, err := hostid.MountOf(fd)
	if err != nil {
		return hostid.MountIdentity{}, fmt.Errorf("identifying mount at %q: %w", mountpoint, err)
	}
	return m, nil
}

// Mounted reports whether the recorded mount is still at mountpoint. A
// mount whose server died (ENOTCONN) counts as present: it still needs
// unmounting.
func Mounted(mountpoint string, recorded hostid.MountIdentity) (bool, error) {
	m, err := MountAt(mountpoint)
	switch {
	case err == nil:
		return m.MountID == recorded.MountID, nil
	case errors.Is(err, unix.ENOTCONN):
		return true, nil
	case errors.Is(err, ErrNotFuse), errors.Is(err, unix.ENOENT):
		return false, nil
	}
	return false, err
}
