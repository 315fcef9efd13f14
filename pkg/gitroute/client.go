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
	// Stderr receives the daemon's log; nil discards it.
	Stderr io.Writer
	// Logger records the client's actions; nil discards them.
	Logger *slog.Logger
	// Env is the daemon's environment. nil passes PATH, HOME and
	// XDG_CONFIG_HOME from this process, which the daemon needs to find
	// fusermount3, git and the user's global excludes file; nothing else
	// is passed.
	Env []string
}

func (s *Spec) validate() error {
	for _, f := range []struct{ name, v string }{
		{"Binary", s.Binary}, {"HostRoot", s.HostRoot}, {"IsolatedRoot", s.IsolatedRoot}, {"Mountpoint", s.Mountpoint},
	} {
		if f.v == "" || !filepath.IsAbs(f.v) || filepath.Clean(f.v) != f.v {
			return fmt.Errorf("%w: %s %q must be a clean absolute path", ErrSpec, f.name, f.v)
		}
	}
	return nil
}

// Daemon is one running lazaret-gitroute with its view mounted.
type Daemon struct {
	spec     Spec
	log      *slog.Logger
	conn     *Conn
	cmd      *exec.Cmd
	pidfd    int
	process  hostid.PidfsProcessIdentityV1
	ready    Ready
	exited   chan struct{}
	waitErr  error
	reports  chan Report
	mu       sync.Mutex
	released bool
	result   error
	done     chan struct{}
}

// Start launches the daemon and waits, until ctx ends, for its Ready. It
// then checks the mount at the mountpoint against the report. On any
// failure the daemon is killed and no mount is left behind.
func Start(ctx context.Context, spec Spec) (*Daemon, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	log := spec.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	conn, child, err := Pair()
	if err != nil {
		return nil, err
	}
	hand := DaemonArgs{HostRoot: spec.HostRoot, IsolatedRoot: spec.IsolatedRoot, Mountpoint: spec.Mountpoint, Control: child}
	args, err := hand.Argv()
	if err != nil {
		conn.Close()
		child.Close()
		return nil, err
	}
	cmd := exec.Command(spec.Binary, args...)
	if cmd.ExtraFiles, err = hand.ExtraFiles(); err != nil {
		conn.Close()
		child.Close()
		return nil, err
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
	log.Info("starting gitroute daemon", "binary", spec.Binary, "host_root", spec.HostRoot, "isolated_root", spec.IsolatedRoot, "mountpoint", spec.Mountpoint)
	err = cmd.Start()
	child.Close()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("starting %q: %w", spec.Binary, err)
	}
	d := &Daemon{spec: spec, log: log, conn: conn, cmd: cmd, pidfd: -1, exited: make(chan struct{}), reports: make(chan Report, 4), done: make(chan struct{})}
	go func() {
		d.waitErr = cmd.Wait()
		close(d.exited)
	}()
	if err := d.start(ctx); err != nil {
		d.abort()
		return nil, err
	}
	go d.watch()
	return d, nil
}

func (d *Daemon) start(ctx context.Context) error {
	pidfd, err := hostid.OpenPidfd(d.cmd.Process.Pid)
	if err != nil {
		return fmt.Errorf("opening pidfd of gitroute daemon: %w", err)
	}
	d.pidfd = pidfd
	if d.process, err = hostid.IdentityOf(pidfd); err != nil {
		return fmt.Errorf("identifying gitroute daemon: %w", err)
	}
	go d.receive()
	select {
	case r, ok := <-d.reports:
		if !ok {
			<-d.exited
			return fmt.Errorf("waiting for gitroute Ready: %w: %v", ErrDaemonExited, d.waitErr)
		}
		switch m := r.(type) {
		case *Ready:
			d.ready = *m
		case *Failed:
			return &FailedError{Report: *m}
		default:
			return fmt.Errorf("waiting for gitroute Ready: got %T: %w", r, ErrProtocol)
		}
	case <-ctx.Done():
		return fmt.Errorf("waiting for gitroute Ready: %w", ctx.Err())
	}
	got, err := MountAt(d.spec.Mountpoint)
	if err != nil {
		return fmt.Errorf("checking the view mount: %w", err)
	}
	if got != d.ready.Mount {
		return fmt.Errorf("%w: found %+v, reported %+v", ErrMountMismatch, got, d.ready.Mount)
	}
	if err := checkDir(d.spec.HostRoot, d.ready.HostRoot); err != nil {
		return err
	}
	if err := checkDir(d.spec.IsolatedRoot, d.ready.IsolatedRoot); err != nil {
		return err
	}
	d.log.Info("gitroute view ready", "mountpoint", d.spec.Mountpoint, "mount_id", d.ready.Mount.MountID, "pid", d.process.HostPID)
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
				d.log.Warn("rejected gitroute control packet", "err", err)
				continue
			}
			return
		}
		d.reports <- r
	}
}

// watch runs after Ready: it collects the daemon's end and makes sure its
// mount is gone.
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
	<-d.exited
	d.mu.Lock()
	released := d.released
	d.mu.Unlock()
	result := failed
	if result == nil && !released {
		result = fmt.Errorf("%w: %v", ErrDaemonExited, d.waitErr)
	}
	if result == nil && d.waitErr != nil {
		result = fmt.Errorf("%w after release: %v", ErrDaemonExited, d.waitErr)
	}
	if err := d.cleanup(); err != nil {
		result = errors.Join(result, err)
	}
	d.conn.Close()
	unix.Close(d.pidfd)
	d.result = result
	close(d.done)
}

// cleanup removes the recorded mount if it is still there. fusermount3's
// auto_unmount normally does this when the daemon dies; the client waits
// briefly for it and then detaches the mount itself (the only way where the
// daemon mounted directly, without fusermount3).
func (d *Daemon) cleanup() error {
	deadline := time.Now().Add(2 * time.Second)
	for {
		present, err := Mounted(d.spec.Mountpoint, d.ready.Mount)
		if err != nil {
			return fmt.Errorf("checking the view mount after daemon exit: %w", err)
		}
		if !present {
			return nil
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.log.Warn("detaching the view mount left by the gitroute daemon", "mountpoint", d.spec.Mountpoint)
	return Unmount(d.spec.Mountpoint, true)
}

// abort kills a daemon that failed to start and removes any mount it made.
func (d *Daemon) abort() {
	_ = d.cmd.Process.Kill()
	<-d.exited
	d.conn.Close()
	if d.pidfd >= 0 {
		unix.Close(d.pidfd)
	}
	if m, err := MountAt(d.spec.Mountpoint); err == nil || errors.Is(err, unix.ENOTCONN) {
		if err != nil || d.ready.Mount == (hostid.MountIdentity{}) || m == d.ready.Mount {
			if uerr := Unmount(d.spec.Mountpoint, true); uerr != nil {
				d.log.Warn("detaching the view mount after a failed start", "mountpoint", d.spec.Mountpoint, "err", uerr)
			}
		}
	}
}

// Process is the daemon's pidfs identity, for the Domain Store.
func (d *Daemon) Process() hostid.PidfsProcessIdentityV1 { return d.process }

// Mount is the identity of the view mount, for the Domain Store.
func (d *Daemon) Mount() hostid.MountIdentity { return d.ready.Mount }

// Ready is the daemon's full Ready report.
func (d *Daemon) Ready() Ready { return d.ready }

// Done is closed once the daemon has exited and its mount is gone.
func (d *Daemon) Done() <-chan struct{} { return d.done }

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
// until ctx ends; then it kills the daemon and detaches the mount itself.
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
		return fmt.Errorf("sending Release: %w", err)
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
	case <-d.exited:
		return
	default:
	}
	if err := unix.PidfdSendSignal(d.pidfd, unix.SIGKILL, nil, 0); err != nil {
		d.log.Warn("killing gitroute daemon", "err", err)
	}
}
