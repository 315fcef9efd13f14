package gitroute

import (
	"os"

	"lazaret.dev/pkg/handoff"
)

// Flag and descriptor names of the daemon's command line.
const (
	flagHostRoot        = "host-root"
	flagIsolatedRoot    = "isolated-root"
	flagMountpoint      = "mountpoint"
	flagMountMethod     = "mount-method"
	flagKeepIsolated    = "keep-isolated"
	flagIsolationReport = "isolation-report"

	fileControl = "control"
)

// DaemonLayout is the hand-off of lazaret-gitroute: its flags, and
// descriptor 3, the daemon's end of the control socket (Pair).
var DaemonLayout = handoff.Layout{
	Child: "lazaret-gitroute",
	Flags: []handoff.Flag{
		{Name: flagHostRoot, Required: true},
		{Name: flagIsolatedRoot, Required: true},
		{Name: flagMountpoint, Required: true},
		{Name: flagMountMethod},
		{Name: flagKeepIsolated},
		{Name: flagIsolationReport},
	},
	Files: []string{fileControl},
}

// DaemonArgs is what a parent hands lazaret-gitroute. An optional field
// left "" is not on the command line.
type DaemonArgs struct {
	// HostRoot is the workspace (git top level).
	HostRoot string
	// IsolatedRoot is the Domain's isolated root for git-ignored paths.
	IsolatedRoot string
	// Mountpoint is where the daemon mounts the view.
	Mountpoint string
	// MountMethod is auto (the daemon's default), fusermount or direct
	// (root only).
	MountMethod string
	// KeepIsolated names a file of paths routed to the isolated root
	// whatever the classification says.
	KeepIsolated string
	// IsolationReport names a file the daemon creates, before Ready,
	// listing the host entries that route to the isolated root.
	IsolationReport string

	// Control is the daemon's end of the control socket.
	Control *os.File
}

// Argv is the daemon's command line after its executable.
func (a *DaemonArgs) Argv() ([]string, error) {
	v := handoff.Values{flagHostRoot: a.HostRoot, flagIsolatedRoot: a.IsolatedRoot, flagMountpoint: a.Mountpoint}
	for name, val := range map[string]string{flagMountMethod: a.MountMethod, flagKeepIsolated: a.KeepIsolated, flagIsolationReport: a.IsolationReport} {
		if val != "" {
			v[name] = val
		}
	}
	return DaemonLayout.Argv(v, nil)
}

// ExtraFiles is exec.Cmd.ExtraFiles for the daemon: Control.
func (a *DaemonArgs) ExtraFiles() ([]*os.File, error) {
	return DaemonLayout.ExtraFiles(map[string]*os.File{fileControl: a.Control})
}

// ParseDaemonArgs parses the daemon's command line after its executable.
// Control stays nil: Inherit takes it.
func ParseDaemonArgs(args []string) (DaemonArgs, error) {
	v, _, err := DaemonLayout.Parse(args)
	if err != nil {
		return DaemonArgs{}, err
	}
	return DaemonArgs{
		HostRoot:        v[flagHostRoot],
		IsolatedRoot:    v[flagIsolatedRoot],
		Mountpoint:      v[flagMountpoint],
		MountMethod:     v[flagMountMethod],
		KeepIsolated:    v[flagKeepIsolated],
		IsolationReport: v[flagIsolationReport],
	}, nil
}

// Inherit takes Control from this process's descriptors, close-on-exec.
func (a *DaemonArgs) Inherit() error {
	files, err := DaemonLayout.Inherit()
	if err != nil {
		return err
	}
	a.Control = files[fileControl]
	return nil
}
