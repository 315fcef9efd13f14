package netsidecar

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/seqpacket"
)

// MaxPolicy bounds the sealed policy: far above any real policy (a
// 10,000-prefix policy is about 80 KB), small enough to read at once.
const MaxPolicy = 4 << 20

// RequiredSeals are the seals a policy memfd must carry.
const RequiredSeals = unix.F_SEAL_WRITE | unix.F_SEAL_GROW | unix.F_SEAL_SHRINK | unix.F_SEAL_SEAL

// SealPolicy returns a memfd holding policy, sealed with RequiredSeals.
func SealPolicy(policy []byte) (*os.File, error) {
	return seal("lazaret-network-policy", "policy", policy, MaxPolicy, ErrPolicyTooLarge)
}

// MaxBroker bounds the credential broker's sealed configuration.
const MaxBroker = 1 << 20

// SealBroker returns a memfd holding the credential broker's encoded
// configuration (empty for none), sealed with RequiredSeals. It holds
// secrets: the memfd is never linked into a file system, and the caller
// closes it once the sidecar has its copy.
func SealBroker(config []byte) (*os.File, error) {
	return seal("lazaret-credential-broker", "broker configuration", config, MaxBroker, ErrBrokerTooLarge)
}

func seal(name, what string, data []byte, limit int, tooLarge error) (*os.File, error) {
	if len(data) > limit {
		return nil, fmt.Errorf("sealing %s of %d bytes: %w", what, len(data), tooLarge)
	}
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("creating %s memfd: %w", what, os.NewSyscallError("memfd_create", err))
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, fmt.Errorf("writing %s memfd: %w", what, err)
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, RequiredSeals); err != nil {
		f.Close()
		return nil, fmt.Errorf("sealing %s memfd: %w", what, os.NewSyscallError("fcntl", err))
	}
	return f, nil
}

// ReadSealedPolicy checks that f carries every required seal and returns
// its whole content. Once F_SEAL_WRITE, F_SEAL_GROW and F_SEAL_SHRINK are
// set and F_SEAL_SEAL forbids removing them, no holder of the descriptor
// can change the bytes after this check.
func ReadSealedPolicy(f *os.File) ([]byte, error) {
	return readSealed(f, "policy", MaxPolicy, ErrPolicyTooLarge)
}

// ReadSealedBroker is ReadSealedPolicy for the broker's configuration.
func ReadSealedBroker(f *os.File) ([]byte, error) {
	return readSealed(f, "broker configuration", MaxBroker, ErrBrokerTooLarge)
}

func readSealed(f *os.File, what string, limit int64, tooLarge error) ([]byte, error) {
	seals, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0)
	if err == unix.EINVAL {
		return nil, fmt.Errorf("%s descriptor %q is not a memfd: %w", what, f.Name(), ErrNotSealed)
	}
	if err != nil {
		return nil, fmt.Errorf("reading seals of %s memfd %q: %w", what, f.Name(), os.NewSyscallError("fcntl", err))
	}
	if seals&RequiredSeals != RequiredSeals {
		return nil, fmt.Errorf("%s memfd %q has seals %#x, needs %#x: %w", what, f.Name(), seals, RequiredSeals, ErrNotSealed)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, fmt.Errorf("%s memfd %q: %w", what, f.Name(), os.NewSyscallError("fstat", err))
	}
	if st.Size > limit {
		return nil, fmt.Errorf("%s memfd %q of %d bytes: %w", what, f.Name(), st.Size, tooLarge)
	}
	b := make([]byte, st.Size)
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		return nil, fmt.Errorf("reading %s memfd %q: %w", what, f.Name(), err)
	}
	return b, nil
}

// Channel is one end of the SOCK_SEQPACKET control channel.
type Channel struct {
	c *seqpacket.Conn
}

// NewChannel takes ownership of f, a SOCK_SEQPACKET socket. The socket is
// moved to a non-blocking close-on-exec duplicate so that reads honour
// deadlines; f itself is closed.
func NewChannel(f *os.File) (*Channel, error) {
	c, err := seqpacket.New(f)
	if err != nil {
		return nil, fmt.Errorf("control channel: %w", err)
	}
	return &Channel{c: c}, nil
}

// ChannelPair returns two connected channel ends.
func ChannelPair() (*Channel, *os.File, error) {
	c, peer, err := seqpacket.Pair("netsidecar-control")
	if err != nil {
		return nil, nil, fmt.Errorf("creating control channel: %w", err)
	}
	return &Channel{c: c}, peer, nil
}

// Close closes the channel; the peer reads end of file.
func (c *Channel) Close() error { return c.c.Close() }

// Send writes one message as one packet.
func (c *Channel) Send(m Message) error {
	b, err := Encode(m)
	if err != nil {
		return err
	}
	if err := c.c.Send(b); err != nil {
		return fmt.Errorf("sending control message: %w", err)
	}
	return nil
}

// SendFile writes one message as one packet carrying f (SCM_RIGHTS). The
// caller keeps f and closes it.
func (c *Channel) SendFile(m Message, f *os.File) error {
	b, err := Encode(m)
	if err != nil {
		return err
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("sending control message: %w", err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = c.c.Send(b, int(fd)) }); err != nil {
		return fmt.Errorf("sending control message: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("sending control message: %w", serr)
	}
	return nil
}

// Receive reads one message, waiting at most until ctx ends. A closed peer
// gives io.EOF; a truncated packet is ErrTooLarge. A packet carrying a
// descriptor is refused (the descriptor is closed); ReceiveFile takes one.
func (c *Channel) Receive(ctx context.Context) (Message, error) {
	m, f, err := c.receive(ctx, 0)
	if f != nil {
		f.Close()
	}
	return m, err
}

// ReceiveFile is Receive for a packet that may carry one descriptor,
// returned as a file the caller owns (nil when none came).
func (c *Channel) ReceiveFile(ctx context.Context) (Message, *os.File, error) {
	return c.receive(ctx, 1)
}

func (c *Channel) receive(ctx context.Context, maxFds int) (Message, *os.File, error) {
	m, fds, err := c.receiveFds(ctx, maxFds)
	var f *os.File
	if len(fds) == 1 {
		f = os.NewFile(uintptr(fds[0]), "passed descriptor")
	}
	if err != nil && f != nil {
		f.Close()
		f = nil
	}
	return m, f, err
}

func (c *Channel) receiveFds(ctx context.Context, maxFds int) (Message, []int, error) {
	if d, ok := ctx.Deadline(); ok {
		c.c.SetReadDeadline(d)
	} else {
		c.c.SetReadDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { c.c.SetReadDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, MaxMessage)
	n, fds, err := c.c.Recv(buf, maxFds)
	switch {
	case err == io.EOF:
		return nil, fds, io.EOF
	case errors.Is(err, seqpacket.ErrTruncated):
		return nil, fds, fmt.Errorf("receiving control message: %w: %w", ErrTooLarge, err)
	case err != nil && ctx.Err() != nil:
		return nil, fds, fmt.Errorf("receiving control message: %w", ctx.Err())
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The read deadline is only ever ctx's deadline, and it can
		// fire a moment before ctx's own timer does.
		return nil, fds, fmt.Errorf("receiving control message: %w", context.DeadlineExceeded)
	case err != nil:
		return nil, fds, fmt.Errorf("receiving control message: %w", err)
	}
	m, err := Decode(buf[:n])
	return m, fds, err
}

// Expect receives one message of type T; a Failed message becomes an
// error wrapping ErrFailed with its sentence.
func Expect[T Message](ctx context.Context, c *Channel) (T, error) {
	var zero T
	m, err := c.Receive(ctx)
	if err != nil {
		return zero, err
	}
	if f, ok := m.(*Failed); ok {
		return zero, fmt.Errorf("%w: %s", ErrFailed, f.Message)
	}
	t, ok := m.(T)
	if !ok {
		return zero, fmt.Errorf("control message %T, want %T: %w", m, zero, ErrUnexpected)
	}
	return t, nil
}
