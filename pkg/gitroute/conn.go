package gitroute

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Errors of the transport; test with errors.Is.
var (
	// ErrNotSeqpacket means the channel descriptor is not an AF_UNIX
	// SOCK_SEQPACKET socket.
	ErrNotSeqpacket = errors.New("control descriptor is not a unix SOCK_SEQPACKET socket")
	// ErrMalformed means a packet was received whole but rejected: too
	// large, carrying ancillary data, or not one strict message.
	ErrMalformed = errors.New("malformed control packet")
)

// Conn is one end of the control channel: one packet is one message. Sends
// are safe from several goroutines; receives must come from one goroutine.
type Conn struct {
	uc *net.UnixConn
}

// NewConn wraps f, which must be a connected AF_UNIX SOCK_SEQPACKET socket.
// It takes ownership of f: f is closed whether or not NewConn succeeds.
func NewConn(f *os.File) (*Conn, error) {
	defer f.Close()
	raw, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("inspecting control descriptor: %w", err)
	}
	var typ, domain int
	var serr error
	if err := raw.Control(func(fd uintptr) {
		typ, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TYPE)
		if serr == nil {
			domain, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_DOMAIN)
		}
	}); err != nil {
		return nil, fmt.Errorf("inspecting control descriptor: %w", err)
	}
	if serr != nil {
		return nil, fmt.Errorf("control descriptor %q: %w (%v)", f.Name(), ErrNotSeqpacket, serr)
	}
	if typ != unix.SOCK_SEQPACKET || domain != unix.AF_UNIX {
		return nil, fmt.Errorf("control descriptor has domain %d type %d: %w", domain, typ, ErrNotSeqpacket)
	}
	c, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("wrapping control descriptor: %w", err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("control descriptor wraps as %T: %w", c, ErrNotSeqpacket)
	}
	return &Conn{uc: uc}, nil
}

// Pair returns a connected close-on-exec socketpair: the coordinator's end
// as a Conn and the daemon's end as a file to pass as fd 3.
func Pair() (*Conn, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("creating control socketpair: %w", os.NewSyscallError("socketpair", err))
	}
	c, err := NewConn(os.NewFile(uintptr(fds[0]), "gitroute-control"))
	if err != nil {
		unix.Close(fds[1])
		return nil, nil, err
	}
	return c, os.NewFile(uintptr(fds[1]), "gitroute-control-child"), nil
}

// SendReport sends one report.
func (c *Conn) SendReport(r Report) error { return c.send(EncodeReport(r)) }

// SendCommand sends one command.
func (c *Conn) SendCommand(m Command) error { return c.send(EncodeCommand(m)) }

// RecvReport receives one report; io.EOF at the peer's close.
func (c *Conn) RecvReport() (Report, error) {
	b, err := c.recv()
	if err != nil {
		return nil, err
	}
	r, err := DecodeReport(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return r, nil
}

// RecvCommand receives one command; io.EOF at the peer's close.
func (c *Conn) RecvCommand() (Command, error) {
	b, err := c.recv()
	if err != nil {
		return nil, err
	}
	m, err := DecodeCommand(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return m, nil
}

// SetDeadline sets the read and write deadline.
func (c *Conn) SetDeadline(t time.Time) error { return c.uc.SetDeadline(t) }

// Close closes this end; the peer reads EOF.
func (c *Conn) Close() error { return c.uc.Close() }

func (c *Conn) send(b []byte) error {
	if len(b) > MaxMessageSize {
		return ErrMessageTooLarge
	}
	n, _, err := c.uc.WriteMsgUnix(b, nil, nil)
	if err != nil {
		return fmt.Errorf("sending control message: %w", err)
	}
	if n != len(b) {
		return fmt.Errorf("sending control message: wrote %d of %d bytes: %w", n, len(b), io.ErrShortWrite)
	}
	return nil
}

func (c *Conn) recv() ([]byte, error) {
	buf := make([]byte, MaxMessageSize+1)
	oob := make([]byte, 128)
	n, oobn, flags, _, err := c.uc.ReadMsgUnix(buf, oob)
	if oobn > 0 {
		closeRights(oob[:oobn])
	}
	if err != nil {
		return nil, err
	}
	if n == 0 && oobn == 0 {
		return nil, io.EOF
	}
	if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 || n > MaxMessageSize {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrMalformed, MaxMessageSize)
	}
	if oobn > 0 {
		return nil, fmt.Errorf("%w: ancillary data", ErrMalformed)
	}
	return buf[:n], nil
}

// closeRights closes any descriptors passed in ancillary data.
func closeRights(oob []byte) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return
	}
	for _, m := range msgs {
		if fds, err := unix.ParseUnixRights(&m); err == nil {
			for _, fd := range fds {
				unix.Close(fd)
			}
		}
	}
}
