package protocol

import (
	"fmt"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/postcard"
)

// Session terminal protocol: the events a CLI sends for one session and the
// messages the Host Coordinator returns. Interactive PTY output is one merged
// byte stream; non-interactive sessions keep stdout and stderr apart.

// TerminalInput is bytes typed into the session's terminal (1 to
// MaxTerminalBytes).
type TerminalInput struct {
	SessionID ids.SessionID
	Bytes     []byte
}

// TerminalResize is a window size. Rows and columns are the kernel's
// winsize fields and may be zero (a terminal that reports no size).
type TerminalResize struct {
	SessionID   ids.SessionID
	Rows        uint16
	Columns     uint16
	PixelWidth  uint16
	PixelHeight uint16
}

// TerminalSignalKind is a signal the developer's terminal sends.
type TerminalSignalKind uint32

// Terminal signals, in variant order.
const (
	SignalInterrupt TerminalSignalKind = iota
	SignalQuit
	SignalSuspend
	numTerminalSignals
)

// TerminalSignal delivers a terminal signal to the session's foreground job.
type TerminalSignal struct {
	SessionID ids.SessionID
	Signal    TerminalSignalKind
}

// SessionClose ends the developer's side of a session.
type SessionClose struct {
	SessionID ids.SessionID
}

// TerminalEventKind selects the variant of a SessionTerminalEvent.
type TerminalEventKind uint32

// SessionTerminalEvent variants, in order.
const (
	EventInput TerminalEventKind = iota
	EventResize
	EventSignal
	EventClose
	numTerminalEvents
)

// SessionTerminalEvent is a union: the pointer that Kind selects is set and
// no other.
type SessionTerminalEvent struct {
	Kind   TerminalEventKind
	Input  *TerminalInput
	Resize *TerminalResize
	Signal *TerminalSignal
	Close  *SessionClose
}

// TerminalOutput is bytes of the merged PTY output stream (1 to
// MaxTerminalBytes).
type TerminalOutput struct {
	SessionID ids.SessionID
	Bytes     []byte
}

// SessionExitOutcome says how a session's process ended.
type SessionExitOutcome uint32

// Session exit outcomes, in variant order.
const (
	ExitExited SessionExitOutcome = iota
	ExitTerminated
	ExitRuntimeLost
	numExitOutcomes
)

// SessionExit ends a session. ExitCode is present exactly when Outcome is
// ExitExited; it is the 8-bit status collected from the runsc exec client,
// encoded as Option<u8>.
type SessionExit struct {
	SessionID ids.SessionID
	Outcome   SessionExitOutcome
	ExitCode  *uint8
}

// TerminalMessageKind selects the variant of a SessionTerminalMessage.
type TerminalMessageKind uint32

// SessionTerminalMessage variants, in order.
const (
	MessageOutput TerminalMessageKind = iota
	MessageExit
	numTerminalMessages
)

// SessionTerminalMessage is a union of TerminalOutput and SessionExit.
type SessionTerminalMessage struct {
	Kind   TerminalMessageKind
	Output *TerminalOutput
	Exit   *SessionExit
}

// NonInteractiveSessionRequest runs argv in the sandbox without a PTY. The
// argv is resolved inside the sandbox, so element 0 need not be absolute.
type NonInteractiveSessionRequest struct {
	SessionID ids.SessionID
	Argv      []string
}

// NonInteractiveOutput is bytes of stdout or stderr (1 to
// MaxTerminalBytes).
type NonInteractiveOutput struct {
	SessionID ids.SessionID
	Bytes     []byte
}

// NonInteractiveKind selects the variant of a NonInteractiveSessionMessage.
type NonInteractiveKind uint32

// NonInteractiveSessionMessage variants, in order.
const (
	NonInteractiveStdout NonInteractiveKind = iota
	NonInteractiveStderr
	NonInteractiveExit
	numNonInteractive
)

// NonInteractiveSessionMessage is Stdout or Stderr (Output set) or Exit
// (Exit set).
type NonInteractiveSessionMessage struct {
	Kind   NonInteractiveKind
	Output *NonInteractiveOutput
	Exit   *SessionExit
}

// InteractiveSessionRequest runs argv in the sandbox on a PTY of
// InitialSize, whose session_id must equal SessionID.
type InteractiveSessionRequest struct {
	SessionID   ids.SessionID
	Argv        []string
	InitialSize TerminalResize
}

// InteractiveEventKind selects the variant of an InteractiveSessionEvent.
type InteractiveEventKind uint32

// InteractiveSessionEvent variants, in order.
const (
	InteractiveTerminal InteractiveEventKind = iota
	InteractivePromptDecision
	InteractivePoll
	numInteractiveEvents
)

// InteractiveSessionEvent is what a CLI sends on an interactive session:
// a terminal event, a prompt decision (a SignedProtocolRecord whose kind is
// RecordDeveloperDecision, signed by the session anchor key), or Poll, a
// unit variant asking for the next InteractiveSessionBatch.
type InteractiveSessionEvent struct {
	Kind     InteractiveEventKind
	Terminal *SessionTerminalEvent
	Decision *SignedProtocolRecord
}

// TerminalPrompt asks the developer to decide a host escalation request. It
// carries the request's exact argv and the digest the decision must sign.
type TerminalPrompt struct {
	SessionID     ids.SessionID
	RequestID     ids.RequestID
	RequestSHA256 ids.Digest
	AgentProfile  string
	CommandArgv   []string
	Justification string
}

// InteractiveMessageKind selects the variant of an InteractiveSessionMessage.
type InteractiveMessageKind uint32

// InteractiveSessionMessage variants, in order.
const (
	InteractiveMessageTerminal InteractiveMessageKind = iota
	InteractiveMessagePrompt
	numInteractiveMessages
)

// InteractiveSessionMessage is a terminal message or a prompt.
type InteractiveSessionMessage struct {
	Kind     InteractiveMessageKind
	Terminal *SessionTerminalMessage
	Prompt   *TerminalPrompt
}

// InteractiveSessionBatch is the answer to a Poll: 0 to MaxBatchMessages
// messages, each for SessionID.
type InteractiveSessionBatch struct {
	SessionID ids.SessionID
	Messages  []InteractiveSessionMessage
}

// --- TerminalInput

// Validate checks the session ID and the byte count.
func (r *TerminalInput) Validate() error {
	if err := nonzero16(r.SessionID); err != nil {
		return fieldError("terminal-input", "session_id", err)
	}
	if err := checkBounded(r.Bytes, 1, MaxTerminalBytes); err != nil {
		return fieldError("terminal-input", "bytes", err)
	}
	return nil
}

// MarshalPostcard writes session_id, bytes.
func (r *TerminalInput) MarshalPostcard(e *postcard.Encoder) {
	e.Fixed(r.SessionID[:])
	e.ByteString(r.Bytes)
}

// UnmarshalPostcard reads session_id, bytes.
func (r *TerminalInput) UnmarshalPostcard(d *postcard.Decoder) {
	readID(d, (*[16]byte)(&r.SessionID), "session_id")
	r.Bytes = readBounded(d, "bytes", 1, MaxTerminalBytes)
}

// --- TerminalResize

// Validate checks the session ID.
func (r *TerminalResize) Validate() error {
	if err := nonzero16(r.SessionID); err != nil {
		return fieldError("terminal-resize", "session_id", err)
	}
	return nil
}

// MarshalPostcard writes session_id, rows, columns, pixel_width,
// pixel_height; the sizes are u16 varints.
func (r *TerminalResize) MarshalPostcard(e *postcard.Encoder) {
	e.Fixed(r.SessionID[:])
	e.U16(r.Rows)
	e.U16(r.Columns)
	e.U16(r.PixelWidth)
	e.U16(r.PixelHeight)
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (r *TerminalResize) UnmarshalPostcard(d *postcard.Decoder) {
	readID(d, (*[16]byte)(&r.SessionID), "session_id")
	r.Rows = d.U16()
	r.Columns = d.U16()
	r.PixelWidth = d.U16()
	r.PixelHeight = d.U16()
}

// --- TerminalSignal

// Validate checks the session ID and the signal kind.
func (r *TerminalSignal) Validate() error {
	if err := nonzero16(r.SessionID); err != nil {
		return fieldError("terminal-signal", "session_id", err)
	}
	if r.Signal >= numTerminalSignals {
		return fieldError("terminal-signal", "signal", invalid("unknown signal %d", r.Signal))
	}
	return nil
}

// MarshalPostcard writes session_id, signal.
func (r *TerminalSignal) MarshalPostcard(e *postcard.Encoder) {
	e.Fixed(r.SessionID[:])
	e.Variant(uint32(r.Signal))
}

// UnmarshalPostcard reads session_id, signal.
func (r *TerminalSignal) UnmarshalPostcard(d *postcard.Decoder) {
	readID(d, (*[16]byte)(&r.SessionID), "session_id")
	r.Signal = TerminalSignalKind(d.Variant(uint32(numTerminalSignals)))
}

// --- SessionClose

// Validate checks the session ID.
func (r *SessionClose) Validate() error {
	if err := nonzero16(r.SessionID); err != nil {
		return fieldError("session-close", "session_id", err)
	}
	return nil
}

// MarshalPostcard writes session_id.
func (r *SessionClose) MarshalPostcard(e *postcard.Encoder) { e.Fixed(r.SessionID[:]) }

// UnmarshalPostcard reads session_id.
func (r *SessionClose) UnmarshalPostcard(d *postcard.Decoder) {
	readID(d, (*[16]byte)(&r.SessionID), "session_id")
}

// --- SessionTerminalEvent

// Validate checks that exactly the selected variant is set and valid.
func (u *SessionTerminalEvent) Validate() error {
	const rec = "session-terminal-event"
	set := map[TerminalEventKind]bool{
		EventInput: u.Input != nil, EventResize: u.Resize != nil,
		EventSignal: u.Signal != nil, EventClose: u.Close != nil,
	}
	if err := checkUnion(rec, uint32(u.Kind), uint32(numTerminalEvents), set); err != nil {
		return err
	}
	switch u.Kind {
	case EventInput:
		return u.Input.Validate()
	case EventResize:
		return u.Resize.Validate()
	case EventSignal:
		return u.Signal.Validate()
	default:
		return u.Close.Validate()
	}
}

// SessionID is the session of the selected variant.
func (u *SessionTerminalEvent) SessionID() ids.SessionID {
	switch {
	case u.Kind == EventInput && u.Input != nil:
		return u.Input.SessionID
	case u.Kind == EventResize && u.Resize != nil:
		return u.Resize.SessionID
	case u.Kind == EventSignal && u.Signal != nil:
		return u.Signal.SessionID
	case u.Kind == EventClose && u.Close != nil:
		return u.Close.SessionID
	}
	return ids.SessionID{}
}

// MarshalPostcard writes the variant index and the selected payload.
func (u *SessionTerminalEvent) MarshalPostcard(e *postcard.Encoder) {
	e.Variant(uint32(u.Kind))
	switch u.Kind {
	case EventInput:
		orZero(u.Input).MarshalPostcard(e)
	case EventResize:
		orZero(u.Resize).MarshalPostcard(e)
	case EventSignal:
		orZero(u.Signal).MarshalPostcard(e)
	case EventClose:
		orZero(u.Close).MarshalPostcard(e)
	}
}

// UnmarshalPostcard reads the variant index and its payload.
func (u *SessionTerminalEvent) UnmarshalPostcard(d *postcard.Decoder) {
	*u = SessionTerminalEvent{Kind: TerminalEventKind(d.Variant(uint32(numTerminalEvents)))}
	if d.Err() != nil {
		return
	}
	switch u.Kind {
	case EventInput:
		u.Input = new(TerminalInput)
		u.Input.UnmarshalPostcard(d)
	case EventResize:
		u.Resize = new(TerminalResize)
		u.Resize.UnmarshalPostcard(d)
	case EventSignal:
		u.Signal = new(TerminalSignal)
		u.Signal.UnmarshalPostcard(d)
	case EventClose:
		u.Close = new(SessionClose)
		u.Close.UnmarshalPostcard(d)
	}
}

// --- TerminalOutput

// Validate checks the session ID and the byte count.
func (r *TerminalOutput) Validate() error {
	if err := nonzero16(r.SessionID); err != nil {
		return fieldError("terminal-output", "session_id", err)
	}
	if err := checkBounded(r.Bytes, 1, MaxTerminalBytes); err != nil {
		return fieldError("terminal-output", "bytes", err)
	}
	return nil
}

// MarshalPostcard writes session_id, bytes.
func (r *TerminalOutput) MarshalPostcard(e *postcard.Encoder) {
	e.Fixed(r.SessionID[:])
	e.ByteString(r.Bytes)
}

// UnmarshalPostcard reads session_id, bytes.
func (r *TerminalOutput) UnmarshalPostcard(d *postcard.Decoder) {
	readID(d, (*[16]byte)(&r.SessionID), "session_id")
	r.Bytes = readBounded(d, "bytes", 1, MaxTerminalBytes)
}

// --- SessionExit

func checkExit(outcome SessionExitOutcome, code *uint8) error {
	if outcome >= numExitOutcomes {
		return invalid("unknown outcome %d", outcome)
	}
	if (outcome == ExitExited) != (code != nil) {
		return invalid("exit_code must be present exactly for Exited")
	}
	return nil
}

// Validate checks the session ID and that ExitCode is present exactly for
// ExitExited.
func (r *SessionExit) Validate() error {
	if err := nonzero16(r.SessionID); err != nil {
		return fieldError("session-exit", "session_id", err)
	}
	if err := checkExit(r.Outcome, r.ExitCode); err != nil {
		return fieldError("session-exit", "exit_code", err)
	}
	return nil
}

// MarshalPostcard writes session_id, outcome, exit_code as Option<u8>.
func (r *SessionExit) MarshalPostcard(e *postcard.Encoder) {
	e.Fixed(r.SessionID[:])
	e.Variant(uint32(r.Outcome))
	writeOptionU8(e, r.ExitCode)
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (r *SessionExit) UnmarshalPostcard(d *postcard.Decoder) {
	readID(d, (*[16]byte)(&r.SessionID), "session_id")
	r.Outcome = SessionExitOutcome(d.Variant(uint32(numExitOutcomes)))
	r.ExitCode = readOptionU8(d)
	if d.Err() == nil {
		if err := checkExit(r.Outcome, r.ExitCode); err != nil {
			d.Fail("exit_code", err)
		}
	}
}

func writeOptionU8(e *postcard.Encoder, v *uint8) {
	if v == nil {
		e.None()
		return
	}
	e.Some()
	e.U8(*v)
}

func readOptionU8(d *postcard.Decoder) *uint8 {
	if !d.Option() || d.Err() != nil {
		return nil
	}
	v := d.U8()
	if d.Err() != nil {
		return nil
	}
	return &v
}

// --- SessionTerminalMessage

// Validate checks that exactly the selected variant is set and valid.
func (u *SessionTerminalMessage) Validate() error {
	set := map[TerminalMessageKind]bool{MessageOutput: u.Output != nil, MessageExit: u.Exit != nil}
	if err := checkUnion("session-terminal-message", uint32(u.Kind), uint32(numTerminalMessages), set); err != nil {
		return err
	}
	if u.Kind == MessageOutput {
		return u.Output.Validate()
	}
	return u.Exit.Validate()
}

// SessionID is the session of the selected variant.
func (u *SessionTerminalMessage) SessionID() ids.SessionID {
	switch {
	case u.Kind == MessageOutput && u.Output != nil:
		return u.Output.SessionID
	case u.Kind == MessageExit && u.Exit != nil:
		return u.Exit.SessionID
	}
	return ids.SessionID{}
}

// MarshalPostcard writes the variant index and the selected payload.
func (u *SessionTerminalMessage) MarshalPostcard(e *postcard.Encoder) {
	e.Variant(uint32(u.Kind))
	switch u.Kind {
	case MessageOutput:
		orZero(u.Output).MarshalPostcard(e)
	case MessageExit:
		orZero(u.Exit).MarshalPostcard(e)
	}
}

// UnmarshalPostcard reads the variant index and its payload.
func (u *SessionTerminalMessage) UnmarshalPostcard(d *postcard.Decoder) {
	*u = SessionTerminalMessage{Kind: TerminalMessageKind(d.Variant(uint32(numTerminalMessages)))}
	if d.Err() != nil {
		return
	}
	if u.Kind == MessageOutput {
		u.Output = new(TerminalOutput)
		u.Output.UnmarshalPostcard(d)
		return
	}
	u.Exit = new(SessionExit)
	u.Exit.UnmarshalPostcard(d)
}

// --- NonInteractiveSessionRequest

// Validate checks the session ID and argv.
func (r *NonInteractiveSessionRequest) Validate() error {
	if err := nonzero16(r.SessionID); err != nil {
		return fieldError("non-interactive-session-request", "session_id", err)
	}
	if err := checkArgv(r.Argv, sandboxArgv); err != nil {
		return fieldError("non-interactive-session-request", "argv", err)
	}
	return nil
}

// MarshalPostcard writes protocol_version, session_id, argv.
func (r *NonInteractiveSessionRequest) MarshalPostcard(e *postcard.Encoder) {
	writeVersion(e)
	e.Fixed(r.SessionID[:])
	writeArgv(e, r.Argv)
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (r *NonInteractiveSessionRequest) UnmarshalPostcard(d *postcard.Decoder) {
	readVersion(d)
	readID(d, (*[16]byte)(&r.SessionID), "session_id")
	r.Argv = readArgv(d, "argv", sandboxArgv)
}

// --- NonInteractiveOutput

// Validate checks the session ID and the byte count.
func (r *NonInteractiveOutput) Validate() error {
	if err := nonzero16(r.SessionID); err != nil {
		return fieldError("non-interactive-output", "session_id", err)
	}
	if err := checkBounded(r.Bytes, 1, MaxTerminalBytes); err != nil {
		return fieldError("non-interactive-output", "bytes", err)
	}
	return nil
}

// MarshalPostcard writes session_id, bytes.
func (r *NonInteractiveOutput) MarshalPostcard(e *postcard.Encoder) {
	e.Fixed(r.SessionID[:])
	e.ByteString(r.Bytes)
}

// UnmarshalPostcard reads session_id, bytes.
func (r *NonInteractiveOutput) UnmarshalPostcard(d *postcard.Decoder) {
	readID(d, (*[16]byte)(&r.SessionID), "session_id")
	r.Bytes = readBounded(d, "bytes", 1, MaxTerminalBytes)
}

// --- NonInteractiveSessionMessage

// Validate checks that exactly the selected payload is set and valid.
func (u *NonInteractiveSessionMessage) Validate() error {
	const rec = "non-interactive-session-message"
	if u.Kind >= numNonInteractive {
		return fieldError(rec, "variant", invalid("unknown variant %d", u.Kind))
	}
	wantOutput := u.Kind != NonInteractiveExit
	if (u.Output != nil) != wantOutput || (u.Exit != nil) == wantOutput {
		return fieldError(rec, "variant", invalid("payload does not match variant %d", u.Kind))
	}
	if wantOutput {
		return u.Output.Validate()
	}
	return u.Exit.Validate()
}

// MarshalPostcard writes the variant index and the selected payload.
func (u *NonInteractiveSessionMessage) MarshalPostcard(e *postcard.Encoder) {
	e.Variant(uint32(u.Kind))
	if u.Kind == NonInteractiveExit {
		orZero(u.Exit).MarshalPostcard(e)
	} else {
		orZero(u.Output).MarshalPostcard(e)
	}
}

// UnmarshalPostcard reads the variant index and its payload.
func (u *NonInteractiveSessionMessage) UnmarshalPostcard(d *postcard.Decoder) {
	*u = NonInteractiveSessionMessage{Kind: NonInteractiveKind(d.Variant(uint32(numNonInteractive)))}
	if d.Err() != nil {
		return
	}
	if u.Kind == NonInteractiveExit {
		u.Exit = new(SessionExit)
		u.Exit.UnmarshalPostcard(d)
		return
	}
	u.Output = new(NonInteractiveOutput)
	u.Output.UnmarshalPostcard(d)
}

// --- InteractiveSessionRequest

// Validate checks the session ID, argv and initial size.
func (r *InteractiveSessionRequest) Validate() error {
	const rec = "interactive-session-request"
	if err := nonzero16(r.SessionID); err != nil {
		return fieldError(rec, "session_id", err)
	}
	if err := checkArgv(r.Argv, sandboxArgv); err != nil {
		return fieldError(rec, "argv", err)
	}
	if r.InitialSize.SessionID != r.SessionID {
		return fieldError(rec, "initial_size", invalid("session_id differs from the request's"))
	}
	return nil
}

// MarshalPostcard writes protocol_version, session_id, argv, initial_size.
func (r *InteractiveSessionRequest) MarshalPostcard(e *postcard.Encoder) {
	writeVersion(e)
	e.Fixed(r.SessionID[:])
	writeArgv(e, r.Argv)
	r.InitialSize.MarshalPostcard(e)
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (r *InteractiveSessionRequest) UnmarshalPostcard(d *postcard.Decoder) {
	readVersion(d)
	readID(d, (*[16]byte)(&r.SessionID), "session_id")
	r.Argv = readArgv(d, "argv", sandboxArgv)
	r.InitialSize.UnmarshalPostcard(d)
	if d.Err() == nil && r.InitialSize.SessionID != r.SessionID {
		d.Fail("initial_size", invalid("session_id differs from the request's"))
	}
}

// --- InteractiveSessionEvent

// Validate checks the selected variant. A prompt decision must be a
// DeveloperDecision record; its signature is checked by Verifier.
func (u *InteractiveSessionEvent) Validate() error {
	const rec = "interactive-session-event"
	set := map[InteractiveEventKind]bool{
		InteractiveTerminal: u.Terminal != nil, InteractivePromptDecision: u.Decision != nil,
	}
	if err := checkUnion(rec, uint32(u.Kind), uint32(numInteractiveEvents), set); err != nil {
		return err
	}
	switch u.Kind {
	case InteractiveTerminal:
		return u.Terminal.Validate()
	case InteractivePromptDecision:
		if u.Decision.Kind != RecordDeveloperDecision {
			return fieldError(rec, "decision", invalid("record kind %v is not developer-decision", u.Decision.Kind))
		}
		return u.Decision.Validate()
	}
	return nil
}

// MarshalPostcard writes the variant index and the selected payload (none
// for Poll).
func (u *InteractiveSessionEvent) MarshalPostcard(e *postcard.Encoder) {
	e.Variant(uint32(u.Kind))
	switch u.Kind {
	case InteractiveTerminal:
		orZero(u.Terminal).MarshalPostcard(e)
	case InteractivePromptDecision:
		orZero(u.Decision).MarshalPostcard(e)
	}
}

// UnmarshalPostcard reads the variant index and its payload.
func (u *InteractiveSessionEvent) UnmarshalPostcard(d *postcard.Decoder) {
	*u = InteractiveSessionEvent{Kind: InteractiveEventKind(d.Variant(uint32(numInteractiveEvents)))}
	if d.Err() != nil {
		return
	}
	switch u.Kind {
	case InteractiveTerminal:
		u.Terminal = new(SessionTerminalEvent)
		u.Terminal.UnmarshalPostcard(d)
	case InteractivePromptDecision:
		u.Decision = new(SignedProtocolRecord)
		u.Decision.UnmarshalPostcard(d)
		if d.Err() == nil && u.Decision.Kind != RecordDeveloperDecision {
			d.Fail("decision", invalid("record kind %v is not developer-decision", u.Decision.Kind))
		}
	}
}

// --- TerminalPrompt

// Validate checks the IDs, profile, argv and justification.
func (r *TerminalPrompt) Validate() error {
	const rec = "terminal-prompt"
	if err := nonzero16(r.SessionID); err != nil {
		return fieldError(rec, "session_id", err)
	}
	if err := nonzero16(r.RequestID); err != nil {
		return fieldError(rec, "request_id", err)
	}
	if err := checkProfile(r.AgentProfile); err != nil {
		return fieldError(rec, "agent_profile", err)
	}
	if err := checkArgv(r.CommandArgv, hostArgv); err != nil {
		return fieldError(rec, "command_argv", err)
	}
	if err := checkText(r.Justification, MaxJustificationBytes); err != nil {
		return fieldError(rec, "justification", err)
	}
	return nil
}

// MarshalPostcard writes session_id, request_id, request_sha256,
// agent_profile, command_argv, justification.
func (r *TerminalPrompt) MarshalPostcard(e *postcard.Encoder) {
	e.Fixed(r.SessionID[:])
	e.Fixed(r.RequestID[:])
	e.Fixed(r.RequestSHA256[:])
	e.String(r.AgentProfile)
	writeArgv(e, r.CommandArgv)
	e.String(r.Justification)
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (r *TerminalPrompt) UnmarshalPostcard(d *postcard.Decoder) {
	readID(d, (*[16]byte)(&r.SessionID), "session_id")
	readID(d, (*[16]byte)(&r.RequestID), "request_id")
	d.Fixed(r.RequestSHA256[:])
	r.AgentProfile = readProfile(d)
	r.CommandArgv = readArgv(d, "command_argv", hostArgv)
	r.Justification = readJustification(d)
}

func readProfile(d *postcard.Decoder) string {
	s := d.String()
	if d.Err() == nil {
		if err := checkProfile(s); err != nil {
			d.Fail("agent_profile", err)
		}
	}
	return s
}

func readJustification(d *postcard.Decoder) string {
	s := d.String()
	if d.Err() == nil {
		if err := checkText(s, MaxJustificationBytes); err != nil {
			d.Fail("justification", err)
		}
	}
	return s
}

// --- InteractiveSessionMessage

// Validate checks that exactly the selected variant is set and valid.
func (u *InteractiveSessionMessage) Validate() error {
	set := map[InteractiveMessageKind]bool{
		InteractiveMessageTerminal: u.Terminal != nil, InteractiveMessagePrompt: u.Prompt != nil,
	}
	if err := checkUnion("interactive-session-message", uint32(u.Kind), uint32(numInteractiveMessages), set); err != nil {
		return err
	}
	if u.Kind == InteractiveMessageTerminal {
		return u.Terminal.Validate()
	}
	return u.Prompt.Validate()
}

// SessionID is the session of the selected variant.
func (u *InteractiveSessionMessage) SessionID() ids.SessionID {
	switch {
	case u.Kind == InteractiveMessageTerminal && u.Terminal != nil:
		return u.Terminal.SessionID()
	case u.Kind == InteractiveMessagePrompt && u.Prompt != nil:
		return u.Prompt.SessionID
	}
	return ids.SessionID{}
}

// MarshalPostcard writes the variant index and the selected payload.
func (u *InteractiveSessionMessage) MarshalPostcard(e *postcard.Encoder) {
	e.Variant(uint32(u.Kind))
	switch u.Kind {
	case InteractiveMessageTerminal:
		orZero(u.Terminal).MarshalPostcard(e)
	case InteractiveMessagePrompt:
		orZero(u.Prompt).MarshalPostcard(e)
	}
}

// UnmarshalPostcard reads the variant index and its payload.
func (u *InteractiveSessionMessage) UnmarshalPostcard(d *postcard.Decoder) {
	*u = InteractiveSessionMessage{Kind: InteractiveMessageKind(d.Variant(uint32(numInteractiveMessages)))}
	if d.Err() != nil {
		return
	}
	if u.Kind == InteractiveMessageTerminal {
		u.Terminal = new(SessionTerminalMessage)
		u.Terminal.UnmarshalPostcard(d)
		return
	}
	u.Prompt = new(TerminalPrompt)
	u.Prompt.UnmarshalPostcard(d)
}

// --- InteractiveSessionBatch

// Validate checks the message count and that every message is valid and
// belongs to SessionID.
func (r *InteractiveSessionBatch) Validate() error {
	const rec = "interactive-session-batch"
	if err := nonzero16(r.SessionID); err != nil {
		return fieldError(rec, "session_id", err)
	}
	if len(r.Messages) > MaxBatchMessages {
		return fieldError(rec, "messages", invalid("%d messages exceed the limit of %d", len(r.Messages), MaxBatchMessages))
	}
	for i := range r.Messages {
		if err := r.Messages[i].Validate(); err != nil {
			return err
		}
		if r.Messages[i].SessionID() != r.SessionID {
			return fieldError(rec, fmt.Sprintf("messages[%d]", i), invalid("message belongs to another session"))
		}
	}
	return nil
}

// MarshalPostcard writes session_id, messages.
func (r *InteractiveSessionBatch) MarshalPostcard(e *postcard.Encoder) {
	e.Fixed(r.SessionID[:])
	e.SeqLen(len(r.Messages))
	for i := range r.Messages {
		r.Messages[i].MarshalPostcard(e)
	}
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (r *InteractiveSessionBatch) UnmarshalPostcard(d *postcard.Decoder) {
	*r = InteractiveSessionBatch{}
	readID(d, (*[16]byte)(&r.SessionID), "session_id")
	// Every message is at least a variant byte, a variant byte and 16 ID
	// bytes.
	n := d.SeqLen(18)
	if d.Err() != nil {
		return
	}
	if n > MaxBatchMessages {
		d.Fail("messages", invalid("%d messages exceed the limit of %d", n, MaxBatchMessages))
		return
	}
	if n > 0 {
		r.Messages = make([]InteractiveSessionMessage, n)
	}
	for i := range r.Messages {
		r.Messages[i].UnmarshalPostcard(d)
		if d.Err() == nil && r.Messages[i].SessionID() != r.SessionID {
			d.Fail(fmt.Sprintf("messages[%d]", i), invalid("message belongs to another session"))
		}
	}
}

// --- helpers

// checkUnion checks that kind is known and that exactly its payload is set.
// set lists every variant that has a payload; a unit variant is absent, so
// for it every payload must be nil.
func checkUnion[K ~uint32](record string, kind, n uint32, set map[K]bool) error {
	if kind >= n {
		return fieldError(record, "variant", invalid("unknown variant %d", kind))
	}
	for k, isSet := range set {
		if isSet != (uint32(k) == kind) {
			return fieldError(record, "variant", invalid("payload does not match variant %d", kind))
		}
	}
	return nil
}

// orZero lets MarshalPostcard of an unvalidated union write a zero payload
// instead of dereferencing nil; Encode refuses such a union before that.
func orZero[T any](p *T) *T {
	if p == nil {
		return new(T)
	}
	return p
}
