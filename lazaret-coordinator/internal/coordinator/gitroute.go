package coordinator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/domainstore"
	"lazaret.dev/pkg/gitroute"
	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/isolation"
	"lazaret.dev/pkg/locate"
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
	s      *scope
	anchor *stateAnchor
	binary string    // lazaret-gitroute
	env    []string  // PATH, HOME, XDG_CONFIG_HOME of the coordinator
	stderr io.Writer // the daemon's log

	daemon *gitroute.Daemon
	// keptOnly are the host entries the daemon isolated only because an
	// earlier generation did (sticky.go).
	keptOnly []isolation.Entry
}

// newRouteView locates lazaret-gitroute for the generation.
func newRouteView(s *scope, a *stateAnchor, env participantEnv) (*routeView, error) {
	f, err := locate.New()
	if err != nil {
		return nil, fmt.Errorf("locating helper binaries: %w", err)
	}
	bin, err := f.Find("lazaret-gitroute")
	if err != nil {
		return nil, fmt.Errorf("locating lazaret-gitroute (isolate_gitignored is true): %w", err)
	}
	v := &routeView{s: s, anchor: a, binary: bin, stderr: env.helperLog, env: []string{}}
	// The daemon needs fusermount3 and git (PATH) and the user's global
	// excludes file (HOME, XDG_CONFIG_HOME); nothing else is passed.
	for _, k := range []string{"PATH", "HOME", "XDG_CONFIG_HOME"} {
		if val, ok := env.environ(k); ok {
			v.env = append(v.env, k+"="+val)
		}
	}
	return v, nil
}

// workspaceMountpoint is where the view is mounted, in the anchor's
// mount namespace.
func (s *scope) workspaceMountpoint() string { return s.path("workspace") }

// isolatedRoot is the Domain's root for git-ignored paths, kept across
// generations beside the overlay's upper and work directories.
func (s *scope) isolatedRoot() string {
	return filepath.Join(s.storageRoot, "state", s.domain.String(), "isolated")
}

func (v *routeView) Step() Step        { return StepGitRouting }
func (v *routeView) Source() string    { return v.s.workspaceMountpoint() }
func (v *routeView) Participant() bool { return true }

// Lost is closed when the daemon has ended; before Start it is nil.
func (v *routeView) Lost() <-chan struct{} {
	if v.daemon == nil {
		return nil
	}
	return v.daemon.Done()
}

// Start is the GitRouting step: Intent, the planned paths, then the
// daemon, staged once its Ready and mount are verified and committed with
// the role's Prepared state. Like the State Anchor, the daemon has no gate
// before its execve; until it is staged its only channel is this
// process's, and it unmounts and exits when that closes.
func (v *routeView) Start(ctx context.Context) error {
	s := v.s
	const role = domainstore.RoleGitRouting
	if err := s.intent(role); err != nil {
		return err
	}
	iso, mp, host := s.isolatedRoot(), s.workspaceMountpoint(), s.cfg.Workspace()
	if err := ensurePrivateDir(iso); err != nil {
		return fmt.Errorf("isolated root: %w", err)
	}
	if err := mkdirPrivate(mp); err != nil {
		return err
	}
	if err := s.update(role, domainstore.StateIntent, func(o *domainstore.ParticipantOwnership) {
		r := o.GitRouting
		r.Mountpoint = ptr(mp)
		r.HostRoot = ptr(host)
		r.IsolatedRoot = ptr(iso)
	}); err != nil {
		return err
	}
	keep, err := v.writeKeep()
	if err != nil {
		return err
	}
	d, err := gitroute.Start(ctx, gitroute.Spec{
		Binary: v.binary, HostRoot: host, IsolatedRoot: iso, Mountpoint: mp,
		KeepIsolated: v.keepFile(), IsolationReport: v.isolationReport(),
		// Run inside the anchor's namespaces, in its own session. Not
		// bound to ctx: the daemon lives until Release, not until the
		// start (or the serve context a SIGTERM cancels) ends; Start
		// passes a context that never ends.
		Command: func(ctx context.Context, argv []string) (*exec.Cmd, error) {
			cmd, err := v.anchor.command(ctx, argv)
			if err != nil {
				return nil, err
			}
			cmd.Dir = "/"
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			return cmd, nil
		},
		Env:    v.env,
		Stderr: v.stderr,
		// The HC sees the anchor's mount namespace through the anchor's
		// root; the anchor is its unreaped child, so the PID names it.
		Through: "/proc/" + strconv.Itoa(v.anchor.pid()) + "/root",
		Detach:  v.detach,
		Logger:  s.log,
	})
	if err != nil {
		return fmt.Errorf("starting the workspace view: %w", err)
	}
	v.daemon = d
	if err := s.update(role, domainstore.StateIntent, func(o *domainstore.ParticipantOwnership) {
		o.GitRouting.Daemon = hostid.StagedOwnership(d.Process())
		o.GitRouting.Mount = ptr(d.Mount())
	}); err != nil {
		return err
	}
	if err := s.update(role, role.ActiveState(), func(o *domainstore.ParticipantOwnership) {
		o.GitRouting.Daemon = committed(d.Process())
	}); err != nil {
		return err
	}
	// Recorded before the sandbox starts: a path this generation
	// isolates stays isolated in the next whatever the sandbox does to
	// the ignore files or the index.
	kept, err := v.mergeIsolationReport(keep)
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
	if !v.anchor.live() {
		return nil // the namespace, and the mount in it, ended with the anchor
	}
	bin, err := exec.LookPath("fusermount3")
	if err != nil {
		return fmt.Errorf("detaching the view at %q: fusermount3 not found (install fuse3): %w", mountpoint, err)
	}
	if bin, err = filepath.Abs(bin); err != nil {
		return err
	}
	cmd, err := v.anchor.command(ctx, []string{bin, "-u", "-z", "--", mountpoint})
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
	s := v.s
	const role = domainstore.RoleGitRouting
	if err := s.releaseIntent(role, nil); err != nil {
		return err
	}
	method := "gitroute daemon never started"
	if d := v.daemon; d != nil {
		select {
		case <-d.Done():
			if present, err := d.Mounted(); err != nil || present {
				return fmt.Errorf("the workspace view at %q is still mounted after its daemon ended (%v): %w", s.workspaceMountpoint(), err, d.Err())
			}
			method = "gitroute daemon exited and was reaped; its mount is absent"
		default:
			if err := d.Release(ctx); err != nil {
				return fmt.Errorf("releasing the workspace view: %w", err)
			}
			method = "gitroute daemon reported Released and exited 0; its mount is absent"
		}
	}
	return s.clean(role, method)
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

// chooseWorkspaceView is the view the profile asks for: the
// lazaret-gitroute view when isolate_gitignored is true (the default),
// else the plain bind.
func chooseWorkspaceView(s *scope, a *stateAnchor, env participantEnv) (workspaceView, error) {
	if !s.cfg.IsolateGitignored() {
		return &bindView{dir: s.cfg.Workspace()}, nil
	}
	return newRouteView(s, a, env)
}

// recoverGitRouting kills the recorded daemon and detaches its view
// where this mount namespace still shows the recorded mount.
func recoverGitRouting(s *scope, o *domainstore.ParticipantOwnership) (string, error) {
	r := o.GitRouting
	d, err := killRecorded(s.log, "git routing daemon", r.Daemon)
	if err != nil {
		return "", err
	}
	if r.Mount != nil && r.Mountpoint != nil {
		if err := unmountRecorded(*r.Mountpoint, *r.Mount); err != nil {
			return "", err
		}
	}
	return "git routing daemon " + d + "; its view is not mounted in this namespace", nil
}

// unmountRecorded detaches the mount at mountpoint when it is still the
// recorded one in this mount namespace.
func unmountRecorded(mountpoint string, want hostid.MountIdentity) error {
	fd, err := unix.Open(mountpoint, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTCONN) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("opening the recorded mountpoint %q: %w", mountpoint, err)
	}
	got, err := hostid.MountOf(fd)
	unix.Close(fd)
	if err != nil || got != want {
		return nil // not the recorded mount (or none): nothing of ours is there
	}
	if os.Geteuid() == 0 {
		if err := unix.Unmount(mountpoint, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmounting the recorded view %q: %w", mountpoint, err)
		}
		return nil
	}
	if out, err := exec.Command("fusermount3", "-u", "-z", "--", mountpoint).CombinedOutput(); err != nil {
		return fmt.Errorf("fusermount3 -u -z %q: %v: %s", mountpoint, err, out)
	}
	return nil
}
