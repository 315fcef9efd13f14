package netpath

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// ErrHelperNotReady: the connectivity helper exited or did not report
// ready in time.
var ErrHelperNotReady = errors.New("connectivity helper did not become ready")

// SlirpTap is the upstream interface slirp4netns creates.
const SlirpTap = "tap0"

// SlirpAddresses are the addresses slirp4netns gives its virtual network
// (gateway, DNS forwarder, and the tap's own address). The gateway and DNS
// forwarder lead to the host; callers add them to the plan's host
// addresses so that no policy can reach them.
var SlirpAddresses = []string{"10.0.2.2", "10.0.2.3"}

// Slirp is a running slirp4netns attached to an enforcement namespace.
type Slirp struct {
	Cmd   *exec.Cmd
	exitW *os.File
	done  chan error
}

// SlirpArgs returns slirp4netns's arguments for the namespaces of the
// process pid. With joinUserNS, slirp4netns first joins that process's
// user namespace (the unprivileged case). Host loopback is disabled, the
// helper sandboxes itself (own mount namespace, capabilities dropped) and
// filters its own system calls, and it exits when fd 4 reaches end of
// file; it reports readiness on fd 3.
func SlirpArgs(pid int, joinUserNS bool) []string {
	args := []string{"--configure", "--mtu=65520", "--disable-host-loopback", "--enable-sandbox", "--enable-seccomp",
		"--ready-fd=3", "--exit-fd=4"}
	if joinUserNS {
		args = append(args, fmt.Sprintf("--userns-path=/proc/%d/ns/user", pid))
	}
	return append(args, "--netns-type=path", fmt.Sprintf("/proc/%d/ns/net", pid), SlirpTap)
}

// StartSlirp starts slirp4netns (binary) for the namespaces of pid and
// waits until it reports ready. It dies with its parent thread and when
// Stop closes its exit descriptor.
func StartSlirp(ctx context.Context, binary string, pid int, joinUserNS bool, stderr io.Writer) (*Slirp, error) {
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("starting slirp4netns: %w", err)
	}
	defer readyR.Close()
	exitR, exitW, err := os.Pipe()
	if err != nil {
		readyW.Close()
		return nil, fmt.Errorf("starting slirp4netns: %w", err)
	}
	cmd := exec.Command(binary, SlirpArgs(pid, joinUserNS)...)
	cmd.Env = []string{}
	cmd.Stderr = stderr
	cmd.ExtraFiles = []*os.File{readyW, exitR}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setsid: true}
	err = cmd.Start()
	readyW.Close()
	exitR.Close()
	if err != nil {
		exitW.Close()
		return nil, fmt.Errorf("starting slirp4netns %q: %w", binary, err)
	}
	s := &Slirp{Cmd: cmd, exitW: exitW, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	got := make(chan error, 1)
	go func() {
		b := make([]byte, 1)
		_, err := io.ReadFull(readyR, b)
		got <- err
	}()
	if d, ok := ctx.Deadline(); ok {
		readyR.SetReadDeadline(d)
	}
	select {
	case err := <-got:
		if err == nil {
			return s, nil
		}
		s.Stop()
		return nil, fmt.Errorf("slirp4netns for pid %d: %w: %v", pid, ErrHelperNotReady, err)
	case <-ctx.Done():
		s.Stop()
		return nil, fmt.Errorf("slirp4netns for pid %d: %w: %v", pid, ErrHelperNotReady, ctx.Err())
	}
}

// Done receives the exit status of slirp4netns once it has exited.
func (s *Slirp) Done() <-chan error { return s.done }

// Stop asks slirp4netns to exit by closing its exit descriptor, and kills
// it if it has not exited within a second.
func (s *Slirp) Stop() {
	s.exitW.Close()
	select {
	case err := <-s.done:
		s.done <- err
	case <-time.After(time.Second):
		s.Cmd.Process.Kill()
	}
}
