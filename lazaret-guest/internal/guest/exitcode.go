package guest

import (
	"fmt"

	"lazaret.dev/pkg/protocol"
)

// Exit codes of lazaret-guest run. A Completed request exits with the host
// command's own status (0 to 255), so these can collide with a status the
// command chose; they follow the usual shell conventions.
const (
	// ExitGuestError: the guest could not make the request or could not
	// verify the answer (bad environment, unreadable bundle, unwritable
	// mailbox, a record that fails verification).
	ExitGuestError = 123
	// ExitTimedOut: the request ran out of time (as timeout(1)).
	ExitTimedOut = 124
	// ExitDenied: the developer denied the request.
	ExitDenied = 125
	// ExitFailed: the host could not run the command (executable refused,
	// start failure) or it was killed by a signal.
	ExitFailed = 126
	// ExitCancelled: the request was cancelled (Ctrl-C, or the session's
	// terminal went away): 128 + SIGINT.
	ExitCancelled = 130
)

// ExitCode maps a verified result to the exit status of lazaret-guest run.
func ExitCode(r *protocol.MailboxResult) int {
	switch r.Outcome {
	case protocol.OutcomeCompleted:
		if r.ExitCode != nil {
			return int(*r.ExitCode)
		}
		return ExitGuestError
	case protocol.OutcomeDenied:
		return ExitDenied
	case protocol.OutcomeTimedOut:
		return ExitTimedOut
	case protocol.OutcomeCancelled:
		return ExitCancelled
	case protocol.OutcomeFailed:
		return ExitFailed
	}
	return ExitGuestError
}

// outcomeMessage is the line printed on stderr for an outcome other than
// Completed.
func outcomeMessage(r *protocol.MailboxResult, argv0 string) string {
	switch r.Outcome {
	case protocol.OutcomeDenied:
		return fmt.Sprintf("the host request for %q was denied", argv0)
	case protocol.OutcomeTimedOut:
		return fmt.Sprintf("the host request for %q timed out", argv0)
	case protocol.OutcomeCancelled:
		return fmt.Sprintf("the host request for %q was cancelled", argv0)
	case protocol.OutcomeFailed:
		return fmt.Sprintf("the host could not run %q (see the host terminal for the reason)", argv0)
	}
	return ""
}
