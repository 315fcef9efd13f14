package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/anchor"
	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/seqpacket"
)

// Options configure Run.
type Options struct {
	// Control is the inherited control socket (anchor.Serve.Control);
	// Run owns it.
	Control *os.File
	// AwaitIDMap makes the anchor wait for IDMapWritten and re-execute
	// itself, because newuidmap writes the map only after exec, when the
	// process has already lost its capabilities in the namespace.
	AwaitIDMap bool
	// Reexec is the argv for that re-execution (without the await flag).
	Reexec []string
	Logger *slog.Logger
}

// errChannelClosed means the Host Coordinator closed the control channel.
var errChannelClosed = errors.New("control channel closed")

// Run serves one anchor lifetime and returns nil after a clean release.
func Run(ctx context.Context, o Options) error {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c, err := newChannel(o.Control)
	if err != nil {
		return err
	}
	if o.AwaitIDMap {
		return c.awaitIDMap(o.Reexec)
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return c.report(fail(stepNamespace, "", os.NewSyscallError("prctl PR_SET_DUMPABLE", err)))
	}
	if _, err := unix.FcntlInt(uintptr(c.fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
		return c.report(fail(stepChannel, "", os.NewSyscallError("fcntl", err)))
	}
	if err := checkUserNamespace(); err != nil {
		return c.report(err)
	}
	if err := makePrivate(); err != nil {
		return c.report(err)
	}
	msgs := c.reader()
	var setup *anchor.Setup
	select {
	case <-ctx.Done():
		return nil
	case r, ok := <-msgs:
		if !ok {
			return nil
		}
		if r.err != nil {
			return c.report(r.err)
		}
		s, isSetup := r.msg.(*anchor.Setup)
		if !isSetup {
			return c.report(fail(stepChannel, "", fmt.Errorf("got %v before Setup: %w", r.msg.Kind(), anchor.ErrProtocol)))
		}
		setup = s
	}
	ov, err := mountOverlay(setup, log)
	if err != nil {
		return c.report(err)
	}
	ready, err := identities(ov.id)
	if err != nil {
		ov.detach()
		return c.report(err)
	}
	if err := c.send(&ready); err != nil {
		ov.detach()
		return err
	}
	for {
		select {
		case <-ctx.Done():
			log.Info("terminating: unmounting the overlay", "merged", ov.merged)
			return ov.unmount()
		case r, ok := <-msgs:
			if !ok || errors.Is(r.err, errChannelClosed) {
				log.Info("control channel closed: unmounting the overlay", "merged", ov.merged)
				return ov.unmount()
			}
			if r.err != nil {
				uerr := ov.unmount()
				return errors.Join(c.report(r.err), uerr)
			}
			if _, isRelease := r.msg.(*anchor.Release); !isRelease {
				uerr := ov.unmount()
				return errors.Join(c.report(fail(stepChannel, "", fmt.Errorf("got %v while holding the overlay: %w", r.msg.Kind(), anchor.ErrProtocol))), uerr)
			}
			if err := ov.unmount(); err != nil {
				return c.report(err)
			}
			return c.send(&anchor.Released{Evidence: anchor.ReleaseEvidence(ready)})
		}
	}
}

// checkUserNamespace refuses to run outside a fresh user namespace: the
// overlay must never be mounted in the host's namespaces, and an unwritten
// map means the Host Coordinator skipped a step.
func checkUserNamespace() error {
	const p = "/proc/self/uid_map"
	b, err := os.ReadFile(p)
	if err != nil {
		return fail(stepNamespace, p, err)
	}
	lines := 0
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[0] == "0" && f[1] == "0" && f[2] == "4294967295" {
			return fail(stepNamespace, p, errors.New("running in the initial user namespace: lazaret-anchor must be started by the Host Coordinator in a new user namespace"))
		}
		lines++
	}
	if lines == 0 {
		return fail(stepNamespace, p, errors.New("the user namespace has no UID map"))
	}
	return nil
}

// identities reads what Ready reports: the anchor's own pidfs identity and
// namespace identities, and the overlay mount.
func identities(mount hostid.MountIdentity) (anchor.Ready, error) {
	r := anchor.Ready{Mount: mount}
	pidfd, err := hostid.OpenPidfd(os.Getpid())
	if err != nil {
		return r, fail(stepIdentity, "", err)
	}
	defer unix.Close(pidfd)
	if r.Daemon, err = hostid.IdentityOf(pidfd); err != nil {
		return r, fail(stepIdentity, "", err)
	}
	for _, ns := range []struct {
		path string
		dst  *hostid.NamespaceIdentity
	}{{"/proc/self/ns/user", &r.UserNamespace}, {"/proc/self/ns/mnt", &r.MountNamespace}} {
		fd, err := unix.Open(ns.path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return r, fail(stepIdentity, ns.path, os.NewSyscallError("open", err))
		}
		*ns.dst, err = hostid.NamespaceOf(fd)
		unix.Close(fd)
		if err != nil {
			return r, fail(stepIdentity, ns.path, err)
		}
	}
	return r, nil
}

// channel is the anchor's end of the control socketpair. It keeps f
// referenced, so that f's finalizer never closes fd.
type channel struct {
	f  *os.File
	fd int
}

func newChannel(f *os.File) (*channel, error) {
	fd := int(f.Fd())
	if err := seqpacket.Check(fd); err != nil {
		return nil, fmt.Errorf("control channel: %w (lazaret-anchor is started by the Host Coordinator with its control socket as descriptor %d)", err, anchor.ServeLayout.FD(anchor.ControlFile))
	}
	return &channel{f: f, fd: fd}, nil
}

func (c *channel) send(m anchor.Message) error {
	b, err := anchor.Encode(m)
	if err != nil {
		return err
	}
	if err := seqpacket.Send(c.fd, b); err != nil {
		return fmt.Errorf("sending %v: %w", m.Kind(), err)
	}
	return nil
}

// report sends err to the Host Coordinator as a Failure and returns it.
func (c *channel) report(err error) error {
	step, path := stepChannel, ""
	var se *stepError
	if errors.As(err, &se) {
		step, path = se.step, se.path
	}
	if serr := c.send(anchor.NewFailure(step, path, err)); serr != nil {
		return errors.Join(err, serr)
	}
	return err
}

type received struct {
	msg anchor.Message
	err error
}

// receive reads one datagram and decodes it.
func (c *channel) receive() (anchor.Message, error) {
	buf := make([]byte, anchor.MaxMessageSize)
	n, _, err := seqpacket.Recv(c.fd, buf, 0)
	switch {
	case err == io.EOF:
		return nil, errChannelClosed
	case errors.Is(err, seqpacket.ErrTruncated), errors.Is(err, seqpacket.ErrControlTruncated):
		return nil, fail(stepChannel, "", fmt.Errorf("%w: %w", anchor.ErrProtocol, err))
	case err != nil:
		return nil, fail(stepChannel, "", err)
	}
	m, err := anchor.Decode(buf[:n])
	if err != nil {
		return nil, fail(stepChannel, "", err)
	}
	return m, nil
}

// reader delivers datagrams until the channel closes or fails.
func (c *channel) reader() <-chan received {
	out := make(chan received, 1)
	go func() {
		defer close(out)
		for {
			m, err := c.receive()
			out <- received{m, err}
			if err != nil {
				return
			}
		}
	}()
	return out
}

// awaitIDMap waits for IDMapWritten, checks that the map is there, and
// replaces this process with argv, keeping the control descriptor.
func (c *channel) awaitIDMap(argv []string) error {
	m, err := c.receive()
	if errors.Is(err, errChannelClosed) {
		return nil
	}
	if err != nil {
		return c.report(err)
	}
	if _, ok := m.(*anchor.IDMapWritten); !ok {
		return c.report(fail(stepChannel, "", fmt.Errorf("got %v while awaiting the ID map: %w", m.Kind(), anchor.ErrProtocol)))
	}
	if err := checkUserNamespace(); err != nil {
		return c.report(err)
	}
	if len(argv) == 0 {
		return c.report(fail(stepReexec, "", errors.New("no argv to re-execute")))
	}
	// The re-executed anchor inherits the control socket again, at the
	// same descriptor (Inherit made it close-on-exec).
	if _, err := unix.FcntlInt(uintptr(c.fd), unix.F_SETFD, 0); err != nil {
		return c.report(fail(stepReexec, "", os.NewSyscallError("fcntl", err)))
	}
	const self = "/proc/self/exe"
	err = unix.Exec(self, argv, os.Environ())
	return c.report(fail(stepReexec, self, os.NewSyscallError("execve", err)))
}
