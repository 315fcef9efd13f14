package coordinator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/domainstore"
	"lazaret.dev/pkg/gitroute"
	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/isolation"
	"lazaret.dev/pkg/locate"
	"lazaret.dev/pkg/paths"
)

// routeView is the lazaret-gitroute view of the workspace: a GitRouting
// participant. The daemon runs inside the State Anchor's user and mount
// namespaces (nsenter, like runsc), so its FUSE mount is made in the mount
// namespace runsc runs in: the anchor's namespace is private, and a mount
// made on the host after it started would never appear there. FUSE allows
// the mount there because that user namespace owns that mount namespace.
// The mountpoint is the generation's workspace directory; runsc binds it
// at /workspace like the plain workspace.
type routeView struct {
	g      *generation
	binary string    // lazaret-gitroute
	env    []string  // PATH, HOME, XDG_CONFIG_HOME of the coordinator
	stderr io.Writer // the daemon's log

	daemon *routeDaemon
	// keptOnly are the host entries the daemon isolated only because an
	// earlier generation did (sticky.go).
	keptOnly []isolation.Entry
}

// newRouteView locates lazaret-gitroute for the generation g.
func newRouteView(g *generation, env paths.Environment, stderr io.Writer) (*routeView, error) {
	f, err := locate.New()
	if err != nil {
		return nil, fmt.Errorf("locating helper binaries: %w", err)
	}
	bin, err := f.Find("lazaret-gitroute")
	if err != nil {
		return nil, fmt.Errorf("locating lazaret-gitroute (isolate_gitignored is true): %w", err)
	}
	v := &routeView{g: g, binary: bin, stderr: stderr, env: []string{}}
	// The daemon needs fusermount3 and git (PATH) and the user's global
	// excludes file (HOME, XDG_CONFIG_HOME); nothing else is passed.
	for _, k := range []string{"PATH", "HOME", "XDG_CONFIG_HOME"} {
		if val, ok := env.LookupEnv(k); ok {
			v.env = append(v.env, k+"="+val)
		}
	}
	return v, nil
}

// workspaceMountpoint is where the view is mounted, in the anchor's
// mount namespace.
func (g *generation) workspaceMountpoint() string { return g.path("workspace") }

// isolatedRoot is the Domain's root for git-ignored paths, kept across
// generations beside the overlay's upper and work directories.
func (g *generation) isolatedRoot() string {
	return filepath.Join(g.cfg.StorageRoot(), "state", g.domain.String(), "isolated")
}

func (v *routeView) Source() string    { return v.g.workspaceMountpoint() }
func (v *routeView) Participant() bool { return true }

// Lost is closed when the daemon has ended; before Start it is nil.
func (v *routeView) Lost() <-chan struct{} {
	if v.daemon == nil {
		return nil
	}
	return v.daemon.done
}

// Start is the GitRouting step: Intent, the planned paths, then the
// daemon, staged once its Ready and mount are verified and committed with
// the role's Prepared state. Like the State Anchor, the daemon has no gate
// before its execve; until it is staged its only channel is this
// process's, and it unmounts and exits when that closes.
func (v *routeView) Start(ctx context.Context) error {
	g := v.g
	const role = domainstore.RoleGitRouting
	if err := g.intent(role); err != nil {
		return err
	}
	iso, mp, host := g.isolatedRoot(), g.workspaceMountpoint(), g.cfg.Workspace()
	if err := ensurePrivateDir(iso); err != nil {
		return fmt.Errorf("isolated root: %w", err)
	}
	if err := mkdirPrivate(mp); err != nil {
		return err
	}
	if err := g.update(role, domainstore.StateIntent, func(o *domainstore.ParticipantOwnership) {
		r := o.GitRouting
		r.Mountpoint = ptr(mp)
		r.HostRoot = ptr(host)
		r.IsolatedRoot = ptr(iso)
	}); err != nil {
		return err
	}
	if g.anchor == nil {
		return errors.New("starting the workspace view: the state anchor is gone")
	}
	keep, err := g.writeKeep()
	if err != nil {
		return err
	}
	args, err := (&gitroute.DaemonArgs{HostRoot: host, IsolatedRoot: iso, Mountpoint: mp,
		KeepIsolated: g.keepFile(), IsolationReport: g.isolationReport()}).Argv()
	if err != nil {
		return fmt.Errorf("starting the workspace view: %w", err)
	}
	argv := append([]string{v.binary}, args...)
	// Not bound to ctx: the daemon lives until Release, not until the
	// start (or the serve context a SIGTERM cancels) ends.
	cmd, err := g.anchor.CommandInNamespaces(context.Background(), argv)
	if err != nil {
		return fmt.Errorf("starting the workspace view: %w", err)
	}
	cmd.Env = v.env
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = v.stderr, v.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	g.log.Info("starting gitroute daemon in the state anchor's namespaces", "binary", v.binary, "host_root", host, "isolated_root", iso, "mountpoint", mp)
	d, err := startRouteDaemon(ctx, cmd, routeSpec{
		HostRoot: host, IsolatedRoot: iso, Mountpoint: mp,
		// The HC sees the anchor's mount namespace through the anchor's
		// root; the anchor is its unreaped child, so the PID names it.
		Through: "/proc/" + strconv.Itoa(g.anchor.Pid()) + "/root",
		Detach:  v.detach,
		Log:     g.log,
	})
	if err != nil {
		return fmt.Errorf("starting the workspace view: %w", err)
	}
	v.daemon = d
	if err := g.update(role, domainstore.StateIntent, func(o *domainstore.ParticipantOwnership) {
		o.GitRouting.Daemon = hostid.StagedOwnership(d.process)
		o.GitRouting.Mount = ptr(d.ready.Mount)
	}); err != nil {
		return err
	}
	if err := g.update(role, role.ActiveState(), func(o *domainstore.ParticipantOwnership) {
		o.GitRouting.Daemon = committed(d.process)
	}); err != nil {
		return err
	}
	// Recorded before the sandbox starts: a path this generation
	// isolates stays isolated in the next whatever the sandbox does to
	// the ignore files or the index.
	kept, err := g.mergeIsolationReport(keep)
	if err != nil {
		return err
	}
	v.keptOnly = kept
	return nil
}

// detach lazily unmounts a view the daemon left behind, inside the
// anchor's mount namespace, with fusermount3 (which unmounts there as the
// namespace's root).
func (v *routeView) detach(ctx context.Context, mountpoint string) error {
	if v.g.anchor == nil {
		return nil // the namespace, and the mount in it, ended with the anchor
	}
	bin, err := exec.LookPath("fusermount3")
	if err != nil {
		return fmt.Errorf("detaching the view at %q: fusermount3 not found (install fuse3): %w", mountpoint, err)
	}
	if bin, err = filepath.Abs(bin); err != nil {
		return err
	}
	cmd, err := v.g.anchor.CommandInNamespaces(ctx, []string{bin, "-u", "-z", "--", mountpoint})
	if err != nil {
		return fmt.Errorf("detaching the view at %q: %w", mountpoint, err)
	}
	cmd.Env = runscEnv
	cmd.Dir = "/"
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("detaching the view at %q: %w: %s", mountpoint, err, oneLine(string(out)))
	}
	return nil
}

// Release is the GitRouting part of the teardown, after the sandbox
// stopped and before the State Anchor: Release to the daemon, which
// unmounts and exits 0, then Clean. A daemon that was lost is Clean once
// its mount is proved gone.
func (v *routeView) Release(ctx context.Context) error {
	g := v.g
	const role = domainstore.RoleGitRouting
	if err := g.releaseIntent(role, nil); err != nil {
		return err
	}
	method := "gitroute daemon never started"
	if d := v.daemon; d != nil {
		select {
		case <-d.done:
			if present, err := d.mountPresent(); err != nil || present {
				return fmt.Errorf("the workspace view at %q is still mounted after its daemon ended (%v): %w", d.spec.Mountpoint, err, d.result)
			}
			method = "gitroute daemon exited and was reaped; its mount is absent"
		default:
			if err := d.release(ctx); err != nil {
				return fmt.Errorf("releasing the workspace view: %w", err)
			}
			method = "gitroute daemon reported Released and exited 0; its mount is absent"
		}
	}
	return g.clean(role, method)
}

// ensurePrivateDir creates dir (mode 0700, parent must exist) or checks
// that the existing one is a directory, not a link, with no group or
// other permission bits.
func ensurePrivateDir(dir string) error {
	err := os.Mkdir(dir, 0o700)
	if err == nil {
		return nil
	}
	if !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("creating directory %q: %w", dir, err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("checking directory %q: %w", dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("%q must be a directory, not %v", dir, st.Mode().Type())
	}
	if st.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("directory %q has mode %v; it must have no group or other permissions (chmod 0700)", dir, st.Mode().Perm())
	}
	return nil
}

// routeSpec is one lazaret-gitroute as this client sees it.
type routeSpec struct {
	HostRoot, IsolatedRoot, Mountpoint string
	// Through is prefixed to Mountpoint to reach the mount from this
	// process's mount namespace (/proc/<anchor>/root).
	Through string
	// Detach unmounts a view the daemon left behind.
	Detach func(ctx context.Context, mountpoint string) error
	Log    *slog.Logger
}

// routeDaemon is a running lazaret-gitroute whose Ready was verified.
type routeDaemon struct {
	spec    routeSpec
	conn    *gitroute.Conn
	cmd     *exec.Cmd
	pidfd   int
	process hostid.PidfsProcessIdentityV1
	ready   gitroute.Ready
	reports chan gitroute.Report
	exited  chan struct{}
	waitErr error

	mu       sync.Mutex
	released bool

	// done is closed once the daemon exited and its mount is gone (or
	// could not be removed); result then says how it ended.
	done   chan struct{}
	result error
}

// startRouteDaemon starts cmd (the daemon, wrapped in nsenter) with the
// control socket as fd 3 and waits, until ctx ends, for a Ready that
// matches the mount and the roots. On failure the daemon is killed and
// reaped, and a mount it left is detached.
func startRouteDaemon(ctx context.Context, cmd *exec.Cmd, spec routeSpec) (*routeDaemon, error) {
	conn, child, err := gitroute.Pair()
	if err != nil {
		return nil, err
	}
	if cmd.ExtraFiles, err = (&gitroute.DaemonArgs{Control: child}).ExtraFiles(); err != nil {
		conn.Close()
		child.Close()
		return nil, err
	}
	// CLONE_PIDFD: the descriptor names the daemon from its creation on,
	// so no PID reuse can slip in before it is identified.
	pidfd := -1
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.PidFD = &pidfd
	err = cmd.Start()
	child.Close()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("starting %q: %w", cmd.Path, err)
	}
	d := &routeDaemon{spec: spec, conn: conn, cmd: cmd, pidfd: pidfd,
		reports: make(chan gitroute.Report, 4), exited: make(chan struct{}), done: make(chan struct{})}
	go func() {
		d.waitErr = cmd.Wait()
		close(d.exited)
	}()
	go d.receive()
	if err := d.awaitReady(ctx); err != nil {
		d.abort()
		return nil, err
	}
	go d.watch()
	return d, nil
}

func (d *routeDaemon) view() string { return d.spec.Through + d.spec.Mountpoint }

func (d *routeDaemon) awaitReady(ctx context.Context) error {
	if d.pidfd < 0 {
		return errors.New("starting the gitroute daemon: no pidfd from clone")
	}
	var err error
	if d.process, err = hostid.IdentityOf(d.pidfd); err != nil {
		return fmt.Errorf("identifying the gitroute daemon: %w", err)
	}
	select {
	case r, ok := <-d.reports:
		if !ok {
			<-d.exited
			return fmt.Errorf("waiting for the gitroute daemon's Ready: %w: %v", gitroute.ErrDaemonExited, d.waitErr)
		}
		switch m := r.(type) {
		case *gitroute.Ready:
			d.ready = *m
		case *gitroute.Failed:
			return &gitroute.FailedError{Report: *m}
		default:
			return fmt.Errorf("waiting for the gitroute daemon's Ready: got %T: %w", r, gitroute.ErrProtocol)
		}
	case <-ctx.Done():
		return fmt.Errorf("waiting for the gitroute daemon's Ready: %w", ctx.Err())
	}
	got, err := gitroute.MountAt(d.view())
	if err != nil {
		return fmt.Errorf("checking the view mount: %w", err)
	}
	if got != d.ready.Mount {
		return fmt.Errorf("%w: found %+v at %q, reported %+v", gitroute.ErrMountMismatch, got, d.view(), d.ready.Mount)
	}
	for _, r := range []struct {
		path string
		want gitroute.FileIdentity
	}{{d.spec.HostRoot, d.ready.HostRoot}, {d.spec.IsolatedRoot, d.ready.IsolatedRoot}} {
		var st unix.Stat_t
		if err := unix.Stat(r.path, &st); err != nil {
			return fmt.Errorf("checking %q: %w", r.path, &os.PathError{Op: "stat", Path: r.path, Err: err})
		}
		if st.Dev != r.want.Device || st.Ino != r.want.Inode {
			return fmt.Errorf("%w: %q is %d:%d, the daemon retained %d:%d", gitroute.ErrMountMismatch, r.path, st.Dev, st.Ino, r.want.Device, r.want.Inode)
		}
	}
	d.spec.Log.Info("gitroute view ready", "mountpoint", d.spec.Mountpoint, "mount_id", d.ready.Mount.MountID,
		"pid", d.process.HostPID, "ignore_files", d.ready.IgnoreFiles, "tracked_paths", d.ready.TrackedPaths)
	return nil
}

// receive forwards reports until the channel closes.
func (d *routeDaemon) receive() {
	defer close(d.reports)
	for {
		r, err := d.conn.RecvReport()
		if err != nil {
			if errors.Is(err, gitroute.ErrMalformed) {
				d.spec.Log.Warn("rejected gitroute control packet", "err", err.Error())
				continue
			}
			return
		}
		d.reports <- r
	}
}

// watch runs after Ready: it collects how the daemon ended and makes sure
// its mount is gone, then closes done.
func (d *routeDaemon) watch() {
	var failed error
	for r := range d.reports {
		switch m := r.(type) {
		case *gitroute.Failed:
			failed = &gitroute.FailedError{Report: *m}
		case *gitroute.Released:
		default:
			failed = fmt.Errorf("after Ready: got %T: %w", r, gitroute.ErrProtocol)
		}
	}
	<-d.exited
	d.mu.Lock()
	released := d.released
	d.mu.Unlock()
	result := failed
	if result == nil && !released {
		result = fmt.Errorf("%w: %v", gitroute.ErrDaemonExited, d.waitErr)
	}
	if result == nil && d.waitErr != nil {
		result = fmt.Errorf("%w after Release: %v", gitroute.ErrDaemonExited, d.waitErr)
	}
	if err := d.cleanup(); err != nil {
		result = errors.Join(result, err)
	}
	if result != nil {
		d.spec.Log.Error("gitroute daemon ended", "mountpoint", d.spec.Mountpoint, "err", result.Error())
	}
	d.conn.Close()
	unix.Close(d.pidfd)
	d.result = result
	close(d.done)
}

// mountPresent reports whether the recorded view is still mounted. With
// the anchor gone, /proc/<anchor>/root no longer resolves: its mount
// namespace, and the view in it, ended with it.
func (d *routeDaemon) mountPresent() (bool, error) {
	return gitroute.Mounted(d.view(), d.ready.Mount)
}

// cleanup waits briefly for fusermount3's auto_unmount to remove the
// view after the daemon's exit, then detaches it.
func (d *routeDaemon) cleanup() error {
	deadline := time.Now().Add(2 * time.Second)
	for {
		present, err := d.mountPresent()
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
	d.spec.Log.Warn("detaching the view mount the gitroute daemon left", "mountpoint", d.spec.Mountpoint)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.spec.Detach(ctx, d.spec.Mountpoint); err != nil {
		return err
	}
	if present, err := d.mountPresent(); err != nil || present {
		return fmt.Errorf("the view at %q is still mounted after detaching it (%v)", d.spec.Mountpoint, err)
	}
	return nil
}

// abort kills a daemon that failed to start and removes a mount it made.
func (d *routeDaemon) abort() {
	_ = d.cmd.Process.Kill()
	<-d.exited
	d.conn.Close()
	if d.pidfd >= 0 {
		unix.Close(d.pidfd)
	}
	if _, err := gitroute.MountAt(d.view()); err == nil || errors.Is(err, unix.ENOTCONN) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.spec.Detach(ctx, d.spec.Mountpoint); err != nil {
			d.spec.Log.Warn("detaching the view mount after a failed start", "mountpoint", d.spec.Mountpoint, "err", err.Error())
		}
	}
}

// release asks the daemon to unmount and exit and waits for both until
// ctx ends; then it kills the daemon, and cleanup detaches the mount.
func (d *routeDaemon) release(ctx context.Context) error {
	d.mu.Lock()
	d.released = true
	d.mu.Unlock()
	d.spec.Log.Info("releasing gitroute view", "mountpoint", d.spec.Mountpoint)
	if err := d.conn.SendCommand(&gitroute.Release{}); err != nil {
		d.kill()
		<-d.done
		return errors.Join(fmt.Errorf("sending Release: %w", err), d.result)
	}
	select {
	case <-d.done:
		return d.result
	case <-ctx.Done():
		d.kill()
		<-d.done
		return fmt.Errorf("releasing the gitroute view: %w", ctx.Err())
	}
}

// kill sends SIGKILL through the pidfd while the daemon is unreaped.
func (d *routeDaemon) kill() {
	select {
	case <-d.exited:
		return
	default:
	}
	if err := unix.PidfdSendSignal(d.pidfd, unix.SIGKILL, nil, 0); err != nil {
		d.spec.Log.Warn("killing the gitroute daemon", "err", err.Error())
	}
}

// chooseWorkspaceView is the view the profile asks for: the
// lazaret-gitroute view when isolate_gitignored is true (the default),
// else the plain bind.
func (g *generation) chooseWorkspaceView(env paths.Environment, stderr io.Writer) (workspaceView, error) {
	if !g.cfg.IsolateGitignored() {
		return &bindView{dir: g.cfg.Workspace()}, nil
	}
	return newRouteView(g, env, stderr)
}
