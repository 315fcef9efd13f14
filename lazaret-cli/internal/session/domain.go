package session

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/control"
	"lazaret.dev/pkg/domainstore"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/protocol"
	"lazaret.dev/pkg/startup"
	"lazaret.dev/pkg/store"
)

// LogName is the coordinator's log inside the Domain's runtime directory.
const LogName = "coordinator.log"

// DefaultLinger is how long a coordinator keeps a Domain with no session.
const DefaultLinger = startup.DefaultLinger

// DefaultWait bounds the wait for a Domain that another process is
// starting or stopping.
const DefaultWait = 5 * time.Minute

// Target is the Domain a command starts or joins, from the resolved
// configuration.
type Target struct {
	ConfigFile  string
	Profile     string
	Workspace   string
	RuntimeRoot string
	StorageRoot string
	DomainID    ids.DomainID
	Fingerprint ids.Digest
	Linger      time.Duration
	// RecoverOnly makes the coordinator recover what an earlier one left
	// and exit without starting a generation (lazaret-cli recover).
	RecoverOnly bool
	// Session is the session this command will register; a coordinator
	// it spawns records it as the generation's starter.
	Session ids.SessionID
}

// Paths are the Domain's published files.
func (t *Target) Paths() control.Paths { return control.DomainPaths(t.RuntimeRoot, t.DomainID) }

// LockPath is the Domain lock file.
func (t *Target) LockPath() string { return filepath.Join(t.Paths().Dir, LockName) }

// LogPath is the coordinator's log file.
func (t *Target) LogPath() string { return filepath.Join(t.Paths().Dir, LogName) }

// ServeArgs is the command line of the coordinator that starts t; spawn
// adds the descriptors.
func (t *Target) ServeArgs() startup.Serve {
	s := startup.Serve{
		ConfigFile:  t.ConfigFile,
		Profile:     t.Profile,
		Workspace:   t.Workspace,
		Fingerprint: t.Fingerprint.String(),
		Linger:      t.Linger,
		RecoverOnly: t.RecoverOnly,
	}
	if !t.RecoverOnly && !ids.ID(t.Session).IsZero() {
		s.Session = t.Session.String()
	}
	return s
}

// MismatchError refuses to join a Domain that runs another configuration.
type MismatchError struct {
	Profile   string
	Workspace string
	Running   ids.Digest // the published generation's fingerprint
	Requested ids.Digest // this command's fingerprint
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("the Domain of profile %q in %s is running with configuration fingerprint %s, "+
		"but this command's configuration has fingerprint %s; end the sessions in the other terminals "+
		"(or wait until that Domain has torn down) and start again", e.Profile, e.Workspace, e.Running, e.Requested)
}

// ErrDomainRunning means recovery was asked for while a coordinator holds
// the Domain lock: there is nothing to recover from a live coordinator.
var ErrDomainRunning = errors.New("a coordinator holds the Domain lock")

// Recover takes the Domain lock and runs a coordinator that recovers the
// generation an earlier coordinator left, from the Domain Store's records
// alone, and exits. It returns ErrDomainRunning when the lock is held.
func (a *Attacher[C]) Recover(ctx context.Context, t *Target) error {
	if a.Progress != nil {
		defer a.Progress.Done()
	}
	if err := domainDir(t.Paths().Dir); err != nil {
		return err
	}
	lock, err := OpenLock(t.LockPath())
	if err != nil {
		return fmt.Errorf("opening the Domain lock: %w", err)
	}
	defer lock.Close()
	taken, err := lock.TryLock()
	if err != nil {
		return fmt.Errorf("taking the Domain lock: %w", err)
	}
	if !taken {
		return fmt.Errorf("%w %s; stop it first (lazaret-cli stop)", ErrDomainRunning, t.LockPath())
	}
	rt := *t
	rt.RecoverOnly = true
	return a.spawn(ctx, &rt, lock)
}

// ErrWaitTimeout means another process kept the Domain starting or
// stopping for longer than the wait bound.
var ErrWaitTimeout = errors.New("timed out waiting for the Domain")

// Progress receives what Attach is doing; Printer implements it.
type Progress interface {
	// Step is a start report progress line of a coordinator this process
	// spawned.
	Step(name string)
	// Waiting says that another process is starting or stopping the Domain.
	Waiting()
	// Done ends the progress display.
	Done()
}

// Publisher is a dialed control connection: *control.Client in production.
type Publisher interface {
	Publication() protocol.ProtocolPublicationIdentity
	Close() error
}

// Attacher finds or starts a Domain's coordinator and dials it.
type Attacher[C Publisher] struct {
	// Coordinator returns the lazaret-coordinator executable; it is called
	// only when this process must spawn one.
	Coordinator func() (string, error)
	// Dial connects to a published Domain.
	Dial func(ctx context.Context, p control.Paths) (C, error)
	// Live reports what the Domain Store records as live, "" for nothing.
	Live func(t *Target) (string, error)
	// Progress is told about steps and waits; nil shows nothing.
	Progress Progress
	// Trace, when set, is told when each step begins and ends
	// (--trace-start).
	Trace *StartTrace
	// Kept is told, once the Domain a spawned coordinator started is
	// ready, which host paths it kept isolated only because an earlier
	// generation isolated them; nil ignores them.
	Kept func(KeptPaths)
	// Env is the coordinator's environment (the CLI's own by default).
	Env []string
	// Wait bounds the wait for another process's start or stop.
	Wait time.Duration
	// Poll is the interval between looks at the lock and the identity file.
	Poll time.Duration
}

// NewAttacher returns the production Attacher: control.Dial, the Domain
// Store for leftovers, and the process environment.
func NewAttacher(coordinator func() (string, error), progress Progress) *Attacher[*control.Client] {
	return &Attacher[*control.Client]{
		Coordinator: coordinator,
		Dial: func(ctx context.Context, p control.Paths) (*control.Client, error) {
			return control.Dial(ctx, p.Socket, p.Identity)
		},
		Live:     LiveRecords,
		Progress: progress,
	}
}

// action is what Attach does after one look at the Domain.
type action int

const (
	actSpawn    action = iota // we hold the lock and nothing is published
	actLeftover               // we hold the lock but a publication exists
	actJoin                   // someone holds the lock and a publication exists
	actWait                   // someone holds the lock, nothing is published yet
)

func (a action) String() string {
	return [...]string{"spawn", "leftover", "join", "wait"}[a]
}

// decide is the planner of one look: lockTaken is whether this process
// just acquired the Domain lock, published whether the identity file
// exists.
func decide(lockTaken, published bool) action {
	switch {
	case lockTaken && published:
		return actLeftover
	case lockTaken:
		return actSpawn
	case published:
		return actJoin
	}
	return actWait
}

// maxDialFailures bounds consecutive failed dials of a publication that
// stays in place while its coordinator holds the lock.
const maxDialFailures = 20

// Attach returns a connection to the Domain's coordinator whose published
// fingerprint equals t's, spawning the coordinator when no process holds
// the Domain lock and waiting while another process starts or stops it.
// spawned reports whether this process started the coordinator.
func (a *Attacher[C]) Attach(ctx context.Context, t *Target) (conn C, spawned bool, err error) {
	var zero C
	if a.Progress != nil {
		defer a.Progress.Done()
	}
	p := t.Paths()
	if err := domainDir(p.Dir); err != nil {
		return zero, false, err
	}
	lock, err := OpenLock(t.LockPath())
	if err != nil {
		return zero, false, fmt.Errorf("opening the Domain lock: %w", err)
	}
	defer lock.Close()
	wait, poll := a.Wait, a.Poll
	if wait <= 0 {
		wait = DefaultWait
	}
	if poll <= 0 {
		poll = 50 * time.Millisecond
	}
	deadline := time.Now().Add(wait)
	waiting := false
	dialFailures := 0
	var lastErr error
	for {
		taken, err := lock.TryLock()
		if err != nil {
			return zero, false, fmt.Errorf("taking the Domain lock: %w", err)
		}
		published, err := exists(p.Identity)
		if err != nil {
			if taken {
				unlock(lock)
			}
			return zero, false, err
		}
		switch decide(taken, published) {
		case actLeftover:
			if err := a.clearLeftover(t); err != nil {
				unlock(lock)
				return zero, false, err
			}
			fallthrough
		case actSpawn:
			a.Trace.Mark("Domain lock taken: starting a coordinator")
			if err := a.spawn(ctx, t, lock); err != nil {
				return zero, true, err
			}
			a.Trace.Mark("coordinator ready")
			c, err := a.join(ctx, t)
			if err == nil {
				a.Trace.Mark("control channel connected")
			}
			return c, true, err
		case actJoin:
			c, err := a.join(ctx, t)
			if err == nil {
				a.Trace.Mark("control channel connected to the running Domain")
				return c, false, nil
			}
			var mismatch *MismatchError
			if errors.As(err, &mismatch) || ctx.Err() != nil {
				return zero, false, err
			}
			// The publication may have been withdrawn between the look
			// and the dial (a teardown); look again. A publication that
			// stays and keeps failing is an error of its own.
			if still, _ := exists(p.Identity); still {
				dialFailures++
				if dialFailures >= maxDialFailures {
					return zero, false, err
				}
			}
			lastErr = err
		case actWait:
			dialFailures = 0
		}
		if !waiting && a.Progress != nil {
			a.Progress.Waiting()
		}
		waiting = true
		if time.Now().After(deadline) {
			if lastErr != nil {
				return zero, false, fmt.Errorf("%w after %v (the Domain lock %s stays held): %w", ErrWaitTimeout, wait, t.LockPath(), lastErr)
			}
			return zero, false, fmt.Errorf("%w after %v: the Domain lock %s stays held and nothing is published", ErrWaitTimeout, wait, t.LockPath())
		}
		select {
		case <-ctx.Done():
			return zero, false, ctx.Err()
		case <-time.After(poll):
		}
	}
}

// unlock gives up a lock this process took without spawning.
func unlock(l *Lock) {
	_ = unix.Flock(int(l.File().Fd()), unix.LOCK_UN)
	l.Holding = false
}

func exists(path string) (bool, error) {
	_, err := os.Lstat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("looking for the Domain's identity file: %w", err)
}

// join dials the publication and checks it is this Domain with this
// configuration.
func (a *Attacher[C]) join(ctx context.Context, t *Target) (C, error) {
	var zero C
	c, err := a.Dial(ctx, t.Paths())
	if err != nil {
		return zero, err
	}
	if err := CheckPublication(c.Publication(), t); err != nil {
		c.Close()
		return zero, err
	}
	return c, nil
}

// CheckPublication checks that a verified publication is t's Domain and
// runs t's configuration fingerprint.
func CheckPublication(pub protocol.ProtocolPublicationIdentity, t *Target) error {
	g := pub.GenerationIdentity
	if g.DomainID != t.DomainID || g.AgentProfile != t.Profile {
		return fmt.Errorf("the identity file %s names Domain %s of profile %q, not Domain %s of profile %q",
			t.Paths().Identity, g.DomainID, g.AgentProfile, t.DomainID, t.Profile)
	}
	if g.ConfigurationFingerprint != t.Fingerprint {
		return &MismatchError{Profile: t.Profile, Workspace: t.Workspace, Running: g.ConfigurationFingerprint, Requested: t.Fingerprint}
	}
	return nil
}

// spawn starts the coordinator detached, handing it the held lock and the
// start report's write end (startup.Serve), and reads the report. The
// caller closes its copy of the lock afterwards: on success the
// coordinator holds it, on failure the lock is released once the
// coordinator is gone.
func (a *Attacher[C]) spawn(ctx context.Context, t *Target, lock *Lock) error {
	bin, err := a.Coordinator()
	if err != nil {
		unlock(lock)
		return err
	}
	logPath := t.LogPath()
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		unlock(lock)
		return fmt.Errorf("opening the coordinator log: %w", err)
	}
	defer logFile.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		unlock(lock)
		return fmt.Errorf("opening %s: %w", os.DevNull, err)
	}
	defer devnull.Close()
	r, w, err := os.Pipe()
	if err != nil {
		unlock(lock)
		return fmt.Errorf("creating the start report pipe: %w", err)
	}
	defer r.Close()
	serve := t.ServeArgs()
	serve.Lock, serve.Report = lock.File(), w
	args, err := serve.Argv()
	if err != nil {
		w.Close()
		unlock(lock)
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = "/"
	cmd.Env = a.Env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, logFile, logFile
	if cmd.ExtraFiles, err = serve.ExtraFiles(); err != nil {
		w.Close()
		unlock(lock)
		return err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	w.Close()
	if err != nil {
		unlock(lock)
		return fmt.Errorf("starting the coordinator %s: %w", bin, err)
	}
	// Reap the coordinator if it exits while this process lives; it is
	// detached (its own session) and outlives the CLI otherwise.
	go func() { _ = cmd.Wait() }()
	a.Trace.Mark("coordinator spawned")
	step := func(name string) {
		a.Trace.StepBegan(name)
		if a.Progress != nil {
			a.Progress.Step(name)
		}
	}
	done := make(chan error, 1)
	var kept KeptPaths
	go func() {
		done <- startup.Read(r, startup.Handlers{Step: step, Done: a.Trace.StepDone, Kept: kept.add, KeptMore: kept.more})
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		return fmt.Errorf("waiting for the coordinator to start: %w", ctx.Err())
	}
	if err == nil {
		if a.Kept != nil && (len(kept.Paths) > 0 || kept.More > 0) {
			a.Kept(kept)
		}
		return nil
	}
	var se *startup.Error
	if errors.As(err, &se) || errors.Is(err, startup.ErrExited) {
		return fmt.Errorf("%w; see %s", err, logPath)
	}
	return fmt.Errorf("reading the coordinator's start report: %w; see %s", err, logPath)
}

// clearLeftover handles a publication found while holding the Domain
// lock: its coordinator is gone. When the Domain Store records nothing
// live, the published names are removed here. Otherwise they are left for
// the coordinator about to be spawned: before it starts a generation it
// recovers the one left behind from its records, withdrawing those names
// only where they are still the recorded objects.
func (a *Attacher[C]) clearLeftover(t *Target) error {
	p := t.Paths()
	if a.Live != nil {
		live, err := a.Live(t)
		if err != nil || live != "" {
			return nil
		}
	}
	for _, name := range []string{p.Identity, p.Socket} {
		if err := removeOwned(name); err != nil {
			return err
		}
	}
	return nil
}

// removeOwned unlinks a leftover identity file or socket that belongs to
// the user; anything else is left in place and reported.
func removeOwned(path string) error {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return &os.PathError{Op: "lstat", Path: path, Err: err}
	}
	kind := st.Mode & unix.S_IFMT
	if st.Uid != uint32(os.Geteuid()) || (kind != unix.S_IFREG && kind != unix.S_IFSOCK) {
		return fmt.Errorf("leftover %s is not a file or socket of uid %d; remove it by hand", path, os.Geteuid())
	}
	if err := unix.Unlink(path); err != nil && !errors.Is(err, unix.ENOENT) {
		return &os.PathError{Op: "unlink", Path: path, Err: err}
	}
	return nil
}

// LiveRecords reads t's Domain Store read-only and describes any
// participant that is not Clean; "" when there is none or no store.
func LiveRecords(t *Target) (string, error) {
	s, err := domainstore.OpenFile(domainstore.Path(t.StorageRoot, t.DomainID), domainstore.Options{ReadOnly: true, LockTimeout: time.Second})
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer s.Close()
	var contents domainstore.Contents
	if err := s.View(func(tx *domainstore.Tx) error { var e error; contents, e = tx.Scan(); return e }); err != nil {
		return "", err
	}
	for _, g := range contents.Generations {
		for _, p := range g.Participants {
			if p.State != domainstore.StateClean {
				return fmt.Sprintf("participant %v of generation %s in state %v", p.Role, g.Generation.GenerationID, p.State), nil
			}
		}
	}
	return "", nil
}
