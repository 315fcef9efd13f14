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
