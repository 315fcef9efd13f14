package gitroute

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/spawn"
)

// Errors of the client; test with errors.Is.
var (
	// ErrSpec means a Spec field is missing or not an absolute path.
	ErrSpec = errors.New("invalid gitroute spec")
	// ErrDaemonFailed means the daemon reported a failure.
	ErrDaemonFailed = errors.New("gitroute daemon failed")
	// ErrDaemonExited means the daemon exited without being released.
	ErrDaemonExited = errors.New("gitroute daemon exited")
	// ErrMountMismatch means the mount found at the mountpoint is not the
	// one the daemon reported.
	ErrMountMismatch = errors.New("mount at mountpoint does not match the daemon's report")
	// ErrProtocol means the daemon sent a message out of order.
	ErrProtocol = errors.New("gitroute control protocol violation")
)

// FailedError carries a daemon's Failed report.
type FailedError struct{ Report Failed }

func (e *FailedError) Error() string {
	return fmt.Sprintf("gitroute daemon failed at %s: %s", e.Report.Stage, e.Report.Detail)
}

func (e *FailedError) Is(target error) bool { return target == ErrDaemonFailed }

// Spec is what the coordinator asks of one Git routing participant.
type Spec struct {
	// Binary is the lazaret-gitroute executable.
	Binary string
	// HostRoot is the canonical workspace (the git top level).
	HostRoot string
	// IsolatedRoot is the Domain's isolated root under the storage root;
	// it must exist.
	IsolatedRoot string
	// Mountpoint is an existing empty directory under the runtime root.
	Mountpoint string
	// KeepIsolated, when set, is the file of paths the daemon routes to
	// the isolated root whatever the classification says
	// (--keep-isolated).
	KeepIsolated string
	// IsolationReport, when set, is the file the daemon creates before
	// Ready listing the host entries it isolates (--isolation-report).
	IsolationReport string
	// Stderr receives the daemon's log; nil discards it.
	Stderr io.Writer
	// Logger records the client's actions; nil discards them.
	Logger *slog.Logger
	// Env is the daemon's environment. nil passes PATH, HOME and
	// XDG_CONFIG_HOME from this process, which the daemon needs to find
	// fusermount3, git and the user's global excludes file; nothing else
	// is passed.
	Env []string

	// Command builds the unstarted command that runs argv, for a daemon
	// that runs elsewhere than this process's namespaces (the coordinator
	// wraps argv in nsenter into the State Anchor's). It is called with a
	// context that never ends: the daemon lives until Release, not until
	// Start's context. Start then sets the command's ExtraFiles, Env,
	// Stdout, Stderr and pidfd; its Dir and other SysProcAttr fields are
	// kept. nil runs argv as is.
	Command func(ctx context.Context, argv []string) (*exec.Cmd, error)
	// Through is prefixed to Mountpoint to reach the mount from this
	// process's mount namespace, such as /proc/<pid>/root of a process in
	// the daemon's namespace. Once that path no longer resolves the mount
	// counts as gone: its namespace ended. Empty means the daemon mounts
	// in this namespace.
	Through string
	// Detach removes a view the daemon left behind, given the Mountpoint
	// as the daemon sees it. nil is Unmount(mountpoint, true).
	Detach func(ctx context.Context, mountpoint string) error
}

func (s *Spec) validate() error {
	for _, f := range []struct {
		name, v  string
		optional bool
	}{
		{"Binary", s.Binary, false}, {"HostRoot", s.HostRoot, false}, {"IsolatedRoot", s.IsolatedRoot, false}, {"Mountpoint", s.Mountpoint, false},
		{"KeepIsolated", s.KeepIsolated, true}, {"IsolationReport", s.IsolationReport, true}, {"Through", s.Through, true},
	} {
		if f.optional && f.v == "" {
			continue
		}
		if f.v == "" || !filepath.IsAbs(f.v) || filepath.Clean(f.v) != f.v {
			return fmt.Errorf("%w: %s %q must be a clean absolute path", ErrSpec, f.name, f.v)
		}
	}
	return nil
}

// command builds the daemon's command from argv with spec.Command, or
// runs argv as is.
func (s *Spec) command(argv []string) (*exec.Cmd, error) {
	if s.Command == nil {
		return exec.Command(argv[0], argv[1:]...), nil
	}
	return s.Command(context.Background(), argv)
}

// Daemon is one running lazaret-gitroute with its view mounted.
type Daemon struct {
	spec     Spec
	log      *slog.Logger
	conn     *Conn
	proc     *spawn.Process
	ready    Ready
	reports  chan Report
	mu       sync.Mutex
	released bool
	// done is closed once the daemon exited and its mount is gone (or
	// could not be removed); result then says how it ended.
	done   chan struct{}
	result error
}

// Start launches the daemon and waits, until ctx ends, for its Ready. It
// then checks the mount at the mountpoint (through Spec.Through) and both
// roots against the report. On any failure the daemon is killed and
// reaped, and a mount it left is detached.
func Start(ctx context.Context, spec Spec) (*Daemon, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	log := spec.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	conn, end, err := Pair()
	if err != nil {
		return nil, err
	}
	hand := DaemonArgs{HostRoot: spec.HostRoot, IsolatedRoot: spec.IsolatedRoot, Mountpoint: spec.Mountpoint,
		KeepIsolated: spec.KeepIsolated, IsolationReport: spec.IsolationReport, Control: end}
	args, err := hand.Argv()
	var cmd *exec.Cmd
	if err == nil {
		cmd, err = spec.command(append([]string{spec.Binary}, args...))
	}
	if err == nil {
		cmd.ExtraFiles, err = hand.ExtraFiles()
	}
	if err != nil {
		end.Close()
		conn.Close()
		return nil, fmt.Errorf("starting %q: %w", spec.Binary, err)
	}
	cmd.Stdout = spec.Stderr
	cmd.Stderr = spec.Stderr
	cmd.Env = spec.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
		for _, k := range []string{"PATH", "HOME", "XDG_CONFIG_HOME"} {
			if v, ok := os.LookupEnv(k); ok {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
		}
	}
	log.Info("starting gitroute daemon", "binary", spec.Binary, "host_root", spec.HostRoot, "isolated_root", spec.IsolatedRoot,
		"mountpoint", spec.Mountpoint, "through", spec.Through)
	// CLONE_PIDFD: the pidfd names the daemon from its creation on, so no
	// reused PID can slip in before it is identified.
	proc, err := spawn.Start(cmd)
	end.Close()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("starting %q: %w", spec.Binary, err)
	}
	d := &Daemon{spec: spec, log: log, conn: conn, proc: proc, reports: make(chan Report, 4), done: make(chan struct{})}
	proc.Done() // reap from now on
	go d.receive()
	if err := d.awaitReady(ctx); err != nil {
		d.abort()
		return nil, err
	}
	go d.watch()
	return d, nil
}

// view is the mountpoint as this process reaches it.
func (d *Daemon) view() string { return d.spec.Through + d.spec.Mountpoint }

func (d *Daemon) awaitReady(ctx context.Context) error {
	select {
	case r, ok := <-d.reports:
		if !ok {
			return fmt.Errorf("waiting for the gitroute daemon's Ready: %w: %v", ErrDaemonExited, d.proc.Wait())
		}
		switch m := r.(type) {
		case *Ready:
			d.ready = *m
		case *Failed:
			return &FailedError{Report: *m}
		default:
			return fmt.Errorf("waiting for the gitroute daemon's Ready: got %T: %w", r, ErrProtocol)
		}
	case <-ctx.Done():
		return fmt.Errorf("waiting for the gitroute daemon's Ready: %w", ctx.Err())
	}
	got, err := MountAt(d.view())
	if err != nil {
		return fmt.Errorf("checking the view mount: %w", err)
	}
	if got != d.ready.Mount {
		return fmt.Errorf("%w: found %+v at %q, reported %+v", ErrMountMismatch, got, d.view(), d.ready.Mount)
	}
	if err := checkDir(d.spec.HostRoot, d.ready.HostRoot); err != nil {
		return err
	}
	if err := checkDir(d.spec.IsolatedRoot, d.ready.IsolatedRoot); err != nil {
		return err
	}
	d.log.Info("gitroute view ready", "mountpoint", d.spec.Mountpoint, "mount_id", d.ready.Mount.MountID,
		"pid", d.proc.Identity().HostPID, "ignore_files", d.ready.IgnoreFiles, "tracked_paths", d.ready.TrackedPaths)
	return nil
}

// checkDir compares a directory's device and inode with what the daemon
// reports it retained.
func checkDir(path string, want FileIdentity) error {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return fmt.Errorf("checking %q: %w", path, &os.PathError{Op: "stat", Path: path, Err: err})
	}
	if st.Dev != want.Device || st.Ino != want.Inode {
		return fmt.Errorf("%w: %q is %d:%d, daemon retained %d:%d", ErrMountMismatch, path, st.Dev, st.Ino, want.Device, want.Inode)
	}
	return nil
}

// receive forwards reports until the channel closes.
func (d *Daemon) receive() {
	defer close(d.reports)
	for {
		r, err := d.conn.RecvReport()
		if err != nil {
			if errors.Is(err, ErrMalformed) {
				d.log.Warn("rejected gitroute control packet", "err", err.Error())
				continue
			}
			return
		}
		d.reports <- r
	}
}

// watch runs after Ready: it collects how the daemon ended and makes sure
// its mount is gone, then closes done.
func (d *Daemon) watch() {
	var failed error
	for r := range d.reports {
		switch m := r.(type) {
		case *Failed:
			failed = &FailedError{Report: *m}
		case *Released:
		default:
			failed = fmt.Errorf("after Ready: got %T: %w", r, ErrProtocol)
		}
	}
	waitErr := d.proc.Wait()
	d.mu.Lock()
	released := d.released
	d.mu.Unlock()
	result := failed
	if result == nil && !released {
		result = fmt.Errorf("%w: %v", ErrDaemonExited, waitErr)
	}
	if result == nil && waitErr != nil {
		result = fmt.Errorf("%w after Release: %v", ErrDaemonExited, waitErr)
	}
	if err := d.cleanup(); err != nil {
		result = errors.Join(result, err)
	}
	if result != nil {
		d.log.Error("gitroute daemon ended", "mountpoint", d.spec.Mountpoint, "err", result.Error())
	}
	d.conn.Close()
	d.proc.Close()
	d.result = result
	close(d.done)
}

// Mounted reports whether the recorded view is still mounted, seen
// through Spec.Through. When that path no longer resolves (the process
// whose root it is has gone), the mount namespace, and the view in it,
// ended with it: not mounted.
func (d *Daemon) Mounted() (bool, error) {
	return Mounted(d.view(), d.ready.Mount)
}

// detach removes a view the daemon left behind with Spec.Detach, or
// Unmount.
func (d *Daemon) detach() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if d.spec.Detach != nil {
		return d.spec.Detach(ctx, d.spec.Mountpoint)
	}
	return Unmount(d.spec.Mountpoint, true)
}

// cleanup removes the recorded mount if it is still there. fusermount3's
// auto_unmount normally does this when the daemon dies; the client waits
// briefly for it and then detaches the mount itself (the only way where the
// daemon mounted directly, without fusermount3).
func (d *Daemon) cleanup() error {
	deadline := time.Now().Add(2 * time.Second)
	for {
		present, err := d.Mounted()
		if err != nil {
			return fmt.Errorf("checking the view mount after the daemon's exit: %w", err)
		}
		if !present {
			return nil
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.log.Warn("detaching the view mount the gitroute daemon left", "mountpoint", d.spec.Mountpoint)
	if err := d.detach(); err != nil {
		return err
	}
	if present, err := d.Mounted(); err != nil || present {
		return fmt.Errorf("the view at %q is still mounted after detaching it (%v)", d.spec.Mountpoint, err)
	}
	return nil
}

// abort kills a daemon that failed to start and removes any mount it made.
func (d *Daemon) abort() {
	d.proc.Kill()
	d.proc.Wait()
	d.proc.Close()
	d.conn.Close()
	if m, err := MountAt(d.view()); err == nil || errors.Is(err, unix.ENOTCONN) {
		if err != nil || d.ready.Mount == (hostid.MountIdentity{}) || m == d.ready.Mount {
			if derr := d.detach(); derr != nil {
				d.log.Warn("detaching the view mount after a failed start", "mountpoint", d.spec.Mountpoint, "err", derr.Error())
			}
		}
	}
}

// Process is the daemon's pidfs identity, for the Domain Store.
func (d *Daemon) Process() hostid.PidfsProcessIdentityV1 { return d.proc.Identity() }

// Mount is the identity of the view mount, for the Domain Store.
func (d *Daemon) Mount() hostid.MountIdentity { return d.ready.Mount }

// Ready is the daemon's full Ready report.
func (d *Daemon) Ready() Ready { return d.ready }

// Done is closed once the daemon has exited and its mount is gone.
func (d *Daemon) Done() <-chan struct{} { return d.done }

// Err is how the daemon ended once Done is closed (what Wait returns),
// nil before.
func (d *Daemon) Err() error {
	select {
	case <-d.done:
		return d.result
	default:
		return nil
	}
}

// Wait blocks until the daemon has exited and its mount is gone, or ctx
// ends. It returns nil after a successful Release, and otherwise an error
// matching ErrDaemonExited or ErrDaemonFailed: the loss of the view, which
// fails the generation.
func (d *Daemon) Wait(ctx context.Context) error {
	select {
	case <-d.done:
		return d.result
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Release asks the daemon to unmount the view and exit, and waits for both
// until ctx ends; then it kills the daemon, and the mount is detached.
func (d *Daemon) Release(ctx context.Context) error {
	d.mu.Lock()
	d.released = true
	d.mu.Unlock()
	d.log.Info("releasing gitroute view", "mountpoint", d.spec.Mountpoint)
	if err := d.conn.SendCommand(&Release{}); err != nil {
		select {
		case <-d.done:
			return d.result
		default:
		}
		d.Kill()
		<-d.done
		return errors.Join(fmt.Errorf("sending Release: %w", err), d.result)
	}
	select {
	case <-d.done:
		return d.result
	case <-ctx.Done():
		d.Kill()
		<-d.done
		return fmt.Errorf("releasing gitroute view: %w", ctx.Err())
	}
}

// Kill sends SIGKILL to the daemon through its pidfd; Wait then reports
// its exit once the mount is gone.
func (d *Daemon) Kill() {
	select {
	case <-d.proc.Done():
		return // reaped, and its pidfd perhaps closed: nothing to kill
	default:
	}
	if err := d.proc.Kill(); err != nil && !errors.Is(err, spawn.ErrClosed) {
		d.log.Warn("killing the gitroute daemon", "err", err.Error())
	}
}
