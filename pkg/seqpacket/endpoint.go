package seqpacket

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// A Protocol is the encoding of a two-way message channel: commands one
// way, reports the other, one message a packet, no descriptors. The
// packages of the channels (gitroute, supervise) each define one.
type Protocol[C, R any] struct {
	// Name is what the channel is called in errors ("control message").
	Name string
	// Max bounds one encoded message; a larger one is not sent, and a
	// larger packet is rejected whole.
	Max int
	// TooLarge is returned (wrapped) for a message over Max.
	TooLarge error
	// Malformed wraps the reason a received packet was rejected: a
	// decoding error, ErrTruncated or ErrControlTruncated. The endpoint
	// stays usable after it.
	Malformed func(error) error

	EncodeCommand func(C) []byte
	DecodeCommand func([]byte) (C, error)
	EncodeReport  func(R) []byte
	DecodeReport  func([]byte) (R, error)
}

// Endpoint is one end of a Protocol's channel. Sends are safe from
// several goroutines; receives must come from one goroutine at a time.
type Endpoint[C, R any] struct {
	c *Conn
	p *Protocol[C, R]
}

// NewEndpoint wraps f, a connected AF_UNIX SOCK_SEQPACKET socket; it
// takes ownership of f, which is closed whether or not it succeeds.
func NewEndpoint[C, R any](f *os.File, p *Protocol[C, R]) (*Endpoint[C, R], error) {
	c, err := New(f)
	if err != nil {
		return nil, fmt.Errorf("%s descriptor: %w", p.Name, err)
	}
	return &Endpoint[C, R]{c: c, p: p}, nil
}

// PairEndpoints returns a connected close-on-exec socketpair: this
// process's end as an Endpoint and the child's as a file to pass it.
func PairEndpoints[C, R any](p *Protocol[C, R]) (*Endpoint[C, R], *os.File, error) {
	c, child, err := Pair(p.Name)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the %s socketpair: %w", p.Name, err)
	}
	return &Endpoint[C, R]{c: c, p: p}, child, nil
}

// SendCommand encodes and sends one command.
func (e *Endpoint[C, R]) SendCommand(m C) error { return e.send(e.p.EncodeCommand(m)) }

// SendReport encodes and sends one report.
func (e *Endpoint[C, R]) SendReport(m R) error { return e.send(e.p.EncodeReport(m)) }

// RecvCommand receives and decodes one command; io.EOF at the peer's
// close.
func (e *Endpoint[C, R]) RecvCommand() (C, error) { return recvDecoded(e, e.p.DecodeCommand) }

// RecvReport receives and decodes one report; io.EOF at the peer's close.
func (e *Endpoint[C, R]) RecvReport() (R, error) { return recvDecoded(e, e.p.DecodeReport) }

// SetDeadline sets the read and write deadline; a deadline in the past
// interrupts a blocked call with an error matching os.ErrDeadlineExceeded.
func (e *Endpoint[C, R]) SetDeadline(t time.Time) error { return e.c.SetDeadline(t) }

// Close closes this end; the peer reads io.EOF.
func (e *Endpoint[C, R]) Close() error { return e.c.Close() }

func (e *Endpoint[C, R]) send(b []byte) error {
	if len(b) > e.p.Max {
		return fmt.Errorf("sending a %s of %d bytes: %w", e.p.Name, len(b), e.p.TooLarge)
	}
	if err := e.c.Send(b); err != nil {
		return fmt.Errorf("sending a %s: %w", e.p.Name, err)
	}
	return nil
}

func recvDecoded[C, R, M any](e *Endpoint[C, R], decode func([]byte) (M, error)) (M, error) {
	var zero M
	buf := make([]byte, e.p.Max)
	n, _, err := e.c.Recv(buf, 0)
	switch {
	case errors.Is(err, ErrTruncated), errors.Is(err, ErrControlTruncated):
		return zero, e.p.Malformed(err)
	case err != nil:
		return zero, err
	}
	m, err := decode(buf[:n])
	if err != nil {
		return zero, e.p.Malformed(err)
	}
	return m, nil
}
