package coordinator

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/locate"
)

// Environment variables that choose the runsc binary and platform
// (docs/RUNSC.md).
const (
	EnvRunsc         = "LAZARET_RUNSC"
	EnvRunscPlatform = "LAZARET_RUNSC_PLATFORM"
)

// DefaultPlatform is the gVisor platform used unless EnvRunscPlatform
// overrides it or the host lacks what it needs.
const DefaultPlatform = "systrap"

// FallbackPlatform is used when the host cannot run DefaultPlatform.
const FallbackPlatform = "ptrace"

// seccompActions lists the seccomp actions the kernel offers.
const seccompActions = "/proc/sys/kernel/seccomp/actions_avail"

// systrapWorks reports whether the kernel offers what the systrap platform
// is built on: seccomp filters whose SECCOMP_RET_TRAP action delivers
// SIGSYS to the stub threads. actions_avail lists the actions the kernel
// supports; without "trap" systrap cannot start and ptrace, which needs
// only ptrace(2), is the platform that works.
func systrapWorks(actionsAvail string) bool {
	return slices.Contains(strings.Fields(actionsAvail), "trap")
}

// ErrRunsc means the runsc binary or platform setting is unusable.
var ErrRunsc = errors.New("unusable runsc setting")

// Runsc builds the command lines of one sandbox's runsc. Every command of
// a sandbox gets the same global flags, so run, exec, kill and delete all
// see the same state root.
type Runsc struct {
	// Path is the absolute path of the runsc binary.
	Path string
	// Root is the sandbox's runsc state directory (--root).
	Root string
	// Platform is systrap, ptrace or kvm.
	Platform string
	// Network is runsc's network mode: "sandbox" joins the network
	// namespace of the container spec; empty means none.
	Network string
}

// Global returns runsc and the global flags of docs/RUNSC.md: the network
// mode (none unless Network says otherwise), no cgroups (runsc runs
// inside the State Anchor's user namespace, without --rootless), host unix
// sockets and FIFOs off, a fresh gofer network namespace (nothing left
// mounted at <root>/null-netns), and no runsc-private root overlay so
// writes reach the State Anchor's upper directory.
func (r Runsc) Global() []string {
	network := r.Network
	if network == "" {
		network = "none"
	}
	return []string{
		r.Path,
		"--root=" + r.Root,
		"--platform=" + r.Platform,
		"--network=" + network,
		"--ignore-cgroups",
		"--host-uds=none",
		"--host-fifo=none",
		"--gofer-network-namespace=new",
		"--overlay2=none",
	}
}

// Run is `runsc run` of the container id from bundleDir.
func (r Runsc) Run(bundleDir, id string) []string {
	return append(r.Global(), "run", "--bundle="+bundleDir, id)
}

// Exec is `runsc exec` of the process spec at processPath (a
// /proc/self/fd path of an inherited sealed memfd) in container id,
// writing the sandbox PID of the new process to pidFile.
func (r Runsc) Exec(id, processPath, pidFile string) []string {
	return append(r.Global(), "exec", "--process="+processPath, "--internal-pid-file="+pidFile, id)
}

// Kill is `runsc kill` of the whole container (pid 0) or of one process
// in it (pid > 0, a sandbox PID).
func (r Runsc) Kill(id string, pid int, signal string) []string {
	argv := append(r.Global(), "kill")
	if pid > 0 {
		argv = append(argv, "--pid="+strconv.Itoa(pid))
	}
	return append(argv, id, signal)
}

// Delete is `runsc delete --force`, which also removes a running
// container's state.
func (r Runsc) Delete(id string) []string {
	return append(r.Global(), "delete", "--force", id)
}

// ChoosePlatform returns the platform named by value (the content of
// EnvRunscPlatform). Empty means the fastest that works on this host:
// systrap (much faster on system calls than ptrace, docs/RUNSC.md) when
// the kernel's seccomp actions (actionsAvail, the content of
// /proc/sys/kernel/seccomp/actions_avail) include trap, else ptrace.
func ChoosePlatform(value, actionsAvail string) (string, error) {
	switch value {
	case "":
		if systrapWorks(actionsAvail) {
			return DefaultPlatform, nil
		}
		return FallbackPlatform, nil
	case "systrap", "ptrace", "kvm":
		return value, nil
	}
	return "", fmt.Errorf("%w: $%s is %q; allowed values are systrap, ptrace and kvm", ErrRunsc, EnvRunscPlatform, value)
}

// LocateRunsc returns the runsc to use: $LAZARET_RUNSC when set (an
// absolute path to an executable regular file, used as is), else runsc in
// the helper directory. PATH is never searched.
func LocateRunsc(lookup func(string) (string, bool), finder *locate.Finder) (string, error) {
	if p, ok := lookup(EnvRunsc); ok {
		if !filepath.IsAbs(p) {
			return "", fmt.Errorf("%w: $%s is %q, which is not an absolute path", ErrRunsc, EnvRunsc, p)
		}
		st, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("%w: $%s names %q: %w", ErrRunsc, EnvRunsc, p, err)
		}
		if !st.Mode().IsRegular() || unix.Access(p, unix.X_OK) != nil {
			return "", fmt.Errorf("%w: $%s names %q, which is not an executable regular file", ErrRunsc, EnvRunsc, p)
		}
		return filepath.Clean(p), nil
	}
	p, err := finder.Find("runsc")
	if err != nil {
		return "", fmt.Errorf("locating runsc (build it with `make runsc`, or set $%s): %w", EnvRunsc, err)
	}
	return p, nil
}
