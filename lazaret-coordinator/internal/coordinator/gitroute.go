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

	daemon *gitroute.Daemon
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
	return v.daemon.Done()
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
	d, err := gitroute.Start(ctx, gitroute.Spec{
		Binary: v.binary, HostRoot: host, IsolatedRoot: iso, Mountpoint: mp,
		KeepIsolated: g.keepFile(), IsolationReport: g.isolationReport(),
		// Run inside the anchor's namespaces, in its own session. Not
		// bound to ctx: the daemon lives until Release, not until the
		// start (or the serve context a SIGTERM cancels) ends; Start
		// passes a context that never ends.
		Command: func(ctx context.Context, argv []string) (*exec.Cmd, error) {
			cmd, err := g.anchor.CommandInNamespaces(ctx, argv)
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
		Through: "/proc/" + strconv.Itoa(g.anchor.Pid()) + "/root",
		Detach:  v.detach,
		Logger:  g.log,
	})
	if err != nil {
		return fmt.Errorf("starting the workspace view: %w", err)
	}
	v.daemon = d
	if err := g.update(role, domainstore.StateIntent, func(o *domainstore.ParticipantOwnership) {
		o.GitRouting.Daemon = hostid.StagedOwnership(d.Process())
		o.GitRouting.Mount = ptr(d.Mount())
	}); err != nil {
		return err
	}
	if err := g.update(role, role.ActiveState(), func(o *domainstore.ParticipantOwnership) {
		o.GitRouting.Daemon = committed(d.Process())
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
		case <-d.Done():
			if present, err := d.Mounted(); err != nil || present {
				return fmt.Errorf("the workspace view at %q is still mounted after its daemon ended (%v): %w", g.workspaceMountpoint(), err, d.Err())
			}
			method = "gitroute daemon exited and was reaped; its mount is absent"
		default:
			if err := d.Release(ctx); err != nil {
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

// chooseWorkspaceView is the view the profile asks for: the
// lazaret-gitroute view when isolate_gitignored is true (the default),
// else the plain bind.
func (g *generation) chooseWorkspaceView(env paths.Environment, stderr io.Writer) (workspaceView, error) {
	if !g.cfg.IsolateGitignored() {
		return &bindView{dir: g.cfg.Workspace()}, nil
	}
	return newRouteView(g, env, stderr)
}
