package netsidecar

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// Descriptor numbers in the sidecar.
const (
	ChannelFD = 3
	PolicyFD  = 4
)

// Command prepares lazaret-netsidecar at binary to run in new network and
// mount namespaces, plus a new user namespace mapping the caller to root
// when ownUserNS is set (the unprivileged case), with the control channel
// at fd 3 and the sealed policy at fd 4. The sidecar is killed when its
// parent thread dies. The caller starts the command and closes its copies
// of channel and policy afterwards.
func Command(binary string, ownUserNS bool, channel, policy *os.File) *exec.Cmd {
	cmd := exec.Command(binary)
	cmd.Env = []string{}
	cmd.ExtraFiles = []*os.File{channel, policy}
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
	return cmd
}

// NamespacePaths are the /proc paths through which a helper joins the
// sidecar's namespaces.
func NamespacePaths(pid int) (userns, netns string) {
	return fmt.Sprintf("/proc/%d/ns/user", pid), fmt.Sprintf("/proc/%d/ns/net", pid)
}
