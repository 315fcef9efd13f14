package session

import (
	"fmt"

	"lazaret.dev/pkg/protocol"
)

// Exit codes of start and exec besides the session's own (docs/OPERATIONS.md).
const (
	// ExitTerminated: the session's process was killed by a signal. The
	// protocol does not carry which one; sessions are ended with SIGKILL,
	// so the code is 128+9.
	ExitTerminated = 137
	// ExitRuntimeLost: the sandbox runtime was lost and the session ended
	// without a status.
	ExitRuntimeLost = 124
	// ExitFailure: Lazaret could not run the session (configuration,
	// start, join, connection).
	ExitFailure = 125
	// ExitSignalBase plus a signal number is the code when the CLI itself
	// ends on SIGHUP, SIGINT or SIGTERM.
	ExitSignalBase = 128
)

// ExitCode maps how a session ended to the CLI's exit code, with a message
// for the developer when the session did not simply exit.
func ExitCode(e protocol.SessionExit) (int, string) {
	switch e.Outcome {
	case protocol.ExitExited:
		if e.ExitCode == nil {
			return ExitRuntimeLost, "lazaret: the session ended without an exit status"
		}
		return int(*e.ExitCode), ""
	case protocol.ExitTerminated:
		// Said on stderr: a command killed from outside (a generation
		// that failed, a runtime that died, the kernel) must not end
		// looking like one that chose to exit 137.
		return ExitTerminated, "lazaret: the session's process was killed by a signal"
	case protocol.ExitRuntimeLost:
		return ExitRuntimeLost, "lazaret: the sandbox runtime was lost; the session ended without an exit status (see the coordinator log)"
	}
	return ExitRuntimeLost, fmt.Sprintf("lazaret: the session ended with unknown outcome %d", uint32(e.Outcome))
}
