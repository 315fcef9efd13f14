package supervise

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
	// ErrNotSeqpacket means the descriptor is not an AF_UNIX
	// SOCK_SEQPACKET socket.
	ErrNotSeqpacket = errors.New("channel descriptor is not a unix SOCK_SEQPACKET socket")
	// ErrTruncated means a packet was larger than MaxMessageSize.
	ErrTruncated = errors.New("packet larger than the message size limit")
	// ErrAncillary means a packet carried ancillary data (descriptors or
	// credentials); the channel carries bytes only, and any received
	// descriptors are closed.
	ErrAncillary = errors.New("packet carries ancillary data")
)

// MalformedError is a packet that was received whole but rejected:
// undecodable, too large, or carrying ancillary data. The channel stays
// usable; the next packet is independent.
type MalformedError struct{ Err error }

func (e *MalformedError) Error() string { return "malformed packet: " + e.Err.Error() }

func (e *MalformedError) Unwrap() error { return e.Err }

// Conn is one end of the generation channel: a connected SOCK_SEQPACKET
// socket on which one packet is one message. Sends are safe from several
// goroutines; receives must come from one goroutine at a time.
type Conn struct {
	uc *net.UnixConn
}

// NewConn wraps f, which must be a connected AF_UNIX SOCK_SEQPACKET socket.
// It takes ownership of f: f is closed whether or not NewConn succeeds, and
// the returned Conn holds its own close-on-exec duplicate.
func NewConn(f *os.File) (*Conn, error) {
	defer f.Close()
	raw, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("inspecting channel descriptor: %w", err)
	}
	var typ, domain int
	var serr error
	if err := raw.Control(func(fd uintptr) {
		typ, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TYPE)
		if serr == nil {
			domain, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_DOMAIN)
		}
	}); err != nil {
		return nil, fmt.Errorf("inspecting channel descriptor: %w", err)
	}
	if serr != nil {
		if errors.Is(serr, unix.ENOTSOCK) {
			return nil, fmt.Errorf("channel descriptor %d: %w", f.Fd(), ErrNotSeqpacket)
		}
		return nil, fmt.Errorf("inspecting channel descriptor: %w", os.NewSyscallError("getsockopt", serr))
	}
	if typ != unix.SOCK_SEQPACKET || domain != unix.AF_UNIX {
		return nil, fmt.Errorf("channel descriptor has domain %d type %d: %w", domain, typ, ErrNotSeqpacket)
	}
	c, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("wrapping channel descriptor: %w", err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("channel descriptor wraps as %T: %w", c, ErrNotSeqpacket)
	}
	return &Conn{uc: uc}, nil
}

// SendCommand sends one command.
func (c *Conn) SendCommand(m Command) error { return c.send(EncodeCommand(m)) }

// SendReport sends one report.
func (c *Conn) SendReport(m Report) error { return c.send(EncodeReport(m)) }

// RecvCommand receives and decodes one command. At the peer's close it
// returns io.EOF. A rejected packet is a *MalformedError and leaves the
// channel usable.
func (c *Conn) RecvCommand() (Command, error) {
	b, err := c.recv()
	if err != nil {
		return nil, err
	}
	m, err := DecodeCommand(b)
	if err != nil {
		return nil, &MalformedError{Err: err}
	}
	return m, nil
}

// RecvReport receives and decodes one report, like RecvCommand.
func (c *Conn) RecvReport() (Report, error) {
	b, err := c.recv()
	if err != nil {
		return nil, err
	}
	m, err := DecodeReport(b)
	if err != nil {
		return nil, &MalformedError{Err: err}
	}
	return m, nil
}

// SetDeadline sets the read and write deadline; a deadline in the past
// interrupts a blocked call with an error matching os.ErrDeadlineExceeded.
func (c *Conn) SetDeadline(t time.Time) error { return c.uc.SetDeadline(t) }

// Close closes this end; the peer reads EOF.
func (c *Conn) Close() error { return c.uc.Close() }

func (c *Conn) send(b []byte) error {
	if len(b) > MaxMessageSize {
		return fmt.Errorf("sending %d bytes: %w", len(b), ErrMessageTooLarge)
	}
	n, _, err := c.uc.WriteMsgUnix(b, nil, nil)
	if err != nil {
		return fmt.Errorf("sending message: %w", err)
	}
	if n != len(b) {
		return fmt.Errorf("sending message: wrote %d of %d bytes: %w", n, len(b), io.ErrShortWrite)
	}
	return nil
}

// oobSize leaves room to detect (and close) a few passed descriptors.
const oobSize = 128

func (c *Conn) recv() ([]byte, error) {
	buf := make([]byte, MaxMessageSize)
	oob := make([]byte, oobSize)
	n, oobn, flags, _, err := c.uc.ReadMsgUnix(buf, oob)
	if oobn > 0 {
		closeRights(oob[:oobn])
	}
	if err != nil {
		return nil, err
	}
	switch {
	case oobn > 0 || flags&unix.MSG_CTRUNC != 0:
		return nil, &MalformedError{Err: ErrAncillary}
	case flags&unix.MSG_TRUNC != 0:
		return nil, &MalformedError{Err: ErrTruncated}
	case n == 0:
		return nil, io.EOF
	}
	return buf[:n], nil
}

// closeRights closes every descriptor an SCM_RIGHTS message delivered.
func closeRights(oob []byte) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return
	}
	for i := range msgs {
		fds, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			continue
		}
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
}
