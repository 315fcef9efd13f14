package escalation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/mailbox"
	"lazaret.dev/pkg/protocol"
)

// request is one verified request from ReceiveEscalation to DeliverResult.
// Its goroutine (run) owns the lifecycle; mu guards what other goroutines
// read or signal: phase, cancellation and acknowledgments.
type request struct {
	e         *Engine
	id        ids.RequestID
	session   ids.SessionID
	verified  protocol.VerifiedRequest
	pending   protocol.PendingRequest
	collector *protocol.ResultCollector
	ctx       context.Context
	cancel    context.CancelCauseFunc
	ackCh     chan struct{}
	delivered chan struct{} // closed by deliver
	gone      chan struct{} // closed when the session ends (EndSession)
	goneOnce  sync.Once

	mu      sync.Mutex
	phase   Phase
	decider *protocol.SessionBinding // the verified decision's binding
	sphase  SessionPhase
	source  Source
	rule    int
	argv    []string
	ended   bool   // a pending or terminal phase: no more cancellation
	sent    uint64 // chunks written
	acked   uint64 // chunks acknowledged: highest contiguous sequence + 1
	written bool   // the result is in the inbox
	// delivering is set by the first deliver; delivered is closed when
	// it has reported the terminal phase.
	delivering bool
	exitCode   *uint8
	outcome    protocol.EscalationOutcome
	auditErr   error // the first transition Config.Journal refused
}

func newRequest(e *Engine, vr protocol.VerifiedRequest) *request {
	ctx, cancel := context.WithCancelCause(e.ctx)
	return &request{
		e: e, id: vr.Request.RequestID, session: vr.Request.SessionBinding.SessionID,
		verified: vr, pending: vr.Pending(), collector: protocol.NewResultCollector(vr.Pending()),
		ctx: ctx, cancel: cancel, ackCh: make(chan struct{}, 1), delivered: make(chan struct{}), gone: make(chan struct{}),
		sphase: SessionAttached, rule: -1, argv: slices.Clone(vr.Request.CommandArgv),
	}
}

// cancelWith cancels a live request; it reports false once the request
// has reached a pending or terminal phase.
func (r *request) cancelWith(cause error) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return false
	}
	r.cancel(cause)
	return true
}

func (r *request) sessionPhase() SessionPhase {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sphase
}

// event applies change under the lock and returns the new state.
func (r *request) event(change func(), reason error) Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	change()
	return Event{
		Session: r.session, Request: r.id, Phase: r.phase, SessionPhase: r.sphase,
		Source: r.source, Rule: r.rule, Argv: slices.Clone(r.argv),
		Outcome: r.outcome, ExitCode: r.exitCode, Err: reason,
		Binding: r.verified.Request.SessionBinding, Decider: r.decider,
	}
}

// transition applies change, journals the new state and reports it. A
// journal error is kept: the request then never starts its command.
func (r *request) transition(reason error, change func()) { r.record(false, reason, change) }

// commit is transition for the transitions after which something leaves
// the engine (Event.Durable): the journal makes the record, and every one
// before it, durable before the engine goes on.
func (r *request) commit(reason error, change func()) { r.record(true, reason, change) }

func (r *request) record(durable bool, reason error, change func()) {
	ev := r.event(change, reason)
	ev.Durable = durable
	if err := r.e.journal(ev); err != nil {
		r.mu.Lock()
		if r.auditErr == nil {
			r.auditErr = fmt.Errorf("%w: %w", ErrAudit, err)
		}
		r.mu.Unlock()
	}
	r.e.report(ev)
}

// unaudited returns the journal error that keeps the request from running
// its command, or nil.
func (r *request) unaudited() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.auditErr
}

// endSession cancels the request because its session ended.
func (r *request) endSession() {
	r.cancelWith(fmt.Errorf("%w: %w", ErrCancelled, ErrSessionEnded))
	r.goneOnce.Do(func() { close(r.gone) })
}

// tell sends reason to the guest as one line of stderr, so that it can
// report why its request did not run.
func (r *request) tell(reason error) error {
	msg := []byte("lazaret: the host did not run the command: " + reason.Error() + "\n")
	if len(msg) > protocol.MaxChunkBytes {
		msg = append(msg[:protocol.MaxChunkBytes-1], '\n')
	}
	return r.sendChunk(r.e.ctx, protocol.StreamStderr, msg)
}

// outcomeOf maps the cause of an ended context to an outcome.
func outcomeOf(cause error) protocol.EscalationOutcome {
	if errors.Is(cause, ErrTimedOut) {
		return protocol.OutcomeTimedOut
	}
	return protocol.OutcomeCancelled
}

func (r *request) run() {
	defer r.e.wg.Done()
	defer r.cancel(nil)
	outcome, code, reason := r.approveAndExecute()
	r.finish(outcome, code, reason)
}

// approveAndExecute runs AutoApprove or QueuePrompt, BeginPrompt and the
// developer's decision, then the host execution.
func (r *request) approveAndExecute() (protocol.EscalationOutcome, *uint8, error) {
	argv := r.verified.Request.CommandArgv
	d := Decide(argv, r.e.cfg.Rules)
	if !d.Auto {
		r.transition(d.Why, func() { r.phase = PhaseAwaitingApproval })
		approved, outcome, reason := r.prompt()
		if approved == nil {
			return outcome, nil, reason
		}
		argv = approved
	} else {
		if err := r.ctx.Err(); err != nil {
			return outcomeOf(context.Cause(r.ctx)), nil, context.Cause(r.ctx)
		}
		r.transition(nil, func() {
			r.phase, r.source, r.rule = PhaseApproved, SourceAutoRule, d.Rule
		})
	}
	return r.execute(argv)
}

// prompt asks the Prompter and verifies the decision. It returns the
// approved argv, or nil and the outcome and reason.
func (r *request) prompt() ([]string, protocol.EscalationOutcome, error) {
	cfg := &r.e.cfg
	pctx, cancel := context.WithTimeoutCause(r.ctx, cfg.Timeouts.Approval, ErrTimedOut)
	defer cancel()
	ended := func() ([]string, protocol.EscalationOutcome, error) {
		cause := context.Cause(pctx)
		r.transition(cause, func() { r.sphase = SessionAttached })
		return nil, outcomeOf(cause), cause
	}
	if pctx.Err() != nil {
		return ended()
	}
	if err := r.unaudited(); err != nil {
		// Nobody is asked to approve a command that could not run.
		return nil, protocol.OutcomeCancelled, err
	}
	// The prompt leaves the engine: its records are durable first.
	r.commit(nil, func() { r.sphase = SessionPrompting })
	req := &r.verified.Request
	tp := protocol.TerminalPrompt{
		SessionID:     r.session,
		RequestID:     r.id,
		RequestSHA256: r.pending.RequestSHA256,
		AgentProfile:  req.SessionBinding.GenerationIdentity.AgentProfile,
		CommandArgv:   slices.Clone(req.CommandArgv),
		Justification: req.Justification,
	}
	type answer struct {
		rec protocol.SignedProtocolRecord
		err error
	}
	answers := make(chan answer, 1)
	go func() {
		rec, err := cfg.Prompter.Prompt(pctx, tp)
		answers <- answer{rec, err}
	}()
	select {
	case <-pctx.Done():
		return ended()
	case a := <-answers:
		if pctx.Err() != nil {
			return ended()
		}
		if a.err != nil {
			reason := fmt.Errorf("%w: %w", ErrPrompt, a.err)
			r.transition(reason, func() { r.sphase = SessionAttached })
			return nil, protocol.OutcomeCancelled, reason
		}
		dec, err := cfg.Verifier.VerifyDecision(&a.rec, &r.pending)
		if err != nil {
			// An unverifiable decision is no decision: the request keeps
			// waiting until it times out or is cancelled.
			reason := fmt.Errorf("%w: %w", ErrDecision, err)
			r.e.log.Warn("discarding developer decision", "request", r.id, "reason", reason)
			r.transition(reason, func() {})
			<-pctx.Done()
			return ended()
		}
		decider := dec.SessionBinding
		if dec.Decision == protocol.DecisionDeny {
			r.transition(nil, func() {
				r.decider = &decider
				r.source = SourceDeveloper
				r.sphase = SessionAttached
			})
			return nil, protocol.OutcomeDenied, nil
		}
		approved := slices.Clone(dec.ApprovedCommandArgv)
		r.transition(nil, func() {
			r.decider = &decider
			r.phase, r.source, r.argv = PhaseApproved, SourceDeveloper, slices.Clone(approved)
		})
		return approved, 0, nil
	}
}

// deliveredPhase is the model's DeliveredResultPhase.
var deliveredPhase = map[Phase]Phase{
	PhaseCompletionPending:   PhaseCompleted,
	PhaseDenialPending:       PhaseDenied,
	PhaseTimeoutPending:      PhaseTimedOut,
	PhaseCancellationPending: PhaseCancelled,
	PhaseFailurePending:      PhaseFailed,
}

var pendingPhases = map[protocol.EscalationOutcome][2]Phase{
	protocol.OutcomeCompleted: {PhaseCompletionPending, PhaseCompleted},
	protocol.OutcomeDenied:    {PhaseDenialPending, PhaseDenied},
	protocol.OutcomeTimedOut:  {PhaseTimeoutPending, PhaseTimedOut},
	protocol.OutcomeCancelled: {PhaseCancellationPending, PhaseCancelled},
	protocol.OutcomeFailed:    {PhaseFailurePending, PhaseFailed},
}

// finish enters the pending phase (durable before the result is
// written), writes the result, and waits until the result is delivered:
// by the guest's final acknowledgment, which the outbox loop delivers at
// once (acknowledge), or by the ack timeout, the session's end or the
// engine's close, which finish delivers itself.
func (r *request) finish(outcome protocol.EscalationOutcome, code *uint8, reason error) {
	phases := pendingPhases[outcome]
	r.commit(reason, func() {
		r.phase, r.sphase, r.ended, r.outcome, r.exitCode = phases[0], SessionAttached, true, outcome, code
	})
	if errors.Is(reason, ErrAudit) {
		if err := r.tell(reason); err != nil {
			r.e.log.Error("writing the reason of an escalation refusal", "request", r.id, "err", err)
		}
	}
	if err := r.writeResult(outcome, code); err != nil {
		r.e.log.Error("writing escalation result", "request", r.id, "err", err)
	}
	timer := time.NewTimer(r.e.cfg.Timeouts.Ack)
	defer timer.Stop()
	select {
	case <-r.delivered:
	case <-timer.C:
		r.deliver(fmt.Errorf("%w: the guest did not acknowledge the result within %v", ErrUnacknowledged, r.e.cfg.Timeouts.Ack))
	case <-r.e.ctx.Done():
		r.deliver(fmt.Errorf("%w: the engine closed", ErrUnacknowledged))
	case <-r.gone:
		r.deliver(fmt.Errorf("%w: %w", ErrUnacknowledged, ErrSessionEnded))
	}
}

// deliver is DeliverResult, once: it clears the session's active request
// and reports the terminal phase, then lets finish return. It runs in the
// outbox loop for the final acknowledgment, so that the next request of
// the session, which the guest can only send after that acknowledgment,
// finds the session free; and in finish otherwise.
func (r *request) deliver(reason error) {
	r.mu.Lock()
	if r.delivering {
		r.mu.Unlock()
		<-r.delivered
		return
	}
	r.delivering = true
	terminal := deliveredPhase[r.phase]
	r.mu.Unlock()
	r.e.release(r)
	r.transition(reason, func() { r.phase = terminal })
	close(r.delivered)
}

// writeResult signs the MailboxResult over the chunks sent and writes it.
func (r *request) writeResult(outcome protocol.EscalationOutcome, code *uint8) error {
	if outcome != protocol.OutcomeCompleted {
		code = nil
	}
	stdout, stderr := r.collector.Digests()
	r.mu.Lock()
	count := r.sent
	r.mu.Unlock()
	res := protocol.MailboxResult{
		SessionBinding:          r.pending.SessionBinding,
		RequestID:               r.id,
		RequestSHA256:           r.pending.RequestSHA256,
		CoordinatorCredentialID: r.e.cfg.Verifier.Coordinator().CredentialID,
		Outcome:                 outcome,
		ExitCode:                code,
		ChunkCount:              uint32(count),
		StdoutSHA256:            stdout,
		StderrSHA256:            stderr,
	}
	// Held across the write: the guest's final acknowledgment can arrive
	// as soon as the file is there, and must find the result written, or
	// it would not count as final and the request would wait for the
	// acknowledgment timeout.
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.e.write(mailbox.Name{RequestID: r.id, Kind: mailbox.KindResult}, &res); err != nil {
		return err
	}
	r.written = true
	return nil
}

// acknowledge records a verified MailboxResultAck.
func (r *request) acknowledge(highest *uint32) error {
	var n uint64
	if highest != nil {
		n = uint64(*highest) + 1
	}
	r.mu.Lock()
	if n > r.sent {
		sent := r.sent
		r.mu.Unlock()
		return fmt.Errorf("acknowledgment of request %v covers %d chunks, %d were sent: %w", r.id, n, sent, protocol.ErrSequence)
	}
	if n > r.acked {
		r.acked = n
	}
	final := r.written && r.acked == r.sent
	r.mu.Unlock()
	if final {
		r.deliver(nil)
		return nil
	}
	select {
	case r.ackCh <- struct{}{}:
	default:
	}
	return nil
}

// sendChunk waits for room in the acknowledgment window, then signs and
// writes the next chunk.
func (r *request) sendChunk(ctx context.Context, stream protocol.ResultStream, b []byte) error {
	for {
		r.mu.Lock()
		room := r.sent-r.acked < uint64(r.e.cfg.Window)
		seq := r.sent
		r.mu.Unlock()
		if room {
			if seq > uint64(^uint32(0)) {
				return fmt.Errorf("result of request %v exceeds %d chunks", r.id, uint64(^uint32(0))+1)
			}
			c := protocol.MailboxResultChunk{
				SessionBinding:          r.pending.SessionBinding,
				RequestID:               r.id,
				RequestSHA256:           r.pending.RequestSHA256,
				CoordinatorCredentialID: r.e.cfg.Verifier.Coordinator().CredentialID,
				Sequence:                uint32(seq),
				Stream:                  stream,
				Bytes:                   b,
			}
			if err := r.collector.Add(&c); err != nil {
				return err
			}
			if err := r.e.write(mailbox.Name{RequestID: r.id, Kind: mailbox.KindChunk, Sequence: uint32(seq)}, &c); err != nil {
				return err
			}
			r.mu.Lock()
			r.sent++
			r.mu.Unlock()
			if r.e.cfg.OnOutput != nil {
				r.e.cfg.OnOutput(r.session, r.id, stream, b)
			}
			return nil
		}
		select {
		case <-r.ackCh:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// write signs rec and writes it to the inbox. A file the sandbox planted
// under the same name is removed first: the host's record is the one
// that counts.
func (e *Engine) write(n mailbox.Name, rec protocol.SignedRecord) error {
	signed, err := protocol.Sign(e.cfg.CoordinatorKey, rec)
	if err != nil {
		return fmt.Errorf("signing %s: %w", n, err)
	}
	err = e.cfg.Inbox.Write(n, &signed)
	if errors.Is(err, mailbox.ErrExists) {
		e.noisy.Warn("replacing a planted mailbox file", "file", fmt.Sprintf("%q", n.String()))
		if err = e.cfg.Inbox.Remove(n.String()); err == nil {
			err = e.cfg.Inbox.Write(n, &signed)
		}
	}
	return err
}
