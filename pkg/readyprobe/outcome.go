package readyprobe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
)

// Outcome is what a TCP connect attempt from the sandbox side showed.
type Outcome uint8

const (
	// Connected: the handshake completed.
	Connected Outcome = iota
	// Refused: a reset answered the SYN. For a connect that no probe rule
	// matches (every permitted probe), the enforcement path never sends a
	// reset, so a host behind the path answered. For a denied probe, the
	// reset is its probe rule's, which the rule's counter shows.
	Refused
	// TimedOut: nothing answered within the timeout.
	TimedOut
	// NoRoute: the kernel of the sandbox namespace had no way to send the
	// SYN (network or host unreachable, or refused locally).
	NoRoute
)

func (o Outcome) String() string {
	switch o {
	case Connected:
		return "connected"
	case Refused:
		return "refused by a reset"
	case TimedOut:
		return "timed out"
	case NoRoute:
		return "no route"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// Reachable is the permitted probe's definition: a target is reachable
// when a host behind the path answered, by completing the handshake or by
// refusing it. It holds for a connect that no probe rule matches (see
// Refused); a denied target is judged by DeniedEvidence instead.
func (o Outcome) Reachable() bool { return o == Connected || o == Refused }

// Classify turns the error of a failed TCP connect into its Outcome. An
// error that is none of the four outcomes is returned, as is the
// context's error when ctx ended the attempt.
func Classify(ctx context.Context, err error) (Outcome, error) {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return Refused, nil
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EACCES):
		return NoRoute, nil
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, context.DeadlineExceeded):
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return TimedOut, nil
	}
	return 0, err
}
