package escalation

import (
	"errors"

	"lazaret.dev/pkg/ids"
)

// Errors of a request's admission.
var (
	// ErrSessionEnded: a record names a session that has ended (its
	// command exited, its terminal detached, or the generation is
	// stopping). Its capability ended with it, as in the model, where
	// ReceiveEscalation needs the session registered and connected. The
	// record is discarded and nothing answers it.
	ErrSessionEnded = errors.New("the session has ended; its capability ended with it")
	// ErrAudit: the audit record of a transition could not be made
	// durable (Config.Journal failed), so the request's command does not
	// run.
	ErrAudit = errors.New("the escalation audit log cannot record the request")
)

// EndSession ends a session for the engine: from now on its records are
// discarded (ErrSessionEnded), and its active request, if any, is
// cancelled and counts as delivered at once, since nobody is left to
// acknowledge it. It is the model's DisconnectSession: call it before the
// session's end is recorded anywhere else, so that every request verified
// for the session is reported before its end. It reports whether the
// session had an active request.
func (e *Engine) EndSession(session ids.SessionID) bool {
	e.intake.Lock()
	e.ended[session] = true
	e.intake.Unlock()
	e.mu.Lock()
	r := e.sessions[session]
	e.mu.Unlock()
	if r == nil {
		return false
	}
	r.endSession()
	return true
}
