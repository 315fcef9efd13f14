package escalation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"lazaret.dev/pkg/config"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/mailbox"
	"lazaret.dev/pkg/phase"
	"lazaret.dev/pkg/protocol"
)

// Defaults for the zero values of Config and Timeouts.
const (
	DefaultApprovalTimeout  = 5 * time.Minute
	DefaultExecutionTimeout = 10 * time.Minute
	DefaultAckTimeout       = 30 * time.Second
	DefaultWindow           = 64
	DefaultRescan           = time.Second
)

// Prompter shows a TerminalPrompt in the requesting session's terminal and
// returns the developer's DeveloperDecision signed with the session anchor
// key. The coordinator implements it by handing the prompt to the CLI of
// the session, which owns the terminal while it is shown. ctx ends when the
// request times out or is cancelled; the prompter must then take the
// prompt down and return. An error means no decision was obtained (for
// example the CLI disconnected): the request is cancelled.
type Prompter interface {
	Prompt(ctx context.Context, prompt protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error)
}

// Timeouts bound a request. Zero values take the defaults.
type Timeouts struct {
	// Approval bounds the wait for a developer decision.
	Approval time.Duration
	// Execution bounds the host command, from start to exit.
	Execution time.Duration
	// Ack bounds the wait for the guest's final acknowledgment after the
	// result was written; after it the result counts as delivered.
	Ack time.Duration
}

// Config is what an Engine needs. Verifier, CoordinatorKey, Sessions,
// Prompter, Outbox, Inbox and Workspace are required.
type Config struct {
	// Verifier trusts the generation's coordinator and sandbox
	// credentials.
	Verifier *protocol.Verifier
	// CoordinatorKey is the private key of the SessionCoordinator
	// credential; it signs result chunks and results.
	CoordinatorKey protocol.PrivateKey
	// Sessions returns the registered binding of a session.
	Sessions protocol.SessionLookup
	// Replay consumes request IDs; nil makes a fresh guard.
	Replay *protocol.ReplayGuard
	// Rules are the profile's resolved auto-approval rules, in order.
	Rules []config.AutoApprovalRule
	// Prompter obtains developer decisions.
	Prompter Prompter
	// Outbox and Inbox are the mailbox directories; the engine reads the
	// outbox and writes the inbox.
	Outbox, Inbox *mailbox.Dir
	// Workspace is the canonical host workspace, the working directory of
	// every host command.
	Workspace string
	// UID is the invoking user: an executable must be owned by root or UID.
	UID int
	// Env is the complete environment of host commands; nil means
	// ScrubbedEnv with the process's HOME and USER.
	Env []string
	// Timeouts bound each request.
	Timeouts Timeouts
	// Window is how many result chunks may be unacknowledged before the
	// engine stops reading the command's output; 0 means DefaultWindow.
	Window int
	// Rescan is the outbox rescan interval; 0 means DefaultRescan.
	Rescan time.Duration
	// Logger receives the engine's log lines; nil discards.
	Logger *slog.Logger
	// Noisy, when set, receives the lines the sandbox can cause at will:
	// discarded records and refused requests. The coordinator passes a
	// rate-limited logger; nil means Logger.
	Noisy *slog.Logger
	// Journal, when set, records each transition (the audit log) before
	// the engine acts on it; it must not block for long. It must write
	// every record at once, and when Event.Durable is set make that record
	// and every one written before it durable before it returns; records
	// without Durable become durable with the next one that has it. An
	// error for PhaseVerified refuses the request before it becomes
	// active (ErrAudit, answered Failed); an error for a later transition
	// lets the request run to its end but never start its host command:
	// the request fails at Executing, or is cancelled before its prompt.
	Journal func(Event) error
	// OnEvent, when set, is called on every request transition after
	// Journal (for the coordinator's log and protocol trace). It must not
	// block for long.
	OnEvent func(Event)
	// OnDiscard, when set, is called with every outbox record the engine
	// refuses and the reason.
	OnDiscard func(name mailbox.Name, reason error)
	// OnOutput, when set, receives each chunk of host output as it is sent,
	// so the terminal can show it live. It must not block for long.
	OnOutput func(session ids.SessionID, request ids.RequestID, stream protocol.ResultStream, b []byte)
}

// Phase is a request's phase, named as in the model.
type Phase string

// Request phases.
const (
	PhaseVerified            Phase = "Verified"
	PhaseAwaitingApproval    Phase = "AwaitingApproval"
	PhaseApproved            Phase = "Approved"
	PhaseExecuting           Phase = "Executing"
	PhaseCompletionPending   Phase = "CompletionPending"
	PhaseDenialPending       Phase = "DenialPending"
	PhaseTimeoutPending      Phase = "TimeoutPending"
	PhaseCancellationPending Phase = "CancellationPending"
	PhaseFailurePending      Phase = "FailurePending"
	PhaseCompleted           Phase = "Completed"
	PhaseDenied              Phase = "Denied"
	PhaseTimedOut            Phase = "TimedOut"
	PhaseCancelled           Phase = "Cancelled"
	PhaseFailed              Phase = "Failed"
	// PhaseRefused is not a model phase: a verified request that arrived
	// while its session had an active request. It never becomes active
	// and is answered Failed.
	PhaseRefused Phase = "Refused"
)

// SessionPhase is a session's phase; the engine drives the three below.
type SessionPhase = phase.Session

// The session phases the engine drives.
const (
	SessionAttached      = phase.SessionAttached
	SessionPrompting     = phase.SessionPrompting
	SessionHostExecuting = phase.SessionHostExecuting
)

// Source is who approved a command.
type Source string

// Approval sources.
const (
	SourceNone      Source = ""
	SourceAutoRule  Source = "AutoRule"
	SourceDeveloper Source = "Developer"
)

// Event reports one transition of a request.
type Event struct {
	Session ids.SessionID
	Request ids.RequestID
	Phase   Phase
	// SessionPhase is the session's phase after the transition.
	SessionPhase SessionPhase
	Source       Source
	// Rule is the admitting rule's index for SourceAutoRule, else -1.
	Rule int
	// Argv is the requested argv until approval, then the approved argv.
	Argv []string
	// Outcome and ExitCode are set from the pending phases on.
	Outcome  protocol.EscalationOutcome
	ExitCode *uint8
	// Err explains refusals, failures, timeouts, prompts and deliveries
	// without acknowledgment; nil otherwise. Test with errors.Is.
	Err error
	// Binding is the verified request's session binding (zero for a
	// refusal).
	Binding protocol.SessionBinding
	// Decider is the session binding of the verified developer decision,
	// from the decision on; nil before and for auto-approved requests.
	Decider *protocol.SessionBinding
	// Durable is set on the transitions after which something leaves the
	// engine that the audit log must already hold: the prompt is shown
	// (BeginPrompt: AwaitingApproval in session phase Prompting), the host
	// command starts (Executing), the result is written to the inbox (the
	// pending phases), a refusal is answered (Refused). Config.Journal
	// makes such a record, and every record before it, durable before it
	// returns. The others (Verified, Approved, the terminal phases, and
	// the changes of session phase or reason between them) are written at
	// once and made durable by the next durable record of any request, or
	// when the journal closes: nothing outside the engine depends on them
	// until then. An auto-approved request has two durable points,
	// Executing and its pending phase.
	Durable bool
}

// Engine verifies mailbox records and drives requests. Build one per
// generation with New and run Serve; it is safe for concurrent use.
type Engine struct {
	cfg Config
	log *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// intake orders the verification of requests against EndSession: a
	// request is verified and its PhaseVerified reported under it, so a
	// session's end is reported after every request received for it.
	intake sync.Mutex
	ended  map[ids.SessionID]bool // sessions ended by EndSession
	noisy  *slog.Logger

	mu       sync.Mutex
	sessions map[ids.SessionID]*request // the active request of each session
	requests map[ids.RequestID]*request // every active request
}

// New checks cfg and returns an Engine.
func New(cfg Config) (*Engine, error) {
	switch {
	case cfg.Verifier == nil:
		return nil, fmt.Errorf("%w: no verifier", ErrConfig)
	case cfg.CoordinatorKey.IsZero() || cfg.CoordinatorKey.Public() != cfg.Verifier.Coordinator().PublicKey:
		return nil, fmt.Errorf("%w: the coordinator key is not the coordinator credential's", ErrConfig)
	case cfg.Sessions == nil:
		return nil, fmt.Errorf("%w: no session registry", ErrConfig)
	case cfg.Prompter == nil:
		return nil, fmt.Errorf("%w: no prompter", ErrConfig)
	case cfg.Outbox == nil || cfg.Outbox.Direction() != mailbox.Outbox:
		return nil, fmt.Errorf("%w: no outbox", ErrConfig)
	case cfg.Inbox == nil || cfg.Inbox.Direction() != mailbox.Inbox:
		return nil, fmt.Errorf("%w: no inbox", ErrConfig)
	case cfg.Workspace == "":
		return nil, fmt.Errorf("%w: no workspace", ErrConfig)
	}
	if cfg.Replay == nil {
		cfg.Replay = protocol.NewReplayGuard(0)
	}
	if cfg.Env == nil {
		home, _ := os.UserHomeDir()
		cfg.Env = ScrubbedEnv(home, os.Getenv("USER"), os.LookupEnv)
	}
	cfg.Env = slices.Clone(cfg.Env)
	cfg.Rules = slices.Clone(cfg.Rules)
	if cfg.Timeouts.Approval <= 0 {
		cfg.Timeouts.Approval = DefaultApprovalTimeout
	}
	if cfg.Timeouts.Execution <= 0 {
		cfg.Timeouts.Execution = DefaultExecutionTimeout
	}
	if cfg.Timeouts.Ack <= 0 {
		cfg.Timeouts.Ack = DefaultAckTimeout
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.Rescan <= 0 {
		cfg.Rescan = DefaultRescan
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	noisy := cfg.Noisy
	if noisy == nil {
		noisy = log
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Engine{
		cfg: cfg, log: log, noisy: noisy, ctx: ctx, cancel: cancel,
		ended:    make(map[ids.SessionID]bool),
		sessions: make(map[ids.SessionID]*request),
		requests: make(map[ids.RequestID]*request),
	}, nil
}

// Serve watches the outbox and handles every record until ctx ends. It
// returns ctx's error.
func (e *Engine) Serve(ctx context.Context) error {
	return e.cfg.Outbox.Serve(ctx, e.cfg.Rescan, e.Handle)
}

// Close cancels every live request (killing host commands), and waits for
// their goroutines to end.
func (e *Engine) Close() {
	// Under mu, so that no request registers itself after the wait began.
	e.mu.Lock()
	e.cancel()
	e.mu.Unlock()
	e.wg.Wait()
}

// CancelSession cancels the active request of a session, for example when
// its CLI disconnected. It reports whether there was one to cancel.
func (e *Engine) CancelSession(session ids.SessionID) bool {
	e.mu.Lock()
	r := e.sessions[session]
	e.mu.Unlock()
	return r != nil && r.cancelWith(ErrCancelled)
}

// Active returns the ID and phase of a session's active request.
func (e *Engine) Active(session ids.SessionID) (ids.RequestID, Phase, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.sessions[session]
	if r == nil {
		return ids.RequestID{}, "", false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.id, r.phase, true
}

// Handle processes one outbox entry: it verifies the record (signature
// before decoding, then credential, generation, capability, session
// binding and, for requests, the replay guard) and acts on it. A record
// that fails is discarded with the reason logged.
func (e *Engine) Handle(en mailbox.Entry) {
	var err error
	switch en.Name.Kind {
	case mailbox.KindRequest:
		err = e.handleRequest(en)
	case mailbox.KindCancellation:
		err = e.handleCancellation(en)
	case mailbox.KindAck:
		err = e.handleAck(en)
	default:
		err = fmt.Errorf("%w: %s files do not belong in the outbox", mailbox.ErrName, en.Name.Kind)
	}
	if err != nil {
		e.noisy.Warn("discarding mailbox record", "file", fmt.Sprintf("%q", en.Name.String()), "reason", err)
		if e.cfg.OnDiscard != nil {
			e.cfg.OnDiscard(en.Name, err)
		}
	}
}

func (e *Engine) handleRequest(en mailbox.Entry) error {
	e.intake.Lock()
	defer e.intake.Unlock()
	var gone ids.SessionID
	vr, err := e.cfg.Verifier.VerifyRequest(&en.Record, e.lookup(&gone), e.cfg.Replay)
	if err != nil {
		if gone != (ids.SessionID{}) {
			return fmt.Errorf("verifying request: %w (session %v): %w", ErrSessionEnded, gone, err)
		}
		return fmt.Errorf("verifying request: %w", err)
	}
	if vr.Request.RequestID != en.Name.RequestID {
		return fmt.Errorf("%w: file names request %v, record %v", ErrNameMismatch, en.Name.RequestID, vr.Request.RequestID)
	}
	session := vr.Request.SessionBinding.SessionID
	r := newRequest(e, vr)
	e.mu.Lock()
	if e.ctx.Err() != nil {
		e.mu.Unlock()
		return fmt.Errorf("engine closed: %w", context.Canceled)
	}
	if active := e.sessions[session]; active != nil {
		e.mu.Unlock()
		return e.refuse(r, active.sessionPhase(), fmt.Errorf("%w (request %v)", ErrBusy, active.id))
	}
	// Held while the verification is journaled, so that no second
	// request of the session slips in; released before the answer to a
	// refusal is written.
	e.sessions[session] = r
	e.requests[r.id] = r
	e.mu.Unlock()
	ev := r.event(func() { r.phase = PhaseVerified }, nil)
	if err := e.journal(ev); err != nil {
		e.release(r)
		return e.refuse(r, SessionAttached, fmt.Errorf("%w: %w", ErrAudit, err))
	}
	e.report(ev)
	e.wg.Add(1)
	go r.run()
	return nil
}

// lookup is the session registry with the sessions EndSession ended taken
// out; it notes in gone the ended session it was asked about.
func (e *Engine) lookup(gone *ids.SessionID) protocol.SessionLookup {
	return func(id ids.SessionID) (protocol.SessionBinding, bool) {
		if e.ended[id] {
			*gone = id
			return protocol.SessionBinding{}, false
		}
		return e.cfg.Sessions(id)
	}
}

// refuse answers a verified request that never becomes active: it is
// reported as PhaseRefused, its reason is sent as one line of stderr and
// its result is Failed.
func (e *Engine) refuse(r *request, sphase SessionPhase, reason error) error {
	ev := Event{Session: r.session, Request: r.id, Phase: PhaseRefused, SessionPhase: sphase, Rule: -1,
		Argv: slices.Clone(r.verified.Request.CommandArgv), Outcome: protocol.OutcomeFailed, Err: reason,
		Binding: r.verified.Request.SessionBinding, Durable: true}
	// A refusal because the journal failed is not journaled: the write
	// could only fail too, and a failed write stops the audit log.
	if !errors.Is(reason, ErrAudit) {
		if err := e.journal(ev); err != nil {
			e.noisy.Error("journaling a refused escalation request", "request", r.id, "err", err)
		}
	}
	e.report(ev)
	werr := r.tell(reason)
	if werr == nil {
		werr = r.writeResult(protocol.OutcomeFailed, nil)
	}
	if werr != nil {
		return errors.Join(reason, werr)
	}
	return reason
}
func (e *Engine) handleCancellation(en mailbox.Entry) error {
	e.intake.Lock()
	var gone ids.SessionID
	c, err := e.cfg.Verifier.VerifyCancellation(&en.Record, e.lookup(&gone))
	e.intake.Unlock()
	if err != nil {
		if gone != (ids.SessionID{}) {
			return fmt.Errorf("verifying cancellation: %w (session %v): %w", ErrSessionEnded, gone, err)
		}
		return fmt.Errorf("verifying cancellation: %w", err)
	}
	if c.RequestID != en.Name.RequestID {
		return fmt.Errorf("%w: file names request %v, record %v", ErrNameMismatch, en.Name.RequestID, c.RequestID)
	}
	e.mu.Lock()
	r := e.sessions[c.SessionBinding.SessionID]
	e.mu.Unlock()
	if r == nil || r.id != c.RequestID {
		return fmt.Errorf("cancelling request %v: %w in session %v", c.RequestID, ErrNoRequest, c.SessionBinding.SessionID)
	}
	if !r.cancelWith(ErrCancelled) {
		return fmt.Errorf("cancelling request %v: %w: it has already ended", c.RequestID, ErrNoRequest)
	}
	return nil
}

func (e *Engine) handleAck(en mailbox.Entry) error {
	e.mu.Lock()
	r := e.requests[en.Name.RequestID]
	e.mu.Unlock()
	if r == nil {
		return fmt.Errorf("acknowledgment of request %v: %w", en.Name.RequestID, ErrNoRequest)
	}
	ack, err := e.cfg.Verifier.VerifyResultAck(&en.Record, &r.pending)
	if err != nil {
		return fmt.Errorf("verifying acknowledgment: %w", err)
	}
	return r.acknowledge(ack.HighestContiguousSequence)
}

// journal makes ev durable through Config.Journal.
func (e *Engine) journal(ev Event) error {
	if e.cfg.Journal == nil {
		return nil
	}
	return e.cfg.Journal(ev)
}

// report passes ev to Config.OnEvent and logs it; refusals go to the
// noisy log.
func (e *Engine) report(ev Event) {
	if e.cfg.OnEvent != nil {
		e.cfg.OnEvent(ev)
	}
	attrs := []any{"session", ev.Session, "request", ev.Request, "phase", ev.Phase}
	if ev.Source != SourceNone {
		attrs = append(attrs, "source", ev.Source)
	}
	if ev.Err != nil {
		attrs = append(attrs, "reason", ev.Err)
	}
	log := e.log
	if ev.Phase == PhaseRefused {
		log = e.noisy
	}
	log.Info("escalation request", attrs...)
}

// release clears the session's active request: DeliverResult.
func (e *Engine) release(r *request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sessions[r.session] == r {
		delete(e.sessions, r.session)
	}
	delete(e.requests, r.id)
}
