package escalation

import "errors"

// Sentinel errors. Reasons passed to Config.OnEvent and to the log wrap
// them; test with errors.Is.
var (
	// ErrBusy: a verified request arrived while its session already had an
	// active request. It is answered Failed without running.
	ErrBusy = errors.New("session already has an active request")
	// ErrNoRequest: a cancellation or acknowledgment names no live request.
	ErrNoRequest = errors.New("no live request with that ID")
	// ErrNameMismatch: the file name names another request than the
	// record inside.
	ErrNameMismatch = errors.New("mailbox file name and record disagree")
	// ErrExecutable: the executable failed its re-check before execution.
	ErrExecutable = errors.New("executable refused")
	// ErrTimedOut is the cause of a request that ran out of time.
	ErrTimedOut = errors.New("request timed out")
	// ErrCancelled is the cause of a request the guest cancelled or whose
	// session went away.
	ErrCancelled = errors.New("request cancelled")
	// ErrPrompt: the prompter could not obtain a decision.
	ErrPrompt = errors.New("prompt failed")
	// ErrDecision: a developer decision did not verify.
	ErrDecision = errors.New("developer decision refused")
	// ErrUnacknowledged: a result counted as delivered because the guest
	// did not acknowledge it in time.
	ErrUnacknowledged = errors.New("result delivered without acknowledgment")
	// ErrStart: the host command could not be started.
	ErrStart = errors.New("host command did not start")
	// ErrSignaled: the host command was killed by a signal.
	ErrSignaled = errors.New("host command killed by a signal")
	// ErrShellForm: the command is not a direct argument vector
	// (CommandRequiresShell); it needs a prompt.
	ErrShellForm = errors.New("command is not a direct argument vector (it would need a shell or a PATH lookup)")
	// ErrInterpreterPrefix: only a rule with allow_extra_args matches, and
	// the executable is a command interpreter.
	ErrInterpreterPrefix = errors.New("a rule with allow_extra_args never admits a command interpreter")
	// ErrNoRule: no auto-approval rule matches the exact command.
	ErrNoRule = errors.New("no auto-approval rule matches the exact command")
	// ErrConfig: the engine's configuration is incomplete.
	ErrConfig = errors.New("invalid escalation engine configuration")
)
