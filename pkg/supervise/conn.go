package supervise

import (
	"errors"
	"fmt"
	"os"

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
// goroutines; receives must come from one goroutine at a time. A rejected
// packet is a *MalformedError and leaves the channel usable.
type Conn = seqpacket.Endpoint[Command, Report]

// protocol is the generation channel's encoding.
var protocol = &seqpacket.Protocol[Command, Report]{
	Name: "channel message", Max: MaxMessageSize, TooLarge: ErrMessageTooLarge,
	Malformed: func(err error) error {
		switch {
		case errors.Is(err, seqpacket.ErrControlTruncated):
			err = fmt.Errorf("%w: %w", ErrAncillary, err)
		case errors.Is(err, seqpacket.ErrTruncated):
			err = fmt.Errorf("%w: %w", ErrTruncated, err)
		}
		return &MalformedError{Err: err}
	},
	EncodeCommand: EncodeCommand, DecodeCommand: DecodeCommand,
	EncodeReport: EncodeReport, DecodeReport: DecodeReport,
}

// NewConn wraps f, which must be a connected AF_UNIX SOCK_SEQPACKET socket.
// It takes ownership of f: f is closed whether or not NewConn succeeds, and
// the returned Conn holds its own close-on-exec duplicate.
func NewConn(f *os.File) (*Conn, error) { return seqpacket.NewEndpoint(f, protocol) }

// Pair returns a connected close-on-exec socketpair: the coordinator's end
// as a Conn and the supervisor's end as a file to pass as its channel
// descriptor.
func Pair() (*Conn, *os.File, error) { return seqpacket.PairEndpoints(protocol) }
