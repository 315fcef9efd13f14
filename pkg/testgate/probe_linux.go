package testgate

import (
	"errors"
	"fmt"
	"os/exec"
	"syscall"
)

var errNotRoot = errors.New("effective UID is not 0")

// probeUserNamespace starts /bin/true in a new user namespace mapped to the
// caller's IDs; it fails where unprivileged user namespaces are disabled.
func probeUserNamespace() error {
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: syscall.Geteuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: syscall.Getegid(), Size: 1}},
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("creating a user namespace: %w", err)
	}
	return nil
}

// probeFUSE opens /dev/fuse and, unless root, looks fusermount3 up on PATH.
func probeFUSE() error {
	fd, err := syscall.Open("/dev/fuse", syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening /dev/fuse: %w", err)
	}
	syscall.Close(fd)
	if _, err := exec.LookPath("fusermount3"); err != nil && syscall.Geteuid() != 0 {
		return fmt.Errorf("fusermount3 not installed (apt-get install fuse3): %w", err)
	}
	return nil
}
