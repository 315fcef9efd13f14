package hostid

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/sys"
)

// ErrMismatch means a descriptor does not refer to the recorded object.
var ErrMismatch = errors.New("object is not the one recorded")

// CheckMount returns nil when fd, opened from path, refers to the object
// want records: the same mount ID, device and inode, read with MountOf. A
// mismatch is an *os.PathError naming path and wrapping ErrMismatch.
func CheckMount(fd int, path string, want MountIdentity) error {
	got, err := MountOf(fd)
	if err != nil {
		return &os.PathError{Op: "identify", Path: path, Err: err}
	}
	if got != want {
		return &os.PathError{Op: "identify", Path: path, Err: fmt.Errorf(
			"mount %d device %d inode %d, want mount %d device %d inode %d: %w",
			got.MountID, got.Device, got.Inode, want.MountID, want.Device, want.Inode, ErrMismatch)}
	}
	return nil
}

// CheckInode is CheckMount for records that hold only a device and an
// inode number.
func CheckInode(fd int, path string, dev, ino uint64) error {
	var st unix.Stat_t
	if err := sys.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "identify", Path: path, Err: err}
	}
	if st.Dev != dev || st.Ino != ino {
		return &os.PathError{Op: "identify", Path: path, Err: fmt.Errorf(
			"device %d inode %d, want device %d inode %d: %w", st.Dev, st.Ino, dev, ino, ErrMismatch)}
	}
	return nil
}
