package gitroute

import (
	"errors"
	"fmt"
	"os"

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
type Conn = seqpacket.Endpoint[Command, Report]

// protocol is the control channel's encoding.
var protocol = &seqpacket.Protocol[Command, Report]{
	Name: "control message", Max: MaxMessageSize, TooLarge: ErrMessageTooLarge,
	Malformed:     func(err error) error { return fmt.Errorf("%w: %w", ErrMalformed, err) },
	EncodeCommand: EncodeCommand, DecodeCommand: DecodeCommand,
	EncodeReport: EncodeReport, DecodeReport: DecodeReport,
}

// NewConn wraps f, which must be a connected AF_UNIX SOCK_SEQPACKET socket.
// It takes ownership of f: f is closed whether or not NewConn succeeds.
func NewConn(f *os.File) (*Conn, error) { return seqpacket.NewEndpoint(f, protocol) }

// Pair returns a connected close-on-exec socketpair: the coordinator's end
// as a Conn and the daemon's end as a file to pass as fd 3.
func Pair() (*Conn, *os.File, error) { return seqpacket.PairEndpoints(protocol) }
