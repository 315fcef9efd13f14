package spawn

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/sys"
)

// Errors of Start and Process; test with errors.Is.
var (
	// ErrNoPidfd means the kernel returned no pidfd from clone(2)
	// (CLONE_PIDFD needs Linux 5.2 or later).
	ErrNoPidfd = errors.New("kernel returned no pidfd (CLONE_PIDFD needs Linux 5.2 or later)")
	// ErrPidfdRequested means the command already asks for a pidfd of its
	// own in SysProcAttr.PidFD: the Process must be its only owner.
	ErrPidfdRequested = errors.New("command already requests a pidfd")
	// ErrClosed means the Process's pidfd has been closed.
	ErrClosed = errors.New("process pidfd is closed")
)

// Process is one started child, named by its pidfd. Its methods are safe
// for concurrent use.
type Process struct {
	pid      int
	identity hostid.PidfsProcessIdentityV1
	// wait reaps the child and returns its state and what exec.Cmd.Wait
	// would return.
	wait func() (*os.ProcessState, error)

	mu sync.RWMutex // guards fd against Close during a signal
	fd int          // the pidfd; -1 once closed

	reap    sync.Once
	done    chan struct{}
	state   *os.ProcessState
	waitErr error
}

// Start starts cmd with CLONE_PIDFD, so the returned Process names the
// child from its creation on, and reads the child's pidfs identity. cmd
// must not have been started and must not set SysProcAttr.PidFD; its
// other SysProcAttr fields are kept (copied, never modified in place).
// On any error nothing is left behind: a forked child is killed through
// the pidfd and reaped, and the pidfd is closed.
func Start(cmd *exec.Cmd) (*Process, error) {
	return start(cmd, (*exec.Cmd).Start)
}

func start(cmd *exec.Cmd, fork func(*exec.Cmd) error) (*Process, error) {
	var attr syscall.SysProcAttr
	if cmd.SysProcAttr != nil {
		if cmd.SysProcAttr.PidFD != nil {
			return nil, fmt.Errorf("starting %q: %w", cmd.Path, ErrPidfdRequested)
		}
		attr = *cmd.SysProcAttr
	}
	fd := -1
	attr.PidFD = &fd
	cmd.SysProcAttr = &attr
	if err := fork(cmd); err != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("starting %q: %w", cmd.Path, err)
	}
	p := &Process{pid: cmd.Process.Pid, fd: fd, done: make(chan struct{})}
	p.wait = func() (*os.ProcessState, error) {
		err := cmd.Wait()
		return cmd.ProcessState, err
	}
	if fd < 0 {
		// No exact handle: the child is ours and unreaped, so its PID
		// still names it for this one kill.
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("starting %q: %w", cmd.Path, ErrNoPidfd)
	}
	// The child cannot have been reaped yet (nothing waits before Wait
	// or Done), so the identity read is of this child even if it has
	// already exited.
	id, err := hostid.IdentityOf(fd)
	if err != nil {
		p.Kill()
		p.Wait()
		p.Close()
		return nil, fmt.Errorf("identifying %q (pid %d): %w", cmd.Path, cmd.Process.Pid, err)
	}
	p.identity = id
	return p, nil
}

// Identity is the child's pidfs identity, read right after the fork. It
// outlives execve: the PID, pidfs inode and start time stay.
func (p *Process) Identity() hostid.PidfsProcessIdentityV1 { return p.identity }

// Pid is the child's PID. It names the child only until it is reaped.
func (p *Process) Pid() int { return p.pid }

// Fd lends the pidfd, for poll(2) (readable once the child has exited)
// or for code that takes a pidfd. It stays owned by p and is valid until
// Close; it is -1 after Close.
func (p *Process) Fd() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.fd
}

// Signal sends sig through the pidfd. Once the child has been reaped it
// fails with an error matching hostid.ErrProcessExited (an exited child
// not yet reaped still accepts, and drops, a signal). Signal 0 sends
// nothing: it only checks that the child is unreaped.
func (p *Process) Signal(sig unix.Signal) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.fd < 0 {
		return ErrClosed
	}
	err := sys.PidfdSendSignal(p.fd, sig, nil, 0)
	if errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("signalling pid %d: %w", p.pid, hostid.ErrProcessExited)
	}
	return err
}

// Kill sends SIGKILL through the pidfd. Killing a child that has already
// been reaped does nothing and is no error.
func (p *Process) Kill() error {
	if err := p.Signal(unix.SIGKILL); err != nil && !errors.Is(err, hostid.ErrProcessExited) {
		return err
	}
	return nil
}

// Exited reports whether the child has exited (its pidfd is readable),
// whether or not it has been reaped. A closed Process reports true.
func (p *Process) Exited() bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.fd < 0 {
		return true
	}
	pfd := []unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}}
	n, err := sys.Poll(pfd, 0)
	return err == nil && n > 0
}

// Wait reaps the child, once: it blocks until the child has exited and
// returns what exec.Cmd.Wait returned (nil, or an *exec.ExitError for a
// nonzero status or a signal). Every call returns the same result.
func (p *Process) Wait() error {
	<-p.Done()
	return p.waitErr
}

// Done returns a channel closed once the child has exited and been
// reaped. The first call of Done or Wait starts the reaping.
func (p *Process) Done() <-chan struct{} {
	p.reap.Do(func() {
		go func() {
			p.state, p.waitErr = p.wait()
			close(p.done)
		}()
	})
	return p.done
}

// State is the child's exit state once Done is closed, nil before.
func (p *Process) State() *os.ProcessState {
	select {
	case <-p.done:
		return p.state
	default:
		return nil
	}
}

// Close closes the pidfd. It neither kills nor reaps the child; call it
// once the child is no longer signalled or polled, normally after Done.
// Later calls do nothing.
func (p *Process) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fd < 0 {
		return nil
	}
	err := unix.Close(p.fd)
	p.fd = -1
	if err != nil {
		return os.NewSyscallError("close", err)
	}
	return nil
}
