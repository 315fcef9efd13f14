package supervisor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/spawn"
	"lazaret.dev/pkg/supervise"
	"lazaret.dev/pkg/sys"
)

// selfExe re-executes this very binary (even if its path was replaced on
// disk since the supervisor started).
const selfExe = "/proc/self/exe"

// reaper is the only waiter of the supervisor: it reaps the attached child
// and, the supervisor being a child subreaper, every orphaned descendant
// reparented to it. Because nothing else reaps, a child PID it has not yet
// reaped cannot be reused, so signalling such a PID under mu is exact.
type reaper struct {
	mu     sync.Mutex
	main   int // PID of the attached child; 0 before launch, -1 once reaped
	status chan supervise.ExitStatus
	kick   chan struct{}
	log    *slog.Logger
}

func newReaper(log *slog.Logger) *reaper {
	r := &reaper{
		status: make(chan supervise.ExitStatus, 1),
		kick:   make(chan struct{}, 1),
		log:    log,
	}
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, unix.SIGCHLD)
	go func() {
		for range chld {
			r.poke()
		}
	}()
	go func() {
		for range r.kick {
			r.reap()
		}
	}()
	return r
}

func (r *reaper) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *reaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		var ws unix.WaitStatus
		pid, err := sys.Wait4(-1, &ws, unix.WNOHANG, nil)
		if err != nil || pid <= 0 {
			return
		}
		if pid == r.main {
			r.main = -1
			r.status <- supervise.ExitStatusOf(ws)
			continue
		}
		r.log.Info("reaped orphaned descendant", "pid", pid, "status", supervise.ExitStatusOf(ws).String())
	}
}

// startMain starts cmd as the attached child from th, holding mu so that a
// fast exit is attributed to it (and so that nothing reaps it before spawn
// has read its identity).
func (r *reaper) startMain(th *spawn.Thread, cmd *exec.Cmd) (*spawn.Process, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, err := th.Start(cmd)
	if err != nil {
		return nil, err
	}
	r.main = p.Pid()
	return p, nil
}

// killDescendants sends SIGKILL to every remaining child of the supervisor
// (descendants of the attached child reparented here) and reaps them, for
// at most d.
func (r *reaper) killDescendants(d time.Duration) {
	deadline := time.Now().Add(d)
	for {
		r.mu.Lock()
		pids, err := childPIDs()
		for _, p := range pids {
			unix.Kill(p, unix.SIGKILL)
		}
		r.mu.Unlock()
		if err != nil {
			r.log.Warn("listing remaining descendants", "err", err)
			return
		}
		r.reap()
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			r.log.Error("descendants survive SIGKILL", "pids", pids)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// childPIDs lists the children of every thread of this process.
func childPIDs() ([]int, error) {
	paths, err := filepath.Glob("/proc/self/task/*/children")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread exited
		}
		if err != nil {
			return nil, fmt.Errorf("reading %q: %w", p, err)
		}
		for _, f := range strings.Fields(string(b)) {
			n, err := strconv.Atoi(f)
			if err != nil {
				return nil, fmt.Errorf("parsing %q: %w", p, err)
			}
			pids = append(pids, n)
		}
	}
	return pids, nil
}

// child is the attached child: a gate until opened, then the program.
type child struct {
	// proc names the child by its pidfd; the reaper, not proc, reaps it.
	proc *spawn.Process
	// gate is the write end of the gate pipe; nil once used or closed.
	gate *os.File
	// execResult yields once: nil when the program was executed (or the
	// gate died on the way), the errno when execve failed.
	execResult chan error
}

// launchChild starts the gate for argv in a new session with PDEATHSIG
// SIGKILL, from th (a thread that never exits), with the supervisor's
// stdio and environment, and a pidfd.
func launchChild(th *spawn.Thread, r *reaper, argv []string) (*child, error) {
	gateR, gateW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating the gate pipe: %w", err)
	}
	defer gateR.Close()
	statR, statW, err := os.Pipe()
	if err != nil {
		gateW.Close()
		return nil, fmt.Errorf("creating the exec-status pipe: %w", err)
	}
	defer statW.Close()
	hand := supervise.Gate{Program: argv, Gate: gateR, ExecStatus: statW}
	args, err := hand.Argv()
	if err != nil {
		gateW.Close()
		statR.Close()
		return nil, err
	}
	extra, err := hand.ExtraFiles()
	if err != nil {
		gateW.Close()
		statR.Close()
		return nil, err
	}
	cmd := &exec.Cmd{
		Path:       selfExe,
		Args:       append([]string{"lazaret-supervisor"}, args...),
		Env:        os.Environ(),
		Stdin:      os.Stdin,
		Stdout:     os.Stdout,
		Stderr:     os.Stderr,
		ExtraFiles: extra,
		SysProcAttr: &syscall.SysProcAttr{
			Setsid:    true,
			Pdeathsig: syscall.SIGKILL,
		},
	}
	proc, err := r.startMain(th, cmd)
	if err != nil {
		gateW.Close()
		statR.Close()
		return nil, fmt.Errorf("starting the gate for %q: %w", argv[0], err)
	}
	c := &child{proc: proc, gate: gateW, execResult: make(chan error, 1)}
	// The reaper owns waiting; os/exec must not.
	cmd.Process.Release()
	go func() {
		defer statR.Close()
		b, err := io.ReadAll(io.LimitReader(statR, 16))
		switch {
		case err != nil:
			c.execResult <- fmt.Errorf("reading the exec status: %w", err)
		case len(b) == 0:
			c.execResult <- nil
		case len(b) == 4 && binary.BigEndian.Uint32(b) == statusEdgeLost:
			c.execResult <- ErrCausalEdgeLost
		case len(b) == 4:
			c.execResult <- unix.Errno(binary.BigEndian.Uint32(b))
		default:
			c.execResult <- fmt.Errorf("exec status of %d bytes", len(b))
		}
	}()
	go watchPidfd(proc.Fd(), r)
	return c, nil
}

// watchPidfd pokes the reaper when the process behind pidfd exits; it is
// the second, signal-independent path by which a child death is noticed.
func watchPidfd(pidfd int, r *reaper) {
	pfd := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	for {
		n, err := sys.Poll(pfd, -1)
		if err != nil || n > 0 {
			r.poke()
			return
		}
	}
}

// open releases the gate.
func (c *child) open() error {
	g := c.gate
	c.gate = nil
	defer g.Close()
	if _, err := g.Write([]byte{gateOpen}); err != nil {
		return fmt.Errorf("opening the gate: %w", err)
	}
	return nil
}

// abandon closes the gate unopened; the gate then exits without executing.
func (c *child) abandon() {
	if c.gate != nil {
		c.gate.Close()
		c.gate = nil
	}
}

// signal sends sig through the pidfd. A process that is already gone is
// not an error: its exit is reported by the reaper.
func (c *child) signal(sig unix.Signal) error {
	if err := c.proc.Signal(sig); err != nil && !errors.Is(err, hostid.ErrProcessExited) {
		return err
	}
	return nil
}
