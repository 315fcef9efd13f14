package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/helpermain"
	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/spawn"
	"lazaret.dev/pkg/supervise"
)

// DefaultGrace is the grace period of a stop the supervisor starts itself
// (SIGTERM or SIGINT to the supervisor).
const DefaultGrace = 10 * time.Second

// Exit codes of a supervisor whose child never ran.
const (
	// ExitAborted: the launch was abandoned (channel closed, rejected
	// acknowledgment, protocol violation, stop before commit).
	ExitAborted = 1
)

// Errors of Run; test with errors.Is.
var (
	ErrNoChannel       = supervise.ErrNoChannel
	ErrChannelPeer     = errors.New("generation channel peer is not the parent process")
	ErrChannelClosed   = errors.New("generation channel closed")
	ErrProtocol        = errors.New("protocol violation")
	ErrStopped         = errors.New("stopped before the child ran")
	ErrChildEndedEarly = errors.New("child ended before its ownership was committed")
)

// Config is what the command line gives Run.
type Config struct {
	// Slot is the child's slot; the Hello must name the same.
	Slot hostid.Slot
	// Argv is the child's program and arguments; Argv[0] is absolute.
	Argv []string
	// Channel is the inherited generation channel
	// (supervise.RunArgs.Channel); Run owns it.
	Channel *os.File
	// Logger receives the supervisor's log.
	Logger *slog.Logger
	// Grace is the grace period for a stop the supervisor starts itself;
	// zero means DefaultGrace.
	Grace time.Duration
}

type inbound struct {
	cmd supervise.Command
	err error
}

type supervisor struct {
	cfg       Config
	log       *slog.Logger
	conn      *supervise.Conn
	channelUp bool
	cmds      chan inbound
	sigs      chan os.Signal
	stopCtx   <-chan struct{}
	hello     supervise.Hello
}

// Run is `lazaret-supervisor run`: it serves the generation channel and
// supervises one child until the child has exited. The supervisor's
// environment, working directory and descriptors 0-2 are the child's.
// ctx ends like SIGTERM: a stop with the default grace.
func Run(ctx context.Context, cfg Config) error {
	if !cfg.Slot.Valid() {
		return fmt.Errorf("--slot %v is not a valid slot", cfg.Slot)
	}
	if len(cfg.Argv) == 0 || !filepath.IsAbs(cfg.Argv[0]) {
		return fmt.Errorf("program %q: give the child as `-- /absolute/path args...` (no PATH lookup)", cfg.Argv)
	}
	if cfg.Grace == 0 {
		cfg.Grace = DefaultGrace
	}
	s := &supervisor{cfg: cfg, log: cfg.Logger, stopCtx: ctx.Done()}
	if err := s.openChannel(cfg.Channel); err != nil {
		return err
	}
	defer s.conn.Close()
	// Signals are handled, never ignored: an ignored disposition would be
	// inherited across execve by the child.
	s.sigs = make(chan os.Signal, 4)
	signal.Notify(s.sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
	s.cmds = make(chan inbound)
	go s.readCommands()
	return s.serve()
}

// openChannel marks every inherited descriptor above stdio close-on-exec
// (the child gets exactly its stdio and its gate), checks that the
// channel, inherited at supervise.RunLayout.FD(supervise.ChannelFile), is
// a SOCK_SEQPACKET socket created by the parent, and wraps it.
func (s *supervisor) openChannel(channel *os.File) error {
	fd := supervise.RunLayout.FD(supervise.ChannelFile)
	if channel == nil {
		return ErrNoChannel
	}
	if err := unix.CloseRange(uint(fd), math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("marking inherited descriptors close-on-exec: %w", os.NewSyscallError("close_range", err))
	}
	// A socketpair's peer credentials are those of the process that
	// created it: the coordinator, which must be the parent.
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoChannel, os.NewSyscallError("getsockopt SO_PEERCRED", err))
	}
	if ppid := os.Getppid(); int(cred.Pid) != ppid {
		return fmt.Errorf("fd %d peer pid %d, parent pid %d: %w", fd, cred.Pid, ppid, ErrChannelPeer)
	}
	conn, err := supervise.NewConn(channel)
	if err != nil {
		return fmt.Errorf("fd %d: %w", fd, err)
	}
	s.conn = conn
	s.channelUp = true
	return nil
}

func (s *supervisor) readCommands() {
	for {
		c, err := s.conn.RecvCommand()
		s.cmds <- inbound{cmd: c, err: err}
		var me *supervise.MalformedError
		if err != nil && !errors.As(err, &me) {
			return
		}
	}
}

// report sends r while the channel is up. A failed send means the
// coordinator is gone; supervision continues without it.
func (s *supervisor) report(r supervise.Report) {
	if !s.channelUp {
		return
	}
	if err := s.conn.SendReport(r); err != nil {
		s.log.Warn("coordinator unreachable; supervising without it", "err", err)
		s.channelUp = false
	}
}

func (s *supervisor) reportError(kind supervise.ErrorKind, err error) {
	s.log.Error("supervisor error", "kind", kind.String(), "err", err)
	s.report(&supervise.Error{Kind: kind, Message: err.Error()})
}

// event is the next thing that happened before the child exists.
type event struct {
	in  *inbound
	sig os.Signal
}

func (s *supervisor) next() event {
	for {
		select {
		case in := <-s.cmds:
			return event{in: &in}
		case sig := <-s.sigs:
			if sig == unix.SIGHUP {
				s.log.Info("ignoring SIGHUP")
				continue
			}
			return event{sig: sig}
		case <-s.stopCtx:
			s.stopCtx = nil
			return event{sig: unix.SIGTERM}
		}
	}
}

// expect returns the next command, or the error that ends a supervisor
// whose child does not yet exist.
func (s *supervisor) expect(what string) (supervise.Command, error) {
	ev := s.next()
	if ev.sig != nil {
		return nil, fmt.Errorf("%w: %v while awaiting %s", ErrStopped, ev.sig, what)
	}
	if err := ev.in.err; err != nil {
		var me *supervise.MalformedError
		if errors.As(err, &me) {
			s.reportError(supervise.ErrorProtocol, fmt.Errorf("awaiting %s: %w", what, err))
			return nil, fmt.Errorf("awaiting %s: %w: %w", what, ErrProtocol, err)
		}
		if errors.Is(err, io.EOF) {
			s.channelUp = false
			return nil, fmt.Errorf("awaiting %s: %w", what, ErrChannelClosed)
		}
		return nil, fmt.Errorf("awaiting %s: %w", what, err)
	}
	return ev.in.cmd, nil
}

func (s *supervisor) unexpected(what string, c supervise.Command) error {
	err := fmt.Errorf("awaiting %s, received %T: %w", what, c, ErrProtocol)
	s.reportError(supervise.ErrorProtocol, err)
	return err
}

func (s *supervisor) serve() error {
	// Hello.
	c, err := s.expect("hello")
	if err != nil {
		return err
	}
	hello, ok := c.(*supervise.Hello)
	if !ok {
		return s.unexpected("hello", c)
	}
	if err := hello.Validate(); err != nil {
		s.reportError(supervise.ErrorHello, err)
		return fmt.Errorf("checking hello: %w", err)
	}
	if hello.ChildSlot != s.cfg.Slot {
		err := fmt.Errorf("hello child_slot %v, --slot %v: %w", hello.ChildSlot, s.cfg.Slot, supervise.ErrInvalidHello)
		s.reportError(supervise.ErrorHello, err)
		return err
	}
	s.hello = *hello

	// Arm the causal edge (ArmRuntimeCausalEdge): descendants reparent
	// here, and the child is forked from a thread that lives as long as
	// the supervisor, with PDEATHSIG SIGKILL.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		err = fmt.Errorf("becoming a child subreaper: %w", os.NewSyscallError("prctl", err))
		s.reportError(supervise.ErrorLaunch, err)
		return err
	}
	reaper := newReaper(s.log)
	th := spawn.NewThread()
	self, err := ownIdentity()
	if err != nil {
		s.reportError(supervise.ErrorIdentity, err)
		return err
	}
	s.log.Info("causal edge armed", "supervisor", self.String(), "slot", s.hello.SupervisorSlot.String())
	s.report(&supervise.Armed{Supervisor: self})

	// Start: the supervisor's own ownership is committed.
	c, err = s.expect("start")
	if err != nil {
		return err
	}
	start, ok := c.(*supervise.Start)
	if !ok {
		return s.unexpected("start", c)
	}
	own, err := hostid.NewBarrier(s.hello.StagedFor(s.hello.SupervisorSlot, self))
	if err != nil {
		s.reportError(supervise.ErrorIdentity, err)
		return err
	}
	if err := own.Accept(start.Supervisor); err != nil {
		err = fmt.Errorf("supervisor acknowledgment: %w", err)
		s.reportError(supervise.ErrorAck, err)
		return err
	}

	// Launch the gated child and stage it.
	ch, err := launchChild(th, reaper, s.cfg.Argv)
	if err != nil {
		s.reportError(supervise.ErrorLaunch, err)
		return err
	}
	s.log.Info("child launched at its gate", "pid", ch.proc.Pid(), "program", s.cfg.Argv[0])
	return s.superviseChild(ch, reaper)
}

func ownIdentity() (hostid.PidfsProcessIdentityV1, error) {
	fd, err := hostid.OpenPidfd(os.Getpid())
	if err != nil {
		return hostid.PidfsProcessIdentityV1{}, fmt.Errorf("reading the supervisor identity: %w", err)
	}
	defer unix.Close(fd)
	id, err := hostid.IdentityOf(fd)
	if err != nil {
		return id, fmt.Errorf("reading the supervisor identity: %w", err)
	}
	return id, nil
}

// childState is where the attached child is in its life.
type childState uint8

const (
	childStaged    childState = iota // at the gate, awaiting the commit
	childCommitted                   // gate opened, awaiting execve
	childRunning                     // the program runs
)

// superviseChild runs the child's whole life and returns the supervisor's
// exit: nil or an *helpermain.ExitError mirroring the child's status once it
// ran, an error when it was killed before the commit.
func (s *supervisor) superviseChild(ch *child, r *reaper) error {
	defer ch.proc.Close()
	state := childStaged
	var barrier *hostid.Barrier
	// aborted is the reason the child is being killed before it ran.
	var aborted error
	abort := func(kind supervise.ErrorKind, err error) {
		if aborted != nil {
			return
		}
		aborted = err
		if kind != noReport {
			s.reportError(kind, err)
		}
		s.log.Warn("killing the child before it ran", "err", err)
		ch.abandon()
		if err := ch.signal(unix.SIGKILL); err != nil {
			s.log.Error("killing the child", "err", err)
		}
	}

	// The identity was read through the pidfd right after the fork.
	id := ch.proc.Identity()
	staged := s.hello.StagedFor(s.cfg.Slot, id)
	barrier, err := hostid.NewBarrier(staged)
	if err == nil {
		s.log.Info("child staged", "child", id.String(), "slot", s.cfg.Slot.String())
		s.report(&supervise.Staged{Staged: staged})
	}
	if err != nil {
		abort(supervise.ErrorIdentity, fmt.Errorf("reading the child identity: %w", err))
	}

	var (
		killTimer   *time.Timer
		killC       <-chan time.Time
		killAt      time.Time
		pending     []unix.Signal // signals received before the program runs
		execResult  = ch.execResult
		execPending = true
	)
	stop := func(grace time.Duration) {
		if state == childStaged {
			abort(noReport, fmt.Errorf("%w: stop requested", ErrStopped))
			return
		}
		if err := ch.signal(unix.SIGTERM); err != nil {
			s.reportError(supervise.ErrorSignal, err)
		}
		at := time.Now().Add(grace)
		if !killAt.IsZero() && !at.Before(killAt) {
			return
		}
		killAt = at
		if killTimer != nil {
			killTimer.Stop()
		}
		killTimer = time.NewTimer(grace)
		killC = killTimer.C
		s.log.Info("stopping the child", "grace", grace.String())
	}
	deliver := func(sig unix.Signal) {
		if err := ch.signal(sig); err != nil {
			s.reportError(supervise.ErrorSignal, fmt.Errorf("sending %v: %w", unix.SignalName(sig), err))
		}
	}
	handle := func(in inbound) {
		if in.err != nil {
			var me *supervise.MalformedError
			switch {
			case errors.As(in.err, &me):
				if state == childStaged {
					abort(supervise.ErrorProtocol, fmt.Errorf("%w: %w", ErrProtocol, in.err))
				} else {
					s.reportError(supervise.ErrorProtocol, in.err)
				}
			default:
				// The coordinator is gone (HardLoseHostCoordinator).
				// Before the commit the child must not run; after it,
				// the child and this supervisor stay for exact recovery.
				s.channelUp = false
				s.cmds = nil
				if state == childStaged {
					abort(noReport, fmt.Errorf("awaiting the child commit: %w", ErrChannelClosed))
				} else {
					s.log.Warn("coordinator channel closed; keeping the child running under supervision", "err", in.err)
				}
			}
			return
		}
		switch c := in.cmd.(type) {
		case *supervise.CommitAck:
			if err := barrier.Accept(c.Ack); err != nil {
				err = fmt.Errorf("child acknowledgment: %w", err)
				if state == childStaged {
					abort(supervise.ErrorAck, err)
				} else {
					s.reportError(supervise.ErrorAck, err)
				}
				return
			}
			if err := ch.open(); err != nil {
				s.reportError(supervise.ErrorLaunch, err)
			}
			state = childCommitted
			s.log.Info("child committed; gate opened")
		case *supervise.Stop:
			stop(c.Grace)
		case *supervise.Signal:
			sig, _ := c.Kind.Number()
			switch state {
			case childStaged:
				abort(supervise.ErrorProtocol, fmt.Errorf("signal %v before the commit: %w", c.Kind, ErrProtocol))
			case childCommitted:
				pending = append(pending, sig)
			default:
				deliver(sig)
			}
		default:
			err := fmt.Errorf("%T after the child was launched: %w", c, ErrProtocol)
			if state == childStaged {
				abort(supervise.ErrorProtocol, err)
			} else {
				s.reportError(supervise.ErrorProtocol, err)
			}
		}
	}

	for {
		select {
		case in := <-s.cmds:
			if aborted == nil {
				handle(in)
			}
		case sig := <-s.sigs:
			if sig == unix.SIGHUP {
				s.log.Info("ignoring SIGHUP")
				continue
			}
			s.log.Info("stopping on signal", "signal", sig.String())
			stop(s.cfg.Grace)
		case <-s.stopCtx:
			s.stopCtx = nil
			stop(s.cfg.Grace)
		case err := <-execResult:
			execResult, execPending = nil, false
			if aborted != nil || state == childStaged {
				continue
			}
			if err != nil {
				s.reportError(supervise.ErrorExec, fmt.Errorf("executing %q: %w", s.cfg.Argv[0], err))
				continue
			}
			state = childRunning
			s.log.Info("child running", "program", s.cfg.Argv[0])
			s.report(&supervise.Running{})
			for _, sig := range pending {
				deliver(sig)
			}
			pending = nil
		case <-killC:
			killC = nil
			s.log.Warn("grace period over; killing the child")
			if err := ch.signal(unix.SIGKILL); err != nil {
				s.reportError(supervise.ErrorSignal, err)
			}
		case st := <-r.status:
			// Running (or the exec error) precedes Exited on the channel.
			if execPending && state == childCommitted && aborted == nil {
				select {
				case err := <-execResult:
					if err != nil {
						s.reportError(supervise.ErrorExec, fmt.Errorf("executing %q: %w", s.cfg.Argv[0], err))
					} else {
						s.report(&supervise.Running{})
					}
				case <-time.After(time.Second):
				}
			}
			if killTimer != nil {
				killTimer.Stop()
			}
			s.log.Info("child exited", "status", st.String())
			s.report(&supervise.Exited{Status: st})
			r.killDescendants(5 * time.Second)
			switch {
			case aborted != nil:
				return fmt.Errorf("child killed before it ran: %w", aborted)
			case state == childStaged:
				return fmt.Errorf("%w: %v", ErrChildEndedEarly, st)
			case st.ShellCode() != 0:
				return &helpermain.ExitError{Code: st.ShellCode()}
			}
			return nil
		}
	}
}

// noReport marks an abort whose reason is not sent as an Error report
// (the coordinator asked for it, or is gone).
const noReport supervise.ErrorKind = math.MaxUint8
