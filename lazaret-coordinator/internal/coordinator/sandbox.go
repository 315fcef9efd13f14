package coordinator

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/bundle"
	"lazaret.dev/pkg/config"
	"lazaret.dev/pkg/domainstore"
	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/layout"
	"lazaret.dev/pkg/supervise"
	"lazaret.dev/pkg/sys"
)

// Names inside the control directory (/run/lazaret in the sandbox).
const guestName = "lazaret-guest"

// sandboxHostname is the sandbox's host name.
const sandboxHostname = "lazaret"

// runscEnv is the complete environment of every runsc the HC starts: no
// variable of the HC's own environment (which holds the values behind
// env: references, and could hold GVISOR_* settings) reaches runsc.
var runscEnv = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}

// sandbox is the running container: its Runtime Supervisor and the
// attached `runsc run`.
type sandbox struct {
	runsc  Runsc
	id     string
	user   bundle.User
	handle *supervise.Handle
	// exited is closed once the supervisor was reaped; status and err are
	// then the result of Handle.Wait.
	exited chan struct{}
	status supervise.ExitStatus
	err    error
	output *os.File // read end of the container's stdout and stderr
}

// prepareGenerationDirs creates the generation's directory and the
// directories below it that the steps fill in.
func (g *generation) prepareGenerationDirs() error {
	if err := mkdirPrivate(g.dir); err != nil {
		return err
	}
	for _, d := range []string{g.runscRoot(), g.bundleDir(), g.controlDir(), g.etcDir(), g.sessionDir()} {
		if err := mkdirPrivate(d); err != nil {
			return err
		}
	}
	return nil
}

// startSandbox is the Sandbox step: bundle written, Runtime Supervisor
// started and armed, then the attached `runsc run` inside the State
// Anchor's namespaces, each recorded before it is acquired.
func (g *generation) startSandbox(ctx context.Context) error {
	const role = domainstore.RoleSandbox
	if err := g.intent(role); err != nil {
		return err
	}
	user, err := g.resolveUser()
	if err != nil {
		return err
	}
	if err := copyFile(g.help.Guest, filepath.Join(g.controlDir(), guestName), 0o755); err != nil {
		return fmt.Errorf("installing the guest binary: %w", err)
	}
	if err := g.writeEtc(); err != nil {
		return err
	}
	vols, err := g.volumes()
	if err != nil {
		return err
	}
	spec, err := bundle.Container(bundle.Input{
		Layout:     layout.Production(),
		RootfsPath: g.rootfsDir(),
		Hostname:   sandboxHostname,
		Image:      g.bundleImage(),
		User:       user,
		Workspace:  g.view.Source(),
		ControlDir: g.controlDir(),
		EtcDir:     g.etcDir(),
		Volumes:    vols,
		InitArgv:   []string{filepath.Join(layout.Control, guestName), "init"},
		// The sandbox namespace the network sidecar holds.
		NetworkPath: g.network.NamespacePath(),
	})
	if err != nil {
		return fmt.Errorf("planning the container: %w", err)
	}
	spec.Root.Readonly = false
	cfgJSON, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("encoding the container spec: %w", err)
	}
	if err := writeNew(filepath.Join(g.bundleDir(), "config.json"), cfgJSON, 0o600); err != nil {
		return fmt.Errorf("writing the container spec: %w", err)
	}
	digest := ids.Digest(sha256.Sum256(cfgJSON))
	rootID, err := mountIdentityOf(g.runscRoot())
	if err != nil {
		return err
	}
	sb := &sandbox{
		runsc:  Runsc{Path: g.help.Runsc, Root: g.runscRoot(), Platform: g.help.Platform, Network: "sandbox"},
		id:     g.containerID(),
		user:   user,
		exited: make(chan struct{}),
	}
	// The HC is the sandbox's direct edge: it exists and is committed
	// when this snapshot is created.
	if err := g.update(role, domainstore.StateIntent, func(o *domainstore.ParticipantOwnership) {
		s := o.Sandbox
		s.ContainerID = ptr(sb.id)
		s.RuntimeRoot = ptr(g.runscRoot())
		s.RuntimeRootIdentity = ptr(rootID)
		s.BundleDigest = ptr(digest)
		s.HostCoordinator = committed(g.self)
	}); err != nil {
		return err
	}

	argv, err := g.anchor.EnterArgs(sb.runsc.Run(g.bundleDir(), sb.id))
	if err != nil {
		return fmt.Errorf("entering the state anchor's namespaces: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("creating the sandbox output pipe: %w", err)
	}
	sb.output = outR
	g.log.Info("starting sandbox", "container", sb.id, "runsc_root", g.runscRoot(), "bundle", g.bundleDir(), "rootfs", g.rootfsDir(), "platform", g.help.Platform)
	h, err := supervise.Launch(ctx, supervise.LaunchSpec{
		SupervisorPath: g.help.Supervisor,
		SupervisorSlot: hostid.SlotSandboxRuntimeSupervisor,
		Slot:           hostid.SlotSandboxAttachedRunsc,
		Argv:           argv,
		Env:            runscEnv,
		Dir:            "/",
		Stdout:         outW,
		Stderr:         outW,
		Domain:         g.domain, Generation: g.id, Coordinator: g.coordinator,
		Logger: g.log,
	}, sandboxHooks{g})
	outW.Close()
	go g.logOutput(outR)
	if err != nil {
		return fmt.Errorf("launching runsc under the runtime supervisor: %w", err)
	}
	sb.handle = h
	g.sandbox = sb
	go func() {
		sb.status, sb.err = h.Wait()
		close(sb.exited)
	}()
	if err := g.waitRunning(ctx, sb); err != nil {
		return err
	}
	g.trace.sandboxStarted(g.sandboxID)
	return g.update(role, role.ActiveState(), func(*domainstore.ParticipantOwnership) {})
}

// sandboxHooks record the Runtime Supervisor and the attached runsc
// through the staged/committed barrier.
type sandboxHooks struct{ g *generation }

func (h sandboxHooks) StageSupervisor(_ context.Context, s hostid.StagedProcessOwnership) error {
	return h.g.update(domainstore.RoleSandbox, domainstore.StateIntent, func(o *domainstore.ParticipantOwnership) {
		o.Sandbox.RuntimeSupervisor = hostid.StagedOwnership(s.Identity)
	})
}

func (h sandboxHooks) CommitSupervisor(_ context.Context, s hostid.StagedProcessOwnership) error {
	err := h.g.update(domainstore.RoleSandbox, domainstore.StateIntent, func(o *domainstore.ParticipantOwnership) {
		o.Sandbox.RuntimeSupervisor = committed(s.Identity)
	})
	if err == nil {
		// The supervisor arms its child's parent-death signal before the
		// child runs anything: the edge is armed with the supervisor.
		h.g.trace.supervisorStarted()
	}
	return err
}

func (h sandboxHooks) StageChild(_ context.Context, s hostid.StagedProcessOwnership) error {
	return h.g.update(domainstore.RoleSandbox, domainstore.StateIntent, func(o *domainstore.ParticipantOwnership) {
		o.Sandbox.AttachedRunsc = hostid.StagedOwnership(s.Identity)
	})
}

func (h sandboxHooks) CommitChild(_ context.Context, s hostid.StagedProcessOwnership) error {
	return h.g.update(domainstore.RoleSandbox, domainstore.StateIntent, func(o *domainstore.ParticipantOwnership) {
		o.Sandbox.AttachedRunsc = committed(s.Identity)
	})
}

// waitRunning polls `runsc state` until the container runs, the runsc
// child ends, or the start times out.
func (g *generation) waitRunning(ctx context.Context, sb *sandbox) error {
	deadline := time.Now().Add(60 * time.Second)
	delay := 5 * time.Millisecond
	for {
		state, err := g.containerState(ctx, sb)
		if err == nil && state == "running" {
			return nil
		}
		select {
		case <-sb.exited:
			g.trace.runtimeLost(errors.Is(sb.err, supervise.ErrNoExitReport))
			return fmt.Errorf("runsc run of container %q ended during start (%v, %v); see the log", sb.id, sb.status, sb.err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("container %q did not reach running within 60s (last state %q, %v)", sb.id, state, err)
		}
		if delay < 50*time.Millisecond {
			delay *= 2
		}
	}
}

// containerState returns the status field of `runsc state`.
func (g *generation) containerState(ctx context.Context, sb *sandbox) (string, error) {
	argv := append(sb.runsc.Global(), "state", sb.id)
	out, err := g.runInAnchor(ctx, argv)
	if err != nil {
		return "", err
	}
	var st struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return "", fmt.Errorf("decoding runsc state: %w", err)
	}
	return st.Status, nil
}

// runInAnchor runs argv inside the State Anchor's namespaces with the
// runsc environment and returns its stdout; stderr goes to the log.
func (g *generation) runInAnchor(ctx context.Context, argv []string) ([]byte, error) {
	if g.anchor == nil {
		return nil, errors.New("the state anchor is gone")
	}
	cmd, err := g.anchor.CommandInNamespaces(ctx, argv)
	if err != nil {
		return nil, err
	}
	cmd.Env = runscEnv
	cmd.Dir = "/"
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if err != nil {
		return stdout.Bytes(), fmt.Errorf("running %q: %w: %s", argv[len(argv)-2:], err, oneLine(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// logOutput copies the container's stdout and stderr (the guest init and
// runsc's own messages) to the log, line by line.
func (g *generation) logOutput(r io.ReadCloser) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		g.log.Info("sandbox output", "line", sc.Text())
	}
}

// stopSandbox is StopSandbox: runsc kill and delete --force, the Runtime
// Supervisor stopped and reaped, then Clean with that proof.
func (g *generation) stopSandbox(ctx context.Context) error {
	const role = domainstore.RoleSandbox
	if err := g.releaseIntent(role, nil); err != nil {
		return err
	}
	sb := g.sandbox
	// How long the attached runsc gets to end after `runsc kill`; none
	// when the kill could not be sent (the State Anchor is gone, and its
	// namespaces with it), so that its supervisor is stopped at once.
	grace := 5 * time.Second
	if sb != nil && g.anchor != nil {
		if _, err := g.runInAnchor(ctx, sb.runsc.Kill(sb.id, 0, "KILL")); err != nil {
			g.log.Info("runsc kill", "container", sb.id, "result", err.Error())
			grace = 0
		}
	}
	if sb != nil && sb.handle != nil {
		select {
		case <-sb.exited:
		case <-time.After(grace):
			sb.handle.Stop(2 * time.Second)
			select {
			case <-sb.exited:
			case <-time.After(5 * time.Second):
				sb.handle.Kill()
				<-sb.exited
			}
		}
		g.log.Info("runtime supervisor reaped", "status", sb.status.String(), "err", fmt.Sprint(sb.err))
	}
	if sb != nil && g.anchor != nil {
		if _, err := g.runInAnchor(ctx, sb.runsc.Delete(sb.id)); err != nil {
			return fmt.Errorf("deleting container %q: %w", sb.id, err)
		}
	}
	if sb != nil && sb.handle != nil {
		// The supervisor was reaped, so its child is gone or going (the
		// causal edge kills it; the supervisor exits only after reaping it
		// unless it was killed itself). The child's pidfd proves the exit:
		// it becomes readable once the process has exited, also while the
		// process is still a zombie that init has not reaped yet.
		if !exitedWithin(sb.handle.ChildPidfd(), childExitGrace) {
			return fmt.Errorf("runsc of container %q is still alive %v after its supervisor exited", sb.id, childExitGrace)
		}
		sb.handle.Release()
	}
	if err := os.RemoveAll(g.runscRoot()); err != nil {
		return fmt.Errorf("removing the runsc state directory %q: %w", g.runscRoot(), err)
	}
	g.sandbox = nil
	return g.clean(role, "runtime supervisor reaped, runsc pidfd reports exit, runsc delete --force done")
}

// runtimeGone reports, without waiting, whether the sandbox runtime has
// ended: its supervisor reaped, or the attached runsc exited.
func (g *generation) runtimeGone() bool {
	sb := g.sandbox
	if sb == nil || sb.handle == nil {
		return false
	}
	select {
	case <-sb.exited:
		return true
	default:
	}
	return exitedWithin(sb.handle.ChildPidfd(), 0)
}

// alive reports whether the process behind pidfd still exists. A zombie
// exists: use it only for children the HC reaps itself.
func alive(pidfd int) bool {
	return unix.PidfdSendSignal(pidfd, 0, nil, 0) == nil
}

// childExitGrace bounds the wait for the attached runsc to exit after its
// supervisor ended: when the supervisor was killed, runsc receives its
// parent-death SIGKILL only then and needs a moment to exit.
const childExitGrace = 10 * time.Second

// exitedWithin reports whether the process behind pidfd has exited (its
// pidfd is readable), waiting at most d. Unlike alive, it is right for a
// process the HC does not reap, such as the supervisor's child.
func exitedWithin(pidfd int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left < 0 {
			left = 0
		}
		pfd := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		n, err := sys.Poll(pfd, int(left.Milliseconds()))
		if err != nil {
			return false
		}
		if n > 0 {
			return true
		}
		if left == 0 {
			return false
		}
	}
}

// resolveUser resolves the image's User against the image's own
// /etc/passwd and /etc/group in the prepared artifact.
func (g *generation) resolveUser() (bundle.User, error) {
	fd, err := unix.Open(g.artifact.Path, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return bundle.User{}, fmt.Errorf("opening the prepared artifact %q: %w", g.artifact.Path, err)
	}
	defer unix.Close(fd)
	u, err := bundle.ResolveUser(fd, g.imageCfg.User)
	if err != nil {
		return bundle.User{}, fmt.Errorf("resolving image user %q: %w", g.imageCfg.User, err)
	}
	return u, nil
}

func (g *generation) bundleImage() bundle.ImageConfig {
	return bundle.ImageConfig{
		Entrypoint: g.imageCfg.Entrypoint, Cmd: g.imageCfg.Cmd,
		Env: g.imageCfg.Env, WorkingDir: g.imageCfg.WorkingDir,
	}
}

// writeEtc writes the sandbox's resolv.conf, hosts and hostname.
func (g *generation) writeEtc() error {
	var resolv strings.Builder
	resolv.WriteString("# the resolvers the Lazaret network policy allows\n")
	for _, r := range g.network.Resolvers() {
		resolv.WriteString("nameserver " + r.String() + "\n")
	}
	files := map[string]string{
		"resolv.conf": resolv.String(),
		"hosts":       "127.0.0.1\tlocalhost " + sandboxHostname + "\n::1\tlocalhost\n",
		"hostname":    sandboxHostname + "\n",
	}
	for name, content := range files {
		if err := writeNew(filepath.Join(g.etcDir(), name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("writing the sandbox's /etc/%s: %w", name, err)
		}
	}
	return nil
}

// volumes lists the configured volumes. Each source is the canonical path
// the configuration resolved, re-checked here against the identity its
// ConfinedPathPlan recorded; a create=true source that does not exist yet
// is created (mode 0700, parent must exist).
func (g *generation) volumes() ([]bundle.Volume, error) {
	var out []bundle.Volume
	for i, v := range g.cfg.Volumes() {
		src := v.Record.CanonicalHostSource
		if v.Plan.Pending() {
			if err := os.Mkdir(src, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
				return nil, fmt.Errorf("creating volume %d source %q: %w", i, src, err)
			}
		} else {
			f, err := v.Plan.Reopen()
			if err != nil {
				return nil, fmt.Errorf("volume %d source %q: %w", i, src, err)
			}
			var a, b unix.Stat_t
			err = unix.Fstat(int(f.Fd()), &a)
			f.Close()
			if err == nil {
				err = unix.Stat(src, &b)
			}
			if err != nil || a.Dev != b.Dev || a.Ino != b.Ino {
				return nil, fmt.Errorf("volume %d source %q: %w", i, src, config.ErrIdentity)
			}
		}
		out = append(out, bundle.Volume{Source: src, Destination: v.Record.ContainerPath, ReadOnly: v.Record.Access == config.ReadOnly})
	}
	return out, nil
}

// mountIdentityOf opens dir and returns its mount identity.
func mountIdentityOf(dir string) (hostid.MountIdentity, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return hostid.MountIdentity{}, fmt.Errorf("opening %q: %w", dir, err)
	}
	defer unix.Close(fd)
	id, err := hostid.MountOf(fd)
	if err != nil {
		return hostid.MountIdentity{}, fmt.Errorf("identifying %q: %w", dir, err)
	}
	return id, nil
}

// copyFile copies the regular file src to the new file dst.
func copyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fd, err := unix.Open(dst, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm))
	if err != nil {
		return &os.PathError{Op: "create", Path: dst, Err: err}
	}
	out := os.NewFile(uintptr(fd), dst)
	defer out.Close()
	if err := out.Chmod(perm); err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		return fmt.Errorf("copying %q to %q: %w", src, dst, err)
	}
	return nil
}
