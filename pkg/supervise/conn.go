package supervise

import (
	"errors"
	"fmt"
	"os"
	"time"

	"lazaret.dev/pkg/seqpacket"
)

// Errors of the transport; test with errors.Is.
var (
	// ErrNotSeqpacket means the descriptor is not an AF_UNIX
	// SOCK_SEQPACKET socket.
	ErrNotSeqpacket = seqpacket.ErrNotSeqpacket
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
	c *seqpacket.Conn
}

// NewConn wraps f, which must be a connected AF_UNIX SOCK_SEQPACKET socket.
// It takes ownership of f: f is closed whether or not NewConn succeeds, and
// the returned Conn holds its own close-on-exec duplicate.
func NewConn(f *os.File) (*Conn, error) {
	c, err := seqpacket.New(f)
	if err != nil {
		return nil, fmt.Errorf("channel descriptor: %w", err)
	}
	return &Conn{c: c}, nil
}

// Pair returns a connected close-on-exec socketpair: the coordinator's end
// as a Conn and the supervisor's end as a file to pass as its channel
// descriptor.
func Pair() (*Conn, *os.File, error) {
	c, rsEnd, err := seqpacket.Pair("supervise-channel")
	if err != nil {
		return nil, nil, fmt.Errorf("creating the channel socketpair: %w", err)
	}
	return &Conn{c: c}, rsEnd, nil
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
func (c *Conn) SetDeadline(t time.Time) error { return c.c.SetDeadline(t) }

// Close closes this end; the peer reads EOF.
func (c *Conn) Close() error { return c.c.Close() }

func (c *Conn) send(b []byte) error {
	if len(b) > MaxMessageSize {
		return fmt.Errorf("sending %d bytes: %w", len(b), ErrMessageTooLarge)
	}
	if err := c.c.Send(b); err != nil {
		return fmt.Errorf("sending message: %w", err)
	}
	return nil
}

func (c *Conn) recv() ([]byte, error) {
	buf := make([]byte, MaxMessageSize)
	n, _, err := c.c.Recv(buf, 0)
	switch {
	case errors.Is(err, seqpacket.ErrControlTruncated):
		return nil, &MalformedError{Err: fmt.Errorf("%w: %w", ErrAncillary, err)}
	case errors.Is(err, seqpacket.ErrTruncated):
		return nil, &MalformedError{Err: fmt.Errorf("%w: %w", ErrTruncated, err)}
	case err != nil:
		return nil, err
	}
	return buf[:n], nil
}
