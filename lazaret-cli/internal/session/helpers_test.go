package session

import "lazaret.dev/pkg/protocol"

// ExitCodeCase builds a SessionExit for table tests.
type ExitCodeCase struct {
	outcome uint32
	code    *uint8
}

func (c ExitCodeCase) record() protocol.SessionExit {
	return protocol.SessionExit{Outcome: protocol.SessionExitOutcome(c.outcome), ExitCode: c.code}
}
