package coordinator

import (
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
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/bundle"
	"lazaret.dev/pkg/config"
	"lazaret.dev/pkg/domainstore"
	"lazaret.dev/pkg/fsroot"
	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/initready"
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
	// ready is closed when the container's init announced that it runs
	// (initready.Line on output).
	ready chan struct{}
}

// sandboxStep is the Sandbox participant (StartRuntimeSupervisor,
// ArmRuntimeCausalEdge, StartSandbox): the bundle written, the Runtime
// Supervisor started and armed, then the attached `runsc run` inside the
// State Anchor's namespaces, each recorded before it is acquired. The
// sessions run their commands in it.
type sandboxStep struct {
	s       *scope
	anchor  *stateAnchor
	image   *preparedLower
	view    workspaceView
	network networkView

	// sb is set by Start, before the publication that lets sessions use
	// it, and never cleared; releasing is set when Release begins.
	sb        *sandbox
	releasing atomic.Bool
}

func (p *sandboxStep) Step() Step { return StepSandbox }

// Lost is closed once the Runtime Supervisor was reaped.
func (p *sandboxStep) Lost() <-chan struct{} {
	if p.sb == nil {
		return nil
	}
	return p.sb.exited
}

// Start runs the Sandbox step.
func (p *sandboxStep) Start(ctx context.Context) error {
	s := p.s
	const role = domainstore.RoleSandbox
	if err := s.intent(role); err != nil {
		return err
	}
	user, err := p.resolveUser()
	if err != nil {
		return err
	}
	// The generation directory, held for the step: what the step creates
	// or inspects in it is opened beneath this descriptor.
	gen, err := openDir(s.dir)
	if err != nil {
		return fmt.Errorf("opening the generation directory: %w", err)
	}
	defer gen.Close()
	if err := copyFile(s.help.Guest, gen, filepath.Join("control", guestName), 0o755); err != nil {
		return fmt.Errorf("installing the guest binary: %w", err)
	}
	if err := p.writeEtc(gen); err != nil {
		return err
	}
	trust, err := p.installBrokerCA(gen)
	if err != nil {
		return err
	}
	vols, err := p.volumes()
	if err != nil {
		return err
	}
	spec, err := bundle.Container(bundle.Input{
		Layout:     layout.Production(),
		RootfsPath: s.rootfsDir(),
		Hostname:   sandboxHostname,
		Image:      p.image.config.bundle(),
		User:       user,
		Workspace:  p.view.Source(),
		ControlDir: s.controlDir(),
		EtcDir:     s.etcDir(),
		Volumes:    vols,
		InitArgv:   []string{filepath.Join(layout.Control, guestName), "init"},
		// The sandbox namespace the network sidecar holds.
		NetworkPath:       p.network.NamespacePath(),
		WorkspaceDentries: workspaceDentries(),
		TrustStores:       trust,
	})
	if err != nil {
		return fmt.Errorf("planning the container: %w", err)
	}
	spec.Root.Readonly = false
	cfgJSON, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("encoding the container spec: %w", err)
	}
	if err := writeNewAt(gen, "bundle/config.json", cfgJSON, 0o600); err != nil {
		return fmt.Errorf("writing the container spec: %w", err)
	}
	digest := ids.Digest(sha256.Sum256(cfgJSON))
	rootID, err := mountIdentityOf(gen, "runsc")
	if err != nil {
		return err
	}
	sb := &sandbox{
		runsc:  Runsc{Path: s.help.Runsc, Root: s.runscRoot(), Platform: s.help.Platform, Network: "sandbox"},
		id:     s.containerID(),
		user:   user,
		exited: make(chan struct{}),
		ready:  make(chan struct{}),
	}
	// The HC is the sandbox's direct edge: it exists and is committed
	// when this snapshot is created.
	if err := s.update(role, domainstore.StateIntent, func(o *domainstore.ParticipantOwnership) {
		r := o.Sandbox
		r.ContainerID = ptr(sb.id)
		r.RuntimeRoot = ptr(s.runscRoot())
		r.RuntimeRootIdentity = ptr(rootID)
		r.BundleDigest = ptr(digest)
		r.HostCoordinator = committed(s.self)
	}); err != nil {
		return err
	}

	argv, err := p.anchor.enterArgs(sb.runsc.Run(s.bundleDir(), sb.id))
	if err != nil {
		return fmt.Errorf("entering the state anchor's namespaces: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("creating the sandbox output pipe: %w", err)
	}
	sb.output = outR
	s.log.Info("starting sandbox", "container", sb.id, "runsc_root", s.runscRoot(), "bundle", s.bundleDir(), "rootfs", s.rootfsDir(), "platform", s.help.Platform)
	h, err := supervise.Launch(ctx, supervise.LaunchSpec{
		SupervisorPath: s.help.Supervisor,
		SupervisorSlot: hostid.SlotSandboxRuntimeSupervisor,
		Slot:           hostid.SlotSandboxAttachedRunsc,
		Argv:           argv,
		Env:            runscEnv,
		Dir:            "/",
		Stdout:         outW,
		Stderr:         outW,
		Domain:         s.domain, Generation: s.id, Coordinator: s.coordinator,
		Logger: s.log,
	}, sandboxHooks{s})
	outW.Close()
	go p.logOutput(outR, sb.ready)
	if err != nil {
		return fmt.Errorf("launching runsc under the runtime supervisor: %w", err)
	}
	sb.handle = h
	p.sb = sb
	go func() {
		sb.status, sb.err = h.Wait()
		close(sb.exited)
	}()
	if err := p.waitRunning(ctx, sb); err != nil {
		return err
	}
	s.trace.sandboxStarted(s.sandboxID)
	return s.update(role, role.ActiveState(), func(*domainstore.ParticipantOwnership) {})
}

// sandboxHooks record the Runtime Supervisor and the attached runsc
// through the staged/committed barrier.
type sandboxHooks struct{ s *scope }

func (h sandboxHooks) StageSupervisor(_ context.Context, s hostid.StagedProcessOwnership) error {
	return h.s.update(domainstore.RoleSandbox, domainstore.StateIntent, func(o *domainstore.ParticipantOwnership) {
		o.Sandbox.RuntimeSupervisor = hostid.StagedOwnership(s.Identity)
	})
}

func (h sandboxHooks) CommitSupervisor(_ context.Context, s hostid.StagedProcessOwnership) error {
	err := h.s.update(domainstore.RoleSandbox, domainstore.StateIntent, func(o *domainstore.ParticipantOwnership) {
		o.Sandbox.RuntimeSupervisor = committed(s.Identity)
	})
	if err == nil {
		// The supervisor arms its child's parent-death signal before the
		// child runs anything: the edge is armed with the supervisor.
		h.s.trace.supervisorStarted()
	}
	return err
}

func (h sandboxHooks) StageChild(_ context.Context, s hostid.StagedProcessOwnership) error {
	return h.s.update(domainstore.RoleSandbox, domainstore.StateIntent, func(o *domainstore.ParticipantOwnership) {
		o.Sandbox.AttachedRunsc = hostid.StagedOwnership(s.Identity)
	})
}

func (h sandboxHooks) CommitChild(_ context.Context, s hostid.StagedProcessOwnership) error {
	return h.s.update(domainstore.RoleSandbox, domainstore.StateIntent, func(o *domainstore.ParticipantOwnership) {
		o.Sandbox.AttachedRunsc = committed(s.Identity)
	})
}

// startBound bounds the wait for the container's init to announce that
// it runs.
const startBound = 60 * time.Second

// waitRunning waits for the sandbox's ready event: the container's init
// (lazaret-guest init, the first and only process in the container)
// writes initready.Line first thing on its standard output, the pipe
// logOutput reads, which nothing in the container can write before it
// (pkg/initready). The line means what `runsc state` reporting "running"
// meant, and more: the container was started and its init executes. If
// the line never comes, the start fails when the attached runsc ends (its
// supervisor reaped), when ctx ends, or after startBound, each with an
// error naming the container.
func (p *sandboxStep) waitRunning(ctx context.Context, sb *sandbox) error {
	s := p.s
	bound := time.NewTimer(startBound)
	defer bound.Stop()
	select {
	case <-sb.ready:
		return nil
	case <-sb.exited:
		s.trace.runtimeLost(errors.Is(sb.err, supervise.ErrNoExitReport))
		return fmt.Errorf("runsc run of container %q ended during start (%v, %v); see the log", sb.id, sb.status, sb.err)
	case <-ctx.Done():
		return fmt.Errorf("starting container %q: %w", sb.id, ctx.Err())
	case <-bound.C:
		return fmt.Errorf("the init of container %q did not announce that it runs within %v; see the log", sb.id, startBound)
	}
}

// logOutput copies the container's stdout and stderr (the guest init and
// runsc's own messages) to the log, line by line, and closes ready when
// the init announces that it runs.
func (p *sandboxStep) logOutput(r io.ReadCloser, ready chan struct{}) {
	defer r.Close()
	err := initready.Watch(r, func(line string) {
		p.s.log.Info("sandbox output", "line", line)
	}, func() { close(ready) })
	if err != nil {
		p.s.log.Warn("reading the sandbox output", "err", err.Error())
	}
}

// Release is StopSandbox: runsc kill and delete --force, the Runtime
// Supervisor stopped and reaped, then Clean with that proof.
func (p *sandboxStep) Release(ctx context.Context) error {
	s := p.s
	p.releasing.Store(true)
	const role = domainstore.RoleSandbox
	if err := s.releaseIntent(role, nil); err != nil {
		return err
	}
	sb := p.sb
	// How long the attached runsc gets to end after `runsc kill`; none
	// when the kill could not be sent (the State Anchor is gone, and its
	// namespaces with it), so that its supervisor is stopped at once.
	grace := 5 * time.Second
	if sb != nil {
		if _, err := p.anchor.run(ctx, sb.runsc.Kill(sb.id, 0, "KILL")); err != nil {
			s.log.Info("runsc kill", "container", sb.id, "result", err.Error())
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
		s.log.Info("runtime supervisor reaped", "status", sb.status.String(), "err", fmt.Sprint(sb.err))
	}
	if sb != nil && p.anchor.live() {
		if _, err := p.anchor.run(ctx, sb.runsc.Delete(sb.id)); err != nil {
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
	if err := os.RemoveAll(s.runscRoot()); err != nil {
		return fmt.Errorf("removing the runsc state directory %q: %w", s.runscRoot(), err)
	}
	return s.clean(role, "runtime supervisor reaped, runsc pidfd reports exit, runsc delete --force done")
}

// running reports whether the sandbox was started and its release has
// not begun: commands may be run in it (they fail on their own when its
// runtime has ended).
func (p *sandboxStep) running() bool { return p.sb != nil && !p.releasing.Load() }

// execArgs is the argv of a `runsc exec` of the process spec at
// processFile into the sandbox, to run inside the State Anchor's
// namespaces (the exec client enters them itself, launch.go); runsc
// writes the guest's PID to pidFile.
func (p *sandboxStep) execArgs(processFile, pidFile string) []string {
	return p.sb.runsc.Exec(p.sb.id, processFile, pidFile)
}

// killProcess sends SIGKILL to the guest process pid (`runsc kill --pid`).
func (p *sandboxStep) killProcess(ctx context.Context, pid int) error {
	_, err := p.anchor.run(ctx, p.sb.runsc.Kill(p.sb.id, pid, "KILL"))
	return err
}

// runtimeGone reports, without waiting, whether the sandbox runtime has
// ended: its supervisor reaped, or the attached runsc exited.
func (p *sandboxStep) runtimeGone() bool { return p.runtimeGoneWithin(0) }

// runtimeGoneWithin is runtimeGone, waiting at most d for the attached
// runsc to finish exiting.
func (p *sandboxStep) runtimeGoneWithin(d time.Duration) bool {
	sb := p.sb
	if sb == nil || sb.handle == nil {
		return false
	}
	select {
	case <-sb.exited:
		return true
	default:
	}
	return exitedWithin(sb.handle.ChildPidfd(), d)
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
// /etc/passwd and /etc/group in the prepared artifact, opened once and
// checked to be the directory the Storage Catalog recorded.
func (p *sandboxStep) resolveUser() (bundle.User, error) {
	art, cfg := p.image.artifact, p.image.config
	fd, err := unix.Open(art.Path, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return bundle.User{}, fmt.Errorf("opening the prepared artifact %q: %w", art.Path, err)
	}
	defer unix.Close(fd)
	if err := hostid.CheckInode(fd, art.Path, art.Device, art.Inode); err != nil {
		return bundle.User{}, fmt.Errorf("prepared artifact: %w", err)
	}
	u, err := bundle.ResolveUser(fd, cfg.User)
	if err != nil {
		return bundle.User{}, fmt.Errorf("resolving image user %q: %w", cfg.User, err)
	}
	return u, nil
}

func (c imageConfig) bundle() bundle.ImageConfig {
	return bundle.ImageConfig{Entrypoint: c.Entrypoint, Cmd: c.Cmd, Env: c.Env, WorkingDir: c.WorkingDir}
}

// installBrokerCA makes the sandbox trust the credential broker's CA,
// when the profile brokers a credential: the certificate alone in the
// control directory (NODE_EXTRA_CA_CERTS names it), and the image's CA
// bundle with the certificate appended beneath the etc directory, to be
// mounted over every trust store the image has. It returns those
// sandbox paths.
func (p *sandboxStep) installBrokerCA(gen *os.File) ([]string, error) {
	ca := p.s.broker.caPEM()
	if ca == nil {
		return nil, nil
	}
	art := p.image.artifact
	fd, err := unix.Open(art.Path, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening the prepared artifact %q: %w", art.Path, err)
	}
	defer unix.Close(fd)
	if err := hostid.CheckInode(fd, art.Path, art.Device, art.Inode); err != nil {
		return nil, fmt.Errorf("prepared artifact: %w", err)
	}
	paths, image, err := bundle.ImageTrustStores(fd)
	if err != nil {
		return nil, err
	}
	combined := bytes.Clone(image)
	if len(combined) > 0 && combined[len(combined)-1] != '\n' {
		combined = append(combined, '\n')
	}
	combined = append(combined, ca...)
	if err := writeNewAt(gen, filepath.Join("control", brokerCAName), ca, 0o644); err != nil {
		return nil, fmt.Errorf("installing the credential broker's CA: %w", err)
	}
	if err := writeNewAt(gen, filepath.Join("etc", bundle.TrustBundleName), combined, 0o644); err != nil {
		return nil, fmt.Errorf("writing the sandbox's CA bundle: %w", err)
	}
	p.s.log.Info("credential broker CA installed in the sandbox", "trust_stores", paths, "image_bundle_bytes", len(image))
	return paths, nil
}

// writeEtc writes the sandbox's resolv.conf, hosts and hostname beneath
// the generation directory gen.
func (p *sandboxStep) writeEtc(gen *os.File) error {
	var resolv strings.Builder
	resolv.WriteString("# the resolvers the Lazaret network policy allows\n")
	for _, r := range p.network.Resolvers() {
		resolv.WriteString("nameserver " + r.String() + "\n")
	}
	files := map[string]string{
		"resolv.conf": resolv.String(),
		"hosts":       "127.0.0.1\tlocalhost " + sandboxHostname + "\n::1\tlocalhost\n",
		"hostname":    sandboxHostname + "\n",
	}
	for name, content := range files {
		if err := writeNewAt(gen, filepath.Join("etc", name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("writing the sandbox's /etc/%s: %w", name, err)
		}
	}
	return nil
}

// volumes lists the configured volumes. Each source is the canonical path
// the configuration resolved, re-checked here against the identity its
// ConfinedPathPlan recorded; a create=true source that does not exist yet
// is created (mode 0700, parent must exist).
func (p *sandboxStep) volumes() ([]bundle.Volume, error) {
	s := p.s
	var out []bundle.Volume
	for i, v := range s.cfg.Volumes() {
		src := v.Record.CanonicalHostSource
		if v.Plan.Pending() {
			if err := os.Mkdir(src, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
				return nil, fmt.Errorf("creating volume %d source %q: %w", i, src, err)
			}
		} else {
			if err := sameSource(v.Plan, src); err != nil {
				return nil, fmt.Errorf("volume %d source %q: %w", i, src, err)
			}
		}
		out = append(out, bundle.Volume{Source: src, Destination: v.Record.ContainerPath, ReadOnly: v.Record.Access == config.ReadOnly})
	}
	return out, nil
}

// sameSource checks that the canonical path src, which runsc will bind,
// still names the object the plan's retained ancestor reaches: the same
// mount, device and inode, and no link on the way. The plan's descriptor
// is the reference; the path is walked once, through no link, to compare.
func sameSource(plan *config.ConfinedPathPlan, src string) error {
	f, err := plan.Reopen()
	if err != nil {
		return err
	}
	defer f.Close()
	want, err := hostid.MountOf(int(f.Fd()))
	if err != nil {
		return fmt.Errorf("%w: %w", config.ErrIdentity, err)
	}
	fd, err := fsroot.OpenPath(unix.AT_FDCWD, src)
	if err != nil {
		return fmt.Errorf("%w: %w", config.ErrIdentity, err)
	}
	defer unix.Close(fd)
	if err := hostid.CheckMount(fd, src, want); err != nil {
		return fmt.Errorf("%w: %w", config.ErrIdentity, err)
	}
	return nil
}

// mountIdentityOf opens the directory rel beneath the retained directory
// dir and returns its mount identity.
func mountIdentityOf(dir *os.File, rel string) (hostid.MountIdentity, error) {
	path := filepath.Join(dir.Name(), rel)
	fd, err := fsroot.OpenDir(int(dir.Fd()), rel)
	if err != nil {
		return hostid.MountIdentity{}, fmt.Errorf("opening %q: %w", path, errors.Unwrap(err))
	}
	defer unix.Close(fd)
	id, err := hostid.MountOf(fd)
	if err != nil {
		return hostid.MountIdentity{}, fmt.Errorf("identifying %q: %w", path, err)
	}
	return id, nil
}

// copyFile copies the regular file src to the new file rel beneath the
// retained directory dir.
func copyFile(src string, dir *os.File, rel string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	dst := filepath.Join(dir.Name(), rel)
	fd, err := fsroot.OpenBeneath(int(dir.Fd()), rel, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, uint32(perm))
	if err != nil {
		return &os.PathError{Op: "create", Path: dst, Err: errors.Unwrap(err)}
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

// recoverSandbox kills the recorded attached runsc first (the sandbox and
// gofer run --attached and die with it), then its Runtime Supervisor.
func recoverSandbox(s *scope, o *domainstore.ParticipantOwnership) (string, error) {
	a, err := killRecorded(s.log, "attached runsc", o.Sandbox.AttachedRunsc)
	if err != nil {
		return "", err
	}
	sup, err := killRecorded(s.log, "runtime supervisor", o.Sandbox.RuntimeSupervisor)
	if err != nil {
		return "", err
	}
	return "attached runsc " + a + "; runtime supervisor " + sup, nil
}

// Bounds of the workspace mount's dentry cache (bundle.Input.WorkspaceDentries).
const (
	// dentryFDReserve descriptors of the sandbox's limit stay for
	// everything but the workspace's cached dentries: the root file
	// system's own cache (1000), open files, sockets, the control
	// directory.
	dentryFDReserve = 4096
	minDentries     = 1000 // gVisor's default
	maxDentries     = 65536
)

// workspaceDentries sizes gVisor's dentry cache for /workspace from the
// hard limit on open descriptors, which runsc inherits from this process
// (docs/RUNSC.md, "The workspace mount"): each cached dentry holds one
// host descriptor in the sandbox, and a file once read or written one
// more handle for each (and the view's daemon an open file for each of
// those), so the cache gets a third of what the reserve leaves.
func workspaceDentries() int {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return minDentries
	}
	return dentriesFor(lim.Max)
}

// dentriesFor is workspaceDentries for a hard limit.
func dentriesFor(hard uint64) int {
	if hard <= 3*minDentries+dentryFDReserve {
		return minDentries
	}
	return int(min((hard-dentryFDReserve)/3, maxDentries))
}
