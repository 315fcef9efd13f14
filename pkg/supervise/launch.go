package supervise

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/handoff"
	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/spawn"
	"lazaret.dev/pkg/sys"
)

// Errors of Launch and Handle; test with errors.Is.
var (
	// ErrInvalidSpec means a LaunchSpec field breaks its rule.
	ErrInvalidSpec = errors.New("invalid launch spec")
	// ErrChannelClosed means the supervisor closed the channel (it exited)
	// before the expected report.
	ErrChannelClosed = errors.New("supervisor closed the channel")
	// ErrUnexpectedReport means the supervisor sent a report that its
	// state does not allow.
	ErrUnexpectedReport = errors.New("unexpected report from the supervisor")
	// ErrIdentityMismatch means a reported identity differs from the one
	// the coordinator read through its own pidfd.
	ErrIdentityMismatch = errors.New("reported identity differs from the pidfd identity")
	// ErrStagedMismatch means a Staged report is not bound to this
	// launch's Domain, generation, coordinator or child slot.
	ErrStagedMismatch = errors.New("staged ownership does not match the launch")
	// ErrChildExited means the child ended before it was running.
	ErrChildExited = errors.New("child exited before it was running")
	// ErrNoExitReport means the supervisor ended without reporting how its
	// child ended (it was killed, or the channel was closed by Close).
	ErrNoExitReport = errors.New("supervisor ended without reporting the child's exit")
)

// RemoteError is an Error report received from the supervisor.
type RemoteError struct {
	Kind    ErrorKind
	Message string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("supervisor reported %v error: %s", e.Kind, e.Message)
}

// StepError names the slot and the launch step that failed.
type StepError struct {
	Slot hostid.Slot
	Step string
	Err  error
}

func (e *StepError) Error() string {
	return fmt.Sprintf("launching supervised %v: %s: %v", e.Slot, e.Step, e.Err)
}

func (e *StepError) Unwrap() error { return e.Err }

// LaunchSpec describes one supervised child.
type LaunchSpec struct {
	// SupervisorPath is the absolute path of lazaret-supervisor.
	SupervisorPath string
	// SupervisorSlot is the slot the supervisor itself is owned through
	// (SandboxRuntimeSupervisor, NetworkRuntimeSupervisor, ...).
	SupervisorSlot hostid.Slot
	// Slot is the child's slot (SandboxAttachedRunsc, ...).
	Slot hostid.Slot
	// Argv is the child's argument vector; Argv[0] is an absolute path,
	// executed as is (no PATH lookup, no shell).
	Argv []string
	// Env is the child's complete environment (and the supervisor's).
	Env []string
	// Dir is the child's working directory; empty keeps the caller's.
	Dir string
	// Stdin, Stdout and Stderr become the child's descriptors 0-2 (and
	// the supervisor's). Nil means /dev/null.
	Stdin, Stdout, Stderr *os.File
	// Log, when set, receives the supervisor's own log; otherwise the
	// supervisor logs warnings and errors to Stderr.
	Log *os.File
	// Domain, Generation and Coordinator bind every staged ownership.
	Domain      ids.DomainID
	Generation  ids.GenerationID
	Coordinator ids.CoordinatorID
	// Logger receives the coordinator side's log; nil discards it.
	Logger *slog.Logger
}

// Validate checks every field against its rule.
func (s *LaunchSpec) Validate() error {
	switch {
	case !filepath.IsAbs(s.SupervisorPath):
		return fmt.Errorf("SupervisorPath %q is not absolute: %w", s.SupervisorPath, ErrInvalidSpec)
	case !s.SupervisorSlot.Valid():
		return fmt.Errorf("SupervisorSlot %v: %w", s.SupervisorSlot, ErrInvalidSpec)
	case !s.Slot.Valid():
		return fmt.Errorf("Slot %v: %w", s.Slot, ErrInvalidSpec)
	case s.Slot == s.SupervisorSlot:
		return fmt.Errorf("Slot and SupervisorSlot are both %v: %w", s.Slot, ErrInvalidSpec)
	case len(s.Argv) == 0:
		return fmt.Errorf("Argv is empty: %w", ErrInvalidSpec)
	case !filepath.IsAbs(s.Argv[0]):
		return fmt.Errorf("Argv[0] %q is not an absolute path: %w", s.Argv[0], ErrInvalidSpec)
	case s.Domain == (ids.DomainID{}):
		return fmt.Errorf("Domain is zero: %w", ErrInvalidSpec)
	case s.Generation == (ids.GenerationID{}):
		return fmt.Errorf("Generation is zero: %w", ErrInvalidSpec)
	case s.Coordinator == (ids.CoordinatorID{}):
		return fmt.Errorf("Coordinator is zero: %w", ErrInvalidSpec)
	}
	return nil
}

// Hooks record ownership durably. Launch calls them in this order, each
// only after the previous returned nil, and sends the matching
// acknowledgment only after the Commit hook returned nil. An error from a
// hook aborts the launch: the supervisor is killed, and with it any child.
type Hooks interface {
	// StageSupervisor records the supervisor's Staged ownership.
	StageSupervisor(ctx context.Context, staged hostid.StagedProcessOwnership) error
	// CommitSupervisor records the supervisor's Committed ownership.
	CommitSupervisor(ctx context.Context, staged hostid.StagedProcessOwnership) error
	// StageChild records the child's Staged ownership. The child exists
	// and is held at its gate.
	StageChild(ctx context.Context, staged hostid.StagedProcessOwnership) error
	// CommitChild records the child's Committed ownership.
	CommitChild(ctx context.Context, staged hostid.StagedProcessOwnership) error
}

// Handle is a launched supervisor with its running child.
type Handle struct {
	// Slot and SupervisorSlot are the launch's slots.
	Slot, SupervisorSlot hostid.Slot
	// Supervisor is the supervisor's pidfs identity (read by the
	// coordinator through its own pidfd and confirmed by the supervisor).
	Supervisor hostid.PidfsProcessIdentityV1
	// Child is the child's committed pidfs identity.
	Child hostid.PidfsProcessIdentityV1

	conn       *Conn
	rs         *spawn.Process // the supervisor
	childPidfd int
	log        *slog.Logger

	reaped <-chan struct{} // closed once the supervisor is reaped

	mu       sync.Mutex
	exited   *ExitStatus
	reports  chan struct{} // closed when the report reader ends
	fdsOnce  sync.Once
	lastErrs []*RemoteError
}

// Launch starts lazaret-supervisor for spec, drives both ownership
// barriers through hooks and returns once the child runs its program.
// ctx bounds the launch only; the Handle lives on. Every error is a
// *StepError naming the slot and the step.
func Launch(ctx context.Context, spec LaunchSpec, hooks Hooks) (*Handle, error) {
	if err := spec.Validate(); err != nil {
		return nil, &StepError{Slot: spec.Slot, Step: "validating the launch spec", Err: err}
	}
	if hooks == nil {
		return nil, &StepError{Slot: spec.Slot, Step: "validating the launch spec", Err: fmt.Errorf("hooks are nil: %w", ErrInvalidSpec)}
	}
	log := spec.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h, err := start(spec, log)
	if err != nil {
		return nil, &StepError{Slot: spec.Slot, Step: "starting the supervisor", Err: err}
	}
	if step, err := h.handshake(ctx, spec, hooks); err != nil {
		h.abort()
		return nil, &StepError{Slot: spec.Slot, Step: step, Err: err}
	}
	h.reports = make(chan struct{})
	go h.readReports()
	return h, nil
}

func start(spec LaunchSpec, log *slog.Logger) (*Handle, error) {
	conn, rsEnd, err := Pair()
	if err != nil {
		return nil, err
	}
	defer rsEnd.Close()
	args, files, err := handoff.Render(&RunArgs{Slot: spec.Slot, Program: spec.Argv, Channel: rsEnd, Log: spec.Log})
	if err != nil {
		conn.Close()
		return nil, err
	}
	cmd := &exec.Cmd{
		Path:       spec.SupervisorPath,
		Args:       append([]string{spec.SupervisorPath}, args...),
		Env:        append([]string{}, spec.Env...),
		Dir:        spec.Dir,
		ExtraFiles: files,
		// A new session: the supervisor and its child never have the
		// developer's terminal as controlling tty. No Pdeathsig: the
		// supervisor outlives a lost coordinator for exact recovery.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	// Assign only non-nil files: a typed nil *os.File in an io.Reader
	// would not be nil to os/exec.
	if spec.Stdin != nil {
		cmd.Stdin = spec.Stdin
	}
	if spec.Stdout != nil {
		cmd.Stdout = spec.Stdout
	}
	if spec.Stderr != nil {
		cmd.Stderr = spec.Stderr
	}
	rs, err := spawn.Start(cmd)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("executing %q: %w", spec.SupervisorPath, err)
	}
	log.Info("supervisor started", "path", spec.SupervisorPath, "pid", rs.Pid(), "slot", spec.Slot.String())
	h := &Handle{
		Slot:           spec.Slot,
		SupervisorSlot: spec.SupervisorSlot,
		conn:           conn,
		rs:             rs,
		childPidfd:     -1,
		log:            log,
		reaped:         rs.Done(),
	}
	return h, nil
}

// handshake runs the launch steps; it returns the failed step's name.
func (h *Handle) handshake(ctx context.Context, spec LaunchSpec, hooks Hooks) (string, error) {
	stop := context.AfterFunc(ctx, func() { h.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	recv := func() (Report, error) {
		r, err := h.conn.RecvReport()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errors.Is(err, io.EOF) {
				return nil, ErrChannelClosed
			}
			return nil, err
		}
		switch r := r.(type) {
		case *Error:
			return nil, &RemoteError{Kind: r.Kind, Message: r.Message}
		case *Exited:
			return nil, fmt.Errorf("%v: %w", r.Status, ErrChildExited)
		}
		return r, nil
	}
	hello := Hello{
		Version:        V1,
		DomainID:       spec.Domain,
		GenerationID:   spec.Generation,
		CoordinatorID:  spec.Coordinator,
		SupervisorSlot: spec.SupervisorSlot,
		ChildSlot:      spec.Slot,
	}
	if err := h.conn.SendCommand(&hello); err != nil {
		return "sending hello", err
	}

	r, err := recv()
	if err != nil {
		return "awaiting armed", err
	}
	armed, ok := r.(*Armed)
	if !ok {
		return "awaiting armed", fmt.Errorf("%T: %w", r, ErrUnexpectedReport)
	}
	// Read through the coordinator's own pidfd when the supervisor was
	// started.
	own := h.rs.Identity()
	if own != armed.Supervisor {
		return "checking the supervisor identity", fmt.Errorf("pidfd %v, reported %v: %w", own, armed.Supervisor, ErrIdentityMismatch)
	}
	h.Supervisor = own
	rsStaged := hello.StagedFor(spec.SupervisorSlot, own)
	if err := hooks.StageSupervisor(ctx, rsStaged); err != nil {
		return "staging the supervisor", err
	}
	if err := hooks.CommitSupervisor(ctx, rsStaged); err != nil {
		return "committing the supervisor", err
	}
	if err := h.conn.SendCommand(&Start{Supervisor: hostid.ProcessOwnershipCommitAck{Version: hostid.V1, Committed: rsStaged}}); err != nil {
		return "sending start", err
	}

	if r, err = recv(); err != nil {
		return "awaiting the staged child", err
	}
	staged, ok := r.(*Staged)
	if !ok {
		return "awaiting the staged child", fmt.Errorf("%T: %w", r, ErrUnexpectedReport)
	}
	want := hello.StagedFor(spec.Slot, staged.Staged.Identity)
	if staged.Staged != want {
		return "checking the staged child", fmt.Errorf("slot %v: %w", staged.Staged.Slot, ErrStagedMismatch)
	}
	if err := staged.Staged.Validate(); err != nil {
		return "checking the staged child", err
	}
	if err := h.openChild(staged.Staged.Identity); err != nil {
		return "checking the child identity", err
	}
	if err := hooks.StageChild(ctx, staged.Staged); err != nil {
		return "staging the child", err
	}
	if err := hooks.CommitChild(ctx, staged.Staged); err != nil {
		return "committing the child", err
	}
	if err := h.conn.SendCommand(&CommitAck{Ack: hostid.ProcessOwnershipCommitAck{Version: hostid.V1, Committed: staged.Staged}}); err != nil {
		return "sending the child commit", err
	}
	h.Child = staged.Staged.Identity

	if r, err = recv(); err != nil {
		return "awaiting the running child", err
	}
	if _, ok := r.(*Running); !ok {
		return "awaiting the running child", fmt.Errorf("%T: %w", r, ErrUnexpectedReport)
	}
	h.log.Info("supervised child running", "slot", spec.Slot.String(), "child", h.Child.String())
	return "", nil
}

// openChild opens the coordinator's own pidfd on the reported child and
// checks that its pidfs authority is the reported one.
func (h *Handle) openChild(id hostid.PidfsProcessIdentityV1) error {
	fd, err := hostid.OpenPidfd(int(id.HostPID))
	if err != nil {
		return err
	}
	ok, err := hostid.PidfsRecoveryMatch(id, fd)
	if err == nil && !ok {
		err = fmt.Errorf("pid %d: %w", id.HostPID, ErrIdentityMismatch)
	}
	if err != nil {
		unix.Close(fd)
		return err
	}
	h.childPidfd = fd
	return nil
}

// abort ends a failed launch: SIGKILL to the supervisor (the causal edge
// kills any child), reap it, and wait a bounded time for the child to die.
func (h *Handle) abort() {
	h.conn.Close()
	h.rs.Kill()
	<-h.reaped
	if h.childPidfd >= 0 {
		if !waitPidfd(h.childPidfd, 5*time.Second) {
			h.log.Error("child still alive after its supervisor was killed", "slot", h.Slot.String())
		}
	}
	h.closeFds()
}

func (h *Handle) readReports() {
	defer close(h.reports)
	for {
		r, err := h.conn.RecvReport()
		if err != nil {
			var me *MalformedError
			if errors.As(err, &me) {
				h.log.Error("rejected supervisor report", "slot", h.Slot.String(), "err", err)
				continue
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				h.log.Error("reading supervisor reports", "slot", h.Slot.String(), "err", err)
			}
			return
		}
		switch r := r.(type) {
		case *Exited:
			h.mu.Lock()
			st := r.Status
			h.exited = &st
			h.mu.Unlock()
			h.log.Info("supervised child exited", "slot", h.Slot.String(), "status", st.String())
		case *Error:
			h.mu.Lock()
			h.lastErrs = append(h.lastErrs, &RemoteError{Kind: r.Kind, Message: r.Message})
			h.mu.Unlock()
			h.log.Error("supervisor error", "slot", h.Slot.String(), "kind", r.Kind.String(), "message", r.Message)
		default:
			h.log.Error("unexpected supervisor report", "slot", h.Slot.String(), "report", fmt.Sprintf("%T", r))
		}
	}
}

// Done is closed when the supervisor has been reaped.
func (h *Handle) Done() <-chan struct{} { return h.reaped }

// Wait blocks until the supervisor has exited and been reaped, and returns
// the child's status from its Exited report. When no report arrived (the
// supervisor was killed, or Close gave up the channel first), it returns
// the supervisor's own status and an error matching ErrNoExitReport.
func (h *Handle) Wait() (ExitStatus, error) {
	<-h.reaped
	if h.reports != nil {
		<-h.reports
	}
	h.mu.Lock()
	exited := h.exited
	h.mu.Unlock()
	if exited != nil {
		return *exited, nil
	}
	st := ExitStatus{}
	if ps := h.rs.State(); ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
			st = ExitStatusOf(unix.WaitStatus(ws))
		}
	}
	return st, fmt.Errorf("supervisor of %v %v: %w", h.Slot, st, ErrNoExitReport)
}

// Errors returns the Error reports received since the child started.
func (h *Handle) Errors() []*RemoteError {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*RemoteError(nil), h.lastErrs...)
}

// Signal forwards one signal to the child.
func (h *Handle) Signal(k SignalKind) error {
	if _, err := k.Number(); err != nil {
		return fmt.Errorf("signalling supervised %v: %w", h.Slot, err)
	}
	if err := h.conn.SendCommand(&Signal{Kind: k}); err != nil {
		return fmt.Errorf("signalling supervised %v: %w", h.Slot, err)
	}
	return nil
}

// Stop asks the supervisor to end the child: SIGTERM now, SIGKILL after
// grace (at most MaxGrace, in whole milliseconds).
func (h *Handle) Stop(grace time.Duration) error {
	if grace < 0 || grace > MaxGrace {
		return fmt.Errorf("stopping supervised %v: grace %v outside 0..%v: %w", h.Slot, grace, MaxGrace, ErrInvalidSpec)
	}
	if err := h.conn.SendCommand(&Stop{Grace: grace}); err != nil {
		return fmt.Errorf("stopping supervised %v: %w", h.Slot, err)
	}
	return nil
}

// Kill sends SIGKILL to the supervisor through its pidfd; the causal edge
// kills the child.
func (h *Handle) Kill() error {
	if err := h.rs.Kill(); err != nil {
		return fmt.Errorf("killing the supervisor of %v: %w", h.Slot, err)
	}
	return nil
}

// SupervisorPidfd and ChildPidfd are the coordinator's pidfds on the two
// processes, owned by the Handle and valid until Release after Wait.
func (h *Handle) SupervisorPidfd() int { return h.rs.Fd() }

// ChildPidfd is the coordinator's own pidfd on the child.
func (h *Handle) ChildPidfd() int { return h.childPidfd }

// Close gives up the channel without stopping anything: the supervisor
// sees EOF, logs it and keeps supervising its running child, as after a
// lost coordinator. The supervisor is still reaped when it exits; Wait
// then reports ErrNoExitReport unless the Exited report was read first.
func (h *Handle) Close() error {
	return h.conn.Close()
}

// Release closes the pidfds once the supervisor has been reaped.
func (h *Handle) Release() {
	<-h.reaped
	h.closeFds()
}

func (h *Handle) closeFds() {
	h.fdsOnce.Do(func() {
		if h.childPidfd >= 0 {
			unix.Close(h.childPidfd)
		}
		h.rs.Close()
	})
}

// waitPidfd waits until the process behind fd has exited, for at most d.
func waitPidfd(fd int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := sys.Poll(pfd, int(left/time.Millisecond)+1)
		if err != nil {
			return false
		}
		if n > 0 {
			return true
		}
	}
}
