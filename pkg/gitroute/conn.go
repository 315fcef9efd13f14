package gitroute

import (
	"errors"
	"fmt"
	"os"
	"time"

	"lazaret.dev/pkg/seqpacket"
)

// Errors of the transport; test with errors.Is.
var (
	// ErrNotSeqpacket means the channel descriptor is not an AF_UNIX
	// SOCK_SEQPACKET socket.
	ErrNotSeqpacket = seqpacket.ErrNotSeqpacket
	// ErrMalformed means a packet was received whole but rejected: too
	// large, carrying ancillary data, or not one strict message.
	ErrMalformed = errors.New("malformed control packet")
)

// Conn is one end of the control channel: one packet is one message. Sends
// are safe from several goroutines; receives must come from one goroutine.
type Conn struct {
	c *seqpacket.Conn
}

// NewConn wraps f, which must be a connected AF_UNIX SOCK_SEQPACKET socket.
// It takes ownership of f: f is closed whether or not NewConn succeeds.
func NewConn(f *os.File) (*Conn, error) {
	c, err := seqpacket.New(f)
	if err != nil {
		return nil, fmt.Errorf("control descriptor: %w", err)
	}
	return &Conn{c: c}, nil
}

// Pair returns a connected close-on-exec socketpair: the coordinator's end
// as a Conn and the daemon's end as a file to pass as fd 3.
func Pair() (*Conn, *os.File, error) {
	c, child, err := seqpacket.Pair("gitroute-control")
	if err != nil {
		return nil, nil, fmt.Errorf("creating control socketpair: %w", err)
	}
	return &Conn{c: c}, child, nil
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
func (c *Conn) SetDeadline(t time.Time) error { return c.c.SetDeadline(t) }

// Close closes this end; the peer reads EOF.
func (c *Conn) Close() error { return c.c.Close() }

func (c *Conn) send(b []byte) error {
	if len(b) > MaxMessageSize {
		return ErrMessageTooLarge
	}
	if err := c.c.Send(b); err != nil {
		return fmt.Errorf("sending control message: %w", err)
	}
	return nil
}

func (c *Conn) recv() ([]byte, error) {
	buf := make([]byte, MaxMessageSize)
	n, _, err := c.c.Recv(buf, 0)
	switch {
	case errors.Is(err, seqpacket.ErrTruncated), errors.Is(err, seqpacket.ErrControlTruncated):
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	case err != nil:
		return nil, err
	}
	return buf[:n], nil
}
