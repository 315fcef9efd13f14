package coordinator

import (
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"

	"lazaret.dev/pkg/domainstore"
	"lazaret.dev/pkg/escalation"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/paths"
	"lazaret.dev/pkg/trace"
)

// tracer records the generation's protocol events (pkg/trace) when
// $LAZARET_TRACE_DIR asks for it: each model action at the point where
// the implementation takes it. It keeps what it recorded, so that each
// event is one the model can take: a session is disconnected once, the
// escalation path of a request ends with its session, and after a failure
// the release steps are recorded as the model's recovery.
type tracer struct {
	rec *trace.Recorder // nil: recording is off
	log *slog.Logger

	mu      sync.Mutex
	gen     string
	starter string // the session that started the generation
	started bool   // StartNewDomain recorded
	// registered sessions, and those recorded disconnected since.
	registered map[string]bool
	gone       map[string]bool
	failed     bool // FailDomain or a HardLose recorded
	supervisor bool // StartRuntimeSupervisor recorded
	sandbox    bool // StartSandbox recorded
	requests   map[ids.RequestID]*tracedRequest
	// rules reports whether a configured rule admits argv.
	rules func(argv []string) bool
}

// tracedRequest is what the tracer recorded of one escalation request.
type tracedRequest struct {
	session   string
	received  bool
	phase     escalation.Phase
	sphase    escalation.SessionPhase
	requested []string
}

// openTracer opens the Domain's trace when env names a trace directory;
// otherwise the tracer records nothing.
func openTracer(env paths.Environment, domain ids.DomainID, log *slog.Logger) (*tracer, error) {
	t := &tracer{log: log, registered: map[string]bool{}, gone: map[string]bool{}, requests: map[ids.RequestID]*tracedRequest{}}
	dir, _ := env.LookupEnv(trace.EnvDir)
	if dir == "" {
		return t, nil
	}
	rec, err := trace.Open(trace.Path(dir, domain.String()))
	if err != nil {
		return nil, fmt.Errorf("$%s: %w", trace.EnvDir, err)
	}
	t.rec = rec
	return t, nil
}

func (t *tracer) close() {
	if t.on() {
		t.rec.Close()
	}
}

// on reports whether events are recorded.
func (t *tracer) on() bool { return t != nil && t.rec != nil }

// record appends one event; t.mu is held.
func (t *tracer) record(action, session, request string, facts ...string) {
	if t.rec == nil {
		return
	}
	ev := trace.Event{Action: action, Session: session, Request: request}
	if len(facts) > 0 || t.gen != "" {
		ev.Facts = map[string]string{}
		if t.gen != "" {
			ev.Facts[trace.FactGeneration] = t.gen
		}
		for i := 0; i+1 < len(facts); i += 2 {
			ev.Facts[facts[i]] = facts[i+1]
		}
	}
	if err := t.rec.Record(ev); err != nil {
		t.log.Warn("recording the protocol trace", "err", err.Error())
	}
}

// domain records a Domain action.
func (t *tracer) domain(action string) {
	if !t.on() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.record(action, "", "")
}

// recovering records the start of the recovery of generation gen, found
// in phase from, by a coordinator that did not run it.
func (t *tracer) recovering(gen ids.GenerationID, from domainstore.DomainPhase) {
	if !t.on() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gen = gen.String()
	t.record("BeginRecovery", "", "", trace.FactFrom, from.String())
}

// recovered records the release of role by recovery: the model names the
// sandbox, the network and the State Anchor.
func (t *tracer) recovered(role domainstore.Role) {
	action := map[domainstore.Role]string{
		domainstore.RoleSandbox:     "RecoverSandbox",
		domainstore.RoleNetwork:     "RecoverSidecar",
		domainstore.RoleStateAnchor: "RecoverStateAnchor",
	}[role]
	if action != "" {
		t.domain(action)
	}
}

// begin records StartNewDomain for the generation's starter: the session
// whose CLI took the Domain lock and spawned this coordinator, or a
// stand-in when the coordinator was started without one.
func (t *tracer) begin(gen ids.GenerationID, starter string) {
	if !t.on() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gen = gen.String()
	t.starter = starter
	if t.starter == "" {
		t.starter = "starter-" + t.gen
	}
	t.started = true
	t.record("StartNewDomain", t.starter, "")
}

// supervisorStarted and sandboxStarted record the Sandbox step's
// acquisitions: the Runtime Supervisor committed (its child's causal edge
// is armed before the child runs anything), and the container running.
func (t *tracer) supervisorStarted() {
	if !t.on() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.supervisor = true
	t.record("StartRuntimeSupervisor", "", "")
	t.record("ArmRuntimeCausalEdge", "", "")
}

func (t *tracer) sandboxStarted(id ids.SandboxID) {
	if !t.on() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sandbox = true
	t.record("StartSandbox", "", "", trace.FactSandbox, id.String())
}

// registered records a session's registration: its CLI connected
// (AdvanceWaitingSession for the starter, StartReadySession for any
// other) and registered.
func (t *tracer) register(session, cli, anchor string) {
	if !t.on() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.failed || t.registered[session] {
		return
	}
	if session == t.starter {
		t.record("AdvanceWaitingSession", session, "")
	} else {
		t.record("StartReadySession", session, "")
	}
	t.registered[session] = true
	t.record("RegisterSession", session, "", trace.FactCLI, cli, trace.FactAnchor, anchor)
}

// disconnect records that a registered session ended.
func (t *tracer) disconnect(session string) {
	if !t.on() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.disconnectLocked(session)
}

func (t *tracer) disconnectLocked(session string) {
	if t.failed || t.gone[session] || !t.registered[session] && session != t.starter {
		return
	}
	t.gone[session] = true
	t.record("DisconnectSession", session, "")
}

// beginTeardown records every session still there as disconnected (the
// starter too, when it never registered), then BeginTeardown.
func (t *tracer) beginTeardown() {
	if !t.on() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.started {
		t.disconnectLocked(t.starter)
	}
	var open []string
	for s := range t.registered {
		open = append(open, s)
	}
	slices.Sort(open)
	for _, s := range open {
		t.disconnectLocked(s)
	}
	t.record("BeginTeardown", "", "")
}

// runtimeLost records the loss of the sandbox runtime: the Runtime
// Supervisor (it ended without reporting its child's exit) or the
// attached runsc. A loss before the model's process exists fails the
// Domain instead.
func (t *tracer) runtimeLost(supervisorDied bool) {
	if !t.on() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.failed {
		return
	}
	t.failed = true
	switch {
	case supervisorDied && t.supervisor:
		t.record("HardLoseRuntimeSupervisor", "", "")
	case !supervisorDied && t.sandbox:
		t.record("HardLoseAttachedRunsc", "", "")
	default:
		t.record("FailDomain", "", "")
	}
}

// fail records FailDomain unless a loss was recorded, then BeginRecovery:
// this coordinator releases what it holds as the model's recovery.
func (t *tracer) fail() {
	if !t.on() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.failed {
		t.failed = true
		t.record("FailDomain", "", "")
	}
	t.record("BeginRecovery", "", "")
}

// stepDone records the model action a completed step is: the State
// Anchor mounted, the trust anchor created, and the network sidecar's
// readiness proven (or no network to enforce), which makes the model's
// sidecar Ready. The other steps record their actions where they take
// effect.
func (t *tracer) stepDone(step Step) {
	switch step {
	case StepAnchor:
		t.domain("MountStateAnchor")
	case StepTrust:
		t.domain("CreateTrustAnchor")
	case StepNetwork:
		t.domain("StartSidecar")
	}
}

// released records the release of a start step: StopSandbox, StopSidecar
// and UnmountStateAnchor in a teardown, the Recover actions after a
// failure.
func (t *tracer) released(step Step) {
	if !t.on() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var teardown, recovery string
	switch step {
	case StepSandbox:
		teardown, recovery = "StopSandbox", "RecoverSandbox"
	case StepNetwork:
		teardown, recovery = "StopSidecar", "RecoverSidecar"
	case StepAnchor:
		teardown, recovery = "UnmountStateAnchor", "RecoverStateAnchor"
	default:
		return
	}
	if t.failed {
		t.record(recovery, "", "")
	} else {
		t.record(teardown, "", "")
	}
}

// finishRecovery records the end of a recovery of an earlier generation.
func (t *tracer) finishRecovery() { t.domain("FinishRecovery") }

// ended records FinishTeardown, or FinishRecovery after a failure.
func (t *tracer) ended() {
	if !t.on() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.failed {
		t.record("FinishRecovery", "", "")
	} else {
		t.record("FinishTeardown", "", "")
	}
}

// escalation records the model action behind one transition of the
// escalation engine. The engine reports every change of a request's or
// its session's phase; the model's action is told from what changed.
func (t *tracer) escalation(ev escalation.Event) {
	if !t.on() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if ev.Phase == escalation.PhaseRefused {
		return // never received: the session had a request already
	}
	session := ev.Session.String()
	req := ev.Request.String()
	tr := t.requests[ev.Request]
	if tr == nil {
		tr = &tracedRequest{session: session, requested: slices.Clone(ev.Argv)}
		t.requests[ev.Request] = tr
	}
	prev, prevS := tr.phase, tr.sphase
	tr.phase, tr.sphase = ev.Phase, ev.SessionPhase
	// After its session ended or the Domain failed, the model has already
	// cancelled or failed the request: the engine's own ending of it is
	// no protocol event. Anything else it did then would be, and is
	// recorded so that the check refuses it.
	over := t.failed || t.gone[session]
	switch {
	case ev.Phase == escalation.PhaseVerified && prev == "":
		if over || !t.registered[session] {
			return // not received in the model's sense
		}
		tr.received = true
		b := ev.Binding
		t.record("ReceiveEscalation", session, req,
			trace.FactSandbox, b.GenerationIdentity.SandboxID.String(),
			trace.FactCLI, b.CLIID.String(),
			trace.FactAnchor, anchorDigest(b.SessionAnchorPublicKey).String(),
			trace.FactShell, strconv.FormatBool(escalation.CommandRequiresShell(ev.Argv)),
			trace.FactRule, strconv.FormatBool(t.ruleAdmits(ev.Argv)))
	case !tr.received && !(ev.Phase == escalation.PhaseApproved || ev.Phase == escalation.PhaseExecuting):
		// The rest of a request never received ends quietly.
	case ev.Phase == escalation.PhaseAwaitingApproval && prev != escalation.PhaseAwaitingApproval:
		t.recordUnlessOver(over, "QueuePrompt", session, req)
	case ev.Phase == escalation.PhaseAwaitingApproval && ev.SessionPhase == escalation.SessionPrompting && prevS != escalation.SessionPrompting:
		t.recordUnlessOver(over, "BeginPrompt", session, req)
	case ev.Phase == escalation.PhaseAwaitingApproval && ev.Source == escalation.SourceDeveloper && ev.Decider != nil:
		// A denial: the phase moves to DenialPending next.
		t.recordUnlessOver(over, "DeveloperDeny", session, req, t.deciderFacts(ev)...)
	case ev.Phase == escalation.PhaseApproved && prev != escalation.PhaseApproved:
		if ev.Source == escalation.SourceAutoRule {
			t.record("AutoApprove", session, req)
			break
		}
		facts := append(t.deciderFacts(ev), trace.FactEdited, strconv.FormatBool(!slices.Equal(ev.Argv, tr.requested)))
		t.record("DeveloperApprove", session, req, facts...)
	case ev.Phase == escalation.PhaseExecuting && prev != escalation.PhaseExecuting:
		t.record("StartHostExecution", session, req)
	case ev.Phase == prev:
		// Only the session's phase or the reason changed: part of the
		// action that comes next (a prompt that ended unanswered).
	case ev.Phase == escalation.PhaseCompletionPending:
		t.recordUnlessOver(over, "CompleteHostExecution", session, req)
	case ev.Phase == escalation.PhaseFailurePending:
		t.recordUnlessOver(over, "FailHostExecution", session, req)
	case ev.Phase == escalation.PhaseTimeoutPending:
		t.recordUnlessOver(over, "TimeoutRequest", session, req)
	case ev.Phase == escalation.PhaseCancellationPending:
		t.recordUnlessOver(over, "CancelRequest", session, req)
	case ev.Phase == escalation.PhaseDenialPending:
		// Recorded as DeveloperDeny.
	case ev.Phase == escalation.PhaseCompleted, ev.Phase == escalation.PhaseDenied, ev.Phase == escalation.PhaseTimedOut,
		ev.Phase == escalation.PhaseCancelled, ev.Phase == escalation.PhaseFailed:
		// The request's last event: nothing of it is kept.
		delete(t.requests, ev.Request)
		t.recordUnlessOver(over, "DeliverResult", session, req)
	}
}

func (t *tracer) recordUnlessOver(over bool, action, session, request string, facts ...string) {
	if !over {
		t.record(action, session, request, facts...)
	}
}

func (t *tracer) deciderFacts(ev escalation.Event) []string {
	d := ev.Decider
	return []string{trace.FactCLI, d.CLIID.String(), trace.FactAnchor, anchorDigest(d.SessionAnchorPublicKey).String()}
}

// ruleAdmits is set by the generation: whether a configured rule admits
// argv (the model's AutoRuleMatches).
func (t *tracer) ruleAdmits(argv []string) bool {
	if t.rules == nil {
		return false
	}
	return t.rules(argv)
}
