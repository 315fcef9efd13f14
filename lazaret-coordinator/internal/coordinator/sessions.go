package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/bundle"
	"lazaret.dev/pkg/control"
	"lazaret.dev/pkg/domainstore"
	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/layout"
	"lazaret.dev/pkg/mailbox"
	"lazaret.dev/pkg/protocol"
	"lazaret.dev/pkg/store"
	"lazaret.dev/pkg/sys"
)

// processFD is the descriptor number of the sealed memfd holding the
// session's process spec in the exec client, after its stdio.
const processFD = 3

// Errors of session handling.
var (
	// ErrStopping means the generation is tearing down or has failed.
	ErrStopping = errors.New("the sandbox is stopping")
	// ErrTerminalUsed means the session already ran its terminal: a
	// session's terminal record is single-use, so each command runs in a
	// freshly registered session.
	ErrTerminalUsed = errors.New("the session has already run a command; register a new session")
)

// sessions is the Host Coordinator's control.Sessions: every command runs
// through a gated `runsc exec` client inside the State Anchor's
// namespaces, recorded as the session's SessionTerminal.
type sessions struct {
	// scope, sandbox and trust are the generation's; the sessions only
	// read them, and use the sandbox and the escalation engine only
	// after the publication.
	scope   *scope
	sandbox *sandboxStep
	trust   *trustStep
	l       *launcher
	mu      sync.Mutex
	// registered sessions and whether their terminal was used.
	registered map[ids.SessionID]bool
	active     int
	idleSince  time.Time
	everActive bool
	closing    bool
	changed    chan struct{} // receives after every change of active
	// abort is closed when every running command must end: the sandbox
	// runtime was lost (lostFlag set) or the generation is stopping.
	abort     chan struct{}
	abortOnce sync.Once
	lostFlag  bool
}

func newSessions(s *scope, sandbox *sandboxStep, trust *trustStep) *sessions {
	return &sessions{
		scope: s, sandbox: sandbox, trust: trust, l: newLauncher(),
		registered: map[ids.SessionID]bool{},
		idleSince:  time.Now(),
		changed:    make(chan struct{}, 1),
		abort:      make(chan struct{}),
	}
}

// published restarts the idle clock when the generation is published: the
// join window and the linger count from the moment a CLI can connect, not
// from the start of a start-up that may have spent seconds preparing the
// image.
func (s *sessions) published() {
	s.mu.Lock()
	s.idleSince = time.Now()
	s.mu.Unlock()
}

func (s *sessions) notify() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// register records a new session (control.Config.OnRegister).
func (s *sessions) register(_ context.Context, b protocol.SessionBinding) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return ErrStopping
	}
	s.registered[b.SessionID] = false
	s.idleSince = time.Now()
	s.mu.Unlock()
	s.scope.trace.register(b.SessionID.String(), b.CLIID.String(), anchorDigest(b.SessionAnchorPublicKey).String())
	s.escalation().bind(b)
	s.notify()
	return s.scope.store.Update(func(tx *domainstore.Tx) error {
		return tx.PutSession(domainstore.Session{
			GenerationID: s.scope.id, SessionID: b.SessionID, CLIID: b.CLIID,
			SessionAnchorID: anchorDigest(b.SessionAnchorPublicKey),
			SessionPhase:    domainstore.SessionAttached,
		})
	})
}

// begin claims the session's terminal and counts the command as active.
func (s *sessions) begin(id ids.SessionID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return ErrStopping
	}
	if used, ok := s.registered[id]; ok && used {
		return ErrTerminalUsed
	}
	s.registered[id] = true
	s.active++
	s.everActive = true
	return nil
}

// end counts the session's command as ended: the session is over, and
// its capability ends with it before its end is recorded.
func (s *sessions) end(id ids.SessionID) {
	s.escalation().endSession(id)
	s.scope.trace.disconnect(id.String())
	s.mu.Lock()
	s.active--
	s.idleSince = time.Now()
	s.mu.Unlock()
	s.notify()
}

// idle reports how long no command has run; ok is false while one runs.
func (s *sessions) idle() (since time.Time, ok bool, ever bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.idleSince, s.active == 0, s.everActive
}

// close refuses new commands; it returns the registered session IDs.
func (s *sessions) close() []ids.SessionID {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closing = true
	out := make([]ids.SessionID, 0, len(s.registered))
	for id := range s.registered {
		out = append(out, id)
	}
	return out
}

// stopAll ends every running command; lost says the sandbox runtime is
// gone (their outcome is RuntimeLost, else Terminated).
func (s *sessions) stopAll(lost bool) {
	s.mu.Lock()
	if lost {
		s.lostFlag = true
	}
	s.closing = true
	s.mu.Unlock()
	s.abortOnce.Do(func() { close(s.abort) })
	// Host commands end with the sessions that asked for them.
	s.escalation().stop()
}

// escalation is the generation's escalation engine, nil before the trust
// step and when the profile disables escalation.
func (s *sessions) escalation() *hostEscalation { return s.trust.escalation() }

func (s *sessions) isLost() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lostFlag
}

// wait blocks until no command runs.
func (s *sessions) waitIdle() {
	for {
		if _, ok, _ := s.idle(); ok {
			return
		}
		<-s.changed
	}
}

// processSpec returns the session's process spec in a sealed memfd: it
// holds the resolved env: values and never touches a file system.
func (s *sessions) processSpec(rs runSpec) (*os.File, error) {
	cfg := s.scope.cfg
	env := make([]string, 0, len(cfg.EnvironmentReferences())+1)
	for _, ref := range cfg.EnvironmentReferences() {
		// A brokered credential's sandbox value is its placeholder.
		if v, ok := s.scope.broker.sandboxValue(cfg, ref.SandboxName); ok {
			env = append(env, ref.SandboxName+"="+v)
		}
	}
	if s.scope.broker != nil {
		env = append(env, "NODE_EXTRA_CA_CERTS="+layout.Control+"/"+brokerCAName)
	}
	capEnv, err := mailbox.EncodeCapability(&rs.capability)
	if err != nil {
		return nil, err
	}
	env = append(env, mailbox.EnvCapability+"="+capEnv)
	spec, err := bundle.Session(bundle.SessionInput{
		Image: s.sandbox.image.config.bundle(), User: s.sandbox.sb.user, Argv: rs.argv, Env: env,
		Terminal: rs.terminal, Rows: rs.size.Rows, Columns: rs.size.Columns,
	})
	if err != nil {
		return nil, fmt.Errorf("planning the session process: %w", err)
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encoding the session process: %w", err)
	}
	return sealedMemfd("lazaret-session-process", data)
}

// sealedMemfd returns a memfd holding data, sealed against every change.
func sealedMemfd(name string, data []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("creating a memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, fmt.Errorf("writing the memfd: %w", err)
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE); err != nil {
		f.Close()
		return nil, fmt.Errorf("sealing the memfd: %w", err)
	}
	return f, nil
}

// run is one running exec client and its terminal record.
type run struct {
	s    *sessions
	id   ids.SessionID
	term domainstore.SessionTerminal
	gc   *gated
	// pidFile is the FIFO runsc exec writes the guest's PID to; pidR is
	// its read end, open from before the client starts until
	// recordGuest has read it.
	pidFile  string
	pidR     *os.File
	guestPID int
	killed   bool
	mu       sync.Mutex
	// guestDone is closed when watchGuest has finished writing the
	// terminal record; release waits for it, so the two never race.
	guestDone chan struct{}
}

// watchGuest runs recordGuest in the background.
func (r *run) watchGuest(running bool) {
	r.guestDone = make(chan struct{})
	go func() {
		defer close(r.guestDone)
		r.recordGuest(running)
	}()
}

func (r *run) putTerminal(t domainstore.SessionTerminal, proof *store.AbsenceProof) error {
	if err := r.s.scope.store.Update(func(tx *domainstore.Tx) error { return tx.PutTerminal(t, proof) }); err != nil {
		return fmt.Errorf("recording the session terminal as %v: %w", t.State, err)
	}
	r.term = t
	return nil
}

// putTerminals records ts in order in one transaction, each checked
// against the one before it.
func (r *run) putTerminals(ts ...domainstore.SessionTerminal) error {
	if err := r.s.scope.store.Update(func(tx *domainstore.Tx) error {
		for _, t := range ts {
			if err := tx.PutTerminal(t, nil); err != nil {
				return fmt.Errorf("recording the session terminal as %v: %w", t.State, err)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	r.term = ts[len(ts)-1]
	return nil
}

// runSpec is one command a session runs.
type runSpec struct {
	binding    protocol.SessionBinding
	capability protocol.SessionRequestCapability
	argv       []string
	terminal   bool
	size       protocol.TerminalResize
	// stdin, stdout and stderr become the exec client's; ptyMaster is
	// the master side of an interactive terminal, nil for Execute.
	stdin, stdout, stderr *os.File
	ptyMaster             *os.File
}

// startRun records the terminal, starts the gated exec client with
// stdio, stages and commits it, opens the gate and records the guest
// process.
func (s *sessions) startRun(rs runSpec) (*run, error) {
	g := s.scope
	b := rs.binding
	if !s.sandbox.running() {
		return nil, ErrStopping
	}
	mem, err := s.processSpec(rs)
	if err != nil {
		return nil, err
	}
	defer mem.Close()
	r := &run{s: s, id: b.SessionID, pidFile: filepath.Join(g.sessionDir(), b.SessionID.String()+".pid")}
	// Recorded before the exec client exists: the HC is its direct edge.
	if err := r.putTerminal(domainstore.SessionTerminal{
		GenerationID: g.id, SessionID: b.SessionID, State: domainstore.TerminalIntent,
		ContainerID: ptr(g.containerID()), HostCoordinator: committed(g.self),
	}, nil); err != nil {
		return nil, err
	}
	if r.pidR, err = guestPIDFifo(r.pidFile); err != nil {
		return r, err
	}
	ns, err := s.sandbox.anchor.openNamespaces()
	if err != nil {
		return r, fmt.Errorf("entering the state anchor's namespaces: %w", err)
	}
	gc, err := s.l.start(execClient{
		argv:       s.sandbox.execArgs("/proc/self/fd/"+strconv.Itoa(processFD), r.pidFile),
		files:      []*os.File{rs.stdin, rs.stdout, rs.stderr, mem},
		namespaces: ns,
		setctty:    rs.terminal,
	})
	for _, f := range ns {
		f.Close()
	}
	if err != nil {
		return r, err
	}
	r.gc = gc
	t := r.term
	t.ExecClient = hostid.StagedOwnership(gc.identity)
	if m := rs.ptyMaster; m != nil {
		var st unix.Stat_t
		if err := unix.Fstat(int(m.Fd()), &st); err != nil {
			gc.abandon()
			return r, fmt.Errorf("identifying the pty master: %w", err)
		}
		t.PtyMaster = &domainstore.PtyIdentity{MasterFD: uint32(m.Fd()), Device: st.Rdev, Inode: st.Ino}
	}
	staged := t
	t.ExecClient = committed(gc.identity)
	// Staged and then Committed, each checked by the store's guard, in
	// one durable transaction: the client waits at its gate until it is
	// committed, so the only state this drops is "staged on disk but not
	// committed", in which the client had not run and a crash of the HC
	// had killed it (its parent-death signal). Crash states before the
	// transaction (the client exists, only Intent is recorded) are the
	// same as with two transactions, and the program still runs only
	// after Committed is durable.
	if err := r.putTerminals(staged, t); err != nil {
		gc.abandon()
		return r, err
	}
	if err := gc.open(); err != nil {
		gc.proc.Wait()
		return r, err
	}
	g.log.Info("session started", "session", b.SessionID.String(), "terminal", rs.terminal, "exec_client_pid", gc.identity.HostPID)
	return r, nil
}

// guestPIDFifo creates the FIFO at path that runsc exec writes the
// guest's PID to (--internal-pid-file, which runsc opens for writing and
// writes once, after the guest process started) and opens its read end,
// without blocking and before the client exists, so runsc's open never
// waits for a reader.
func guestPIDFifo(path string) (*os.File, error) {
	if err := unix.Mkfifo(path, 0o600); err != nil {
		return nil, &os.PathError{Op: "mkfifo", Path: path, Err: err}
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		os.Remove(path)
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// recordGuest records the guest process once runsc exec reported its PID
// on the FIFO; running moves an interactive terminal to Running. It waits
// for that report or for the exec client's exit, whichever comes first
// (poll(2) on the FIFO and the client's pidfd): no polling loop. A client
// that exits without reporting leaves the terminal without a guest
// process.
func (r *run) recordGuest(running bool) {
	defer r.pidR.Close()
	var buf []byte
	b := make([]byte, 32)
read:
	for len(buf) <= 32 { // a PID is at most 10 digits
		fds := []unix.PollFd{{Fd: int32(r.pidR.Fd()), Events: unix.POLLIN}, {Fd: int32(r.gc.proc.Fd()), Events: unix.POLLIN}}
		if _, err := sys.Poll(fds, -1); err != nil {
			r.s.scope.log.Warn("waiting for the guest pid", "path", r.pidFile, "err", err.Error())
			return
		}
		n, err := unix.Read(int(r.pidR.Fd()), b)
		switch {
		case n > 0:
			buf = append(buf, b[:n]...)
		case n == 0:
			// The writer closed, or the client exited without opening
			// the FIFO.
			break read
		case err == unix.EAGAIN || err == unix.EINTR:
			if fds[1].Revents != 0 {
				break read // the client exited
			}
		default:
			r.s.scope.log.Warn("reading the guest pid", "path", r.pidFile, "err", err.Error())
			return
		}
	}
	text := strings.TrimSpace(string(buf))
	if text == "" {
		return
	}
	pid, err := strconv.Atoi(text)
	if err != nil || pid <= 0 {
		r.s.scope.log.Warn("unreadable guest pid", "path", r.pidFile)
		return
	}
	r.mu.Lock()
	r.guestPID = pid
	r.mu.Unlock()
	t := r.term
	// The leader's start time inside gVisor is not observable from the
	// host without another exec; it is recorded as 0. runsc starts each
	// exec'd process as its own process group leader.
	t.GuestProcess = &domainstore.GuestProcessIdentity{LeaderPID: uint32(pid), ProcessGroupID: uint32(pid)}
	if running {
		t.State = domainstore.TerminalRunning
	}
	if err := r.putTerminal(t, nil); err != nil {
		r.s.scope.log.Warn("recording the guest process", "err", err.Error())
	}
}

// kill ends the guest process (runsc kill --pid) and the exec client.
func (r *run) kill() {
	r.mu.Lock()
	r.killed = true
	pid := r.guestPID
	r.mu.Unlock()
	if pid > 0 && r.s.sandbox.running() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := r.s.sandbox.killProcess(ctx, pid); err != nil {
			r.s.scope.log.Info("runsc kill of a session process", "session", r.id.String(), "result", err.Error())
		}
		cancel()
	}
	if r.gc != nil {
		r.gc.proc.Kill()
	}
}

// runscFailureCode is the exit code of a runsc command that failed itself
// (runsc's fatal errors), not of the command it ran.
const runscFailureCode = 128

// runtimeLossGrace bounds how long outcome waits for the attached runsc's
// exit to show after an exec client ended with runscFailureCode. A
// command that itself exits 128 while the runtime lives pays this once.
const runtimeLossGrace = 2 * time.Second

// outcome turns the exec client's wait result into the session's exit.
// The terminal record is released by release, after the exit was reported
// (finishLater).
func (r *run) outcome(waitErr error) protocol.SessionExit {
	exit := protocol.SessionExit{SessionID: r.id}
	r.mu.Lock()
	killed := r.killed
	r.mu.Unlock()
	ps := r.gc.proc.State()
	// runsc exec ends with its own failure code when its connection to the
	// sandbox breaks; a killed runsc can take a moment longer to finish
	// exiting than its exec client to see the broken connection, so for
	// that code the loss gets a short wait to show.
	wait := time.Duration(0)
	if ps != nil && ps.ExitCode() == runscFailureCode {
		wait = runtimeLossGrace
	}
	switch {
	case r.s.isLost(), ps != nil && ps.ExitCode() != 0 && r.s.sandbox.runtimeGoneWithin(wait):
		// The exec client can end (runsc exec sees the sandbox go away)
		// before the coordinator has noticed the loss: an exit that is
		// not a clean one is the runtime's loss when the attached runsc
		// has already ended.
		exit.Outcome = protocol.ExitRuntimeLost
	case killed || ps == nil || !ps.Exited():
		exit.Outcome = protocol.ExitTerminated
	default:
		exit.Outcome = protocol.ExitExited
		exit.ExitCode = ptr(uint8(ps.ExitCode()))
	}
	r.s.scope.log.Info("session ended", "session", r.id.String(), "outcome", fmt.Sprint(exit.Outcome), "wait", fmt.Sprint(waitErr))
	return exit
}

// finishLater releases the terminal record (ReleaseIntent, then Clean)
// and then ends the session's command, in the background: the exit, which
// the exec client's reaped status already decided, is reported to the CLI
// without waiting for these two durable writes. The command stays counted
// as active until they are done, so neither the linger nor a teardown
// overtakes them; no record or its order changes.
func (r *run) finishLater() {
	go func() {
		r.release()
		r.s.end(r.id)
	}()
}

// release records ReleaseIntent and then Clean: the exec client has been
// reaped (its pidfd reports it gone) and it waited for its guest process.
func (r *run) release() {
	if r.guestDone != nil {
		<-r.guestDone
	} else if r.pidR != nil {
		r.pidR.Close() // the client never ran: nothing reports a PID
	}
	t := r.term
	if t.State == domainstore.TerminalIntent && t.ContainerID == nil {
		return
	}
	if t.State != domainstore.TerminalReleaseIntent {
		t.State = domainstore.TerminalReleaseIntent
		if err := r.putTerminal(t, nil); err != nil {
			r.s.scope.log.Warn("releasing the session terminal", "err", err.Error())
			return
		}
	}
	if r.gc != nil {
		// A zombie still answers: the client must have been reaped.
		if r.gc.proc.Signal(0) == nil {
			r.s.scope.log.Warn("session exec client still alive at release", "session", r.id.String())
			return
		}
		r.gc.proc.Close()
	}
	os.Remove(r.pidFile)
	clean := domainstore.SessionTerminal{GenerationID: t.GenerationID, SessionID: t.SessionID, State: domainstore.TerminalClean}
	if err := r.putTerminal(clean, store.ProvenAbsent("exec client reaped and its pidfd reports exit")); err != nil {
		r.s.scope.log.Warn("cleaning the session terminal", "err", err.Error())
	}
}

// Execute runs argv without a terminal.
func (s *sessions) Execute(ctx context.Context, req control.ExecRequest, stdout, stderr io.Writer) (protocol.SessionExit, error) {
	if err := s.begin(req.Binding.SessionID); err != nil {
		return protocol.SessionExit{}, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		s.end(req.Binding.SessionID)
		return protocol.SessionExit{}, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		s.end(req.Binding.SessionID)
		return protocol.SessionExit{}, err
	}
	r, err := s.startRun(runSpec{binding: req.Binding, capability: req.Capability, argv: req.Argv, stdout: outW, stderr: errW})
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		if r != nil {
			r.release()
		}
		s.end(req.Binding.SessionID)
		return protocol.SessionExit{}, err
	}
	r.watchGuest(false)
	var copies sync.WaitGroup
	copies.Add(2)
	go func() { defer copies.Done(); copyOut(stdout, outR) }()
	go func() { defer copies.Done(); copyOut(stderr, errR) }()
	waited := make(chan error, 1)
	go func() { waited <- r.gc.proc.Wait() }()
	var werr error
	select {
	case werr = <-waited:
	case <-ctx.Done():
		r.kill()
		werr = <-waited
	case <-s.abort:
		r.kill()
		werr = <-waited
	}
	copies.Wait()
	exit := r.outcome(werr)
	r.finishLater()
	return exit, nil
}

// copyOut copies r to w and closes r; after a write error it drains r so
// the writer in the sandbox is not blocked.
func copyOut(w io.Writer, r *os.File) {
	defer r.Close()
	if _, err := io.Copy(w, r); err != nil {
		io.Copy(io.Discard, r)
	}
}

// Interactive starts argv on a pty of its own.
func (s *sessions) Interactive(ctx context.Context, req control.InteractiveRequest) (control.InteractiveSession, error) {
	if err := s.begin(req.Binding.SessionID); err != nil {
		return nil, err
	}
	master, tty, err := pty.Open()
	if err != nil {
		s.end(req.Binding.SessionID)
		return nil, fmt.Errorf("allocating a pty: %w", err)
	}
	if err := pty.Setsize(master, &pty.Winsize{Rows: req.Size.Rows, Cols: req.Size.Columns, X: req.Size.PixelWidth, Y: req.Size.PixelHeight}); err != nil {
		s.end(req.Binding.SessionID)
		master.Close()
		tty.Close()
		return nil, fmt.Errorf("sizing the pty: %w", err)
	}
	r, err := s.startRun(runSpec{binding: req.Binding, capability: req.Capability, argv: req.Argv, terminal: true, size: req.Size,
		stdin: tty, stdout: tty, stderr: tty, ptyMaster: master})
	tty.Close()
	if err != nil {
		master.Close()
		if r != nil {
			r.release()
		}
		s.end(req.Binding.SessionID)
		return nil, err
	}
	esc := s.escalation()
	p := &ptySession{r: r, master: master, done: make(chan struct{}), route: esc.attach(req.Binding.SessionID)}
	r.watchGuest(true)
	go func() {
		werr := r.gc.proc.Wait()
		// The session's escalation request ends with its terminal.
		esc.detach(req.Binding.SessionID, p.route)
		// The pty's replica may stay open in the sandbox for a moment:
		// output still queued is read until a short deadline, then Read
		// reports the end.
		master.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		p.exit = r.outcome(werr)
		close(p.done)
		r.finishLater()
	}()
	go func() {
		select {
		case <-s.abort:
			r.kill()
		case <-p.done:
		}
	}()
	return p, nil
}

// ptySession is a running interactive session.
type ptySession struct {
	r      *run
	master *os.File
	done   chan struct{}
	exit   protocol.SessionExit
	once   sync.Once
	// route carries escalation prompts to this terminal and decisions
	// back; nil when escalation is disabled.
	route *promptRoute
}

func (p *ptySession) Read(b []byte) (int, error) {
	n, err := p.master.Read(b)
	if err != nil && (errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, unix.EIO)) {
		return n, io.EOF
	}
	return n, err
}

func (p *ptySession) Input(b []byte) error {
	_, err := p.master.Write(b)
	return err
}

func (p *ptySession) Resize(size protocol.TerminalResize) error {
	return pty.Setsize(p.master, &pty.Winsize{Rows: size.Rows, Cols: size.Columns, X: size.PixelWidth, Y: size.PixelHeight})
}

// Signal types the terminal's own interrupt, quit or suspend character,
// as a keyboard would: the pty's line discipline turns it into the signal
// for the foreground process group when the program left ISIG on, and a
// program in raw mode receives the byte, exactly as on a local terminal.
func (p *ptySession) Signal(sig protocol.TerminalSignalKind) error {
	tio, err := unix.IoctlGetTermios(int(p.master.Fd()), unix.TCGETS)
	if err != nil {
		return fmt.Errorf("reading the terminal settings: %w", err)
	}
	var c byte
	switch sig {
	case protocol.SignalInterrupt:
		c = tio.Cc[unix.VINTR]
	case protocol.SignalQuit:
		c = tio.Cc[unix.VQUIT]
	case protocol.SignalSuspend:
		c = tio.Cc[unix.VSUSP]
	default:
		return fmt.Errorf("unknown terminal signal %d", sig)
	}
	if c == 0 {
		return nil // disabled (_POSIX_VDISABLE) by the program
	}
	_, err = p.master.Write([]byte{c})
	return err
}

// Decide hands the developer's signed decision to the waiting prompt; the
// engine verifies it.
func (p *ptySession) Decide(rec protocol.SignedProtocolRecord) error {
	return p.route.decide(rec)
}

// Prompts delivers the escalation prompts of this session's requests.
func (p *ptySession) Prompts() <-chan protocol.TerminalPrompt {
	if p.route == nil {
		return nil
	}
	return p.route.prompts
}

// Close hangs the session up: its guest process is killed and its exit
// follows as Terminated.
func (p *ptySession) Close() error {
	p.once.Do(func() {
		select {
		case <-p.done:
		default:
			p.r.kill()
		}
	})
	return nil
}

func (p *ptySession) Wait(ctx context.Context) (protocol.SessionExit, error) {
	select {
	case <-p.done:
		p.master.Close()
		return p.exit, nil
	case <-ctx.Done():
		return protocol.SessionExit{}, ctx.Err()
	}
}
