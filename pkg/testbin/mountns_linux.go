package testbin

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// envPrivateMounts marks the test binary re-run by InPrivateMounts.
const envPrivateMounts = "LAZARET_TEST_PRIVATE_MOUNTS"

// InPrivateMounts re-runs the test binary, when it runs as root, in a
// mount namespace of its own whose mounts propagate nowhere, and returns
// the re-run's exit code and true; it returns false when not root or
// already re-run, and the tests run in this process.
//
// A FUSE mount a test makes in the host's mount namespace is copied into
// every mount namespace another process creates while it exists (the
// sandboxes, anchors and sidecars of tests running beside it). Such a copy
// keeps the mount's FUSE connection alive after the test unmounts its own,
// so the FUSE server never learns that it was unmounted. In a namespace of
// the test binary's own, nobody else's new namespace holds its mounts.
func InPrivateMounts() (int, bool) {
	if os.Geteuid() != 0 || os.Getenv(envPrivateMounts) == "1" {
		return 0, false
	}
	cmd := exec.Command("/proc/self/exe", os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), envPrivateMounts+"=1")
	// Unshareflags with CLONE_NEWNS also makes every mount of the new
	// namespace private (MS_REC|MS_PRIVATE on /) before the exec.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, true
	case errors.As(err, &exit) && exit.ExitCode() >= 0:
		return exit.ExitCode(), true
	default:
		fmt.Fprintf(os.Stderr, "running the tests in a mount namespace of their own: %v\n", err)
		return 1, true
	}
}
