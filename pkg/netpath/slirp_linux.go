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

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/spawn"
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
	// proc names slirp4netns by the pidfd its clone returned; Stop and
	// the end of its reaping close it.
	proc  *spawn.Process
	exitW *os.File
}

// SlirpConfig says how to run slirp4netns for the network namespace of
// process PID.
type SlirpConfig struct {
	// Binary is slirp4netns.
	Binary string
	// PID is a process in the enforcement namespace.
	PID int
	// Enter, when set, is an argv prefix that runs slirp4netns as root of
	// PID's user namespace, such as nsenter --user=/proc/PID/ns/user --.
	// This is how an unprivileged helper sandboxes itself: it then holds
	// the capabilities it needs for its own mount namespace.
	Enter []string
	// JoinUserNS makes slirp4netns join PID's user namespace itself
	// (--userns-path).
	JoinUserNS bool
	// NoSandbox leaves out --enable-sandbox, for an unprivileged helper
	// that joins by --userns-path: it cannot sandbox itself there.
	NoSandbox bool
}

// Args returns the argv: Enter, then slirp4netns with host loopback
// disabled, the helper sandboxed (own mount namespace, capabilities
// dropped) unless NoSandbox, its system calls filtered, an exit when fd 4
// reaches end of file, and readiness reported on fd 3.
func (c SlirpConfig) Args() []string {
	argv := append(append([]string{}, c.Enter...), c.Binary, "--configure", "--mtu=65520", "--disable-host-loopback")
	if !c.NoSandbox {
		argv = append(argv, "--enable-sandbox")
	}
	argv = append(argv, "--enable-seccomp", "--ready-fd=3", "--exit-fd=4")
	if c.JoinUserNS {
		argv = append(argv, fmt.Sprintf("--userns-path=/proc/%d/ns/user", c.PID))
	}
	return append(argv, "--netns-type=path", fmt.Sprintf("/proc/%d/ns/net", c.PID), SlirpTap)
}

// StartSlirp starts slirp4netns as cfg says and waits until it reports
// ready. It dies with its parent thread and when Stop closes its exit
// descriptor.
func StartSlirp(ctx context.Context, cfg SlirpConfig, stderr io.Writer) (*Slirp, error) {
	pid := cfg.PID
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
	argv := cfg.Args()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{}
	cmd.Stderr = stderr
	cmd.ExtraFiles = []*os.File{readyW, exitR}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setsid: true}
	proc, err := spawn.Start(cmd)
	readyW.Close()
	exitR.Close()
	if err != nil {
		exitW.Close()
		return nil, fmt.Errorf("starting slirp4netns: %w", err)
	}
	s := &Slirp{proc: proc, exitW: exitW}
	s.proc.Done()
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

// Done is closed once slirp4netns has exited and been reaped; any number
// of watchers may wait on it.
func (s *Slirp) Done() <-chan struct{} { return s.proc.Done() }

// Err is the exit status of slirp4netns; it waits for Done.
func (s *Slirp) Err() error { return s.proc.Wait() }

// Identity is the pidfs identity of slirp4netns, read right after its
// clone.
func (s *Slirp) Identity() hostid.PidfsProcessIdentityV1 { return s.proc.Identity() }

// Stop asks slirp4netns to exit by closing its exit descriptor, and kills
// it if it has not exited within a second.
func (s *Slirp) Stop() {
	s.exitW.Close()
	select {
	case <-s.proc.Done():
	case <-time.After(time.Second):
		s.proc.Kill()
		<-s.proc.Done()
	}
	s.proc.Close()
}
