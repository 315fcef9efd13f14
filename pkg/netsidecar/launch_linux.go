package netsidecar

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"lazaret.dev/pkg/handoff"
)

// Command prepares lazaret-netsidecar at binary to run in new network and
// mount namespaces, plus a new user namespace mapping the caller to root
// when ownUserNS is set (the unprivileged case), handed d as Layout says.
// The sidecar is killed when its parent thread dies. The caller starts
// the command and closes its copies of d's files afterwards.
func Command(binary string, ownUserNS bool, d Descriptors) (*exec.Cmd, error) {
	argv, files, err := handoff.Render(&d)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, argv...)
	cmd.Env = []string{}
	cmd.ExtraFiles = files
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWNS,
		Pdeathsig:  syscall.SIGKILL,
		Setsid:     true,
	}
	if ownUserNS {
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	return cmd, nil
}

// NamespacePaths are the /proc paths through which a helper joins the
// sidecar's namespaces.
func NamespacePaths(pid int) (userns, netns string) {
	return fmt.Sprintf("/proc/%d/ns/user", pid), fmt.Sprintf("/proc/%d/ns/net", pid)
}
