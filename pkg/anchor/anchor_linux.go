package anchor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/handoff"
	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/seqpacket"
	"lazaret.dev/pkg/spawn"
	"lazaret.dev/pkg/sys"
)

// Errors of the client; test with errors.Is.
var (
	// ErrExited means the anchor process ended before answering.
	ErrExited = errors.New("state anchor exited")
	// ErrIdentityMismatch means what the anchor reported differs from
	// what the Host Coordinator observes through /proc and its pidfd.
	ErrIdentityMismatch = errors.New("state anchor identity mismatch")
)

// Anchor is a running State Anchor. Its methods are safe for concurrent
// use.
type Anchor struct {
	proc    *spawn.Process
	conn    *os.File
	ready   Ready
	nsenter string
	log     *slog.Logger

	mu       sync.Mutex // serialises control-channel exchanges
	done     <-chan struct{}
	released bool
}

// Start launches the anchor of spec in a new user and mount namespace,
// writes its ID map, sends Setup, and returns once the anchor reports
// Ready and its identities agree with /proc. On any error the anchor is
// killed and reaped.
func Start(ctx context.Context, spec Spec) (*Anchor, error) {
	log := spec.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	euid, egid := uint32(os.Geteuid()), uint32(os.Getegid())
	setup, method, err := spec.plan(euid, egid)
	if err != nil {
		return nil, err
	}
	nsenter := spec.Nsenter
	if nsenter == "" {
		nsenter = NsenterPath
	}
	conn, child, err := seqpacket.Socketpair("anchor-control")
	if err != nil {
		return nil, fmt.Errorf("creating control socketpair: %w", err)
	}
	defer child.Close()

	args, files, err := handoff.Render(&Serve{AwaitIDMap: method == MapHelper, Control: child})
	if err != nil {
		conn.Close()
		return nil, err
	}
	cmd := &exec.Cmd{
		Path:       spec.AnchorPath,
		Args:       append([]string{spec.AnchorPath}, args...),
		Env:        append([]string{}, spec.Env...),
		Stderr:     spec.Stderr,
		ExtraFiles: files,
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
			Setsid:     true,
		},
	}
	if method == MapDirect {
		cmd.SysProcAttr.UidMappings = sysMap(spec.IDMap.UIDs)
		cmd.SysProcAttr.GidMappings = sysMap(spec.IDMap.GIDs)
		// An unprivileged caller may write gid_map only with setgroups
		// denied; root keeps setgroups, which runsc uses.
		cmd.SysProcAttr.GidMappingsEnableSetgroups = euid == 0
	}
	if cmd.Stderr == nil {
		cmd.Stderr = io.Discard
	}
	log.Info("starting state anchor", "binary", spec.AnchorPath, "lower", spec.Lower, "upper", spec.Upper,
		"work", spec.Work, "merged", spec.Merged, "id_map", spec.IDMap.String(), "id_map_method", method.String())
	proc, err := spawn.Start(cmd)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("starting state anchor %q: %w", spec.AnchorPath, err)
	}
	a := &Anchor{proc: proc, conn: conn, nsenter: nsenter, log: log, done: proc.Done()}
	fail := func(err error) (*Anchor, error) {
		a.Kill()
		<-a.done
		a.conn.Close()
		a.proc.Close()
		return nil, err
	}
	if method == MapHelper {
		if err := writeHelperMaps(ctx, spec, proc.Pid()); err != nil {
			return fail(err)
		}
		if err := a.send(&IDMapWritten{}); err != nil {
			return fail(err)
		}
	}
	if err := a.send(&setup); err != nil {
		return fail(err)
	}
	m, err := a.receive(ctx)
	if err != nil {
		return fail(fmt.Errorf("waiting for state anchor readiness: %w", err))
	}
	r, ok := m.(*Ready)
	if !ok {
		return fail(fmt.Errorf("waiting for state anchor readiness: got %v: %w", m.Kind(), ErrProtocol))
	}
	if err := a.verify(r); err != nil {
		return fail(err)
	}
	a.ready = *r
	log.Info("state anchor ready", "pid", r.Daemon.HostPID, "user_ns", r.UserNamespace.Inode,
		"mnt_ns", r.MountNamespace.Inode, "mount_id", r.Mount.MountID, "merged", spec.Merged)
	return a, nil
}

func sysMap(rs []idmapRange) []syscall.SysProcIDMap {
	out := make([]syscall.SysProcIDMap, len(rs))
	for i, r := range rs {
		out[i] = syscall.SysProcIDMap{ContainerID: int(r.Container), HostID: int(r.Host), Size: int(r.Size)}
	}
	return out
}

func writeHelperMaps(ctx context.Context, spec Spec, pid int) error {
	for _, h := range []struct {
		path, def string
		rs        []idmapRange
	}{{spec.NewUIDMap, NewUIDMapPath, spec.IDMap.UIDs}, {spec.NewGIDMap, NewGIDMapPath, spec.IDMap.GIDs}} {
		p := h.path
		if p == "" {
			p = h.def
		}
		out, err := exec.CommandContext(ctx, p, helperArgs(pid, h.rs)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("writing the ID map %s with %q: %w (output: %q)", spec.IDMap, p, err, clip(string(out), maxDetailLen))
		}
	}
	return nil
}

// verify checks a Ready report against what this process can observe: the
// pidfs identity behind its own pidfd (read when it was started), and the
// namespaces in /proc.
func (a *Anchor) verify(r *Ready) error {
	if own := a.proc.Identity(); own != r.Daemon {
		return fmt.Errorf("daemon reported %v, pidfd shows %v: %w", r.Daemon, own, ErrIdentityMismatch)
	}
	return a.checkNamespaces(r.UserNamespace, r.MountNamespace)
}

func (a *Anchor) checkNamespaces(user, mnt hostid.NamespaceIdentity) error {
	for _, ns := range []struct {
		kind string
		want hostid.NamespaceIdentity
	}{{"user", user}, {"mnt", mnt}} {
		got, err := hostid.NamespaceOfProcess(a.proc.Pid(), ns.kind)
		if err != nil {
			return fmt.Errorf("reading the state anchor's %s namespace: %w", ns.kind, err)
		}
		if got != ns.want {
			return fmt.Errorf("%s namespace reported %+v, /proc shows %+v: %w", ns.kind, ns.want, got, ErrIdentityMismatch)
		}
	}
	if err := a.proc.Signal(0); err != nil {
		return fmt.Errorf("confirming the state anchor after reading its namespaces: %w", ErrExited)
	}
	return nil
}

func (a *Anchor) send(m Message) error {
	b, err := Encode(m)
	if err != nil {
		return err
	}
	if err := seqpacket.Send(int(a.conn.Fd()), b); err != nil {
		return fmt.Errorf("sending %v to the state anchor: %w", m.Kind(), err)
	}
	return nil
}

// receive reads one message, giving up when ctx ends or the anchor exits.
// A Failure from the anchor is returned as the error.
func (a *Anchor) receive(ctx context.Context) (Message, error) {
	buf := make([]byte, MaxMessageSize)
	fd := int(a.conn.Fd())
	for {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(a.proc.Fd()), Events: unix.POLLIN}}
		timeout := 100
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n, err := sys.Poll(pfd, timeout)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			continue
		}
		if pfd[0].Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR) == 0 {
			// The anchor exited with nothing queued.
			return nil, a.exitError()
		}
		n, _, err = seqpacket.Recv(fd, buf, 0)
		switch {
		case err == io.EOF:
			return nil, a.exitError()
		case errors.Is(err, seqpacket.ErrTruncated), errors.Is(err, seqpacket.ErrControlTruncated):
			return nil, fmt.Errorf("%w: %w", ErrProtocol, err)
		case err != nil:
			return nil, err
		}
		m, err := Decode(buf[:n])
		if err != nil {
			return nil, err
		}
		if f, ok := m.(*Failure); ok {
			return nil, f
		}
		return m, nil
	}
}

func (a *Anchor) exitError() error {
	if err := a.proc.Wait(); err != nil {
		return fmt.Errorf("%w: %w", ErrExited, err)
	}
	return fmt.Errorf("%w with status 0 without answering", ErrExited)
}

// Ready returns the identities reported at start and verified against
// /proc.
func (a *Anchor) Ready() Ready { return a.ready }

// Pid is the anchor's host PID.
func (a *Anchor) Pid() int { return a.proc.Pid() }

// Release asks the anchor to unmount the overlay, checks its evidence
// against the identities of Ready, and waits for it to exit 0.
func (a *Anchor) Release(ctx context.Context) (ReleaseEvidence, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.released {
		return ReleaseEvidence{}, errors.New("state anchor already released")
	}
	if err := a.send(&Release{}); err != nil {
		return ReleaseEvidence{}, err
	}
	m, err := a.receive(ctx)
	if err != nil {
		return ReleaseEvidence{}, fmt.Errorf("releasing the state anchor: %w", err)
	}
	r, ok := m.(*Released)
	if !ok {
		return ReleaseEvidence{}, fmt.Errorf("releasing the state anchor: got %v: %w", m.Kind(), ErrProtocol)
	}
	ev := r.Evidence
	want := ReleaseEvidence{Daemon: a.ready.Daemon, UserNamespace: a.ready.UserNamespace, MountNamespace: a.ready.MountNamespace, Mount: a.ready.Mount}
	if ev != want {
		return ev, fmt.Errorf("release evidence %+v differs from the ready identities %+v: %w", ev, want, ErrIdentityMismatch)
	}
	select {
	case <-a.done:
	case <-ctx.Done():
		return ev, fmt.Errorf("waiting for the released state anchor to exit: %w", ctx.Err())
	}
	if err := a.proc.Wait(); err != nil {
		return ev, fmt.Errorf("state anchor exit after release: %w", err)
	}
	a.released = true
	a.conn.Close()
	a.log.Info("state anchor released", "pid", ev.Daemon.HostPID, "mount_id", ev.Mount.MountID)
	return ev, nil
}

// Kill sends SIGKILL through the pidfd. The overlay goes with the anchor's
// mount namespace once no process remains in it.
func (a *Anchor) Kill() error {
	if err := a.proc.Kill(); err != nil {
		return fmt.Errorf("killing the state anchor: %w", err)
	}
	return nil
}

// Wait blocks until the anchor exits and returns its exit error, then
// releases the client's descriptors.
func (a *Anchor) Wait() error {
	err := a.proc.Wait()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.proc.Fd() >= 0 {
		a.proc.Close()
		a.conn.Close()
	}
	return err
}

// Done is closed when the anchor has exited.
func (a *Anchor) Done() <-chan struct{} { return a.done }

// EnterArgs returns the argv that runs argv inside the anchor's user and
// mount namespaces: nsenter with the anchor's /proc namespace files and
// --preserve-credentials, then argv. It first confirms that the anchor is
// alive and that those files are still the namespaces of Ready. The anchor
// is a child of this process and is reaped only by Wait, so its PID keeps
// naming it while Wait has not returned.
func (a *Anchor) EnterArgs(argv []string) ([]string, error) {
	if len(argv) == 0 {
		return nil, errors.New("entering the state anchor's namespaces: empty argv")
	}
	select {
	case <-a.done:
		return nil, fmt.Errorf("entering the state anchor's namespaces: %w", ErrExited)
	default:
	}
	if err := a.checkNamespaces(a.ready.UserNamespace, a.ready.MountNamespace); err != nil {
		return nil, fmt.Errorf("entering the state anchor's namespaces: %w", err)
	}
	proc := "/proc/" + strconv.Itoa(a.proc.Pid()) + "/ns/"
	return append([]string{a.nsenter, "--preserve-credentials", "--user=" + proc + "user", "--mount=" + proc + "mnt", "--"}, argv...), nil
}

// OpenNamespaces opens the anchor's user and mount namespaces, in the
// order setns(2) must enter them (user first), for a child that enters
// them itself (spawn.GatedCmd.Namespaces) instead of through nsenter. It
// first confirms that the anchor is alive, then checks each opened
// descriptor against the namespace of Ready and confirms the anchor again
// after opening: the descriptors are the anchor's namespaces, whatever
// the PID names later. The caller closes them: a holder of these
// descriptors keeps the namespaces, and with the mount namespace the
// overlay, in existence after the anchor ends, so they are held only
// until the child has entered them.
func (a *Anchor) OpenNamespaces() (_ []*os.File, err error) {
	select {
	case <-a.done:
		return nil, fmt.Errorf("entering the state anchor's namespaces: %w", ErrExited)
	default:
	}
	var files []*os.File
	defer func() {
		if err != nil {
			for _, f := range files {
				f.Close()
			}
		}
	}()
	dir := "/proc/" + strconv.Itoa(a.proc.Pid()) + "/ns/"
	for _, ns := range []struct {
		kind string
		want hostid.NamespaceIdentity
	}{{"user", a.ready.UserNamespace}, {"mnt", a.ready.MountNamespace}} {
		// A namespace file is a magic link: it is opened through, and the
		// opened namespace is checked below.
		f, err := os.Open(dir + ns.kind)
		if err != nil {
			return nil, fmt.Errorf("opening the state anchor's %s namespace: %w", ns.kind, err)
		}
		files = append(files, f)
		got, err := hostid.NamespaceOf(int(f.Fd()))
		if err != nil {
			return nil, fmt.Errorf("identifying the state anchor's %s namespace: %w", ns.kind, err)
		}
		if got != ns.want {
			return nil, fmt.Errorf("%s namespace reported %+v, %q is %+v: %w", ns.kind, ns.want, dir+ns.kind, got, ErrIdentityMismatch)
		}
	}
	if err := a.proc.Signal(0); err != nil {
		return nil, fmt.Errorf("confirming the state anchor after opening its namespaces: %w", ErrExited)
	}
	return files, nil
}

// CommandInNamespaces returns an unstarted command that runs argv inside the
// anchor's user and mount namespaces (see EnterArgs). argv[0] must be an
// absolute path; no PATH lookup happens. The command sees the overlay at
// the merged path.
func (a *Anchor) CommandInNamespaces(ctx context.Context, argv []string) (*exec.Cmd, error) {
	if len(argv) == 0 || len(argv[0]) == 0 || argv[0][0] != '/' {
		return nil, fmt.Errorf("command in the state anchor's namespaces: argv[0] must be an absolute path, got %q", argv)
	}
	full, err := a.EnterArgs(argv)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, full[0], full[1:]...)
	cmd.Env = []string{}
	return cmd, nil
}

// Close drops the control channel without Release. The anchor then unmounts
// and exits on its own; Wait reports how it ended. No release evidence is
// produced.
func (a *Anchor) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.conn.Close()
}
